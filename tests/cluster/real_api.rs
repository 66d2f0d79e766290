//! The integration tier: nvlabel against a real kube-apiserver (Kubernetes 1.36, with Pod
//! Security admission, RBAC, ValidatingAdmissionPolicy, server-side apply and pod-bound tokens).
//! The mocked-API tests check what nvlabel sends; these check what Kubernetes does with it. Here:
//! every overlay admitted, Node mode (its token, the admission policy, server-side apply, the
//! config label, the daemon's watch), and golden labels; NodeFeature mode is in
//! `real_api_nodefeature.rs`.
//! Needs `NVLABEL_KUBE_TEST_SERVER` (CI sets it); without it each test skips with one line.

use crate::common;

use common::apiserver::{self, apply, namespace, node, pod_token, refused, Server};
use common::manifests::MODES;
use common::real_cluster::{
    apply_overlay, begin, cluster_basics, create_pod, node_gpu_count, node_labels, non_watch, pod_of, until,
    watching_daemon,
};
use common::*;
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::Client;
use nvlabel::publish::{NodeLabels, Writer};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

#[tokio::test]
async fn every_overlay_is_admitted_with_the_pod_it_runs() {
    let Some((server, _serial)) = begin("every_overlay_is_admitted_with_the_pod_it_runs").await else {
        return;
    };
    let admin = server.admin().await;
    cluster_basics(&admin).await;
    node(&admin, "overlay-node", json!({})).await;
    for mode in MODES {
        let docs = apply_overlay(&admin, mode, "overlay-node").await;
        let pod = pod_of(&docs, &format!("{mode}-pod"), "overlay-node", None);
        let stored =
            create_pod(&admin, &pod).await.unwrap_or_else(|e| panic!("{mode}: the pod is refused: {e}"));
        assert_eq!(stored.spec.unwrap().node_name.as_deref(), Some("overlay-node"));
        let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(admin.clone());
        let levels = ns.get("nvlabel").await.unwrap().metadata.labels.unwrap_or_default();
        let enforce = levels.get("pod-security.kubernetes.io/enforce").cloned();
        if mode == "nfd-file" {
            assert_eq!(enforce.as_deref(), Some("privileged"), "{mode}");
            // The same pod in a namespace that enforces restricted is refused: Pod Security is on,
            // and the feature file's host path really needs the privileged level.
            namespace(
                &admin,
                "restricted-check",
                json!({"pod-security.kubernetes.io/enforce": "restricted"}),
            )
            .await;
            apply(
                &admin,
                &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "nvlabel", "namespace": "restricted-check"}}),
            )
            .await;
            let mut elsewhere = pod.clone();
            elsewhere.metadata.namespace = Some("restricted-check".into());
            let status = refused(create_pod(&admin, &elsewhere).await);
            assert!(status.message.contains("hostPath"), "{}", status.message);
        } else {
            assert_eq!(enforce.as_deref(), Some("restricted"), "{mode}");
        }
        let pods: Api<Pod> = Api::namespaced(admin.clone(), "nvlabel");
        pods.delete(
            &format!("{mode}-pod"),
            &DeleteParams { grace_period_seconds: Some(0), ..Default::default() },
        )
        .await
        .unwrap();
    }
}

/// Node mode's setup: the overlay, two nodes, our pod on node A, and a client with its token.
async fn node_mode(server: &Server, admin: &Client) -> (Client, std::path::PathBuf) {
    cluster_basics(admin).await;
    let docs = apply_overlay(admin, "node", "node-a").await;
    node(admin, "node-a", json!({"team": "ml", "nvidia.com/gpu.deploy.gpu-feature-discovery": "true"})).await;
    node(admin, "node-b", json!({})).await;
    let pod = create_pod(admin, &pod_of(&docs, "nvlabel-node-a", "node-a", None)).await.unwrap();
    let token = pod_token(admin, "nvlabel", "nvlabel", &pod).await;
    let kubeconfig = server.kubeconfig_for("nvlabel-node-a", &token);
    let sa = apiserver::client_from(&kubeconfig).await;
    policy_in_force(&sa).await;
    (sa, kubeconfig)
}

