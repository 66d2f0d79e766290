//! The exit status, case by case: every bad configuration nvlabel can meet at start-up exits 2,
//! whichever room found it (the resolver, the config file, a writer, health, prune, the client,
//! the HTTP endpoint) and however it was wrapped; a failure of the node or the API exits 1.

use crate::common;

use common::*;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The status of `cmd`, killed after 30 s: a configuration error that slips through would run a
/// daemon, and the test must fail on that, not hang.
fn status_of(cmd: &mut Command) -> (i32, String) {
    let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(30) {
            child.kill().unwrap();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `nvlabel` on a T4 with `args`, and `env` on top.
fn nv(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = nvlabel(Some("t4"));
    cmd.args(args).envs(env.iter().copied());
    cmd
}

/// A case: its name, the arguments and the environment on top of the T4's.
type Case<'a> = (String, Vec<String>, Vec<(&'a str, &'a str)>);

/// `a` then `b`, owned.
fn with(a: &[&str], b: &[&str]) -> Vec<String> {
    a.iter().chain(b).map(|s| s.to_string()).collect()
}

fn text(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn every_configuration_error_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let (missing, unusable, syntax, mig, keys, file) = (
        dir.path().join("missing"),
        dir.path().join("kubeconfig"),
        dir.path().join("syntax.yaml"),
        dir.path().join("mig.yaml"),
        dir.path().join("keys"),
        dir.path().join("features"),
    );
    std::fs::write(&unusable, "apiVersion: v1\nkind: Config\n").unwrap();
    std::fs::write(&syntax, "version: v1\nflags: [\n").unwrap();
    std::fs::write(&mig, "flags:\n  migStrategy: bogus\n").unwrap();
    std::fs::create_dir(&keys).unwrap();
    let invalid = repo().join("testdata/configs/invalid-replicas.yaml");
    let (missing, unusable, syntax, mig, keys, file, invalid) = (
        text(&missing),
        text(&unusable),
        text(&syntax),
        text(&mig),
        text(&keys),
        text(&file),
        text(&invalid),
    );
    let print = ["--oneshot", "--use-node-feature-api=false", "-o", ""];
    let mut cases: Vec<Case> = vec![
        ("a flag's value".into(), with(&["--sleep-interval=abc"], &print), vec![]),
        ("an env var's value".into(), with(&[], &print), vec![("GFD_SLEEP_INTERVAL", "abc")]),
        ("clap's own usage error".into(), with(&["--oneshot=maybe"], &[]), vec![]),
        ("a labeller's flag on a subcommand".into(), with(&["probe", "--oneshot"], &[]), vec![]),
        ("a missing config file".into(), with(&["--config-file", missing], &print), vec![]),
        ("a config file that is not YAML".into(), with(&["--config-file", syntax], &print), vec![]),
        ("an invalid sharing section".into(), with(&["--config-file", invalid], &print), vec![]),
        ("a config file's bad flag".into(), with(&["--config-file", mig], &print), vec![]),
        (
            "a config file and a directory".into(),
            with(&["--config-dir", keys], &print),
            vec![("CONFIG_FILE", mig)],
        ),
        ("a config directory that is not there".into(), with(&["--config-dir", missing], &print), vec![]),
        (
            "a config key the directory lacks".into(),
            with(&["hook", "--config-dir", keys, "--config-default=x"], &[]),
            vec![],
        ),
        ("a flag without effect".into(), with(&["--oneshot", "--health"], &[]), vec![]),
        ("a subcommand's flag without effect".into(), with(&["health", "--health=false"], &[]), vec![]),
        ("a writer without --node-name".into(), with(&["--oneshot", "--use-node-feature-api"], &[]), vec![]),
        ("stdout meant, --node-name missing".into(), with(&["--oneshot", "--output-file="], &[]), vec![]),
        (
            "a writer without --namespace".into(),
            with(&["--oneshot", "--use-node-feature-api", "--node-name=n1", "--namespace="], &[]),
            vec![],
        ),
        ("prune without --node-name".into(), with(&["prune"], &[]), vec![]),
        ("prune --health-only without a node".into(), with(&["prune", "--health-only"], &[]), vec![]),
        ("prune --all-nodes alone".into(), with(&["prune", "--all-nodes"], &[]), vec![]),
        ("health clear without --node-name".into(), with(&["health", "clear"], &[]), vec![]),
        (
            "health clear, a bad node name".into(),
            with(&["health", "clear", "--node-name=GPU_1"], &[]),
            vec![],
        ),
        (
            "health clear, a bad GPU".into(),
            with(&["health", "clear", "--node-name=n1", "--gpu=first"], &[]),
            vec![],
        ),
        (
            "--metrics-addr not an address".into(),
            with(&["--metrics-addr=bogus", "--use-node-feature-api=false", "-o", file], &[]),
            vec![],
        ),
        (
            "--health with labels to a file".into(),
            with(&["--health", "--use-node-feature-api=false", "-o", file], &[]),
            vec![],
        ),
        (
            "--health with labels to a file, a node named".into(),
            with(&["--health", "--use-node-feature-api=false", "--node-name=n1", "-o", file], &[]),
            vec![],
        ),
    ];
    // A --kubeconfig that is missing or unusable, wherever a client is made; from env too.
    for (what, kubeconfig) in [("missing", missing), ("unusable", unusable)] {
        for (run, args) in [
            ("a one-shot run", &["--oneshot", "--node-name=n1"][..]),
            ("a daemon", &["--node-name=n1"]),
            ("a daemon with --health", &["--node-name=n1", "--health", "--sink=node"]),
            ("prune", &["prune", "--node-name=n1"]),
            ("prune --health-only", &["prune", "--health-only", "--node-name=n1"]),
            ("prune --health-only --all-nodes", &["prune", "--health-only", "--all-nodes"]),
            ("health clear", &["health", "clear", "--node-name=n1"]),
            ("hook following its node's config label", &["hook", "--node-name=n1", "--config-dir", keys]),
        ] {
            cases.push((
                format!("a {what} kubeconfig: {run}"),
                with(args, &["--kubeconfig", kubeconfig]),
                vec![],
            ));
        }
    }
    cases.push((
        "a missing kubeconfig in KUBECONFIG".into(),
        with(&["--oneshot", "--node-name=n1"], &[]),
        vec![("KUBECONFIG", missing)],
    ));
    let mut wrong = Vec::new();
    for (name, args, env) in &cases {
        let (code, stderr) = status_of(&mut nv(&args.iter().map(String::as_str).collect::<Vec<_>>(), env));
        if code != 2 {
            wrong.push(format!("{name}: exit {code}\n  {args:?} {env:?}\n  {stderr}"));
        }
    }
    assert!(wrong.is_empty(), "configuration errors that do not exit 2:\n{}", wrong.join("\n"));
    assert!(!Path::new(file).exists(), "a refused run wrote nothing");
}

/// What only the node or the cluster can fix exits 1, even where a flag named the thing.
#[test]
fn a_failure_of_the_node_or_the_api_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let d = text(dir.path());
    let print = ["--oneshot", "--use-node-feature-api=false", "-o", ""];
    let empty = dir.path().join("empty.yaml");
    std::fs::write(&empty, "").unwrap();
    let cases: [(&str, Vec<&str>); 6] = [
        ("no driver", [&print[..], &["--nvml-library=/nonexistent/libnvidia-ml.so.1"]].concat()),
        // There, but no snapshot: a failed `nvlabel probe` on the node, not a mistyped path.
        ("a snapshot that is empty", [&print[..], &["--snapshot", text(&empty)]].concat()),
        (
            "a feature file path that is a directory",
            vec!["--oneshot", "--use-node-feature-api=false", "-o", d],
        ),
        // No API server anywhere (not in a pod, no kubeconfig): the node's, not a bad flag.
        ("no API server to be found", vec!["--oneshot", "--node-name=n1", "--sink=node"]),
        ("prune with no API server", vec!["prune", "--health-only", "--node-name=n1"]),
        ("health clear with no API server", vec!["health", "clear", "--node-name=n1"]),
    ];
    for (name, args) in cases {
        let (code, stderr) = status_of(&mut nv(&args, &[]));
        assert_eq!(code, 1, "{name}: {stderr}");
        assert!(stderr.starts_with("nvlabel: error: ") && stderr.lines().count() == 1, "{name}: {stderr}");
    }
}

/// A command-line path to an input that names nothing is the user's slip: exit 2, and one line
/// naming the flag and the path.
#[test]
fn an_input_file_that_is_not_there_exits_2_naming_flag_and_path() {
    let print = ["--oneshot", "--use-node-feature-api=false", "-o", ""];
    let missing = "/nonexistent/nvlabel-input";
    let cases: [(&str, Vec<&str>); 2] = [
        ("--snapshot", [&print[..], &["--snapshot", missing]].concat()),
        ("--pci-ids", [&print[..], &["--device-discovery-strategy=vfio", "--pci-ids", missing]].concat()),
    ];
    for (flag, args) in cases {
        let (code, stderr) = status_of(&mut nv(&args, &[]));
        assert_eq!(code, 2, "{flag}: {stderr}");
        assert!(stderr.starts_with("nvlabel: error: ") && stderr.lines().count() == 1, "{flag}: {stderr}");
        assert!(stderr.contains(&format!("{flag} {missing}")), "{flag}: {stderr}");
    }
}
