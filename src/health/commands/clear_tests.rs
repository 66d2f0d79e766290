use super::*;
use crate::health::values::fault::{Action, Fault};

const AT: &str = "2026-01-02T03:04:05Z";

fn fault(gpu: Option<u32>, fault: Fault) -> RecordedFault {
    let uuid = gpu.map(|g| format!("GPU-{g}"));
    RecordedFault { gpu, uuid, action: fault.action(), fault, recurrences: None }
}

/// The condition a daemon wrote for `faults`.
fn on_node(faults: Vec<RecordedFault>) -> Existing {
    let record = Record::new("boot-1", faults.into_iter());
    let mut t = Tracker::recover(
        "boot-1",
        &Existing {
            status: Status::False,
            reason: String::new(),
            message: String::new(),
            record: Some(record.to_annotation()),
        },
    )
    .0;
    t.nvml(Ok(2));
    let v = t.verdict();
    Existing {
        status: v.status,
        reason: v.reason,
        message: v.message,
        record: v.record.map(|r| r.to_annotation()),
    }
}

fn two_gpus() -> Existing {
    on_node(vec![
        fault(Some(0), Fault::Xid { xid: 79, mig: None, action: Some(Action::Reboot), repeated: None }),
        fault(Some(1), Fault::RemappedRowsPending),
        fault(None, Fault::Missing { nvml: 1, pci: 2 }),
    ])
}

fn written(d: Result<Decision, ClearError>) -> (Verdict, Vec<String>) {
    match d.unwrap() {
        Decision::Write { verdict, cleared } => (verdict, cleared),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_node_clear_is_true_cleared_by_admin_without_a_record() {
    let (v, cleared) = written(decide(Some(&two_gpus()), &[], "gpu-a", "GPUHealthy", AT));
    assert_eq!(
        v,
        Verdict {
            status: Status::True,
            reason: "ClearedByAdmin".into(),
            message: format!("cleared by hand at {AT}"),
            record: None
        }
    );
    assert_eq!(cleared.len(), 3, "{cleared:?}");
    assert_eq!(cleared[0], "GPU 0 (GPU-0): XidCriticalError, Xid 79, action: reboot the node");
    // A healthy node has nothing to clear; a node without the condition is named.
    let healthy = Existing {
        status: Status::True,
        reason: "GpusHealthy".into(),
        message: "2 GPUs healthy".into(),
        record: None,
    };
    assert_eq!(
        decide(Some(&healthy), &[], "gpu-a", "GPUHealthy", AT).unwrap(),
        Decision::Nothing("GPUHealthy on Node gpu-a is True (GpusHealthy): no GPU fault to clear".into())
    );
    let e = decide(None, &[], "gpu-a", "GPUHealthy", AT).unwrap_err();
    assert_eq!(
        e.to_string(),
        "Node gpu-a has no GPUHealthy condition: no GPU fault to clear (is --health-condition-type the daemon's?)"
    );
}

#[test]
fn a_gpu_clear_keeps_the_other_faults_and_says_who() {
    let (v, cleared) = written(decide(Some(&two_gpus()), &[Gpu::Index(0)], "gpu-a", "GPUHealthy", AT));
    assert_eq!((v.status, v.reason.as_str()), (Status::False, "ClearedByAdmin"));
    assert_eq!(
        v.message,
        format!(
            "GPU 0 (GPU-0) cleared by hand at {AT}; GPU 1 (GPU-1): RemappedRowsPending, row remapping pending, \
             action: reset the GPU; node: GpuMissing, NVML sees 1 GPUs, the PCI bus has 2, action: reboot the node [boot boot-1]"
        )
    );
    let kept: Vec<Option<u32>> = v.record.unwrap().faults.iter().map(|f| f.gpu).collect();
    assert_eq!(kept, [Some(1), None]);
    assert_eq!(cleared, ["GPU 0 (GPU-0): XidCriticalError, Xid 79, action: reboot the node"]);
    // By UUID, both GPUs: only the node's fault stays.
    let both = [Gpu::Uuid("GPU-1".into()), Gpu::Index(0)];
    let (v, cleared) = written(decide(Some(&two_gpus()), &both, "gpu-a", "GPUHealthy", AT));
    assert_eq!(cleared.len(), 2);
    assert_eq!(v.record.unwrap().faults.len(), 1);
    assert!(
        v.message
            .starts_with(&format!("GPU 0 (GPU-0), GPU 1 (GPU-1) cleared by hand at {AT}; node: GpuMissing")),
        "{}",
        v.message
    );
    // The last GPU fault gone: True, no record.
    let one = on_node(vec![fault(Some(0), Fault::RemappedRowsPending)]);
    let (v, _) = written(decide(Some(&one), &[Gpu::Index(0)], "gpu-a", "GPUHealthy", AT));
    assert_eq!((v.status, v.record), (Status::True, None));
    assert_eq!(v.message, format!("GPU 0 (GPU-0) cleared by hand at {AT}"));
}

#[test]
fn a_gpu_without_a_fault_or_a_record_is_named() {
    let e =
        decide(Some(&two_gpus()), &[Gpu::Index(0), Gpu::Index(3)], "gpu-a", "GPUHealthy", AT).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no GPU fault recorded on Node gpu-a for GPU 3 (recorded: GPU 0 (GPU-0), GPU 1 (GPU-1))"
    );
    assert!(!e.is_bad_configuration());
    let old = Existing { record: None, ..two_gpus() };
    let e = decide(Some(&old), &[Gpu::Index(0)], "gpu-a", "GPUHealthy", AT).unwrap_err();
    assert!(
        e.to_string().starts_with("cannot clear single GPUs on Node gpu-a: its faults have no record"),
        "{e}"
    );
    let healthy = Existing { status: Status::True, record: None, ..two_gpus() };
    let e = decide(Some(&healthy), &[Gpu::Index(0)], "gpu-a", "GPUHealthy", AT).unwrap_err();
    assert!(e.to_string().ends_with("(recorded: none)"), "{e}");
}

#[test]
fn gpus_are_indexes_or_uuids_repeated_or_listed() {
    let given = ["0, GPU-abc".to_string(), "2".to_string()];
    assert_eq!(gpus(&given).unwrap(), [Gpu::Index(0), Gpu::Uuid("GPU-abc".into()), Gpu::Index(2)]);
    let e = gpus(&["zero".to_string()]).unwrap_err();
    assert_eq!(e.to_string(), "--gpu \"zero\" is not a GPU: use its index (0, 1, ...) or its UUID (GPU-...)");
    assert!(e.is_bad_configuration());
    assert!(node_name("gpu-a") && node_name("ip-10-0-0-1.ec2.internal"));
    assert!(!node_name("Gpu_A") && !node_name("") && !node_name("-a"));
}

#[test]
fn another_instances_manager_is_named_with_the_flags_that_name_it() {
    assert_eq!(instance_flags("nvlabel/gpu/nvlabel-a"), "give --instance nvlabel-a --namespace gpu");
    assert_eq!(instance_flags("nvlabel/0123456789abcdef"), "give the release's --instance and --namespace");
    let e = ClearError::OtherManager {
        node: "gpu-a".into(),
        other: "nvlabel/gpu/nv".into(),
        ours: "nvlabel".into(),
        hint: instance_flags("nvlabel/gpu/nv"),
    };
    assert_eq!(
        e.to_string(),
        "Node gpu-a's GPU health is written under field manager nvlabel/gpu/nv, not nvlabel: give --instance nv --namespace gpu, so that the clear replaces it"
    );
    assert!(e.is_bad_configuration());
}
