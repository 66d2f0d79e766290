//! An NVLink that was active and is not any more is a fault, end to end: the fake's event file
//! brings one link of a bundled NVLink machine down while a health session is open, and the
//! next reading, compared with the one before, names that GPU and link. In a process of its own
//! (`common::in_child`): the fake reads its environment at init.

use crate::common;

use nvlabel::health::values::fault::Fault;

use nvlabel::health::judging::rules::Rules;
use nvlabel::probe::{ProbeOptions, Session};
use std::io::Write;

#[test]
fn an_active_nvlink_that_goes_down_is_a_fault_naming_the_gpu_and_link() {
    let test = "an_active_nvlink_that_goes_down_is_a_fault_naming_the_gpu_and_link";
    let Some(env) = common::in_child(test, &["FAKE_NVML_FIXTURE", "FAKE_NVML_EVENTS"]) else { return };
    let events = &env["FAKE_NVML_EVENTS"];
    std::fs::copy(common::repo().join("testdata/machines/a100-pcie-bridged.yaml"), &env["FAKE_NVML_FIXTURE"])
        .unwrap();
    std::fs::write(events, "").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let opts = ProbeOptions {
        library: common::fake_nvml(),
        sysfs_root: dir.path().join("sys"),
        machine_type_file: "".into(),
        topology: false,
        ..ProbeOptions::default()
    };
    let session = Session::new();
    let rules = Rules::default();
    let before = nvlabel::health::reading::nvml_reads::read(&session, &opts).unwrap();
    assert!(rules.faults(&before, None).is_empty(), "every link is up: {before:?}");
    let again = nvlabel::health::reading::nvml_reads::read(&session, &opts).unwrap();
    assert!(rules.faults(&again, Some(&before)).is_empty(), "nothing changed, nothing found");

    writeln!(std::fs::OpenOptions::new().append(true).open(events).unwrap(), "2 set nvlink.1.active false")
        .unwrap();
    let after = nvlabel::health::reading::nvml_reads::read(&session, &opts).unwrap();
    let found = rules.faults(&after, Some(&before));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].gpu, Some(2), "the GPU whose link went down: {found:?}");
    assert!(matches!(found[0].fault, Fault::NvlinkInactive { link: 1 }), "{found:?}");
    // Compared with itself, the new reading shows no link going down.
    assert!(rules.faults(&after, Some(&after)).is_empty());
}
