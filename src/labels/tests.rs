//! `labels::compute` as a whole: GFD's `TestRunOneshot` scenario, a node without GPUs, and the
//! final check that nothing invalid leaves it. Each labeler's own cases sit beside it
//! (`#[cfg(test)] mod tests` at its end, or `<labeler>_tests.rs`); shared builders are in
//! `test_support.rs`.

use super::*;
use crate::labels::test_support::{full, l};
use crate::snapshot::{Gpu, MachineType, VgpuDevice};

/// GFD's `TestRunOneshot`: one full mock GPU, the mock manager (driver 400.300, CUDA 8.0), the
/// machine file `product-name`, PCI class 0 and the vGPU mock: 28 labels.
#[test]
fn gfd_run_oneshot_scenario() {
    let snap = Snapshot {
        driver_version: Some("400.300".into()),
        cuda_driver_version: Some(8000),
        gpus: vec![full()],
        machine_type: MachineType {
            path: "/tmp/machine-type".into(),
            content: Some("product-name\n".into()),
            error: None,
        },
        vgpu: Some(vec![VgpuDevice {
            address: "0000:01:00.0".into(),
            host_driver_version: Some("460.16".into()),
            host_driver_branch: Some("r460_00".into()),
        }]),
        issues: vec![],
        ..Snapshot::default()
    };
    let config = LabelConfig {
        mig_strategy: MigStrategy::None,
        sharing: Sharing::default(),
        timestamp: Some(1_700_000_000),
        extended: false,
        profile: crate::labels::Profile::DevicePlugin,
    };
    let got = compute(&snap, &config).labels;
    assert_eq!(got.len(), 28);
    for (k, v) in [
        ("gfd.timestamp", "1700000000"),
        ("gpu.machine", "product-name"),
        ("mps.capable", "false"),
        ("gpu.mode", "unknown"),
        ("vgpu.present", "true"),
        ("vgpu.host-driver-version", "460.16"),
        ("vgpu.host-driver-branch", "r460_00"),
        ("mig.capable", "false"),
        ("gpu.count", "1"),
        ("gpu.product", "MOCKMODEL"),
        ("cuda.driver.rev", ""),
        ("cuda.runtime-version.full", "8.0"),
    ] {
        assert_eq!(got[&format!("nvidia.com/{k}")], v, "{k}");
    }
    let no_ts = LabelConfig { timestamp: None, ..config };
    assert_eq!(compute(&snap, &no_ts).labels.len(), 27);
}

#[test]
fn no_gpus_gives_only_node_labels() {
    let snap = Snapshot { vgpu: Some(vec![]), ..Default::default() };
    let config = LabelConfig {
        mig_strategy: MigStrategy::Single,
        sharing: Sharing::default(),
        timestamp: Some(1),
        extended: false,
        profile: crate::labels::Profile::DevicePlugin,
    };
    assert_eq!(compute(&snap, &config).labels, l(&["gfd.timestamp=1", "vgpu.present=false"]));
}

#[test]
fn invalid_values_never_leave_compute() {
    let weird = Gpu { name: "((()))".into(), compute_capability: [-1, -1], ..full() };
    let snap = Snapshot {
        gpus: vec![weird],
        machine_type: MachineType {
            path: "/m".into(),
            content: Some("To Be Filled By O.E.M.".into()),
            error: None,
        },
        vgpu: Some(vec![VgpuDevice {
            address: "x".into(),
            host_driver_version: Some("\u{1}bad version!\u{2}".into()),
            host_driver_branch: Some("...".into()),
        }]),
        driver_version: Some("550.54.15-".into()),
        ..Default::default()
    };
    let config = LabelConfig {
        mig_strategy: MigStrategy::None,
        sharing: Sharing::default(),
        timestamp: None,
        extended: false,
        profile: crate::labels::Profile::DevicePlugin,
    };
    let out = compute(&snap, &config);
    for (k, v) in &out.labels {
        assert!(value::is_valid_key(k) && value::is_valid_value(v), "{k}={v}");
    }
    assert!(!out.labels.contains_key("nvidia.com/gpu.product"));
    assert!(!out.labels.contains_key("nvidia.com/gpu.compute.major"));
    assert!(!out.labels.contains_key("nvidia.com/gpu.compute.minor"));
    assert_eq!(out.labels["nvidia.com/gpu.family"], "undefined", "GFD's family for -1/-1 is valid and stays");
    assert_eq!(out.labels["nvidia.com/gpu.machine"], "To-Be-Filled-By-O.E.M");
    assert_eq!(out.labels["nvidia.com/vgpu.host-driver-version"], "bad-version");
    assert!(!out.labels.contains_key("nvidia.com/vgpu.host-driver-branch"));
    // The version labeler refuses the driver string itself, so no driver label is left to filter.
    assert!(out.warnings.iter().any(|w| w.contains("omitting driver version labels")), "{:?}", out.warnings);
    assert!(out.labels.keys().all(|k| !k.contains("cuda.driver")));
    assert!(!out.warnings.iter().any(|w| w.contains("omitting invalid label")), "{:?}", out.warnings);
}
