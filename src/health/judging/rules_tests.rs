use super::*;
use crate::health::values::reading::{GpuReading, Remapped};

/// The operator's lists with `xids` fatal.
fn fatal(xids: &[u64]) -> Judging {
    Judging { fatal_xids: xids.iter().copied().collect(), ..Judging::default() }
}

fn healthy(index: u32) -> GpuReading {
    GpuReading {
        index,
        uuid: Some(format!("GPU-{index}")),
        uncorrected_volatile: Some(0),
        corrected_volatile: Some(5),
        remapped: Some(Remapped::default()),
        retired_pages_pending: Some(false),
        nvlink_active: Some(vec![true, true]),
        ..GpuReading::default()
    }
}

fn reading(gpus: Vec<GpuReading>) -> Reading {
    Reading { pci_gpus: Some(gpus.len() as u32), gpus }
}

#[test]
fn a_healthy_node_has_no_faults_and_corrected_errors_are_not_faults() {
    let r = reading(vec![healthy(0), healthy(1)]);
    assert_eq!(Rules::default().faults(&r, Some(&r)), vec![]);
}

#[test]
fn each_pass_detector_reports_its_fault() {
    let rules = Rules::default();
    type Change = Box<dyn Fn(&mut GpuReading)>;
    let cases: Vec<(Change, Fault)> = vec![
        (Box::new(|g| g.lost = true), Fault::Lost),
        (Box::new(|g| g.uncorrected_volatile = Some(2)), Fault::UncorrectedEcc { count: 2 }),
        (Box::new(|g| g.remapped.as_mut().unwrap().failure = true), Fault::RemappedRowsFailure),
        (Box::new(|g| g.remapped.as_mut().unwrap().pending = true), Fault::RemappedRowsPending),
        (Box::new(|g| g.retired_pages_pending = Some(true)), Fault::RetiredPagesPending),
        (Box::new(|g| g.nvlink_active = Some(vec![true, false])), Fault::NvlinkInactive { link: 1 }),
    ];
    let before = reading(vec![healthy(0), healthy(1)]);
    for (change, fault) in cases {
        let mut now = before.clone();
        change(&mut now.gpus[1]);
        assert_eq!(
            rules.faults(&now, Some(&before)),
            vec![Found { gpu: Some(1), fault: fault.clone() }],
            "{fault:?}"
        );
    }
}

#[test]
fn a_link_that_was_never_active_is_not_a_fault() {
    let mut before = reading(vec![healthy(0)]);
    before.gpus[0].nvlink_active = Some(vec![false, true]);
    let now = before.clone();
    assert_eq!(Rules::default().faults(&now, Some(&before)), vec![]);
    assert_eq!(Rules::default().faults(&now, None), vec![]);
}

#[test]
fn fewer_nvml_gpus_than_on_the_pci_bus_is_a_node_fault() {
    let mut r = reading(vec![healthy(0)]);
    r.pci_gpus = Some(2);
    assert_eq!(
        Rules::default().faults(&r, None),
        vec![Found { gpu: None, fault: Fault::Missing { nvml: 1, pci: 2 } }]
    );
    r.pci_gpus = None;
    assert_eq!(Rules::default().faults(&r, None), vec![]);
}

#[test]
fn xids_follow_nvidias_catalog_unless_the_operator_lists_them() {
    let rules = Rules::default();
    // Application errors (RESTART_APP, IGNORE), 94 included, which the device plugin called fatal.
    for xid in [13, 31, 43, 45, 68, 94] {
        assert_eq!(rules.event_fault(&Event::Xid { index: 0, xid, mig: None }, None), None, "{xid}");
    }
    // The catalog's resets and reboots, 109 included, which the device plugin ignored.
    for (xid, action) in
        [(48, Action::ResetGpu), (79, Action::Reboot), (95, Action::ResetGpu), (109, Action::ResetGpu)]
    {
        let found = rules.event_fault(&Event::Xid { index: 2, xid, mig: Some((1, 0)) }, None);
        assert_eq!(
            found,
            Some(Found {
                gpu: Some(2),
                fault: Fault::Xid { xid, mig: Some((1, 0)), action: Some(action), repeated: None }
            }),
            "{xid}"
        );
    }
    let unknown = rules.event_fault(&Event::Xid { index: 0, xid: 4_000, mig: None }, None).unwrap().fault;
    assert_eq!(unknown.action(), Action::Investigate);
    let listed = Judging {
        ignored_xids: [79].into_iter().collect(),
        fatal_xids: [13].into_iter().collect(),
        ..Judging::default()
    };
    let custom = Rules::new(&listed);
    assert_eq!(custom.event_fault(&Event::Xid { index: 0, xid: 79, mig: None }, None), None);
    assert!(custom.event_fault(&Event::Xid { index: 0, xid: 13, mig: None }, None).is_some());
}

