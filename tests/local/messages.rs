//! What a user reads: each message from a trial of the binary, checked for what it must say (and
//! must not say twice, or at all).

use crate::common;

use common::*;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn print(machine: &str) -> Command {
    let mut cmd = nvlabel(Some(machine));
    cmd.args(PRINT);
    cmd
}

#[test]
fn an_os_error_is_said_once() {
    let (code, _, stderr) = run(print("t4").args(["--config-file", "/nonexistent/config.yaml"]));
    assert_eq!(code, 2, "a bad configuration");
    assert_eq!(
        stderr,
        "nvlabel: error: unable to load config file /nonexistent/config.yaml: No such file or directory (os error 2)\n"
    );
}

#[test]
fn a_failed_write_names_the_target_not_a_temporary_file() {
    let (code, _, stderr) = run(nvlabel(Some("t4")).args([
        "--oneshot",
        "--use-node-feature-api=false",
        "-o",
        "/nonexistent/dir/gfd",
    ]));
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        "nvlabel: error: cannot write the feature file /nonexistent/dir/gfd: create temporary file: No such file or directory (os error 2)\n"
    );
}

#[test]
fn an_nvml_error_is_said_once() {
    let dir = tempfile::tempdir().unwrap();
    let machine = dir.path().join("m.yaml");
    let faulty = fixture_with("t4", "faults:\n  - {function: nvmlDeviceGetCount_v2, error: unknown}\n");
    std::fs::write(&machine, faulty).unwrap();
    let (code, _, stderr) = run(nvlabel(None).env("FAKE_NVML_FIXTURE", &machine).args(PRINT));
    assert_eq!(code, 1);
    assert_eq!(stderr.matches("an internal driver error occurred").count(), 1, "{stderr}");
    assert!(stderr.contains("nvmlDeviceGetCount_v2"), "{stderr}");
}

#[test]
fn a_binary_config_file_is_named_not_printed() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    let mut bytes = b"\x7fELF\x02\x01\x01\x00".to_vec();
    bytes.extend((0u8..=255).cycle().take(4096));
    std::fs::write(&config, &bytes).unwrap();
    let (code, _, stderr) = run(print("t4").arg("--config-file").arg(&config));
    assert_eq!(code, 2, "a bad configuration");
    assert_eq!(
        stderr,
        format!(
            "nvlabel: error: unable to parse config file {}: not a text file (byte 0 is the control character U+007F); expected YAML or JSON\n",
            config.display()
        )
    );
    // Not UTF-8 at all: the offset of the first bad byte.
    std::fs::write(&config, b"version: v1\n\xff\xfe").unwrap();
    let (_, _, stderr) = run(print("t4").arg("--config-file").arg(&config));
    assert!(stderr.contains("not a text file (byte 12 is not UTF-8)"), "{stderr}");
}

#[test]
fn a_busy_metrics_address_names_the_address_and_the_flag() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let (code, _, stderr) = run(nvlabel(Some("t4"))
        .args(["--use-node-feature-api=false", "--metrics-addr", &addr, "-o"])
        .arg(dir.path().join("gfd")));
    assert_eq!(code, 1);
    assert!(stderr.contains(&format!("on {addr} (--metrics-addr")), "{stderr}");
    assert!(stderr.contains("Address already in use"), "{stderr}");
}

#[test]
fn a_fatal_error_is_a_json_line_with_json_logs() {
    let (code, _, stderr) =
        run(print("t4").args(["--log-format", "json", "--config-file", "/nonexistent/config.yaml"]));
    assert_eq!(code, 2, "a bad configuration");
    let last = stderr.lines().last().unwrap();
    let v: serde_json::Value = serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(v["level"], "ERROR");
    assert_eq!(
        v["error"],
        "unable to load config file /nonexistent/config.yaml: No such file or directory (os error 2)"
    );
}

