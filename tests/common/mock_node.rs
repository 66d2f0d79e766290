//! A mocked Kubernetes API serving one Node, for the daemon benchmark and the soak: GET returns the
//! Node with the labels last applied; PATCH (server-side apply) stores them. Optionally every Nth
//! request fails with a 500.

use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

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
pub fn spawn(name: &'static str, fail_every: u64, record: bool) -> (kube::Client, Arc<Mutex<NodeServer>>) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
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
    (kube::Client::new(service, "default"), state)
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
