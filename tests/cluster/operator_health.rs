//! GPU health in the GPU Operator's own GFD pod (docs/migration.md, "GPU health in the Operator's
//! pod"): on a real kube-apiserver with the Operator's RBAC (testdata/gpu-operator/), the objects of
//! deploy/operator-health let a token of the Operator's ServiceAccount, bound to the Operator's pod
//! on a node, apply its own node's GPU health condition and report an Event about that node, and
//! refuse the same on another node, another condition, and the node's labels. Needs
//! `NVLABEL_KUBE_TEST_SERVER` (CI sets it); without it the test skips with one line.

use crate::common;

use common::apiserver::{self, apply, namespace, node, pod_token, refused};
use common::manifests::{deploy, render, yaml_docs};
use common::real_cluster::{begin, cluster_basics, create_pod};
use common::*;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{json, Value};
use std::time::Duration;

const NS: &str = "gpu-operator";
const SA: &str = "nvidia-gpu-feature-discovery";

fn condition(node: &str, kind: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
           "status": {"conditions": [{"type": kind, "status": "True", "reason": "GpusHealthy", "message": "test"}]}})
}

fn event(about: &str, ns: &str) -> Event {
    serde_json::from_value(json!({
        "metadata": {"generateName": "gpu-health-", "namespace": ns},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "nvidia.com/nvlabel", "reportingInstance": "nvlabel-op",
        "action": "Check", "reason": "GpuFault", "type": "Warning", "note": "test",
        "regarding": {"apiVersion": "v1", "kind": "Node", "name": about},
    }))
    .unwrap()
}

#[tokio::test]
async fn the_operators_service_account_sets_its_own_nodes_health_with_deploy_operator_health() {
    let Some((server, _serial)) =
        begin("the_operators_service_account_sets_its_own_nodes_health_with_deploy_operator_health").await
    else {
        return;
    };
    let admin = server.admin().await;
    cluster_basics(&admin).await;
    namespace(&admin, NS, json!({"pod-security.kubernetes.io/enforce": "privileged"})).await;
    namespace(&admin, "default", json!({})).await;
    for doc in yaml_docs(&repo().join("testdata/gpu-operator/rbac.yaml")) {
        apply(&admin, &doc).await;
    }
    let objects = render(&deploy().join("operator-health"));
    // Health's objects only: nothing of the Operator's is replaced, no workload is added.
    let kinds: Vec<&str> = objects.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
            "ValidatingAdmissionPolicyBinding"
        ]
    );
    for doc in &objects {
        assert_ne!(doc["metadata"]["name"], SA, "the Operator's own objects keep their names");
        apply(&admin, doc).await;
    }
    for name in ["oph-node", "oph-other"] {
        node(&admin, name, json!({"nvidia.com/gpu.deploy.gpu-feature-discovery": "true"})).await;
    }
    let mut pod: Pod =
        serde_json::from_value(yaml_docs(&repo().join("testdata/gpu-operator/gfd-pod.yaml")).remove(0))
            .unwrap();
    pod.metadata.name = Some("gpu-feature-discovery-oph".into());
    pod.spec.as_mut().unwrap().node_name = Some("oph-node".into());
    let pod = create_pod(&admin, &pod).await.unwrap_or_else(|e| panic!("the Operator's pod is refused: {e}"));
    assert_eq!(pod.spec.as_ref().unwrap().service_account_name.as_deref(), Some(SA));
    let token = pod_token(&admin, NS, SA, &pod).await;
    let sa = apiserver::client_from(&server.kubeconfig_for("oph", &token)).await;
    let nodes: Api<Node> = Api::all(sa.clone());

    // The policies take effect a moment after they are created: wait until one refuses a dry run.
    let dry = PatchParams { dry_run: true, ..PatchParams::apply("nvlabel").force() };
    for i in 0.. {
        if nodes
            .patch_status("oph-other", &dry, &Patch::Apply(condition("oph-other", "GPUHealthy")))
            .await
            .is_err()
        {
            break;
        }
        assert!(i < 200, "the health admission policy never took effect");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ssa = PatchParams::apply("nvlabel").force();
    nodes
        .patch_status("oph-node", &ssa, &Patch::Apply(condition("oph-node", "GPUHealthy")))
        .await
        .unwrap_or_else(|e| panic!("its own node's condition: {e}"));
    let on_node = Api::<Node>::all(admin.clone()).get("oph-node").await.unwrap();
    let kinds: Vec<String> =
        on_node.status.and_then(|s| s.conditions).into_iter().flatten().map(|c| c.type_).collect();
    assert!(kinds.contains(&"GPUHealthy".to_string()), "{kinds:?}");
    let m = refused(
        nodes.patch_status("oph-other", &ssa, &Patch::Apply(condition("oph-other", "GPUHealthy"))).await,
    );
    assert!(m.message.contains("only change the status of the node its pod runs on"), "{m:?}");
    let m =
        refused(nodes.patch_status("oph-node", &ssa, &Patch::Apply(condition("oph-node", "Ready"))).await);
    assert!(m.message.contains("only change its own GPU health condition"), "{m:?}");
    let labels = json!({"metadata": {"labels": {"nvidia.com/x": "1"}}});
    assert_eq!(
        refused(nodes.patch("oph-node", &PatchParams::default(), &Patch::Merge(&labels)).await).code,
        403
    );

    // Events in `default`, about its own node only.
    let events: Api<Event> = Api::namespaced(sa.clone(), "default");
    events
        .create(&PostParams::default(), &event("oph-node", "default"))
        .await
        .unwrap_or_else(|e| panic!("its Event: {e}"));
    let m = refused(events.create(&PostParams::default(), &event("oph-other", "default")).await);
    assert!(m.message.contains("only report Events regarding the Node its pod runs on"), "{m:?}");
    let elsewhere: Api<Event> = Api::namespaced(sa.clone(), NS);
    assert_eq!(refused(elsewhere.create(&PostParams::default(), &event("oph-node", NS)).await).code, 403);
}
