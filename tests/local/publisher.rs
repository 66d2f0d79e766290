//! The daemon's publisher, driven by hand through the feature-file writer (no API server, no
//! clock): a fight is throttled as its log line promises, and a publish that failed is tried again
//! as soon as the watched object changes, not after the daemon's backoff; and through the
//! NodeFeature writer on a mocked API whose watch lags behind nvlabel's own write (tokio's
//! virtual clock): no phantom repair at a start; and through the Node writer on a mocked API
//! (virtual clock too): a publish and a refresh whose every answer comes inside the 20 s request
//! deadline are still abandoned at the 60 s publish deadline, and a write the API accepted
//! relists a Node watch waiting out its backoff at once.

use crate::common;

use nvlabel::daemon::publisher::{Publisher, PUBLISH_DEADLINE};
use nvlabel::daemon::{Metrics, PublishFailure};
use nvlabel::labels::Labels;
use nvlabel::publish::{FailureReason, Target, Watches};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::time::Instant as TokioInstant;

fn labels() -> Labels {
    Labels::from([("nvidia.com/gpu.count".to_string(), "1".to_string())])
}

#[tokio::test]
async fn passes_stop_repairing_once_a_fight_starts_the_repair_timer_takes_over() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gfd");
    let target = Target::File(path.clone(), None);
    let metrics = Metrics::default();
    let mut publisher = Publisher::new(None, Default::default());
    publisher.publish(target.clone(), labels(), &metrics).await.unwrap();
    // Another writer overwrites the file before every pass (a pass every second or two; the
    // whole test takes milliseconds, far inside the guard's minute).
    let mut rewritten = 0;
    for _ in 0..10 {
        std::fs::write(&path, "someone=else\n").unwrap();
        publisher.publish(target.clone(), labels(), &metrics).await.unwrap();
        rewritten += u32::from(std::fs::read_to_string(&path).unwrap().contains("gpu.count=1"));
    }
    assert_eq!(rewritten, 5, "five repairs start the fight; then the passes leave it to the timer");
    assert_eq!(metrics.drift_fights.get(), 1, "the fight is counted once");
    let due = publisher.repair_due().expect("the repair waits on its timer");
    assert!(due >= Instant::now() + std::time::Duration::from_secs(55), "once a minute: {due:?}");
}

#[tokio::test]
async fn a_failed_publish_is_tried_again_as_soon_as_the_object_changes() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("features.d");
    let path = missing.join("gfd");
    let target = Target::File(path.clone(), None);
    let metrics = Metrics::default();
    let mut publisher = Publisher::new(None, Default::default());
    assert!(publisher.publish(target.clone(), labels(), &metrics).await.is_err());
    std::fs::create_dir(&missing).unwrap();
    // What the daemon's loop does when the watched object changes (a relist after a fault).
    let now = Instant::now();
    publisher.object_changed(now);
    assert_eq!(publisher.repair_due(), Some(now), "written now, not after the publish backoff");
    publisher.repair(&metrics).await.unwrap();
    assert!(std::fs::read_to_string(&path).unwrap().contains("nvidia.com/gpu.count=1\n"));
    assert_eq!(publisher.published(), Some(&labels()));
    assert_eq!(publisher.repair_due(), None);
}

/// A NodeFeature as the mocked API server keeps it: `labels` at resourceVersion `rv`.
fn node_feature(labels: &serde_json::Value, rv: u64) -> serde_json::Value {
    serde_json::json!({"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
        "metadata": {"name": "nvidia-features-for-gpu-1", "namespace": "nvlabel", "resourceVersion": rv.to_string(),
            "labels": {"nfd.node.kubernetes.io/node-name": "gpu-1"}},
        "spec": {"labels": labels}})
}

