//! The binary's behaviour as a user meets it: faults, a missing driver, env precedence, the
//! feature file, and snapshots as test input.

use crate::common;

use common::*;
use std::process::Command;

/// Writes a fixture into a temporary directory and returns a command using it.
fn with_fixture(dir: &tempfile::TempDir, yaml: &str) -> Command {
    let path = dir.path().join("machine.yaml");
    std::fs::write(&path, yaml).unwrap();
    let mut cmd = nvlabel(None);
    cmd.env("FAKE_NVML_FIXTURE", &path);
    cmd
}

#[test]
fn a_lost_gpu_is_excluded_and_named_in_the_log() {
    let (code, stdout, stderr) = run(nvlabel(Some("faulty")).args(PRINT));
    assert_eq!(code, 0);
    assert!(stdout.contains("nvidia.com/gpu.count=3\n"), "{stdout}");
    assert!(stderr.contains("device=2"), "{stderr}");
    assert!(stderr.contains("nvmlDeviceGetCudaComputeCapability"), "{stderr}");
    assert!(stderr.contains("GpuLost"), "{stderr}");
}

#[test]
fn a_missing_driver_is_one_clear_line_and_exit_1() {
    let (code, stdout, stderr) = run(nvlabel(None).args(PRINT));
    assert_eq!(code, 1);
    assert_eq!(stdout, "");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("nvlabel: error: no NVIDIA driver found"), "{stderr}");
    let (code, _, stderr) =
        run(nvlabel(None).args(PRINT).args(["--nvml-library", "/nonexistent/libnvidia-ml.so.1"]));
    assert_eq!(code, 1);
    assert!(
        stderr.contains("no NVIDIA driver found") && stderr.contains("/nonexistent/libnvidia-ml.so.1"),
        "{stderr}"
    );
}

#[test]
fn without_fail_on_init_error_a_missing_driver_gives_only_the_timestamp() {
    let mut cmd = nvlabel(None);
    cmd.args(["--oneshot", "--output-file=", "--use-node-feature-api=false", "--fail-on-init-error=false"]);
    let (code, stdout, _) = run(&mut cmd);
    assert_eq!(code, 0);
    let keys: Vec<&str> = stdout.lines().map(|l| l.split('=').next().unwrap()).collect();
    assert_eq!(keys, ["nvidia.com/gfd.timestamp", "nvidia.com/vgpu.present"]);
}

#[test]
fn an_invalid_fixture_is_an_nvml_init_failure_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, stderr) = run(with_fixture(&dir, "driver_version: 1\ngpus: [{nam: x}]\n").args(PRINT));
    assert_eq!(code, 1);
    assert!(stderr.contains("machine.yaml"), "the fake names the fixture: {stderr}");
    assert!(stderr.contains("failed to initialize NVML"), "{stderr}");
}

#[test]
fn an_unnameable_mig_profile_skips_only_that_device() {
    let mut cmd = nvlabel(None);
    cmd.env("FAKE_NVML_FIXTURE", test_machine("a100-mig-unknown-profile"));
    let (code, stdout, stderr) = run(cmd.args(PRINT).args(["--mig-strategy", "mixed"]));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("nvidia.com/mig-1g.5gb.count=2\n"), "{stdout}");
    assert!(
        stderr.contains("invalid GPU Instance Profile ID: 17") && stderr.contains("device=0:1"),
        "{stderr}"
    );
}

#[test]
fn a_failing_mig_device_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    // Eight A100s with seven 1g.5gb devices each.
    let faults = "faults:\n  - {function: nvmlDeviceGetAttributes_v2, device: \"0:0\", error: unknown}\n";
    let yaml = fixture_with("a100-mig-single", faults);
    let (code, stdout, stderr) = run(with_fixture(&dir, &yaml).args(PRINT).args(["--mig-strategy", "mixed"]));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("nvidia.com/mig-1g.5gb.count=55\n"), "{stdout}");
    assert!(stderr.contains("device=0:0") && stderr.contains("nvmlDeviceGetAttributes_v2"), "{stderr}");
}

