//! Health's API calls against a mocked API server (kube `Client` over tower-test, as
//! tests/local/api_writers.rs): the condition read and applied through `kubeapi` (retry, one-line
//! errors with the RBAC hint, the client's deadline), its typed body, and Events.

use crate::common;

use common::mock_api::{expect, mock, no_more_requests, Handle};
use http::Method;
use nvlabel::health::judging::sticky::Tracker;
use nvlabel::health::values::fault::{Fault, Found};
use nvlabel::health::values::record::{Record, ANNOTATION};
use nvlabel::health::values::verdict::Verdict;
use nvlabel::health::writing::condition::NodeCondition;
use nvlabel::health::writing::events::{EventType, NodeEvents};
use nvlabel::kubeapi::backoff::FullJitter;
use serde_json::{json, Value};
use std::time::Duration;

const NODE: &str = "/api/v1/nodes/gpu-1";
const APPLY: &str = "/api/v1/nodes/gpu-1/status?&force=true&fieldManager=nvlabel";
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/default/events?";

fn quick() -> FullJitter {
    FullJitter::new(Duration::from_millis(1), Duration::from_millis(5)).retries(2)
}

fn node(uid: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1", "uid": uid},
           "status": {"conditions": [
               {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready"},
               {"type": "GPUHealthy", "status": "True", "reason": "GpusHealthy", "message": "2 GPUs healthy",
                "lastTransitionTime": "2026-01-01T00:00:00Z", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}]}})
}

/// Xid 79 on GPU 0, as the tracker words and records it.
fn faulty() -> Verdict {
    let mut t = Tracker::new("b");
    t.record(
        &Found { gpu: Some(0), fault: Fault::Xid { xid: 79, mig: None, action: None, repeated: None } },
        Some("GPU-a"),
        |_| 0,
    );
    t.verdict()
}

/// A 403 as the API server words it.
fn forbidden(verb: &str, resource: &str) -> Value {
    let message = format!(
        "{resource} is forbidden: User \"system:serviceaccount:nvlabel:nvlabel\" cannot {verb} resource \"{resource}\""
    );
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": "Forbidden", "code": 403})
}

/// The condition a PATCH carried, with its two times checked and removed.
fn sent_condition(body: &Value) -> Value {
    let mut c = body["status"]["conditions"][0].clone();
    for time in ["lastTransitionTime", "lastHeartbeatTime"] {
        let t = c.as_object_mut().unwrap().remove(time).unwrap_or_else(|| panic!("{time} in {body}"));
        assert!(t.as_str().is_some_and(|t| t.ends_with('Z')), "{time}: {t}");
    }
    c
}

#[tokio::test]
async fn the_condition_is_read_then_applied_alone_with_a_uid_precondition() {
    let (client, mut handle) = mock();
    let mut condition = NodeCondition::new(client, "gpu-1", "GPUHealthy", "nvlabel", quick());
    let task = tokio::spawn(async move {
        let existing = condition.read().await.map_err(|e| e.to_string());
        let applied = condition.apply(&faulty()).await.map_err(|e| e.to_string());
        (existing, applied, condition)
    });
    expect(&mut handle, Method::GET, NODE, 200, node("uid-1")).await;
    let body = expect(&mut handle, Method::PATCH, APPLY, 200, node("uid-1")).await;
    assert_eq!(body["apiVersion"], "v1");
    assert_eq!(body["kind"], "Node");
    // The faults' record goes with the condition, in the same request.
    let record = body["metadata"]["annotations"][ANNOTATION].as_str().expect("the record").to_string();
    assert_eq!(
        body["metadata"],
        json!({"name": "gpu-1", "uid": "uid-1", "annotations": {ANNOTATION: record}})
    );
    assert_eq!(
        record,
        r#"{"version":2,"bootId":"b","faults":[{"gpu":0,"uuid":"GPU-a","kind":"XidCriticalError","xid":79,"action":"RebootNode"}]}"#
    );
    assert_eq!(body["status"].as_object().unwrap().len(), 1, "only conditions: {body}");
    assert_eq!(
        sent_condition(&body),
        json!({"type": "GPUHealthy", "status": "False", "reason": "XidCriticalError",
               "message": "GPU 0 (GPU-a): XidCriticalError, Xid 79, action: reboot the node [boot b]"})
    );
    let (existing, applied, mut condition) = task.await.unwrap();
    let existing = existing.unwrap().unwrap();
    assert_eq!((existing.status.as_str(), existing.message.as_str()), ("True", "2 GPUs healthy"));
    assert_eq!(existing.record, None);
    assert_eq!(applied, Ok(()));

    // Healthy again (a new boot): the apply leaves the annotation out, so the server drops ours.
    let task = tokio::spawn(async move {
        let mut t = Tracker::new("c");
        t.nvml(Ok(2));
        (condition.apply(&t.verdict()).await.map_err(|e| e.to_string()), condition)
    });
    let body = expect(&mut handle, Method::PATCH, APPLY, 200, node("uid-1")).await;
    assert_eq!(body["metadata"], json!({"name": "gpu-1", "uid": "uid-1"}));
    let (applied, condition) = task.await.unwrap();
    assert_eq!(applied, Ok(()));
    drop(condition);
    no_more_requests(handle).await;
}