/// The mocked API server of one NodeFeature whose watch lags: its list always shows the object
/// as it was before nvlabel's first write (as a watch does until the event of that write comes),
/// while reads and writes see the object as it is; a write from an old resourceVersion is a 409.
fn lagging_watch(mut handle: common::mock_api::Handle) {
    use http::{Method, Response, StatusCode};
    tokio::spawn(async move {
        let old = node_feature(&serde_json::json!({"nvidia.com/gpu.count": "8"}), 1);
        let mut current = old.clone();
        let mut watches = Vec::new();
        while let Some((request, send)) = handle.next_request().await {
            let query = request.uri().query().unwrap_or_default().to_string();
            let (code, body) = match request.method().clone() {
                // The watch never delivers the event of nvlabel's write.
                Method::GET if query.contains("watch=true") => {
                    watches.push(send);
                    continue;
                }
                Method::GET if query.contains("fieldSelector") => (
                    StatusCode::OK,
                    serde_json::json!({"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeatureList",
                        "metadata": {"resourceVersion": "1"}, "items": [old]}),
                ),
                Method::GET => (StatusCode::OK, current.clone()),
                Method::PUT => {
                    let bytes = request.into_body().collect_bytes().await.unwrap();
                    let mut sent: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                    if sent["metadata"]["resourceVersion"] == current["metadata"]["resourceVersion"] {
                        let rv: u64 =
                            current["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
                        sent["metadata"]["resourceVersion"] = serde_json::json!((rv + 1).to_string());
                        current = sent.clone();
                        (StatusCode::OK, sent)
                    } else {
                        (StatusCode::CONFLICT, common::mock_api::status(409, "Conflict"))
                    }
                }
                other => panic!("unexpected {other} {}", request.uri()),
            };
            let body = kube::client::Body::from(serde_json::to_vec(&body).unwrap());
            send.send_response(Response::builder().status(code).body(body).unwrap());
        }
    });
}

/// One start in NodeFeature mode, no one else writing: the watch's view from before nvlabel's
/// first write (the event of that write not come yet) is no drift to repair. A repair that finds
/// the object as published writes nothing, and is no repair: no "someone changed" line, no count.
#[tokio::test(start_paused = true)]
async fn a_watch_behind_nvlabels_own_write_is_no_repair() {
    let (client, handle) = common::mock_api::mock();
    lagging_watch(handle);
    let target = Target::NodeFeature { namespace: "nvlabel".into(), node: "gpu-1".into(), pod: None };
    let metrics = Metrics::default();
    let mut publisher = Publisher::new(Some(client), nvlabel::publish::Watches::On(None));
    publisher.publish(target.clone(), labels(), &metrics).await.unwrap();
    // The list's change reaches the daemon's loop after the first write, as it does at a start.
    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    publisher.object_changed(Instant::now());
    if publisher.repair_due().is_some() {
        publisher.repair(&metrics).await.unwrap();
    }
    assert_eq!(metrics.drift_repairs.get(), 0, "nobody changed the labels: no repair is counted");
    assert_eq!(publisher.published(), Some(&labels()));
}

/// Node `gpu-1` as the mocked API server keeps it, carrying `labels`.
fn gpu_node(labels: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "gpu-1", "uid": "uid-1", "resourceVersion": "1", "labels": labels}})
}

/// A mocked API behind the request deadline nvlabel's clients have (20 s), as
/// `kubeapi::client_from` puts it.
fn mock_with_request_deadline() -> (kube::Client, common::mock_api::Handle) {
    use tower::Layer;
    let (service, handle) =
        tower_test::mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
    let deadline = nvlabel::kubeapi::Limits::default().request;
    let layer =
        nvlabel::kubeapi::limit::LimitLayer::new(deadline, nvlabel::kubeapi::limit::MAX_BODY, "https://api");
    (kube::Client::new(layer.layer(service), "default"), handle)
}

/// Just inside the request deadline: no request of a slow publish ends at it.
const SLOW_ANSWER: Duration = Duration::from_secs(19);

/// The API server of Node `gpu-1`: it answers at once until `slow` is set, then every request
/// [`SLOW_ANSWER`] late with a 503, which the writer retries (five tries, 95 s and more in all).
fn slowing_api(mut handle: common::mock_api::Handle, slow: Arc<AtomicBool>) {
    use http::{Method, Response, StatusCode};
    tokio::spawn(async move {
        while let Some((request, send)) = handle.next_request().await {
            let (code, body) = if slow.load(Ordering::SeqCst) {
                tokio::time::sleep(SLOW_ANSWER).await;
                (StatusCode::SERVICE_UNAVAILABLE, common::mock_api::status(503, "ServiceUnavailable"))
            } else {
                match request.method().clone() {
                    Method::GET => (StatusCode::OK, gpu_node(serde_json::json!({}))),
                    Method::PATCH => {
                        (StatusCode::OK, gpu_node(serde_json::json!({"nvidia.com/gpu.count": "1"})))
                    }
                    other => panic!("unexpected {other} {}", request.uri()),
                }
            };
            let body = kube::client::Body::from(serde_json::to_vec(&body).unwrap());
            // A request the publisher abandoned has nobody waiting for its answer.
            send.send_response(Response::builder().status(code).body(body).unwrap());
        }
    });
}

