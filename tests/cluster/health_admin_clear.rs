//! The admin's word on a real kube-apiserver: `nvlabel health clear` (a node, or one GPU of it)
//! and the clear by hand docs/health.md shows, obeyed by the running daemon. Cleared faults stay
//! cleared, a fault whose cause is still read comes back with the next reading (a new Warning), a
//! new fault is reported alone; `nvlabel prune --health-only` removes what a clear wrote; the
//! clear's refusals and its precondition on the Node as read. Needs `NVLABEL_KUBE_TEST_SERVER`;
//! without it each test skips with one line.

use crate::common;

use common::apiserver::{self, Server};
use common::health_cluster::{get_condition, nodes_of, setup};
use common::health_daemon::*;
use common::*;
use kube::api::{Patch, PatchParams};
use kube::Client;
use nvlabel::health::values::fault::{Action, Fault};
use nvlabel::health::values::record::{Record, RecordedFault, ANNOTATION};
use nvlabel::health::values::verdict::{Status, Verdict};
use nvlabel::health::writing::condition::{health_managers, NodeCondition};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const UUID0: &str = "GPU-a1b2c3d4-0000-4000-8000-000000000000";

/// `nvlabel health clear` as an admin runs it, with `args`: exit status, stdout, stderr.
fn clear(server: &Server, args: &[&str]) -> (i32, String, String) {
    run_admin(server, &["health", "clear"], args)
}

/// `nvlabel prune --health-only` as an admin runs it (the daemon stopped), with `args`.
fn prune(server: &Server, args: &[&str]) -> (i32, String, String) {
    run_admin(server, &["prune", "--health-only"], args)
}