/// An admission policy takes effect a moment after it is created: wait until a change it forbids
/// (a dry run, so nothing is stored) is refused.
async fn policy_in_force(sa: &Client) {
    let nodes: Api<Node> = Api::all(sa.clone());
    let body = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-b", "labels": {"nvidia.com/probe": "1"}}});
    let params = PatchParams { dry_run: true, ..PatchParams::apply("policy-probe").force() };
    for _ in 0..200 {
        if nodes.patch("node-b", &params, &Patch::Apply(&body)).await.is_err() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the node-label admission policy never took effect");
}

#[tokio::test]
async fn node_mode_labels_only_its_own_node_and_only_nvidia_labels() {
    let Some((server, _serial)) = begin("node_mode_labels_only_its_own_node_and_only_nvidia_labels").await
    else {
        return;
    };
    let admin = server.admin().await;
    let (sa, kubeconfig) = node_mode(server, &admin).await;

    // The binary, as the DaemonSet runs it, with the pod-bound token: labels node A.
    let out = nvlabel(Some("t4"))
        .args(["--oneshot", "--no-timestamp", "--sink", "node", "--node-name", "node-a", "--kubeconfig"])
        .arg(&kubeconfig)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let a = node_labels(&admin, "node-a").await;
    assert_eq!(a.get("nvidia.com/gpu.product").map(String::as_str), Some("Tesla-T4"));
    assert_eq!(a.get("team").map(String::as_str), Some("ml"), "foreign labels stay");

    // Node B is not its node: the admission policy refuses.
    let out = nvlabel(Some("t4"))
        .args(["--oneshot", "--no-timestamp", "--sink", "node", "--node-name", "node-b", "--kubeconfig"])
        .arg(&kubeconfig)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("may only change the node its pod runs on"), "{stderr}");
    assert!(!node_labels(&admin, "node-b").await.contains_key("nvidia.com/gpu.product"));

    // What the token may not do, even on its own node.
    let nodes: Api<Node> = Api::all(sa.clone());
    let ssa = |labels: Value| json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a", "labels": labels}});
    let params = PatchParams::apply("intruder").force();
    let status = refused(nodes.patch("node-a", &params, &Patch::Apply(ssa(json!({"team": "hacked"})))).await);
    assert!(status.message.contains("only change labels under nvidia.com/"), "{}", status.message);
    let status = refused(nodes.patch("node-a", &params, &Patch::Apply(ssa(json!({"evil.io/x": "1"})))).await);
    assert!(status.message.contains("only change labels under nvidia.com/"), "{}", status.message);
    let remove = json!({"metadata": {"labels": {"team": null}}});
    let status = refused(nodes.patch("node-a", &PatchParams::default(), &Patch::Merge(&remove)).await);
    assert!(status.message.contains("only change labels under nvidia.com/"), "{}", status.message);
    let annotate = json!({"metadata": {"annotations": {"nvidia.com/x": "1"}}});
    let status = refused(nodes.patch("node-a", &PatchParams::default(), &Patch::Merge(&annotate)).await);
    assert!(status.message.contains("only change node labels"), "{}", status.message);
    let taint = json!({"spec": {"taints": [{"key": "nvidia.com/x", "effect": "NoSchedule"}]}});
    let status = refused(nodes.patch("node-a", &PatchParams::default(), &Patch::Merge(&taint)).await);
    assert!(status.message.contains("only change node labels"), "{}", status.message);
    assert_eq!(refused(nodes.delete("node-a", &DeleteParams::default()).await).code, 403);
    let secrets: Api<Secret> = Api::namespaced(sa.clone(), "nvlabel");
    assert_eq!(refused(secrets.list(&Default::default()).await).code, 403);
    assert_eq!(refused(Api::<Secret>::all(sa.clone()).list(&Default::default()).await).code, 403);
    let a = node_labels(&admin, "node-a").await;
    assert_eq!(a.get("team").map(String::as_str), Some("ml"));
}

