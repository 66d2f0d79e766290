//! `nvlabel template`: a pool's labels before its first node. For every bundled machine the
//! template of its snapshot is what a pass on it labels (its golden file) less what only a running
//! node knows; for every homogeneous one without MIG, the catalogue's template is the same; the
//! capacity sharing gives; and bad input is one line naming the flag and the value, exit 2,
//! nothing on stdout.

use crate::common;

use common::*;
use std::path::PathBuf;
use std::process::Output;

/// Keys a template never has: the time a node loaded its config, and its NVLink domain.
const RUN_TIME: [&str; 2] = ["nvidia.com/gfd.timestamp=", "nvidia.com/gpu.clique="];

fn snapshot(machine: &str) -> PathBuf {
    repo().join(format!("testdata/golden/{machine}.snapshot.yaml"))
}

/// `nvlabel template ARGS`, with no fake driver: a template never reads a GPU.
fn template(args: &[&str]) -> Output {
    nvlabel(None).arg("template").args(args).output().unwrap()
}

fn stdout(args: &[&str]) -> String {
    ok(nvlabel(None).arg("template").args(args))
}

/// A golden label file less the run-time keys.
fn expected(golden: &str) -> String {
    let text = std::fs::read_to_string(repo().join("testdata/golden").join(golden)).unwrap();
    text.lines().filter(|l| !RUN_TIME.iter().any(|k| l.starts_with(k))).map(|l| format!("{l}\n")).collect()
}

