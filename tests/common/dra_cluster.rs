//! The real API server tier's setup for DRA nodes: the server with DeviceTaintRule served
//! (`resource.k8s.io/v1beta2` on Kubernetes 1.36), deploy/node-health-dra applied, Nodes, the
//! token of nvlabel's pod on one of them, ResourceSlices as NVIDIA's DRA driver publishes them,
//! and the DeviceTaintRules on the server.
#![allow(dead_code)]

use super::apiserver::{self, apply, namespace, node, pod_token, Server};
use super::health_cluster::kubelet_status;
use super::manifests::{deploy, render};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// kube-apiserver flags that serve DeviceTaintRule on 1.36.
pub const ARGS: &str = "--feature-gates=DRADeviceTaints=true,DRADeviceTaintRules=true --runtime-config=resource.k8s.io/v1beta2=true";

/// The tier's tests share one server: one at a time.
pub static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The server (started with [`ARGS`]), or `None` after a one-line skip.
pub async fn begin(test: &str) -> Option<(&'static Server, tokio::sync::MutexGuard<'static, ()>)> {
    let server = apiserver::server_with(test, Some(ARGS))?;
    Some((server, SERIAL.lock().await))
}

/// DeviceTaintRule as 1.36 serves it.
pub fn taint_rules(c: &Client) -> Api<DynamicObject> {
    let r = ApiResource {
        group: "resource.k8s.io".into(),
        version: "v1beta2".into(),
        api_version: "resource.k8s.io/v1beta2".into(),
        kind: "DeviceTaintRule".into(),
        plural: "devicetaintrules".into(),
    };
    Api::all_with(c.clone(), &r)
}

/// Every DeviceTaintRule: name → (resourceVersion, spec).
pub async fn rules(admin: &Client) -> BTreeMap<String, (String, Value)> {
    let list = taint_rules(admin).list(&Default::default()).await.unwrap();
    list.items
        .into_iter()
        .map(|o| {
            let spec = o.data["spec"].clone();
            (o.metadata.name.unwrap(), (o.metadata.resource_version.unwrap_or_default(), spec))
        })
        .collect()
}

/// A rule as a test writes it, labelled as nvlabel labels its rules for node `pool`.
pub fn rule(name: &str, driver: &str, pool: &str, device: &str, key: &str) -> Value {
    let labels = json!({"app.kubernetes.io/managed-by": "nvlabel", "nvidia.com/gpu-health-node": pool});
    json!({"apiVersion": "resource.k8s.io/v1beta2", "kind": "DeviceTaintRule", "metadata": {"name": name, "labels": labels},
           "spec": {"deviceSelector": {"driver": driver, "pool": pool, "device": device},
                    "taint": {"key": key, "value": "Test", "effect": "NoSchedule"}}})
}

/// A full GPU as NVIDIA's driver publishes it.
pub fn gpu(name: &str, uuid: &str, minor: i64) -> Value {
    json!({"name": name, "attributes": {
        "type": {"string": "gpu"}, "uuid": {"string": uuid}, "minor": {"int": minor}, "index": {"int": minor},
        "productName": {"string": "NVIDIA H100 80GB HBM3"}, "architecture": {"string": "Hopper"},
        "cudaComputeCapability": {"version": "9.0.0"}, "driverVersion": {"version": "550.54.15"}},
        "capacity": {"memory": {"value": "80Gi"}}})
}

/// A MIG device as NVIDIA's driver publishes it.
pub fn mig(name: &str, uuid: &str, parent: &str, profile: &str) -> Value {
    json!({"name": name, "attributes": {
        "type": {"string": "mig"}, "uuid": {"string": uuid}, "parentUUID": {"string": parent},
        "profile": {"string": profile}, "productName": {"string": "NVIDIA H100 80GB HBM3"}},
        "capacity": {"memory": {"value": "10Gi"}}})
}

/// Creates or replaces `node`'s slice `name` of driver gpu.nvidia.com with `devices`.
pub async fn put_slice(admin: &Client, node: &str, name: &str, devices: Vec<Value>) {
    apply(
        admin,
        &json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
                "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
                         "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}),
    )
    .await;
}

/// Deletes a slice.
pub async fn delete_slice(admin: &Client, name: &str) {
    let api: Api<k8s_openapi::api::resource::v1::ResourceSlice> = Api::all(admin.clone());
    let _ = api.delete(name, &DeleteParams::default()).await;
}