#[test]
fn no_labels_warning_only_when_there_are_none() {
    let (code, stdout, stderr) = run(nvlabel(None).args(PRINT).args(["--fail-on-init-error=false"]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "nvidia.com/vgpu.present=false\n");
    assert!(!stderr.contains("No labels generated"), "{stderr}");
    assert!(stderr.contains("Failed to initialize NVML"), "{stderr}");
}

#[test]
fn each_subcommand_lists_only_its_own_flags() {
    let help = |args: &[&str]| run(nvlabel(None).args(args)).1;
    let daemon_only = ["--sleep-interval", "--metrics-addr", "--oneshot"];
    for sub in ["probe", "hook", "prune"] {
        let text = help(&[sub, "--help"]);
        for flag in daemon_only {
            assert!(!text.contains(flag), "`nvlabel {sub} --help` lists {flag}:\n{text}");
        }
    }
    let probe = help(&["probe", "--help"]);
    for flag in ["--sink", "--output-file", "--mig-strategy", "--config-file"] {
        assert!(!probe.contains(flag), "probe lists {flag}");
    }
    assert!(probe.contains("--nvml-library") && probe.contains("--snapshot"), "{probe}");
    let hook = help(&["hook", "--help"]);
    assert!(!hook.contains("--output-file") && !hook.contains("--format"), "{hook}");
    assert!(hook.contains("--mig-strategy") && hook.contains("--config-dir"), "{hook}");
    let prune = help(&["prune", "--help"]);
    assert!(prune.contains("--sink") && prune.contains("--output-file"), "{prune}");
    let top = help(&["--help"]);
    for flag in daemon_only {
        assert!(top.contains(flag), "the daemon's help lists {flag}");
    }
}

#[test]
fn hook_refuses_flags_it_would_ignore() {
    for args in [&["hook", "-o", "/tmp/x"][..], &["hook", "--format", "json"], &["-o", "/tmp/x", "hook"]] {
        let (code, stdout, stderr) = run(nvlabel(Some("t4")).args(args));
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert_eq!(stdout, "");
        assert!(stderr.contains("-o") || stderr.contains("--format"), "{args:?}: {stderr}");
    }
}

/// A daemon whose stderr lines arrive on a channel.
fn daemon_logs(cmd: &mut Command) -> (Child, mpsc::Receiver<String>) {
    let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            if tx.send(line.unwrap()).is_err() {
                return;
            }
        }
    });
    (child, rx)
}

/// Lines logged until `until` appears `count` times (bounded).
fn lines_until(rx: &mpsc::Receiver<String>, until: &str, count: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut lines = Vec::new();
    while lines.iter().filter(|l: &&String| l.contains(until)).count() < count {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => lines.push(line),
            Err(_) => panic!("{until:?} seen fewer than {count} times:\n{}", lines.join("\n")),
        }
    }
    lines
}

#[test]
fn a_lasting_condition_is_logged_when_it_starts_and_when_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let machine = dir.path().join("machine.yaml");
    std::fs::copy(fixture("faulty"), &machine).unwrap();
    let out = dir.path().join("gfd");
    let mut cmd = nvlabel(None);
    cmd.env("FAKE_NVML_FIXTURE", &machine)
        .env("RUST_LOG", "debug")
        .args(["--no-timestamp", "--use-node-feature-api=false", "--sleep-interval", "1s", "-o"])
        .arg(&out)
        // No DMI file: the machine-type warning of every pass in GFD.
        .args(["--machine-type-file", "/nonexistent/product_name"]);
    let (mut child, rx) = daemon_logs(&mut cmd);
    // Four passes: the first publishes, three more change nothing.
    let lines = lines_until(&rx, "pass done", 4);
    let count = |needle: &str| lines.iter().filter(|l| l.contains(needle)).count();
    assert_eq!(count("GPU excluded from this pass"), 1, "{lines:#?}");
    assert_eq!(count("could not open machine type file"), 1, "{lines:#?}");
    // The lost GPU comes back (the fake reads its fixture at nvmlInit; SIGHUP makes the daemon
    // initialise NVML again): one line says so.
    std::fs::copy(fixture("h100-x8"), &machine).unwrap();
    signal(&child, "-HUP");
    let lines = lines_until(&rx, "resolved: GPU excluded from this pass", 1);
    assert!(lines.iter().all(|l| !l.contains("WARN") || l.contains("machine type")), "{lines:#?}");
    assert_eq!(stop_with(&mut child, "-TERM").code(), Some(0));
}

