//! Golden tests: the binary, loading the fake NVML library, against exact expected label files.
//! Regenerate with `UPDATE_GOLDEN=1 cargo test --workspace --test local -- golden::` and review the diff.

use crate::common;

use common::*;

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

/// The probe's snapshot of every fixture, exactly (the benchmarks read these).
#[test]
fn every_fixture_probes_to_its_snapshot() {
    let mut failures = Vec::new();
    for machine in fixtures() {
        let yaml = ok(nvlabel(Some(&machine)).arg("probe"));
        failures.extend(golden(&format!("{machine}.snapshot.yaml"), &yaml));
    }
    assert_all(failures);
}

/// Device-plugin config files (`testdata/configs/`) on fixtures, through the binary.
#[test]
fn sharing_config_files() {
    let cases: &[(&str, &str, &[&str])] = &[
        ("rtx4090-x10", "time-slicing-gpu-2", &[]),
        ("t4", "time-slicing-gpu-4", &[]),
        ("t4", "mps-gpu-10", &[]),
        ("a100-mig-mixed", "time-slicing-mig-mixed", &[]),
        ("a100-mig-single", "time-slicing-mig-single", &[]),
        ("a100-mig-single", "mps-gpu-10", &["--mig-strategy", "single"]),
        ("long-name", "time-slicing-1g.24gb", &[]),
        ("h100-x8", "rename-by-default", &[]),
    ];
    let mut failures = Vec::new();
    for (machine, config, extra) in cases {
        let path = repo().join("testdata/configs").join(format!("{config}.yaml"));
        let out = ok(nvlabel(Some(machine)).args(PRINT).arg("--config-file").arg(path).args(*extra));
        failures.extend(golden(&format!("{machine}.{config}.labels"), &out));
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

/// The extended labels of every fixture (mixed strategy), exactly.
#[test]
fn extended_labels_of_every_fixture() {
    let mut failures = Vec::new();
    for machine in fixtures() {
        let out =
            ok(nvlabel(Some(&machine)).args(PRINT).args(["--mig-strategy", "mixed", "--extended-labels"]));
        failures.extend(golden(&format!("{machine}.extended.labels"), &out));
    }
    assert_all(failures);
}

/// The extended labels on a fixture are the same under every MIG strategy and sharing config:
/// that is what they are for. Without the flag the output is GFD's, byte for byte.
#[test]
fn extended_labels_never_change_with_strategy_or_sharing() {
    let is_extended = |l: &str| {
        [
            "nvidia.com/gpu.model",
            "nvidia.com/gpu.physical.",
            "nvidia.com/gpu.pci-device-id",
            // The topology labels.
            "nvidia.com/gpu.nvlink.",
            "nvidia.com/gpu.p2p=",
            "nvidia.com/gpu.pcie.",
            "nvidia.com/gpu.numa-nodes=",
            "nvidia.com/gpu.fabric.",
            "nvidia.com/gpudirect.",
            "nvidia.com/cc.",
        ]
        .iter()
        .any(|p| l.starts_with(p))
    };
    let extended =
        |out: &str| -> Vec<String> { out.lines().filter(|l| is_extended(l)).map(String::from).collect() };
    for (machine, configs) in [
        ("a100-mig-single", &["time-slicing-mig-single", "mps-gpu-10"][..]),
        ("a100-mig-mixed", &["time-slicing-mig-mixed"][..]),
        ("t4", &["time-slicing-gpu-4", "mps-gpu-10"][..]),
        ("mixed-models", &["time-slicing-gpu-2"][..]),
        ("dgx-h100", &["time-slicing-gpu-2", "mps-gpu-10"][..]),
        ("gb200-nvl", &["time-slicing-gpu-4"][..]),
    ] {
        let base = ok(nvlabel(Some(machine)).args(PRINT).arg("--extended-labels"));
        let want = extended(&base);
        assert!(want.iter().any(|l| l.starts_with("nvidia.com/gpu.model=")), "{machine}: {base}");
        for strategy in ["none", "single", "mixed"] {
            for config in configs.iter().map(Some).chain([None]) {
                let mut cmd = nvlabel(Some(machine));
                cmd.args(PRINT).args(["--extended-labels", "--mig-strategy", strategy]);
                if let Some(c) = config {
                    cmd.arg("--config-file").arg(repo().join("testdata/configs").join(format!("{c}.yaml")));
                }
                let out = ok(&mut cmd);
                assert_eq!(extended(&out), want, "{machine} {strategy} {config:?}");
                let mut plain = nvlabel(Some(machine));
                plain.args(PRINT).args(["--mig-strategy", strategy]);
                if let Some(c) = config {
                    plain.arg("--config-file").arg(repo().join("testdata/configs").join(format!("{c}.yaml")));
                }
                let gfd = ok(&mut plain);
                let without: Vec<&str> = out.lines().filter(|l| !is_extended(l)).collect();
                assert_eq!(
                    without.join("\n") + "\n",
                    gfd,
                    "{machine} {strategy} {config:?}: GFD's labels unchanged"
                );
            }
        }
    }
}

/// The topology labels read the `module/` directory of the sysfs root: the older RDMA module
/// (`nv_peer_mem`) counts, and GPUDirect Storage shows when `nvidia_fs` is loaded.
#[test]
fn gpudirect_modules_of_another_sysfs_tree() {
    let out = ok(nvlabel_in(Some("t4"), "testdata/sysfs-vgpu").args(PRINT).arg("--extended-labels"));
    assert_all(golden("t4.vgpu-extended.labels", &out).into_iter().collect());
}

/// A recorded snapshot (`nvlabel probe` records the topology whatever the flags) gives the same
/// extended labels without NVML as the live probe did.
#[test]
fn recorded_snapshots_replay_the_extended_labels() {
    let mut failures = Vec::new();
    for machine in fixtures() {
        let snap = repo().join("testdata/golden").join(format!("{machine}.snapshot.yaml"));
        let mut replay = nvlabel(None);
        replay.args(PRINT).args(["--mig-strategy", "mixed", "--extended-labels", "--snapshot"]).arg(snap);
        failures.extend(golden(&format!("{machine}.extended.labels"), &ok(&mut replay)));
    }
    assert_all(failures);
}

/// mig-strategy=single on a node whose MIG GPUs are all partitioned but with different profiles:
/// the labels say MIG-INVALID (the golden `a100-mig-uneven.single.labels`) and the log says why.
#[test]
fn mig_single_with_uneven_profiles_says_why_it_is_invalid() {
    let (code, stdout, stderr) =
        run(nvlabel(Some("a100-mig-uneven")).args(PRINT).args(["--mig-strategy", "single"]));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB-MIG-INVALID\n"), "{stdout}");
    assert!(
        stderr.contains("Invalid configuration detected for mig-strategy=single: more than one MIG device type present on node"),
        "{stderr}"
    );
}