#[test]
fn where_the_driver_answers_its_recovery_action_it_decides_after_an_xid() {
    let rules = Rules::default();
    let mut r = reading(vec![healthy(0)]);
    r.gpus[0].recovery_action = Some(0);
    // 109 is a reset in the catalog, but the driver that says "none" knows better.
    assert_eq!(rules.event_fault(&Event::Xid { index: 0, xid: 109, mig: None }, Some(&r)), None);
    // 31 is an application's in the catalog; the driver asking for a reset makes it a fault.
    r.gpus[0].recovery_action = Some(1);
    let faults = rules.faults(&r, None);
    assert_eq!(
        faults,
        vec![Found { gpu: Some(0), fault: Fault::Recovery { action: Action::ResetGpu, xid: None } }]
    );
    assert_eq!(faults[0].fault.action().text(), "reset the GPU");
    // The operator's lists still win.
    let fatal_31 = fatal(&[31]);
    let listed = Rules::new(&fatal_31);
    assert!(listed.event_fault(&Event::Xid { index: 0, xid: 31, mig: None }, Some(&r)).is_some());
}

#[test]
fn ecc_and_lost_events_are_faults() {
    let rules = Rules::default();
    assert_eq!(
        rules.event_fault(&Event::DoubleBitEcc { index: 3 }, None),
        Some(Found { gpu: Some(3), fault: Fault::DoubleBitEcc })
    );
    assert_eq!(
        rules.event_fault(&Event::Lost { index: 1 }, None),
        Some(Found { gpu: Some(1), fault: Fault::Lost })
    );
}

#[test]
fn reasons_are_camel_case_ranked_and_have_actions() {
    assert_eq!(Fault::Lost.reason(), "GpuLost");
    assert_eq!(Fault::Xid { xid: 79, mig: None, action: None, repeated: None }.action(), Action::Reboot);
    assert_eq!(Fault::Xid { xid: 48, mig: None, action: None, repeated: None }.action(), Action::ResetGpu);
    assert_eq!(Fault::RemappedRowsFailure.action(), Action::Replace);
    assert!(Fault::RemappedRowsFailure.rank() < Fault::RemappedRowsPending.rank());
    let faults = crate::health::values::record::samples::every_fault();
    for f in &faults {
        let r = f.reason();
        assert!(
            r.chars().next().unwrap().is_ascii_uppercase() && r.chars().all(|c| c.is_ascii_alphanumeric())
        );
        assert_eq!(serde_json::to_value(f).unwrap()["kind"], r, "the record's kind is the reason");
    }
    let distinct = |key: fn(&Fault) -> String| faults.iter().map(key).collect::<BTreeSet<_>>().len();
    assert_eq!(distinct(|f| f.reason().into()), 12, "one reason per kind");
    assert_eq!(distinct(|f| f.rank().to_string()), 12, "one rank per kind");
    assert_eq!(
        Fault::Xid { xid: 31, mig: Some((9, 0)), action: None, repeated: None }.describe(),
        "Xid 31 on MIG device GI 9 CI 0"
    );
    let three = crate::health::values::record::samples::three_in_a_minute();
    let repeated = Fault::Xid { xid: 43, mig: None, action: Some(Action::ResetGpu), repeated: Some(three) };
    assert_eq!((repeated.describe(), repeated.reason()), ("Xid 43 3 times in 1m".into(), "XidCriticalError"));
}

/// Every rule's case, checked against `rules`: the cases it gets wrong.
fn misses(rules: &Rules) -> Vec<String> {
    misses_without(rules, None)
}

