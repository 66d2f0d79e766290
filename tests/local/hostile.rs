//! Oversized and hostile input: rejected or handled within bounded memory and time, with a clear
//! error naming the file; never a panic, never an invalid label.

use crate::common;

use common::*;
use proptest::prelude::*;

#[test]
fn a_100_mb_config_file_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.yaml");
    std::fs::File::create(&path).unwrap().set_len(100 << 20).unwrap();
    let out = nvlabel(Some("t4")).args(PRINT).arg("--config-file").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "a bad configuration");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("huge.yaml") && stderr.contains("limit"), "{stderr}");
}

#[test]
fn a_10000_gpu_machine_is_labelled() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.yaml");
    let mut yaml = String::from("driver_version: \"550.54.15\"\ncuda_driver_version: 12040\ngpus:\n");
    for _ in 0..10_000 {
        yaml.push_str(
            "  - {name: \"NVIDIA H100 80GB HBM3\", memory_mib: 81559, compute_capability: [9, 0]}\n",
        );
    }
    std::fs::write(&path, yaml).unwrap();
    let out = ok(nvlabel(None).env("FAKE_NVML_FIXTURE", &path).args(PRINT));
    assert!(out.contains("nvidia.com/gpu.count=10000\n"), "{out}");
}

#[test]
fn a_1_mb_device_name_excludes_only_that_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("name.yaml");
    let name = "X".repeat(1 << 20);
    std::fs::write(
        &path,
        format!(
            "driver_version: \"550.54.15\"\ncuda_driver_version: 12040\ngpus:\n  \
             - {{name: \"{name}\", memory_mib: 1, compute_capability: [8, 0]}}\n  \
             - {{name: \"Tesla T4\", memory_mib: 15360, compute_capability: [7, 5]}}\n"
        ),
    )
    .unwrap();
    let out = nvlabel(None).env("FAKE_NVML_FIXTURE", &path).args(PRINT).output().unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("nvidia.com/gpu.product=Tesla-T4\n") && stdout.contains("nvidia.com/gpu.count=1\n"),
        "{stdout}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("nvmlDeviceGetName") && stderr.contains("device=0"), "{stderr}");
}

#[test]
fn a_runaway_machine_type_file_gives_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("product_name");
    std::fs::File::create(&path).unwrap().set_len(100 << 20).unwrap();
    let out = nvlabel(Some("t4")).args(PRINT).arg("--machine-type-file").arg(&path).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("nvidia.com/gpu.machine=unknown\n"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("limit"));
}

/// A FIFO at `path`.
fn mkfifo(path: &std::path::Path) {
    assert!(std::process::Command::new("mkfifo").arg(path).status().unwrap().success());
}

/// `cmd`'s exit code, stdout and stderr; a run still going after a minute is killed and fails
/// the test (a guard against a hang, no measure of speed).
fn finishes(cmd: &mut std::process::Command) -> (i32, String, String) {
    use std::process::Stdio;
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(60) {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!("hung on a FIFO; stderr: {}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

/// A FIFO where a file is read (nobody ever writes it) would block a plain open forever: as the
/// machine-type file it is one warning naming it and `gpu.machine=unknown`, as a missing file
/// is; in the sysfs tree the vGPU scan fails naming it; the one-shot run ends either way.
#[test]
fn a_fifo_where_a_file_is_read_never_blocks_a_one_shot_run() {
    let dir = tempfile::tempdir().unwrap();
    let machine = dir.path().join("product_name");
    mkfifo(&machine);
    let (code, out, stderr) =
        finishes(nvlabel(Some("t4")).args(PRINT).arg("--machine-type-file").arg(&machine));
    assert_eq!(code, 0, "{stderr}");
    assert!(out.contains("nvidia.com/gpu.machine=unknown\n"), "{out}");
    let named: Vec<&str> = stderr.lines().filter(|l| l.contains(machine.to_str().unwrap())).collect();
    assert_eq!(named.len(), 1, "{stderr}");
    assert!(named[0].contains("a FIFO, not a regular file"), "{stderr}");

    let sysfs = dir.path().join("sys");
    let device = sysfs.join("bus/pci/devices/0000:01:00.0");
    std::fs::create_dir_all(&device).unwrap();
    std::fs::write(device.join("vendor"), "0x10de\n").unwrap();
    std::fs::write(device.join("class"), "0x030200\n").unwrap();
    let config = device.join("config");
    mkfifo(&config);
    let (code, out, stderr) = finishes(nvlabel_in(Some("t4"), sysfs.to_str().unwrap()).args(PRINT));
    assert_eq!(code, 0, "{stderr}");
    assert!(out.contains("nvidia.com/gpu.count=1\n"), "{out}");
    assert!(stderr.contains(&format!("{}: a FIFO, not a regular file", config.display())), "{stderr}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any text as a config file: a result or an error, never a panic.
    #[test]
    fn config_text_never_panics(text in prop_oneof![
        any::<String>(),
        "(version: v1\n)?(flags:\n  (migStrategy|failOnInitError|gfd): [a-z0-9{}\\[\\]:, ]{0,20}\n)?sharing:\n  (timeSlicing|mps):\n    (renameByDefault: [a-z]{0,5}\n)?    resources:\n      - name: [a-z./+$0-9-]{0,20}\n        replicas: -?[0-9]{0,12}\n(        devices: [\\[\\]a-zA-Z0-9:,\"/ -]{0,40}\n)?",
    ]) {
        let _ = nvlabel::config::ConfigFile::parse(&text);
    }

    /// Any bytes as PCI config space: the capability walker and record decoder never panic.
    #[test]
    fn pci_config_bytes_never_panic(config in proptest::collection::vec(any::<u8>(), 0..600)) {
        if let Some(cap) = nvlabel::probe::sysfs::vendor_capability(&config) {
            let _ = nvlabel::probe::sysfs::is_vgpu(cap);
            if let Some((v, b)) = nvlabel::probe::sysfs::host_driver(cap) {
                prop_assert!(v.chars().count() <= 10 && b.chars().count() <= 10, "at most 10 characters each");
            }
        }
    }

    /// Any snapshot text: a result or an error, never a panic.
    #[test]
    fn snapshot_text_never_panics(text in any::<String>()) {
        let _ = nvlabel::snapshot::Snapshot::from_yaml(&text);
    }
}
