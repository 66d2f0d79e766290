//! A health daemon on the real API server tier, as the health tests run it: the binary on the fake
//! NVML (its event file to act on it) and a fake sysfs, writing node `gpu-a`; and the polls
//! that wait for what it writes.

use super::health_cluster::{get_condition, nodes_of};
use super::*;
use kube::Client;
use nvlabel::health::values::record::{Record, ANNOTATION};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

/// Polls (bounded, 30 s) until the condition satisfies `want`; returns it and how long it took.
pub async fn until(
    admin: &Client,
    what: &str,
    want: impl Fn(&(String, String, String)) -> bool,
) -> ((String, String, String), Duration) {
    let start = Instant::now();
    loop {
        if let Some(c) = get_condition(admin, "gpu-a", "GPUHealthy").await.filter(|c| want(c)) {
            return (c, start.elapsed());
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what} never happened: {:?}",
            get_condition(admin, "gpu-a", "GPUHealthy").await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub struct Daemon {
    /// The process.
    pub child: std::process::Child,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn start(dir: &Path, kubeconfig: &Path) -> Daemon {
    start_with(dir, kubeconfig, &repo().join("testdata/health/h100x2.yaml"), &[])
}

pub fn start_with(dir: &Path, kubeconfig: &Path, fixture: &Path, extra: &[&str]) -> Daemon {
    let mut cmd = nvlabel(None);
    // Passes a second apart unless `extra` says otherwise.
    if !extra.iter().any(|a| a.starts_with("--sleep-interval")) {
        cmd.arg("--sleep-interval=1s");
    }
    cmd.args(extra)
        .args(["--sink=node", "--node-name=gpu-a", "--health", "--no-timestamp", "--kubeconfig"])
        .arg(kubeconfig)
        .arg("--boot-id-file")
        .arg(dir.join("boot_id"))
        .env("NVLABEL_SYSFS_ROOT", dir.join("sys"))
        .env("FAKE_NVML_FIXTURE", fixture)
        .env("FAKE_NVML_EVENTS", dir.join("events"))
        .env("FAKE_NVML_CALLS", dir.join("calls"))
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.join(format!("log-{}", rand_suffix()))).unwrap());
    Daemon { child: cmd.spawn().unwrap() }
}

/// Every daemon log of the test, for failure messages.
pub fn logs(dir: &Path) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with("log-") {
            out.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
        }
    }
    out
}

pub fn rand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

pub fn event_line(dir: &Path, line: &str) {
    let mut f = std::fs::OpenOptions::new().append(true).open(dir.join("events")).unwrap();
    writeln!(f, "{line}").unwrap();
}

/// A node's files in `d`: a sysfs PCI bus, the boot id `boot-1`, an empty event file.
pub fn node_files(d: &std::path::Path) {
    health_sysfs(&d.join("sys"));
    std::fs::write(d.join("boot_id"), "boot-1\n").unwrap();
    std::fs::write(d.join("events"), "").unwrap();
}

pub async fn node_labels(admin: &Client) -> std::collections::BTreeMap<String, String> {
    nodes_of(admin).get("gpu-a").await.unwrap().metadata.labels.unwrap_or_default()
}

/// The fault record on gpu-a, if any.
pub async fn record_of(admin: &Client) -> Option<Record> {
    let annotations = nodes_of(admin).get("gpu-a").await.unwrap().metadata.annotations.unwrap_or_default();
    annotations.get(ANNOTATION).map(|r| Record::parse(r).unwrap())
}

/// Two NVIDIA GPUs on the PCI bus (as the fixture has), so no GPU is missing.
pub fn health_sysfs(dir: &Path) {
    for addr in ["0000:01:00.0", "0000:02:00.0"] {
        let d = dir.join("bus/pci/devices").join(addr);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("vendor"), "0x10de\n").unwrap();
        std::fs::write(d.join("class"), "0x030200\n").unwrap();
    }
}

/// A health daemon on `server` (deploy/node-health set up, `setup`) for the health fixture
/// `machine` (`testdata/health/<machine>.yaml`) with `extra` flags, on a fresh node's files: the
/// admin client, the node's directory and the daemon.
pub async fn daemon_on(
    server: &super::apiserver::Server,
    machine: &str,
    extra: &[&str],
) -> (Client, tempfile::TempDir, Daemon) {
    let admin = server.admin().await;
    let (_, kubeconfig) = super::health_cluster::setup(server, &admin).await;
    let dir = tempfile::tempdir().unwrap();
    node_files(dir.path());
    let fixture = repo().join(format!("testdata/health/{machine}.yaml"));
    let daemon = start_with(dir.path(), &kubeconfig, &fixture, extra);
    (admin, dir, daemon)
}

/// Waits (bounded, 30 s) until gpu-a's `nvidia.com/gpu.count` label is `count`; `dir`'s logs
/// say why if it never is.
pub async fn until_gpu_count(admin: &Client, count: &str, dir: &Path) {
    let start = Instant::now();
    while node_labels(admin).await.get("nvidia.com/gpu.count").map(String::as_str) != Some(count) {
        assert!(start.elapsed() < Duration::from_secs(30), "{:?}\n{}", node_labels(admin).await, logs(dir));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The Warning Events about gpu-a, oldest first.
pub async fn node_warnings(admin: &Client) -> Vec<k8s_openapi::api::events::v1::Event> {
    node_events(admin, |e| e.type_.as_deref() == Some("Warning")).await
}

/// The Events about gpu-a that `keep` keeps, oldest first.
pub async fn node_events(
    admin: &Client,
    keep: impl Fn(&k8s_openapi::api::events::v1::Event) -> bool,
) -> Vec<k8s_openapi::api::events::v1::Event> {
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(admin.clone(), "default");
    let mut found: Vec<_> = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("gpu-a") && keep(e))
        .collect();
    found.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
    found
}
