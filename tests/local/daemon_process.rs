//! The daemon as a process, with the fake NVML library: the machine changes under it, the
//! driver appears late, signals, and the HTTP endpoint.

use crate::common;

use common::*;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

fn terminate(mut child: Child) -> std::process::ExitStatus {
    stop_with(&mut child, "-TERM")
}

fn daemon(machine: &Path, out: &Path, extra: &[&str]) -> Child {
    let mut cmd = nvlabel(None);
    cmd.env("FAKE_NVML_FIXTURE", machine)
        .env("RUST_LOG", "info")
        .args(["--no-timestamp", "--use-node-feature-api=false", "--sleep-interval", "1s", "-o"])
        .arg(out)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd.spawn().unwrap()
}

/// The daemon keeps NVML open across passes and opens it again when the GPUs on the PCI bus
/// change; the fake reads its fixture at nvmlInit, so each change of machine here comes with a
/// GPU hot-added to (or removed from) the test's own sysfs tree, as a real one would.
#[test]
fn a_changed_machine_is_relabelled_within_an_interval() {
    let dir = tempfile::tempdir().unwrap();
    let machine = dir.path().join("machine.yaml");
    let out = dir.path().join("gfd");
    let sysfs = sysfs_copy(dir.path());
    std::fs::copy(fixture("h100-x8"), &machine).unwrap();
    let child = daemon(&machine, &out, &["--mig-strategy", "mixed", "--sysfs-root", sysfs.to_str().unwrap()]);
    wait_for_line(&out, "nvidia.com/gpu.count=8");
    // A GPU is added.
    std::fs::copy(fixture("rtx4090-x10"), &machine).unwrap();
    hot_plug(&sysfs, "0000:ff:00.0", true);
    wait_for_line(&out, "nvidia.com/gpu.count=10");
    // The machine changes again.
    std::fs::copy(fixture("a100-mig-mixed"), &machine).unwrap();
    hot_plug(&sysfs, "0000:ff:00.0", false);
    wait_for_line(&out, "nvidia.com/mig-1c.3g.20gb.count=3");
    std::fs::copy(fixture("a100-mig-single"), &machine).unwrap();
    hot_plug(&sysfs, "0000:ff:00.0", true);
    wait_for_line(&out, "nvidia.com/mig-1g.5gb.count=56");
    assert!(!std::fs::read_to_string(&out).unwrap().contains("mig-1c.3g.20gb"), "stale MIG labels are gone");
    let status = terminate(child);
    assert_eq!(status.code(), Some(0));
    assert!(out.exists(), "the feature file stays after SIGTERM");
}

#[test]
fn labels_appear_when_the_driver_appears() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gfd");
    let libdir = dir.path().join("driver");
    std::fs::create_dir(&libdir).unwrap();
    let lib = libdir.join("libnvidia-ml.so.1");
    let child = {
        let mut cmd = nvlabel(None);
        cmd.env("FAKE_NVML_FIXTURE", fixture("t4"))
            .args(["--no-timestamp", "--use-node-feature-api=false", "--fail-on-init-error=false"])
            .args(["--sleep-interval", "infinite", "--nvml-library"])
            .arg(&lib)
            .arg("-o")
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        cmd.spawn().unwrap()
    };
    // No driver yet: the node-level labels only.
    wait_for_line(&out, "nvidia.com/vgpu.present=false");
    assert!(!std::fs::read_to_string(&out).unwrap().contains("gpu.count"));
    // The driver is installed: even with an infinite interval, NVML is retried (with backoff).
    std::os::unix::fs::symlink(fake_nvml(), &lib).unwrap();
    wait_for_line(&out, "nvidia.com/gpu.count=1");
    assert_eq!(terminate(child).code(), Some(0));
}