#[test]
fn a_failing_memory_query_excludes_that_gpu_and_keeps_the_memory_label() {
    // Eight GPUs of one model; GPU 7 (the model's last GPU, whose values GFD reports) cannot say
    // its memory. The node keeps gpu.memory from the healthy GPUs.
    let dir = tempfile::tempdir().unwrap();
    let faults = "faults:\n  - {function: nvmlDeviceGetMemoryInfo_v2, device: \"7\", error: timeout}\n";
    let yaml = fixture_with("a100-mig-single", faults);
    let (code, stdout, stderr) = run(with_fixture(&dir, &yaml).args(PRINT));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("nvidia.com/gpu.count=7\n"), "{stdout}");
    assert!(stdout.contains("nvidia.com/gpu.memory=40960\n"), "{stdout}");
    assert!(stderr.contains("device=7") && stderr.contains("GPU excluded from this pass"), "{stderr}");
}

#[test]
fn a_failing_device_count_fails_the_pass() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = fixture_with("t4", "faults:\n  - {function: nvmlDeviceGetCount_v2, error: unknown}\n");
    let (code, _, stderr) = run(with_fixture(&dir, &yaml).args(PRINT));
    assert_eq!(code, 1);
    assert!(stderr.contains("error getting devices"), "{stderr}");
}

#[test]
fn env_vars_follow_gfd_precedence() {
    let labels = |cmd: &mut Command| ok(cmd);
    let out = labels(nvlabel(Some("t4")).args(PRINT).env("MIG_STRATEGY", "mixed"));
    assert!(out.contains("nvidia.com/mig.strategy=mixed\n"));
    let out = labels(
        nvlabel(Some("t4")).args(PRINT).env("MIG_STRATEGY", "mixed").env("GFD_MIG_STRATEGY", "single"),
    );
    assert!(out.contains("nvidia.com/mig.strategy=single\n"));
    let out = labels(
        nvlabel(Some("t4")).args(PRINT).args(["--mig-strategy", "none"]).env("GFD_MIG_STRATEGY", "single"),
    );
    assert!(!out.contains("mig.strategy"));
    let (code, _, stderr) = run(nvlabel(Some("t4")).args(PRINT).env("GFD_MIG_STRATEGY", "Mixed"));
    assert_eq!(code, 2, "a usage error");
    assert!(stderr.contains("GFD_MIG_STRATEGY") && stderr.contains("\"Mixed\""), "{stderr}");
    // GFD's own env names drive the whole one-shot run.
    let mut cmd = nvlabel(Some("t4"));
    cmd.envs([
        ("GFD_ONESHOT", "true"),
        ("GFD_NO_TIMESTAMP", "true"),
        ("GFD_OUTPUT_FILE", ""),
        ("GFD_USE_NODE_FEATURE_API", "false"),
    ]);
    assert_eq!(ok(&mut cmd), ok(nvlabel(Some("t4")).args(PRINT)));
}

#[test]
fn the_feature_file_is_written_atomically_with_the_printed_labels() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gfd");
    let printed = ok(nvlabel(Some("h100-x8")).args(PRINT));
    ok(nvlabel(Some("h100-x8"))
        .args(["--oneshot", "--no-timestamp", "--use-node-feature-api=false", "-o"])
        .arg(&path));
    let written = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        written,
        format!("{}\n{printed}", nvlabel::publish::MARKER),
        "the marker line, then the labels"
    );
    let entries: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(entries.len(), 1, "no temporary file left");
}

#[test]
fn a_probed_snapshot_reproduces_the_labels_without_nvml() {
    let dir = tempfile::tempdir().unwrap();
    for machine in fixtures() {
        let yaml = ok(nvlabel(Some(&machine)).arg("probe"));
        let snap = dir.path().join(format!("{machine}.yaml"));
        std::fs::write(&snap, &yaml).unwrap();
        for strategy in ["none", "single", "mixed"] {
            let live = ok(nvlabel(Some(&machine)).args(PRINT).args(["--mig-strategy", strategy]));
            let mut replay = nvlabel(None);
            replay.args(PRINT).args(["--mig-strategy", strategy]).arg("--snapshot").arg(&snap);
            assert_eq!(ok(&mut replay), live, "{machine} {strategy}");
        }
    }
}

#[test]
fn snapshot_errors_name_file_and_position() {
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("bad.yaml");
    std::fs::write(&snap, "gpus:\n  - index: 0\n    nmae: x\n").unwrap();
    let (code, _, stderr) = run(nvlabel(None).args(PRINT).arg("--snapshot").arg(&snap));
    assert_eq!(code, 1);
    assert!(stderr.contains("bad.yaml") && stderr.contains("nmae"), "{stderr}");
}

