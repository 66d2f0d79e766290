use super::*;
use crate::health::judging::admin::Shown;
use crate::health::values::fault::Action;
use crate::health::values::reading::{GpuReading, Remapped};
use crate::health::values::record::Record;
use crate::health::values::verdict::Status;
use std::time::Instant;

/// A judge that knows its (empty) record: no thread, no session, no Node; what the Node shows is
/// handed in with each look and event.
fn judge() -> Judge {
    let config = HealthConfig::for_tests(Default::default());
    let metrics = Arc::new(HealthMetrics::default());
    let mut j = Judge::new(&config, metrics);
    j.recover(&"boot".into(), None);
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
    Look { reading: Some(Ok(reading)), stall: None, warnings: Vec::new(), after: None, at: Instant::now() }
}

fn xid(gpu: u32, xid: u64) -> Found {
    Found {
        gpu: Some(gpu),
        fault: Fault::Xid { xid, mig: None, action: Some(Action::Reboot), repeated: None },
    }
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

/// What a Node showing `clear` says, with no expected count.
fn said(clear: &Shown) -> NodeSaid {
    NodeSaid { expected: None, clear: clear.clone() }
}

fn clear(marker: &str, record: Option<String>) -> Shown {
    Shown::Clear { marker: marker.into(), record }
}

#[test]
fn a_clear_is_obeyed_once_and_a_new_fault_comes_alone() {
    let mut node = Shown::Nothing;
    let mut j = judge();
    assert_eq!(
        named(&j.judge(look(true), said(&node), &HealthConfig::for_tests(Default::default())).new_faults),
        ["1: row remapping pending"]
    );
    assert_eq!(named(&j.found(xid(0, 79), node.clone(), Instant::now()).new_faults), ["0: Xid 79"]);

    node = clear("cleared by hand", None);
    let r = j.found(xid(1, 48), node.clone(), Instant::now());
    assert_eq!(named(&r.admin.clone().unwrap().faults), ["0: Xid 79", "1: row remapping pending"]);
    assert_eq!(named(&r.new_faults), ["1: Xid 48"], "the new fault alone");
    assert_eq!(recorded(&r), ["1: Xid 48"]);

    // The Node still shows that clear (the daemon's write not seen yet): obeyed already, so the
    // fault written since stays; a cause still read comes back, as a new fault.
    let r = j.judge(look(true), said(&node), &HealthConfig::for_tests(Default::default()));
    assert_eq!(r.admin, None);
    assert_eq!(named(&r.new_faults), ["1: row remapping pending"]);
    assert_eq!(recorded(&r), ["1: Xid 48", "1: row remapping pending"]);

    // A removed condition (a prune) is no clear.
    node = Shown::Nothing;
    let r = j.found(xid(0, 79), node.clone(), Instant::now());
    assert_eq!((r.admin.clone(), recorded(&r).len()), (None, 3));

    // Once the Node showed the daemon's own condition, the same words are a new clear.
    node = Shown::Other;
    assert_eq!(j.found(xid(0, 79), node.clone(), Instant::now()).admin, None);
    node = clear("cleared by hand", None);
    let r = j.judge(look(false), said(&node), &HealthConfig::for_tests(Default::default()));
    assert_eq!(r.admin.unwrap().faults.len(), 3);
    assert_eq!((r.new_faults.len(), r.verdict.unwrap().status), (0, Status::True));
}

#[test]
fn a_clear_of_one_gpu_drops_only_what_its_record_no_longer_lists() {
    let mut node = Shown::Nothing;
    let mut j = judge();
    j.found(xid(0, 79), node.clone(), Instant::now());
    let before = j.found(xid(1, 48), node.clone(), Instant::now()).verdict.unwrap().record.unwrap();
    let kept: Vec<_> = before.faults.into_iter().filter(|f| f.gpu == Some(1)).collect();
    let record = Record::new("boot", kept.into_iter()).to_annotation();
    node = clear("GPU 0 cleared by hand", Some(record));
    let r = j.judge(look(false), said(&node), &HealthConfig::for_tests(Default::default()));
    assert_eq!(named(&r.admin.clone().unwrap().faults), ["0: Xid 79"]);
    assert_eq!((r.new_faults.len(), recorded(&r)), (0, vec!["1: Xid 48".to_string()]));
    assert_eq!(j.faulty().unwrap().into_keys().collect::<Vec<_>>(), ["GPU-1"], "GPU 0's taints go");
}

/// A configuration ignoring Xid 79 and counting Xid 43 to 3 within a minute.
fn listing() -> HealthConfig {
    let mut config = HealthConfig::for_tests(Default::default());
    let judging = &mut config.settings.judging;
    judging.ignored_xids = [79].into();
    judging.xid_thresholds = crate::health::judging::thresholds::parse("43:3/1m").unwrap();
    config
}

/// A look at GPU 0 whose driver answers its recovery action `action` (GPU 1's does not).
fn driver_look(action: u64) -> Look {
    let mut look = look(false);
    if let Some(Ok(r)) = look.reading.as_mut() {
        r.gpus[0].recovery_action = Some(action);
    }
    look
}

#[test]
fn every_event_is_judged_with_the_rule_that_decided() {
    use crate::health::judging::outcome::Judged;
    let node = Shown::Nothing;
    let mut j = judge();
    let config = listing();
    j.judge(driver_look(0), said(&node), &config);
    let xid = |index, xid| Event::Xid { index, xid, mig: None };
    let why = |judged: Judged| match judged {
        Judged::NotAFault(no) => (no.name(), no.to_string()),
        other => panic!("{other:?}"),
    };
    // GPU 1's driver does not answer: the catalog and the operator decide.
    assert_eq!(
        why(j.event_fault(&xid(1, 31), &config, Instant::now())),
        ("xid-catalog", "NVIDIA's Xid catalog says RESTART_APP".into())
    );
    assert_eq!(
        why(j.event_fault(&xid(1, 79), &config, Instant::now())),
        ("--health-ignore-xids", "--health-ignore-xids lists it".into())
    );
    let below = |n| {
        format!(
            "NVIDIA's Xid catalog says IGNORE; below its --health-xid-thresholds count: {n} of 3 within 1m"
        )
    };
    assert_eq!(
        why(j.event_fault(&xid(1, 43), &config, Instant::now())),
        ("--health-xid-thresholds", below(1))
    );
    assert_eq!(
        why(j.event_fault(&xid(1, 43), &config, Instant::now())),
        ("--health-xid-thresholds", below(2))
    );
    let Judged::Fault(Found { gpu: Some(1), fault }) = j.event_fault(&xid(1, 43), &config, Instant::now())
    else {
        panic!("the third")
    };
    assert_eq!(fault.describe(), "Xid 43 3 times in 1m");
    assert!(
        matches!(j.event_fault(&xid(1, 48), &config, Instant::now()), Judged::Fault(_)),
        "the catalog's reset"
    );
    // GPU 0's driver answers: it decides, the threshold still counting.
    match j.event_fault(&xid(0, 43), &config, Instant::now()) {
        Judged::DriverDecides(after) => {
            assert_eq!((after.index, after.xid, after.tally.map(|t| t.seen)), (0, 43, Some(1)))
        }
        other => panic!("{other:?}"),
    }
    let Judged::DriverDecides(after) = j.event_fault(&xid(0, 109), &config, Instant::now()) else {
        panic!("the driver's")
    };
    assert_eq!(after.tally, None);
}

#[test]
fn a_recovery_action_read_after_an_xid_names_it() {
    let node = Shown::Nothing;
    let mut j = judge();
    let config = listing();
    j.judge(driver_look(0), said(&node), &config);
    let after = crate::health::judging::outcome::AfterXid { index: 0, xid: 109, tally: None };
    let look = driver_look(1).after(&after);
    assert_eq!(look.driver_said(0), crate::health::judging::outcome::DriverSaid::Asks(Action::ResetGpu));
    let r = j.judge(look, said(&node), &config);
    assert_eq!(
        r.new_faults.iter().map(|e| e.text.as_str()).collect::<Vec<_>>(),
        ["GPU 0 (GPU-0): GpuRecoveryActionRequired, the driver asks for a recovery action after Xid 109, action: reset the GPU"]
    );
    let record = r.verdict.unwrap().record.unwrap().to_annotation();
    assert!(record.contains(r#""driverAction":"ResetGpu","xid":109"#), "{record}");
    // The next pass reads the same action, and the fault stays the Xid's.
    let r = j.judge(driver_look(1), said(&node), &config);
    assert!(r.new_faults.is_empty());
    assert!(r.verdict.unwrap().message.contains("after Xid 109"));
}
