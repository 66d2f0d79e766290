//! Helpers for running the real binary against the fake NVML library.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root.
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The fake `libnvidia-ml.so.1`, built beside the binary by `cargo build/test --workspace`.
pub fn fake_nvml() -> PathBuf {
    let lib = Path::new(env!("CARGO_BIN_EXE_nvlabel")).parent().unwrap().join("libnvidia_ml.so");
    assert!(lib.exists(), "{} is missing: run `cargo build --workspace` before the tests", lib.display());
    lib
}

/// README.md and docs/*.md, as paths from the repository root (README first, then by name).
pub fn doc_files() -> Vec<String> {
    let mut more: Vec<String> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .filter_map(|e| Some(format!("docs/{}", e.ok()?.file_name().to_str()?)))
        .filter(|n| n.ends_with(".md"))
        .collect();
    more.sort();
    std::iter::once("README.md".to_string()).chain(more).collect()
}

/// The address a daemon logging JSON lines says it serves `/metrics` on (port 0 picks a free
/// one): read from `lines` up to that line.
pub fn served_addr(lines: &mut impl Iterator<Item = std::io::Result<String>>) -> String {
    loop {
        let line = lines.next().expect("the daemon logs its address").unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        if v["message"] == "serving /healthz, /readyz and /metrics" {
            return v["addr"].as_str().unwrap().to_string();
        }
    }
}

/// The path of a machine fixture.
pub fn fixture(name: &str) -> PathBuf {
    repo().join("testdata/machines").join(format!("{name}.yaml"))
}

/// The text of a bundled fixture with `extra` appended (a `faults:` section, say).
pub fn fixture_with(name: &str, extra: &str) -> String {
    std::fs::read_to_string(fixture(name)).unwrap() + extra
}

/// The path of a machine only tests use (`testdata/test-machines/`): it has no golden files and
/// is not in the model catalogue, for a machine that exists to be broken in one way.
pub fn test_machine(name: &str) -> PathBuf {
    repo().join("testdata/test-machines").join(format!("{name}.yaml"))
}

/// A copy in `dir` (the test may change or remove it) of the T4's recorded snapshot,
/// `testdata/golden/t4.snapshot.yaml`, which `golden.rs` keeps equal to what `nvlabel probe`
/// records on the bundled `t4`: a daemon labels from it without NVML.
pub fn t4_snapshot(dir: &Path) -> PathBuf {
    let path = dir.join("t4.snapshot.yaml");
    std::fs::copy(repo().join("testdata/golden/t4.snapshot.yaml"), &path).unwrap();
    path
}

/// Every machine fixture's name, sorted.
pub fn fixtures() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(repo().join("testdata/machines"))
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_suffix(".yaml").map(String::from))
        .collect();
    names.sort();
    names
}

/// A command for the binary with a clean environment, the fake library and the fake sysfs.
pub fn nvlabel(machine: Option<&str>) -> Command {
    nvlabel_in(machine, "testdata/sysfs")
}

/// [`nvlabel`] with another fake sysfs tree (relative to the repository).
pub fn nvlabel_in(machine: Option<&str>, sysfs: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nvlabel"));
    cmd.env_clear().env("RUST_LOG", "warn").current_dir(repo());
    // Through env, so that a test can still override either with its flag.
    // Relative to the repository (the working directory), so snapshots do not name the checkout.
    cmd.env("NVLABEL_NVML_LIBRARY", fake_nvml()).env("NVLABEL_SYSFS_ROOT", sysfs);
    // Daemons in parallel tests must not fight over one port.
    cmd.env("NVLABEL_METRICS_ADDR", "127.0.0.1:0");
    if let Some(m) = machine {
        cmd.env("FAKE_NVML_FIXTURE", fixture(m));
    }
    cmd
}

/// The NVML errors the fault matrices inject (fixture names of `NVML_ERROR_*`).
pub const NVML_ERRORS: [&str; 9] = [
    "not_supported",
    "gpu_is_lost",
    "unknown",
    "timeout",
    "insufficient_size",
    "no_permission",
    "not_found",
    "invalid_argument",
    "memory",
];