/// deploy/node-health-dra applied, Nodes `nodes` as a kubelet leaves them, nvlabel's pod on the
/// first; the pod token's client and kubeconfig, once the device-taint policy is in force.
pub async fn setup(server: &Server, admin: &Client, nodes: &[&str]) -> (Client, std::path::PathBuf) {
    apply(admin, &json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"}, "handler": "nvidia"}))
        .await;
    let mut docs = render(&deploy().join("node-health-dra"));
    docs.sort_by_key(|d| d["kind"] != "Namespace");
    for d in &docs {
        apply(admin, d).await;
        if d["kind"] == "Namespace" {
            namespace(admin, d["metadata"]["name"].as_str().unwrap(), d["metadata"]["labels"].clone()).await;
        }
    }
    let api: Api<Node> = Api::all(admin.clone());
    for (i, name) in nodes.iter().enumerate() {
        node(admin, name, json!({"nvidia.com/gpu.present": "true"})).await;
        let status = kubelet_status(&format!("10.0.1.{}", i + 1));
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(status)).await.unwrap();
    }
    let (sa, kubeconfig) = pod_client(server, admin, nodes[0]).await;
    // The policy takes effect a moment after it is created: wait until it refuses a dry run.
    let other = nodes.get(1).copied().unwrap_or("elsewhere");
    let body =
        rule(&format!("nvlabel-{other}-probe"), "gpu.nvidia.com", other, "gpu-0", "nvidia.com/gpu-health");
    let params = PatchParams { dry_run: true, ..PatchParams::apply("nvlabel").force() };
    for i in 0.. {
        if taint_rules(&sa)
            .patch(&format!("nvlabel-{other}-probe"), &params, &Patch::Apply(&body))
            .await
            .is_err()
        {
            break;
        }
        assert!(i < 200, "the device-taint admission policy never took effect");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (sa, kubeconfig)
}

/// nvlabel's pod on `node` (its DaemonSet's pod spec as deploy/node-health-dra has it, replaced
/// if it exists): the client and kubeconfig of a token bound to it, which carries `node` as its
/// node-name claim.
pub async fn pod_client(server: &Server, admin: &Client, node: &str) -> (Client, std::path::PathBuf) {
    let docs = render(&deploy().join("node-health-dra"));
    let ds = docs.iter().find(|d| d["kind"] == "DaemonSet").unwrap();
    let mut spec = ds["spec"]["template"]["spec"].clone();
    spec["nodeName"] = json!(node);
    let pod_name = format!("nvlabel-{node}");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": pod_name, "namespace": "nvlabel", "labels": ds["spec"]["template"]["metadata"]["labels"]},
        "spec": spec,
    }))
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "nvlabel");
    let now = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
    let _ = pods.delete(&pod_name, &now).await;
    for _ in 0..50 {
        if pods.get_opt(&pod_name).await.unwrap().is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let pod = pods.create(&PostParams::default(), &pod).await.expect("the pod is admitted");
    let token = pod_token(admin, "nvlabel", "nvlabel", &pod).await;
    let kubeconfig = server.kubeconfig_for(&pod_name, &token);
    (apiserver::client_from(&kubeconfig).await, kubeconfig)
}

/// nvlabel as the DaemonSet runs it on a DRA node (`--allocation-mode=dra`, health) for `node`,
/// with the fake NVML's two H100s and the event file of the node's files in `d` (passes a second
/// apart unless `extra` says otherwise); its log is appended to `d`/log.
pub fn dra_daemon(
    d: &std::path::Path,
    node: &str,
    kubeconfig: &std::path::Path,
    extra: &[&str],
) -> super::health_daemon::Daemon {
    let mut cmd = super::nvlabel(None);
    cmd.args(["--sink=node", &format!("--node-name={node}"), "--health", "--allocation-mode=dra"]);
    if !extra.iter().any(|a| a.starts_with("--sleep-interval")) {
        cmd.arg("--sleep-interval=1s");
    }
    cmd.args(extra)
        .args(["--no-timestamp", "--kubeconfig"])
        .arg(kubeconfig)
        .arg("--boot-id-file")
        .arg(d.join("boot_id"))
        .env("NVLABEL_SYSFS_ROOT", d.join("sys"))
        .env("FAKE_NVML_FIXTURE", super::repo().join("testdata/health/h100x2.yaml"))
        .env("FAKE_NVML_EVENTS", d.join("events"))
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::OpenOptions::new().create(true).append(true).open(d.join("log")).unwrap());
    super::health_daemon::Daemon { child: cmd.spawn().unwrap() }
}

/// The rules as the admin lists them, by name: (name of the selected pool, spec).
pub type Rules = BTreeMap<String, (String, Value)>;

/// Polls (bounded, `within`) until `f` holds of every rule the admin lists; returns them and how
/// long it took. A timeout names `what`, shows the rules and the daemon's `log`, if any.
pub async fn until_rules(
    admin: &Client,
    what: &str,
    within: Duration,
    log: Option<&std::path::Path>,
    f: impl Fn(&Rules) -> bool,
) -> (Rules, Duration) {
    let start = std::time::Instant::now();
    loop {
        let all = rules(admin).await;
        if f(&all) {
            return (all, start.elapsed());
        }
        let log = log.map(|d| std::fs::read_to_string(d.join("log")).unwrap_or_default()).unwrap_or_default();
        assert!(start.elapsed() < within, "{what} never happened: {all:?}\n{log}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
