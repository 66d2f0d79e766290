//! The integration tier: nvlabel against a real kube-apiserver (Kubernetes 1.36, with Pod
//! Security admission, RBAC, ValidatingAdmissionPolicy, server-side apply and pod-bound tokens).
//! The mocked-API tests check what nvlabel sends; these check what Kubernetes does with it.
//! Needs `NVLABEL_KUBE_TEST_SERVER` (CI sets it); without it each test skips with one line.

mod common;

use common::apiserver::{self, apply, namespace, node, pod_token, refused, Server};
use common::manifests::{deploy, render, MODES};
use common::*;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::Client;
use nvlabel::publish::{NodeFeature, NodeLabels, Writer};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The tier's tests share one server and the `nvlabel` namespace: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The server, or `None` after a one-line skip.
async fn begin(test: &str) -> Option<(&'static Server, tokio::sync::MutexGuard<'static, ()>)> {
    let server = apiserver::server(test)?;
    Some((server, SERIAL.lock().await))
}

/// Cluster-wide objects a GPU cluster has: the NVIDIA runtime class, NFD's NodeFeature kind.
async fn cluster_basics(admin: &Client) {
    apply(admin, &json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"}, "handler": "nvidia"}))
        .await;
    let crd = common::manifests::yaml_docs(&repo().join("testdata/crds/nodefeature.yaml")).remove(0);
    apply(admin, &crd).await;
    apiserver::wait_for_kind(admin, "nfd.k8s-sigs.io", "v1alpha1", "NodeFeature").await;
}

/// Applies a rendered overlay, namespace first (the job's node placeholder filled in).
async fn apply_overlay(admin: &Client, mode: &str, node_name: &str) -> Vec<Value> {
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
fn pod_of(docs: &[Value], name: &str, node_name: &str, owner: Option<&DaemonSet>) -> Pod {
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
async fn create_pod(admin: &Client, pod: &Pod) -> Result<Pod, kube::Error> {
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

#[tokio::test]
async fn every_overlay_is_admitted_with_the_pod_it_runs() {
    let Some((server, _serial)) = begin("every_overlay_is_admitted_with_the_pod_it_runs").await else {
        return;
    };
    let admin = server.admin().await;
    cluster_basics(&admin).await;
    node(&admin, "overlay-node", json!({})).await;
    for mode in MODES {
        let docs = apply_overlay(&admin, mode, "overlay-node").await;
        let pod = pod_of(&docs, &format!("{mode}-pod"), "overlay-node", None);
        let stored =
            create_pod(&admin, &pod).await.unwrap_or_else(|e| panic!("{mode}: the pod is refused: {e}"));
        assert_eq!(stored.spec.unwrap().node_name.as_deref(), Some("overlay-node"));
        let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(admin.clone());
        let levels = ns.get("nvlabel").await.unwrap().metadata.labels.unwrap_or_default();
        let enforce = levels.get("pod-security.kubernetes.io/enforce").cloned();
        if mode == "nfd-file" {
            assert_eq!(enforce.as_deref(), Some("privileged"), "{mode}");
            // The same pod in a namespace that enforces restricted is refused: Pod Security is on,
            // and the feature file's host path really needs the privileged level.
            namespace(
                &admin,
                "restricted-check",
                json!({"pod-security.kubernetes.io/enforce": "restricted"}),
            )
            .await;
            apply(
                &admin,
                &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "nvlabel", "namespace": "restricted-check"}}),
            )
            .await;
            let mut elsewhere = pod.clone();
            elsewhere.metadata.namespace = Some("restricted-check".into());
            let status = refused(create_pod(&admin, &elsewhere).await);
            assert!(status.message.contains("hostPath"), "{}", status.message);
        } else {
            assert_eq!(enforce.as_deref(), Some("restricted"), "{mode}");
        }
        let pods: Api<Pod> = Api::namespaced(admin.clone(), "nvlabel");
        pods.delete(
            &format!("{mode}-pod"),
            &DeleteParams { grace_period_seconds: Some(0), ..Default::default() },
        )
        .await
        .unwrap();
    }
}

/// Node mode's setup: the overlay, two nodes, our pod on node A, and a client with its token.
async fn node_mode(server: &Server, admin: &Client) -> (Client, std::path::PathBuf) {
    cluster_basics(admin).await;
    let docs = apply_overlay(admin, "node", "node-a").await;
    node(admin, "node-a", json!({"team": "ml", "nvidia.com/gpu.deploy.gpu-feature-discovery": "true"})).await;
    node(admin, "node-b", json!({})).await;
    let pod = create_pod(admin, &pod_of(&docs, "nvlabel-node-a", "node-a", None)).await.unwrap();
    let token = pod_token(admin, "nvlabel", "nvlabel", &pod).await;
    let kubeconfig = server.kubeconfig_for("nvlabel-node-a", &token);
    let sa = apiserver::client_from(&kubeconfig).await;
    policy_in_force(&sa).await;
    (sa, kubeconfig)
}

/// An admission policy takes effect a moment after it is created: wait until a change it forbids
/// (a dry run, so nothing is stored) is refused.
async fn policy_in_force(sa: &Client) {
    let nodes: Api<Node> = Api::all(sa.clone());
    let body = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-b", "labels": {"nvidia.com/probe": "1"}}});
    let params = PatchParams { dry_run: true, ..PatchParams::apply("policy-probe").force() };
    for _ in 0..200 {
        if nodes.patch("node-b", &params, &Patch::Apply(&body)).await.is_err() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the node-label admission policy never took effect");
}

async fn node_labels(admin: &Client, name: &str) -> BTreeMap<String, String> {
    Api::<Node>::all(admin.clone()).get(name).await.unwrap().metadata.labels.unwrap_or_default()
}

#[tokio::test]
async fn node_mode_labels_only_its_own_node_and_only_nvidia_labels() {
    let Some((server, _serial)) = begin("node_mode_labels_only_its_own_node_and_only_nvidia_labels").await
    else {
        return;
    };
    let admin = server.admin().await;
    let (sa, kubeconfig) = node_mode(server, &admin).await;

    // The binary, as the DaemonSet runs it, with the pod-bound token: labels node A.
    let out = nvlabel(Some("t4"))
        .args(["--oneshot", "--no-timestamp", "--sink", "node", "--node-name", "node-a", "--kubeconfig"])
        .arg(&kubeconfig)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let a = node_labels(&admin, "node-a").await;
    assert_eq!(a.get("nvidia.com/gpu.product").map(String::as_str), Some("Tesla-T4"));
    assert_eq!(a.get("team").map(String::as_str), Some("ml"), "foreign labels stay");

    // Node B is not its node: the admission policy refuses.
    let out = nvlabel(Some("t4"))
        .args(["--oneshot", "--no-timestamp", "--sink", "node", "--node-name", "node-b", "--kubeconfig"])
        .arg(&kubeconfig)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("may only change the node its pod runs on"), "{stderr}");
    assert!(!node_labels(&admin, "node-b").await.contains_key("nvidia.com/gpu.product"));

    // What the token may not do, even on its own node.
    let nodes: Api<Node> = Api::all(sa.clone());
    let ssa = |labels: Value| json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a", "labels": labels}});
    let params = PatchParams::apply("intruder").force();
    let status = refused(nodes.patch("node-a", &params, &Patch::Apply(ssa(json!({"team": "hacked"})))).await);
    assert!(status.message.contains("only change labels under nvidia.com/"), "{}", status.message);
    let status = refused(nodes.patch("node-a", &params, &Patch::Apply(ssa(json!({"evil.io/x": "1"})))).await);
    assert!(status.message.contains("only change labels under nvidia.com/"), "{}", status.message);
    let remove = json!({"metadata": {"labels": {"team": null}}});
    let status = refused(nodes.patch("node-a", &PatchParams::default(), &Patch::Merge(&remove)).await);
    assert!(status.message.contains("only change labels under nvidia.com/"), "{}", status.message);
    let annotate = json!({"metadata": {"annotations": {"nvidia.com/x": "1"}}});
    let status = refused(nodes.patch("node-a", &PatchParams::default(), &Patch::Merge(&annotate)).await);
    assert!(status.message.contains("only change node labels"), "{}", status.message);
    let taint = json!({"spec": {"taints": [{"key": "nvidia.com/x", "effect": "NoSchedule"}]}});
    let status = refused(nodes.patch("node-a", &PatchParams::default(), &Patch::Merge(&taint)).await);
    assert!(status.message.contains("only change node labels"), "{}", status.message);
    assert_eq!(refused(nodes.delete("node-a", &DeleteParams::default()).await).code, 403);
    let secrets: Api<Secret> = Api::namespaced(sa.clone(), "nvlabel");
    assert_eq!(refused(secrets.list(&Default::default()).await).code, 403);
    assert_eq!(refused(Api::<Secret>::all(sa.clone()).list(&Default::default()).await).code, 403);
    let a = node_labels(&admin, "node-a").await;
    assert_eq!(a.get("team").map(String::as_str), Some("ml"));
}

/// A token of nvlabel's service account bound to no pod, so it carries no node-name claim (what a
/// copied or legacy token looks like).
async fn unbound_token(admin: &Client) -> String {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::ServiceAccount;
    let api: Api<ServiceAccount> = Api::namespaced(admin.clone(), "nvlabel");
    let request: TokenRequest = serde_json::from_value(json!({"spec": {"expirationSeconds": 3600}})).unwrap();
    let answer = api.create_token_request("nvlabel", &PostParams::default(), &request).await.unwrap();
    serde_json::to_value(answer).unwrap()["status"]["token"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn node_mode_refuses_a_token_without_a_node_claim() {
    let Some((server, _serial)) = begin("node_mode_refuses_a_token_without_a_node_claim").await else {
        return;
    };
    let admin = server.admin().await;
    // The overlay, and the policy in force (checked with a pod-bound token).
    let _ = node_mode(server, &admin).await;
    let kubeconfig = server.kubeconfig_for("nvlabel-unbound", &unbound_token(&admin).await);
    let before = node_labels(&admin, "node-a").await;
    for node_name in ["node-a", "node-b"] {
        let out = nvlabel(Some("t4"))
            .args(["--oneshot", "--no-timestamp", "--sink", "node", "--node-name", node_name, "--kubeconfig"])
            .arg(&kubeconfig)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{node_name}: {stderr}");
        assert!(stderr.contains("may only change the node its pod runs on"), "{node_name}: {stderr}");
    }
    // The same refusal straight from the API: RBAC lets the account patch nodes, the policy not.
    let sa = apiserver::client_from(&kubeconfig).await;
    let body = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a", "labels": {"nvidia.com/gpu.count": "9"}}});
    let status = refused(
        Api::<Node>::all(sa)
            .patch("node-a", &PatchParams::apply("nvlabel").force(), &Patch::Apply(&body))
            .await,
    );
    assert!(status.message.contains("may only change the node its pod runs on"), "{}", status.message);
    assert_eq!(node_labels(&admin, "node-a").await, before, "nothing changed");
    assert!(!node_labels(&admin, "node-b").await.contains_key("nvidia.com/gpu.product"));
}

#[tokio::test]
async fn node_mode_server_side_apply_owns_exactly_its_labels() {
    let Some((server, _serial)) = begin("node_mode_server_side_apply_owns_exactly_its_labels").await else {
        return;
    };
    let admin = server.admin().await;
    let (sa, _) = node_mode(server, &admin).await;
    let mut writer = NodeLabels::new(sa.clone(), "node-a");
    let first = labels(&[
        ("nvidia.com/gpu.count", "2"),
        ("nvidia.com/gpu.product", "Tesla-T4"),
        ("nvidia.com/mig.strategy", "single"),
    ]);
    assert!(writer.publish(&first).await.unwrap());
    let node = Api::<Node>::all(admin.clone()).get("node-a").await.unwrap();
    let managers: Vec<String> =
        node.metadata.managed_fields.iter().flatten().filter_map(|m| m.manager.clone()).collect();
    assert!(managers.contains(&"nvlabel".to_string()), "field manager nvlabel: {managers:?}");
    let rv = node.metadata.resource_version.clone();

    // Nothing changed: nothing is written.
    assert!(!writer.publish(&first).await.unwrap());
    let node = Api::<Node>::all(admin.clone()).get("node-a").await.unwrap();
    assert_eq!(node.metadata.resource_version, rv, "no write when nothing changed");

    // One label gone from our set: removed from the Node; foreign ones, even nvidia.com/, stay.
    let second = labels(&[("nvidia.com/gpu.count", "2"), ("nvidia.com/gpu.product", "Tesla-T4")]);
    assert!(writer.publish(&second).await.unwrap());
    let a = node_labels(&admin, "node-a").await;
    assert!(!a.contains_key("nvidia.com/mig.strategy"), "stale label removed: {a:?}");
    assert_eq!(a.get("nvidia.com/gpu.deploy.gpu-feature-discovery").map(String::as_str), Some("true"));
    assert_eq!(a.get("team").map(String::as_str), Some("ml"));

    // Drift: an administrator deletes one of ours; the next publish puts it back.
    let drop = json!({"metadata": {"labels": {"nvidia.com/gpu.count": null}}});
    Api::<Node>::all(admin.clone())
        .patch("node-a", &PatchParams::default(), &Patch::Merge(&drop))
        .await
        .unwrap();
    assert!(writer.publish(&second).await.unwrap());
    assert_eq!(
        node_labels(&admin, "node-a").await.get("nvidia.com/gpu.count").map(String::as_str),
        Some("2")
    );

    // A missing Node is never created.
    let mut missing = NodeLabels::new(admin.clone(), "node-gone");
    let err = missing.publish(&second).await.unwrap_err();
    assert_eq!(err.reason().as_str(), "node-missing", "{err}");
    assert!(Api::<Node>::all(admin.clone()).get_opt("node-gone").await.unwrap().is_none());

    // `nvlabel prune` (an administrator's) removes exactly ours.
    let out = nvlabel(None)
        .args(["prune", "--sink", "node", "--node-name", "node-a", "--kubeconfig"])
        .arg(server.kubeconfig())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let a = node_labels(&admin, "node-a").await;
    assert!(!a.keys().any(|k| k == "nvidia.com/gpu.count" || k == "nvidia.com/gpu.product"), "{a:?}");
    assert_eq!(a.get("nvidia.com/gpu.deploy.gpu-feature-discovery").map(String::as_str), Some("true"));
    assert_eq!(a.get("team").map(String::as_str), Some("ml"));
}

fn nodefeature_api(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("nfd.k8s-sigs.io", "v1alpha1", "NodeFeature");
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk(&gvk))
}

#[tokio::test]
async fn nodefeature_mode_does_its_job_in_its_namespace_and_nothing_elsewhere() {
    let Some((server, _serial)) =
        begin("nodefeature_mode_does_its_job_in_its_namespace_and_nothing_elsewhere").await
    else {
        return;
    };
    let admin = server.admin().await;
    cluster_basics(&admin).await;
    let docs = apply_overlay(&admin, "nfd-nodefeature", "nf-node").await;
    node(&admin, "nf-node", json!({})).await;
    let ds: DaemonSet =
        Api::namespaced(admin.clone(), "nvlabel").get("nvlabel-nfd-nodefeature").await.unwrap();
    let pod = create_pod(&admin, &pod_of(&docs, "nvlabel-nf", "nf-node", Some(&ds))).await.unwrap();
    let token = pod_token(&admin, "nvlabel", "nvlabel", &pod).await;
    let sa = apiserver::client_from(&server.kubeconfig_for("nvlabel-nf", &token)).await;
    let _ =
        nodefeature_api(&admin, "nvlabel").delete("nvidia-features-for-nf-node", &Default::default()).await;

    // The owner is the DaemonSet of our pod, found with the pod-bound token.
    let owner = nvlabel::publish::nodefeature::daemonset_owner(sa.clone(), "nvlabel", "nvlabel-nf").await;
    assert_eq!(owner.as_ref().map(|o| o.uid.as_str()), ds.metadata.uid.as_deref(), "the DaemonSet owns it");
    let mut writer = NodeFeature::new(sa.clone(), "nvlabel", "nf-node", owner);
    let first = labels(&[("nvidia.com/gpu.count", "1"), ("nvidia.com/gpu.replicas", "4")]);
    assert!(writer.publish(&first).await.unwrap(), "created");
    let api = nodefeature_api(&admin, "nvlabel");
    let stored = api.get("nvidia-features-for-nf-node").await.unwrap();
    assert_eq!(stored.data["spec"]["labels"], json!(first));
    let owners = stored.metadata.owner_references.clone().unwrap();
    assert_eq!(owners.len(), 1);
    assert_eq!((owners[0].kind.as_str(), owners[0].name.as_str()), ("DaemonSet", "nvlabel-nfd-nodefeature"));
    assert_eq!(
        stored.metadata.labels.unwrap().get("nfd.node.kubernetes.io/node-name").map(String::as_str),
        Some("nf-node")
    );
    let rv = stored.metadata.resource_version;

    // Unchanged: no write. Changed: the stale label is gone.
    assert!(!writer.publish(&first).await.unwrap());
    assert_eq!(api.get("nvidia-features-for-nf-node").await.unwrap().metadata.resource_version, rv);
    let second = labels(&[("nvidia.com/gpu.count", "1")]);
    assert!(writer.publish(&second).await.unwrap(), "updated");
    assert_eq!(api.get("nvidia-features-for-nf-node").await.unwrap().data["spec"]["labels"], json!(second));

    // Nothing in another namespace, and no delete (that is prune's, with an admin's credentials).
    namespace(&admin, "elsewhere", json!({})).await;
    let mut outside = NodeFeature::new(sa.clone(), "elsewhere", "nf-node", None);
    let err = outside.publish(&first).await.unwrap_err();
    assert_eq!(err.reason().as_str(), "refused", "{err}");
    assert_eq!(refused(nodefeature_api(&sa, "elsewhere").list(&Default::default()).await).code, 403);
    assert_eq!(
        refused(
            nodefeature_api(&sa, "nvlabel").delete("nvidia-features-for-nf-node", &Default::default()).await
        )
        .code,
        403
    );
    assert_eq!(refused(Api::<Pod>::namespaced(sa.clone(), "elsewhere").get("x").await).code, 403);
    // `nvlabel prune`, as an administrator, deletes it.
    let out = nvlabel(None)
        .args(["prune", "--namespace", "nvlabel", "--node-name", "nf-node", "--kubeconfig"])
        .arg(server.kubeconfig())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(api.get_opt("nvidia-features-for-nf-node").await.unwrap().is_none(), "pruned");
}

#[tokio::test]
async fn the_gpu_operators_pod_is_admitted_and_its_rbac_is_enough() {
    let Some((server, _serial)) = begin("the_gpu_operators_pod_is_admitted_and_its_rbac_is_enough").await
    else {
        return;
    };
    let admin = server.admin().await;
    cluster_basics(&admin).await;
    namespace(&admin, "gpu-operator", json!({"pod-security.kubernetes.io/enforce": "privileged"})).await;
    for doc in common::manifests::yaml_docs(&repo().join("testdata/gpu-operator/rbac.yaml")) {
        apply(&admin, &doc).await;
    }
    for name in ["time-slicing-config-all"] {
        apply(&admin, &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "gpu-operator"}, "data": {"default": "version: v1\n"}}))
            .await;
    }
    node(&admin, "op-node", json!({"nvidia.com/gpu.deploy.gpu-feature-discovery": "true"})).await;
    let ds = apply(
        &admin,
        &json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "gpu-feature-discovery", "namespace": "gpu-operator"},
            "spec": {
                "selector": {"matchLabels": {"app": "gpu-feature-discovery"}},
                "template": {"metadata": {"labels": {"app": "gpu-feature-discovery"}},
                             "spec": {"containers": [{"name": "c", "image": "x"}]}}
            }
        }),
    )
    .await;
    let doc = common::manifests::yaml_docs(&repo().join("testdata/gpu-operator/gfd-pod.yaml")).remove(0);
    let mut pod: Pod = serde_json::from_value(doc).unwrap();
    pod.spec.as_mut().unwrap().node_name = Some("op-node".into());
    pod.metadata.owner_references =
        Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "apps/v1".into(),
            kind: "DaemonSet".into(),
            name: "gpu-feature-discovery".into(),
            uid: ds.metadata.uid.clone().unwrap(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]);
    let pod = create_pod(&admin, &pod).await.unwrap_or_else(|e| panic!("the Operator's pod is refused: {e}"));
    let token = pod_token(&admin, "gpu-operator", "nvidia-gpu-feature-discovery", &pod).await;
    let sa = apiserver::client_from(&server.kubeconfig_for("gfd-op", &token)).await;

    // The NodeFeature writer, as nvlabel runs it in that pod, with exactly the Operator's RBAC.
    let pod_name = pod.metadata.name.clone().unwrap();
    let owner = nvlabel::publish::nodefeature::daemonset_owner(sa.clone(), "gpu-operator", &pod_name).await;
    assert_eq!(owner.as_ref().map(|o| o.name.as_str()), Some("gpu-feature-discovery"));
    let mut writer = NodeFeature::new(sa.clone(), "gpu-operator", "op-node", owner);
    assert!(writer.publish(&labels(&[("nvidia.com/gpu.count", "8")])).await.unwrap());
    assert!(writer.publish(&labels(&[("nvidia.com/gpu.count", "4")])).await.unwrap());
    // And the config-label read, were --config-dir used.
    assert!(nvlabel::kubeapi::node_view::get_config_label(sa.clone(), "op-node").await.is_ok());
    // Not granted: patching nodes.
    let nodes: Api<Node> = Api::all(sa.clone());
    let patch = json!({"metadata": {"labels": {"nvidia.com/x": "1"}}});
    assert_eq!(
        refused(nodes.patch("op-node", &PatchParams::default(), &Patch::Merge(&patch)).await).code,
        403
    );
}

