//! What a user reads when an input is wrong: one rule for usage errors (a flag's value from the
//! command line, env or the config file's `flags`), help and version, and one-line errors for
//! YAML and snapshot files.

use crate::common;

use common::*;
use std::process::Command;

fn print(machine: &str) -> Command {
    let mut cmd = nvlabel(Some(machine));
    cmd.args(PRINT);
    cmd
}

#[test]
fn a_yaml_syntax_error_is_one_line_naming_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: gpu}\n  bad: x\n")
        .unwrap();
    let want = format!(
        "unable to parse config file {}: line 5, column 6: illegal placement of ':' indicator",
        config.display()
    );
    let (code, _, stderr) = run(print("t4").arg("--config-file").arg(&config));
    assert_eq!(code, 2);
    assert_eq!(stderr, format!("nvlabel: error: {want}\n"));
    let (_, _, stderr) = run(print("t4").args(["--log-format", "json", "--config-file"]).arg(&config));
    let v: serde_json::Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    assert_eq!(v["error"], want.as_str(), "the same line inside a JSON log");
}

#[test]
fn a_snapshot_is_never_blank_and_its_errors_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("node.yaml");
    let snapshot = |text: &str| {
        std::fs::write(&path, text).unwrap();
        run(nvlabel(None).args(PRINT).arg("--snapshot").arg(&path))
    };
    for blank in ["", "---\n", "# nothing\n"] {
        let (code, stdout, stderr) = snapshot(blank);
        assert_eq!((code, stdout.as_str()), (1, ""), "{blank:?}: {stderr}");
        assert_eq!(
            stderr,
            format!(
                "nvlabel: error: invalid snapshot {0}: it is empty; write one with `nvlabel probe > {0}`\n",
                path.display()
            ),
            "{blank:?}"
        );
    }
    let (code, _, stderr) = snapshot("gpus: [\n");
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        format!(
            "nvlabel: error: invalid snapshot {}: line 1, column 7: unclosed bracket '['\n",
            path.display()
        )
    );
}

#[test]
fn a_bad_duration_lists_the_accepted_forms() {
    let forms = "use a Go duration such as 90s, 1m30s or 1.5h (units ns, us, ms, s, m, h), a number of seconds, or infinite";
    let (_, _, stderr) = run(print("t4").arg("--sleep-interval=abc"));
    assert!(stderr.contains(&format!("invalid duration \"abc\"; {forms}")), "{stderr}");
    let (_, _, stderr) = run(print("t4").env("GFD_SLEEP_INTERVAL", "1d"));
    assert!(stderr.contains(&format!("unknown unit \"d\" in duration \"1d\"; {forms}")), "{stderr}");
}

