//! The real API server tier's setup for GPU health: deploy/node-health applied, two Nodes as a
//! kubelet leaves them, and the token of nvlabel's pod on one of them.

use super::apiserver::{self, apply, namespace, node, pod_token, Server};
use super::manifests::{deploy, render};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};
use std::time::Duration;

/// A status as a kubelet would have written it.
pub fn kubelet_status(ip: &str) -> Value {
    json!({"status": {
        "capacity": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"},
        "allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"},
        "addresses": [{"type": "InternalIP", "address": ip}],
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                        "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }})
}

/// deploy/node-health applied (the chart rendered with health.enabled=true, its ServiceAccount
/// and policy), nodes gpu-a (our pod's) and gpu-b; the pod token's client and kubeconfig.
pub async fn setup(server: &Server, admin: &Client) -> (Client, std::path::PathBuf) {
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

/// Every Node, through `c`.
pub fn nodes_of(c: &Client) -> Api<Node> {
    Api::all(c.clone())
}

/// A server-side apply body of the condition `kind` of `node` alone.
pub fn condition(node: &str, kind: &str, status: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
           "status": {"conditions": [{"type": kind, "status": status, "reason": "Test", "message": "test"}]}})
}

/// (status, reason, message) of a condition.
pub async fn get_condition(admin: &Client, node: &str, kind: &str) -> Option<(String, String, String)> {
    let n = nodes_of(admin).get(node).await.unwrap();
    let c = n.status?.conditions?.into_iter().find(|c| c.type_ == kind)?;
    Some((c.status, c.reason.unwrap_or_default(), c.message.unwrap_or_default()))
}