/// A token of nvlabel's service account bound to no pod, so it carries no node-name claim (what a
/// copied or legacy token looks like).
async fn unbound_token(admin: &Client) -> String {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::ServiceAccount;
    let api: Api<ServiceAccount> = Api::namespaced(admin.clone(), "nvlabel");
    let request: TokenRequest = serde_json::from_value(json!({"spec": {"expirationSeconds": 3600}})).unwrap();
    let answer = api.create_token_request("nvlabel", &PostParams::default(), &request).await.unwrap();
    serde_json::to_value(answer).unwrap()["status"]["token"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn node_mode_refuses_a_token_without_a_node_claim() {
    let Some((server, _serial)) = begin("node_mode_refuses_a_token_without_a_node_claim").await else {
        return;
    };
    let admin = server.admin().await;
    // The overlay, and the policy in force (checked with a pod-bound token).
    let _ = node_mode(server, &admin).await;
    let kubeconfig = server.kubeconfig_for("nvlabel-unbound", &unbound_token(&admin).await);
    let before = node_labels(&admin, "node-a").await;
    for node_name in ["node-a", "node-b"] {
        let out = nvlabel(Some("t4"))
            .args(["--oneshot", "--no-timestamp", "--sink", "node", "--node-name", node_name, "--kubeconfig"])
            .arg(&kubeconfig)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{node_name}: {stderr}");
        assert!(stderr.contains("may only change the node its pod runs on"), "{node_name}: {stderr}");
    }
    // The same refusal straight from the API: RBAC lets the account patch nodes, the policy not.
    let sa = apiserver::client_from(&kubeconfig).await;
    let body = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a", "labels": {"nvidia.com/gpu.count": "9"}}});
    let status = refused(
        Api::<Node>::all(sa)
            .patch("node-a", &PatchParams::apply("nvlabel").force(), &Patch::Apply(&body))
            .await,
    );
    assert!(status.message.contains("may only change the node its pod runs on"), "{}", status.message);
    assert_eq!(node_labels(&admin, "node-a").await, before, "nothing changed");
    assert!(!node_labels(&admin, "node-b").await.contains_key("nvidia.com/gpu.product"));
}

#[tokio::test]
async fn node_mode_server_side_apply_owns_exactly_its_labels() {
    let Some((server, _serial)) = begin("node_mode_server_side_apply_owns_exactly_its_labels").await else {
        return;
    };
    let admin = server.admin().await;
    let (sa, _) = node_mode(server, &admin).await;
    let mut writer = NodeLabels::new(sa.clone(), "node-a");
    let first = labels(&[
        ("nvidia.com/gpu.count", "2"),
        ("nvidia.com/gpu.product", "Tesla-T4"),
        ("nvidia.com/mig.strategy", "single"),
    ]);
    assert!(writer.publish(&first).await.unwrap());
    let node = Api::<Node>::all(admin.clone()).get("node-a").await.unwrap();
    let managers: Vec<String> =
        node.metadata.managed_fields.iter().flatten().filter_map(|m| m.manager.clone()).collect();
    assert!(managers.contains(&"nvlabel".to_string()), "field manager nvlabel: {managers:?}");
    let rv = node.metadata.resource_version.clone();

    // Nothing changed: nothing is written.
    assert!(!writer.publish(&first).await.unwrap());
    let node = Api::<Node>::all(admin.clone()).get("node-a").await.unwrap();
    assert_eq!(node.metadata.resource_version, rv, "no write when nothing changed");

    // One label gone from our set: removed from the Node; foreign ones, even nvidia.com/, stay.
    let second = labels(&[("nvidia.com/gpu.count", "2"), ("nvidia.com/gpu.product", "Tesla-T4")]);
    assert!(writer.publish(&second).await.unwrap());
    let a = node_labels(&admin, "node-a").await;
    assert!(!a.contains_key("nvidia.com/mig.strategy"), "stale label removed: {a:?}");
    assert_eq!(a.get("nvidia.com/gpu.deploy.gpu-feature-discovery").map(String::as_str), Some("true"));
    assert_eq!(a.get("team").map(String::as_str), Some("ml"));

    // Drift: an administrator deletes one of ours; the next publish puts it back.
    let drop = json!({"metadata": {"labels": {"nvidia.com/gpu.count": null}}});
    Api::<Node>::all(admin.clone())
        .patch("node-a", &PatchParams::default(), &Patch::Merge(&drop))
        .await
        .unwrap();
    assert!(writer.publish(&second).await.unwrap());
    assert_eq!(
        node_labels(&admin, "node-a").await.get("nvidia.com/gpu.count").map(String::as_str),
        Some("2")
    );

    // A missing Node is never created.
    let mut missing = NodeLabels::new(admin.clone(), "node-gone");
    let err = missing.publish(&second).await.unwrap_err();
    assert_eq!(err.reason().as_str(), "node-missing", "{err}");
    assert!(Api::<Node>::all(admin.clone()).get_opt("node-gone").await.unwrap().is_none());

    // `nvlabel prune` (an administrator's) removes exactly ours.
    let out = nvlabel(None)
        .args(["prune", "--sink", "node", "--node-name", "node-a", "--kubeconfig"])
        .arg(server.kubeconfig())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let a = node_labels(&admin, "node-a").await;
    assert!(!a.keys().any(|k| k == "nvidia.com/gpu.count" || k == "nvidia.com/gpu.product"), "{a:?}");
    assert_eq!(a.get("nvidia.com/gpu.deploy.gpu-feature-discovery").map(String::as_str), Some("true"));
    assert_eq!(a.get("team").map(String::as_str), Some("ml"));
}

#[tokio::test]
async fn the_node_label_switches_the_config_and_a_missing_key_keeps_the_last_labels() {
    let Some((server, _serial)) =
        begin("the_node_label_switches_the_config_and_a_missing_key_keeps_the_last_labels").await
    else {
        return;
    };
    let admin = server.admin().await;
    let (_, kubeconfig) = node_mode(server, &admin).await;
    let dir = tempfile::tempdir().unwrap();
    let configs = dir.path().join("configs");
    std::fs::create_dir(&configs).unwrap();
    std::fs::write(configs.join("default"), "version: v1\n").unwrap();
    std::fs::write(
        configs.join("ts4"),
        "version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/gpu, replicas: 4}]\n",
    )
    .unwrap();
    let out = dir.path().join("gfd");
    let mut child = nvlabel(Some("t4"))
        .args([
            "--no-timestamp",
            "--use-node-feature-api=false",
            "--sleep-interval",
            "1h",
            "--node-name",
            "node-a",
        ])
        .arg("--config-dir")
        .arg(&configs)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("-o")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let wait = |line: &str| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if std::fs::read_to_string(&out).is_ok_and(|t| t.lines().any(|l| l == line)) {
                return Instant::now();
            }
            assert!(Instant::now() < deadline, "{line} never published: {:?}", std::fs::read_to_string(&out));
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait("nvidia.com/gpu.replicas=1");
    let set = |value: Value| {
        let admin = admin.clone();
        async move {
            let patch = json!({"metadata": {"labels": {"nvidia.com/device-plugin.config": value}}});
            Api::<Node>::all(admin)
                .patch("node-a", &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap();
        }
    };
    let switched = Instant::now();
    set(json!("ts4")).await;
    let seen = wait("nvidia.com/gpu.replicas=4");
    assert!(seen - switched < Duration::from_secs(10), "applied within seconds");
    set(json!("no-such-key")).await;
    std::thread::sleep(Duration::from_secs(2));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("nvidia.com/gpu.replicas=4\n"), "the last good labels stay: {text}");
    let _ = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[tokio::test]
async fn every_golden_label_set_is_accepted_by_the_api_server() {
    // Kubernetes' own label validation as the oracle for every golden file.
    let Some((server, _serial)) = begin("every_golden_label_set_is_accepted_by_the_api_server").await else {
        return;
    };
    let admin = server.admin().await;
    node(&admin, "golden-node", json!({})).await;
    let nodes: Api<Node> = Api::all(admin.clone());
    let mut checked = 0;
    for entry in std::fs::read_dir(repo().join("testdata/golden")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "labels") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let set: BTreeMap<&str, &str> = text.lines().filter_map(|l| l.split_once('=')).collect();
        let body =
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "golden-node", "labels": set}});
        let params = PatchParams { dry_run: true, ..PatchParams::apply("golden-check").force() };
        nodes
            .patch("golden-node", &params, &Patch::Apply(&body))
            .await
            .unwrap_or_else(|e| panic!("{}: the API server refuses these labels: {e}", path.display()));
        checked += 1;
    }
    assert!(checked > 40, "{checked} golden files");
}

