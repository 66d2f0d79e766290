//! The device taints' exact requests against the mocked API (`common::mock_api`): discovery, one
//! list of this node's rules, a server-side apply per rule that changes, nothing on a pass that
//! changes nothing, a delete when the GPU is healthy again, and a refused write counted, logged
//! and not retried before its backoff; each request retried as `kubeapi` retries, a refusal one
//! line with its fix. Every request must be one RBAC grants (`API_CALLS`).

use crate::common;

use common::mock_api::{expect, mock, status};
use http::{Method, Response};
use kube::client::Body;
use nvlabel::config::health_checks::TaintEffect;
use nvlabel::health::metrics::HealthMetrics;
use nvlabel::health::writing::taint_api::RuleApi;
use nvlabel::health::writing::taints::{DeviceTaints, Spec};
use nvlabel::kubeapi::slices::SliceState;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const RULES: &str = "/apis/resource.k8s.io/v1/devicetaintrules";

/// Node n1's slice: GPU-1 as device gpu-4, GPU-2 as gpu-5.
fn slices() -> SliceState {
    let slice = serde_json::from_value(json!({
        "metadata": {"name": "n1-gpu.nvidia.com"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": "n1", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-4", "attributes": {"uuid": {"string": "GPU-1"}}},
                             {"name": "gpu-5", "attributes": {"uuid": {"string": "GPU-2"}}}]}
    }))
    .unwrap();
    SliceState::Listed(BTreeMap::from([("s".to_string(), slice)]))
}

/// Answers discovery of resource.k8s.io/v1: DeviceTaintRule is served there.
async fn discovery(handle: &mut common::mock_api::Handle) {
    let (request, send) = handle.next_request().await.expect("discovery");
    assert_eq!(request.uri().path(), "/apis/resource.k8s.io/v1");
    let list = json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "resource.k8s.io/v1",
        "resources": [{"name": "devicetaintrules", "singularName": "devicetaintrule", "namespaced": false, "kind": "DeviceTaintRule", "verbs": ["list", "create", "patch", "delete"]}]});
    send.send_response(Response::new(Body::from(serde_json::to_vec(&list).unwrap())));
}

fn rule_object(name: &str, body: &serde_json::Value) -> serde_json::Value {
    let mut o = body.clone();
    o["metadata"]["name"] = json!(name);
    o["metadata"]["resourceVersion"] = json!("7");
    o
}

#[tokio::test(start_paused = true)]
async fn written_once_deleted_when_healthy_and_a_refusal_waits_its_backoff() {
    let (client, mut handle) = mock();
    let metrics = Arc::new(HealthMetrics::default());
    let mut taints = DeviceTaints::new(client, "n1", TaintEffect::NoExecute, metrics.clone());
    let faulty = BTreeMap::from([("GPU-2".to_string(), "GpuLost")]);

    let sync = tokio::spawn(async move {
        taints.sync(&slices(), &faulty).await;
        (taints, faulty)
    });
    discovery(&mut handle).await;
    let list = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRuleList", "metadata": {"resourceVersion": "5"}, "items": []});
    let selector =
        "labelSelector=app.kubernetes.io%2Fmanaged-by%3Dnvlabel%2Cnvidia.com%2Fgpu-health-node%3Dn1";
    expect(&mut handle, Method::GET, &format!("{RULES}?&{selector}"), 200, list).await;
    let path = format!("{RULES}/nvlabel-gpu-5.n1?&force=true&fieldManager=nvlabel");
    let (request, send) = handle.next_request().await.expect("the write");
    assert_eq!(
        (request.method(), request.uri().path_and_query().unwrap().as_str()),
        (&Method::PATCH, path.as_str())
    );
    common::mock_api::assert_declared(request.method(), request.uri());
    let bytes = http_body_util::BodyExt::collect(request.into_body()).await.unwrap().to_bytes();
    let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(body["apiVersion"], "resource.k8s.io/v1");
    assert_eq!(body["metadata"]["labels"]["nvidia.com/gpu-health-node"], "n1");
    assert_eq!(
        body["spec"]["deviceSelector"],
        json!({"driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-5"})
    );
    assert_eq!(
        body["spec"]["taint"],
        json!({"key": "nvidia.com/gpu-health", "value": "GpuLost", "effect": "NoExecute"})
    );
    send.send_response(Response::new(Body::from(
        serde_json::to_vec(&rule_object("nvlabel-gpu-5.n1", &body)).unwrap(),
    )));
    let (mut taints, faulty) = sync.await.unwrap();
    assert_eq!(metrics.device_taints.get(), 1);

    // The same faults again: no request at all (one would never be answered).
    let idle = tokio::time::timeout(Duration::from_secs(60), taints.sync(&slices(), &faulty)).await;
    assert!(idle.is_ok(), "a pass that changes nothing sent a request");
    // Healthy again: the rule is deleted.
    let sync = tokio::spawn(async move {
        taints.sync(&slices(), &BTreeMap::new()).await;
        taints
    });
    expect(
        &mut handle,
        Method::DELETE,
        &format!("{RULES}/nvlabel-gpu-5.n1?"),
        200,
        json!({"kind": "Status", "status": "Success"}),
    )
    .await;
    let mut taints = sync.await.unwrap();
    assert_eq!(metrics.device_taints.get(), 0);

    // A refused write is counted; the next passes within its backoff send nothing.
    let faulty = BTreeMap::from([("GPU-1".to_string(), "XidCriticalError")]);
    let sync = tokio::spawn(async move {
        taints.sync(&slices(), &faulty).await;
        (taints, faulty)
    });
    let path = format!("{RULES}/nvlabel-gpu-4.n1?&force=true&fieldManager=nvlabel");
    expect(&mut handle, Method::PATCH, &path, 403, status(403, "Forbidden")).await;
    let (mut taints, faulty) = sync.await.unwrap();
    assert_eq!(metrics.device_taint_failures.get(), 1);
    let waiting = tokio::time::timeout(Duration::from_millis(1), taints.sync(&slices(), &faulty)).await;
    assert!(waiting.is_ok(), "a pass within the backoff sent a request");
    // After the backoff (under 1 s for the first failure), the rules are listed again first.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let sync = tokio::spawn(async move { taints.sync(&slices(), &faulty).await });
    let list = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRuleList", "metadata": {"resourceVersion": "9"}, "items": []});
    expect(&mut handle, Method::GET, &format!("{RULES}?&{selector}"), 200, list).await;
    expect(
        &mut handle,
        Method::PATCH,
        &path,
        200,
        rule_object(
            "nvlabel-gpu-4.n1",
            &json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule"}),
        ),
    )
    .await;
    sync.await.unwrap();
    assert_eq!(metrics.device_taints.get(), 1);
}