#[tokio::test]
async fn the_node_label_switches_the_config_and_a_missing_key_keeps_the_last_labels() {
    let Some((server, _serial)) =
        begin("the_node_label_switches_the_config_and_a_missing_key_keeps_the_last_labels").await
    else {
        return;
    };
    let admin = server.admin().await;
    let (_, kubeconfig) = node_mode(server, &admin).await;
    let dir = tempfile::tempdir().unwrap();
    let configs = dir.path().join("configs");
    std::fs::create_dir(&configs).unwrap();
    std::fs::write(configs.join("default"), "version: v1\n").unwrap();
    std::fs::write(
        configs.join("ts4"),
        "version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/gpu, replicas: 4}]\n",
    )
    .unwrap();
    let out = dir.path().join("gfd");
    let mut child = nvlabel(Some("t4"))
        .args([
            "--no-timestamp",
            "--use-node-feature-api=false",
            "--sleep-interval",
            "1h",
            "--node-name",
            "node-a",
        ])
        .arg("--config-dir")
        .arg(&configs)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("-o")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let wait = |line: &str| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if std::fs::read_to_string(&out).is_ok_and(|t| t.lines().any(|l| l == line)) {
                return Instant::now();
            }
            assert!(Instant::now() < deadline, "{line} never published: {:?}", std::fs::read_to_string(&out));
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait("nvidia.com/gpu.replicas=1");
    let set = |value: Value| {
        let admin = admin.clone();
        async move {
            let patch = json!({"metadata": {"labels": {"nvidia.com/device-plugin.config": value}}});
            Api::<Node>::all(admin)
                .patch("node-a", &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap();
        }
    };
    let switched = Instant::now();
    set(json!("ts4")).await;
    let seen = wait("nvidia.com/gpu.replicas=4");
    assert!(seen - switched < Duration::from_secs(10), "applied within seconds");
    set(json!("no-such-key")).await;
    std::thread::sleep(Duration::from_secs(2));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("nvidia.com/gpu.replicas=4\n"), "the last good labels stay: {text}");
    let _ = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[tokio::test]
async fn every_golden_label_set_is_accepted_by_the_api_server() {
    // Kubernetes' own label validation as the oracle for every golden file.
    let Some((server, _serial)) = begin("every_golden_label_set_is_accepted_by_the_api_server").await else {
        return;
    };
    let admin = server.admin().await;
    node(&admin, "golden-node", json!({})).await;
    let nodes: Api<Node> = Api::all(admin.clone());
    let mut checked = 0;
    for entry in std::fs::read_dir(repo().join("testdata/golden")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "labels") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let set: BTreeMap<&str, &str> = text.lines().filter_map(|l| l.split_once('=')).collect();
        let body =
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "golden-node", "labels": set}});
        let params = PatchParams { dry_run: true, ..PatchParams::apply("golden-check").force() };
        nodes
            .patch("golden-node", &params, &Patch::Apply(&body))
            .await
            .unwrap_or_else(|e| panic!("{}: the API server refuses these labels: {e}", path.display()));
        checked += 1;
    }
    assert!(checked > 40, "{checked} golden files");
}

