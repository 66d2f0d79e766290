//! `nvlabel template --from-cluster`'s one list of Nodes under the API's faults: a server that
//! fails for a while is retried on the one backoff, a page whose continue token expired starts the
//! list again (so the pools come from one consistent list), and a refusal (403) is the answer at
//! once, naming the label.

use crate::common;

use common::mock_api::{self, Handle};
use http::{Response, StatusCode};
use kube::client::Body;
use serde_json::{json, Value};
use std::time::Duration;

const FIRST: &str = "/api/v1/nodes?&labelSelector=karpenter.sh%2Fnodepool&limit=500";

/// Answers the next request, which must be a GET of `path_and_query`.
async fn answer(handle: &mut Handle, path_and_query: &str, code: u16, body: Value) {
    let (request, send) = tokio::time::timeout(Duration::from_secs(10), handle.next_request())
        .await
        .unwrap_or_else(|_| panic!("no request; expected GET {path_and_query}"))
        .expect("client alive");
    assert_eq!(request.method(), http::Method::GET);
    assert_eq!(request.uri().path_and_query().unwrap().as_str(), path_and_query);
    let response = Response::builder()
        .status(StatusCode::from_u16(code).unwrap())
        .body(Body::from(serde_json::to_vec(&body).unwrap()))
        .unwrap();
    send.send_response(response);
}

/// A NodeList page of `names`, with `next` as its continue token.
fn page(names: &[&str], next: &str) -> Value {
    let items: Vec<Value> = names
        .iter()
        .map(|n| json!({"metadata": {"name": n, "labels": {"karpenter.sh/nodepool": "gpu"}}}))
        .collect();
    json!({"kind": "NodeList", "apiVersion": "v1", "metadata": {"continue": next}, "items": items})
}

#[tokio::test]
async fn a_failing_server_is_retried_and_an_expired_page_starts_the_list_again() {
    let (client, mut handle) = mock_api::mock();
    let list =
        tokio::spawn(async move { nvlabel::template::cluster::list(client, "karpenter.sh/nodepool").await });
    answer(&mut handle, FIRST, 503, mock_api::status(503, "ServiceUnavailable")).await;
    answer(&mut handle, FIRST, 200, page(&["stale-a"], "t1")).await;
    let second = format!("{FIRST}&continue=t1");
    answer(&mut handle, &second, 410, mock_api::status(410, "Expired")).await;
    answer(&mut handle, FIRST, 200, page(&["a"], "t2")).await;
    answer(&mut handle, &format!("{FIRST}&continue=t2"), 200, page(&["b"], "")).await;
    let nodes = list.await.unwrap().expect("the list succeeds");
    let names: Vec<String> = nodes.iter().map(|n| n.metadata.name.clone().unwrap()).collect();
    assert_eq!(names, ["a", "b"], "only the list that began again, never the stale first page");
    mock_api::no_more_requests(handle).await;
}

#[tokio::test]
async fn a_refused_list_is_the_answer_at_once_naming_the_label() {
    let (client, mut handle) = mock_api::mock();
    let list =
        tokio::spawn(async move { nvlabel::template::cluster::list(client, "karpenter.sh/nodepool").await });
    answer(&mut handle, FIRST, 403, mock_api::status(403, "Forbidden")).await;
    let error = list.await.unwrap().expect_err("a 403 is not retried");
    let text = nvlabel::logging::error_chain(&error);
    assert!(text.starts_with("cannot list the nodes with label karpenter.sh/nodepool: "), "{text}");
    assert!(text.contains("Forbidden"), "{text}");
    mock_api::no_more_requests(handle).await;
}