/// Answers discovery of resource.k8s.io v1 and v1beta2: neither serves DeviceTaintRule (404, as
/// a server without the group version answers).
async fn not_served(handle: &mut common::mock_api::Handle) {
    for version in ["v1", "v1beta2"] {
        let (request, send) = handle.next_request().await.expect("discovery");
        assert_eq!(request.uri().path(), format!("/apis/resource.k8s.io/{version}"));
        let mut answer = Response::new(Body::from(serde_json::to_vec(&status(404, "NotFound")).unwrap()));
        *answer.status_mut() = http::StatusCode::NOT_FOUND;
        send.send_response(answer);
    }
}

/// Where DeviceTaintRule is not served, passes (one a minute here, the daemon's are often
/// seconds) send no request at all until ten minutes have passed; then discovery is asked again.
#[tokio::test(start_paused = true)]
async fn where_device_taint_rules_are_not_served_discovery_waits_ten_minutes() {
    let (client, mut handle) = mock();
    let metrics = Arc::new(HealthMetrics::default());
    let mut taints = DeviceTaints::new(client, "n1", TaintEffect::NoSchedule, metrics);
    let faulty = BTreeMap::from([("GPU-2".to_string(), "GpuLost")]);
    let sync = tokio::spawn(async move {
        taints.sync(&slices(), &faulty).await;
        (taints, faulty)
    });
    not_served(&mut handle).await;
    let (mut taints, faulty) = sync.await.unwrap();
    for minute in 1..10 {
        tokio::time::sleep(Duration::from_secs(60)).await;
        // A request would never be answered: the pass would not end.
        let pass = tokio::time::timeout(Duration::from_secs(1), taints.sync(&slices(), &faulty)).await;
        assert!(pass.is_ok(), "minute {minute}: a pass asked discovery again");
    }
    tokio::time::sleep(Duration::from_secs(60)).await;
    let sync = tokio::spawn(async move { taints.sync(&slices(), &faulty).await });
    not_served(&mut handle).await;
    sync.await.unwrap();
}

