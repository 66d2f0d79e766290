//! Golden tests: the binary, loading the fake NVML library, against exact expected label files.
//! Regenerate with `UPDATE_GOLDEN=1 cargo test --workspace --test golden` and review the diff.

mod common;

use common::*;
use nvlabel::labels::{self, LabelConfig, MigStrategy};
use nvlabel::output::render_text;
use nvlabel::sharing::Sharing;
use nvlabel::snapshot::Snapshot;

fn assert_all(failures: Vec<String>) {
    assert!(failures.is_empty(), "{} golden file(s) differ:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn every_fixture_under_every_mig_strategy() {
    let mut failures = Vec::new();
    for machine in fixtures() {
        for strategy in ["none", "single", "mixed"] {
            let out = ok(nvlabel(Some(&machine)).args(PRINT).args(["--mig-strategy", strategy]));
            failures.extend(golden(&format!("{machine}.{strategy}.labels"), &out));
        }
    }
    assert_all(failures);
}

/// Probes a fixture through the binary and reads the snapshot back.
fn probed(machine: &str) -> Snapshot {
    let yaml = ok(nvlabel(Some(machine)).arg("probe"));
    Snapshot::from_yaml(&yaml).unwrap()
}

#[test]
fn sharing_configs() {
    let cases: &[(&str, &str, MigStrategy, Sharing)] = &[
        (
            "rtx4090-x10",
            "time-slicing-gpu-2",
            MigStrategy::None,
            Sharing::time_slicing(&[("nvidia.com/gpu", 2)]),
        ),
        ("t4", "time-slicing-gpu-4", MigStrategy::None, Sharing::time_slicing(&[("nvidia.com/gpu", 4)])),
        ("t4", "mps-gpu-10", MigStrategy::None, Sharing::mps(&[("nvidia.com/gpu", 10)])),
        (
            "a100-mig-mixed",
            "time-slicing-mig",
            MigStrategy::Mixed,
            Sharing::time_slicing(&[
                ("nvidia.com/gpu", 2),
                ("nvidia.com/mig-1g.5gb", 4),
                ("nvidia.com/mig-1c.3g.20gb", 2),
            ]),
        ),
        (
            "a100-mig-single",
            "time-slicing-gpu-3",
            MigStrategy::Single,
            Sharing::time_slicing(&[("nvidia.com/gpu", 3)]),
        ),
        ("a100-mig-single", "mps-gpu-2", MigStrategy::Single, Sharing::mps(&[("nvidia.com/gpu", 2)])),
        (
            "long-name",
            "time-slicing-mig",
            MigStrategy::Mixed,
            Sharing::time_slicing(&[("nvidia.com/mig-1g.24gb", 2)]),
        ),
    ];
    let mut failures = Vec::new();
    for (machine, name, strategy, sharing) in cases {
        let config = LabelConfig { mig_strategy: *strategy, sharing: sharing.clone(), timestamp: None };
        let out = render_text(&labels::compute(&probed(machine), &config).labels);
        failures.extend(golden(&format!("{machine}.{}.{name}.labels", strategy.as_str()), &out));
    }
    assert_all(failures);
}

#[test]
fn vgpu_guest() {
    let out = ok(nvlabel_in(Some("t4"), "testdata/sysfs-vgpu").args(PRINT));
    assert_all(golden("t4.vgpu.labels", &out).into_iter().collect());
}

#[test]
fn json_output() {
    let out = ok(nvlabel(Some("h100-x8")).args(PRINT).args(["--format", "json"]));
    assert_all(golden("h100-x8.none.json", &out).into_iter().collect());
}

#[test]
fn no_driver_without_fail_on_init_error_gives_node_labels_only() {
    let out = ok(nvlabel_in(None, "testdata/sysfs-vgpu").args(PRINT).arg("--fail-on-init-error=false"));
    assert_all(golden("no-driver.vgpu.labels", &out).into_iter().collect());
}
