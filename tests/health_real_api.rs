//! GPU health on a real kube-apiserver: the condition a daemon writes as the fake NVML reports
//! Xids, row-remapping failures and lost GPUs; stickiness across a restart and until a new boot;
//! and the admission policy that keeps a pod-bound token to its own node's one condition.
//! Needs `NVLABEL_KUBE_TEST_SERVER`; without it each test skips with one line.

mod common;

use common::apiserver::{self, apply, namespace, node, pod_token, refused, Server};
use common::manifests::{deploy, render};
use common::*;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const UUID0: &str = "GPU-a1b2c3d4-0000-4000-8000-000000000000";
const UUID1: &str = "GPU-a1b2c3d4-0001-4000-8000-000000000001";

/// A status as a kubelet would have written it.
fn kubelet_status(ip: &str) -> Value {
    json!({"status": {
        "capacity": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"},
        "allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"},
        "addresses": [{"type": "InternalIP", "address": ip}],
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                        "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }})
}

/// deploy/node-health applied (the chart rendered with health.enabled=true, its ServiceAccount
/// and policy), nodes gpu-a (our pod's) and gpu-b, and the pod's token.
async fn setup(server: &Server, admin: &Client) -> (Client, std::path::PathBuf) {
    apply(admin, &json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"}, "handler": "nvidia"}))
        .await;
    let mut docs = render(&deploy().join("node-health"));
    docs.sort_by_key(|d| d["kind"] != "Namespace");
    for d in &docs {
        apply(admin, d).await;
        if d["kind"] == "Namespace" {
            namespace(admin, d["metadata"]["name"].as_str().unwrap(), d["metadata"]["labels"].clone()).await;
        }
    }
    assert!(docs.iter().any(|d| d["kind"] == "DaemonSet"
        && d["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .unwrap()
            .contains(&json!("--health"))));
    let nodes: Api<Node> = Api::all(admin.clone());
    for (name, ip) in [("gpu-a", "10.0.0.1"), ("gpu-b", "10.0.0.2")] {
        node(admin, name, json!({"nvidia.com/gpu.present": "true"})).await;
        nodes.patch_status(name, &PatchParams::default(), &Patch::Merge(kubelet_status(ip))).await.unwrap();
    }
    let ds = docs.iter().find(|d| d["kind"] == "DaemonSet").unwrap();
    let mut spec = ds["spec"]["template"]["spec"].clone();
    spec["nodeName"] = json!("gpu-a");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "nvlabel-gpu-a", "namespace": "nvlabel", "labels": ds["spec"]["template"]["metadata"]["labels"]},
        "spec": spec,
    }))
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "nvlabel");
    let now = kube::api::DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
    let _ = pods.delete("nvlabel-gpu-a", &now).await;
    for _ in 0..50 {
        if pods.get_opt("nvlabel-gpu-a").await.unwrap().is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let pod = pods.create(&PostParams::default(), &pod).await.expect("the pod is admitted");
    let token = pod_token(admin, "nvlabel", "nvlabel", &pod).await;
    let kubeconfig = server.kubeconfig_for("nvlabel-gpu-a", &token);
    let sa = apiserver::client_from(&kubeconfig).await;
    // The policy takes effect a moment after it is created: wait until it refuses a dry run.
    let params = PatchParams { dry_run: true, ..PatchParams::apply("nvlabel").force() };
    for i in 0.. {
        let body = condition("gpu-b", "GPUHealthy", "True");
        if nodes_of(&sa).patch_status("gpu-b", &params, &Patch::Apply(&body)).await.is_err() {
            break;
        }
        assert!(i < 200, "the health admission policy never took effect");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (sa, kubeconfig)
}

fn nodes_of(c: &Client) -> Api<Node> {
    Api::all(c.clone())
}

fn condition(node: &str, kind: &str, status: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
           "status": {"conditions": [{"type": kind, "status": status, "reason": "Test", "message": "test"}]}})
}

/// (status, reason, message) of a condition.
async fn get_condition(admin: &Client, node: &str, kind: &str) -> Option<(String, String, String)> {
    let n = nodes_of(admin).get(node).await.unwrap();
    let c = n.status?.conditions?.into_iter().find(|c| c.type_ == kind)?;
    Some((c.status, c.reason.unwrap_or_default(), c.message.unwrap_or_default()))
}

