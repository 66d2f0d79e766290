//! The one mocked Kubernetes API for tests and benches: a kube `Client` over tower-test whose
//! requests a test answers one by one ([`mock`], [`expect`]: exact method, path, query and body,
//! and that RBAC grants each request), or a stateful server of one Node ([`node_server`]) for the
//! daemon tests, the soak and the daemon benchmark.
#![allow(dead_code)]

use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use kube::Client;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where the mocked API server takes requests.
pub type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

/// A client whose requests arrive at the returned handle.
pub fn mock() -> (Client, Handle) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    (Client::new(service, "default"), handle)
}

/// The owner the GPU Operator's DaemonSet gives a NodeFeature writer in the mocked-API tests.
pub fn ds_owner() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        api_version: "apps/v1".into(),
        kind: "DaemonSet".into(),
        name: "nvlabel".into(),
        uid: "ds-uid-456".into(),
        controller: Some(true),
        block_owner_deletion: None,
    }
}

/// A `Status` body.
pub fn status(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": reason, "reason": reason, "code": code})
}

/// Expects one request; checks method and path+query; answers; returns the request body as JSON.
pub async fn expect(
    handle: &mut Handle,
    method: Method,
    path_and_query: &str,
    code: u16,
    answer: Value,
) -> Value {
    let (request, send) = tokio::time::timeout(Duration::from_secs(5), handle.next_request())
        .await
        .unwrap_or_else(|_| panic!("no request; expected {method} {path_and_query}"))
        .expect("client alive");
    assert_eq!(request.method(), method, "{}", request.uri());
    assert_eq!(request.uri().path_and_query().unwrap().as_str(), path_and_query);
    assert_declared(request.method(), request.uri());
    let content_type = request.headers().get("content-type").map(|v| v.to_str().unwrap().to_string());
    let bytes = request.into_body().collect_bytes().await.unwrap();
    let body: Value = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap() };
    if method == Method::PATCH {
        assert_eq!(content_type.as_deref(), Some("application/apply-patch+yaml"));
    }
    let response = Response::builder()
        .status(StatusCode::from_u16(code).unwrap())
        .body(Body::from(serde_json::to_vec(&answer).unwrap()))
        .unwrap();
    send.send_response(response);
    body
}

/// What RBAC must grant for a request: (namespaced, group, resource, verb), read from its path
/// the way the API server's authorizer reads it.
pub fn rbac_of(method: &Method, uri: &http::Uri) -> (bool, String, String, String) {
    let parts: Vec<&str> = uri.path().trim_start_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", _version, rest @ ..] => (String::new(), rest),
        ["apis", group, _version, rest @ ..] => (group.to_string(), rest),
        _ => panic!("not a resource path: {uri}"),
    };
    let (namespaced, rest) = match rest {
        ["namespaces", _ns, rest @ ..] if !rest.is_empty() => (true, rest),
        rest => (false, rest),
    };
    let named = rest.len() > 1;
    // A subresource (`nodes/<name>/status`) is its own resource to RBAC: `nodes/status`.
    let resource = match rest {
        [resource, _name, sub, ..] => format!("{resource}/{sub}"),
        _ => rest[0].to_string(),
    };
    let watch = uri.query().is_some_and(|q| q.split('&').any(|kv| kv == "watch=true"));
    let verb = match *method {
        Method::GET if watch => "watch",
        Method::GET if named => "get",
        Method::GET => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => panic!("unexpected method {method}"),
    };
    (namespaced, group, resource, verb.to_string())
}

/// Every request a writer or health sends must be in the list RBAC is checked against (tests/local/deploy.rs);
/// `delete` is `nvlabel prune`'s, run with an admin's credentials, and is listed as such.
pub fn assert_declared(method: &Method, uri: &http::Uri) {
    let observed = rbac_of(method, uri);
    let declared = nvlabel::publish::node::API_CALLS
        .iter()
        .chain(nvlabel::publish::nodefeature::API_CALLS)
        .chain(nvlabel::publish::nodefeature::PRUNE_API_CALLS)
        .chain(nvlabel::publish::nodefeature::WATCH_API_CALLS)
        .chain(nvlabel::publish::node::WATCH_API_CALLS)
        .chain(nvlabel::health::writing::condition::API_CALLS)
        .chain(nvlabel::kubeapi::slices::API_CALLS)
        .chain(nvlabel::health::writing::taints::API_CALLS)
        .map(|c| (c.namespaced, c.group.to_string(), c.resource.to_string(), c.verb.to_string()));
    assert!(
        declared.into_iter().any(|d| d == observed),
        "{method} {uri} needs {observed:?}, which no writer declares: RBAC would refuse it"
    );
}

/// After the writer (and its client) is dropped, no request may be pending.
pub async fn no_more_requests(mut handle: Handle) {
    assert!(handle.next_request().await.is_none(), "an unexpected extra request was made");
}

/// What the server saw.
#[derive(Debug, Default)]
pub struct NodeServer {
    /// The Node's labels as last applied.
    pub labels: Value,
    /// Applies received.
    pub patches: u64,
    /// The driver version of each apply, in order. Only that, not whole label sets: the mock
    /// runs inside the process whose memory the benchmark measures.
    pub applied_versions: Vec<String>,
    /// The Node's `status.allocatable` (what a device plugin advertises).
    pub allocatable: Value,
    /// Requests received.
    pub requests: u64,
    /// Requests answered with an injected 500.
    pub failures: u64,
}

/// A client wired to a mocked API server for Node `name`; `fail_every` 0 never fails. With
/// `record`, the driver version of each apply is kept (the soak's check); without, the server
/// keeps nothing that grows, so the daemon bench's heap count measures nvlabel alone.
pub fn node_server(
    name: &'static str,
    fail_every: u64,
    record: bool,
) -> (kube::Client, Arc<Mutex<NodeServer>>) {
    let (client, mut handle) = mock();
    let state = Arc::new(Mutex::new(NodeServer {
        labels: json!({}),
        allocatable: json!({}),
        ..NodeServer::default()
    }));
    let server = state.clone();
    tokio::spawn(async move {
        while let Some((request, send)) = handle.next_request().await {
            let method = request.method().clone();
            let bytes = request.into_body().collect_bytes().await.unwrap();
            let mut s = server.lock().unwrap();
            s.requests += 1;
            if fail_every > 0 && s.requests.is_multiple_of(fail_every) {
                s.failures += 1;
                let failure = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "message": "injected", "reason": "InternalError", "code": 500});
                let mut r = Response::new(Body::from(serde_json::to_vec(&failure).unwrap()));
                *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
                send.send_response(r);
                continue;
            }
            if method == Method::PATCH {
                let body: Value = serde_json::from_slice(&bytes).unwrap();
                s.labels = body["metadata"]["labels"].clone();
                s.patches += 1;
                let version =
                    s.labels["nvidia.com/cuda.driver-version.full"].as_str().unwrap_or_default().to_string();
                if record {
                    s.applied_versions.push(version);
                }
            }
            let answer = json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "uid": "uid-1", "labels": s.labels},
                "status": {"allocatable": s.allocatable}});
            send.send_response(Response::new(Body::from(serde_json::to_vec(&answer).unwrap())));
        }
    });
    (client, state)
}

/// This process's resident memory.
pub fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap()
}
