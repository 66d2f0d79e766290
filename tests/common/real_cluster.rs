//! The real-API tier's shared setup (`real_api.rs`, `real_api_nodefeature.rs`): one test at a
//! time on the shared server, the cluster-wide basics, the `deploy/` overlays and the pods they
//! run, an in-process daemon with a recording client, and bounded polling.

use super::apiserver::{self, apply, namespace, Server};
use super::manifests::{deploy, render};
use super::{repo, t4_snapshot};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use kube::Client;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The tier's tests share one server and the `nvlabel` namespace: one at a time.
pub static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The server, or `None` after a one-line skip.
pub async fn begin(test: &str) -> Option<(&'static Server, tokio::sync::MutexGuard<'static, ()>)> {
    let server = apiserver::server(test)?;
    Some((server, SERIAL.lock().await))
}

/// Cluster-wide objects a GPU cluster has: the NVIDIA runtime class, NFD's NodeFeature kind.
pub async fn cluster_basics(admin: &Client) {
    apply(admin, &json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"}, "handler": "nvidia"}))
        .await;
    let crd = super::manifests::yaml_docs(&repo().join("testdata/crds/nodefeature.yaml")).remove(0);
    apply(admin, &crd).await;
    apiserver::wait_for_kind(admin, "nfd.k8s-sigs.io", "v1alpha1", "NodeFeature").await;
}

/// Applies a rendered overlay, namespace first (the job's node placeholder filled in).
pub async fn apply_overlay(admin: &Client, mode: &str, node_name: &str) -> Vec<Value> {
    let mut docs = render(&deploy().join(mode));
    docs.sort_by_key(|d| d["kind"] != "Namespace");
    for d in &mut docs {
        if d["kind"] == "Job" {
            d["spec"]["template"]["spec"]["nodeName"] = json!(node_name);
        }
        apply(admin, d).await;
        if d["kind"] == "Namespace" {
            namespace(admin, d["metadata"]["name"].as_str().unwrap(), d["metadata"]["labels"].clone()).await;
        }
    }
    docs
}

/// The pod a DaemonSet or Job of `docs` would run on `node_name`, owned like the real one.
pub fn pod_of(docs: &[Value], name: &str, node_name: &str, owner: Option<&DaemonSet>) -> Pod {
    let workload = docs.iter().find(|d| d["kind"] == "DaemonSet" || d["kind"] == "Job").expect("a workload");
    let template = &workload["spec"]["template"];
    let mut spec = template["spec"].clone();
    spec["nodeName"] = json!(node_name);
    let owners = owner.map(|ds| {
        json!([{
            "apiVersion": "apps/v1", "kind": "DaemonSet", "name": ds.metadata.name, "uid": ds.metadata.uid,
            "controller": true, "blockOwnerDeletion": true
        }])
    });
    serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "namespace": workload["metadata"]["namespace"],
            "labels": template["metadata"]["labels"],
            "ownerReferences": owners,
        },
        "spec": spec,
    }))
    .unwrap()
}

/// Creates a pod (replacing one of the same name) and returns what the server stored.
pub async fn create_pod(admin: &Client, pod: &Pod) -> Result<Pod, kube::Error> {
    let ns = pod.metadata.namespace.clone().unwrap();
    let api: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    let name = pod.metadata.name.clone().unwrap();
    let _ = api.delete(&name, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await;
    for _ in 0..50 {
        if api.get_opt(&name).await?.is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    api.create(&PostParams::default(), pod).await
}

/// The configuration of a daemon labelling from a recorded T4 snapshot with the flags `args`, and
/// the directory that holds the snapshot.
pub fn t4_config(args: &[&str]) -> (nvlabel::config::ConfigState, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = t4_snapshot(dir.path());
    let mut all = vec!["nvlabel", "--snapshot", snapshot.to_str().unwrap()];
    all.extend_from_slice(args);
    let cli = nvlabel::config::Cli::try_from_args(all).unwrap();
    let state = nvlabel::config::ConfigState::load(
        cli,
        Default::default(),
        nvlabel::config::ConfigSource::None,
        None,
    )
    .unwrap();
    (state, dir)
}

/// A daemon as the DaemonSet runs it, labelling from a T4 snapshot, with a client that records
/// its requests (and this Node's watch, where the flags ask for the Node writer); returns what it
/// needs to be observed and stopped.
pub async fn watching_daemon(
    kubeconfig: &std::path::Path,
    extra: &[&str],
) -> (
    apiserver::Requests,
    tokio::sync::mpsc::Sender<nvlabel::daemon::Control>,
    tokio::task::JoinHandle<()>,
    tempfile::TempDir,
) {
    let mut args = vec!["--no-timestamp", "--sleep-interval=1s"];
    args.extend_from_slice(extra);
    let (state, dir) = t4_config(&args);
    let (client, seen) = apiserver::counting_client(kubeconfig).await;
    let daemon = super::daemon_of(state, Some(client), Default::default(), None);
    let (control, rx) = tokio::sync::mpsc::channel(4);
    let task = tokio::spawn(async move { daemon.serve(rx).await.unwrap() });
    (seen, control, task, dir)
}

/// The requests other than watches (which stay open) since `from`.
pub fn non_watch(seen: &apiserver::Requests, from: usize) -> Vec<(String, String)> {
    seen.lock().unwrap()[from..].iter().filter(|(_, p)| !p.contains("watch=true")).cloned().collect()
}

/// Polls (bounded, 30 s) until `probe` gives `want`; returns how long it took.
pub async fn until<F, Fut>(what: &str, probe: F, want: &str) -> Duration
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<String>>,
{
    let start = Instant::now();
    while probe().await.as_deref() != Some(want) {
        assert!(start.elapsed() < Duration::from_secs(30), "{what} never happened");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    start.elapsed()
}

/// The labels of a Node.
pub async fn node_labels(admin: &Client, name: &str) -> BTreeMap<String, String> {
    Api::<Node>::all(admin.clone()).get(name).await.unwrap().metadata.labels.unwrap_or_default()
}

/// `nvidia.com/gpu.count` on a Node.
pub async fn node_gpu_count(admin: &Client, node: &str) -> Option<String> {
    node_labels(admin, node).await.get("nvidia.com/gpu.count").cloned()
}
