//! The NodeFeature and Node writers against a mocked API server (kube `Client` over tower-test):
//! exact method, path, query and body of every request, and that no other request is made.

use crate::common;

use common::labels;
use common::mock_api::{ds_owner, expect, mock, no_more_requests, status};
use http::Method;
use nvlabel::kubeapi::backoff::FullJitter;
use nvlabel::labels::Labels;
use nvlabel::publish::{NodeFeature, NodeLabels, PublishError, Writer};
use serde_json::{json, Value};
use std::time::Duration;

fn quick() -> FullJitter {
    FullJitter::new(Duration::from_millis(1), Duration::from_millis(5)).retries(3)
}

const NF: &str = "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/gpu-operator/nodefeatures";

fn node_feature(rv: &str, spec_labels: &Labels, extra_labels: Value, owners: Value) -> Value {
    let mut meta_labels = json!({"nfd.node.kubernetes.io/node-name": "gpu-1"});
    if let Value::Object(extra) = extra_labels {
        meta_labels.as_object_mut().unwrap().extend(extra);
    }
    json!({
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
        "metadata": {"name": "nvidia-features-for-gpu-1", "namespace": "gpu-operator", "resourceVersion": rv,
                     "labels": meta_labels, "ownerReferences": owners},
        "spec": {"labels": spec_labels, "features": {"flags": {}, "attributes": {}, "instances": {}}},
    })
}

#[tokio::test]
async fn nodefeature_is_created_with_the_daemonset_as_only_owner() {
    let (client, mut handle) = mock();
    let mut writer =
        NodeFeature::new(client, "gpu-operator", "gpu-1", Some(ds_owner())).with_backoff(quick());
    let want = labels(&[("nvidia.com/gpu.count", "8")]);
    let publish =
        tokio::spawn(async move { (writer.publish(&want).await.map_err(|e| e.to_string()), writer) });
    expect(
        &mut handle,
        Method::GET,
        &format!("{NF}/nvidia-features-for-gpu-1"),
        404,
        status(404, "NotFound"),
    )
    .await;
    let body =
        expect(&mut handle, Method::POST, &format!("{NF}?&fieldManager=nvlabel"), 201, json!({})).await;
    assert_eq!(
        body,
        json!({
            "apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
            "metadata": {"name": "nvidia-features-for-gpu-1",
                         "labels": {"nfd.node.kubernetes.io/node-name": "gpu-1"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "nvlabel",
                                              "uid": "ds-uid-456", "controller": true}]},
            "spec": {"labels": {"nvidia.com/gpu.count": "8"}, "features": {"flags": {}, "attributes": {}, "instances": {}}},
        })
    );
    let (result, writer) = publish.await.unwrap();
    assert_eq!(result, Ok(true));
    drop(writer);
    no_more_requests(handle).await;
}

#[tokio::test]
async fn an_unchanged_nodefeature_is_only_read() {
    let (client, mut handle) = mock();
    let mut writer =
        NodeFeature::new(client, "gpu-operator", "gpu-1", Some(ds_owner())).with_backoff(quick());
    let want = labels(&[("nvidia.com/gpu.count", "8")]);
    let current = node_feature("7", &want, json!({}), json!([ds_owner()]));
    let publish =
        tokio::spawn(async move { (writer.publish(&want).await.map_err(|e| e.to_string()), writer) });
    expect(&mut handle, Method::GET, &format!("{NF}/nvidia-features-for-gpu-1"), 200, current).await;
    let (result, writer) = publish.await.unwrap();
    assert_eq!(result, Ok(false));
    drop(writer);
    no_more_requests(handle).await;
}

#[tokio::test]
async fn a_changed_nodefeature_is_replaced_keeping_foreign_labels_and_retrying_conflicts() {
    let (client, mut handle) = mock();
    let mut writer =
        NodeFeature::new(client, "gpu-operator", "gpu-1", Some(ds_owner())).with_backoff(quick());
    let old = labels(&[("nvidia.com/gpu.count", "4")]);
    let want = labels(&[("nvidia.com/gpu.count", "8")]);
    // A Pod owner left by GFD is replaced by the DaemonSet alone.
    let pod_owner = json!([{"apiVersion": "v1", "kind": "Pod", "name": "gfd-x", "uid": "pod-1"}]);
    let publish = tokio::spawn({
        let want = want.clone();
        async move { (writer.publish(&want).await.map_err(|e| e.to_string()), writer) }
    });
    let path = format!("{NF}/nvidia-features-for-gpu-1");
    expect(
        &mut handle,
        Method::GET,
        &path,
        200,
        node_feature("5", &old, json!({"team": "ml"}), pod_owner.clone()),
    )
    .await;
    let body = expect(
        &mut handle,
        Method::PUT,
        &format!("{path}?&fieldManager=nvlabel"),
        409,
        status(409, "Conflict"),
    )
    .await;
    assert_eq!(body["metadata"]["resourceVersion"], "5", "optimistic concurrency");
    expect(&mut handle, Method::GET, &path, 200, node_feature("6", &old, json!({"team": "ml"}), pod_owner))
        .await;
    let body =
        expect(&mut handle, Method::PUT, &format!("{path}?&fieldManager=nvlabel"), 200, json!({})).await;
    assert_eq!(body["metadata"]["resourceVersion"], "6");
    assert_eq!(
        body["metadata"]["labels"],
        json!({"nfd.node.kubernetes.io/node-name": "gpu-1", "team": "ml"})
    );
    assert_eq!(body["metadata"]["ownerReferences"], json!([ds_owner()]));
    assert_eq!(body["spec"]["labels"], json!(want));
    let (result, writer) = publish.await.unwrap();
    assert_eq!(result, Ok(true));
    drop(writer);
    no_more_requests(handle).await;
}

