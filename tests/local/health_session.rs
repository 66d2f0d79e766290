//! The one NVML session: opened once and reused, dropped and opened again when NVML says the
//! driver went away or changed, and never remembered as failed (NVML that appears later is
//! found). Each test runs in a process of its own (`common::in_child`): the fake reads its
//! environment at init.

use crate::common;

use nvlabel::probe::{ProbeOptions, Session};

/// How many times the fake says `symbol` was called.
fn calls_of(calls: &std::path::Path, symbol: &str) -> u64 {
    let text = std::fs::read_to_string(calls).unwrap_or_default();
    text.lines().find_map(|l| l.strip_prefix(&format!("{symbol} "))).map_or(0, |n| n.parse().unwrap())
}

/// The fake library, with an empty sysfs under `dir`.
fn options(dir: &std::path::Path) -> ProbeOptions {
    ProbeOptions {
        library: common::fake_nvml(),
        sysfs_root: dir.join("sys"),
        machine_type_file: "".into(),
        topology: false,
        ..ProbeOptions::default()
    }
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
    let opts = options(dir.path());
    let session = Session::new();
    let read = || nvlabel::health::reading::nvml_reads::read(&session, &opts).map_err(|e| e.to_string());

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
    assert_eq!(calls_of(calls, "nvmlInit_v2"), 1, "one init for the reads so far");
    // The next read opens a new session (a new driver: the fault counts from zero again).
    assert_eq!(read().unwrap().gpus.len(), 2);
    assert_eq!(read().unwrap().gpus.len(), 2);
    let e = read().unwrap_err();
    assert!(e.contains("nvmlDeviceGetCount_v2"), "{e}");
    assert_eq!(calls_of(calls, "nvmlInit_v2"), 2, "reopened once");
    assert_eq!(session.opens(), 2);
}

/// The per-pass cost of a health reading, counted by the fake: one `nvmlDeviceGetFieldValues`
/// per GPU for every field (row remapping, recovery action, PCIe replays), one clock-event read
/// per GPU, and no per-field calls; the values come through as the fixture says.
#[test]
fn a_reading_makes_one_field_values_call_per_gpu_and_reads_the_warning_signals() {
    let test = "a_reading_makes_one_field_values_call_per_gpu_and_reads_the_warning_signals";
    let Some(env) = common::in_child(test, &["FAKE_NVML_FIXTURE", "FAKE_NVML_CALLS"]) else { return };
    let (fixture, calls) = (&env["FAKE_NVML_FIXTURE"], &env["FAKE_NVML_CALLS"]);
    std::fs::copy(common::repo().join("testdata/health/h100x2-signals.yaml"), fixture).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let opts = options(dir.path());
    let session = Session::new();
    const READS: u64 = 5;
    for _ in 0..READS {
        let reading = nvlabel::health::reading::nvml_reads::read(&session, &opts).unwrap();
        let gpu = &reading.gpus[0];
        assert_eq!((gpu.pcie_replays, gpu.clock_events, gpu.recovery_action), (Some(12), Some(0x1), None));
    }
    session.reset();
    let gpus = 2;
    assert_eq!(calls_of(calls, "nvmlDeviceGetFieldValues"), READS * gpus, "one call per GPU per reading");
    assert_eq!(calls_of(calls, "nvmlDeviceGetCurrentClocksEventReasons"), READS * gpus);
    for per_field in ["nvmlDeviceGetPcieReplayCounter", "nvmlDeviceGetRemappedRows"] {
        assert_eq!(calls_of(calls, per_field), 0, "{per_field}: read through the field values");
    }
    let total: u64 = std::fs::read_to_string(calls)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("nvmlDevice"))
        .filter(|l| !l.starts_with("nvmlDeviceGetHandleByIndex") && !l.starts_with("nvmlDeviceGetCount"))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    // UUID, 2 ECC counters, retired pages, InfoROM, field values, clock events, and the NVLink
    // states (the first link answers NOT_SUPPORTED here: one call).
    assert_eq!(total, READS * gpus * 8, "{}", std::fs::read_to_string(calls).unwrap());
}