fn run_admin(server: &Server, command: &[&str], args: &[&str]) -> (i32, String, String) {
    let mut cmd = nvlabel(None);
    cmd.args(command).arg("--kubeconfig").arg(server.kubeconfig()).args(args).env("RUST_LOG", "info");
    let out = cmd.output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

/// The faults gpu-a's record lists, each as `GPU: what`.
async fn faults(admin: &Client) -> Vec<String> {
    let faults = record_of(admin).await.map(|r| r.faults).unwrap_or_default();
    faults.iter().map(|f| format!("{}: {}", f.gpu.unwrap(), f.fault.describe())).collect()
}

/// Waits (bounded, 30 s) until gpu-a's record lists exactly `want`.
async fn until_faults(admin: &Client, want: &[&str], dir: &Path) {
    let start = Instant::now();
    while faults(admin).await != want {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{:?}, not {want:?}\n{}",
            faults(admin).await,
            logs(dir)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How often a Warning Event about gpu-a whose note contains `words` was reported (its series).
async fn reported(admin: &Client, words: &str) -> i32 {
    let warnings = node_warnings(admin).await.into_iter();
    let about = warnings.filter(|e| e.note.as_deref().is_some_and(|n| n.contains(words)));
    about.map(|e| e.series.map_or(1, |s| s.count)).sum()
}

/// The notes of the Normal Events that say what was cleared by hand.
async fn cleared_by_admin(admin: &Client) -> Vec<String> {
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(admin.clone(), "default");
    let all = events.list(&Default::default()).await.unwrap().items.into_iter();
    all.filter(|e| e.reason.as_deref() == Some("ClearedByAdmin")).filter_map(|e| e.note).collect()
}

/// docs/health.md's clear by hand: one server-side apply of the condition on `nodes/status`
/// under nvlabel's field manager, without the record (as `kubectl apply --server-side
/// --subresource=status --field-manager=nvlabel --force-conflicts` sends it).
async fn documented_clear(admin: &Client) {
    let body = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-a"},
        "status": {"conditions": [{"type": "GPUHealthy", "status": "True", "reason": "ClearedByAdmin", "message": "cleared by hand"}]}});
    let params = PatchParams::apply("nvlabel").force();
    nodes_of(admin).patch_status("gpu-a", &params, &Patch::Apply(&body)).await.unwrap();
}

/// Nothing of health is left on `node`: no condition, no record, no field manager of nvlabel's.
async fn nothing_left(admin: &Client, node: &str) {
    let n = nodes_of(admin).get(node).await.unwrap();
    assert_eq!(get_condition(admin, node, "GPUHealthy").await, None);
    assert_eq!(n.metadata.annotations.unwrap_or_default().get(ANNOTATION), None);
    assert!(health_managers(&nodes_of(admin).get(node).await.unwrap()).is_empty());
}

#[tokio::test]
async fn cleared_faults_stay_cleared_a_cause_still_read_returns_and_a_new_fault_comes_alone() {
    let Some(server) = apiserver::server("cleared_faults_stay_cleared") else { return };
    let _serial = SERIAL.lock().await;
    let (admin, dir, mut daemon) = daemon_on(server, "h100x2", &["--health-fatal-xids=13"]).await;
    let d = dir.path();
    until(&admin, "the first condition", |c| c.0 == "True").await;
    event_line(d, "0 xid 13");
    event_line(d, "1 set remapped_rows.pending true");
    until_faults(&admin, &["0: Xid 13", "1: row remapping pending"], d).await;

    // GPU 0 cleared by the binary: the daemon obeys, GPU 1's fault stays.
    let (code, out, err) = clear(server, &["--node-name=gpu-a", "--gpu=0"]);
    assert_eq!(code, 0, "{err}");
    let xid_13_on_0 = format!("GPU 0 ({UUID0}): XidCriticalError, Xid 13");
    let first = format!("cleared on Node gpu-a: {xid_13_on_0}, action: check the workload on this GPU\n");
    assert!(out.starts_with(&first), "{out}");
    assert!(out.contains("GPUHealthy on Node gpu-a is now False (ClearedByAdmin): GPU 0"), "{out}");
    let (c, _) = until(&admin, "the daemon's own condition", |c| c.1 == "RemappedRowsPending").await;
    assert!(!c.2.contains("GPU 0"), "{c:?}");
    assert_eq!(faults(&admin).await, ["1: row remapping pending"]);
    // One Normal Event names what was cleared (sent after the condition).
    let start = Instant::now();
    while !cleared_by_admin(&admin).await.iter().any(|n| n.contains(&xid_13_on_0)) {
        assert!(start.elapsed() < Duration::from_secs(30), "no ClearedByAdmin Event\n{}", logs(d));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The whole node cleared as the docs show: GPU 1's pending remap is still read and comes
    // back with the next reading, as a new fault (a Warning again), though the daemon's record
    // then equals what it last wrote.
    assert_eq!(reported(&admin, "RemappedRowsPending").await, 1);
    documented_clear(&admin).await;
    until(&admin, "the remap back", |c| c.0 == "False" && c.1 == "RemappedRowsPending").await;
    until_faults(&admin, &["1: row remapping pending"], d).await;
    // Events go out after the condition.
    let start = Instant::now();
    while reported(&admin, "RemappedRowsPending").await != 2 {
        assert!(start.elapsed() < Duration::from_secs(30), "the remap not reported again\n{}", logs(d));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A new fault on GPU 1 comes alone: GPU 0's cleared Xid never comes back with it.
    event_line(d, "1 xid 13");
    until_faults(&admin, &["1: Xid 13", "1: row remapping pending"], d).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(faults(&admin).await, ["1: Xid 13", "1: row remapping pending"], "{}", logs(d));
    assert_eq!(reported(&admin, &xid_13_on_0).await, 1, "GPU 0's Xid was reported once");

    // With the daemon gone, the binary clears the node; prune removes what the clear wrote.
    assert!(stop_with(&mut daemon.child, "-TERM").success());
    let (code, out, err) = clear(server, &["--node-name=gpu-a"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 3, "two faults and the condition: {out}");
    let c = get_condition(&admin, "gpu-a", "GPUHealthy").await.unwrap();
    assert_eq!((c.0.as_str(), c.1.as_str()), ("True", "ClearedByAdmin"));
    assert!(c.2.starts_with("cleared by hand at "), "{c:?}");
    assert_eq!(record_of(&admin).await, None);
    let (code, _, err) = prune(server, &["--node-name=gpu-a"]);
    assert_eq!(code, 0, "{err}");
    nothing_left(&admin, "gpu-a").await;
}

/// The documented clear by hand is removed by `nvlabel prune` like everything nvlabel wrote.
#[tokio::test]
async fn the_documented_clear_leaves_nothing_after_a_prune() {
    let Some(server) = apiserver::server("the_documented_clear_leaves_nothing_after_a_prune") else { return };
    let _serial = SERIAL.lock().await;
    let (admin, dir, mut daemon) = daemon_on(server, "h100x2", &[]).await;
    until(&admin, "the first condition", |c| c.0 == "True").await;
    event_line(dir.path(), "0 xid 79");
    until_faults(&admin, &["0: Xid 79"], dir.path()).await;
    assert!(stop_with(&mut daemon.child, "-TERM").success());
    documented_clear(&admin).await;
    assert_eq!(record_of(&admin).await, None, "the apply leaves the record out: it goes");
    let (code, _, err) = prune(server, &["--node-name=gpu-a"]);
    assert_eq!(code, 0, "{err}");
    nothing_left(&admin, "gpu-a").await;
}

#[tokio::test]
async fn a_clear_refuses_what_it_cannot_clear_and_writes_only_onto_the_node_it_read() {
    let Some(server) = apiserver::server("a_clear_refuses_what_it_cannot_clear") else { return };
    let _serial = SERIAL.lock().await;
    let admin = server.admin().await;
    setup(server, &admin).await;
    let (code, _, err) = clear(server, &["--node-name=gpu-x"]);
    assert_eq!((code, err.trim_end()), (1, "nvlabel: error: Node gpu-x not found"));
    let (code, _, err) = clear(server, &["--node-name=gpu-b"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("Node gpu-b has no GPUHealthy condition"), "{err}");

    // A release's health (an instance's field manager): the clear names the flags it needs.
    let fault = RecordedFault {
        gpu: Some(0),
        uuid: Some(UUID0.into()),
        fault: Fault::RemappedRowsPending,
        action: Action::ResetGpu,
        recurrences: None,
    };
    let record = Record::new("boot-1", [fault].into_iter()).to_annotation();
    let body = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "gpu-b", "annotations": {ANNOTATION: record}},
        "status": {"conditions": [{"type": "GPUHealthy", "status": "False", "reason": "RemappedRowsPending", "message": "GPU 0"}]}});
    let release = PatchParams::apply("nvlabel/gpu/nv").force();
    nodes_of(&admin).patch_status("gpu-b", &release, &Patch::Apply(&body)).await.unwrap();
    let (code, _, err) = clear(server, &["--node-name=gpu-b"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("field manager nvlabel/gpu/nv, not nvlabel: give --instance nv --namespace gpu"),
        "{err}"
    );
    let instance = ["--node-name=gpu-b", "--instance=nv", "--namespace=gpu"];
    let (code, _, err) = clear(server, &[&instance[..], &["--gpu=1"]].concat());
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!("no GPU fault recorded on Node gpu-b for GPU 1 (recorded: GPU 0 ({UUID0}))")),
        "{err}"
    );
    let (code, out, err) = clear(server, &[&instance[..], &["--gpu", UUID0]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("is now True (ClearedByAdmin): GPU 0"), "{out}");
    let b = nodes_of(&admin).get("gpu-b").await.unwrap();
    assert_eq!(
        b.metadata.annotations.unwrap_or_default().get(ANNOTATION),
        None,
        "the release's record is gone"
    );
    let (code, _, err) = prune(server, &instance);
    assert_eq!(code, 0, "{err}");
    nothing_left(&admin, "gpu-b").await;

    // The write is a precondition on the Node as read: a change in between refuses it.
    let mut condition =
        NodeCondition::new(admin.clone(), "gpu-b", "GPUHealthy", "nvlabel", Default::default());
    condition.read().await.unwrap();
    let label = json!({"metadata": {"labels": {"example.com/touched": "yes"}}});
    nodes_of(&admin).patch("gpu-b", &PatchParams::default(), &Patch::Merge(&label)).await.unwrap();
    let v =
        Verdict { status: Status::True, reason: "ClearedByAdmin".into(), message: "x".into(), record: None };
    assert!(!condition.apply_exact(&v).await.unwrap(), "the Node changed since it was read");
    assert_eq!(get_condition(&admin, "gpu-b", "GPUHealthy").await, None, "nothing was written");
    condition.read().await.unwrap();
    assert!(condition.apply_exact(&v).await.unwrap());
    assert_eq!(get_condition(&admin, "gpu-b", "GPUHealthy").await.unwrap().1, "ClearedByAdmin");
    let (code, _, err) = prune(server, &["--node-name=gpu-b"]);
    assert_eq!(code, 0, "{err}");
    nothing_left(&admin, "gpu-b").await;
}