#[tokio::test]
async fn server_errors_and_throttling_are_retried_then_reported() {
    let (client, mut handle) = mock();
    let mut writer = NodeFeature::new(client, "gpu-operator", "gpu-1", None).with_backoff(quick());
    let want = labels(&[("nvidia.com/gpu.count", "8")]);
    let publish =
        tokio::spawn(async move { (writer.publish(&want).await.map_err(|e| e.to_string()), writer) });
    let path = format!("{NF}/nvidia-features-for-gpu-1");
    expect(&mut handle, Method::GET, &path, 500, status(500, "InternalError")).await;
    expect(&mut handle, Method::GET, &path, 429, status(429, "TooManyRequests")).await;
    expect(&mut handle, Method::GET, &path, 503, status(503, "ServiceUnavailable")).await;
    expect(&mut handle, Method::GET, &path, 500, status(500, "InternalError")).await;
    let (result, writer) = publish.await.unwrap();
    assert!(
        result.unwrap_err().contains("InternalError"),
        "gives up after the attempts; the next pass retries"
    );
    drop(writer);
    no_more_requests(handle).await;
}

#[tokio::test]
async fn the_owner_is_the_daemonset_of_our_pod() {
    let (client, mut handle) = mock();
    let lookup = tokio::spawn(nvlabel::publish::nodefeature::daemonset_owner(
        client.clone(),
        "gpu-operator",
        "nvlabel-abc",
    ));
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nvlabel-abc", "uid": "pod-uid",
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "nvlabel", "uid": "ds-uid-456", "controller": true, "blockOwnerDeletion": true}]}});
    expect(&mut handle, Method::GET, "/api/v1/namespaces/gpu-operator/pods/nvlabel-abc", 200, pod).await;
    assert_eq!(lookup.await.unwrap(), Some(ds_owner()));

    let lookup =
        tokio::spawn(nvlabel::publish::nodefeature::daemonset_owner(client.clone(), "gpu-operator", "p2"));
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p2",
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-1"}]}});
    expect(&mut handle, Method::GET, "/api/v1/namespaces/gpu-operator/pods/p2", 200, pod).await;
    assert_eq!(lookup.await.unwrap(), None, "a ReplicaSet is not enough");

    let lookup = tokio::spawn(nvlabel::publish::nodefeature::daemonset_owner(client, "gpu-operator", "gone"));
    expect(
        &mut handle,
        Method::GET,
        "/api/v1/namespaces/gpu-operator/pods/gone",
        404,
        status(404, "NotFound"),
    )
    .await;
    assert_eq!(lookup.await.unwrap(), None);
}

fn node(uid: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1", "uid": uid, "labels": labels}})
}

const NODE: &str = "/api/v1/nodes/gpu-1";
const APPLY: &str = "/api/v1/nodes/gpu-1?&force=true&fieldManager=nvlabel";

