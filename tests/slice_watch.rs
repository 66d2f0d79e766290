//! The watch of this node's ResourceSlices against the mocked API server (`common::mock_api`),
//! on tokio's virtual clock: the field selectors, a refused list said as `Unavailable` (so `auto`
//! labels for the device plugin) and tried again, slices added and deleted by the watch, and a
//! passing fault keeping the slices last seen.

mod common;

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

/// Answers the next request, which must be a list (or a watch, `watch`) of this node's slices.
async fn answer(handle: &mut common::mock_api::Handle, watch: bool, code: u16, body: String) {
    let (request, send) = handle.next_request().await.expect("a request");
    assert_declared(request.method(), request.uri());
    assert_eq!(request.uri().path(), "/apis/resource.k8s.io/v1/resourceslices");
    let query = request.uri().query().unwrap_or_default().to_string();
    assert!(
        query.contains("fieldSelector=spec.nodeName%3Dgpu-node-1%2Cspec.driver%3Dgpu.nvidia.com"),
        "{query}"
    );
    assert_eq!(query.contains("watch=true"), watch, "{query}");
    let response =
        Response::builder().status(StatusCode::from_u16(code).unwrap()).body(Body::from(body.into_bytes()));
    send.send_response(response.unwrap());
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
