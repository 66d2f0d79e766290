//! The node-label watch against the mocked API server (`common::mock_api`).

mod common;

use futures::StreamExt;
use http::Response;
use kube::client::Body;
use serde_json::json;
use std::time::Duration;

fn node(labels: serde_json::Value, rv: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-node-1", "resourceVersion": rv, "labels": labels}})
}

#[tokio::test]
async fn label_added_changed_and_removed() {
    let (client, mut handle) = common::mock_api::mock();
    let server = tokio::spawn(async move {
        let (request, send) = handle.next_request().await.expect("a list request");
        assert_eq!(request.method(), http::Method::GET);
        assert_eq!(request.uri().path(), "/api/v1/nodes");
        let query = request.uri().query().unwrap_or_default().to_string();
        assert!(query.contains("fieldSelector=metadata.name%3Dgpu-node-1"), "{query}");
        let list = json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "1"},
            "items": [node(json!({"kubernetes.io/hostname": "gpu-node-1"}), "1")]});
        send.send_response(Response::new(Body::from(serde_json::to_vec(&list).unwrap())));

        let (request, send) = handle.next_request().await.expect("a watch request");
        let query = request.uri().query().unwrap_or_default().to_string();
        assert!(
            query.contains("watch=true") && query.contains("fieldSelector=metadata.name%3Dgpu-node-1"),
            "{query}"
        );
        let events = [
            json!({"type": "MODIFIED", "object": node(json!({"nvidia.com/device-plugin.config": "a100-ts"}), "2")}),
            // An unrelated change of the node: no new value.
            json!({"type": "MODIFIED", "object": node(json!({"nvidia.com/device-plugin.config": "a100-ts", "x": "y"}), "3")}),
            json!({"type": "MODIFIED", "object": node(json!({"nvidia.com/device-plugin.config": "a100-mps"}), "4")}),
            json!({"type": "MODIFIED", "object": node(json!({}), "5")}),
        ];
        let body: String = events.iter().map(|e| format!("{e}\n")).collect();
        send.send_response(Response::new(Body::from(body.into_bytes())));
        handle
    });
    let labels = nvlabel::kubeapi::node_view::node_changes(client, "gpu-node-1").map(|v| v.config_label);
    // The view follows the latest state: changes that arrive together may be seen only as the
    // last of them (the config in force must be the latest label, not every one in between).
    let collect = labels.take_until(tokio::time::sleep(Duration::from_secs(2))).collect::<Vec<_>>();
    let mut collect = Box::pin(collect);
    // The mock server's own assertions fail its task: surface them as they are, not as a timeout.
    let got = tokio::select! {
        got = &mut collect => got,
        done = server => {
            let _handle = done.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
            collect.await
        }
    };
    let all = [None, Some("a100-ts".to_string()), Some("a100-mps".to_string()), None];
    assert_eq!(got.last(), Some(&None), "ends at the latest state, no label: {got:?}");
    let mut rest = all.iter();
    for v in &got {
        assert!(rest.any(|x| x == v), "{got:?} is not an ordered subsequence of {all:?}");
    }
    assert!(got.windows(2).all(|w| w[0] != w[1]), "only changes: {got:?}");
}

#[tokio::test]
async fn one_shot_reads_the_label_once() {
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
