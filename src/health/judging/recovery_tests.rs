use super::*;
use crate::health::values::fault::{Action, Found};
use crate::health::values::reading::{GpuReading, Remapped};

/// A reading of one GPU, index 0, every health value read and nothing wrong.
fn healthy() -> Reading {
    let gpu = GpuReading {
        recovery_action: Some(0),
        uncorrected_volatile: Some(0),
        remapped: Some(Remapped::default()),
        retired_pages_pending: Some(false),
        nvlink_active: Some(vec![true, true]),
        ..GpuReading::default()
    };
    Reading { gpus: vec![gpu], pci_gpus: Some(1) }
}

fn tracker_with(faults: &[Found]) -> Tracker {
    let mut t = Tracker::new("boot");
    for f in faults {
        t.record(f, Some("GPU-a"), |_| 0);
    }
    t
}

#[test]
fn each_fault_reads_gone_only_on_its_own_evidence() {
    let r = healthy();
    let xid = Fault::Xid { xid: 79, mig: None, action: Some(Action::Reboot), repeated: None };
    let gone = |f: &Fault| matches!(evidence(Some(0), f, &r, None), Evidence::Gone(_));
    for f in [
        Fault::Lost,
        xid.clone(),
        Fault::Recovery { action: Action::ResetGpu, xid: None },
        Fault::DoubleBitEcc,
        Fault::UncorrectedEcc { count: 1 },
        Fault::RemappedRowsPending,
        Fault::RetiredPagesPending,
        Fault::NvlinkInactive { link: 1 },
    ] {
        assert!(gone(&f), "{f:?}");
    }
    for f in [Fault::Inforom, Fault::RemappedRowsFailure] {
        assert_eq!(evidence(Some(0), &f, &r, None), Evidence::Never, "{f:?}");
        assert!(!can_clear(&f));
    }
    // The driver asks for something: the Xid and the driver's fault stay.
    let mut asks = healthy();
    asks.gpus[0].recovery_action = Some(1);
    assert_eq!(evidence(Some(0), &xid, &asks, None), Evidence::Present);
    // A driver without field 230: an Xid's end cannot be seen.
    let mut old = healthy();
    old.gpus[0].recovery_action = None;
    assert_eq!(evidence(Some(0), &xid, &old, None), Evidence::Never);
    // Each state still read: present.
    let mut bad = healthy();
    let g = &mut bad.gpus[0];
    g.uncorrected_volatile = Some(2);
    g.remapped = Some(Remapped { pending: true, ..Remapped::default() });
    g.retired_pages_pending = Some(true);
    g.nvlink_active = Some(vec![true, false]);
    for f in [
        Fault::UncorrectedEcc { count: 1 },
        Fault::DoubleBitEcc,
        Fault::RemappedRowsPending,
        Fault::RetiredPagesPending,
        Fault::NvlinkInactive { link: 1 },
    ] {
        assert_eq!(evidence(Some(0), &f, &bad, None), Evidence::Present, "{f:?}");
    }
    // A lost or absent GPU shows nothing gone.
    let mut lost = healthy();
    lost.gpus[0].lost = true;
    assert_eq!(evidence(Some(0), &Fault::Lost, &lost, None), Evidence::Present);
    assert_eq!(evidence(Some(3), &Fault::Lost, &r, None), Evidence::Present);
    // The node's counts.
    let missing = Fault::Missing { nvml: 0, pci: 1 };
    assert!(matches!(evidence(None, &missing, &r, None), Evidence::Gone(_)));
    let below = Fault::BelowExpected { nvml: 0, expected: 2 };
    assert_eq!(evidence(None, &below, &r, Some(2)), Evidence::Present);
    assert!(matches!(evidence(None, &below, &r, Some(1)), Evidence::Gone(_)));
}

#[test]
fn a_fault_clears_only_after_reading_gone_for_the_whole_hold() {
    let start = Instant::now();
    let at = |s: u64| start + Duration::from_secs(s);
    let hold = Duration::from_secs(120);
    let pending = Found { gpu: Some(0), fault: Fault::RemappedRowsPending };
    let mut t = tracker_with(&[pending.clone(), Found { gpu: Some(0), fault: Fault::Inforom }]);
    let mut h = Healing::default();
    let mut still = healthy();
    still.gpus[0].remapped = Some(Remapped { pending: true, ..Remapped::default() });
    assert!(h.observe(&mut t, &healthy(), None, hold, at(0)).is_empty(), "gone, not yet held");
    assert!(h.observe(&mut t, &still, None, hold, at(60)).is_empty());
    assert!(h.observe(&mut t, &healthy(), None, hold, at(119)).is_empty(), "the hold started over");
    assert!(h.observe(&mut t, &healthy(), None, hold, at(200)).is_empty());
    let cleared = h.observe(&mut t, &healthy(), None, hold, at(239));
    assert_eq!(cleared.len(), 1, "{cleared:?}");
    assert_eq!(cleared[0].evidence, "no row remapping is pending");
    assert!(
        cleared[0].text().contains("RemappedRowsPending") && cleared[0].text().contains("cleared: no row")
    );
    assert_eq!(t.entries().count(), 1, "the InfoROM fault stays");
    assert!(h.observe(&mut t, &healthy(), None, hold, at(10_000)).is_empty());
}

#[test]
fn a_fault_back_within_the_hour_says_so_and_asks_for_more() {
    let start = Instant::now();
    let at = |s: u64| start + Duration::from_secs(s);
    let xid = Found {
        gpu: Some(0),
        fault: Fault::Xid { xid: 79, mig: None, action: Some(Action::ResetGpu), repeated: None },
    };
    let mut t = tracker_with(std::slice::from_ref(&xid));
    let mut h = Healing::default();
    assert_eq!(h.observe(&mut t, &healthy(), None, Duration::ZERO, at(0)).len(), 1);
    let key = |t: &Tracker| t.entries().next().map(|(k, _)| k.clone()).unwrap();
    let back = t.record(&xid, Some("GPU-a"), |k| h.recurrences(k, at(600))).expect("new again");
    assert_eq!(back.recorded.recurrences, Some(1));
    assert_eq!(back.recorded.action, Action::Replace, "a GPU that keeps needing resets is replaced");
    assert!(back.text.contains("back after clearing once within the hour"), "{}", back.text);
    assert_eq!(h.recurrences(&key(&t), at(600)), 1);
    // Cleared a second time: twice.
    assert_eq!(h.observe(&mut t, &healthy(), None, Duration::ZERO, at(700)).len(), 1);
    assert_eq!(h.recurrences(&back.key(), at(800)), 2);
    // After the window, a return is a first fault again.
    assert_eq!(h.recurrences(&back.key(), at(700 + 3600)), 0);
    let fresh = t.record(&xid, Some("GPU-a"), |k| h.recurrences(k, at(700 + 3600))).unwrap();
    assert_eq!((fresh.recorded.recurrences, fresh.recorded.action), (None, Action::ResetGpu));
}

#[test]
fn escalation_only_goes_up() {
    use Action::*;
    for a in
        [CheckWorkload, Investigate, DrainP2p, ResetGpu, DrainAndReset, RecoverImexDomain, Reboot, Replace]
    {
        assert!(a.escalate() > a || a == Replace, "{a:?}");
    }
}
