//! The signals fleet monitors watch besides faults, with a running daemon on a real
//! kube-apiserver and the fake NVML: fewer GPUs than the node should have (the flag, and the
//! node's label winning over it), an NVML call that hangs (`Unknown` while labelling goes on and
//! no thread piles up, `True` once it returns), and the warnings that are not faults: a thermal
//! slowdown and PCIe replays, one Warning Event per episode (a repeat within ten minutes counted on
//! that Event's series). Needs `NVLABEL_KUBE_TEST_SERVER`;
//! without it each test skips with one line.

use crate::common;

use common::apiserver;
use common::health_cluster::nodes_of;
use common::health_daemon::*;
use kube::api::{Patch, PatchParams};
use kube::Client;
use std::time::{Duration, Instant};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The Warning Events about gpu-a with `reason`, oldest first.
async fn warnings(admin: &Client, reason: &str) -> Vec<String> {
    let all = node_warnings(admin).await.into_iter();
    all.filter(|e| e.reason.as_deref() == Some(reason)).map(|e| e.note.unwrap_or_default()).collect()
}

/// Waits (bounded, 30 s) until `reason` has `n` Warning Events.
async fn until_warnings(admin: &Client, reason: &str, n: usize, dir: &std::path::Path) -> Vec<String> {
    let start = Instant::now();
    loop {
        let found = warnings(admin, reason).await;
        if found.len() >= n {
            return found;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{reason}: {found:?}\n{}", logs(dir));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn set_node_label(admin: &Client, key: &str, value: Option<&str>) {
    let patch = serde_json::json!({"metadata": {"labels": {key: value}}});
    nodes_of(admin).patch("gpu-a", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

/// gpu-a's health condition as stored, its times included.
async fn condition_as_stored(admin: &Client) -> Option<k8s_openapi::api::core::v1::NodeCondition> {
    let node = nodes_of(admin).get("gpu-a").await.unwrap();
    node.status.and_then(|s| s.conditions).into_iter().flatten().find(|c| c.type_ == "GPUHealthy")
}

fn threads(pid: u32) -> u32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status.lines().find_map(|l| l.strip_prefix("Threads:")).unwrap().trim().parse().unwrap()
}

#[tokio::test]
async fn fewer_gpus_than_the_node_should_have_is_a_fault_and_the_nodes_label_wins() {
    let test = "fewer_gpus_than_the_node_should_have_is_a_fault_and_the_nodes_label_wins";
    let Some(server) = apiserver::server(test) else { return };
    let _serial = SERIAL.lock().await;
    let (admin, dir, _daemon) = daemon_on(server, "h100x2", &["--health-expected-gpus=3"]).await;
    let d = dir.path();
    let (c, _) = until(&admin, "expected 3 with 2", |c| c.0 == "False").await;
    assert_eq!(c.1, "GpuCountBelowExpected", "{}", logs(d));
    assert_eq!(
        c.2,
        "node: GpuCountBelowExpected, NVML sees 2 GPUs, the node should have 3, action: reboot the node [boot boot-1]"
    );
    // The node's own count wins over the chart-wide flag: 2 is what this machine has.
    set_node_label(&admin, "nvidia.com/gpu.expected-count", Some("2")).await;
    let (c, _) = until(&admin, "the label's 2", |c| c.0 == "True").await;
    assert_eq!(c.2, "2 GPUs healthy");
    set_node_label(&admin, "nvidia.com/gpu.expected-count", Some("8")).await;
    let (c, _) = until(&admin, "the label's 8", |c| c.0 == "False").await;
    assert!(c.2.contains("NVML sees 2 GPUs, the node should have 8"), "{}", c.2);
    // A label that is not a count: the flag's 3 again, and one warning in the log.
    set_node_label(&admin, "nvidia.com/gpu.expected-count", Some("eight")).await;
    let (c, _) = until(&admin, "the flag again", |c| c.2.contains("should have 3")).await;
    assert_eq!(c.0, "False");
    assert!(logs(d).contains("expected GPU count is not a whole number"), "{}", logs(d));
}

#[tokio::test]
async fn a_hung_nvml_call_is_unknown_while_labelling_goes_on_then_true_again() {
    let test = "a_hung_nvml_call_is_unknown_while_labelling_goes_on_then_true_again";
    let Some(server) = apiserver::server(test) else { return };
    let _serial = SERIAL.lock().await;
    let (admin, dir, daemon) = daemon_on(server, "h100x2", &["--health-nvml-timeout=2s"]).await;
    let d = dir.path();
    until(&admin, "the first condition", |c| c.0 == "True").await;
    until_gpu_count(&admin, "2", d).await;

    // A labels-only call hangs: health, which never calls it, sees the labelling pass stuck.
    event_line(d, "0 hang nvmlDeviceGetMemoryInfo_v2 3600");
    let (c, _) = until(&admin, "Unknown", |c| c.0 == "Unknown").await;
    assert_eq!(c.1, "NvmlUnresponsive", "{}", logs(d));
    assert!(
        c.2.starts_with("NVML does not answer: nvmlDeviceGetMemoryInfo_v2 on GPU 0, in the labelling pass, has not returned since "),
        "{}",
        c.2
    );
    assert!(c.2.contains("(longer than --health-nvml-timeout 2s)"), "{}", c.2);
    assert!(c.2.ends_with("if it does not answer either, drain the node and reboot it"), "{}", c.2);
    let written = condition_as_stored(&admin).await;
    // Labelling goes on: a label someone removes meanwhile is put back.
    set_node_label(&admin, "nvidia.com/gpu.count", None).await;
    until_gpu_count(&admin, "2", d).await;
    // No thread per hung call: six passes later, no more threads than before (a small margin for
    // the runtime's own pool).
    let before = threads(daemon.child.id());
    tokio::time::sleep(Duration::from_secs(6)).await;
    let after = threads(daemon.child.id());
    assert!(after <= before + 2, "threads grew from {before} to {after} while the call hung");
    // Written once while it hangs: the same message, and the same heartbeat (each write sets it).
    assert_eq!(condition_as_stored(&admin).await, written, "{}", logs(d));

    event_line(d, "0 hang nvmlDeviceGetMemoryInfo_v2 0");
    let (c, _) = until(&admin, "True again", |c| c.0 == "True").await;
    assert_eq!(c, ("True".into(), "GpusHealthy".into(), "2 GPUs healthy".into()));

    // A call only health makes: named as the health reading's.
    event_line(d, "0 hang nvmlDeviceValidateInforom 3600");
    let (c, _) = until(&admin, "Unknown from health's own call", |c| c.0 == "Unknown").await;
    let named =
        "NVML does not answer: nvmlDeviceValidateInforom on GPU 0, in the health reading, has not returned";
    assert!(c.2.starts_with(named), "{}", c.2);
    event_line(d, "0 hang nvmlDeviceValidateInforom 0");
    until(&admin, "True once more", |c| c.0 == "True").await;
    let log = logs(d);
    assert!(log.contains("an NVML call hangs") && log.contains("the hung NVML call returned"), "{log}");
}

#[tokio::test]
async fn a_slowdown_or_pcie_replays_are_one_warning_event_per_episode_and_no_fault() {
    let test = "a_slowdown_or_pcie_replays_are_one_warning_event_per_episode_and_no_fault";
    let Some(server) = apiserver::server(test) else { return };
    let _serial = SERIAL.lock().await;
    let (admin, dir, _daemon) = daemon_on(server, "h100x2-signals", &[]).await;
    let d = dir.path();
    until(&admin, "the first condition", |c| c.0 == "True").await;

    event_line(d, "0 set clock_event_reasons gpu_idle,hw_thermal_slowdown");
    let found = until_warnings(&admin, "GpuThermalSlowdown", 1, d).await;
    assert!(
        found[0].starts_with(
            "GPU 0 (GPU-a1b2c3d4-0000-4000-8000-000000000000): GpuThermalSlowdown, hardware thermal slowdown (clock event reasons 0x41): "
        ),
        "{found:?}"
    );
    // Four passes into the same episode: still one Event, and no fault.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(warnings(&admin, "GpuThermalSlowdown").await.len(), 1, "{}", logs(d));
    until(&admin, "still healthy", |c| c.0 == "True").await;
    // The episode ends; the next, within ten minutes, is counted on the same Event's series.
    event_line(d, "0 set clock_event_reasons -");
    tokio::time::sleep(Duration::from_secs(3)).await;
    event_line(d, "0 set clock_event_reasons hw_thermal_slowdown");
    let start = Instant::now();
    loop {
        let thermal: Vec<_> = node_warnings(&admin)
            .await
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("GpuThermalSlowdown"))
            .collect();
        assert_eq!(thermal.len(), 1, "{thermal:?}");
        if thermal[0].series.as_ref().map(|s| s.count) == Some(2) {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "no series count 2: {thermal:?}\n{}", logs(d));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(logs(d).matches("GpuThermalSlowdown").count() >= 2, "each episode is logged");

    // PCIe replays: 12 -> 500 within a minute on GPU 1 is one episode, however long it grows.
    event_line(d, "1 set pcie.replay_counter 500");
    let found = until_warnings(&admin, "GpuPcieReplays", 1, d).await;
    assert!(found[0].starts_with("GPU 1 (GPU-a1b2c3d4-0001-4000-8000-000000000001): GpuPcieReplays, PCIe replays grew by 488 in a minute"), "{found:?}");
    event_line(d, "1 set pcie.replay_counter 900");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(warnings(&admin, "GpuPcieReplays").await.len(), 1, "{}", logs(d));
    until(&admin, "still healthy", |c| c.0 == "True").await;
}

/// The condition turns `Unknown` when `--health-nvml-timeout` passes, not at the next health
/// reading (here a minute away), and back when the call returns, each said once in the log.
#[tokio::test]
async fn a_hang_is_unknown_when_its_timeout_passes_not_at_the_next_reading() {
    let test = "a_hang_is_unknown_when_its_timeout_passes_not_at_the_next_reading";
    let Some(server) = apiserver::server(test) else { return };
    let _serial = SERIAL.lock().await;
    let args = ["--health-nvml-timeout=2s", "--sleep-interval=60s"];
    let (admin, dir, daemon) = daemon_on(server, "h100x2", &args).await;
    let d = dir.path();
    until(&admin, "the first condition", |c| c.0 == "True").await;
    until_gpu_count(&admin, "2", d).await;
    // A labels-only call hangs in the pass a reload starts, seconds after health's last reading.
    event_line(d, "0 hang nvmlDeviceGetMemoryInfo_v2 3600");
    common::signal(&daemon.child, "-HUP");
    let hung = Instant::now();
    until(&admin, "Unknown", |c| c.0 == "Unknown").await;
    assert!(hung.elapsed() < Duration::from_secs(15), "Unknown after {:?}\n{}", hung.elapsed(), logs(d));
    event_line(d, "0 hang nvmlDeviceGetMemoryInfo_v2 0");
    let returned = Instant::now();
    until(&admin, "True again", |c| c.0 == "True").await;
    assert!(returned.elapsed() < Duration::from_secs(15), "True after {:?}\n{}", returned.elapsed(), logs(d));
    let log = logs(d);
    assert_eq!(log.matches("an NVML call hangs").count(), 1, "{log}");
    assert_eq!(log.matches("the hung NVML call returned").count(), 1, "{log}");
}
