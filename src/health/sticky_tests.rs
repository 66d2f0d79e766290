use super::*;
use crate::health::rules::Fault;

#[test]
fn healthy_unknown_and_faulty_verdicts() {
    let mut t = Tracker::new("boot-a");
    t.nvml(Ok(2));
    assert_eq!(
        t.verdict(),
        Verdict { status: "True", reason: HEALTHY.into(), message: "2 GPUs healthy".into() }
    );
    t.nvml(Err("driver not loaded".into()));
    assert_eq!(t.verdict().status, "Unknown");
    assert_eq!(t.verdict().reason, UNAVAILABLE);
    assert!(t.record(&(Some(1), Fault::Xid { xid: 79, mig: None }), Some("GPU-b")).is_some());
    assert!(t.record(&(Some(0), Fault::RetiredPagesPending), Some("GPU-a")).is_some());
    let v = t.verdict();
    assert_eq!(v.status, "False", "a known fault outranks NVML being unavailable");
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
    let xid = (Some(0), Fault::Xid { xid: 48, mig: None });
    assert!(t.record(&xid, Some("GPU-a")).is_some());
    assert!(t.record(&xid, Some("GPU-a")).is_none(), "seen again: not new");
    assert!(t.record(&(Some(0), Fault::Xid { xid: 79, mig: None }), Some("GPU-a")).is_some());
    t.nvml(Ok(1));
    assert_eq!(t.verdict().status, "False", "a pass without the fault does not clear it");
    assert_eq!(t.verdict().message.matches("; ").count(), 1);
}

#[test]
fn a_restart_recovers_the_faults_of_this_boot_only() {
    let mut t = Tracker::new("boot-a");
    t.record(&(Some(2), Fault::RemappedRowsFailure), Some("GPU-c"));
    t.record(&(Some(0), Fault::Xid { xid: 94, mig: Some((1, 0)) }), None);
    t.record(&(None, Fault::Missing { nvml: 3, pci: 4 }), None);
    let v = t.verdict();
    let back = Tracker::recover("boot-a", v.status, &v.message);
    assert_eq!(back.verdict(), v);
    let mut again = back.clone();
    assert!(again.record(&(Some(0), Fault::Xid { xid: 94, mig: Some((1, 0)) }), None).is_none());
    assert!(again.record(&(Some(2), Fault::RemappedRowsFailure), Some("GPU-c")).is_none());
    assert!(!Tracker::recover("boot-b", v.status, &v.message).faulty(), "another boot");
    assert!(!Tracker::recover("boot-a", "True", &v.message).faulty());
    assert!(!Tracker::recover("boot-a", "False", "written by someone else").faulty());
}

#[test]
fn a_new_boot_clears_everything() {
    let mut t = Tracker::new("a");
    t.record(&(Some(0), Fault::Lost), None);
    assert!(t.new_boot("b"));
    assert!(!t.faulty());
    assert_eq!(t.boot_id(), "b");
    assert!(!t.new_boot("c"));
}