#[tokio::test]
async fn node_mode_idle_passes_send_nothing_and_drift_is_repaired_from_the_watch() {
    let Some((server, _serial)) =
        begin("node_mode_idle_passes_send_nothing_and_drift_is_repaired_from_the_watch").await
    else {
        return;
    };
    let admin = server.admin().await;
    let (_, kubeconfig) = node_mode(server, &admin).await;
    let (seen, control, task, _dir) =
        watching_daemon(&kubeconfig, &["--sink=node", "--node-name=node-a"]).await;
    until("the first publish", || node_gpu_count(&admin, "node-a"), "1").await;
    // Three passes (1 s apart) that change nothing: not one request besides the open watch.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mark = seen.lock().unwrap().len();
    tokio::time::sleep(Duration::from_millis(3200)).await;
    assert_eq!(non_watch(&seen, mark), vec![], "idle passes sent requests");
    // Someone removes one of our labels: it is back within seconds, from the watch event.
    let drop = json!({"metadata": {"labels": {"nvidia.com/gpu.count": null}}});
    Api::<Node>::all(admin.clone())
        .patch("node-a", &PatchParams::default(), &Patch::Merge(&drop))
        .await
        .unwrap();
    let took = until("the repair", || node_gpu_count(&admin, "node-a"), "1").await;
    assert!(took < Duration::from_secs(5), "repaired in {took:?}");
    let writes: Vec<_> = non_watch(&seen, mark).into_iter().filter(|(m, _)| m == "PATCH").collect();
    assert_eq!(writes.len(), 1, "one write repaired it: {writes:?}");
    control.send(nvlabel::daemon::Control::Shutdown).await.unwrap();
    task.await.unwrap();
}