/// A daemon as the DaemonSet runs it, labelling from a T4 snapshot, with a client that records
/// its requests; returns what it needs to be observed and stopped.
async fn watching_daemon(
    kubeconfig: &std::path::Path,
    extra: &[&str],
    node_watch_of: Option<&str>,
) -> (
    apiserver::Requests,
    tokio::sync::mpsc::Sender<nvlabel::daemon::Control>,
    tokio::task::JoinHandle<()>,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("t4.yaml");
    std::fs::write(&snapshot, ok(nvlabel(Some("t4")).arg("probe"))).unwrap();
    let mut args =
        vec!["nvlabel", "--no-timestamp", "--sleep-interval=1s", "--snapshot", snapshot.to_str().unwrap()];
    args.extend_from_slice(extra);
    let cli = nvlabel::config::Cli::try_from_args(args).unwrap();
    let state = nvlabel::config::ConfigState::load(
        cli,
        Default::default(),
        nvlabel::config::ConfigSource::None,
        None,
    )
    .unwrap();
    let (client, seen) = apiserver::counting_client(kubeconfig).await;
    let mut daemon = nvlabel::daemon::Daemon::new(state, Default::default());
    daemon.set_client(Some(client.clone()));
    let node_watch = node_watch_of
        .map(|n| nvlabel::kubeapi::object_watch::ObjectWatch::spawn(Api::<Node>::all(client), n));
    daemon.watch_objects(node_watch);
    let (control, rx) = tokio::sync::mpsc::channel(4);
    let task = tokio::spawn(async move { daemon.serve(None, rx).await.unwrap() });
    (seen, control, task, dir)
}

