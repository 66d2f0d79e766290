//! What health remembers, on a real kube-apiserver: a restart in the same boot keeps every
//! recorded fault (the driver's own recovery action and an Xid's included) and writes nothing; a
//! restart into a new boot clears them and says so once (`GpusRecovered`); the driver's recovery
//! action is read at once after an Xid, not at the next pass; `nvlabel prune` removes the
//! condition and the record and nothing of anyone else's. Needs `NVLABEL_KUBE_TEST_SERVER`;
//! without it each test skips with one line.

use crate::common;

use common::apiserver;
use common::health_cluster::{get_condition, nodes_of, setup};
use common::health_daemon::*;
use common::*;
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use nvlabel::health::values::record::ANNOTATION;
use std::time::{Duration, Instant};

const UUID0: &str = "GPU-a1b2c3d4-0000-4000-8000-000000000000";
const UUID1: &str = "GPU-a1b2c3d4-0001-4000-8000-000000000001";

/// One test at a time: they share the server and node gpu-a.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The server set up for health (`None` after a one-line skip): the admin client, the pod's
/// kubeconfig, a fresh node's files, and this test's turn.
async fn begin(
    test: &str,
) -> Option<(Client, std::path::PathBuf, tempfile::TempDir, tokio::sync::MutexGuard<'static, ()>)> {
    let server = apiserver::server(test)?;
    let serial = SERIAL.lock().await;
    let admin = server.admin().await;
    let (_, kubeconfig) = setup(server, &admin).await;
    let dir = tempfile::tempdir().unwrap();
    node_files(dir.path());
    Some((admin, kubeconfig, dir, serial))
}

/// gpu-a's Normal Events with `reason`.
async fn normal_events(admin: &Client, reason: &str) -> Vec<Event> {
    let events: kube::Api<Event> = kube::Api::namespaced(admin.clone(), "default");
    let all = events.list(&Default::default()).await.unwrap().items.into_iter();
    all.filter(|e| {
        e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("gpu-a")
            && e.type_.as_deref() == Some("Normal")
            && e.reason.as_deref() == Some(reason)
    })
    .collect()
}

/// The condition as the Node has it, its transition time included, and the record's text.
async fn stored(admin: &Client) -> (String, Option<String>) {
    let node = nodes_of(admin).get("gpu-a").await.unwrap();
    let condition =
        node.status.and_then(|s| s.conditions).into_iter().flatten().find(|c| c.type_ == "GPUHealthy");
    let record = node.metadata.annotations.and_then(|mut a| a.remove(ANNOTATION));
    (serde_json::to_string(&condition).unwrap(), record)
}

/// A daemon whose passes are five minutes apart: only an event (or the start) reads NVML.
fn slow(d: &std::path::Path, kubeconfig: &std::path::Path) -> Daemon {
    let fixture = repo().join("testdata/health/h100x2-recovery.yaml");
    start_with(d, kubeconfig, &fixture, &["--sleep-interval=300s"])
}