/// Polls (bounded, 30 s) until the condition satisfies `want`; returns it and how long it took.
async fn until(
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

#[tokio::test]
async fn the_token_sets_its_condition_and_nothing_else() {
    let Some(server) = apiserver::server("the_token_sets_its_condition_and_nothing_else") else { return };
    let _serial = SERIAL.lock().await;
    let admin = server.admin().await;
    let (sa, _) = setup(server, &admin).await;
    let nodes = nodes_of(&sa);
    let ssa = PatchParams::apply("nvlabel").force();
    nodes
        .patch_status("gpu-a", &ssa, &Patch::Apply(condition("gpu-a", "GPUHealthy", "False")))
        .await
        .expect("its own condition");
    assert_eq!(get_condition(&admin, "gpu-a", "GPUHealthy").await.unwrap().0, "False");

    let no = |r| refused(r).message;
    let m =
        no(nodes.patch_status("gpu-b", &ssa, &Patch::Apply(condition("gpu-b", "GPUHealthy", "False"))).await);
    assert!(m.contains("only change the status of the node its pod runs on"), "{m}");
    let m = no(nodes.patch_status("gpu-a", &ssa, &Patch::Apply(condition("gpu-a", "Ready", "False"))).await);
    assert!(m.contains("only change its own GPU health condition"), "{m}");
    let m = no(nodes
        .patch_status("gpu-a", &ssa, &Patch::Apply(condition("gpu-a", "SomethingElse", "True")))
        .await);
    assert!(m.contains("only change its own GPU health condition"), "{m}");
    let merge = PatchParams::default();
    for change in [
        json!({"status": {"capacity": {"nvidia.com/gpu": "8"}}}),
        json!({"status": {"allocatable": {"nvidia.com/gpu": "0"}}}),
        json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.9.9.9"}]}}),
    ] {
        let m = no(nodes.patch_status("gpu-a", &merge, &Patch::Merge(&change)).await);
        assert!(m.contains("only change conditions"), "{change}: {m}");
    }
    // The status subresource is not a way around the label policy either.
    let m = no(nodes
        .patch_status("gpu-a", &merge, &Patch::Merge(json!({"metadata": {"labels": {"team": "x"}}})))
        .await);
    assert!(m.contains("may not change node metadata"), "{m}");
    let b = nodes_of(&admin).get("gpu-b").await.unwrap().status.unwrap();
    assert!(b.conditions.unwrap().iter().all(|c| c.type_ != "GPUHealthy"));
    let a = nodes_of(&admin).get("gpu-a").await.unwrap().status.unwrap();
    assert_eq!(a.capacity.unwrap()["nvidia.com/gpu"].0, "2");
    let ready = a.conditions.unwrap().into_iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.status, "True");
}