/// The requests other than watches (which stay open) since `from`.
fn non_watch(seen: &apiserver::Requests, from: usize) -> Vec<(String, String)> {
    seen.lock().unwrap()[from..].iter().filter(|(_, p)| !p.contains("watch=true")).cloned().collect()
}

/// Polls (bounded, 30 s) until `probe` gives `want`; returns how long it took.
async fn until<F, Fut>(what: &str, probe: F, want: &str) -> Duration
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

/// `nvidia.com/gpu.count` on a Node.
async fn node_gpu_count(admin: &Client, node: &str) -> Option<String> {
    node_labels(admin, node).await.get("nvidia.com/gpu.count").cloned()
}

/// `nvidia.com/gpu.count` in this test's NodeFeature object.
async fn object_gpu_count(api: &Api<DynamicObject>) -> Option<String> {
    let obj = api.get_opt("nvidia-features-for-nfw-node").await.unwrap()?;
    obj.data["spec"]["labels"]["nvidia.com/gpu.count"].as_str().map(String::from)
}

#[tokio::test]
async fn node_mode_idle_passes_send_nothing_and_drift_is_repaired_from_the_watch() {
    let Some((server, _serial)) =
        begin("node_mode_idle_passes_send_nothing_and_drift_is_repaired_from_the_watch").await
    else {
        return;
    };
    let admin = server.admin().await;
    let (_, kubeconfig) = node_mode(server, &admin).await;
    let (seen, control, task, _dir) =
        watching_daemon(&kubeconfig, &["--sink=node", "--node-name=node-a"], Some("node-a")).await;
    until("the first publish", || node_gpu_count(&admin, "node-a"), "1").await;
    // Three passes (1 s apart) that change nothing: not one request besides the open watch.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mark = seen.lock().unwrap().len();
    tokio::time::sleep(Duration::from_millis(3200)).await;
    assert_eq!(non_watch(&seen, mark), vec![], "idle passes sent requests");
    // Someone removes one of our labels: it is back within seconds, from the watch event.
    let drop = json!({"metadata": {"labels": {"nvidia.com/gpu.count": null}}});
    Api::<Node>::all(admin.clone())
        .patch("node-a", &PatchParams::default(), &Patch::Merge(&drop))
        .await
        .unwrap();
    let took = until("the repair", || node_gpu_count(&admin, "node-a"), "1").await;
    assert!(took < Duration::from_secs(5), "repaired in {took:?}");
    let writes: Vec<_> = non_watch(&seen, mark).into_iter().filter(|(m, _)| m == "PATCH").collect();
    assert_eq!(writes.len(), 1, "one write repaired it: {writes:?}");
    control.send(nvlabel::daemon::Control::Shutdown).await.unwrap();
    task.await.unwrap();
}