#[test]
fn the_node_feature_api_needs_the_node_name_as_in_gfd() {
    let (code, _, stderr) = run(nvlabel(Some("t4")).args(["--oneshot", "--output-file="]));
    assert_eq!(code, 2, "a bad configuration");
    assert!(stderr.contains("required flag node-name not set"), "{stderr}");
    let (code, _, stderr) = run(nvlabel(Some("t4")).args(["--oneshot", "--sink", "node"]));
    assert_eq!(code, 2);
    assert!(stderr.contains("required flag node-name not set"), "{stderr}");
}

#[test]
fn json_logs() {
    let (_, _, stderr) = run(nvlabel(Some("faulty")).args(PRINT).args(["--log-format", "json"]));
    let line = stderr.lines().find(|l| l.contains("GPU excluded")).expect("a warning");
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["device"], "2");
    assert_eq!(v["function"], "nvmlDeviceGetCudaComputeCapability");
    assert_eq!(v["level"], "WARN");
}

fn config(name: &str) -> std::path::PathBuf {
    repo().join("testdata/configs").join(format!("{name}.yaml"))
}

#[test]
fn an_invalid_config_file_stops_start_up_with_file_field_and_message() {
    let (code, stdout, stderr) =
        run(nvlabel(Some("t4")).args(PRINT).arg("--config-file").arg(config("invalid-replicas")));
    assert_eq!(code, 2, "a bad configuration");
    assert_eq!(stdout, "");
    assert!(
        stderr.contains("invalid-replicas.yaml: sharing.timeSlicing.resources[0].replicas: number of replicas must be >= 2"),
        "{stderr}"
    );
}

#[test]
fn config_file_from_gfd_env_names_and_its_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cfg.yaml");
    std::fs::write(&path, "version: v1\nflags:\n  migStrateg: mixed\nsharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 3}]\n").unwrap();
    for var in ["GFD_CONFIG_FILE", "CONFIG_FILE"] {
        let (code, stdout, stderr) = run(nvlabel(Some("t4")).args(PRINT).env(var, &path));
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.contains("nvidia.com/gpu.replicas=3\n"), "{var}: {stdout}");
        assert!(
            stderr.contains("unknown field flags.migStrateg is ignored") && stderr.contains("cfg.yaml"),
            "{stderr}"
        );
    }
}

#[test]
fn the_command_line_beats_the_config_file() {
    let out = ok(nvlabel(Some("a100-mig-mixed"))
        .args(PRINT)
        .arg("--config-file")
        .arg(config("time-slicing-mig-mixed"))
        .args(["--mig-strategy", "none"]));
    assert!(!out.contains("mig.strategy"), "{out}");
    let out = ok(nvlabel(Some("a100-mig-mixed"))
        .args(PRINT)
        .arg("--config-file")
        .arg(config("time-slicing-mig-mixed")));
    assert!(out.contains("nvidia.com/mig.strategy=mixed\n"), "{out}");
}

#[test]
fn the_daemon_relabels_on_sighup_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let machine = dir.path().join("machine.yaml");
    std::fs::copy(fixture("t4"), &machine).unwrap();
    let out = dir.path().join("gfd");
    let mut cmd = nvlabel(None);
    cmd.env("FAKE_NVML_FIXTURE", &machine)
        .args(["--no-timestamp", "--use-node-feature-api=false", "--sleep-interval", "infinite", "-o"])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    wait_for_line(&out, "nvidia.com/gpu.count=1");
    // The node changes (a GPU appears); SIGHUP makes the daemon look again at once.
    std::fs::copy(fixture("rtx4090-x10"), &machine).unwrap();
    signal(&child, "-HUP");
    wait_for_line(&out, "nvidia.com/gpu.count=10");
    signal(&child, "-TERM");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(std::fs::read_to_string(&out).unwrap().contains("nvidia.com/gpu.count=10\n"), "labels stay");
}