/// One rule for usage errors: the same bad value from the command line, env or the config file's
/// `flags` exits 2 with one line naming where it came from; a failure at run time exits 1.
#[test]
fn a_bad_configuration_exits_2_with_one_line_wherever_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "flags:\n  gfd:\n    sleepInterval: abc\n").unwrap();
    std::fs::write(dir.path().join("mig.yaml"), "flags:\n  migStrategy: bogus\n").unwrap();
    let cases: Vec<(&str, Command, &str)> = vec![
        (
            "command line",
            {
                let mut c = print("t4");
                c.arg("--sleep-interval=abc");
                c
            },
            "flag --sleep-interval",
        ),
        (
            "env",
            {
                let mut c = print("t4");
                c.env("GFD_SLEEP_INTERVAL", "abc");
                c
            },
            "\"GFD_SLEEP_INTERVAL\"",
        ),
        (
            "config file",
            {
                let mut c = print("t4");
                c.arg("--config-file").arg(dir.path().join("mig.yaml"));
                c
            },
            "flags.migStrategy in config file",
        ),
        (
            "clap",
            {
                let mut c = print("t4");
                c.arg("--oneshot=maybe");
                c
            },
            "'--oneshot",
        ),
        (
            "unknown flag",
            {
                let mut c = print("t4");
                c.arg("--mig-stratgy=single");
                c
            },
            "a similar argument exists: '--mig-strategy'",
        ),
        (
            "a labeler flag on a subcommand",
            {
                let mut c = nvlabel(Some("t4"));
                c.args(["probe", "--oneshot"]);
                c
            },
            "`nvlabel probe` does not use --oneshot",
        ),
        (
            "expiry with stdout",
            {
                let mut c = print("t4");
                c.args(["--expiry", "1h"]);
                c
            },
            "--expiry applies only to the feature file",
        ),
    ];
    for (name, mut cmd, needle) in cases {
        let (code, stdout, stderr) = run(&mut cmd);
        assert_eq!((code, stdout.as_str()), (2, ""), "{name}: {stderr}");
        assert!(stderr.starts_with("nvlabel: error: ") && stderr.lines().count() == 1, "{name}: {stderr}");
        assert!(stderr.contains(needle), "{name}: {stderr}");
    }
    let (code, _, stderr) = run(print("t4").arg("--config-file").arg(&config));
    assert_eq!(code, 2, "flags.gfd.sleepInterval, refused by the file reader: {stderr}");
    assert!(stderr.contains("flags.gfd.sleepInterval"), "{stderr}");
    // One status for every bad configuration: the rest of the file too, a syntax error, a file
    // that is missing, or a flag the chosen writer requires.
    let missing = config.with_file_name("missing.yaml");
    let syntax = config.with_file_name("syntax.yaml");
    std::fs::write(&syntax, "version: v1\nflags: [\n").unwrap();
    let bad_files = [repo().join("testdata/configs/invalid-replicas.yaml"), syntax, missing];
    for file in bad_files {
        let (code, _, stderr) = run(print("t4").arg("--config-file").arg(&file));
        assert_eq!(code, 2, "{file:?}: {stderr}");
    }
    let (code, _, stderr) = run(nvlabel(Some("t4")).args(["--oneshot", "--use-node-feature-api"]));
    assert_eq!(code, 2, "a writer without its required --node-name: {stderr}");
    // --health where labels go to a file: nowhere to write the condition.
    let file = dir.path().join("features");
    let (code, _, stderr) = run(nvlabel(Some("t4"))
        .args(["--health", "--use-node-feature-api=false", "--node-name=n1", "-o"])
        .arg(&file));
    assert_eq!(code, 2, "--health without API access: {stderr}");
    assert!(stderr.contains("--health publishes a Node condition, which needs API access"), "{stderr}");
    for prune in [&["prune", "--health-only"][..], &["prune", "--all-nodes"]] {
        let (code, _, stderr) = run(nvlabel(None).args(prune));
        assert_eq!(code, 2, "{prune:?}: {stderr}");
    }
    // A --kubeconfig that cannot be read or used names a file the operator chose: labelling
    // once, as a daemon, and pruning.
    let unusable = dir.path().join("kubeconfig");
    std::fs::write(&unusable, "apiVersion: v1\nkind: Config\n").unwrap();
    for kubeconfig in [dir.path().join("missing-kubeconfig"), unusable] {
        let runs: [&[&str]; 3] =
            [&["--oneshot", "--node-name=n1"], &["--node-name=n1"], &["prune", "--node-name=n1"]];
        for args in runs {
            let (code, _, stderr) = run(nvlabel(Some("t4")).args(args).arg("--kubeconfig").arg(&kubeconfig));
            assert_eq!(code, 2, "{args:?} {kubeconfig:?}: {stderr}");
            assert!(stderr.contains("the kubeconfig") && stderr.lines().count() == 1, "{stderr}");
        }
    }
}

#[test]
fn help_and_version_answer_like_gfd_and_clap() {
    for args in [&["-v"][..], &["-V"], &["--version"]] {
        let (code, stdout, _) = run(nvlabel(None).args(args));
        assert_eq!(
            (code, stdout.as_str()),
            (0, concat!("nvlabel ", env!("CARGO_PKG_VERSION"), "\n")),
            "{args:?}"
        );
    }
    let (code, stdout, stderr) = run(nvlabel(None).args(["help", "--help"]));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("Usage: nvlabel help [COMMAND]"), "{stdout}");
    let (code, stdout, _) = run(nvlabel(None).args(["help", "probe"]));
    assert_eq!(code, 0);
    assert!(stdout.contains("Usage: nvlabel probe [OPTIONS]"), "{stdout}");
}