#[tokio::test]
async fn the_record_is_read_back_with_the_condition() {
    let (client, mut handle) = mock();
    let mut condition = NodeCondition::new(client, "gpu-1", "GPUHealthy", "nvlabel", quick());
    let task = tokio::spawn(async move { (condition.read().await.map_err(|e| e.to_string()), condition) });
    let record = faulty().record.unwrap().to_annotation();
    let mut on_node = node("uid-1");
    on_node["metadata"]["annotations"] = json!({ANNOTATION: record, "team": "ml"});
    expect(&mut handle, Method::GET, NODE, 200, on_node).await;
    let (existing, condition) = task.await.unwrap();
    let existing = existing.unwrap().unwrap();
    assert_eq!(existing.record.as_deref().map(Record::parse).transpose().unwrap(), faulty().record);
    drop(condition);
    no_more_requests(handle).await;
}

#[tokio::test]
async fn a_re_created_node_is_read_again_and_the_apply_retried() {
    let (client, mut handle) = mock();
    let mut condition = NodeCondition::new(client, "gpu-1", "GPUHealthy", "nvlabel", quick());
    let task =
        tokio::spawn(async move { (condition.apply(&faulty()).await.map_err(|e| e.to_string()), condition) });
    expect(&mut handle, Method::GET, NODE, 200, node("uid-1")).await;
    let conflict = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": "Precondition failed: UID in precondition: uid-1, UID in object meta: uid-2", "reason": "Conflict", "code": 409});
    expect(&mut handle, Method::PATCH, APPLY, 409, conflict).await;
    expect(&mut handle, Method::GET, NODE, 200, node("uid-2")).await;
    let body = expect(&mut handle, Method::PATCH, APPLY, 200, node("uid-2")).await;
    assert_eq!(body["metadata"]["uid"], "uid-2");
    let (result, condition) = task.await.unwrap();
    assert_eq!(result, Ok(()));
    drop(condition);
    no_more_requests(handle).await;
}

#[tokio::test]
async fn a_403_is_one_line_naming_the_object_and_the_missing_rbac_verb() {
    let (client, mut handle) = mock();
    let mut condition = NodeCondition::new(client.clone(), "gpu-1", "GPUHealthy", "nvlabel", quick());
    let mut events = NodeEvents::new(client, "gpu-1", "nvlabel-abc", quick());
    let task = tokio::spawn(async move {
        let read = condition.read().await.map(|_| ()).map_err(|e| e.to_string());
        let applied = condition.apply(&faulty()).await.map_err(|e| e.to_string());
        let event = events
            .send(EventType::Warning, "XidCriticalError", "GPU 0", "GPU 0: Xid 79", None)
            .await
            .map_err(|e| e.to_string());
        (read, applied, event)
    });
    // A 403 is not retried: one request each.
    expect(&mut handle, Method::GET, NODE, 403, forbidden("get", "nodes")).await;
    expect(&mut handle, Method::GET, NODE, 200, node("uid-1")).await;
    expect(&mut handle, Method::PATCH, APPLY, 403, forbidden("patch", "nodes/status")).await;
    expect(&mut handle, Method::POST, EVENTS, 403, forbidden("create", "events")).await;
    let (read, applied, event) = task.await.unwrap();
    let user = "User \"system:serviceaccount:nvlabel:nvlabel\"";
    assert_eq!(
        read.unwrap_err(),
        format!(
            "cannot read Node gpu-1: 403 nodes is forbidden: {user} cannot get resource \"nodes\" \
             (RBAC: nvlabel's ServiceAccount needs the `get` verb on nodes; see deploy/)"
        )
    );
    assert_eq!(
        applied.unwrap_err(),
        format!(
            "cannot apply the health condition to Node gpu-1: 403 nodes/status is forbidden: {user} cannot patch \
             resource \"nodes/status\" (RBAC: nvlabel's ServiceAccount needs the `patch` verb on nodes/status; see deploy/; \
             in the GPU Operator's pod, docs/migration.md, \"GPU health in the Operator's pod\")"
        )
    );
    assert_eq!(
        event.unwrap_err(),
        format!(
            "cannot create an Event in namespace default about Node gpu-1: 403 events is forbidden: {user} cannot \
             create resource \"events\" (RBAC: nvlabel's ServiceAccount needs the `create` verb on \
             events.events.k8s.io; see deploy/; in the GPU Operator's pod, docs/migration.md, \"GPU health in the \
             Operator's pod\")"
        )
    );
    no_more_requests(handle).await;
}

