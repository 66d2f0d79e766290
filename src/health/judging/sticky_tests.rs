use super::*;
use crate::health::values::fault::Fault;
use crate::health::values::record::{BootId, Record};

#[test]
fn healthy_unknown_and_faulty_verdicts() {
    let mut t = Tracker::new("boot-a");
    t.nvml(Ok(2));
    assert_eq!(
        t.verdict(),
        Verdict {
            status: Status::True,
            reason: HEALTHY.into(),
            message: "2 GPUs healthy".into(),
            record: None
        }
    );
    t.nvml(Err("driver not loaded".into()));
    assert_eq!(t.verdict().status, Status::Unknown);
    assert_eq!(t.verdict().reason, UNAVAILABLE);
    assert!(t
        .record(
            &Found { gpu: Some(1), fault: Fault::Xid { xid: 79, mig: None, action: None, repeated: None } },
            Some("GPU-b"),
            |_| 0
        )
        .is_some());
    assert!(t
        .record(&Found { gpu: Some(0), fault: Fault::RetiredPagesPending }, Some("GPU-a"), |_| 0)
        .is_some());
    let v = t.verdict();
    assert_eq!(v.status, Status::False, "a known fault outranks NVML being unavailable");
    assert_eq!(v.reason, "XidCriticalError");
    assert_eq!(
        v.message,
        "GPU 0 (GPU-a): RetiredPagesPending, page retirement pending, action: reset the GPU; \
         GPU 1 (GPU-b): XidCriticalError, Xid 79, action: reboot the node [boot boot-a]"
    );
}

#[test]
fn faults_are_sticky_and_listed_once() {
    let mut t = Tracker::new("b");
    let xid = Found { gpu: Some(0), fault: Fault::Xid { xid: 48, mig: None, action: None, repeated: None } };
    assert!(t.record(&xid, Some("GPU-a"), |_| 0).is_some());
    assert!(t.record(&xid, Some("GPU-a"), |_| 0).is_none(), "seen again: not new");
    assert!(t
        .record(
            &Found { gpu: Some(0), fault: Fault::Xid { xid: 79, mig: None, action: None, repeated: None } },
            Some("GPU-a"),
            |_| 0
        )
        .is_some());
    t.nvml(Ok(1));
    assert_eq!(t.verdict().status, Status::False, "a pass without the fault does not clear it");
    assert_eq!(t.verdict().message.matches("; ").count(), 1);
}

/// The condition as nvlabel publishes `v`, read back from the Node.
fn on_node(v: &Verdict) -> Existing {
    Existing {
        status: v.status,
        reason: v.reason.clone(),
        message: v.message.clone(),
        record: v.record.as_ref().map(Record::to_annotation),
    }
}

#[test]
fn a_restart_recovers_the_faults_of_this_boot_only() {
    let mut t = Tracker::new("boot-a");
    t.record(&Found { gpu: Some(2), fault: Fault::RemappedRowsFailure }, Some("GPU-c"), |_| 0);
    t.record(
        &Found {
            gpu: Some(0),
            fault: Fault::Xid { xid: 94, mig: Some((1, 0)), action: None, repeated: None },
        },
        None,
        |_| 0,
    );
    t.record(&Found { gpu: None, fault: Fault::Missing { nvml: 3, pci: 4 } }, None, |_| 0);
    let v = t.verdict();
    let (back, cleared) = Tracker::recover("boot-a", &on_node(&v));
    assert_eq!(back.verdict(), v);
    assert!(cleared.is_empty(), "a restart in the same boot clears nothing");
    assert_eq!(on_node(&v).published(), v, "what was published is recognised: no write");
    let mut again = back.clone();
    assert!(again
        .record(
            &Found {
                gpu: Some(0),
                fault: Fault::Xid { xid: 94, mig: Some((1, 0)), action: None, repeated: None }
            },
            None,
            |_| 0
        )
        .is_none());
    assert!(again
        .record(&Found { gpu: Some(2), fault: Fault::RemappedRowsFailure }, Some("GPU-c"), |_| 0)
        .is_none());
    let (other, cleared) = Tracker::recover("boot-b", &on_node(&v));
    assert!(!other.faulty(), "another boot");
    assert_eq!(cleared, back.clone().new_boot("boot-b"), "the earlier boot's faults are named as cleared");
    let by_hand = Existing { status: Status::True, ..on_node(&v) };
    assert_eq!(
        Tracker::recover("boot-a", &by_hand),
        (Tracker::new("boot-a"), vec![]),
        "a person set it True"
    );
    assert_eq!(Tracker::recover("boot-b", &by_hand).1, Vec::<String>::new(), "nothing to clear");
    let foreign = Existing { message: "written by someone else".into(), record: None, ..on_node(&v) };
    assert_eq!(Tracker::recover("boot-a", &foreign), (Tracker::new("boot-a"), vec![]));
}

