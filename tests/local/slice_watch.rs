//! The watch of this node's ResourceSlices against the mocked API server (`common::mock_api`),
//! on tokio's virtual clock: the field selectors, a refused list said as `Unavailable` (so `auto`
//! labels for the device plugin) and tried again, slices added and deleted by the watch, a
//! passing fault keeping the slices last seen, and the guards of the list-then-watch loop it
//! shares with the object watches (`api_guards.rs`, `node_watch.rs`): a rewatch resumes from the
//! last bookmark, a resourceVersion that goes back relists.

use crate::common;

use common::mock_api::{assert_declared, mock, status};
use http::{Response, StatusCode};
use kube::client::Body;
use nvlabel::kubeapi::slices::{SliceState, SliceWatch};
use serde_json::json;
use std::time::Duration;

fn slice(name: &str, rv: &str) -> serde_json::Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name, "resourceVersion": rv},
           "spec": {"driver": "gpu.nvidia.com", "nodeName": "gpu-node-1", "pool": {"name": "gpu-node-1", "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "gpu-4", "attributes": {"uuid": {"string": "GPU-1"}}}]}})
}

/// The next request, which must be a list (or a watch) of this node's slices: (whether it is a
/// watch, its `resourceVersion`), and where to answer it. An hour of virtual time is longer than
/// any backoff.
async fn next(handle: &mut common::mock_api::Handle) -> ((bool, Option<String>), Answer) {
    let (request, send) = tokio::time::timeout(Duration::from_secs(3600), handle.next_request())
        .await
        .expect("a request within an hour")
        .expect("the watch task alive");
    assert_declared(request.method(), request.uri());
    assert_eq!(request.uri().path(), "/apis/resource.k8s.io/v1/resourceslices");
    let query = request.uri().query().unwrap_or_default().to_string();
    let pairs: Vec<&str> = query.split('&').collect();
    assert!(
        pairs.contains(&"fieldSelector=spec.nodeName%3Dgpu-node-1%2Cspec.driver%3Dgpu.nvidia.com"),
        "{query}"
    );
    let rv = pairs.iter().find_map(|p| p.strip_prefix("resourceVersion=")).map(String::from);
    ((pairs.contains(&"watch=true"), rv), send)
}

type Answer = tower_test::mock::SendResponse<Response<Body>>;

/// Answers with `code` and `body`.
fn respond(send: Answer, code: u16, body: String) {
    let response =
        Response::builder().status(StatusCode::from_u16(code).unwrap()).body(Body::from(body.into_bytes()));
    send.send_response(response.unwrap());
}

/// Answers the next request, which must be a list (or a watch, `watch`) of this node's slices.
async fn answer(handle: &mut common::mock_api::Handle, watch: bool, code: u16, body: String) {
    let ((is_watch, _), send) = next(handle).await;
    assert_eq!(is_watch, watch, "a watch, not a list, or the other way round");
    respond(send, code, body);
}

fn list(items: &[serde_json::Value], rv: &str) -> String {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSliceList", "metadata": {"resourceVersion": rv}, "items": items})
        .to_string()
}

/// Waits (virtual time, bounded) until the watch's state satisfies `f`.
async fn until(w: &SliceWatch, what: &str, f: impl Fn(&SliceState) -> bool) {
    let mut rx = w.changes();
    let waited = tokio::time::timeout(Duration::from_secs(3600), rx.wait_for(|s| f(s))).await;
    assert!(waited.is_ok(), "{what} never happened: {:?}", w.state());
}

#[tokio::test(start_paused = true)]
async fn a_refused_list_is_unavailable_until_rbac_allows_it() {
    let (client, mut handle) = mock();
    let w = SliceWatch::spawn(client, "gpu-node-1");
    assert_eq!(w.state(), SliceState::Unknown);
    answer(&mut handle, false, 403, status(403, "Forbidden").to_string()).await;
    until(&w, "unavailable", |s| matches!(s, SliceState::Unavailable(_))).await;
    assert_eq!(w.state().is_dra(), Some(false), "auto labels for the device plugin");
    // Tried again after its backoff (virtual time), now allowed.
    answer(&mut handle, false, 200, list(&[slice("s1", "5")], "5")).await;
    until(&w, "the slice", |s| s.is_dra() == Some(true)).await;
    assert_eq!(w.state().devices()[0].device, "gpu-4");
}

#[tokio::test(start_paused = true)]
async fn the_watch_adds_and_deletes_and_a_fault_keeps_the_last_view() {
    let (client, mut handle) = mock();
    let w = SliceWatch::spawn(client, "gpu-node-1");
    answer(&mut handle, false, 200, list(&[], "1")).await;
    until(&w, "listed", |s| s.is_dra() == Some(false)).await;
    // The watch reports a slice (the DRA driver started), then its deletion, then the slice again:
    // each watch ends normally after the server's timeout and the next resumes from its event.
    for (event, rv, dra) in [("ADDED", "2", true), ("DELETED", "3", false), ("ADDED", "4", true)] {
        let e = json!({"type": event, "object": slice("s1", rv)});
        tokio::time::sleep(Duration::from_secs(290)).await;
        answer(&mut handle, true, 200, format!("{e}\n")).await;
        until(&w, event, |s| s.is_dra() == Some(dra)).await;
    }
    // The next watch is cut at once (an early end): the relist fails with a 500; the slice last
    // seen stays.
    answer(&mut handle, true, 200, String::new()).await;
    answer(&mut handle, false, 500, status(500, "InternalError").to_string()).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(w.state().is_dra(), Some(true), "a passing fault flips nothing: {:?}", w.state());
}

/// Answers a watch after the server's watch timeout with `events`, one per line, so the watch
/// ends normally: what follows is decided by the events alone.
async fn watch_answer(send: Answer, events: &[serde_json::Value]) {
    tokio::time::sleep(Duration::from_secs(290)).await;
    respond(send, 200, events.iter().map(|e| format!("{e}\n")).collect());
}

/// The resourceVersion of slice `name` as the watch last reported it.
fn seen_version(w: &SliceWatch, name: &str) -> Option<String> {
    match w.state() {
        SliceState::Listed(slices) => slices.get(name)?.metadata.resource_version.clone(),
        other => panic!("not listed: {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_rewatch_resumes_from_the_last_bookmark() {
    let (client, mut handle) = mock();
    let _w = SliceWatch::spawn(client, "gpu-node-1");
    let (request, send) = next(&mut handle).await;
    assert_eq!(request, (false, None), "a list first");
    respond(send, 200, list(&[slice("s1", "1")], "1"));
    let (request, send) = next(&mut handle).await;
    assert_eq!(request, (true, Some("1".into())));
    // Quiet slices: the watch sees only bookmarks, the cluster's version moving on without them.
    let bookmark = |rv: &str| json!({"type": "BOOKMARK", "object": {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"resourceVersion": rv}}});
    watch_answer(send, &[bookmark("7"), bookmark("9")]).await;
    let (request, _send) = next(&mut handle).await;
    // Version 1 may be compacted away by now: a 410 Gone and a full relist.
    assert_eq!(request, (true, Some("9".into())), "resumed from the last bookmark");
}

#[tokio::test(start_paused = true)]
async fn a_watch_that_sees_the_resource_version_go_back_relists() {
    let (client, mut handle) = mock();
    let w = SliceWatch::spawn(client, "gpu-node-1");
    let (request, send) = next(&mut handle).await;
    assert_eq!(request, (false, None), "a list first");
    respond(send, 200, list(&[slice("s1", "5"), slice("s2", "4")], "5"));
    let (request, send) = next(&mut handle).await;
    assert_eq!(request, (true, Some("5".into())));
    // The API server's store was restored from a backup: its slices are at version 3 now.
    watch_answer(send, &[json!({"type": "MODIFIED", "object": slice("s2", "3")})]).await;
    let (request, send) = next(&mut handle).await;
    assert_eq!(request, (false, None), "a relist, not a watch that follows the old timeline");
    assert_eq!(
        seen_version(&w, "s2").as_deref(),
        Some("4"),
        "the event from the old timeline is not reported"
    );
    respond(send, 200, list(&[slice("s1", "2"), slice("s2", "3")], "3"));
    let (request, _send) = next(&mut handle).await;
    assert_eq!(request, (true, Some("3".into())), "the relist starts the new timeline");
    assert_eq!(seen_version(&w, "s2").as_deref(), Some("3"));
}