/// [`misses`] with the faults of reason `dropped` taken out of what `rules` found, as if its
/// detector were gone.
fn misses_without(rules: &Rules, dropped: Option<&str>) -> Vec<String> {
    let before = reading(vec![healthy(0), healthy(1)]);
    let mut wrong = Vec::new();
    let mut check = |what: &str, mut got: Vec<Found>, want: Vec<Found>| {
        got.retain(|found| Some(found.fault.reason()) != dropped);
        if got != want {
            wrong.push(format!("{what}: {got:?}"));
        }
    };
    let pass = |change: &dyn Fn(&mut Reading)| {
        let mut now = before.clone();
        change(&mut now);
        rules.faults(&now, Some(&before))
    };
    check("lost", pass(&|r| r.gpus[1].lost = true), vec![Found { gpu: Some(1), fault: Fault::Lost }]);
    check(
        "missing",
        pass(&|r| r.pci_gpus = Some(3)),
        vec![Found { gpu: None, fault: Fault::Missing { nvml: 2, pci: 3 } }],
    );
    let expecting = |n: u32| Rules { expected: Some(n), ..*rules };
    let both = reading(vec![healthy(0), healthy(1)]);
    check("expected 2 of 2", expecting(2).faults(&both, None), vec![]);
    check(
        "expected 3 of 2",
        expecting(3).faults(&both, None),
        vec![Found { gpu: None, fault: Fault::BelowExpected { nvml: 2, expected: 3 } }],
    );
    check(
        "ecc",
        pass(&|r| r.gpus[0].uncorrected_volatile = Some(1)),
        vec![Found { gpu: Some(0), fault: Fault::UncorrectedEcc { count: 1 } }],
    );
    check(
        "failure",
        pass(&|r| r.gpus[0].remapped.as_mut().unwrap().failure = true),
        vec![Found { gpu: Some(0), fault: Fault::RemappedRowsFailure }],
    );
    check(
        "pending",
        pass(&|r| r.gpus[0].remapped.as_mut().unwrap().pending = true),
        vec![Found { gpu: Some(0), fault: Fault::RemappedRowsPending }],
    );
    check(
        "retired",
        pass(&|r| r.gpus[0].retired_pages_pending = Some(true)),
        vec![Found { gpu: Some(0), fault: Fault::RetiredPagesPending }],
    );
    check(
        "nvlink",
        pass(&|r| r.gpus[0].nvlink_active = Some(vec![false, true])),
        vec![Found { gpu: Some(0), fault: Fault::NvlinkInactive { link: 0 } }],
    );
    check(
        "inforom",
        pass(&|r| r.gpus[1].inforom_corrupted = true),
        vec![Found { gpu: Some(1), fault: Fault::Inforom }],
    );
    check(
        "recovery",
        pass(&|r| r.gpus[0].recovery_action = Some(2)),
        vec![Found { gpu: Some(0), fault: Fault::Recovery { action: Action::Reboot, xid: None } }],
    );
    let event = |e: Event| rules.event_fault(&e, None).into_iter().collect::<Vec<_>>();
    check(
        "xid",
        event(Event::Xid { index: 0, xid: 79, mig: None }),
        vec![Found {
            gpu: Some(0),
            fault: Fault::Xid { xid: 79, mig: None, action: Some(Action::Reboot), repeated: None },
        }],
    );
    check("xid 13", event(Event::Xid { index: 0, xid: 13, mig: None }), vec![]);
    check(
        "dbe",
        event(Event::DoubleBitEcc { index: 1 }),
        vec![Found { gpu: Some(1), fault: Fault::DoubleBitEcc }],
    );
    check("lost event", event(Event::Lost { index: 1 }), vec![Found { gpu: Some(1), fault: Fault::Lost }]);
    wrong
}

#[test]
fn mutation_check_turning_off_any_detector_fails_a_case() {
    assert_eq!(misses(&Rules::default()), Vec::<String>::new());
    for fault in crate::health::values::record::samples::every_fault() {
        let reason = fault.reason();
        let wrong = misses_without(&Rules::default(), Some(reason));
        assert!(!wrong.is_empty(), "without {reason} faults no case fails: the cases do not guard it");
    }
    let fatal_13 = fatal(&[13]);
    assert_eq!(
        misses(&Rules::new(&fatal_13)),
        vec!["xid 13: [Found { gpu: Some(0), fault: Xid { xid: 13, mig: None, action: Some(CheckWorkload), repeated: None } }]"
            .to_string()]
    );
}

#[test]
fn an_xid_that_is_a_fault_only_by_the_operators_choice_never_recommends_a_reset() {
    // The real run's case: 31 (an application's page fault) made fatal by the operator.
    let listed = fatal(&[13, 31, 94]);
    let rules = Rules::new(&listed);
    for xid in [13, 31, 94] {
        let Found { fault, .. } =
            rules.event_fault(&Event::Xid { index: 0, xid, mig: None }, None).expect("a fault now");
        assert_eq!(fault.action(), Action::CheckWorkload, "Xid {xid}");
    }
    let mut t = crate::health::judging::sticky::Tracker::new("b");
    let found = rules.event_fault(&Event::Xid { index: 0, xid: 31, mig: None }, None).unwrap();
    let entry = t.record(&found, Some("GPU-a"), |_| 0).unwrap();
    assert_eq!(entry.text, "GPU 0 (GPU-a): XidCriticalError, Xid 31, action: check the workload on this GPU");
    // A record from before the catalog keeps its time's actions.
    assert_eq!(Fault::Xid { xid: 48, mig: None, action: None, repeated: None }.action(), Action::ResetGpu);
    assert_eq!(Fault::Xid { xid: 79, mig: None, action: None, repeated: None }.action(), Action::Reboot);
    assert_eq!(
        Fault::Xid { xid: 31, mig: None, action: None, repeated: None }.action(),
        Action::CheckWorkload
    );
}
