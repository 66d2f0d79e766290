//! The DRA label profile (`--allocation-mode dra`) on every bundled machine, as exact files, and
//! the device-plugin profile named explicitly, which must be GFD's goldens byte for byte.
//! Regenerate with `UPDATE_GOLDEN=1 cargo test --test local -- golden_dra::` and review the diff.

use crate::common;

use common::*;

fn assert_all(failures: Vec<String>) {
    assert!(failures.is_empty(), "{} golden file(s) differ:\n{}", failures.len(), failures.join("\n"));
}

/// One golden per machine: the DRA profile does not depend on the MIG strategy, so every
/// strategy must print that one file.
#[test]
fn every_fixture_in_dra_mode() {
    let mut failures = Vec::new();
    for machine in fixtures() {
        for strategy in ["none", "single", "mixed"] {
            let mut cmd = nvlabel(Some(&machine));
            // Through env, as the GPU Operator sets it on every node: the flag is refused here.
            cmd.args(PRINT).args(["--allocation-mode", "dra"]).env("MIG_STRATEGY", strategy);
            failures.extend(golden(&format!("{machine}.dra.labels"), &ok(&mut cmd)));
        }
    }
    assert_all(failures);
}

/// `--extended-labels` adds to the DRA profile what it adds to GFD's.
#[test]
fn every_fixture_in_dra_mode_with_extended_labels() {
    let mut failures = Vec::new();
    for machine in fixtures() {
        let mut cmd = nvlabel(Some(&machine));
        cmd.args(PRINT).args(["--allocation-mode", "dra", "--extended-labels"]);
        failures.extend(golden(&format!("{machine}.dra-extended.labels"), &ok(&mut cmd)));
    }
    assert_all(failures);
}

/// Parity: `device-plugin` named on the command line, in env or in the config file is the
/// default, byte for byte, under every strategy.
#[test]
fn device_plugin_mode_is_gfd_byte_for_byte() {
    let mut failures = Vec::new();
    for machine in fixtures() {
        for strategy in ["none", "single", "mixed"] {
            let mut cmd = nvlabel(Some(&machine));
            cmd.args(PRINT).args(["--allocation-mode", "device-plugin", "--mig-strategy", strategy]);
            failures.extend(golden(&format!("{machine}.{strategy}.labels"), &ok(&mut cmd)));
        }
    }
    let mut env = nvlabel(Some("a100-mig-mixed"));
    env.args(PRINT).env("NVLABEL_ALLOCATION_MODE", "device-plugin");
    failures.extend(golden("a100-mig-mixed.none.labels", &ok(&mut env)));
    assert_all(failures);
}

/// A sharing config in DRA mode changes nothing and says so once.
#[test]
fn a_sharing_config_in_dra_mode_is_ignored_with_one_warning() {
    for (machine, config) in [("t4", "time-slicing-gpu-4"), ("a100-mig-mixed", "time-slicing-mig-mixed")] {
        let path = repo().join("testdata/configs").join(format!("{config}.yaml"));
        let (code, stdout, stderr) = run(nvlabel(Some(machine))
            .args(PRINT)
            .args(["--allocation-mode", "dra", "--config-file"])
            .arg(&path));
        assert_eq!(code, 0, "{stderr}");
        assert_all(golden(&format!("{machine}.dra.labels"), &stdout).into_iter().collect());
        let warned = stderr
            .lines()
            .filter(|l| l.contains("dra ignores the device-plugin config's sharing section"))
            .count();
        assert_eq!(warned, 1, "{stderr}");
    }
}