/// A write that began at `start` ended exactly at the publish deadline, as a timeout, counted.
fn abandoned_at_the_deadline(start: TokioInstant, result: Result<(), FailureReason>, metrics: &Metrics) {
    let took = start.elapsed();
    assert_eq!(result, Err(FailureReason::Timeout), "ended after {took:?}");
    assert!(
        took >= PUBLISH_DEADLINE && took < PUBLISH_DEADLINE + Duration::from_secs(1),
        "ended after {took:?}"
    );
    let key = PublishFailure { writer: "node".into(), reason: "timeout".into() };
    assert_eq!(metrics.publish_failures.get_or_create(&key).get(), 1, "the timeout is counted once");
}

/// Every request answered within the request deadline, yet the publish as a whole takes too long:
/// only the publish deadline ends it, at 60 s.
#[tokio::test(start_paused = true)]
async fn a_publish_of_slow_answers_is_abandoned_at_the_publish_deadline() {
    let (client, handle) = mock_with_request_deadline();
    slowing_api(handle, Arc::new(AtomicBool::new(true)));
    let metrics = Metrics::default();
    let mut publisher = Publisher::new(Some(client), Watches::Off);
    let start = TokioInstant::now();
    let result = publisher.publish(Target::Node("gpu-1".into()), labels(), &metrics).await;
    abandoned_at_the_deadline(start, result, &metrics);
    assert!(publisher.retrying(), "the labels wait to be written");
}

/// The same for a refresh (the last published labels written again): the refresh is the
/// publisher's own write, whatever the writer, so the Node writer's slow server shows it.
#[tokio::test(start_paused = true)]
async fn a_refresh_of_slow_answers_is_abandoned_at_the_publish_deadline() {
    let (client, handle) = mock_with_request_deadline();
    let slow = Arc::new(AtomicBool::new(false));
    slowing_api(handle, slow.clone());
    let metrics = Metrics::default();
    let mut publisher = Publisher::new(Some(client), Watches::Off);
    publisher.publish(Target::Node("gpu-1".into()), labels(), &metrics).await.unwrap();
    slow.store(true, Ordering::SeqCst);
    let start = TokioInstant::now();
    let result = publisher.refresh(&metrics).await;
    abandoned_at_the_deadline(start, result, &metrics);
}

/// After a write the API accepted, the Node watch waiting out its backoff after a failure (up to
/// 8 s) lists at once: the write shows the cause (RBAC, the API server) is likely gone.
#[tokio::test(start_paused = true)]
async fn an_accepted_write_relists_the_waiting_node_watch_at_once() {
    use common::mock_api::expect;
    use http::Method;
    let (client, mut handle) = common::mock_api::mock();
    // The longest wait every time: a list sooner than 8 s after the failure is the write's doing.
    let api = kube::Api::<k8s_openapi::api::core::v1::Node>::all(client.clone());
    let watch = nvlabel::kubeapi::object_watch::ObjectWatch::spawn_with_jitter(api, "gpu-1", || 0.999_999);
    let (request, send) = handle.next_request().await.expect("the watch's list");
    assert!(!request.uri().query().unwrap_or_default().contains("watch=true"), "a list");
    let forbidden = common::mock_api::status(403, "Forbidden");
    let body = kube::client::Body::from(serde_json::to_vec(&forbidden).unwrap());
    send.send_response(http::Response::builder().status(403).body(body).unwrap());
    // The watch now waits in its backoff (virtual time moves only once every task waits).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut publisher = Publisher::new(Some(client), Watches::On(Some(watch)));
    // The publisher comes back: the watch task ends once every handle of the watch is dropped.
    let publish = tokio::spawn(async move {
        let published = publisher.publish(Target::Node("gpu-1".into()), labels(), &Metrics::default()).await;
        (publisher, published)
    });
    // The watch knows nothing current: the writer reads the Node, then applies.
    expect(&mut handle, Method::GET, "/api/v1/nodes/gpu-1", 200, gpu_node(serde_json::json!({}))).await;
    let applied = gpu_node(serde_json::json!({"nvidia.com/gpu.count": "1"}));
    expect(&mut handle, Method::PATCH, "/api/v1/nodes/gpu-1?&force=true&fieldManager=nvlabel", 200, applied)
        .await;
    let (_publisher, published) = publish.await.unwrap();
    published.expect("the API accepted the write");
    let written = TokioInstant::now();
    let (request, _send) = tokio::time::timeout(Duration::from_secs(3600), handle.next_request())
        .await
        .expect("a request within an hour")
        .expect("the watch alive");
    assert!(!request.uri().query().unwrap_or_default().contains("watch=true"), "a list");
    assert!(written.elapsed() < Duration::from_secs(1), "listed {:?} after the write", written.elapsed());
}
