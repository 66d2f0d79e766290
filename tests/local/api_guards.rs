//! The API layer's guards that show only at fleet scale or on a bad day, each pinned by a test that
//! fails without it: the NodeFeature object's owner and node-name label are restored; an object
//! watch relists when `resourceVersion` goes back, resumes from the last bookmark, relists when it
//! falls silent or ends early, and is limited per line, never by the request deadline (the loop
//! the slice watch shares: its bookmark and resourceVersion guards are in `slice_watch.rs`); a plain
//! request whose body stalls after its headers ends at the request deadline (the real client's
//! own stack against a stalling server on loopback is in `api_faults.rs`).
//!
//! Against the mocked API (`common::mock_api`), the test answering each request; where waiting is
//! involved, on tokio's virtual clock, so nothing depends on machine speed.

use crate::common;

use bytes::Bytes;
use common::mock_api::{ds_owner, expect, mock, no_more_requests, Handle};
use http::{Method, Request, Response};
use k8s_openapi::api::core::v1::Node;
use kube::client::Body;
use kube::Api;
use nvlabel::kubeapi::backoff::FullJitter;
use nvlabel::kubeapi::object_watch::{resource_version, ObjectWatch, Seen};
use nvlabel::publish::{NodeFeature, NodeLabels, Writer};
use serde_json::{json, Value};
use std::time::Duration;

const NF: &str = "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/gpu-operator/nodefeatures";

/// One publish of `want` by a writer owned by `ds_owner()` over an object with `want` as its spec
/// and `metadata` (labels, owners) otherwise: it must rewrite the object whole; returns the body.
async fn publish_over(want: &nvlabel::labels::Labels, metadata: Value) -> Value {
    let (client, mut handle) = mock();
    let mut writer = NodeFeature::new(client, "gpu-operator", "gpu-1", Some(ds_owner()))
        .with_backoff(FullJitter::new(Duration::ZERO, Duration::ZERO).retries(0));
    let publish = tokio::spawn({
        let want = want.clone();
        async move { (writer.publish(&want).await.map_err(|e| e.to_string()), writer) }
    });
    let path = format!("{NF}/nvidia-features-for-gpu-1");
    let mut meta =
        json!({"name": "nvidia-features-for-gpu-1", "namespace": "gpu-operator", "resourceVersion": "3"});
    meta.as_object_mut().unwrap().extend(metadata.as_object().unwrap().clone());
    let current = json!({
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature", "metadata": meta,
        "spec": {"labels": want, "features": {"flags": {}, "attributes": {}, "instances": {}}},
    });
    expect(&mut handle, Method::GET, &path, 200, current).await;
    let body =
        expect(&mut handle, Method::PUT, &format!("{path}?&fieldManager=nvlabel"), 200, json!({})).await;
    let (result, writer) = publish.await.unwrap();
    assert_eq!(result, Ok(true));
    drop(writer);
    no_more_requests(handle).await;
    body
}

#[tokio::test]
async fn an_object_without_our_owner_gets_it_back_in_one_publish() {
    let want = common::labels(&[("nvidia.com/gpu.count", "8")]);
    let node_label = json!({"nfd.node.kubernetes.io/node-name": "gpu-1"});
    let recreated = json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "nvlabel", "uid": "old-uid",
        "controller": true}]);
    // Labels right, owner wrong: written by a version without owners (or stripped by hand), or
    // owned by a DaemonSet since deleted and recreated (a new uid).
    for (case, owners) in [("no owner", Value::Null), ("a recreated DaemonSet", recreated)] {
        let body = publish_over(&want, json!({"labels": node_label, "ownerReferences": owners})).await;
        assert_eq!(body["metadata"]["ownerReferences"], json!([ds_owner()]), "{case}");
        assert_eq!(body["spec"]["labels"], json!(want), "{case}");
    }
}

