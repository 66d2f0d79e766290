//! The one NVML session: opened once and reused, dropped and opened again when NVML says the
//! driver went away or changed, and never remembered as failed (NVML that appears later is
//! found). Each test runs in a process of its own (`common::in_child`): the fake reads its
//! environment at init.

mod common;

use nvlabel::probe::{ProbeOptions, Session};

fn inits(calls: &std::path::Path) -> u64 {
    let text = std::fs::read_to_string(calls).unwrap_or_default();
    text.lines().find_map(|l| l.strip_prefix("nvmlInit_v2 ")).map_or(0, |n| n.parse().unwrap())
}

#[test]
fn one_session_reused_reopened_after_the_driver_changed_and_found_when_it_appears() {
    let test = "one_session_reused_reopened_after_the_driver_changed_and_found_when_it_appears";
    let Some(env) = common::in_child(test, &["FAKE_NVML_FIXTURE", "FAKE_NVML_CALLS"]) else { return };
    let (fixture, calls) = (&env["FAKE_NVML_FIXTURE"], &env["FAKE_NVML_CALLS"]);
    let machine = std::fs::read_to_string(common::repo().join("testdata/health/h100x2.yaml")).unwrap();
    // After two good device counts the driver "changes" (a version mismatch from then on).
    let faulty = format!(
        "{machine}faults:\n  - {{function: nvmlDeviceGetCount_v2, error: lib_rm_version_mismatch, after: 2}}\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let opts = ProbeOptions {
        library: common::fake_nvml(),
        sysfs_root: dir.path().join("sys"),
        machine_type_file: "".into(),
        topology: false,
    };
    let session = Session::new();
    let read = || nvlabel::health::nvml::read(&session, &opts).map_err(|e| e.to_string());

    // No driver yet: an error, and nothing remembered.
    let e = read().unwrap_err();
    assert!(e.contains("Unknown") || e.contains("cannot read") || e.contains("failed to initialize"), "{e}");
    // The driver appears: found by the next read.
    std::fs::write(fixture, &faulty).unwrap();
    assert_eq!(read().unwrap().gpus.len(), 2);
    assert_eq!(read().unwrap().gpus.len(), 2, "the second read reuses the session");
    // The driver changed: the read fails and the session is dropped (its shutdown writes the count).
    let e = read().unwrap_err();
    assert!(e.contains("nvmlDeviceGetCount_v2"), "{e}");
    assert_eq!(inits(calls), 1, "one init for the reads so far");
    // The next read opens a new session (a new driver: the fault counts from zero again).
    assert_eq!(read().unwrap().gpus.len(), 2);
    assert_eq!(read().unwrap().gpus.len(), 2);
    let e = read().unwrap_err();
    assert!(e.contains("nvmlDeviceGetCount_v2"), "{e}");
    assert_eq!(inits(calls), 2, "reopened once");
    assert_eq!(session.opens(), 2);
}