#[tokio::test]
async fn a_restart_keeps_every_fault_and_a_new_boot_says_it_cleared_them_once() {
    let test = "a_restart_keeps_every_fault_and_a_new_boot_says_it_cleared_them_once";
    let Some((admin, kubeconfig, dir, _serial)) = begin(test).await else { return };
    let d = dir.path();
    let mut daemon = slow(d, &kubeconfig);
    until(&admin, "the first condition", |c| c.0 == "True").await;

    // GPU 0's driver answers its recovery action: an Xid there makes nvlabel read it at once (the
    // next pass is minutes away). GPU 1's Xid is the catalog's.
    event_line(d, "0 set recovery_action node_reboot");
    event_line(d, "0 xid 79");
    let (c, took) =
        until(&admin, "the driver's recovery action", |c| c.1 == "GpuRecoveryActionRequired").await;
    assert!(took < Duration::from_secs(10), "read at once, not at the next pass: {took:?}\n{}", logs(d));
    let after = "GpuRecoveryActionRequired, the driver asks for a recovery action after Xid 79";
    assert!(c.2.contains(&format!("GPU 0 ({UUID0}): {after}")), "the Xid that started it: {}", c.2);
    event_line(d, "1 xid 48");
    until(&admin, "GPU 1's Xid", |c| c.2.contains("Xid 48")).await;
    // The driver no longer asks: only the record keeps the fault now.
    event_line(d, "0 set recovery_action none");
    let before = stored(&admin).await;
    let record = before.1.clone().expect("the faults are recorded");
    assert!(
        record.contains(r#""driverAction":"RebootNode","xid":79"#) && record.contains(r#""xidAction":"#),
        "{record}"
    );

    // A restart in the same boot: the same condition and record, byte for byte, nothing said.
    assert!(stop_with(&mut daemon.child, "-TERM").success());
    let mut daemon = slow(d, &kubeconfig);
    let start = Instant::now();
    while !logs(d).contains("GPU faults recorded earlier in this boot stay") {
        assert!(start.elapsed() < Duration::from_secs(30), "{}", logs(d));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(stored(&admin).await, before, "{}", logs(d));
    assert!(!logs(d).contains("instead"), "the record was read: {}", logs(d));
    assert!(normal_events(&admin, "GpusRecovered").await.is_empty());

    // A reboot (nvlabel's pod restarts with it): cleared, said once in the log and one Event.
    assert!(stop_with(&mut daemon.child, "-TERM").success());
    std::fs::write(d.join("boot_id"), "boot-2\n").unwrap();
    let mut daemon = slow(d, &kubeconfig);
    let (c, _) = until(&admin, "the new boot", |c| c.0 == "True").await;
    assert_eq!(c.1, "GpusHealthy");
    let start = Instant::now();
    let recovered = loop {
        let found = normal_events(&admin, "GpusRecovered").await;
        if !found.is_empty() {
            break found;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "no GpusRecovered Event: {}", logs(d));
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let note = recovered[0].note.clone().unwrap_or_default();
    assert!(
        note.starts_with("The node rebooted (boot id boot-2); earlier GPU faults are cleared: "),
        "{note}"
    );
    assert!(note.contains(&format!("GPU 0 ({UUID0}): GpuRecoveryActionRequired")), "{note}");
    assert!(note.contains(&format!("GPU 1 ({UUID1}): XidCriticalError, Xid 48")), "{note}");
    let log = logs(d);
    assert_eq!(log.matches("recorded GPU faults are cleared").count(), 1, "{log}");
    assert_eq!(stored(&admin).await.1, None, "the record is gone");

    // Restarted again in that boot: nothing more to say.
    assert!(stop_with(&mut daemon.child, "-TERM").success());
    let _daemon = slow(d, &kubeconfig);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(normal_events(&admin, "GpusRecovered").await.len(), 1);
    assert_eq!(logs(d).matches("recorded GPU faults are cleared").count(), 1);
    assert_eq!(get_condition(&admin, "gpu-a", "GPUHealthy").await.unwrap().0, "True");
}

#[tokio::test]
async fn prune_removes_the_condition_and_the_record_and_nothing_else() {
    let test = "prune_removes_the_condition_and_the_record_and_nothing_else";
    let Some((admin, kubeconfig, dir, _serial)) = begin(test).await else { return };
    let d = dir.path();
    // Another writer's condition and annotation, which prune must leave as they are.
    let theirs = serde_json::json!({
        "metadata": {"annotations": {"example.com/keep": "yes"}},
        "status": {"conditions": [{"type": "KernelDeadlock", "status": "False", "reason": "KernelHasNoDeadlock", "message": "ok"}]}
    });
    let params = kube::api::PatchParams::default();
    nodes_of(&admin).patch_status("gpu-a", &params, &kube::api::Patch::Strategic(&theirs)).await.unwrap();
    let mut daemon = start(d, &kubeconfig);
    until(&admin, "the first condition", |c| c.0 == "True").await;
    event_line(d, "0 xid 79");
    until(&admin, "the fault", |c| c.0 == "False").await;
    assert!(stored(&admin).await.1.is_some(), "the record is there");
    assert!(stop_with(&mut daemon.child, "-TERM").success());

    // As an operator runs it, with the pod's own (node-bound) token: the policy admits it.
    let prune = |kubeconfig: &std::path::Path| {
        let mut cmd = nvlabel(None);
        cmd.args(["prune", "--sink=node", "--node-name=gpu-a", "--kubeconfig"])
            .arg(kubeconfig)
            .env("RUST_LOG", "info");
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let said = prune(&kubeconfig);
    assert!(said.contains("GPU health condition and fault record removed"), "{said}");
    let node = nodes_of(&admin).get("gpu-a").await.unwrap();
    let conditions: Vec<_> = node.status.and_then(|s| s.conditions).unwrap_or_default();
    let types: Vec<_> = conditions.iter().map(|c| c.type_.as_str()).collect();
    assert!(!types.contains(&"GPUHealthy") && types.contains(&"KernelDeadlock"), "{types:?}");
    let annotations = node.metadata.annotations.unwrap_or_default();
    assert_eq!(annotations.get(ANNOTATION), None, "the record is gone");
    assert_eq!(annotations.get("example.com/keep").map(String::as_str), Some("yes"));

    // Again: nothing of nvlabel's is left, so nothing is written.
    let rv = nodes_of(&admin).get("gpu-a").await.unwrap().metadata.resource_version;
    let said = prune(&kubeconfig);
    assert!(!said.contains("GPU health condition"), "{said}");
    assert_eq!(nodes_of(&admin).get("gpu-a").await.unwrap().metadata.resource_version, rv);
}
