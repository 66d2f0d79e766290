//! An NVLink that was active and is not any more is a fault, end to end: the fake's event file
//! brings one link of a bundled NVLink machine down while a health session is open, and the
//! next reading, compared with the one before, names that GPU and link. One test in its own
//! binary: it sets the fake's environment for the whole process.

mod common;

use nvlabel::health::rules::{Fault, Rules};
use nvlabel::probe::ProbeOptions;
use std::io::Write;

#[test]
fn an_active_nvlink_that_goes_down_is_a_fault_naming_the_gpu_and_link() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events");
    std::fs::write(&events, "").unwrap();
    // Set before any other thread exists; the fake reads them at init.
    std::env::set_var("FAKE_NVML_FIXTURE", common::repo().join("testdata/machines/a100-pcie-bridged.yaml"));
    std::env::set_var("FAKE_NVML_EVENTS", &events);
    let opts = ProbeOptions {
        library: common::fake_nvml(),
        sysfs_root: dir.path().join("sys"),
        machine_type_file: "".into(),
        topology: false,
        keep_session: true,
    };
    let rules = Rules::default();
    let before = nvlabel::health::nvml::read(&opts).unwrap();
    assert!(rules.faults(&before, None).is_empty(), "every link is up: {before:?}");
    let again = nvlabel::health::nvml::read(&opts).unwrap();
    assert!(rules.faults(&again, Some(&before)).is_empty(), "nothing changed, nothing found");

    writeln!(std::fs::OpenOptions::new().append(true).open(&events).unwrap(), "2 set nvlink.1.active false")
        .unwrap();
    let after = nvlabel::health::nvml::read(&opts).unwrap();
    let found = rules.faults(&after, Some(&before));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, Some(2), "the GPU whose link went down: {found:?}");
    assert!(matches!(found[0].1, Fault::NvlinkInactive { link: 1 }), "{found:?}");
    // Compared with itself, the new reading shows no link going down.
    assert!(rules.faults(&after, Some(&after)).is_empty());
}
