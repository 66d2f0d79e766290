//! The node-label watch against the mocked API server (`common::mock_api`): the daemon's one
//! `ObjectWatch` of its Node, read through `node_view::views`, and the one read at start; the
//! relists' bound however long a fault lasts, `retry_now` cutting a waiting relist short (and
//! only a waiting one), and a view from before a fault read again. The loop's other guards,
//! shared with the slice watch, are in `api_guards.rs` and `slice_watch.rs`.
//!
//! On tokio's virtual clock, with the test itself answering each request, so every label change
//! reaches the view before the next one is sent: nothing depends on machine speed.

use crate::common;

use futures::{Stream, StreamExt};
use http::Response;
use k8s_openapi::api::core::v1::Node;
use kube::client::Body;
use kube::Api;
use nvlabel::kubeapi::node_view::views;
use nvlabel::kubeapi::object_watch::ObjectWatch;
use serde_json::json;
use std::time::Duration;

fn node(labels: serde_json::Value, rv: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-node-1", "resourceVersion": rv, "labels": labels}})
}

/// Answers the next request, a watch of the node from `from`, with `event` after the server's
/// watch timeout, so the watch ends normally and the next one resumes from `event`'s version.
async fn watch_answers(handle: &mut common::mock_api::Handle, from: &str, event: serde_json::Value) {
    let (request, send) = handle.next_request().await.expect("a watch request");
    let query = request.uri().query().unwrap_or_default().to_string();
    let pairs: Vec<&str> = query.split('&').collect();
    for wanted in
        ["watch=true", "fieldSelector=metadata.name%3Dgpu-node-1", &format!("resourceVersion={from}")]
    {
        assert!(pairs.contains(&wanted), "{wanted} not in {query}");
    }
    tokio::time::sleep(Duration::from_secs(290)).await;
    send.send_response(Response::new(Body::from(format!("{event}\n").into_bytes())));
}

/// The view's next config label; a view that never comes fails after an hour of virtual time.
async fn next_label(labels: &mut (impl Stream<Item = Option<String>> + Unpin)) -> Option<String> {
    tokio::time::timeout(Duration::from_secs(3600), labels.next())
        .await
        .expect("a new view of the node")
        .expect("the view stream goes on")
}

#[tokio::test(start_paused = true)]
async fn label_added_changed_and_removed() {
    let (client, mut handle) = common::mock_api::mock();
    // As the daemon watches its Node: one `ObjectWatch`, its `views`.
    let watch = ObjectWatch::spawn(Api::<Node>::all(client), "gpu-node-1");
    let mut labels = views(watch).map(|v| v.config_label).boxed();

    let (request, send) = handle.next_request().await.expect("a list request");
    assert_eq!(request.method(), http::Method::GET);
    assert_eq!(request.uri().path(), "/api/v1/nodes");
    let query = request.uri().query().unwrap_or_default().to_string();
    assert!(query.contains("fieldSelector=metadata.name%3Dgpu-node-1"), "{query}");
    let list = json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "1"},
        "items": [node(json!({"kubernetes.io/hostname": "gpu-node-1"}), "1")]});
    send.send_response(Response::new(Body::from(serde_json::to_vec(&list).unwrap())));
    assert_eq!(next_label(&mut labels).await, None, "no label at first");

    let ts = json!({"nvidia.com/device-plugin.config": "a100-ts"});
    watch_answers(&mut handle, "1", json!({"type": "MODIFIED", "object": node(ts, "2")})).await;
    assert_eq!(next_label(&mut labels).await.as_deref(), Some("a100-ts"), "added");

    // An unrelated change of the node: no new value.
    let other = json!({"nvidia.com/device-plugin.config": "a100-ts", "x": "y"});
    watch_answers(&mut handle, "2", json!({"type": "MODIFIED", "object": node(other, "3")})).await;
    let quiet = tokio::time::timeout(Duration::from_secs(10), labels.next()).await;
    assert!(quiet.is_err(), "an unrelated change gave a view: {quiet:?}");

    let mps = json!({"nvidia.com/device-plugin.config": "a100-mps"});
    watch_answers(&mut handle, "3", json!({"type": "MODIFIED", "object": node(mps, "4")})).await;
    assert_eq!(next_label(&mut labels).await.as_deref(), Some("a100-mps"), "changed");

    watch_answers(&mut handle, "4", json!({"type": "MODIFIED", "object": node(json!({}), "5")})).await;
    assert_eq!(next_label(&mut labels).await, None, "removed");
}

#[tokio::test]
async fn the_label_is_read_once_at_start() {
    let (client, mut handle) = common::mock_api::mock();
    let server = tokio::spawn(async move {
        let (request, send) = handle.next_request().await.unwrap();
        assert_eq!(request.uri().path(), "/api/v1/nodes/gpu-node-1");
        let n = node(json!({"nvidia.com/device-plugin.config": "t4-mps"}), "9");
        send.send_response(Response::new(Body::from(serde_json::to_vec(&n).unwrap())));
    });
    let label = nvlabel::kubeapi::node_view::get_config_label(client, "gpu-node-1").await.unwrap();
    assert_eq!(label.as_deref(), Some("t4-mps"));
    server.await.unwrap();
}