/// Each command's `--help` lists exactly the flags its mode can use, from their rows; each flag
/// it leaves out still parses, and is refused there with why. (A command that reads its command
/// line alone hides none: `config::modes`' tests.)
#[test]
fn each_commands_help_lists_exactly_the_flags_it_accepts() {
    use nvlabel::config::{modes::commands, row::Mode, rows::row, Flag};
    for (name, _, cmd) in commands().iter().filter(|(name, reads, _)| name != "help" && reads.rows()) {
        let modes = Mode::of_command(name);
        let takes: Vec<Flag> =
            cmd.get_arguments().filter_map(|a| a.get_long().and_then(Flag::named)).collect();
        let never = |f: &Flag| modes.iter().all(|m| row(*f).never(*m));
        let accepted: Vec<&str> = takes.iter().filter(|f| !never(f)).map(|f| f.name()).collect();
        let (code, help, _) = run(nvlabel(None).args(name.split_whitespace().chain(["--help"])));
        assert_eq!(code, 0, "{name}");
        // Option lines are indented at most 6 spaces, their descriptions more.
        let listed: Vec<&str> = help
            .lines()
            .filter(|l| l.len() - l.trim_start().len() <= 6)
            .filter_map(|l| l.split([' ', ',']).find_map(|w| w.strip_prefix("--")))
            .map(|w| w.split(['[', '=', '<']).next().unwrap())
            .filter(|f| !["help", "version"].contains(f))
            .collect();
        assert_eq!(listed, accepted, "`nvlabel {name} --help` lists other flags than it accepts:\n{help}");
        for flag in takes.iter().filter(|f| never(f)) {
            // A value every flag's own parser takes (a path, a number, a ServiceAccount's name, a
            // threshold for --health-xid-thresholds), so that what is refused is the flag.
            let own = [(Flag::HealthXidThresholds, "43:3/1m")];
            let value = own.into_iter().find(|(f, _)| f == flag).map_or("2", |(_, v)| v);
            let given = format!("--{flag}={}", nvlabel::config::flags::default_of(*flag).unwrap_or(value));
            let (code, stdout, stderr) =
                run(nvlabel(Some("t4")).args(name.split_whitespace().chain([&*given])));
            assert_eq!((code, stdout.as_str()), (2, ""), "{name} {given}: {stderr}");
            assert!(stderr.starts_with(&format!("nvlabel: error: --{flag} has no effect")), "{stderr}");
        }
    }
}

/// `nvlabel health` reads NVML (the library, sysfs's PCI bus) and judges by its health flags:
/// its help lists those and nothing else, none of the CUDA, Tegra, vfio or GFD-only flags the
/// labeller's source and fact groups bring along.
#[test]
fn health_help_lists_only_what_health_uses() {
    let (code, help, _) = run(nvlabel(None).args(["health", "--help"]));
    assert_eq!(code, 0);
    let listed: Vec<&str> = help
        .lines()
        .filter(|l| l.len() - l.trim_start().len() <= 6)
        .filter_map(|l| l.split([' ', ',']).find_map(|w| w.strip_prefix("--")))
        .map(|w| w.split(['[', '=', '<']).next().unwrap())
        .filter(|f| !["help", "version"].contains(f))
        .collect();
    let uses = [
        "health-ignore-xids",
        "health-fatal-xids",
        "health-expected-gpus",
        "nvml-library",
        "sysfs-root",
        "log-format",
    ];
    assert_eq!(listed, uses, "{help}");
}

#[test]
fn prune_refuses_flags_it_would_ignore() {
    for flag in [
        &["--snapshot", "/x"][..],
        &["--nvml-library", "/x"],
        &["--format", "json"],
        &["--expiry", "1h"],
        &["--mig-strategy", "single"],
    ] {
        let (code, stdout, stderr) = run(nvlabel(None).arg("prune").args(flag));
        assert_eq!((code, stdout.as_str()), (2, ""), "{flag:?}: {stderr}");
        assert_eq!(
            stderr,
            format!("nvlabel: error: unexpected argument '{0}' found: `nvlabel prune` does not use {0} (see `nvlabel help prune`)\n", flag[0]),
        );
    }
}

/// The rows: a flag that would do nothing in the chosen mode is refused, one line naming
/// it and the mode; the same from env is one warning and the run goes on.
#[test]
fn flags_without_effect_are_refused_and_env_without_effect_warned() {
    let file = tempfile::tempdir().unwrap();
    let path = file.path().join("gfd");
    let cases: &[(&[&str], &str)] = &[
        (&["--oneshot", "--health"], "--health has no effect with --oneshot"),
        (
            &["--oneshot", "--use-node-feature-api=false", "-o", path.to_str().unwrap(), "--format", "json"],
            "--format has no effect where labels are not printed",
        ),
        (&["hook", "--no-timestamp=false"], "--no-timestamp has no effect in `nvlabel hook`"),
        (&["health", "--health=false"], "--health has no effect in `nvlabel health`"),
    ];
    for (args, want) in cases {
        let (code, stdout, stderr) = run(nvlabel(Some("t4")).args(*args));
        assert_eq!((code, stdout.as_str(), stderr.lines().count()), (2, "", 1), "{args:?}: {stderr}");
        assert!(stderr.starts_with(&format!("nvlabel: error: {want}")), "{args:?}: {stderr}");
    }
    assert!(!path.exists(), "a refused run wrote nothing");
    let (code, stdout, stderr) = run(nvlabel(Some("t4")).args(PRINT).env("NVLABEL_HEALTH", "true"));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("nvidia.com/gpu.count=1"), "{stdout}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr
            .contains("environment variable \"NVLABEL_HEALTH\" (flag --health) has no effect with --oneshot"),
        "{stderr}"
    );
}