#[tokio::test]
async fn server_errors_are_retried_like_the_label_writers() {
    let (client, mut handle) = mock();
    let mut events = NodeEvents::new(client, "gpu-1", "nvlabel-abc", quick());
    let task = tokio::spawn(async move {
        (
            events
                .send(EventType::Warning, "GpuLost", "GPU 1", "GPU 1 is lost", Some("uid-1"))
                .await
                .map_err(|e| e.to_string()),
            events,
        )
    });
    let unavailable = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "etcd leader changed",
        "reason": "ServiceUnavailable", "code": 503});
    expect(&mut handle, Method::POST, EVENTS, 503, unavailable).await;
    let event = expect(&mut handle, Method::POST, EVENTS, 201, json!({})).await;
    assert_eq!(
        event["regarding"],
        json!({"apiVersion": "v1", "kind": "Node", "name": "gpu-1", "uid": "uid-1"})
    );
    assert_eq!(event["note"], "GPU 1 is lost");
    let (result, events) = task.await.unwrap();
    assert_eq!(result, Ok(()));
    drop(events);
    no_more_requests(handle).await;
}

#[tokio::test]
async fn a_repeat_is_counted_on_the_same_events_series() {
    let (client, mut handle) = mock();
    let mut events = NodeEvents::new(client, "gpu-1", "nvlabel-abc", quick());
    let task = tokio::spawn(async move {
        let mut results = Vec::new();
        for note in ["GPU 0: slowdown 0x41", "GPU 0: slowdown 0x40", "GPU 0: slowdown 0x40"] {
            results.push(
                events
                    .send(EventType::Warning, "GpuThermalSlowdown", "GPU 0", note, None)
                    .await
                    .map_err(|e| e.to_string()),
            );
        }
        results.push(
            events
                .send(EventType::Warning, "GpuThermalSlowdown", "GPU 1", "GPU 1: slowdown", None)
                .await
                .map_err(|e| e.to_string()),
        );
        results
    });
    let named = json!({"metadata": {"name": "gpu-1.gpu-health-abcde", "namespace": "default"}});
    let first = expect(&mut handle, Method::POST, EVENTS, 201, named.clone()).await;
    assert_eq!(first.get("series"), None);
    let at = "/apis/events.k8s.io/v1/namespaces/default/events/gpu-1.gpu-health-abcde?&force=true&fieldManager=nvlabel";
    for count in [2, 3] {
        let repeat = expect(&mut handle, Method::PATCH, at, 200, named.clone()).await;
        assert_eq!(repeat["series"]["count"], count, "{repeat}");
        assert!(repeat["series"]["lastObservedTime"].is_string(), "{repeat}");
        assert_eq!(repeat["metadata"]["name"], "gpu-1.gpu-health-abcde");
        assert_eq!(repeat["note"], first["note"], "the first episode's Event, counted");
        assert_eq!((&repeat["reason"], &repeat["regarding"]), (&first["reason"], &first["regarding"]));
    }
    // Another GPU's episode is an Event of its own.
    let other = expect(&mut handle, Method::POST, EVENTS, 201, json!({})).await;
    assert_eq!(other["note"], "GPU 1: slowdown");
    assert!(task.await.unwrap().iter().all(Result::is_ok));
    no_more_requests(handle).await;
}

/// A client over the mock with the deadline layer nvlabel's clients have
/// (`nvlabel::kubeapi::client_from` puts it under every client it builds).
fn limited(request: Duration) -> (kube::Client, Handle) {
    use nvlabel::kubeapi::limit::{LimitLayer, MAX_BODY};
    let (service, handle) =
        tower_test::mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
    let client = kube::client::ClientBuilder::new(service, "default")
        .with_layer(&LimitLayer::new(request, MAX_BODY, "https://mock"))
        .build();
    (client, handle)
}

#[tokio::test(start_paused = true)]
async fn a_call_that_never_answers_ends_at_the_clients_deadline() {
    // The handle is kept and never answers: only the deadline can end the calls. The production
    // deadline (20 s), longer than the 15 s health once kept for itself.
    let (client, handle) = limited(nvlabel::kubeapi::Limits::default().request);
    let once = FullJitter::new(Duration::ZERO, Duration::ZERO).retries(1);
    let mut condition = NodeCondition::new(client.clone(), "gpu-1", "GPUHealthy", "nvlabel", once);
    let error = condition.read().await.map(|_| ()).unwrap_err().to_string();
    assert_eq!(error, "cannot read Node gpu-1: the API server did not answer within 20s");
    let mut events = NodeEvents::new(client, "gpu-1", "nvlabel-abc", once);
    let error = events
        .send(EventType::Warning, "GpuLost", "GPU 1", "GPU 1 is lost", None)
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        "cannot create an Event in namespace default about Node gpu-1: the API server did not answer within 20s"
    );
    drop(handle);
}