/// A label set from pairs.
pub fn labels(pairs: &[(&str, &str)]) -> nvlabel::labels::Labels {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Runs to the end: exit code (-1 for a signal), stdout, stderr (lossily: some tests feed binary).
/// Every line of stderr is free of Rust's debug forms ([`assert_no_debug_forms`]).
pub fn run(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_no_debug_forms(&stderr);
    (out.status.code().unwrap_or(-1), String::from_utf8(out.stdout).unwrap(), stderr)
}

/// Panics on a line of `log` with a Rust debug form, the code's words and not the operator's:
/// an `Option` (`Some(2)`, `=None`), a list of strings (`["a"`), a struct (`Name { field: `) or
/// a set of numbers (`{13, 31}`).
pub fn assert_no_debug_forms(log: &str) {
    for line in log.lines() {
        let plain = ["Some(", "=None", "(None", "None)", "[\"", "\"]"].iter().find(|f| line.contains(**f));
        let structure = line.match_indices(" { ").find(|(at, _)| {
            let rest = &line[at + 3..];
            let word = rest.split(": ").next().unwrap_or_default();
            !word.is_empty()
                && rest.len() > word.len()
                && word.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        });
        let numbers =
            line.match_indices('{').any(|(at, _)| line[at + 1..].starts_with(|c: char| c.is_ascii_digit()));
        let form = plain.copied().or(structure.map(|_| "a struct")).or(numbers.then_some("a set"));
        assert!(form.is_none(), "a log line with Rust's debug form {form:?}:\n{line}");
    }
}

/// Waits (bounded, 30 s) until `path` has the line `line`; returns the file's text.
pub fn wait_for_line(path: &Path, line: &str) -> String {
    for _ in 0..600 {
        if let Ok(text) = std::fs::read_to_string(path) {
            if text.lines().any(|l| l == line) {
                return text;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("{line} never appeared in {}: {:?}", path.display(), std::fs::read_to_string(path));
}

/// Sends `sig` (`-HUP`, `-TERM`, ...) to a child.
pub fn signal(child: &std::process::Child, sig: &str) {
    assert!(Command::new("kill").args([sig, &child.id().to_string()]).status().unwrap().success());
}

/// Sends `sig` and waits (bounded, 10 s) until the child exits by itself; returns its status.
pub fn stop_with(child: &mut std::process::Child, sig: &str) -> std::process::ExitStatus {
    signal(child, sig);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(std::time::Instant::now() < deadline, "the daemon did not stop after {sig}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The flags of the issue's reference command, printing sorted labels to stdout.
pub const PRINT: &[&str] =
    &["--oneshot", "--no-timestamp", "--output-file", "", "--use-node-feature-api=false"];

/// Runs and insists on success; stderr is free of debug forms, as [`run`]'s.
pub fn ok(cmd: &mut Command) -> String {
    let out: Output = cmd.output().unwrap();
    assert_no_debug_forms(&String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Whether `UPDATE_GOLDEN` asks for goldens to be rewritten: `1` or `true`; unset, empty, `0`
/// or `false` compare.
pub fn update_golden() -> bool {
    matches!(std::env::var("UPDATE_GOLDEN").as_deref(), Ok("1" | "true"))
}

/// Compares with `testdata/golden/<name>`, or rewrites it when `UPDATE_GOLDEN` is set.
/// Returns a description of the mismatch, if any.
pub fn golden(name: &str, actual: &str) -> Option<String> {
    let path = repo().join("testdata/golden").join(name);
    if update_golden() {
        std::fs::write(&path, actual).unwrap();
        return None;
    }
    let expected = match std::fs::read_to_string(&path) {
        Ok(e) => e,
        Err(e) => {
            return Some(format!("{}: {e} (regenerate with UPDATE_GOLDEN=1 and review)", path.display()))
        }
    };
    if expected == actual {
        return None;
    }
    let exp: Vec<&str> = expected.lines().collect();
    let act: Vec<&str> = actual.lines().collect();
    let mut diff = String::new();
    for l in &exp {
        if !act.contains(l) {
            diff.push_str(&format!("  - {l}\n"));
        }
    }
    for l in &act {
        if !exp.contains(l) {
            diff.push_str(&format!("  + {l}\n"));
        }
    }
    Some(format!("{} differs:\n{diff}", path.display()))
}
pub mod apiserver;
pub mod chart_cluster;
pub mod deploy_checks;
pub mod dra_cluster;
pub mod health_cluster;
pub mod health_daemon;
pub mod helm;
pub mod hook_checks;
pub mod label_rules;
pub mod logs;
pub mod manifests;
pub mod mock_api;
pub mod node_match;
pub mod outage;
pub mod policy_checks;
pub mod prometheus;
pub mod proxy;
pub mod raw_http;
pub mod real_cluster;

/// A labelling daemon for `config`, with its own NVML session, as the service builds one:
/// `client` for the API writers (and this Node's watch when the settings ask for one), `views`
/// in place of that watch's config-label stream.
pub fn daemon_of(
    config: nvlabel::config::ConfigState,
    client: Option<kube::Client>,
    metrics: std::sync::Arc<nvlabel::daemon::Metrics>,
    views: Option<futures::stream::BoxStream<'static, nvlabel::kubeapi::node_view::NodeView>>,
) -> nvlabel::daemon::Daemon {
    nvlabel::daemon::Daemon::new(parts_of(config, client, metrics, views)).unwrap()
}

/// The configuration of a daemon writing its feature file to `out`, untimestamped, with no
/// NodeFeature API, plus `args` (the device source's libraries and roots).
pub fn file_daemon_config(out: &std::path::Path, args: &[&str]) -> nvlabel::config::ConfigState {
    let mut argv =
        vec!["nvlabel", "--use-node-feature-api=false", "--no-timestamp", "-o", out.to_str().unwrap()];
    argv.extend_from_slice(args);
    let cli = nvlabel::config::Cli::try_from_args(argv).unwrap();
    nvlabel::config::ConfigState::load(cli, Default::default(), nvlabel::config::ConfigSource::None, None)
        .unwrap()
}

/// What [`daemon_of`] builds its daemon from: no slices, waits drawn at random.
pub fn parts_of(
    config: nvlabel::config::ConfigState,
    client: Option<kube::Client>,
    metrics: std::sync::Arc<nvlabel::daemon::Metrics>,
    views: Option<futures::stream::BoxStream<'static, nvlabel::kubeapi::node_view::NodeView>>,
) -> nvlabel::daemon::Parts {
    let session = nvlabel::probe::Session::new();
    let draw = nvlabel::daemon::RANDOM;
    let config = Box::new(nvlabel::config::DaemonInputs::new(config));
    nvlabel::daemon::Parts { config, metrics, client, session, views, slices: None, draw }
}

/// The whole path of `test`, the test running on this thread (`session::name`): the one name
/// `--exact` finds in a test binary of many files. The harness names a test's thread so.
pub fn test_path(test: &str) -> String {
    let current = std::thread::current();
    current.name().filter(|name| name.ends_with(test)).unwrap_or(test).to_owned()
}

/// Runs this test again in a child process of this test binary, with each variable of `vars`
/// pointing at a fresh path of a temporary directory (the fake NVML library reads its environment
/// at init, so a test that loads it in process needs a process of its own, not `set_var`).
/// Returns those paths in the child, `None` in the parent once the child passed.
pub fn in_child(test: &str, vars: &[&str]) -> Option<std::collections::BTreeMap<String, PathBuf>> {
    const CHILD: &str = "NVLABEL_TEST_CHILD";
    if std::env::var_os(CHILD).is_some() {
        return Some(
            vars.iter().map(|v| (v.to_string(), PathBuf::from(std::env::var_os(v).unwrap()))).collect(),
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    let path = test_path(test);
    // An ignored test (the soak) runs in its child only when its parent was asked to run it.
    cmd.args([path.as_str(), "--exact", "--nocapture", "--test-threads=1", "--include-ignored"])
        .env(CHILD, "1");
    for v in vars {
        cmd.env(v, dir.path().join(v.to_lowercase()));
    }
    let out = cmd.output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{test} in its own process failed:\n{text}");
    assert!(text.contains("1 passed"), "{test} did not run in its own process:\n{text}");
    None
}

/// A copy of the bundled sysfs tree in `dir` (so a test can hot-add a GPU to it); returns its root.
pub fn sysfs_copy(dir: &Path) -> PathBuf {
    let root = dir.join("sys");
    let ok = Command::new("cp").arg("-r").arg(repo().join("testdata/sysfs")).arg(&root).status().unwrap();
    assert!(ok.success(), "copying testdata/sysfs");
    root
}

/// Adds (`present`) or removes an NVIDIA GPU's PCI function at `address` under the sysfs `root`.
pub fn hot_plug(root: &Path, address: &str, present: bool) {
    let dev = root.join("bus/pci/devices").join(address);
    if present {
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::write(dev.join("vendor"), "0x10de\n").unwrap();
        std::fs::write(dev.join("class"), "0x030200\n").unwrap();
        std::fs::write(dev.join("config"), [0u8; 256]).unwrap();
    } else {
        std::fs::remove_dir_all(&dev).unwrap();
    }
}

/// NVIDIA PCI functions under the sysfs `root`.
pub fn nvidia_functions(root: &Path) -> u64 {
    std::fs::read_dir(root.join("bus/pci/devices"))
        .unwrap()
        .filter(|d| {
            std::fs::read_to_string(d.as_ref().unwrap().path().join("vendor")).unwrap().trim() == "0x10de"
        })
        .count() as u64
}

/// Health on node `gpu-1` with `settings` (enabled), every other part its default: what the
/// in-process health tests hand the monitor or `nvlabel health clear`.
pub fn health_on_gpu_1(
    settings: nvlabel::health::config::HealthSettings,
) -> nvlabel::health::config::HealthConfig {
    nvlabel::health::config::HealthConfig {
        settings: nvlabel::health::config::HealthSettings { enabled: true, ..settings },
        node: Some("gpu-1".into()),
        pod: None,
        instance: None,
        taints_devices: false,
        probe: Default::default(),
        every: std::time::Duration::from_secs(60),
    }
}