/// The slips of someone coming from GFD get one line with the exact corrected flag, exit 2.
#[test]
fn usage_slips_get_a_hint_with_the_corrected_flag() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--oneshot", "-o", "", "--use-node-feature-api", "false"],
            "nvlabel: error: --use-node-feature-api false: a boolean flag takes its value after '=', as in GFD; write --use-node-feature-api=false\n",
        ),
        (
            &["hook", "--extended-labels", "true"],
            "nvlabel: error: --extended-labels true: a boolean flag takes its value after '=', as in GFD; write --extended-labels=true\n",
        ),
        (
            &["--oneshot", "-o", ""],
            "nvlabel: error: required flag node-name not set (--node-name or NODE_NAME); to print the labels, add --use-node-feature-api=false: GFD's default publishes a NodeFeature object, --output-file \"\" or not\n",
        ),
        (
            &["hook", "-o", ""],
            "nvlabel: error: unexpected argument '-o' found: `nvlabel hook` does not use -o (--output-file) (see `nvlabel help hook`)\n",
        ),
        (
            &["--oneshot", "--device-discovery-strategy", "tgra"],
            "nvlabel: error: invalid value \"tgra\" for flag --device-discovery-strategy: invalid --device-discovery-strategy option tgra; use auto, nvml, tegra or vfio\n",
        ),
    ];
    for (args, want) in cases {
        let (code, stdout, stderr) = run(nvlabel(Some("t4")).args(*args));
        assert_eq!((code, stdout.as_str(), stderr.as_str()), (2, "", *want), "{args:?}");
    }
    let (_, help, _) = run(nvlabel(None).arg("--help"));
    let line =
        help.lines().skip_while(|l| !l.contains("--device-discovery-strategy")).nth(1).unwrap_or_default();
    assert!(
        ["auto", "nvml", "tegra", "vfio"].iter().all(|v| line.contains(v)),
        "--help offers every value that works: {line}"
    );
}

/// A sharing config that shares nothing is named, once: a config none of whose resources this
/// node has. A cluster-wide config listing MIG profiles this node lacks is normal and gets no
/// word. A resource no NVIDIA GPU could have (a typo) and bad values are refused, exit 2.
#[test]
fn sharing_configs_that_match_nothing_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let config = |name: &str, resources: &[&str], replicas: u32| {
        let path = dir.path().join(name);
        let entries: String =
            resources.iter().map(|r| format!("      - name: {r}\n        replicas: {replicas}\n")).collect();
        std::fs::write(&path, format!("version: v1\nsharing:\n  timeSlicing:\n    resources:\n{entries}"))
            .unwrap();
        path
    };
    let warnings = |path: &std::path::Path| {
        let (code, stdout, stderr) = run(nvlabel(Some("t4")).args(PRINT).arg("--config-file").arg(path));
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.contains("nvidia.com/gpu.count=1"), "{stdout}");
        stderr.lines().map(|l| l.split_once(" WARN ").map_or(l, |(_, w)| w).to_string()).collect::<Vec<_>>()
    };
    let typo = config("typo.yaml", &["nvidia.com/gpus"], 4);
    let (code, stdout, stderr) = run(nvlabel(Some("t4")).args(PRINT).arg("--config-file").arg(&typo));
    assert_eq!((code, stdout.as_str()), (2, ""), "{stderr}");
    let want = "sharing.timeSlicing.resources[0].name: \"nvidia.com/gpus\" is no resource an NVIDIA GPU has";
    assert!(stderr.contains("typo.yaml") && stderr.contains(want), "{stderr}");
    let mig_only = config("mig.yaml", &["nvidia.com/mig-1g.5gb", "nvidia.com/mig-2g.10gb"], 4);
    assert_eq!(
        warnings(&mig_only),
        ["nvlabel::troubles: sharing.timeSlicing shares nothing on this node: none of its resources (\"nvidia.com/mig-1g.5gb\", \"nvidia.com/mig-2g.10gb\") is one this node has (\"nvidia.com/gpu\")"]
    );
    let cluster_wide = config("cluster.yaml", &["nvidia.com/gpu", "nvidia.com/mig-1g.5gb"], 4);
    assert!(warnings(&cluster_wide).is_empty());
    let zero = config("zero.yaml", &["nvidia.com/gpu"], 0);
    let (code, _, stderr) = run(nvlabel(Some("t4")).args(PRINT).arg("--config-file").arg(&zero));
    assert_eq!(code, 2);
    let want = "sharing.timeSlicing.resources[0].replicas: number of replicas must be >= 2, got 0";
    assert!(stderr.contains("zero.yaml") && stderr.contains(want), "{stderr}");
}
