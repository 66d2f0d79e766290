use super::*;
use crate::health::admin::Shown;
use crate::health::record::Record;
use crate::health::rules::{Action, GpuReading, Remapped};
use crate::health::sticky::Status;
use std::sync::Mutex;

/// A judge that knows its (empty) record, on a Node that shows what `node` holds.
fn judge(node: &Arc<Mutex<Shown>>) -> Judge {
    let config = HealthConfig::for_tests(Default::default());
    let metrics = Arc::new(HealthMetrics::default());
    let mut j = Judge::new(&config, Session::new(), metrics, None).unwrap();
    let node = node.clone();
    j.admin = AdminClears::looking(move || node.lock().unwrap().clone());
    j.recover("boot", None);
    j.uuids = [(0, "GPU-0".to_string()), (1, "GPU-1".to_string())].into();
    j
}

/// A reading of two healthy GPUs, GPU 1's row remapping pending or not.
fn look(pending: bool) -> Look {
    let gpu = |index: u32, pending| GpuReading {
        index,
        uuid: Some(format!("GPU-{index}")),
        remapped: Some(Remapped { pending, ..Remapped::default() }),
        ..GpuReading::default()
    };
    let reading = Reading { gpus: vec![gpu(0, false), gpu(1, pending)], pci_gpus: Some(2) };
    Look { reading: Some(Ok(reading)), stall: None, warnings: Vec::new() }
}

fn xid(gpu: u32, xid: u64) -> Found {
    (Some(gpu), Fault::Xid { xid, mig: None, action: Some(Action::Reboot), repeated: None })
}

/// Each fault of a list as `GPU: reason`.
fn named<'a>(faults: impl IntoIterator<Item = &'a Entry>) -> Vec<String> {
    faults
        .into_iter()
        .map(|e| format!("{}: {}", e.recorded.gpu.unwrap(), e.recorded.fault.describe()))
        .collect()
}

/// The faults the verdict records, as [`named`] names them.
fn recorded(r: &Report) -> Vec<String> {
    let record = r.verdict.as_ref().and_then(|v| v.record.clone());
    let faults = record.map(|r| r.faults).unwrap_or_default();
    faults.into_iter().map(|f| format!("{}: {}", f.gpu.unwrap(), f.fault.describe())).collect()
}

fn clear(marker: &str, record: Option<String>) -> Shown {
    Shown::Clear { marker: marker.into(), record }
}

#[tokio::test]
async fn a_clear_is_obeyed_once_and_a_new_fault_comes_alone() {
    let node = Arc::new(Mutex::new(Shown::Nothing));
    let mut j = judge(&node);
    assert_eq!(
        named(&j.judge(look(true), &HealthConfig::for_tests(Default::default())).new_faults),
        ["1: row remapping pending"]
    );
    assert_eq!(named(&j.found(xid(0, 79)).new_faults), ["0: Xid 79"]);

    *node.lock().unwrap() = clear("cleared by hand", None);
    let r = j.found(xid(1, 48));
    assert_eq!(named(&r.admin.clone().unwrap().faults), ["0: Xid 79", "1: row remapping pending"]);
    assert_eq!(named(&r.new_faults), ["1: Xid 48"], "the new fault alone");
    assert_eq!(recorded(&r), ["1: Xid 48"]);

    // The Node still shows that clear (the daemon's write not seen yet): obeyed already, so the
    // fault written since stays; a cause still read comes back, as a new fault.
    let r = j.judge(look(true), &HealthConfig::for_tests(Default::default()));
    assert_eq!(r.admin, None);
    assert_eq!(named(&r.new_faults), ["1: row remapping pending"]);
    assert_eq!(recorded(&r), ["1: Xid 48", "1: row remapping pending"]);

    // A removed condition (a prune) is no clear.
    *node.lock().unwrap() = Shown::Nothing;
    let r = j.found(xid(0, 79));
    assert_eq!((r.admin.clone(), recorded(&r).len()), (None, 3));

    // Once the Node showed the daemon's own condition, the same words are a new clear.
    *node.lock().unwrap() = Shown::Other;
    assert_eq!(j.found(xid(0, 79)).admin, None);
    *node.lock().unwrap() = clear("cleared by hand", None);
    let r = j.judge(look(false), &HealthConfig::for_tests(Default::default()));
    assert_eq!(r.admin.unwrap().faults.len(), 3);
    assert_eq!((r.new_faults.len(), r.verdict.unwrap().status), (0, Status::True));
}

#[tokio::test]
async fn a_clear_of_one_gpu_drops_only_what_its_record_no_longer_lists() {
    let node = Arc::new(Mutex::new(Shown::Nothing));
    let mut j = judge(&node);
    j.found(xid(0, 79));
    let before = j.found(xid(1, 48)).verdict.unwrap().record.unwrap();
    let kept: Vec<_> = before.faults.into_iter().filter(|f| f.gpu == Some(1)).collect();
    let record = Record::new("boot", kept.into_iter()).to_annotation();
    *node.lock().unwrap() = clear("GPU 0 cleared by hand", Some(record));
    let r = j.judge(look(false), &HealthConfig::for_tests(Default::default()));
    assert_eq!(named(&r.admin.clone().unwrap().faults), ["0: Xid 79"]);
    assert_eq!((r.new_faults.len(), recorded(&r)), (0, vec!["1: Xid 48".to_string()]));
    assert_eq!(j.faulty().unwrap().into_keys().collect::<Vec<_>>(), ["GPU-1"], "GPU 0's taints go");
}
