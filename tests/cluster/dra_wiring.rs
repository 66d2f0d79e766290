//! The DRA daemon's wiring, end to end on a real kube-apiserver (DeviceTaintRule served): the
//! `--health-taint-effect` value reaches the rules it writes, a slice change taints a new device
//! at once (passes an hour apart, so no pass can), and a restart with another effect rewrites
//! the rules. Needs `NVLABEL_KUBE_TEST_SERVER`; without it the test skips with one line.

use crate::common;

use common::dra_cluster::{begin, gpu, mig, put_slice, rules, setup, taint_rules};
use common::health_cluster::get_condition;
use common::health_daemon::{event_line, node_files, Daemon};
use kube::api::DeleteParams;
use kube::Client;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

const UUID0: &str = "GPU-a1b2c3d4-0000-4000-8000-000000000000";

/// nvlabel on node dra-w (DRA mode, health) with `extra` flags, its log appended to `d`/log.
fn start(d: &Path, kubeconfig: &Path, extra: &[&str]) -> Daemon {
    common::dra_cluster::dra_daemon(d, "dra-w", kubeconfig, extra)
}

/// Polls (bounded, `within`) until dra-w's rules (name → effect) are `want`.
async fn until_effects(admin: &Client, d: &Path, within: Duration, want: &[(&str, &str)]) -> Duration {
    let want: BTreeMap<String, String> = want.iter().map(|(n, e)| (n.to_string(), e.to_string())).collect();
    let effects = |all: &common::dra_cluster::Rules| -> BTreeMap<String, String> {
        let dra_w = all.iter().filter(|(n, _)| n.ends_with(".dra-w"));
        dra_w
            .map(|(n, (_, spec))| (n.clone(), spec["taint"]["effect"].as_str().unwrap_or_default().into()))
            .collect()
    };
    let what = format!("the effects {want:?}");
    common::dra_cluster::until_rules(admin, &what, within, Some(d), |all| effects(all) == want).await.1
}

#[tokio::test]
async fn the_effect_flag_a_slice_change_and_a_restart_reach_the_rules() {
    let Some((server, _serial)) = begin("the_effect_flag_a_slice_change_and_a_restart_reach_the_rules").await
    else {
        return;
    };
    let admin = server.admin().await;
    let (_, kubeconfig) = setup(server, &admin, &["dra-w", "dra-w-other"]).await;
    for (name, _) in rules(&admin).await {
        taint_rules(&admin).delete(&name, &DeleteParams::default()).await.unwrap();
    }
    put_slice(&admin, "dra-w", "dra-w-gpu.nvidia.com", vec![gpu("gpu-0", UUID0, 0)]).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    node_files(d);
    // Passes an hour apart: after the first, only an event or a slice change can write a rule.
    let daemon = start(d, &kubeconfig, &["--sleep-interval=1h", "--health-taint-effect=NoExecute"]);
    let started = Instant::now();
    while get_condition(&admin, "dra-w", "GPUHealthy").await.map(|c| c.0).as_deref() != Some("True") {
        let log = std::fs::read_to_string(d.join("log")).unwrap_or_default();
        assert!(started.elapsed() < Duration::from_secs(30), "{log}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    event_line(d, "0 xid 79");
    until_effects(&admin, d, Duration::from_secs(10), &[("nvlabel-gpu-0.dra-w", "NoExecute")]).await;

    // The driver publishes a MIG device of the faulty GPU: tainted at once, by the slice change.
    let devices = vec![gpu("gpu-0", UUID0, 0), mig("gpu-0-mig-9-0-1", "MIG-w-1", UUID0, "1g.10gb")];
    put_slice(&admin, "dra-w", "dra-w-gpu.nvidia.com", devices).await;
    let both = [("nvlabel-gpu-0-mig-9-0-1.dra-w", "NoExecute"), ("nvlabel-gpu-0.dra-w", "NoExecute")];
    let took = until_effects(&admin, d, Duration::from_secs(10), &both).await;
    assert!(took < Duration::from_secs(5), "{took:?}");

    // A restart with another effect (the same boot: the fault is kept) rewrites both rules.
    drop(daemon);
    let _daemon = start(d, &kubeconfig, &["--sleep-interval=1s", "--health-taint-effect=None"]);
    let none = [("nvlabel-gpu-0-mig-9-0-1.dra-w", "None"), ("nvlabel-gpu-0.dra-w", "None")];
    until_effects(&admin, d, Duration::from_secs(15), &none).await;
    let spec: Value = rules(&admin).await["nvlabel-gpu-0.dra-w"].1.clone();
    assert_eq!(spec["taint"]["value"], "XidCriticalError", "{spec}");
}