#[tokio::test]
async fn an_object_without_the_node_name_label_gets_it_back_in_one_publish() {
    // nfd-master finds a node's objects by this label: without it, the node loses our labels.
    let want = common::labels(&[("nvidia.com/gpu.count", "8")]);
    let body = publish_over(&want, json!({"labels": {"team": "ml"}, "ownerReferences": [ds_owner()]})).await;
    assert_eq!(
        body["metadata"]["labels"],
        json!({"nfd.node.kubernetes.io/node-name": "gpu-1", "team": "ml"})
    );
}

fn node(rv: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-node-1", "resourceVersion": rv}})
}

/// The next request of the watch task: (whether it is a watch, its `resourceVersion` parameter),
/// and where to answer it. An hour of virtual time is longer than any backoff.
async fn next(
    handle: &mut Handle,
) -> ((bool, Option<String>), tower_test::mock::SendResponse<Response<Body>>) {
    let (request, send) = tokio::time::timeout(Duration::from_secs(3600), handle.next_request())
        .await
        .expect("a request within an hour")
        .expect("the watch task alive");
    assert_eq!(request.uri().path(), "/api/v1/nodes");
    let query = request.uri().query().unwrap_or_default().to_string();
    let pairs: Vec<&str> = query.split('&').collect();
    assert!(pairs.contains(&"fieldSelector=metadata.name%3Dgpu-node-1"), "{query}");
    let rv = pairs.iter().find_map(|p| p.strip_prefix("resourceVersion=")).map(String::from);
    ((pairs.contains(&"watch=true"), rv), send)
}

/// Answers a list with `node(rv)` at list version `rv`.
fn list_answer(send: tower_test::mock::SendResponse<Response<Body>>, rv: &str) {
    let list = json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": rv}, "items": [node(rv)]});
    send.send_response(Response::new(Body::from(serde_json::to_vec(&list).unwrap())));
}

/// Answers a watch after the server's watch timeout with `events`, one per line, so the watch
/// ends normally: what follows is decided by the events alone.
async fn watch_answer(send: tower_test::mock::SendResponse<Response<Body>>, events: &[Value]) {
    tokio::time::sleep(Duration::from_secs(290)).await;
    let lines: String = events.iter().map(|e| format!("{e}\n")).collect();
    send.send_response(Response::new(Body::from(lines.into_bytes())));
}

