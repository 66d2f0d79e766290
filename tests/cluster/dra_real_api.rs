//! nvlabel on DRA nodes against a real kube-apiserver (1.36, DeviceTaintRule served as
//! `resource.k8s.io/v1beta2`), with ResourceSlices as NVIDIA's DRA driver publishes them: GPU
//! faults as device taints on exactly the faulty GPU's devices (found by `uuid`/`parentUUID`,
//! never by name), written once, kept across a restart, removed by a new boot and by `nvlabel
//! prune`; the admission policy that fences a pod's token to its own node's pool; and
//! `--allocation-mode auto` following a slice that appears and goes.
//! Needs `NVLABEL_KUBE_TEST_SERVER`; without it each test skips with one line.

use crate::common;

use common::dra_cluster::{
    self, begin, delete_slice, dra_daemon, gpu, mig, put_slice, rule, rules, setup, taint_rules, Rules,
};
use common::health_cluster::get_condition;
use common::health_daemon::{node_files, Daemon};
use common::real_cluster::{node_labels, t4_config};
use common::*;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::Client;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

const UUID0: &str = "GPU-a1b2c3d4-0000-4000-8000-000000000000";
const UUID1: &str = "GPU-a1b2c3d4-0001-4000-8000-000000000001";

/// Polls (bounded, 30 s) until `f` holds of this node's rules; returns them.
async fn until_rules(admin: &Client, what: &str, f: impl Fn(&Rules) -> bool) -> Rules {
    let mine = |all: &Rules| -> Rules {
        all.iter().filter(|(n, _)| n.ends_with(".dra-a")).map(|(n, r)| (n.clone(), r.clone())).collect()
    };
    let (all, _) =
        dra_cluster::until_rules(admin, what, Duration::from_secs(30), None, |all| f(&mine(all))).await;
    mine(&all)
}

