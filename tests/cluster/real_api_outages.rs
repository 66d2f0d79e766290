//! nvlabel as an operator runs it (the binary, its default log level), against a private real
//! kube-apiserver that this file breaks as API servers break: stopped for half a minute and
//! restarted, restarted again within the minute, its RBAC binding revoked and restored, the
//! NodeFeature CRD installed late, its store wiped. After each fault the labels are right within
//! 10 s of its end. Writes are counted from the API server's audit log, not from nvlabel.
//! Needs `NVLABEL_KUBE_TEST_SERVER` (CI sets it); without it each test skips with one line.

use crate::common;

use common::apiserver::{self, node};
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

/// nvlabel's NodeFeature object for `node` in namespace `nfd`, if it carries the T4's count.
async fn node_feature_counts(admin: &Client, node: &str) -> bool {
    let path =
        format!("/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/nfd/nodefeatures/nvidia-features-for-{node}");
    let Ok(text) = admin.request_text(http::Request::get(path).body(Vec::new()).unwrap()).await else {
        return false;
    };
    serde_json::from_str::<Value>(&text).is_ok_and(|o| o["spec"]["labels"]["nvidia.com/gpu.count"] == "1")
}

/// The namespace and NFD's CRD, as a cluster (re)built from nothing gets them; returns when the
/// kind is served.
async fn install_nfd(admin: &Client) -> Instant {
    apiserver::namespace(admin, "nfd", json!({})).await;
    let crd = common::manifests::yaml_docs(&common::repo().join("testdata/crds/nodefeature.yaml")).remove(0);
    apiserver::apply(admin, &crd).await;
    apiserver::wait_for_kind(admin, "nfd.k8s-sigs.io", "v1alpha1", "NodeFeature").await;
    Instant::now()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_nodefeature_object_is_back_within_10s_of_a_late_crd_and_of_a_wiped_store() {
    let _serial = SERIAL.lock().await;
    let Some(server) = Private::start("the_nodefeature_object_is_back_within_10s").await else { return };
    // Through the proxy: a wiped store comes back on another port.
    let kubeconfig = server.kubeconfig_via_proxy("admin", None);
    let nv = Process::start(&[
        "--node-name=nf-node",
        "--namespace=nfd",
        "--sleep-interval=1h",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ]);
    // No CRD yet: named, with what to do, instead of a bare 404; then a fault that lasts.
    let named = nv.until_line("nodefeatures.nfd.k8s-sigs.io").await;
    assert!(named.to_string().contains("install NFD or its CRDs"), "{named}");
    tokio::time::sleep(Duration::from_secs(20)).await;
    let attempts = server.nvlabel_writes().len();
    assert!(attempts <= 10, "{attempts} writes tried in 20 s without the CRD: {:?}", server.nvlabel_writes());
    let served = install_nfd(&server.admin().await).await;
    let admin = server.admin().await;
    let took = within("object after the CRD", served, Duration::from_secs(180), || {
        let admin = admin.clone();
        async move { node_feature_counts(&admin, "nf-node").await }
    })
    .await;
    eprintln!("CRD installed late: the object {took:?} after the kind was served");
    assert!(took <= BACK_WITHIN, "the object {took:?} after the CRD was served\n{}", nv.log());

    // The API server comes back from nothing (a restore without a backup).
    server.wipe().await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let admin = server.admin().await;
    let rebuilt = install_nfd(&admin).await;
    let took = within("object after a wiped store", rebuilt, Duration::from_secs(180), || {
        let admin = admin.clone();
        async move { node_feature_counts(&admin, "nf-node").await }
    })
    .await;
    eprintln!("store wiped: the object {took:?} after the kind was served again");
    assert!(took <= BACK_WITHIN, "the object {took:?} after the store was rebuilt\n{}", nv.log());
    assert_eq!(nv.terminate().code(), Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restored_rbac_binding_is_used_within_10s_and_readiness_follows() {
    let _serial = SERIAL.lock().await;
    let Some(server) = Private::start("a_restored_rbac_binding_is_used_within_10s").await else { return };
    let admin = server.admin().await;
    node(&admin, "rbac-node", json!({})).await;
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "nvlabel-outage"},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]}]});
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "nvlabel-outage"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "nvlabel-outage"},
        "subjects": [{"kind": "ServiceAccount", "name": "nvlabel", "namespace": "default"}]});
    apiserver::apply(&admin, &role).await;
    apiserver::apply(&admin, &binding).await;
    apiserver::apply(&admin, &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "nvlabel", "namespace": "default"}})).await;
    let token = common::outage::token(&admin, "default", "nvlabel").await;
    let kubeconfig = server.kubeconfig_via_proxy("nvlabel", Some(&token));
    let nv = Process::start(&[
        "--sink=node",
        "--node-name=rbac-node",
        "--sleep-interval=2s",
        "--metrics-addr=127.0.0.1:0",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ]);
    count_back(&server, "rbac-node", Instant::now()).await;
    let serving = nv.until_line("serving /healthz").await;
    let endpoint = serving["addr"].as_str().unwrap().to_string();

    // The binding goes; someone removes a label meanwhile.
    let revoked = Instant::now();
    let bindings = Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(admin.clone());
    bindings.delete("nvlabel-outage", &Default::default()).await.unwrap();
    remove_count(&admin, "rbac-node").await;
    let refused = nv.until_line("403").await;
    assert!(refused.to_string().contains(&server.proxy.addr.to_string()), "names the server: {refused}");
    assert!(refused.to_string().contains("RBAC"), "names the fix: {refused}");
    tokio::time::sleep(Duration::from_secs(20)).await;
    let lines = nv.lines_since(revoked);
    let errors = lines.iter().filter(|l| l["level"] == "WARN" || l["level"] == "ERROR").count();
    assert!(errors <= 6, "{errors} lines in 20 s of 403s:\n{}", nv.log());

    apiserver::apply(&admin, &binding).await;
    let restored = Instant::now();
    let took = count_back(&server, "rbac-node", restored).await;
    eprintln!("RBAC restored: labels back {took:?} after the binding");
    assert!(took <= BACK_WITHIN, "labels back {took:?} after the binding\n{}", nv.log());
    let ready = within("ready again", restored, Duration::from_secs(180), || {
        let url = format!("http://{endpoint}/readyz");
        async move { common::outage::http_status(&url).await == Some(200) }
    })
    .await;
    assert!(ready <= BACK_WITHIN, "/readyz 200 only {ready:?} after the binding\n{}", nv.log());
    assert_eq!(nv.terminate().code(), Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fight_is_throttled_as_the_log_says_counted_by_the_server() {
    let _serial = SERIAL.lock().await;
    let Some(server) = Private::start("a_fight_is_throttled_as_the_log_says").await else { return };
    let admin = server.admin().await;
    node(&admin, "fought", json!({})).await;
    let kubeconfig = server.kubeconfig();
    let nv = Process::start(&[
        "--sink=node",
        "--node-name=fought",
        "--sleep-interval=2s",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ]);
    count_back(&server, "fought", Instant::now()).await;
    let patches = || {
        server
            .nvlabel_writes()
            .iter()
            .filter(|(verb, resource, _)| verb == "patch" && resource == "nodes")
            .count()
    };
    let before = patches();
    // Another writer sets its own value every second, for 25 s.
    let rival = PatchParams::apply("rival-controller").force();
    let theirs = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "fought", "labels": {"nvidia.com/gpu.count": "99"}}});
    for _ in 0..25 {
        Api::<Node>::all(admin.clone()).patch("fought", &rival, &Patch::Apply(&theirs)).await.unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let during = patches() - before;
    eprintln!("{during} writes by nvlabel in a 25 s fight");
    // Five repairs show it is a fight; then one a minute, as the line says.
    assert!(during <= 6, "{during} writes in 25 s of a fight\n{}", nv.log());
    let line = nv.until_line("keeps changing nvlabel's labels back").await;
    assert_eq!(line["other_writer"], "rival-controller", "names the other writer: {line}");
    // The fight stops: the labels are right again within the minute the line promised.
    let stopped = Instant::now();
    let took = count_back(&server, "fought", stopped).await;
    assert!(took <= Duration::from_secs(60) + BACK_WITHIN, "repaired {took:?} after the fight stopped");
    assert_eq!(nv.terminate().code(), Some(0));
}
