//! Oversized and hostile input: rejected or handled within bounded memory and time, with a clear
//! error naming the file; never a panic, never an invalid label.

mod common;

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
