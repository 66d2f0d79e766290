//! nvlabel's verdict stays the Node's truth on a real kube-apiserver: another field manager that
//! writes the condition over a recorded fault (EKS's node monitoring agent, a `kubectl patch`) is
//! undone within seconds and named once, in the log and in a Warning Event, and counted; a prune
//! under a running daemon that holds a fault is obeyed (the condition stays gone) and drops no
//! recorded fault. Needs `NVLABEL_KUBE_TEST_SERVER`; without it each test skips with one line.

use crate::common;

use common::apiserver;
use common::health_cluster::nodes_of;
use common::health_daemon::*;
use common::*;
use kube::api::{Patch, PatchParams};
use kube::Client;
use serde_json::json;
use std::time::{Duration, Instant};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Writes GPUHealthy `True` on gpu-a as `manager` does, with a status patch (an Update, as
/// agents and `kubectl patch --subresource=status` write).
async fn overwrite(admin: &Client, manager: &str) {
    let patch = json!({"status": {"conditions": [{
        "type": "GPUHealthy", "status": "True", "reason": "AgentSaysHealthy", "message": "all good",
        "lastHeartbeatTime": "2026-12-01T00:00:00Z", "lastTransitionTime": "2026-12-01T00:00:00Z"
    }]}});
    let params = PatchParams { field_manager: Some(manager.into()), ..PatchParams::default() };
    nodes_of(admin).patch_status("gpu-a", &params, &Patch::Strategic(&patch)).await.unwrap();
}

/// A health daemon on gpu-a whose GPU 0 has Xid 79 recorded.
async fn holding_a_fault(server: &'static apiserver::Server) -> (Client, tempfile::TempDir, Daemon) {
    let (admin, dir, daemon) = daemon_on(server, "h100x2", &[]).await;
    until(&admin, "the first condition", |c| c.0 == "True").await;
    event_line(dir.path(), "0 xid 79");
    until(&admin, "xid 79", |c| c.1 == "XidCriticalError").await;
    (admin, dir, daemon)
}

#[tokio::test]
async fn another_writer_over_a_recorded_fault_is_undone_and_named() {
    let Some(server) = apiserver::server("another_writer_over_a_recorded_fault_is_undone_and_named") else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let (admin, dir, _daemon) = holding_a_fault(server).await;
    let d = dir.path();

    overwrite(&admin, "eks-node-monitoring-agent").await;
    let start = Instant::now();
    let (c, _) = until(&admin, "the verdict written back", |c| c.0 == "False").await;
    assert!(start.elapsed() < Duration::from_secs(10), "took {:?}\n{}", start.elapsed(), logs(d));
    assert_eq!(c.1, "XidCriticalError", "{}", logs(d));
    let log = logs(d);
    let named = log.lines().filter(|l| l.contains("another writer overwrote the GPU health condition"));
    let named: Vec<&str> = named.collect();
    assert_eq!(named.len(), 1, "{log}");
    assert!(
        named[0].contains("by=eks-node-monitoring-agent") && named[0].contains("shown_status=True"),
        "{log}"
    );
    let start = Instant::now();
    let event = loop {
        let found = node_warnings(&admin)
            .await
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("GpuHealthConditionOverwritten"));
        if let Some(e) = found {
            break e;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "no Event\n{}", logs(d));
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let note = event.note.unwrap_or_default();
    assert!(note.starts_with("eks-node-monitoring-agent set the GPUHealthy condition to True"), "{note}");

    // Again: written back again, but not said again (the same writer, minutes apart at most).
    overwrite(&admin, "eks-node-monitoring-agent").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    until(&admin, "the verdict written back again", |c| c.0 == "False").await;
    let log = logs(d);
    assert_eq!(log.matches("another writer overwrote the GPU health condition").count(), 1, "{log}");
}

/// The prune an uninstall runs, while the daemon still holds a fault: the condition stays gone
/// (a prune keeps its meaning), and the next fault's write lists the old fault too (the prune
/// was no clear by hand).
#[tokio::test]
async fn a_prune_under_a_daemon_that_holds_a_fault_drops_no_fault() {
    let Some(server) = apiserver::server("a_prune_under_a_daemon_that_holds_a_fault_drops_no_fault") else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let (admin, dir, _daemon) = holding_a_fault(server).await;
    let d = dir.path();

    let out = nvlabel(None)
        .args(["prune", "--health-only", "--node-name=gpu-a", "--kubeconfig"])
        .arg(server.kubeconfig())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let gone =
        || async { common::health_cluster::get_condition(&admin, "gpu-a", "GPUHealthy").await.is_none() };
    assert!(gone().await, "the prune removed the condition");
    // Passes a second apart: several pass and the prune stays obeyed.
    tokio::time::sleep(Duration::from_millis(3000)).await;
    assert!(gone().await, "a prune is not undone\n{}", logs(d));
    assert!(!logs(d).contains("another writer overwrote"), "{}", logs(d));

    event_line(d, "1 xid 79");
    let (c, _) = until(&admin, "the next fault", |c| c.2.contains("GPU 1")).await;
    assert!(c.2.contains("GPU 0") && c.2.contains("GPU 1"), "the old fault is still recorded: {c:?}");
    assert_eq!(record_of(&admin).await.map(|r| r.faults.len()), Some(2), "{}", logs(d));
}