/// An error answer with `code`.
fn refused(code: u16) -> Response<Body> {
    let body = common::mock_api::status(code, "refused by the test");
    let mut r = Response::new(Body::from(serde_json::to_vec(&body).unwrap()));
    *r.status_mut() = http::StatusCode::from_u16(code).unwrap();
    r
}

#[tokio::test(start_paused = true)]
async fn relists_come_within_eight_seconds_however_long_the_fault_lasts() {
    let (client, mut handle) = common::mock_api::mock();
    // The longest wait every time: what a fault lasting minutes (a 403 until RBAC is restored, an
    // API server away) can cost at worst once it ends.
    let _watch = ObjectWatch::spawn_with_jitter(Api::<Node>::all(client), "gpu-node-1", || 0.999_999);
    let mut last = None;
    for attempt in 0..8 {
        let (request, send) = handle.next_request().await.expect("a list request");
        assert!(!request.uri().query().unwrap_or_default().contains("watch=true"), "a list");
        let now = tokio::time::Instant::now();
        if let Some(before) = last {
            let gap: Duration = now - before;
            assert!(gap <= Duration::from_secs(8), "attempt {attempt} waited {gap:?}");
        }
        last = Some(now);
        send.send_response(refused(403));
    }
}

/// The next request, which must be a list (not a watch) of the node; where to answer it.
async fn next_list(handle: &mut common::mock_api::Handle) -> tower_test::mock::SendResponse<Response<Body>> {
    let (request, send) = tokio::time::timeout(Duration::from_secs(3600), handle.next_request())
        .await
        .expect("a request within an hour")
        .expect("the watch task alive");
    assert!(!request.uri().query().unwrap_or_default().contains("watch=true"), "a list");
    send
}

#[tokio::test(start_paused = true)]
async fn retry_now_relists_a_waiting_watch_at_once_and_only_a_waiting_one() {
    use tokio::time::Instant;
    let (client, mut handle) = common::mock_api::mock();
    // The longest wait every time: a relist sooner than 8 s after a failure is retry_now's doing.
    let watch = ObjectWatch::spawn_with_jitter(Api::<Node>::all(client), "gpu-node-1", || 0.999_999);
    next_list(&mut handle).await.send_response(refused(403));
    // A second later the watch waits in its backoff (virtual time moves only once every task
    // waits); a request elsewhere just succeeded (RBAC restored): the watch lists at once.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let kicked = Instant::now();
    watch.retry_now();
    let send = next_list(&mut handle).await;
    assert!(kicked.elapsed() < Duration::from_secs(1), "relisted {:?} after retry_now", kicked.elapsed());
    let list = json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "1"},
        "items": [node(json!({}), "1")]});
    send.send_response(Response::new(Body::from(serde_json::to_vec(&list).unwrap())));
    let (request, send) = handle.next_request().await.expect("a watch request");
    assert!(request.uri().query().unwrap_or_default().contains("watch=true"));
    // Woken while nothing waits, nothing is kept for later: the next failure waits its backoff,
    // so a fleet's relists after an API server restart keep their jitter.
    watch.retry_now();
    send.send_response(refused(500));
    let failed = Instant::now();
    next_list(&mut handle).await;
    assert!(failed.elapsed() > Duration::from_secs(7), "relisted {:?} after the failure", failed.elapsed());
}

#[tokio::test(start_paused = true)]
async fn a_view_from_before_a_fault_is_read_again_not_trusted() {
    use nvlabel::publish::{NodeLabels, Writer};
    let (client, mut handle) = common::mock_api::mock();
    let watch = ObjectWatch::spawn_with_jitter(Api::<Node>::all(client.clone()), "gpu-node-1", || 0.999_999);
    let mut writer = NodeLabels::new(client, "gpu-node-1").with_watch(watch);
    let ours = nvlabel::labels::Labels::from([("nvidia.com/gpu.count".to_string(), "1".to_string())]);
    let mut carrying = node(json!({"nvidia.com/gpu.count": "1"}), "1");
    carrying["metadata"]["uid"] = json!("uid-1");
    carrying["metadata"]["managedFields"] = json!([{"manager": "nvlabel", "operation": "Apply",
        "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:nvidia.com/gpu.count": {}}}}}]);
    let (_, send) = handle.next_request().await.expect("a list request");
    let list = json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "1"},
        "items": [carrying]});
    send.send_response(Response::new(Body::from(serde_json::to_vec(&list).unwrap())));
    let (request, send) = handle.next_request().await.expect("a watch request");
    assert!(request.uri().query().unwrap_or_default().contains("watch=true"));
    // While the watch runs, its view decides: the Node carries our labels, nothing is sent.
    assert!(!writer.publish(&ours).await.unwrap(), "nothing to write");
    // The watch fails (an API server going away); someone may change the Node meanwhile.
    send.send_response(refused(500));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let publish = tokio::spawn(async move { writer.publish(&ours).await.map(|_| ()) });
    let (request, send) = handle.next_request().await.expect("a read of the Node");
    assert_eq!(request.method(), http::Method::GET);
    assert_eq!(request.uri().path(), "/api/v1/nodes/gpu-node-1", "the writer reads, not the relist");
    send.send_response(refused(503));
    drop(handle);
    let _ = publish.await;
}
