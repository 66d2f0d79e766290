//! The integration tier, NodeFeature mode: nvlabel's NodeFeature writer against a real
//! kube-apiserver (Kubernetes 1.36): in its namespace and nothing elsewhere, the GPU Operator's pod
//! and RBAC, and the daemon's idle passes and repairs from the object watch. Node mode and
//! admission of every overlay are in `real_api.rs`.
//! Needs `NVLABEL_KUBE_TEST_SERVER` (CI sets it); without it each test skips with one line.

use crate::common;

use common::apiserver::{self, apply, namespace, node, pod_token, refused};
use common::real_cluster::{
    apply_overlay, begin, cluster_basics, create_pod, non_watch, pod_of, until, watching_daemon,
};
use common::*;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::Client;
use nvlabel::publish::{NodeFeature, Writer};
use serde_json::json;
use std::time::Duration;

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

    // Nothing in another namespace. (Delete is granted in its own, never sent: changing an
    // object's owner needs it under OwnerReferencesPermissionEnforcement; chart_releases.rs.)
    namespace(&admin, "elsewhere", json!({})).await;
    let mut outside = NodeFeature::new(sa.clone(), "elsewhere", "nf-node", None);
    let err = outside.publish(&first).await.unwrap_err();
    assert_eq!(err.reason().as_str(), "refused", "{err}");
    assert_eq!(refused(nodefeature_api(&sa, "elsewhere").list(&Default::default()).await).code, 403);
    assert_eq!(refused(Api::<Pod>::namespaced(sa.clone(), "elsewhere").get("x").await).code, 403);
    // `nvlabel prune`, as an administrator, deletes it.
    let out = nvlabel(None)
        .env("RUST_LOG", "info")
        .args(["prune", "--namespace", "nvlabel", "--node-name", "nf-node", "--kubeconfig"])
        .arg(server.kubeconfig())
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(api.get_opt("nvidia-features-for-nf-node").await.unwrap().is_none(), "pruned");
    // Deleting needs no owner: no word of the pod name it would have looked up.
    assert!(log.contains("deleted NodeFeature object") && !log.contains("POD_NAME"), "{log}");
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

/// `nvidia.com/gpu.count` in this test's NodeFeature object.
async fn object_gpu_count(api: &Api<DynamicObject>) -> Option<String> {
    let obj = api.get_opt("nvidia-features-for-nfw-node").await.unwrap()?;
    obj.data["spec"]["labels"]["nvidia.com/gpu.count"].as_str().map(String::from)
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

#[tokio::test]
async fn an_object_without_our_owner_gets_it_in_one_publish() {
    let Some((server, _serial)) = begin("an_object_without_our_owner_gets_it_in_one_publish").await else {
        return;
    };
    let admin = server.admin().await;
    cluster_basics(&admin).await;
    let docs = apply_overlay(&admin, "nfd-nodefeature", "nfo-node").await;
    node(&admin, "nfo-node", json!({})).await;
    let ds: DaemonSet =
        Api::namespaced(admin.clone(), "nvlabel").get("nvlabel-nfd-nodefeature").await.unwrap();
    let pod = create_pod(&admin, &pod_of(&docs, "nvlabel-nfo", "nfo-node", Some(&ds))).await.unwrap();
    let token = pod_token(&admin, "nvlabel", "nvlabel", &pod).await;
    let sa = apiserver::client_from(&server.kubeconfig_for("nvlabel-nfo", &token)).await;
    let api = nodefeature_api(&admin, "nvlabel");
    let _ = api.delete("nvidia-features-for-nfo-node", &Default::default()).await;
    let owner_uid = || async {
        let obj = api.get("nvidia-features-for-nfo-node").await.unwrap();
        obj.metadata.owner_references.unwrap_or_default().into_iter().map(|o| o.uid).collect::<Vec<_>>()
    };
    let want = labels(&[("nvidia.com/gpu.count", "1")]);

    // A version without owners wrote the object, labels and all.
    assert!(NodeFeature::new(sa.clone(), "nvlabel", "nfo-node", None).publish(&want).await.unwrap());
    assert_eq!(owner_uid().await, Vec::<String>::new());
    let owner = nvlabel::publish::nodefeature::daemonset_owner(sa.clone(), "nvlabel", "nvlabel-nfo").await;
    let mut writer = NodeFeature::new(sa.clone(), "nvlabel", "nfo-node", owner);
    assert!(writer.publish(&want).await.unwrap(), "the upgraded writer adds its owner");
    assert_eq!(owner_uid().await, vec![ds.metadata.uid.clone().unwrap()]);
    assert!(!writer.publish(&want).await.unwrap(), "then leaves it alone");

    // Someone strips the owner by hand: the next publish puts it back.
    let mut obj = api.get("nvidia-features-for-nfo-node").await.unwrap();
    obj.metadata.owner_references = None;
    obj.metadata.managed_fields = None;
    api.replace("nvidia-features-for-nfo-node", &PostParams::default(), &obj).await.unwrap();
    assert_eq!(owner_uid().await, Vec::<String>::new());
    assert!(writer.publish(&want).await.unwrap(), "repaired");
    assert_eq!(owner_uid().await, vec![ds.metadata.uid.unwrap()]);
}