#[test]
fn every_bundled_machine_s_template_is_what_a_pass_on_it_labels() {
    let mut failures = Vec::new();
    for machine in fixtures() {
        for strategy in ["none", "single", "mixed"] {
            let s = snapshot(&machine);
            let out = stdout(&["--snapshot", s.to_str().unwrap(), "--mig-strategy", strategy]);
            if out != expected(&format!("{machine}.{strategy}.labels")) {
                failures.push(format!("{machine} --mig-strategy {strategy}:\n{out}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn sharing_configs_give_the_labels_a_pass_gives() {
    for (machine, config, extra) in [
        ("rtx4090-x10", "time-slicing-gpu-2", &[][..]),
        ("t4", "mps-gpu-10", &[]),
        ("a100-mig-mixed", "time-slicing-mig-mixed", &[]),
        ("a100-mig-single", "mps-gpu-10", &["--mig-strategy", "single"]),
        ("h100-x8", "rename-by-default", &[]),
    ] {
        let (s, c) = (snapshot(machine), repo().join(format!("testdata/configs/{config}.yaml")));
        let mut args = vec!["--snapshot", s.to_str().unwrap(), "--config-file", c.to_str().unwrap()];
        args.extend(extra);
        assert_eq!(stdout(&args), expected(&format!("{machine}.{config}.labels")), "{machine} {config}");
    }
}

#[test]
fn ten_rtx_4090_time_sliced_twice_are_twenty_gpus_in_every_form() {
    let c = repo().join("testdata/configs/time-slicing-gpu-2.yaml");
    let c = c.to_str().unwrap();
    let from = |format: &str| {
        stdout(&["--gpu", "NVIDIA GeForce RTX 4090", "--count", "10", "--config-file", c, "--format", format])
    };
    let json: serde_json::Value = serde_json::from_str(&from("json")).unwrap();
    assert_eq!(json["capacity"]["nvidia.com/gpu"], 20, "{json}");
    let tags: serde_json::Value = serde_json::from_str(&from("cluster-autoscaler")).unwrap();
    assert_eq!(tags["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"], "20");
    assert_eq!(
        tags["k8s.io/cluster-autoscaler/node-template/label/nvidia.com/gpu.product"],
        "NVIDIA-GeForce-RTX-4090-SHARED"
    );
    assert!(from("cluster-api").contains("capacity.cluster-autoscaler.kubernetes.io/gpu-count: \"20\""));
    let renamed = repo().join("testdata/configs/rename-by-default.yaml");
    let json: serde_json::Value = serde_json::from_str(&stdout(&[
        "--gpu",
        "h100-80gb-hbm3",
        "--count",
        "8",
        "--config-file",
        renamed.to_str().unwrap(),
        "--format",
        "json",
    ]))
    .unwrap();
    assert_eq!(json["capacity"], serde_json::json!({"nvidia.com/gpu.shared": 16}));
}

#[test]
fn the_catalogue_s_template_says_what_it_left_out() {
    let out = template(&["--gpu", "t4", "--count", "1"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    for key in ["nvidia.com/cuda.driver*", "nvidia.com/cuda.runtime*", "nvidia.com/gpu.machine"] {
        assert!(stderr.contains(key), "{key}: {stderr}");
    }
    let pinned = stdout(&[
        "--gpu",
        "t4",
        "--count",
        "1",
        "--driver-version",
        "550.54.15",
        "--cuda-version",
        "12.4",
        "--machine-type",
        "g4dn.xlarge",
    ]);
    for line in [
        "nvidia.com/cuda.driver-version.full=550.54.15",
        "nvidia.com/cuda.runtime-version.full=12.4",
        "nvidia.com/gpu.machine=g4dn.xlarge",
        "nvidia.com/gpu.memory=15360",
    ] {
        assert!(pinned.contains(&format!("{line}\n")), "{line}: {pinned}");
    }
}

/// Bad input: one line naming the flag and the value, exit 2, nothing printed.
#[test]
fn bad_input_is_one_line_naming_the_flag_and_the_value() {
    let s = snapshot("t4");
    let s = s.to_str().unwrap();
    let invalid = repo().join("testdata/configs/invalid-replicas.yaml");
    // A sharing config whose `flags` the labeller refuses is refused here too, as it words it.
    let dir = tempfile::tempdir().unwrap();
    let bad_flag = dir.path().join("bad-strategy.yaml");
    std::fs::write(&bad_flag, "version: v1\nflags:\n  migStrategy: mixd\n").unwrap();
    for (args, names) in [
        (
            vec!["--gpu", "t4", "--config-file", bad_flag.to_str().unwrap()],
            vec!["flags.migStrategy", "\"mixd\"", "bad-strategy.yaml", "use none, single or mixed"],
        ),
        (
            vec!["--gpu", "NVIDIA H100 80GB HMB3", "--count", "8"],
            vec!["--gpu", "HMB3", "NVIDIA H100 80GB HBM3"],
        ),
        (vec!["--gpu", "25b6", "--count", "1"], vec!["25b6", "NVIDIA A2", "NVIDIA A16"]),
        (vec!["--gpu", "t4", "--count", "0"], vec!["--count", "0"]),
        (vec!["--gpu", "t4", "--count", "65"], vec!["--count", "65"]),
        (vec!["--gpu", "t4", "--count", "1", "--snapshot", s], vec!["--snapshot", "--gpu"]),
        (
            vec!["--gpu", "t4", "--count", "1", "--config-file", invalid.to_str().unwrap()],
            vec!["--config-file", "invalid-replicas.yaml", "replicas"],
        ),
        (
            vec!["--gpu", "t4", "--config-dir", "testdata/configs", "--config-default", "no-such-key"],
            vec!["--config-dir", "no-such-key"],
        ),
        (
            vec![
                "--gpu",
                "a100-sxm4-40gb",
                "--count",
                "1",
                "--mig-strategy",
                "mixed",
                "--mig-layout",
                "all-9g.99gb",
            ],
            vec!["--mig-layout", "all-9g.99gb"],
        ),
        (
            vec!["--gpu", "t4", "--count", "1", "--driver-version", "latest"],
            vec!["--driver-version", "latest"],
        ),
        (vec!["--gpu", "t4", "--count", "1", "--cuda-version", "twelve"], vec!["--cuda-version", "twelve"]),
        (
            vec!["--snapshot", s, "--format", "resourceslice"],
            vec!["--format", "resourceslice", "--allocation-mode dra"],
        ),
        (vec![], vec!["--snapshot", "--gpu", "--from-cluster"]),
        // The labeller's --config-file and --config-dir, one declaration: one or the other.
        (
            vec!["--snapshot", s, "--config-file", "x.yaml", "--config-dir", "testdata/configs"],
            vec!["--config-file", "--config-dir"],
        ),
    ] {
        let out = template(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing printed half");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: one line: {stderr}");
        for n in names {
            assert!(stderr.contains(n), "{args:?}: names {n}: {stderr}");
        }
    }
}

/// A form that cannot carry part of a template says so: cluster-api's annotations name one GPU
/// resource, and a mixed-MIG pool has several.
#[test]
fn what_a_form_cannot_carry_is_said() {
    let s = snapshot("a100-mig-mixed");
    let out =
        template(&["--snapshot", s.to_str().unwrap(), "--mig-strategy", "mixed", "--format", "cluster-api"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not carried") && stderr.contains("nvidia.com/mig-1g.5gb=1"), "{stderr}");
}

/// `nvlabel template` reads its command line alone: every variable the rows name, for its flags
/// and the labeller's (GFD_CONFIG_FILE and CONFIG_FILE for --config-file, GFD_MIG_STRATEGY,
/// NVLABEL_SNAPSHOT, NVLABEL_FORMAT, NVLABEL_LOG_FORMAT...), set to a value that would change what
/// it prints or logs, changes nothing.
#[test]
fn the_rows_env_changes_nothing() {
    use nvlabel::config::{flags::env_vars, rows::row, Flag};
    let (mig, t4) = (snapshot("a100-mig-mixed"), snapshot("t4"));
    let sliced = repo().join("testdata/configs/time-slicing-mig-mixed.yaml");
    let meant: [(Flag, &str); 9] = [
        (Flag::ConfigFile, sliced.to_str().unwrap()),
        (Flag::ConfigDir, "testdata/configs"),
        (Flag::ConfigDefault, "mps-gpu-10"),
        (Flag::MigStrategy, "mixed"),
        (Flag::ExtendedLabels, "true"),
        (Flag::AllocationMode, "dra"),
        (Flag::Snapshot, t4.to_str().unwrap()),
        (Flag::Format, "json"),
        (Flag::LogFormat, "json"),
    ];
    let runs: [&[&str]; 2] = [&["--snapshot", mig.to_str().unwrap()], &["--gpu", "t4", "--count", "1"]];
    for args in runs {
        let plain = template(args);
        assert!(plain.status.success(), "{args:?}: {}", String::from_utf8_lossy(&plain.stderr));
        let mut cmd = nvlabel(None);
        cmd.arg("template").args(args);
        // A value no row's parser takes wherever `meant` says nothing: read, it would be refused.
        for var in env_vars().filter(|v| *v != "RUST_LOG") {
            cmd.env(var, "not-a-value");
        }
        for (flag, value) in meant {
            for var in row(flag).env {
                cmd.env(var, value);
            }
        }
        let with_env = cmd.output().unwrap();
        // Each log line less its time: text lines, not JSON ones.
        let text = |o: &Output| {
            let stderr = String::from_utf8_lossy(&o.stderr);
            let lines: Vec<String> =
                stderr.lines().map(|l| l.split_once(' ').map_or(l, |(_, rest)| rest).to_string()).collect();
            (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned(), lines)
        };
        assert_eq!(text(&with_env), text(&plain), "{args:?}: the rows' env changed `nvlabel template`");
    }
}
