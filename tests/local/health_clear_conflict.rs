//! `nvlabel health clear` meeting a conflict on its own write, against a mocked API (kube `Client`
//! over tower-test, as tests/local/health_api.rs): the clear writes with the Node's
//! resourceVersion as read as a precondition; a 409 (the daemon wrote a fault in between) makes it
//! read the Node again, decide again from what it read, and write under the new resourceVersion,
//! clearing only what it read and keeping the fault written meanwhile.

use crate::common;

use common::mock_api::{expect, mock, no_more_requests};
use http::Method;
use nvlabel::health::commands::clear::{self, Outcome};
use nvlabel::health::config::{HealthConfig, HealthSettings};
use nvlabel::health::judging::sticky::Tracker;
use nvlabel::health::values::fault::{Fault, Found};
use nvlabel::health::values::record::{Record, ANNOTATION};
use nvlabel::health::values::verdict::{Status, Verdict, CLEARED_BY_ADMIN};
use serde_json::{json, Value};

const NODE: &str = "/api/v1/nodes/gpu-1";
const APPLY: &str = "/api/v1/nodes/gpu-1/status?&force=true&fieldManager=nvlabel";

/// `nvlabel health clear --node-name gpu-1`, every other setting its default.
fn config() -> HealthConfig {
    common::health_on_gpu_1(HealthSettings::default())
}

/// What the daemon wrote for Xid 79 on GPU 0 and, with `both`, pending remapped rows on GPU 1.
fn faults(both: bool) -> Verdict {
    let mut t = Tracker::new("boot-1");
    let xid = Fault::Xid { xid: 79, mig: None, action: None, repeated: None };
    t.record(&Found { gpu: Some(0), fault: xid }, Some("GPU-a"), |_| 0);
    if both {
        t.record(&Found { gpu: Some(1), fault: Fault::RemappedRowsPending }, Some("GPU-b"), |_| 0);
    }
    t.verdict()
}

/// The Node at `resource_version` with the condition and record of `v`.
fn node(resource_version: &str, v: &Verdict) -> Value {
    let record = v.record.as_ref().unwrap().to_annotation();
    json!({"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": "gpu-1", "uid": "uid-1", "resourceVersion": resource_version,
                        "annotations": {ANNOTATION: record}},
           "status": {"conditions": [
               {"type": "GPUHealthy", "status": v.status.as_str(), "reason": v.reason, "message": v.message,
                "lastTransitionTime": "2026-01-01T00:00:00Z", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}]}})
}

#[tokio::test]
async fn a_conflict_on_the_clears_write_reads_the_node_again_and_clears_what_it_read() {
    let (client, mut handle) = mock();
    let task = tokio::spawn(async move {
        let gpus = ["0".to_string()];
        clear::clear(&config(), &gpus, async { Ok(client) }).await.map_err(|e| e.to_string())
    });
    // The clear reads GPU 0's fault, and writes under that resourceVersion: 409, the daemon
    // wrote GPU 1's fault in between.
    expect(&mut handle, Method::GET, NODE, 200, node("100", &faults(false))).await;
    let first =
        expect(&mut handle, Method::PATCH, APPLY, 409, common::mock_api::status(409, "Conflict")).await;
    assert_eq!(first["metadata"]["resourceVersion"], "100", "{first}");
    // It reads the Node again and writes under the new resourceVersion, keeping GPU 1's fault.
    expect(&mut handle, Method::GET, NODE, 200, node("101", &faults(true))).await;
    let second = expect(&mut handle, Method::PATCH, APPLY, 200, node("102", &faults(true))).await;
    assert_eq!(second["metadata"]["resourceVersion"], "101", "{second}");
    let record = second["metadata"]["annotations"][ANNOTATION].as_str().expect("a record stays");
    let kept: Vec<Option<u32>> = Record::parse(record).unwrap().faults.iter().map(|f| f.gpu).collect();
    assert_eq!(kept, [Some(1)], "GPU 0's fault cleared, GPU 1's written meanwhile kept: {record}");
    let condition = &second["status"]["conditions"][0];
    assert_eq!((&condition["status"], &condition["reason"]), (&json!("False"), &json!(CLEARED_BY_ADMIN)));

    let outcome = task.await.unwrap().expect("the clear succeeds after one conflict");
    let Outcome::Cleared { node, cleared, verdict, .. } = outcome else { panic!("{outcome:?}") };
    assert_eq!(node, "gpu-1");
    assert_eq!(cleared.len(), 1, "{cleared:?}");
    assert!(cleared[0].contains("Xid 79"), "{cleared:?}");
    assert_eq!((verdict.status, verdict.reason.as_str()), (Status::False, CLEARED_BY_ADMIN));
    no_more_requests(handle).await;
}