#[test]
fn a_new_wording_of_the_message_forgets_no_fault() {
    let mut t = Tracker::new("boot-a");
    t.record(
        &Found { gpu: Some(1), fault: Fault::Xid { xid: 79, mig: None, action: None, repeated: None } },
        Some("GPU-b"),
        |_| 0,
    );
    t.record(&Found { gpu: Some(0), fault: Fault::NvlinkInactive { link: 3 } }, Some("GPU-a"), |_| 0);
    let v = t.verdict();
    // Written by a version that words the message differently (or in another language).
    let reworded = Existing { message: "Zwei GPUs haben Fehler; siehe die Annotation".into(), ..on_node(&v) };
    let (back, _) = Tracker::recover("boot-a", &reworded);
    assert_eq!(back.verdict(), v, "every fault, worded as this version words it");
    assert_ne!(reworded.published(), v, "the new wording is written once");
}

#[test]
fn an_earlier_nvlabels_message_is_read_once_then_the_record_is_written() {
    // Exactly as nvlabel wrote it before the record existed.
    let old = Existing {
        status: Status::False,
        reason: "XidCriticalError".into(),
        message: "GPU 0 (GPU-a): RetiredPagesPending, page retirement pending, action: reset the GPU; \
                  GPU 1 (GPU-b): XidCriticalError, Xid 79, action: reboot the node [boot boot-a]"
            .into(),
        record: None,
    };
    let (back, _) = Tracker::recover("boot-a", &old);
    let v = back.verdict();
    assert_eq!(
        (v.status, v.reason.as_str(), v.message.as_str()),
        (Status::False, "XidCriticalError", old.message.as_str())
    );
    let record = v.record.clone().expect("the faults are recorded");
    assert_eq!(record.boot_id, "boot-a");
    assert_eq!(
        record.faults.iter().map(|f| Found { gpu: f.gpu, fault: f.fault.clone() }).collect::<Vec<_>>(),
        vec![
            Found { gpu: Some(0), fault: Fault::RetiredPagesPending },
            Found { gpu: Some(1), fault: Fault::Xid { xid: 79, mig: None, action: None, repeated: None } }
        ]
    );
    assert_ne!(old.published(), v, "the record is missing on the Node: the next write adds it");
    // A record this version cannot read: the message, as for an upgrade.
    let newer = Existing { record: Some(r#"{"version":9}"#.into()), ..old.clone() };
    assert_eq!(Tracker::recover("boot-a", &newer).0.verdict(), v);
    let v1 = r#"{"version":1,"bootId":"boot-a","faults":[{"gpu":0,"uuid":"GPU-a","kind":"GpuRecoveryActionRequired","action":"RebootNode","action":"RebootNode"}]}"#;
    let written_by_v1 = Existing { record: Some(v1.into()), ..old.clone() };
    let (kept, _) = Tracker::recover("boot-a", &written_by_v1);
    assert_eq!(kept.verdict().reason, "GpuRecoveryActionRequired", "the version 1 record is read");
    let v = kept.verdict();
    let as_v1 = Existing { message: v.message.clone(), reason: v.reason.clone(), ..written_by_v1 };
    assert_ne!(as_v1.published(), v, "the version 1 record is rewritten as version 2 at once");
    assert_eq!(on_node(&v).published(), v, "and then it is what was published");
    let (after_reboot, cleared) = Tracker::recover("boot-b", &old);
    assert!(!after_reboot.faulty());
    assert_eq!(
        cleared,
        [old.message.rsplit_once(" [boot ").unwrap().0],
        "the old message's faults are cleared"
    );
}

#[test]
fn a_restart_keeps_every_fault_kind_byte_for_byte() {
    let mut t = Tracker::new("boot-a");
    let kinds = crate::health::values::record::samples::every_fault();
    for (gpu, fault) in kinds.into_iter().enumerate() {
        let gpu =
            (!matches!(fault, Fault::Missing { .. } | Fault::BelowExpected { .. })).then_some(gpu as u32);
        t.record(&Found { gpu, fault }, gpu.map(|g| format!("GPU-{g}")).as_deref(), |_| 0);
    }
    let v = t.verdict();
    let (back, cleared) = Tracker::recover("boot-a", &on_node(&v));
    assert_eq!((back.verdict(), cleared), (v.clone(), vec![]));
    assert_eq!(on_node(&v).published(), v, "nothing to write after the restart");
}

#[test]
fn a_new_boot_clears_everything() {
    let mut t = Tracker::new("a");
    t.record(&Found { gpu: Some(0), fault: Fault::Lost }, None, |_| 0);
    assert_eq!(t.new_boot("b"), ["GPU 0: GpuLost, GPU is lost, action: reboot the node"]);
    assert!(!t.faulty());
    assert_eq!(t.boot_id().map(BootId::as_str), Some("b"));
    assert!(t.new_boot("c").is_empty());
}

#[test]
fn a_hung_call_is_unknown_below_any_fault_and_ends_when_it_returns() {
    let mut t = Tracker::new("a");
    t.nvml(Ok(2));
    t.unresponsive(Some("a call of the labelling pass has not returned since 2026-01-02T03:04:05Z".into()));
    let v = t.verdict();
    assert_eq!((v.status, v.reason.as_str()), (Status::Unknown, "NvmlUnresponsive"));
    assert_eq!(
        v.message,
        "NVML does not answer: a call of the labelling pass has not returned since 2026-01-02T03:04:05Z"
    );
    t.record(&Found { gpu: Some(1), fault: Fault::Inforom }, None, |_| 0);
    assert_eq!(t.verdict().status, Status::False, "a known fault says more than a hung call");
    t.new_boot("b");
    t.unresponsive(None);
    assert_eq!((t.verdict().status, t.verdict().reason.as_str()), (Status::True, "GpusHealthy"));
}

#[test]
fn forgetting_one_reason_keeps_the_others() {
    let mut t = Tracker::new("a");
    t.record(&Found { gpu: None, fault: Fault::BelowExpected { nvml: 7, expected: 8 } }, None, |_| 0);
    t.record(&Found { gpu: Some(0), fault: Fault::Lost }, None, |_| 0);
    let below = |f: &Fault| matches!(f, Fault::BelowExpected { .. });
    assert!(t.forget(below));
    assert!(!t.forget(below));
    assert_eq!(t.verdict().reason, "GpuLost");
}

#[test]
fn a_recovery_action_keeps_the_xid_that_started_it() {
    use crate::health::values::fault::Action;
    let mut t = Tracker::new("b");
    let after = |xid| Found { gpu: Some(0), fault: Fault::Recovery { action: Action::ResetGpu, xid } };
    let entry = t.record(&after(Some(109)), Some("GPU-a"), |_| 0).expect("new");
    assert_eq!(
        entry.text,
        "GPU 0 (GPU-a): GpuRecoveryActionRequired, the driver asks for a recovery action after Xid 109, action: reset the GPU"
    );
    // The next pass reads the same action, knowing of no Xid: the fault is the one it was.
    assert!(t.record(&after(None), Some("GPU-a"), |_| 0).is_none());
    assert!(t.record(&after(Some(31)), Some("GPU-a"), |_| 0).is_none(), "a later Xid started nothing");
    let v = t.verdict();
    assert!(v.message.contains("after Xid 109, action"), "{}", v.message);
    let record = v.record.unwrap().to_annotation();
    assert!(record.contains(r#""driverAction":"ResetGpu","xid":109,"action":"ResetGpu""#), "{record}");
}
