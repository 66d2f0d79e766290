//! A DRA node (`--allocation-mode dra`, `--health`) on a kube-apiserver that does not serve
//! DeviceTaintRule (1.36 as it comes, unlike `dra_real_api.rs`'s): the faults still reach the Node
//! condition, the missing API is said in one warning, and discovery is not asked again every
//! pass. Needs `NVLABEL_KUBE_TEST_SERVER`; without it the test skips with one line.

use crate::common;

use common::apiserver;
use common::dra_cluster::{delete_slice, gpu, put_slice};
use common::health_cluster::{get_condition, setup};
use common::health_daemon::node_files;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

const UUID0: &str = "GPU-a1b2c3d4-0000-4000-8000-000000000000";

/// Polls (bounded, 30 s) until gpu-a's condition satisfies `want`.
async fn until(admin: &kube::Client, what: &str, want: impl Fn(&(String, String, String)) -> bool, d: &Path) {
    let start = Instant::now();
    while !get_condition(admin, "gpu-a", "GPUHealthy").await.is_some_and(|c| want(&c)) {
        assert!(start.elapsed() < Duration::from_secs(30), "{what} never happened: {}", log(d));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn log(d: &Path) -> String {
    std::fs::read_to_string(d.join("log")).unwrap_or_default()
}

fn event_line(d: &Path, line: &str) {
    let mut f = std::fs::OpenOptions::new().append(true).open(d.join("events")).unwrap();
    writeln!(f, "{line}").unwrap();
}

#[tokio::test]
async fn without_device_taint_rules_served_the_condition_still_works() {
    let Some(server) = apiserver::server("without_device_taint_rules_served_the_condition_still_works")
    else {
        return;
    };
    let admin = server.admin().await;
    setup(server, &admin).await;
    put_slice(&admin, "gpu-a", "gpu-a-gpu.nvidia.com", vec![gpu("gpu-9", UUID0, 9)]).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    node_files(d);
    // The administrator's kubeconfig: the slices can be read, only the taint API is missing.
    let _daemon = common::dra_cluster::dra_daemon(d, "gpu-a", &server.kubeconfig(), &[]);
    until(&admin, "the first condition", |c| c.0 == "True", d).await;
    event_line(d, "0 xid 79");
    until(&admin, "xid 79", |c| c.0 == "False", d).await;
    event_line(d, "1 xid 79");
    until(&admin, "the second fault", |c| c.2.contains("GPU 1"), d).await;
    // More passes, each of which would ask again if nothing remembered the answer.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(log(d).matches("does not serve DeviceTaintRule").count(), 1, "{}", log(d));
    delete_slice(&admin, "gpu-a-gpu.nvidia.com").await;
}