struct Daemon {
    child: std::process::Child,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(dir: &Path, kubeconfig: &Path) -> Daemon {
    start_with(dir, kubeconfig, &repo().join("testdata/health/h100x2.yaml"), &[])
}

fn start_with(dir: &Path, kubeconfig: &Path, fixture: &Path, extra: &[&str]) -> Daemon {
    let mut cmd = nvlabel(None);
    cmd.args(extra)
        .args([
            "--sink=node",
            "--node-name=gpu-a",
            "--health",
            "--sleep-interval=1s",
            "--no-timestamp",
            "--kubeconfig",
        ])
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
fn logs(dir: &Path) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with("log-") {
            out.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
        }
    }
    out
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

fn event_line(dir: &Path, line: &str) {
    let mut f = std::fs::OpenOptions::new().append(true).open(dir.join("events")).unwrap();
    writeln!(f, "{line}").unwrap();
}

async fn labels(admin: &Client) -> std::collections::BTreeMap<String, String> {
    nodes_of(admin).get("gpu-a").await.unwrap().metadata.labels.unwrap_or_default()
}

#[tokio::test]
async fn faults_turn_the_condition_false_until_a_new_boot() {
    let Some(server) = apiserver::server("faults_turn_the_condition_false_until_a_new_boot") else { return };
    let _serial = SERIAL.lock().await;
    let admin = server.admin().await;
    let (_, kubeconfig) = setup(server, &admin).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    health_sysfs(&d.join("sys"));
    std::fs::write(d.join("boot_id"), "boot-1\n").unwrap();
    std::fs::write(d.join("events"), "").unwrap();

    let daemon = start(d, &kubeconfig);
    let (c, _) = until(&admin, "the first condition", |c| c.0 == "True").await;
    assert_eq!(c, ("True".into(), "GpusHealthy".into(), "2 GPUs healthy".into()));

    let start_wait = Instant::now();
    while labels(&admin).await.get("nvidia.com/gpu.count").map(String::as_str) != Some("2") {
        assert!(start_wait.elapsed() < Duration::from_secs(30), "{:?}", labels(&admin).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // An application's Xid is not a fault: nothing changes (three passes later, same object).
    event_line(d, "1 xid 13");
    let rv = nodes_of(&admin).get("gpu-a").await.unwrap().metadata.resource_version;
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let after = nodes_of(&admin).get("gpu-a").await.unwrap();
    assert_eq!(
        after.metadata.resource_version, rv,
        "idle passes and xid 13 wrote nothing: {:?}",
        after.metadata.managed_fields
    );

    event_line(d, "0 xid 79");
    let (c, took) = until(&admin, "xid 79", |c| c.0 == "False").await;
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(c.1, "XidCriticalError");
    assert_eq!(
        c.2,
        format!("GPU 0 ({UUID0}): XidCriticalError, Xid 79, action: reboot the node [boot boot-1]")
    );
    event_line(d, "1:0 xid 48");
    let (c, _) = until(&admin, "the MIG Xid", |c| c.2.contains("Xid 48")).await;
    assert!(
        c.2.contains(&format!(
            "GPU 1 ({UUID1}): XidCriticalError, Xid 48 on MIG device GI 9 CI 0, action: reset the GPU"
        )),
        "{}",
        c.2
    );
    let events: Api<Event> = Api::namespaced(admin.clone(), "default");
    let warnings: Vec<Event> = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("gpu-a")
                && e.type_.as_deref() == Some("Warning")
        })
        .collect();
    assert!(
        warnings.iter().any(|e| e.note.as_deref().is_some_and(|n| n.contains("Xid 79"))),
        "{warnings:?} {}",
        logs(d)
    );

    // A restart of nvlabel forgets nothing.
    drop(daemon);
    let before = get_condition(&admin, "gpu-a", "GPUHealthy").await.unwrap();
    let daemon = start(d, &kubeconfig);
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert_eq!(get_condition(&admin, "gpu-a", "GPUHealthy").await.unwrap(), before);

    // A new boot clears it.
    std::fs::write(d.join("boot_id"), "boot-2\n").unwrap();
    until(&admin, "the new boot", |c| c.0 == "True").await;

    // Row-remapping failure and a lost GPU, each a fault; the other GPU keeps its labels.
    event_line(d, "0 set remapped_rows.failure true");
    let (c, _) = until(&admin, "remapped rows failure", |c| c.0 == "False").await;
    assert_eq!(c.1, "RemappedRowsFailure");
    assert!(
        c.2.contains(&format!(
            "GPU 0 ({UUID0}): RemappedRowsFailure, row remapping failed, action: replace the GPU"
        )),
        "{}",
        c.2
    );
    event_line(d, "1 lost");
    let (c, _) = until(&admin, "the lost GPU", |c| c.1 == "GpuLost").await;
    assert!(
        c.2.contains(&format!("GPU 1 ({UUID1}): GpuLost, GPU is lost, action: reboot the node")),
        "{}",
        c.2
    );
    let start_wait = Instant::now();
    while labels(&admin).await.get("nvidia.com/gpu.count").map(String::as_str) != Some("1") {
        assert!(start_wait.elapsed() < Duration::from_secs(30), "{:?}", labels(&admin).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        labels(&admin).await.get("nvidia.com/gpu.product").map(String::as_str),
        Some("NVIDIA-H100-80GB-HBM3")
    );

    // One NVML session for the daemon's life: one init, however many passes.
    let mut daemon = daemon;
    assert!(stop_with(&mut daemon.child, "-TERM").success());
    let calls = std::fs::read_to_string(d.join("calls")).unwrap();
    assert!(calls.lines().any(|l| l == "nvmlInit_v2 1"), "{calls}");
}

/// Two NVIDIA GPUs on the PCI bus (as the fixture has), so no GPU is missing.
fn health_sysfs(dir: &Path) {
    for addr in ["0000:01:00.0", "0000:02:00.0"] {
        let d = dir.join("bus/pci/devices").join(addr);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("vendor"), "0x10de\n").unwrap();
        std::fs::write(d.join("class"), "0x030200\n").unwrap();
    }
}

#[tokio::test]
async fn without_nvml_the_condition_is_unknown_until_the_driver_appears() {
    let Some(server) = apiserver::server("without_nvml_the_condition_is_unknown_until_the_driver_appears")
    else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let admin = server.admin().await;
    let (_, kubeconfig) = setup(server, &admin).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    health_sysfs(&d.join("sys"));
    std::fs::write(d.join("boot_id"), "boot-1\n").unwrap();
    std::fs::write(d.join("events"), "").unwrap();
    let fixture = d.join("machine.yaml");
    let _daemon = start_with(d, &kubeconfig, &fixture, &["--fail-on-init-error=false"]);
    let (c, _) = until(&admin, "Unknown without a driver", |c| c.0 == "Unknown").await;
    assert_eq!(c.1, "NvmlUnavailable", "{c:?}");
    std::fs::copy(repo().join("testdata/health/h100x2.yaml"), &fixture).unwrap();
    until(&admin, "True once the driver is there", |c| c.0 == "True").await;
    let start_wait = Instant::now();
    while labels(&admin).await.get("nvidia.com/gpu.count").map(String::as_str) != Some("2") {
        assert!(start_wait.elapsed() < Duration::from_secs(30), "{:?} {}", labels(&admin).await, logs(d));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
