//! GPU health on a real kube-apiserver: the condition a daemon writes as the fake NVML reports
//! Xids, row-remapping failures and lost GPUs; stickiness (the fault record) across a restart and
//! until a new boot. The admission policy of the same deployment: tests/cluster/health_policy.rs.
//! Needs `NVLABEL_KUBE_TEST_SERVER`; without it each test skips with one line.

use crate::common;

use common::apiserver;
use common::health_cluster::{get_condition, nodes_of, setup};
use common::health_daemon::*;
use common::*;
use std::time::{Duration, Instant};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const UUID0: &str = "GPU-a1b2c3d4-0000-4000-8000-000000000000";
const UUID1: &str = "GPU-a1b2c3d4-0001-4000-8000-000000000001";

#[tokio::test]
async fn faults_turn_the_condition_false_until_a_new_boot() {
    let Some(server) = apiserver::server("faults_turn_the_condition_false_until_a_new_boot") else { return };
    let _serial = SERIAL.lock().await;
    let admin = server.admin().await;
    let (_, kubeconfig) = setup(server, &admin).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    node_files(d);

    let daemon = start(d, &kubeconfig);
    let (c, _) = until(&admin, "the first condition", |c| c.0 == "True").await;
    assert_eq!(c, ("True".into(), "GpusHealthy".into(), "2 GPUs healthy".into()));

    let start_wait = Instant::now();
    while node_labels(&admin).await.get("nvidia.com/gpu.count").map(String::as_str) != Some("2") {
        assert!(start_wait.elapsed() < Duration::from_secs(30), "{:?}", node_labels(&admin).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // An application's Xid is not a fault: nothing changes (three passes later, same object).
    event_line(d, "1 xid 13");
    let rv = nodes_of(&admin).get("gpu-a").await.unwrap().metadata.resource_version;
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let after = nodes_of(&admin).get("gpu-a").await.unwrap();
    assert_eq!(
        after.metadata.resource_version, rv,
        "idle passes and xid 13 wrote nothing: {:?}",
        after.metadata.managed_fields
    );

    event_line(d, "0 xid 79");
    let (c, took) = until(&admin, "xid 79", |c| c.0 == "False").await;
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(c.1, "XidCriticalError");
    assert_eq!(
        c.2,
        format!("GPU 0 ({UUID0}): XidCriticalError, Xid 79, action: reboot the node [boot boot-1]")
    );
    let record = record_of(&admin).await.expect("the fault is recorded on the Node");
    assert_eq!((record.boot_id.as_str(), record.faults.len()), ("boot-1", 1), "{record:?}");
    assert_eq!(record.faults[0].uuid.as_deref(), Some(UUID0));
    event_line(d, "1:0 xid 48");
    let (c, _) = until(&admin, "the MIG Xid", |c| c.2.contains("Xid 48")).await;
    assert!(
        c.2.contains(&format!(
            "GPU 1 ({UUID1}): XidCriticalError, Xid 48 on MIG device GI 9 CI 0, action: reset the GPU"
        )),
        "{}",
        c.2
    );
    let warnings = node_warnings(&admin).await;
    assert!(
        warnings.iter().any(|e| e.note.as_deref().is_some_and(|n| n.contains("Xid 79"))),
        "{warnings:?} {}",
        logs(d)
    );

    // A restart of nvlabel forgets nothing.
    drop(daemon);
    let before = get_condition(&admin, "gpu-a", "GPUHealthy").await.unwrap();
    let daemon = start(d, &kubeconfig);
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert_eq!(get_condition(&admin, "gpu-a", "GPUHealthy").await.unwrap(), before);
    assert_eq!(record_of(&admin).await.map(|r| r.faults.len()), Some(2), "{}", logs(d));

    // A new boot clears it, and the record with it.
    std::fs::write(d.join("boot_id"), "boot-2\n").unwrap();
    until(&admin, "the new boot", |c| c.0 == "True").await;
    assert_eq!(record_of(&admin).await, None);

    // Row-remapping failure and a lost GPU, each a fault; the other GPU keeps its labels.
    event_line(d, "0 set remapped_rows.failure true");
    let (c, _) = until(&admin, "remapped rows failure", |c| c.0 == "False").await;
    assert_eq!(c.1, "RemappedRowsFailure");
    assert!(
        c.2.contains(&format!(
            "GPU 0 ({UUID0}): RemappedRowsFailure, row remapping failed, action: replace the GPU"
        )),
        "{}",
        c.2
    );
    event_line(d, "1 lost");
    let (c, _) = until(&admin, "the lost GPU", |c| c.1 == "GpuLost").await;
    assert!(
        c.2.contains(&format!("GPU 1 ({UUID1}): GpuLost, GPU is lost, action: reboot the node")),
        "{}",
        c.2
    );
    let start_wait = Instant::now();
    while node_labels(&admin).await.get("nvidia.com/gpu.count").map(String::as_str) != Some("1") {
        assert!(start_wait.elapsed() < Duration::from_secs(30), "{:?}", node_labels(&admin).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        node_labels(&admin).await.get("nvidia.com/gpu.product").map(String::as_str),
        Some("NVIDIA-H100-80GB-HBM3")
    );

    // One NVML session for the daemon's life: one init, however many passes.
    let mut daemon = daemon;
    assert!(stop_with(&mut daemon.child, "-TERM").success());
    let calls = std::fs::read_to_string(d.join("calls")).unwrap();
    assert!(calls.lines().any(|l| l == "nvmlInit_v2 1"), "{calls}");
}

#[tokio::test]
async fn without_nvml_the_condition_is_unknown_until_the_driver_appears() {
    let Some(server) = apiserver::server("without_nvml_the_condition_is_unknown_until_the_driver_appears")
    else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let admin = server.admin().await;
    let (_, kubeconfig) = setup(server, &admin).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    node_files(d);
    let fixture = d.join("machine.yaml");
    let _daemon = start_with(d, &kubeconfig, &fixture, &["--fail-on-init-error=false"]);
    let (c, _) = until(&admin, "Unknown without a driver", |c| c.0 == "Unknown").await;
    assert_eq!(c.1, "NvmlUnavailable", "{c:?}");
    std::fs::copy(repo().join("testdata/health/h100x2.yaml"), &fixture).unwrap();
    until(&admin, "True once the driver is there", |c| c.0 == "True").await;
    let start_wait = Instant::now();
    while node_labels(&admin).await.get("nvidia.com/gpu.count").map(String::as_str) != Some("2") {
        assert!(
            start_wait.elapsed() < Duration::from_secs(30),
            "{:?} {}",
            node_labels(&admin).await,
            logs(d)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn an_earlier_nvlabels_faults_stay_and_get_their_record() {
    let Some(server) = apiserver::server("an_earlier_nvlabels_faults_stay_and_get_their_record") else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let admin = server.admin().await;
    let (sa, kubeconfig) = setup(server, &admin).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    node_files(d);
    // The condition as nvlabel wrote it before the record: its message was the only record.
    let message = format!("GPU 1 ({UUID1}): XidCriticalError, Xid 48, action: reset the GPU [boot boot-1]");
    let mut old = common::health_cluster::condition("gpu-a", "GPUHealthy", "False");
    old["status"]["conditions"][0]["reason"] = "XidCriticalError".into();
    old["status"]["conditions"][0]["message"] = message.clone().into();
    let ssa = kube::api::PatchParams::apply("nvlabel").force();
    nodes_of(&sa).patch_status("gpu-a", &ssa, &kube::api::Patch::Apply(&old)).await.unwrap();
    assert_eq!(record_of(&admin).await, None);

    let _daemon = start(d, &kubeconfig);
    let start_wait = Instant::now();
    let record = loop {
        if let Some(r) = record_of(&admin).await {
            break r;
        }
        assert!(start_wait.elapsed() < Duration::from_secs(30), "no record written: {}", logs(d));
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!((record.boot_id.as_str(), record.faults.len()), ("boot-1", 1), "{record:?}");
    assert_eq!((record.faults[0].gpu, record.faults[0].uuid.as_deref()), (Some(1), Some(UUID1)));
    let c = get_condition(&admin, "gpu-a", "GPUHealthy").await.unwrap();
    assert_eq!(c, ("False".into(), "XidCriticalError".into(), message), "the fault stays, worded as before");
}

/// docs/health.md's clear by hand (one server-side apply of the condition `True` under nvlabel's
/// field manager, the record left out) while no daemon runs: the next one starts clean. With a
/// daemon running: tests/cluster/health_admin_clear.rs.
#[tokio::test]
async fn a_person_clears_the_faults_as_the_docs_say() {
    let Some(server) = apiserver::server("a_person_clears_the_faults_as_the_docs_say") else { return };
    let _serial = SERIAL.lock().await;
    let admin = server.admin().await;
    let (_, kubeconfig) = setup(server, &admin).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    node_files(d);
    let daemon = start(d, &kubeconfig);
    until(&admin, "the first condition", |c| c.0 == "True").await;
    event_line(d, "0 xid 79");
    until(&admin, "xid 79", |c| c.0 == "False").await;
    assert!(record_of(&admin).await.is_some());
    drop(daemon);

    let clear = serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-a"},
        "status": {"conditions": [{"type": "GPUHealthy", "status": "True", "reason": "ClearedByAdmin", "message": "cleared by hand"}]}});
    let ssa = kube::api::PatchParams::apply("nvlabel").force();
    nodes_of(&admin).patch_status("gpu-a", &ssa, &kube::api::Patch::Apply(&clear)).await.unwrap();
    assert_eq!(record_of(&admin).await, None);
    let _daemon = start(d, &kubeconfig);
    let (c, _) = until(&admin, "nvlabel's own True", |c| c.1 == "GpusHealthy").await;
    assert_eq!(c.0, "True", "{}", logs(d));
    assert_eq!(record_of(&admin).await, None);
}

#[tokio::test]
async fn the_driver_then_nvidias_catalog_say_what_an_xid_is_and_what_to_do() {
    let Some(server) = apiserver::server("the_driver_then_nvidias_catalog_say_what_an_xid_is") else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let (admin, dir, _daemon) = daemon_on(server, "h100x2-recovery", &[]).await;
    let d = dir.path();
    until(&admin, "the first condition", |c| c.0 == "True").await;
    // 94 is RESTART_APP in the catalog (the device plugin called it fatal); 31 on a GPU whose
    // driver says no recovery is needed: neither is a fault.
    event_line(d, "1 xid 94");
    event_line(d, "0 xid 31");
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let now = get_condition(&admin, "gpu-a", "GPUHealthy").await.unwrap();
    assert_eq!(now.0, "True", "{now:?}\n{}", logs(d));
    // The driver asks for a reset after an Xid the catalog calls an application's.
    event_line(d, "0 set recovery_action gpu_reset");
    event_line(d, "0 xid 31");
    let (c, _) = until(&admin, "the driver's action", |c| c.0 == "False").await;
    assert_eq!(c.1, "GpuRecoveryActionRequired", "{c:?}");
    assert!(c.2.contains(&format!("GPU 0 ({UUID0}): GpuRecoveryActionRequired")), "{}", c.2);
    assert!(c.2.contains("action: reset the GPU"), "{}", c.2);
    // After the reset (the driver says none again) and a new boot: healthy.
    event_line(d, "0 set recovery_action none");
    std::fs::write(d.join("boot_id"), "boot-2\n").unwrap();
    until(&admin, "the new boot", |c| c.0 == "True").await;
    // 109 is RESET_GPU in the catalog (the device plugin ignored it).
    event_line(d, "1 xid 109");
    let (c, _) = until(&admin, "xid 109", |c| c.0 == "False").await;
    assert!(c.2.contains("Xid 109, action: reset the GPU"), "{}", c.2);
    // An Xid the catalog does not list: a fault nobody can name.
    std::fs::write(d.join("boot_id"), "boot-3\n").unwrap();
    until(&admin, "the third boot", |c| c.0 == "True").await;
    event_line(d, "1 xid 4000");
    let (c, _) = until(&admin, "an unknown xid", |c| c.0 == "False").await;
    assert!(c.2.contains("Xid 4000, action: investigate"), "{}", c.2);
    // A corrupted InfoROM, found by a pass.
    std::fs::write(d.join("boot_id"), "boot-4\n").unwrap();
    until(&admin, "the fourth boot", |c| c.0 == "True").await;
    event_line(d, "1 set inforom_valid false");
    let (c, _) = until(&admin, "a corrupted InfoROM", |c| c.0 == "False").await;
    assert_eq!(c.1, "InforomCorrupted", "{c:?}");
    assert!(c.2.contains("the InfoROM is corrupted, action: replace the GPU"), "{}", c.2);
}