#[test]
fn a_sub_second_interval_is_raised_with_a_word() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = nvlabel(Some("t4"));
    cmd.args(["--no-timestamp", "--use-node-feature-api=false", "--sleep-interval", "100ms", "-o"])
        .arg(dir.path().join("gfd"));
    let (mut child, rx) = daemon_logs(&mut cmd);
    let lines = lines_until(&rx, "below the 1s floor", 1);
    let line = lines.last().unwrap();
    assert!(
        line.contains("requested=100ms") && line.contains("used=\"1s\"") || line.contains("used=1s"),
        "{line}"
    );
    assert_eq!(stop_with(&mut child, "-TERM").code(), Some(0));
}

#[test]
fn sigquit_stops_cleanly_like_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gfd");
    let mut cmd = nvlabel(Some("t4"));
    cmd.env("RUST_LOG", "info");
    cmd.args(["--no-timestamp", "--use-node-feature-api=false", "--sleep-interval", "1h", "-o"]).arg(&out);
    let (mut child, rx) = daemon_logs(&mut cmd);
    lines_until(&rx, "published labels", 1);
    let status = stop_with(&mut child, "-QUIT");
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(std::fs::read_to_string(&out).unwrap().contains("nvidia.com/gpu.count=1\n"), "labels stay");
}

#[test]
fn every_metric_family_has_a_sample_from_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = nvlabel(Some("t4"));
    cmd.env("RUST_LOG", "info")
        .args([
            "--no-timestamp",
            "--use-node-feature-api=false",
            "--sleep-interval",
            "1h",
            "--log-format",
            "json",
        ])
        .args(["--metrics-addr", "127.0.0.1:0", "-o"])
        .arg(dir.path().join("gfd"));
    let (mut child, rx) = daemon_logs(&mut cmd);
    let lines = lines_until(&rx, "serving /healthz", 1);
    let v: serde_json::Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    let addr = v["addr"].as_str().unwrap().to_string();
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    std::io::Write::write_all(&mut s, b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut metrics = String::new();
    s.read_to_string(&mut metrics).unwrap();
    for needle in [
        "nvlabel_publish_failures_total{writer=\"feature-file\",reason=\"file\"} 0",
        "nvlabel_nvml_errors_total{function=\"nvmlInit\"} 0",
        "nvlabel_nvml_errors_total{function=\"nvmlDeviceGetMemoryInfo_v2\"} 0",
        "nvlabel_mps_on_mig 0",
        "nvlabel_config_reload_failures_total 0",
    ] {
        assert!(metrics.contains(needle), "{needle} missing from:\n{metrics}");
    }
    // Every family declared has at least one sample line.
    for family in
        metrics.lines().filter_map(|l| l.strip_prefix("# TYPE ")).map(|l| l.split(' ').next().unwrap())
    {
        assert!(
            metrics.lines().any(|l| !l.starts_with('#') && l.starts_with(family)),
            "{family} has no sample:\n{metrics}"
        );
    }
    assert_eq!(stop_with(&mut child, "-TERM").code(), Some(0));
}

#[test]
fn a_missing_nvml_library_names_it_once_and_says_what_to_do() {
    let (code, _, stderr) = run(print("t4").args(["--nvml-library", "/nonexistent/libnvidia-ml.so.1"]));
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        "nvlabel: error: no NVIDIA driver found: cannot load /nonexistent/libnvidia-ml.so.1: cannot open shared object file: No such file or directory \
         (install the driver or point --nvml-library at its libnvidia-ml.so.1 (on Jetson, IGX or Thor: --device-discovery-strategy=tegra, \
         or let nvlabel see the host's /etc/nv_tegra_release through --host-root); --fail-on-init-error=false labels this node without GPUs)\n"
    );
}

#[test]
fn a_lost_gpu_is_spelled_right() {
    let yaml = ok(nvlabel(Some("faulty")).arg("probe"));
    assert!(
        yaml.contains("GpuLost: the GPU fell off the bus or has otherwise become inaccessible"),
        "{yaml}"
    );
    assert!(!yaml.contains("inacessible"));
}