fn seen_version(watch: &ObjectWatch<Node>) -> Option<u64> {
    match watch.seen() {
        Seen::Present(node) => resource_version(&node),
        other => panic!("the node is not present: {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_watch_that_sees_the_resource_version_go_back_relists() {
    let (client, mut handle) = mock();
    let watch = ObjectWatch::spawn(Api::<Node>::all(client), "gpu-node-1");
    let (request, send) = next(&mut handle).await;
    assert_eq!(request, (false, None), "a list first");
    list_answer(send, "5");
    let (request, send) = next(&mut handle).await;
    assert_eq!(request, (true, Some("5".into())));
    // The API server's store was restored from a backup: the node is at version 3 now.
    watch_answer(send, &[json!({"type": "MODIFIED", "object": node("3")})]).await;
    let (request, send) = next(&mut handle).await;
    assert_eq!(request, (false, None), "a relist, not a watch that follows the old timeline");
    assert_eq!(seen_version(&watch), Some(5), "the event from the old timeline is not reported");
    list_answer(send, "3");
    let (request, _send) = next(&mut handle).await;
    assert_eq!(request, (true, Some("3".into())), "the relist starts the new timeline");
    assert_eq!(seen_version(&watch), Some(3));
}

#[tokio::test(start_paused = true)]
async fn a_rewatch_resumes_from_the_last_bookmark() {
    let (client, mut handle) = mock();
    let _watch = ObjectWatch::spawn(Api::<Node>::all(client), "gpu-node-1");
    let (request, send) = next(&mut handle).await;
    assert_eq!(request, (false, None), "a list first");
    list_answer(send, "1");
    let (request, send) = next(&mut handle).await;
    assert_eq!(request, (true, Some("1".into())));
    // A quiet node: the watch sees only bookmarks, the cluster's version moving on without it.
    let bookmark = |rv: &str| json!({"type": "BOOKMARK", "object": {"apiVersion": "v1", "kind": "Node", "metadata": {"resourceVersion": rv}}});
    watch_answer(send, &[bookmark("7"), bookmark("9")]).await;
    let (request, _send) = next(&mut handle).await;
    // Version 1 may be compacted away by now: a 410 Gone and a full relist.
    assert_eq!(request, (true, Some("9".into())), "resumed from the last bookmark");
}

#[tokio::test(start_paused = true)]
async fn a_body_that_stalls_after_its_headers_ends_at_the_request_deadline() {
    use tower::Layer;
    // Headers and the start of a Node, then nothing, the connection held open.
    let stalled = tower::service_fn(|_: Request<Body>| async {
        let start = futures::stream::iter([Ok::<_, std::convert::Infallible>(http_body::Frame::data(
            Bytes::from_static(br#"{"apiVersion":"v1","#),
        ))]);
        let body =
            http_body_util::StreamBody::new(futures::StreamExt::chain(start, futures::stream::pending()));
        Ok::<_, std::convert::Infallible>(Response::new(body))
    });
    let limited = nvlabel::kubeapi::limit::LimitLayer::new(Duration::from_secs(20), 1 << 20, "https://api")
        .layer(stalled);
    let client = kube::Client::new(limited, "default");
    let mut writer = NodeLabels::new(client, "gpu-1")
        .with_backoff(FullJitter::new(Duration::ZERO, Duration::ZERO).retries(0));
    let labels = common::labels(&[("nvidia.com/gpu.count", "1")]);
    // An hour of virtual time: without the body deadline the read waits forever.
    let result = tokio::time::timeout(Duration::from_secs(3600), writer.publish(&labels)).await;
    let error = result.expect("the publish ended").expect_err("no whole answer").to_string();
    assert_eq!(error, "cannot read Node gpu-1: the API server's answer did not arrive within 20s");
}

type StreamHandle = tower_test::mock::Handle<Request<Body>, Response<StreamedBody>>;
type StreamedBody = http_body_util::combinators::UnsyncBoxBody<Bytes, std::convert::Infallible>;

/// A mocked API whose answers can be streamed over (virtual) time, with `limits` of (request
/// deadline, largest body or watch line) between it and the client, as `kubeapi::client_from`
/// puts them; without limits, the client sees the mock directly.
fn streaming_mock(limits: Option<(Duration, usize)>) -> (kube::Client, StreamHandle) {
    use tower::Layer;
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<StreamedBody>>();
    let client = match limits {
        Some((deadline, max)) => kube::Client::new(
            nvlabel::kubeapi::limit::LimitLayer::new(deadline, max, "https://api").layer(service),
            "default",
        ),
        None => kube::Client::new(service, "default"),
    };
    (client, handle)
}

/// `lines`, each sent `every` after the one before, then the end of the body after `end`.
fn streamed(lines: Vec<String>, every: Duration, end: Duration) -> Response<StreamedBody> {
    use http_body_util::BodyExt;
    let start = tokio::time::Instant::now();
    let frames = futures::stream::unfold((lines.into_iter(), 0u32), move |(mut lines, sent)| async move {
        match lines.next() {
            Some(line) => {
                tokio::time::sleep_until(start + every * (sent + 1)).await;
                Some((Ok(http_body::Frame::data(Bytes::from(line + "\n"))), (lines, sent + 1)))
            }
            None => {
                tokio::time::sleep_until(start + end).await;
                None
            }
        }
    });
    Response::new(http_body_util::StreamBody::new(frames).boxed_unsync())
}

/// The next request of the watch task on a streaming mock: (whether it is a watch, its
/// `resourceVersion`), and where to answer it.
async fn next_streamed(
    handle: &mut StreamHandle,
) -> ((bool, Option<String>), tower_test::mock::SendResponse<Response<StreamedBody>>) {
    let (request, send) = tokio::time::timeout(Duration::from_secs(3600), handle.next_request())
        .await
        .expect("a request within an hour")
        .expect("the watch task alive");
    let query = request.uri().query().unwrap_or_default().to_string();
    let pairs: Vec<&str> = query.split('&').collect();
    let rv = pairs.iter().find_map(|p| p.strip_prefix("resourceVersion=")).map(String::from);
    ((pairs.contains(&"watch=true"), rv), send)
}

fn list_line(rv: &str) -> String {
    json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": rv}, "items": [node(rv)]})
        .to_string()
}

fn modified_line(rv: &str) -> String {
    json!({"type": "MODIFIED", "object": node(rv)}).to_string()
}

#[tokio::test(start_paused = true)]
async fn a_silent_watch_relists_and_one_that_ends_early_does_not_resume() {
    let (client, mut handle) = streaming_mock(None);
    let _watch = ObjectWatch::spawn(Api::<Node>::all(client), "gpu-node-1");
    let (request, send) = next_streamed(&mut handle).await;
    assert_eq!(request, (false, None));
    send.send_response(streamed(vec![list_line("1")], Duration::ZERO, Duration::ZERO));
    // A watch whose connection stays open and says nothing, not even a bookmark: dead.
    let (request, send) = next_streamed(&mut handle).await;
    assert_eq!(request, (true, Some("1".into())));
    send.send_response(streamed(vec![], Duration::ZERO, Duration::from_secs(24 * 3600)));
    let (request, send) = next_streamed(&mut handle).await;
    assert_eq!(request, (false, None), "a silent watch relists");
    send.send_response(streamed(vec![list_line("2")], Duration::ZERO, Duration::ZERO));
    // A watch cut after a minute (a restarted API server): its version may mean nothing now.
    let (request, send) = next_streamed(&mut handle).await;
    assert_eq!(request, (true, Some("2".into())));
    send.send_response(streamed(vec![modified_line("3")], Duration::from_secs(1), Duration::from_secs(60)));
    let (request, _send) = next_streamed(&mut handle).await;
    assert_eq!(request, (false, None), "an early end relists instead of resuming from 3");
}

#[tokio::test(start_paused = true)]
async fn a_watch_is_limited_per_line_and_not_by_the_request_deadline() {
    // A 20 s deadline and 1 KiB per answer, as small as the lines of this test allow.
    let (client, mut handle) = streaming_mock(Some((Duration::from_secs(20), 1024)));
    let watch = ObjectWatch::spawn(Api::<Node>::all(client), "gpu-node-1");
    let (request, send) = next_streamed(&mut handle).await;
    assert_eq!(request, (false, None));
    send.send_response(streamed(vec![list_line("1")], Duration::ZERO, Duration::ZERO));
    // 29 changes over the 290 s watch: 10 s apart, each far under 1 KiB, three times that together.
    let (request, send) = next_streamed(&mut handle).await;
    assert_eq!(request, (true, Some("1".into())));
    let changes: Vec<String> = (2..=30).map(|rv| modified_line(&rv.to_string())).collect();
    assert!(changes.iter().map(String::len).sum::<usize>() > 3 * 1024);
    send.send_response(streamed(changes, Duration::from_secs(10), Duration::from_secs(290)));
    let (request, send) = next_streamed(&mut handle).await;
    assert_eq!(request, (true, Some("30".into())), "the whole watch was read and resumed");
    assert_eq!(seen_version(&watch), Some(30));
    // One line over the limit ends the watch: relist.
    let huge = json!({"type": "MODIFIED", "object": {"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "gpu-node-1", "resourceVersion": "31", "annotations": {"x": "y".repeat(2048)}}}});
    send.send_response(streamed(vec![huge.to_string()], Duration::from_secs(1), Duration::from_secs(290)));
    let (request, _send) = next_streamed(&mut handle).await;
    assert_eq!(request, (false, None), "an oversized line relists");
    assert_eq!(seen_version(&watch), Some(30), "and is never reported");
}