/// Polls (bounded, 10 s) until dra-a's log in `d` counts `n` rule writes, never more: the line
/// is logged after the apply returns, so it may come a moment after the rule is seen.
async fn until_writes(d: &Path, n: usize) {
    let start = Instant::now();
    loop {
        let log = std::fs::read_to_string(d.join("log")).unwrap_or_default();
        let count = log.matches("GPU device taint written").count();
        assert!(count <= n, "{count} writes, {n} expected: {log}");
        if count == n {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{count} writes, {n} expected: {log}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// nvlabel on node dra-a (DRA mode, health).
fn start(d: &Path, kubeconfig: &Path) -> Daemon {
    dra_daemon(d, "dra-a", kubeconfig, &[])
}

fn event_line(d: &Path, line: &str) {
    let mut f = std::fs::OpenOptions::new().append(true).open(d.join("events")).unwrap();
    writeln!(f, "{line}").unwrap();
}

/// dra-a's slices as a driver of recent versions names them (`gpu-<minor>`, MIG devices by
/// profile and placement), split over two slices; dra-b has its own GPU.
async fn driver_slices(admin: &Client) {
    put_slice(admin, "dra-a", "dra-a-gpu.nvidia.com-full", vec![gpu("gpu-17", UUID0, 17)]).await;
    let migs = vec![
        mig("gpu-18-mig-19-0-1", "MIG-0001-a", UUID1, "1g.10gb"),
        mig("gpu-18-mig-19-1-1", "MIG-0001-b", UUID1, "1g.10gb"),
    ];
    put_slice(admin, "dra-a", "dra-a-gpu.nvidia.com-mig", migs).await;
    put_slice(admin, "dra-b", "dra-b-gpu.nvidia.com-full", vec![gpu("gpu-3", "GPU-ffff-b", 3)]).await;
}

#[tokio::test]
async fn a_faulty_gpu_taints_exactly_its_devices_until_a_new_boot() {
    let Some((server, _serial)) = begin("a_faulty_gpu_taints_exactly_its_devices_until_a_new_boot").await
    else {
        return;
    };
    let admin = server.admin().await;
    let (_, kubeconfig) = setup(server, &admin, &["dra-a", "dra-b"]).await;
    for (name, _) in rules(&admin).await {
        taint_rules(&admin).delete(&name, &DeleteParams::default()).await.unwrap();
    }
    driver_slices(&admin).await;
    // Node dra-a-x's rule: its node's name starts like dra-a's, and it is not dra-a's to remove.
    let theirs = rule("nvlabel-gpu-1.dra-a-x", "gpu.nvidia.com", "dra-a-x", "gpu-1", "nvidia.com/gpu-health");
    apiserver::apply(&admin, &theirs).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    node_files(d);
    let log = || std::fs::read_to_string(d.join("log")).unwrap_or_default();
    // Each write request logs this line once (a server-side apply that changes nothing keeps the
    // resourceVersion, so only the requests show an idle write).
    let writes = || log().matches("GPU device taint written").count();

    let daemon = start(d, &kubeconfig);
    let start_wait = Instant::now();
    while get_condition(&admin, "dra-a", "GPUHealthy").await.map(|c| c.0).as_deref() != Some("True") {
        assert!(start_wait.elapsed() < Duration::from_secs(30), "{}", log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let labels = node_labels(&admin, "dra-a").await;
    assert_eq!(labels.get("nvidia.com/gpu.present").map(String::as_str), Some("true"), "{labels:?}");
    assert!(!labels.contains_key("nvidia.com/gpu.replicas"), "the DRA profile: {labels:?}");
    assert!(until_rules(&admin, "nothing", |r| r.is_empty()).await.is_empty());

    // A fault on the MIG-enabled GPU: its MIG devices, found by parentUUID, and nothing else.
    event_line(d, "1 xid 79");
    let want = ["nvlabel-gpu-18-mig-19-0-1.dra-a", "nvlabel-gpu-18-mig-19-1-1.dra-a"];
    let got = until_rules(&admin, "the MIG devices' taints", |r| r.len() == 2).await;
    assert_eq!(got.keys().map(String::as_str).collect::<Vec<_>>(), want, "{}", log());
    let spec = &got[want[0]].1;
    assert_eq!(spec["deviceSelector"]["driver"], "gpu.nvidia.com");
    assert_eq!(spec["deviceSelector"]["pool"], "dra-a");
    assert_eq!(spec["deviceSelector"]["device"], "gpu-18-mig-19-0-1");
    assert_eq!(spec["taint"]["key"], "nvidia.com/gpu-health");
    assert_eq!(spec["taint"]["value"], "XidCriticalError");
    assert_eq!(spec["taint"]["effect"], "NoSchedule");
    assert!(rules(&admin).await.keys().all(|n| !n.contains("dra-b")), "dra-b is untouched");

    // Idle passes write nothing (three passes).
    until_writes(d, 2).await;
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert_eq!(until_rules(&admin, "the same rules", |_| true).await, got, "idle passes wrote");
    assert_eq!(writes(), 2, "idle passes wrote: {}", log());

    // A device the driver publishes after the fault gets its taint then.
    let mut migs = vec![
        mig("gpu-18-mig-19-0-1", "MIG-0001-a", UUID1, "1g.10gb"),
        mig("gpu-18-mig-19-1-1", "MIG-0001-b", UUID1, "1g.10gb"),
    ];
    migs.push(mig("gpu-18-mig-14-4-2", "MIG-0001-c", UUID1, "2g.20gb"));
    put_slice(&admin, "dra-a", "dra-a-gpu.nvidia.com-mig", migs).await;
    let got = until_rules(&admin, "the late device's taint", |r| r.len() == 3).await;
    assert!(got.contains_key("nvlabel-gpu-18-mig-14-4-2.dra-a"), "{got:?}");
    until_writes(d, 3).await;

    // A restart finds its rules and writes nothing.
    drop(daemon);
    let daemon = start(d, &kubeconfig);
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert_eq!(until_rules(&admin, "the same rules", |_| true).await, got, "a restart wrote: {}", log());
    assert_eq!(writes(), 3, "a restart wrote: {}", log());

    // A new boot: the GPU is healthy again, its taints go.
    std::fs::write(d.join("boot_id"), "boot-2\n").unwrap();
    until_rules(&admin, "the taints' removal", |r| r.is_empty()).await;

    // A fault on the full GPU taints its one device; `nvlabel prune` removes it.
    event_line(d, "0 xid 79");
    let got = until_rules(&admin, "the full GPU's taint", |r| !r.is_empty()).await;
    assert_eq!(got.keys().collect::<Vec<_>>(), ["nvlabel-gpu-17.dra-a"]);
    drop(daemon);
    let mut prune = nvlabel(None);
    prune.args(["prune", "--sink=node", "--node-name=dra-a", "--kubeconfig"]);
    ok(prune.arg(&kubeconfig));
    assert!(until_rules(&admin, "prune", |r| r.is_empty()).await.is_empty());
    assert!(rules(&admin).await.contains_key("nvlabel-gpu-1.dra-a-x"), "another node's rule stays");
    // What the chart's uninstall runs: every node's rules go (an admin's kubeconfig).
    let mut all = nvlabel(None);
    all.args(["prune", "--health-only", "--all-nodes", "--kubeconfig"]).arg(server.kubeconfig());
    ok(&mut all);
    assert!(rules(&admin).await.is_empty(), "{:?}", rules(&admin).await);
    let warnings = log().lines().filter(|l| l.contains("WARN")).map(String::from).collect::<Vec<_>>();
    assert!(warnings.iter().all(|l| !l.contains("DeviceTaintRule")), "{warnings:?}");
}

#[tokio::test]
async fn a_pods_token_may_taint_only_its_own_nodes_pool() {
    let Some((server, _serial)) = begin("a_pods_token_may_taint_only_its_own_nodes_pool").await else {
        return;
    };
    let admin = server.admin().await;
    let (sa, _) = setup(server, &admin, &["dra-a", "dra-b"]).await;
    driver_slices(&admin).await;
    let api = taint_rules(&sa);
    let key = "nvidia.com/gpu-health";
    let write = |name: &str, body: serde_json::Value| {
        let api = api.clone();
        let name = name.to_string();
        async move { api.patch(&name, &PatchParams::apply("nvlabel").force(), &Patch::Apply(&body)).await }
    };
    // Its own pool, nvlabel's key, driver and name: allowed.
    write("nvlabel-gpu-17.dra-a", rule("nvlabel-gpu-17.dra-a", "gpu.nvidia.com", "dra-a", "gpu-17", key))
        .await
        .expect("its own pool");
    api.delete("nvlabel-gpu-17.dra-a", &DeleteParams::default()).await.expect("deleting its own rule");
    // Another node's pool, another key, another driver, another name: refused.
    for (name, body) in [
        ("nvlabel-gpu-3.dra-b", rule("nvlabel-gpu-3.dra-b", "gpu.nvidia.com", "dra-b", "gpu-3", key)),
        ("nvlabel-gpu-17.dra-a", rule("nvlabel-gpu-17.dra-a", "gpu.nvidia.com", "dra-b", "gpu-3", key)),
        (
            "nvlabel-gpu-17.dra-a",
            rule("nvlabel-gpu-17.dra-a", "gpu.nvidia.com", "dra-a", "gpu-17", "gpu.nvidia.com/xid"),
        ),
        ("nvlabel-gpu-17.dra-a", rule("nvlabel-gpu-17.dra-a", "other.example.com", "dra-a", "gpu-17", key)),
        ("someone-gpu-17.dra-a", rule("someone-gpu-17.dra-a", "gpu.nvidia.com", "dra-a", "gpu-17", key)),
    ] {
        let status = apiserver::refused(write(name, body.clone()).await);
        assert!(matches!(status.code, 403 | 422), "{body}: {status:?}");
    }
    // Deleting another node's rule: refused.
    let theirs = rule("nvlabel-gpu-3.dra-b", "gpu.nvidia.com", "dra-b", "gpu-3", key);
    apiserver::apply(&admin, &theirs).await;
    let status = apiserver::refused(api.delete("nvlabel-gpu-3.dra-b", &DeleteParams::default()).await);
    assert!(matches!(status.code, 403 | 422), "{status:?}");
    taint_rules(&admin).delete("nvlabel-gpu-3.dra-b", &DeleteParams::default()).await.unwrap();
    // Reading this node's slices: allowed.
    let slices: kube::Api<k8s_openapi::api::resource::v1::ResourceSlice> = kube::Api::all(sa.clone());
    let fields = "spec.nodeName=dra-a,spec.driver=gpu.nvidia.com";
    assert_eq!(slices.list(&ListParams::default().fields(fields)).await.unwrap().items.len(), 2);
    // Nothing more: no slice is written, no rule read one by one or replaced (RBAC).
    let slice: k8s_openapi::api::resource::v1::ResourceSlice = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "dra-a-forged"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": "dra-a", "pool": {"name": "dra-a", "generation": 1, "resourceSliceCount": 1}}
    }))
    .unwrap();
    assert_eq!(apiserver::refused(slices.create(&Default::default(), &slice).await).code, 403);
    assert_eq!(apiserver::refused(api.get("nvlabel-gpu-17.dra-a").await).code, 403);
}

#[tokio::test]
async fn auto_follows_a_slice_that_appears_and_goes_within_a_pass() {
    let Some((server, _serial)) = begin("auto_follows_a_slice_that_appears_and_goes_within_a_pass").await
    else {
        return;
    };
    let admin = server.admin().await;
    apiserver::node(&admin, "dra-auto", serde_json::json!({})).await;
    delete_slice(&admin, "dra-auto-gpu.nvidia.com-x").await;
    // No timer: only the slices' watch can start a pass after the first.
    let args = [
        "--sleep-interval=infinite",
        "--no-timestamp",
        "--sink=node",
        "--node-name=dra-auto",
        "--allocation-mode=auto",
    ];
    let (state, _dir) = t4_config(&args);
    let client = apiserver::client_from(&server.kubeconfig()).await;
    let slices = nvlabel::kubeapi::slices::SliceWatch::spawn(client.clone(), "dra-auto");
    let parts = common::parts_of(state, Some(client), Default::default(), None);
    let daemon =
        nvlabel::daemon::Daemon::new(nvlabel::daemon::Parts { slices: Some(slices), ..parts }).unwrap();
    let (control, rx) = tokio::sync::mpsc::channel(4);
    let task = tokio::spawn(async move { daemon.serve(rx).await.unwrap() });
    let label = |key: &'static str| {
        let admin = admin.clone();
        move || {
            let admin = admin.clone();
            async move { node_labels(&admin, "dra-auto").await.get(key).cloned() }
        }
    };
    common::real_cluster::until("the device-plugin profile", label("nvidia.com/gpu.replicas"), "1").await;
    put_slice(&admin, "dra-auto", "dra-auto-gpu.nvidia.com-x", vec![gpu("gpu-0", "GPU-t4", 0)]).await;
    common::real_cluster::until("the DRA profile", label("nvidia.com/gpu.present"), "true").await;
    assert!(!node_labels(&admin, "dra-auto").await.contains_key("nvidia.com/gpu.replicas"));
    delete_slice(&admin, "dra-auto-gpu.nvidia.com-x").await;
    common::real_cluster::until("the device-plugin profile again", label("nvidia.com/gpu.replicas"), "1")
        .await;
    assert!(!node_labels(&admin, "dra-auto").await.contains_key("nvidia.com/gpu.present"));
    control.send(nvlabel::daemon::Control::Shutdown).await.unwrap();
    task.await.unwrap();
}
