//! The daemon against a real kube-apiserver, under the faults issue 17 found: a store reset
//! behind a stable address, a restart with unchanged hardware, drift with an hour between passes,
//! and the UID precondition. Needs `NVLABEL_KUBE_TEST_SERVER` (CI sets it); without it each test
//! skips with one line. One shared server for the binary (tests take turns), plus, for the store
//! reset, a private one this test stops and starts again.

use crate::common;

use common::apiserver::{self, node, Requests, Server};
use common::proxy::Proxy;
use common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn begin(test: &str) -> Option<(&'static Server, tokio::sync::MutexGuard<'static, ()>)> {
    let server = apiserver::server(test)?;
    Some((server, SERIAL.lock().await))
}

/// A running in-process daemon.
struct Running {
    seen: Requests,
    control: tokio::sync::mpsc::Sender<nvlabel::daemon::Control>,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Running {
    async fn stop(self) {
        self.control.send(nvlabel::daemon::Control::Shutdown).await.unwrap();
        tokio::time::timeout(Duration::from_secs(10), self.task).await.expect("stops").unwrap();
    }

    /// The PATCH requests sent so far.
    fn patches(&self) -> usize {
        self.seen.lock().unwrap().iter().filter(|(m, _)| m == "PATCH").count()
    }
}

/// A Node-mode daemon for `node_name` labelling from a T4 snapshot with one Node watch, as
/// main.rs wires it. With `record`, its client records every request (kube's client builder with
/// a recording layer); without, it is nvlabel's own client (`nvlabel::kubeapi::client`).
async fn daemon(kubeconfig: &Path, node_name: &str, args: &[&str], record: bool) -> Running {
    let node_flag = format!("--node-name={node_name}");
    let mut all = vec!["--sink=node", node_flag.as_str()];
    all.extend_from_slice(args);
    let (state, dir) = common::real_cluster::t4_config(&all);
    let (client, seen) = if record {
        apiserver::counting_client(kubeconfig).await
    } else {
        let client = nvlabel::kubeapi::client(kubeconfig.to_str(), 0.0, 0).await.unwrap();
        (client, Requests::default())
    };
    let daemon = common::daemon_of(state, Some(client), Default::default(), None);
    let (control, rx) = tokio::sync::mpsc::channel(4);
    let task = tokio::spawn(async move { daemon.serve(rx).await.unwrap() });
    Running { seen, control, task, _dir: dir }
}

/// Polls (bounded by `limit`) until `node`'s `nvidia.com/gpu.count` is `want`.
async fn until_count(admin: &Client, node: &str, want: Option<&str>, limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let n = Api::<Node>::all(admin.clone()).get_opt(node).await.ok().flatten();
        let count = n.and_then(|n| n.metadata.labels?.get("nvidia.com/gpu.count").cloned());
        if count.as_deref() == want {
            return start.elapsed();
        }
        assert!(start.elapsed() < limit, "{node}: gpu.count never became {want:?} (is {count:?})");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_restart_with_unchanged_hardware_writes_nothing() {
    let Some((server, _serial)) = begin("a_restart_with_unchanged_hardware_writes_nothing").await else {
        return;
    };
    let admin = server.admin().await;
    node(&admin, "restart-node", json!({"kubernetes.io/hostname": "restart-node"})).await;
    for (args, writes) in [(&["--no-timestamp"][..], 0), (&[][..], 1)] {
        let first = daemon(&server.kubeconfig(), "restart-node", args, true).await;
        until_count(&admin, "restart-node", Some("1"), Duration::from_secs(30)).await;
        // Let the watch deliver our own write, then stop.
        tokio::time::sleep(Duration::from_millis(500)).await;
        first.stop().await;
        // Different seconds, so a timestamp label would differ.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let second = daemon(&server.kubeconfig(), "restart-node", args, true).await;
        // The first pass, and long enough for a (wrong) repair of our own write to show.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert_eq!(
            second.patches(),
            writes,
            "{args:?}: a restart writes only a new timestamp, and never repairs its own write: {:?}",
            second.seen.lock().unwrap()
        );
        second.stop().await;
    }
}

#[tokio::test]
async fn drift_is_repaired_from_the_watch_with_an_hour_between_passes() {
    let Some((server, _serial)) = begin("drift_is_repaired_from_the_watch_with_an_hour_between_passes").await
    else {
        return;
    };
    let admin = server.admin().await;
    node(&admin, "drift-node", json!({})).await;
    let running =
        daemon(&server.kubeconfig(), "drift-node", &["--no-timestamp", "--sleep-interval=1h"], true).await;
    until_count(&admin, "drift-node", Some("1"), Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let drop = json!({"metadata": {"labels": {"nvidia.com/gpu.count": null}}});
    let nodes = Api::<Node>::all(admin.clone());
    for cycle in 0..3 {
        nodes.patch("drift-node", &PatchParams::default(), &Patch::Merge(&drop)).await.unwrap();
        // No pass comes for an hour: only the watch event can bring the label back.
        let took = until_count(&admin, "drift-node", Some("1"), Duration::from_secs(30)).await;
        assert!(took < Duration::from_secs(10), "cycle {cycle}: repaired in {took:?}");
        // Past the guard's one-second gap between repairs.
        tokio::time::sleep(Duration::from_millis(1200)).await;
    }
    running.stop().await;
}

#[tokio::test]
async fn the_apply_of_a_node_that_was_re_created_is_refused_by_its_uid() {
    let Some((server, _serial)) =
        begin("the_apply_of_a_node_that_was_re_created_is_refused_by_its_uid").await
    else {
        return;
    };
    let admin = server.admin().await;
    let old = node(&admin, "uid-node", json!({})).await;
    // Deleted and re-created under the same name (a reinstalled machine): a new UID.
    let new = node(&admin, "uid-node", json!({"team": "x"})).await;
    assert_ne!(old.metadata.uid, new.metadata.uid);
    let labels = labels(&[("nvidia.com/gpu.count", "8")]);
    let body = nvlabel::publish::node::apply_body("uid-node", old.metadata.uid.clone(), &labels);
    let params = PatchParams::apply(nvlabel::publish::node::FIELD_MANAGER).force();
    let nodes = Api::<Node>::all(admin.clone());
    let refused = apiserver::refused(nodes.patch("uid-node", &params, &Patch::Apply(&body)).await);
    // Kubernetes refuses a changed UID as an invalid (immutable) field.
    assert_eq!(refused.code, 422, "{refused:?}");
    assert!(refused.message.contains("metadata.uid"), "{}", refused.message);
    let now = nodes.get("uid-node").await.unwrap();
    assert_eq!(now.metadata.labels.unwrap().get("nvidia.com/gpu.count"), None, "the new Node is untouched");
    // With the right UID the same apply goes through.
    let body = nvlabel::publish::node::apply_body("uid-node", new.metadata.uid.clone(), &labels);
    nodes.patch("uid-node", &params, &Patch::Apply(&body)).await.unwrap();
    // A Node that does not exist is never created by an apply carrying a UID.
    let body = nvlabel::publish::node::apply_body("no-such-node", new.metadata.uid, &labels);
    assert!(nodes.patch("no-such-node", &params, &Patch::Apply(&body)).await.is_err());
    assert!(nodes.get_opt("no-such-node").await.unwrap().is_none());
}

/// `host:port` of a kube-test-server directory.
fn server_addr(dir: &Path) -> String {
    let url = std::fs::read_to_string(dir.join("server")).unwrap();
    url.trim().trim_start_matches("https://").to_string()
}

/// Runs the kube-test-server script (`start` or `stop`) on `dir`.
fn kts(command: &str, dir: &Path) {
    let script = std::env::var_os(apiserver::VAR).unwrap();
    let status = std::process::Command::new(script).arg(command).arg(dir).status().unwrap();
    assert!(status.success(), "kube-test-server {command} {}", dir.display());
}

#[tokio::test]
async fn after_a_store_reset_the_watch_relists_and_the_re_created_node_is_labelled() {
    // Its own server: this test stops it and starts it again with an empty store.
    if apiserver::server("after_a_store_reset_the_watch_relists_and_the_re_created_node_is_labelled")
        .is_none()
    {
        return;
    }
    let dir = tempfile::Builder::new().prefix("nvlabel-reset-").tempdir().unwrap();
    // Stops the private server however the test ends (a failed assertion included).
    struct Stop<'a>(&'a Path);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            kts("stop", self.0);
        }
    }
    kts("start", dir.path());
    let _stop = Stop(dir.path());
    let proxy = Proxy::start(&server_addr(dir.path())).await;
    // nvlabel reaches the server only through the proxy; the PKI survives the restart.
    let admin_config = std::fs::read_to_string(dir.path().join("kubeconfig")).unwrap();
    let through_proxy = admin_config
        .replace(&format!("https://{}", server_addr(dir.path())), &format!("https://{}", proxy.addr));
    let kubeconfig = dir.path().join("kubeconfig-proxy");
    std::fs::write(&kubeconfig, through_proxy).unwrap();

    let admin = apiserver::client_from(&dir.path().join("kubeconfig")).await;
    node(&admin, "reset-node", json!({})).await;
    // Push the old store's resourceVersion well past where the new store will be.
    let maps: Api<ConfigMap> = Api::namespaced(admin.clone(), "default");
    let map: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "churn"}})).unwrap();
    maps.create(&PostParams::default(), &map).await.unwrap();
    for i in 0..400 {
        let patch = json!({"data": {"n": i.to_string()}});
        maps.patch("churn", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    }
    let running = daemon(&kubeconfig, "reset-node", &["--no-timestamp", "--sleep-interval=1h"], false).await;
    until_count(&admin, "reset-node", Some("1"), Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    // The API server comes back with a new, empty store behind the same address.
    kts("stop", dir.path());
    kts("start", dir.path());
    proxy.switch(&server_addr(dir.path()));
    let admin = apiserver::client_from(&dir.path().join("kubeconfig")).await;
    node(&admin, "reset-node", json!({})).await;
    // No pass for an hour: only a relist can show the daemon the re-created Node.
    let took = until_count(&admin, "reset-node", Some("1"), Duration::from_secs(90)).await;
    eprintln!("the re-created Node was labelled {took:?} after it was created");
    running.stop().await;
}