#[tokio::test]
async fn node_labels_are_applied_with_ssa_and_a_uid_precondition() {
    let (client, mut handle) = mock();
    let mut writer = NodeLabels::new(client, "gpu-1").with_backoff(quick());
    let first = labels(&[("nvidia.com/gpu.count", "8"), ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3")]);
    let second = labels(&[("nvidia.com/gpu.count", "8")]);
    let foreign = json!({"kubernetes.io/hostname": "gpu-1", "nvidia.com/team-owned": "yes"});

    let task = tokio::spawn({
        let (first, second) = (first.clone(), second.clone());
        async move {
            let mut results = vec![writer.publish(&first).await.map_err(|e| e.to_string())];
            // Unchanged and still on the Node: read only.
            results.push(writer.publish(&first).await.map_err(|e| e.to_string()));
            // Someone deleted one of our labels: drift is repaired.
            results.push(writer.publish(&first).await.map_err(|e| e.to_string()));
            // We stop emitting a label: the apply omits it, so the API server removes it.
            results.push(writer.publish(&second).await.map_err(|e| e.to_string()));
            (results, writer)
        }
    });
    expect(&mut handle, Method::GET, NODE, 200, node("uid-1", foreign.clone())).await;
    let body = expect(&mut handle, Method::PATCH, APPLY, 200, node("uid-1", json!({}))).await;
    assert_eq!(
        body,
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1", "uid": "uid-1", "labels": first}})
    );

    let mut carried = foreign.clone();
    carried.as_object_mut().unwrap().extend(json!(first).as_object().unwrap().clone());
    expect(&mut handle, Method::GET, NODE, 200, node("uid-1", carried.clone())).await;

    let mut drifted = carried.clone();
    drifted.as_object_mut().unwrap().remove("nvidia.com/gpu.product");
    expect(&mut handle, Method::GET, NODE, 200, node("uid-1", drifted)).await;
    let body = expect(&mut handle, Method::PATCH, APPLY, 200, node("uid-1", json!({}))).await;
    assert_eq!(body["metadata"]["labels"], json!(first));

    expect(&mut handle, Method::GET, NODE, 200, node("uid-1", carried)).await;
    let body = expect(&mut handle, Method::PATCH, APPLY, 200, node("uid-1", json!({}))).await;
    assert_eq!(body["metadata"]["labels"], json!(second), "only our labels, never foreign ones");

    let (results, writer) = task.await.unwrap();
    assert_eq!(results, vec![Ok(true), Ok(false), Ok(true), Ok(true)]);
    drop(writer);
    no_more_requests(handle).await;
}

#[tokio::test]
async fn a_missing_node_is_never_created() {
    let (client, mut handle) = mock();
    let mut writer = NodeLabels::new(client, "gpu-1").with_backoff(quick());
    let task = tokio::spawn(async move {
        let r = writer.publish(&labels(&[("nvidia.com/gpu.count", "8")])).await;
        (matches!(r, Err(PublishError::NodeMissing(_))), writer)
    });
    expect(&mut handle, Method::GET, NODE, 404, status(404, "NotFound")).await;
    let (missing, writer) = task.await.unwrap();
    assert!(missing);
    drop(writer);
    no_more_requests(handle).await;
}

#[tokio::test]
async fn throttled_and_conflicting_applies_are_retried() {
    let (client, mut handle) = mock();
    let mut writer = NodeLabels::new(client, "gpu-1").with_backoff(quick());
    let want = labels(&[("nvidia.com/gpu.count", "8")]);
    let task = tokio::spawn({
        let want = want.clone();
        async move { (writer.publish(&want).await.map_err(|e| e.to_string()), writer) }
    });
    expect(&mut handle, Method::GET, NODE, 429, status(429, "TooManyRequests")).await;
    expect(&mut handle, Method::GET, NODE, 200, node("uid-1", json!({}))).await;
    // A UID mismatch (Node re-created) is a 409: read again, apply to the new Node.
    expect(&mut handle, Method::PATCH, APPLY, 409, status(409, "Conflict")).await;
    expect(&mut handle, Method::GET, NODE, 200, node("uid-2", json!({}))).await;
    let body = expect(&mut handle, Method::PATCH, APPLY, 200, node("uid-2", json!({}))).await;
    assert_eq!(body["metadata"]["uid"], "uid-2");
    let (result, writer) = task.await.unwrap();
    assert_eq!(result, Ok(true));
    drop(writer);
    no_more_requests(handle).await;
}

#[tokio::test]
async fn prune_removes_everything_we_applied() {
    let (client, mut handle) = mock();
    let mut writer = NodeLabels::new(client, "gpu-1").with_backoff(quick());
    let task = tokio::spawn(async move { (writer.prune().await.map_err(|e| e.to_string()), writer) });
    expect(&mut handle, Method::GET, NODE, 200, node("uid-1", json!({"nvidia.com/gpu.count": "8"}))).await;
    let body = expect(&mut handle, Method::PATCH, APPLY, 200, node("uid-1", json!({}))).await;
    assert_eq!(
        body,
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1", "uid": "uid-1", "labels": {}}})
    );
    let (result, writer) = task.await.unwrap();
    assert_eq!(result, Ok(()));
    drop(writer);
    no_more_requests(handle).await;
}

/// A Node as it is after nvlabel applied `ours` (managedFields say so) next to `foreign` labels.
fn node_applied_by_us(ours: &Labels, foreign: Value) -> Value {
    let mut all = foreign;
    all.as_object_mut().unwrap().extend(json!(ours).as_object().unwrap().clone());
    let owned: serde_json::Map<String, Value> = ours.keys().map(|k| (format!("f:{k}"), json!({}))).collect();
    let mut n = node("uid-1", all);
    n["metadata"]["managedFields"] = json!([
        {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:metadata": {"f:labels": {"f:kubernetes.io/hostname": {}}}}},
        {"manager": "nvlabel", "operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:metadata": {"f:labels": owned}}}
    ]);
    n
}

#[tokio::test]
async fn a_restart_with_unchanged_labels_writes_nothing_but_one_that_must_remove_a_label_writes() {
    let ours = labels(&[("nvidia.com/gpu.count", "8"), ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3")]);
    let foreign = json!({"kubernetes.io/hostname": "gpu-1"});

    // A new process (nothing published yet in this run) finds exactly its labels: a read, no write.
    let (client, mut handle) = mock();
    let mut writer = NodeLabels::new(client, "gpu-1").with_backoff(quick());
    let task = tokio::spawn({
        let ours = ours.clone();
        async move { writer.publish(&ours).await.map_err(|e| e.to_string()) }
    });
    expect(&mut handle, Method::GET, NODE, 200, node_applied_by_us(&ours, foreign.clone())).await;
    assert_eq!(task.await.unwrap(), Ok(false), "nothing written");
    no_more_requests(handle).await;

    // The hardware lost a label since the last run: the Node carries the new set, but we still own
    // the old key, so the apply that removes it is sent.
    let (client, mut handle) = mock();
    let mut writer = NodeLabels::new(client, "gpu-1").with_backoff(quick());
    let fewer = labels(&[("nvidia.com/gpu.count", "8")]);
    let task = tokio::spawn({
        let fewer = fewer.clone();
        async move { writer.publish(&fewer).await.map_err(|e| e.to_string()) }
    });
    expect(&mut handle, Method::GET, NODE, 200, node_applied_by_us(&ours, foreign)).await;
    let body = expect(&mut handle, Method::PATCH, APPLY, 200, node("uid-1", json!({}))).await;
    assert_eq!(body["metadata"]["labels"], json!(fewer));
    assert_eq!(task.await.unwrap(), Ok(true));
    no_more_requests(handle).await;
}

/// The one-shot run's Node writer (`Target::build`, as `nvlabel --oneshot --sink node` builds it)
/// says in one line what it wrote where, in the daemon's publish lines' words (the daemon's own
/// writer leaves that to its publisher, and says nothing at `INFO`).
#[tokio::test]
async fn the_one_shot_node_writer_says_what_it_wrote_where() {
    let logs = common::logs::Logs::default();
    let _guard = logs.capture();
    let before = labels(&[("nvidia.com/gpu.count", "8"), ("nvidia.com/mig.capable", "true")]);
    let want = labels(&[("nvidia.com/gpu.count", "4"), ("nvidia.com/gpu.family", "hopper")]);
    let target = nvlabel::publish::Target::Node("gpu-1".into());
    let foreign = json!({"kubernetes.io/hostname": "gpu-1"});
    for (on_node, writes, says) in [
        (&before, true, "INFO nvlabel::publish::node: published labels writer=\"node\" node=gpu-1 labels=2 added=\"nvidia.com/gpu.family=hopper\" changed=\"nvidia.com/gpu.count: 8 -> 4\" removed=\"nvidia.com/mig.capable\""),
        (&want, false, "INFO nvlabel::publish::node: labels already published; nothing changed writer=\"node\" node=gpu-1 labels=2"),
    ] {
        let (client, mut handle) = mock();
        let mut writer = target.build(Some(&client)).await.unwrap();
        let task = tokio::spawn({
            let want = want.clone();
            async move { writer.publish(&want).await.map_err(|e| e.to_string()) }
        });
        expect(&mut handle, Method::GET, NODE, 200, node_applied_by_us(on_node, foreign.clone())).await;
        if writes {
            expect(&mut handle, Method::PATCH, APPLY, 200, node("uid-1", json!({}))).await;
        }
        assert_eq!(task.await.unwrap(), Ok(writes));
        let lines = logs.lines();
        assert_eq!(lines.len(), 1, "{lines:#?}");
        assert!(lines[0].ends_with(says), "{says}\n{}", lines[0]);
        logs.clear();
    }
    // The daemon's writer: its publisher says it.
    let (client, mut handle) = mock();
    let mut writer = NodeLabels::new(client, "gpu-1").with_backoff(quick());
    let task =
        tokio::spawn(async move { writer.publish(&labels(&[("nvidia.com/gpu.count", "4")])).await.is_ok() });
    expect(&mut handle, Method::GET, NODE, 200, node("uid-1", json!({}))).await;
    expect(&mut handle, Method::PATCH, APPLY, 200, node("uid-1", json!({}))).await;
    assert!(task.await.unwrap());
    assert_eq!(logs.text(), "", "nothing at INFO");
}