#[test]
fn with_fail_on_init_error_a_missing_driver_ends_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gfd");
    let output = nvlabel(None)
        .args(["--use-node-feature-api=false", "--sleep-interval", "1s", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no NVIDIA driver found"));
}

#[test]
fn the_http_endpoint_reports_health_readiness_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gfd");
    let mut child =
        daemon(&fixture("faulty"), &out, &["--metrics-addr", "127.0.0.1:0", "--log-format", "json"]);
    // The bound port is logged (port 0 picks a free one).
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let addr = loop {
        let line = lines.next().expect("the daemon logs its address first").unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        if v["message"] == "serving /healthz, /readyz and /metrics" {
            break v["addr"].as_str().unwrap().to_string();
        }
        assert_ne!(v["message"], "published labels", "the address is logged before the first publish");
    };
    std::thread::spawn(move || for _ in lines {});
    wait_for_line(&out, "nvidia.com/gpu.count=3");
    let get = |path: &str| {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        std::io::Write::write_all(
            &mut s,
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        text
    };
    assert!(get("/healthz").starts_with("HTTP/1.1 200"));
    assert!(get("/readyz").starts_with("HTTP/1.1 200"));
    let metrics = get("/metrics");
    for needle in [
        "nvlabel_passes_total ",
        "nvlabel_pass_duration_seconds_count ",
        "nvlabel_nvml_errors_total{function=\"nvmlDeviceGetCudaComputeCapability\"}",
        "nvlabel_config_reload_failures_total 0",
        "nvlabel_labels_published 25",
        "nvlabel_last_success_timestamp_seconds ",
    ] {
        assert!(metrics.contains(needle), "{needle} missing from:\n{metrics}");
    }
    assert_eq!(terminate(child).code(), Some(0));
}

#[test]
fn the_expiry_stays_in_the_future_when_passes_are_an_hour_apart() {
    // NFD drops a feature file's labels once its expiry passes; the refresh must not wait for
    // the next pass. 4 s of expiry, an hour between passes, watched for 7 s.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gfd");
    let mut cmd = nvlabel(Some("t4"));
    cmd.args([
        "--no-timestamp",
        "--use-node-feature-api=false",
        "--expiry",
        "4s",
        "--sleep-interval",
        "1h",
        "-o",
    ])
    .arg(&out)
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    let child = cmd.spawn().unwrap();
    wait_for_line(&out, "nvidia.com/gpu.count=1");
    let started = Instant::now();
    let mut refreshed = std::collections::BTreeSet::new();
    while started.elapsed() < Duration::from_secs(7) {
        let text = std::fs::read_to_string(&out).unwrap();
        let stamp = text.lines().find_map(|l| l.strip_prefix("# +expiry-time=")).expect("an expiry line");
        let at = humantime::parse_rfc3339(stamp).unwrap();
        assert!(at > std::time::SystemTime::now(), "the feature file expired: {text}");
        refreshed.insert(stamp.to_string());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(refreshed.len() >= 3, "refreshed every 2 s: {refreshed:?}");
    assert_eq!(terminate(child).code(), Some(0));
}

#[test]
fn a_sigterm_as_soon_as_the_endpoint_is_up_is_a_clean_stop() {
    // The signal handlers exist before "serving /healthz" is logged, so a SIGTERM sent the moment
    // that line appears is always a clean stop (exit 0), never the default kill. Before, about
    // one run in eight died of the signal; five rounds make that visible without being flaky now.
    for round in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("gfd");
        let mut child =
            daemon(&fixture("t4"), &out, &["--metrics-addr", "127.0.0.1:0", "--log-format", "json"]);
        let stderr = child.stderr.take().unwrap();
        let mut lines = BufReader::new(stderr).lines();
        loop {
            let line = lines.next().expect("the daemon logs that it serves").unwrap();
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            if v["message"] == "serving /healthz, /readyz and /metrics" {
                break;
            }
        }
        std::thread::spawn(move || for _ in lines {});
        let status = terminate(child);
        assert_eq!(status.code(), Some(0), "round {round}: {status}");
    }
}