#[test]
fn one_shot_config_dir_selection() {
    let dir = tempfile::tempdir().unwrap();
    for (key, config_name) in
        [("default", "time-slicing-gpu-2"), ("mps", "mps-gpu-10"), ("four", "time-slicing-gpu-4")]
    {
        std::fs::copy(config(config_name), dir.path().join(key)).unwrap();
    }
    let replicas = |extra: &[&str]| {
        let out = ok(nvlabel(Some("t4")).args(PRINT).arg("--config-dir").arg(dir.path()).args(extra));
        out.lines().find(|l| l.starts_with("nvidia.com/gpu.replicas=")).unwrap().to_string()
    };
    assert_eq!(replicas(&[]), "nvidia.com/gpu.replicas=2", "the `default` key");
    assert_eq!(replicas(&["--config-default", "mps"]), "nvidia.com/gpu.replicas=10");
    let (code, _, stderr) = run(nvlabel(Some("t4"))
        .args(PRINT)
        .arg("--config-dir")
        .arg(dir.path())
        .args(["--config-default", "nope"]));
    assert_eq!(code, 2, "a bad configuration");
    assert!(stderr.contains("\"nope\"") && stderr.contains("--config-default"), "{stderr}");
}

/// A directory with no keys is said to have none, not several that nothing picks from.
#[test]
fn an_empty_config_dir_is_said_to_have_no_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, stderr) = run(nvlabel(Some("t4")).args(PRINT).arg("--config-dir").arg(dir.path()));
    assert_eq!(code, 0, "no sharing, as with no config at all: {stderr}");
    let warning: Vec<&str> = stderr.lines().filter(|l| l.contains("no config key selected")).collect();
    assert_eq!(warning.len(), 1, "{stderr}");
    assert!(warning[0].contains(&format!("{} has no keys", dir.path().display())), "{stderr}");
    assert!(!stderr.contains("several"), "{stderr}");
}

#[test]
fn it_runs_under_gfds_name_with_gfds_environment() {
    let dir = tempfile::tempdir().unwrap();
    let alias = dir.path().join("gpu-feature-discovery");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_nvlabel"), &alias).unwrap();
    let mut cmd = Command::new(&alias);
    cmd.env_clear()
        .env("NVLABEL_NVML_LIBRARY", fake_nvml())
        .env("NVLABEL_SYSFS_ROOT", repo().join("testdata/sysfs"))
        .env("FAKE_NVML_FIXTURE", fixture("a100-mig-mixed"))
        .envs([
            ("MIG_STRATEGY", "mixed"),
            ("GFD_ONESHOT", "true"),
            ("GFD_NO_TIMESTAMP", "true"),
            ("GFD_OUTPUT_FILE", ""),
            ("USE_NODE_FEATURE_API", "false"),
            ("GFD_FAIL_ON_INIT_ERROR", "true"),
        ]);
    let expected =
        std::fs::read_to_string(repo().join("testdata/golden/a100-mig-mixed.mixed.labels")).unwrap();
    assert_eq!(ok(&mut cmd), expected);
}

#[test]
fn prune_removes_nvlabels_feature_file_and_refuses_anyone_elses() {
    let dir = tempfile::tempdir().unwrap();
    let ours = dir.path().join("nvlabel");
    ok(nvlabel(Some("t4")).args(["--oneshot", "--use-node-feature-api=false", "-o"]).arg(&ours));
    ok(nvlabel(None).args(["prune", "--use-node-feature-api=false", "-o"]).arg(&ours));
    assert!(!ours.exists(), "nvlabel's own file is removed");
    // Nothing left to remove: the prune still says it is done, never ending in silence.
    let (code, _, stderr) = run(nvlabel(None)
        .env("RUST_LOG", "info")
        .args(["prune", "--use-node-feature-api=false", "-o"])
        .arg(&ours));
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("prune done: nothing nvlabel published there is left"), "{stderr}");
    let gfds = dir.path().join("gfd");
    std::fs::write(&gfds, "nvidia.com/gpu.count=1\n").unwrap();
    let (code, _, stderr) =
        run(nvlabel(None).args(["prune", "--use-node-feature-api=false", "-o"]).arg(&gfds));
    assert_eq!(code, 1);
    assert!(
        stderr.contains(&format!("feature file {} was not written by nvlabel", gfds.display())),
        "{stderr}"
    );
    assert!(gfds.exists(), "someone else's file stays");
}

#[test]
fn an_empty_or_comment_only_config_at_start_up_means_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    let plain = ok(nvlabel(Some("t4")).args(PRINT));
    for blank in ["", "# no sharing on this pool\n", "---\n"] {
        std::fs::write(&path, blank).unwrap();
        let (code, stdout, stderr) = run(nvlabel(Some("t4")).args(PRINT).arg("--config-file").arg(&path));
        assert_eq!((code, stdout.as_str()), (0, plain.as_str()), "{blank:?}: {stderr}");
        assert_eq!(stderr, "", "{blank:?}");
    }
}