#[test]
fn a_removed_config_directory_is_said_once_without_debug_dumps() {
    let dir = tempfile::tempdir().unwrap();
    let configs = dir.path().join("configs");
    std::fs::create_dir(&configs).unwrap();
    std::fs::write(configs.join("config.yaml"), "version: v1\n").unwrap();
    let mut cmd = nvlabel(Some("t4"));
    // The default log filter, as a user gets it.
    cmd.env_remove("RUST_LOG")
        .args(["--no-timestamp", "--use-node-feature-api=false", "--sleep-interval", "1h", "--config-file"])
        .arg(configs.join("config.yaml"))
        .arg("-o")
        .arg(dir.path().join("gfd"));
    let (mut child, rx) = daemon_logs(&mut cmd);
    lines_until(&rx, "published labels", 1);
    std::fs::remove_dir_all(&configs).unwrap();
    let lines = lines_until(&rx, "configuration rejected", 1);
    assert_eq!(stop_with(&mut child, "-TERM").code(), Some(0));
    let lines: Vec<String> = lines.into_iter().chain(rx.try_iter()).collect();
    assert!(lines.iter().all(|l| !l.contains("Os {") && !l.contains("notify::")), "{lines:#?}");
    assert_eq!(lines.iter().filter(|l| l.contains("No such file or directory")).count(), 1, "{lines:#?}");
}

#[test]
fn a_reload_names_the_file_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::copy(repo().join("testdata/configs/time-slicing-gpu-2.yaml"), &config).unwrap();
    let mut cmd = nvlabel(Some("t4"));
    cmd.env("RUST_LOG", "info")
        .args(["--no-timestamp", "--use-node-feature-api=false", "--sleep-interval", "1h", "--config-file"])
        .arg(&config)
        .arg("-o")
        .arg(dir.path().join("gfd"));
    let (mut child, rx) = daemon_logs(&mut cmd);
    let first = lines_until(&rx, "published labels", 1);
    // The first publish of a run names its labels, as plain text.
    let first = first.last().unwrap();
    assert!(
        first.contains("nvidia.com/gpu.count=1, ") && first.contains("nvidia.com/gpu.replicas=2"),
        "{first}"
    );
    std::fs::copy(repo().join("testdata/configs/time-slicing-gpu-4.yaml"), &config).unwrap();
    let lines = lines_until(&rx, "configuration loaded", 1);
    let line = lines.last().unwrap();
    assert!(line.ends_with(&format!("configuration loaded config={}", config.display())), "{line}");
    // What changed, as text (no Rust debug forms: no brackets, no Some).
    let changed = lines_until(&rx, "published labels", 1);
    assert_eq!(stop_with(&mut child, "-TERM").code(), Some(0));
    let changed = changed.last().unwrap();
    assert!(changed.contains("nvidia.com/gpu.replicas: 2 -> 4"), "{changed}");
    assert!(!changed.contains("[\"") && !changed.contains("Some("), "{changed}");
}

/// A one-shot run against an API server at a closed port: one line naming the server once, no
/// client library's lines, no wrapper repeating it.
#[test]
fn an_unreachable_api_server_is_one_line_naming_it_once() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let server = format!("https://127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let users = "users: [{name: u, user: {token: t}}]";
    let contexts = "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c";
    std::fs::write(
        &kubeconfig,
        format!("apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \"{server}\"}}}}]\n{contexts}\n{users}\n"),
    )
    .unwrap();
    for (target, object) in
        [(&["--sink", "node"][..], "Node n"), (&["-o", ""], "NodeFeature default/nvidia-features-for-n")]
    {
        let mut cmd = nvlabel(Some("t4"));
        cmd.args(["--oneshot", "--node-name", "n", "--kubeconfig"]).arg(&kubeconfig).args(target);
        let (code, stdout, stderr) = run(&mut cmd);
        assert_eq!((code, stdout.as_str(), stderr.lines().count()), (1, "", 1), "{target:?}: {stderr}");
        assert!(stderr.starts_with(&format!("nvlabel: error: cannot read {object}: {server}: ")), "{stderr}");
        assert_eq!(stderr.matches(&server).count(), 1, "{stderr}");
    }
}