#[tokio::test]
async fn nodefeature_mode_idle_passes_send_nothing_and_edits_are_repaired_from_the_watch() {
    let Some((server, _serial)) =
        begin("nodefeature_mode_idle_passes_send_nothing_and_edits_are_repaired_from_the_watch").await
    else {
        return;
    };
    let admin = server.admin().await;
    cluster_basics(&admin).await;
    let docs = apply_overlay(&admin, "nfd-nodefeature", "nfw-node").await;
    node(&admin, "nfw-node", json!({})).await;
    let ds: DaemonSet =
        Api::namespaced(admin.clone(), "nvlabel").get("nvlabel-nfd-nodefeature").await.unwrap();
    let pod = create_pod(&admin, &pod_of(&docs, "nvlabel-nfw", "nfw-node", Some(&ds))).await.unwrap();
    let token = pod_token(&admin, "nvlabel", "nvlabel", &pod).await;
    let kubeconfig = server.kubeconfig_for("nvlabel-nfw", &token);
    let api = nodefeature_api(&admin, "nvlabel");
    let _ = api.delete("nvidia-features-for-nfw-node", &Default::default()).await;
    let (seen, control, task, _dir) = watching_daemon(
        &kubeconfig,
        &["--namespace=nvlabel", "--node-name=nfw-node", "--pod-name=nvlabel-nfw"],
        None,
    )
    .await;
    until("the object", || object_gpu_count(&api), "1").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mark = seen.lock().unwrap().len();
    tokio::time::sleep(Duration::from_millis(3200)).await;
    assert_eq!(non_watch(&seen, mark), vec![], "idle passes sent requests; all: {:?}", seen.lock().unwrap());
    // Someone edits our object: it is put back from the watch event.
    let mut obj = api.get("nvidia-features-for-nfw-node").await.unwrap();
    obj.data["spec"]["labels"] = json!({"nvidia.com/gpu.count": "99"});
    obj.metadata.managed_fields = None;
    api.replace("nvidia-features-for-nfw-node", &PostParams::default(), &obj).await.unwrap();
    let took = until("the repair", || object_gpu_count(&api), "1").await;
    assert!(took < Duration::from_secs(5), "repaired in {took:?}");
    control.send(nvlabel::daemon::Control::Shutdown).await.unwrap();
    task.await.unwrap();
}
