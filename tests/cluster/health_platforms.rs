//! `--health` on integrated GPUs, with a running daemon on a real kube-apiserver and the fake NVML
//! and CUDA drivers: a Jetson whose NVML answers (JetPack 6) is labelled through CUDA, its health
//! condition published from what NVML answers there, and the signals it cannot read named in one
//! line, once; a Jetson without NVML (JetPack 5) is labelled, says in one line that health is off,
//! and gets no condition (one stuck at Unknown would read as unhealthy). Needs
//! `NVLABEL_KUBE_TEST_SERVER`; without it each test skips with one line.

use crate::common;

use common::apiserver;
use common::health_cluster::get_condition;
use common::health_daemon::*;
use std::time::{Duration, Instant};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A health daemon on platform `machine`'s files (fixture, sysfs, host root), NVML absent where
/// `nvml` is false; passes a tenth of a second apart.
async fn platform_daemon(
    server: &apiserver::Server,
    machine: &str,
    nvml: bool,
) -> (kube::Client, tempfile::TempDir, Daemon) {
    let admin = server.admin().await;
    let (_, kubeconfig) = common::health_cluster::setup(server, &admin).await;
    let dir = tempfile::tempdir().unwrap();
    node_files(dir.path());
    let root = common::repo().join("testdata/platforms").join(machine);
    let cuda = common::fake_nvml().with_file_name("libcuda.so");
    let library = if nvml { common::fake_nvml() } else { "/nonexistent/libnvidia-ml.so.1".into() };
    let args = [
        format!("--sysfs-root={}", root.join("sys").display()),
        format!("--host-root={}", root.join("host").display()),
        format!("--cuda-library={}", cuda.display()),
        format!("--nvml-library={}", library.display()),
        "--sleep-interval=100ms".into(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let daemon = start_with(dir.path(), &kubeconfig, &root.join("machine.yaml"), &args);
    (admin, dir, daemon)
}

#[tokio::test]
async fn an_orin_with_nvml_has_health_from_what_nvml_answers_and_says_once_what_it_cannot_read() {
    let test = "an_orin_with_nvml_has_health_from_what_nvml_answers_and_says_once_what_it_cannot_read";
    let Some(server) = apiserver::server(test) else { return };
    let _serial = SERIAL.lock().await;
    let (admin, dir, _daemon) = platform_daemon(server, "jetson-orin-nano-jp6", true).await;
    until_gpu_product(&admin, "Orin", dir.path()).await;
    let (c, _) = until(&admin, "the condition", |c| c.0 == "True").await;
    assert_eq!((c.1.as_str(), c.2.as_str()), ("GpusHealthy", "1 GPUs healthy"), "{}", logs(dir.path()));
    // Reading after reading, the line is said once.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let logs = logs(dir.path());
    let said: Vec<&str> = logs.lines().filter(|l| l.contains("GPU health cannot read")).collect();
    assert_eq!(said.len(), 1, "{logs}");
    assert!(said[0].contains("ECC error counts"), "{}", said[0]);
}

#[tokio::test]
async fn an_orin_without_nvml_is_labelled_and_publishes_no_health_condition() {
    let test = "an_orin_without_nvml_is_labelled_and_publishes_no_health_condition";
    let Some(server) = apiserver::server(test) else { return };
    let _serial = SERIAL.lock().await;
    let (admin, dir, _daemon) = platform_daemon(server, "jetson-agx-orin-jp5", false).await;
    until_gpu_product(&admin, "Orin", dir.path()).await;
    // Passes go on; the condition never comes, and the line was said once.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(get_condition(&admin, "gpu-a", "GPUHealthy").await, None, "{}", logs(dir.path()));
    let logs = logs(dir.path());
    assert_eq!(
        logs.lines()
            .filter(|l| l.contains("GPU health is off: this integrated-GPU node has no NVML"))
            .count(),
        1,
        "{logs}"
    );
}

/// Waits (bounded, 30 s) until gpu-a's `nvidia.com/gpu.product` is `product`.
async fn until_gpu_product(admin: &kube::Client, product: &str, dir: &std::path::Path) {
    let start = Instant::now();
    while node_labels(admin).await.get("nvidia.com/gpu.product").map(String::as_str) != Some(product) {
        assert!(start.elapsed() < Duration::from_secs(30), "{:?}\n{}", node_labels(admin).await, logs(dir));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
