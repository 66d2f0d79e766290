//! nvlabel as an operator runs it (the binary, its default log level), against a private real
//! kube-apiserver that this file breaks as API servers break: stopped for half a minute and
//! restarted, restarted again within the minute, its RBAC binding revoked and restored, the
//! NodeFeature CRD installed late, its store wiped. After each fault the labels are right within
//! 10 s of its end. Writes are counted from the API server's audit log, not from nvlabel.
//! Needs `NVLABEL_KUBE_TEST_SERVER` (CI sets it); without it each test skips with one line.

mod common;

use common::apiserver::node;
use common::outage::{within, Private, Process};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::Client;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The goal for every fault: labels right within this long of its end.
const BACK_WITHIN: Duration = Duration::from_secs(10);

/// One private server at a time: each takes a core or two while it starts.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A Node's `nvidia.com/gpu.count`, or `None` (also while the server cannot answer).
async fn gpu_count(admin: &Client, name: &str) -> Option<String> {
    let node = Api::<Node>::all(admin.clone()).get_opt(name).await.ok().flatten()?;
    node.metadata.labels?.get("nvidia.com/gpu.count").cloned()
}

/// Removes `nvidia.com/gpu.count` from a Node, as someone's `kubectl label` would.
async fn remove_count(admin: &Client, name: &str) {
    let patch = json!({"metadata": {"labels": {"nvidia.com/gpu.count": null}}});
    Api::<Node>::all(admin.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Waits (generously, so a slow repair is measured rather than cut off) until `name` carries
/// nvlabel's count again; returns how long after `since` that was.
async fn count_back(server: &Private, name: &str, since: Instant) -> Duration {
    let admin = server.admin().await;
    within("gpu.count back", since, Duration::from_secs(180), || {
        let admin = admin.clone();
        async move { gpu_count(&admin, name).await.as_deref() == Some("1") }
    })
    .await
}

/// The lines of an outage: few, none from the client libraries' own logging, and each warning
/// or error about the API names the server.
fn check_outage_lines(lines: &[Value], server: &str, log: &str) {
    let of_library = |v: &Value| {
        v["target"]
            .as_str()
            .is_some_and(|t| ["kube", "hyper", "rustls", "tower", "h2"].iter().any(|l| t.starts_with(l)))
    };
    assert!(!lines.iter().any(of_library), "a library's own line at the default level:\n{log}");
    let api_lines: Vec<&Value> = lines
        .iter()
        .filter(|v| v["level"] == "WARN" || v["level"] == "ERROR")
        .filter(|v| v["error"].is_string())
        .collect();
    assert!(api_lines.len() <= 6, "{} warnings and errors in one outage:\n{log}", api_lines.len());
    for line in api_lines {
        assert!(line.to_string().contains(server), "the server is not named: {line}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn labels_are_back_within_10s_of_each_restart_the_second_within_a_minute_too() {
    let _serial = SERIAL.lock().await;
    let Some(server) = Private::start("labels_are_back_within_10s_of_each_restart").await else { return };
    let admin = server.admin().await;
    node(&admin, "restarted", json!({})).await;
    let kubeconfig = server.kubeconfig();
    // An hour between passes: only the watch can see the label go, so only its recovery counts.
    let nv = Process::start(&[
        "--sink=node",
        "--node-name=restarted",
        "--sleep-interval=1h",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ]);
    count_back(&server, "restarted", Instant::now()).await;
    let first_cut = Instant::now();
    for (round, down) in [(1, Duration::from_secs(30)), (2, Duration::from_secs(2))] {
        let back = server.restart(down).await;
        // Someone removes a label at once: nvlabel cannot have seen it through a watch yet.
        remove_count(&server.admin().await, "restarted").await;
        let took = count_back(&server, "restarted", back).await;
        eprintln!("restart {round} ({down:?} down): labels back {took:?} after the server");
        assert!(took <= BACK_WITHIN, "restart {round}: labels back {took:?} after the server\n{}", nv.log());
    }
    let lines = nv.lines_since(first_cut);
    eprintln!(
        "{} lines logged over both outages:\n{}",
        lines.len(),
        lines.iter().map(|l| format!("{l}\n")).collect::<String>()
    );
    check_outage_lines(&lines, &server.addr(), &nv.log());
    assert_eq!(nv.terminate().code(), Some(0));
}