/// After an upgrade from the version that named rules `nvlabel-<node>-<device>`: the node's rule
/// of that naming is replaced by one named `nvlabel-<device>.<node>` (written first, so the device
/// stays tainted), and a rule another node made to look like this node's is left alone: node
/// `n1-gpu` could create `nvlabel-n1-gpu-4` under that version's policy (its name prefix
/// `nvlabel-n1-gpu-`), on its own pool, with n1's label and device name.
#[tokio::test(start_paused = true)]
async fn after_an_upgrade_the_previous_naming_is_replaced() {
    let (client, mut handle) = mock();
    let metrics = Arc::new(HealthMetrics::default());
    let mut taints = DeviceTaints::new(client, "n1", TaintEffect::NoExecute, metrics.clone());
    let faulty = BTreeMap::from([("GPU-2".to_string(), "GpuLost")]);
    let sync = tokio::spawn(async move {
        taints.sync(&slices(), &faulty).await;
        (taints, faulty)
    });
    discovery(&mut handle).await;
    let labels = json!({"app.kubernetes.io/managed-by": "nvlabel", "nvidia.com/gpu-health-node": "n1"});
    let old = |name: &str, pool: &str, device: &str| {
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
               "metadata": {"name": name, "labels": labels, "resourceVersion": "3"},
               "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": pool, "device": device},
                        "taint": {"key": "nvidia.com/gpu-health", "value": "GpuLost", "effect": "NoExecute"}}})
    };
    let list = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRuleList", "metadata": {"resourceVersion": "5"},
        "items": [old("nvlabel-n1-gpu-5", "n1", "gpu-5"), old("nvlabel-n1-gpu-4", "n1-gpu", "gpu-4")]});
    let selector =
        "labelSelector=app.kubernetes.io%2Fmanaged-by%3Dnvlabel%2Cnvidia.com%2Fgpu-health-node%3Dn1";
    expect(&mut handle, Method::GET, &format!("{RULES}?&{selector}"), 200, list).await;
    let path = format!("{RULES}/nvlabel-gpu-5.n1?&force=true&fieldManager=nvlabel");
    let body = expect(&mut handle, Method::PATCH, &path, 200, json!({})).await;
    assert_eq!(body["spec"]["deviceSelector"]["device"], "gpu-5");
    let gone = json!({"kind": "Status", "status": "Success"});
    expect(&mut handle, Method::DELETE, &format!("{RULES}/nvlabel-n1-gpu-5?"), 200, gone).await;
    let (mut taints, faulty) = sync.await.unwrap();
    assert_eq!(metrics.device_taints.get(), 1, "the new rule only");
    assert_eq!(metrics.device_taint_failures.get(), 0);
    let idle = tokio::time::timeout(Duration::from_secs(60), taints.sync(&slices(), &faulty)).await;
    assert!(idle.is_ok(), "the other pool's rule is not this node's to touch");
}

/// A rule's requests go through `kubeapi`: a 503 is retried within the call, and a refusal is one
/// line naming the rule, the status and the RBAC verb it lacks.
#[tokio::test(start_paused = true)]
async fn a_rules_request_is_retried_and_a_refusal_names_its_fix() {
    let (client, mut handle) = mock();
    let task = tokio::spawn(async move {
        let api = RuleApi::discover(&client).await.expect("DeviceTaintRule served");
        let spec = Spec::new("gpu.nvidia.com", "n1", "gpu-4", "GpuLost", "NoSchedule");
        let first = api.apply("n1", "nvlabel-gpu-4.n1", &spec).await.map_err(|e| e.to_string());
        let second = api.apply("n1", "nvlabel-gpu-4.n1", &spec).await.map_err(|e| e.to_string());
        let listed = api.list("n1").await.map(|_| ()).map_err(|e| e.to_string());
        (first, second, listed)
    });
    discovery(&mut handle).await;
    let path = format!("{RULES}/nvlabel-gpu-4.n1?&force=true&fieldManager=nvlabel");
    expect(&mut handle, Method::PATCH, &path, 503, status(503, "unavailable")).await;
    expect(&mut handle, Method::PATCH, &path, 200, json!({})).await;
    expect(&mut handle, Method::PATCH, &path, 403, status(403, "forbidden")).await;
    let selector =
        "labelSelector=app.kubernetes.io%2Fmanaged-by%3Dnvlabel%2Cnvidia.com%2Fgpu-health-node%3Dn1";
    expect(&mut handle, Method::GET, &format!("{RULES}?&{selector}"), 403, status(403, "forbidden")).await;
    let (first, second, listed) = task.await.unwrap();
    assert_eq!(first, Ok(()), "the 503 was retried");
    let hint = |verb| {
        format!("(RBAC: nvlabel's ServiceAccount needs the `{verb}` verb on devicetaintrules.resource.k8s.io; see deploy/)")
    };
    assert_eq!(
        second,
        Err(format!("cannot apply DeviceTaintRule nvlabel-gpu-4.n1: 403 forbidden {}", hint("patch")))
    );
    assert_eq!(
        listed,
        Err(format!("cannot list DeviceTaintRules nvlabel-*.n1: 403 forbidden {}", hint("list")))
    );
}
