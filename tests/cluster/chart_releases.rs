//! Releases over a cluster's life, on a real kube-apiserver with the
//! `OwnerReferencesPermissionEnforcement` admission plugin on (as OpenShift has it; every chart
//! test runs under it): two releases side by side in one namespace, one uninstalled while its
//! daemons still run, leave the other whole (its namespace, objects and health), and the
//! uninstalled one's daemons never write their health back, not even after a restart; a
//! NodeFeature another DaemonSet owned is taken over with only the chart's grants.
//! Needs `NVLABEL_KUBE_TEST_SERVER` and a Helm binary; without either each test skips.

use crate::common;

use common::apiserver::{node, pod_token, Server};
use common::chart_cluster::{
    begin, helm_run, install, leftovers, nodefeatures, uninstall_running_hooks, workload_pod,
};
use common::health_cluster::{get_condition, kubelet_status};
use common::health_daemon::{health_sysfs, Daemon};
use common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, ServiceAccount};
use kube::api::{Api, Patch, PatchParams};
use kube::Client;
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

/// A release's daemon as its pod runs it: the DaemonSet's arguments and env, the pod-bound
/// token, the fake NVML (H100 ×2, its event file in `dir`) and sysfs.
async fn daemon(server: &Server, admin: &Client, pod: &Pod, dir: &Path) -> Daemon {
    let spec = pod.spec.clone().unwrap();
    let (ns, name) = (pod.metadata.namespace.clone().unwrap(), pod.metadata.name.clone().unwrap());
    let token = pod_token(admin, &ns, spec.service_account_name.as_deref().unwrap(), pod).await;
    let kubeconfig = server.kubeconfig_for(&name, &token);
    let args = spec.containers[0].args.clone().unwrap_or_default();
    // Two daemons on one machine: the port is the test's to choose; the mounted ConfigMap is not
    // here (the sharing config plays no part in health).
    let args = args.into_iter().filter(|a| !a.starts_with("--metrics-addr") && !a.starts_with("--config-"));
    let mut cmd = nvlabel(None);
    cmd.args(args)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--boot-id-file")
        .arg(dir.join("boot_id"))
        .env("NODE_NAME", spec.node_name.unwrap())
        .env("POD_NAME", &name)
        .env("POD_NAMESPACE", &ns)
        .env("NVLABEL_SYSFS_ROOT", dir.join("sys"))
        .env("FAKE_NVML_FIXTURE", repo().join("testdata/health/h100x2.yaml"))
        .env("FAKE_NVML_EVENTS", dir.join("events"))
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.join(format!("log-{}", health_daemon::rand_suffix()))).unwrap());
    Daemon { child: cmd.spawn().unwrap() }
}

/// A node's files in a fresh directory: sysfs, boot id, an empty event file.
fn node_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    health_sysfs(&dir.path().join("sys"));
    std::fs::write(dir.path().join("boot_id"), "boot-1\n").unwrap();
    std::fs::write(dir.path().join("events"), "").unwrap();
    dir
}

/// Polls (bounded, 30 s) until `what` holds.
async fn until<F: std::future::Future<Output = bool>>(what: &str, dir: &Path, check: impl Fn() -> F) {
    let start = Instant::now();
    while !check().await {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what} never happened:\n{}",
            health_daemon::logs(dir)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The health condition `GPUHealthy` of `node`: its status and reason.
async fn health(admin: &Client, node: &str) -> Option<(String, String)> {
    get_condition(admin, node, "GPUHealthy").await.map(|(s, r, _)| (s, r))
}

/// The annotations of `node`.
async fn annotations(admin: &Client, node: &str) -> std::collections::BTreeMap<String, String> {
    Api::<Node>::all(admin.clone()).get(node).await.unwrap().metadata.annotations.unwrap_or_default()
}

/// Whether any daemon log in `dir` has `line`.
fn said(dir: &Path, line: &str) -> bool {
    health_daemon::logs(dir).contains(line)
}

#[tokio::test]
async fn two_releases_side_by_side_and_one_uninstalled_leaves_the_other_whole() {
    let Some((server, helm, _serial)) =
        begin("two_releases_side_by_side_and_one_uninstalled_leaves_the_other_whole").await
    else {
        return;
    };
    let admin = server.admin().await;
    let ns = "gpu-fleet";
    let (a_node, b_node) = ("fleet-a", "fleet-b");
    for (n, ip) in [(a_node, "10.1.0.1"), (b_node, "10.1.0.2")] {
        node(&admin, n, json!({})).await;
        Api::<Node>::all(admin.clone())
            .patch_status(n, &PatchParams::default(), &Patch::Merge(kubelet_status(ip)))
            .await
            .unwrap();
    }
    // The first release creates the namespace; the second, as docs/platforms.md's recipe says,
    // installs into it with namespace.create=false.
    let first = ["--set", "mode=node", "--set", "health.enabled=true", "--set", "namespace.name=gpu-fleet"];
    install(&helm, server, "install", "fleet-one", &first);
    let second = [&first[..], &["--set", "namespace.create=false"]].concat();
    install(&helm, server, "install", "fleet-two", &second);

    // An nvlabel from before instances wrote release one's node's health under its own manager:
    // release one takes it over, so its uninstall leaves nothing of it.
    let old = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": a_node},
                     "status": {"conditions": [{"type": "GPUHealthy", "status": "True", "reason": "GpusHealthy",
                                                "message": "2 GPUs healthy"}]}});
    Api::<Node>::all(admin.clone())
        .patch_status(a_node, &PatchParams::apply("nvlabel").force(), &Patch::Apply(&old))
        .await
        .unwrap();
    let (a_dir, b_dir) = (node_dir(), node_dir());
    let a_pod = workload_pod(&admin, ns, "fleet-one", a_node).await;
    let b_pod = workload_pod(&admin, ns, "fleet-two", b_node).await;
    let mut a = daemon(server, &admin, &a_pod, a_dir.path()).await;
    let _b = daemon(server, &admin, &b_pod, b_dir.path()).await;
    until("both releases' health, release one's taken over", a_dir.path(), || async {
        let owners = Api::<Node>::all(admin.clone()).get(a_node).await.unwrap().metadata.managed_fields;
        let legacy = owners
            .into_iter()
            .flatten()
            .any(|m| m.manager.as_deref() == Some("nvlabel") && m.subresource.as_deref() == Some("status"));
        health(&admin, a_node).await.is_some() && !legacy && health(&admin, b_node).await.is_some()
    })
    .await;
    // Release two records a fault, which must outlive release one's uninstall.
    health_daemon::event_line(b_dir.path(), "0 xid 79");
    until("release two's recorded fault", b_dir.path(), || async {
        health(&admin, b_node).await.is_some_and(|(s, _)| s == "False")
            && annotations(&admin, b_node).await.contains_key(nvlabel::health::values::record::ANNOTATION)
    })
    .await;

    // What release one's uninstall hook runs (its arguments and grants are checked in
    // tests/cluster/chart_install.rs), first on its own, while release one's daemon still runs.
    let prune = nvlabel(None)
        .args(["prune", "--health-only", "--all-nodes", "--instance=fleet-one-nvlabel", "--namespace", ns])
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    let hook = String::from_utf8_lossy(&prune.stderr);
    assert!(prune.status.success() && hook.contains("GPU health's traces removed from every node"), "{hook}");
    assert_eq!(health(&admin, a_node).await, None, "release one's condition goes");
    assert!(!annotations(&admin, a_node).await.contains_key(nvlabel::health::values::record::ANNOTATION));
    assert_eq!(health(&admin, b_node).await.map(|(s, _)| s), Some("False".into()), "release two's health");
    assert!(annotations(&admin, b_node).await.contains_key(nvlabel::health::values::record::ANNOTATION));

    // Release one's daemon still runs (its pod goes only with the DaemonSet): a new fault is
    // not written back, and neither is anything after a restart.
    health_daemon::event_line(a_dir.path(), "1 xid 79");
    until("release one's daemon retiring", a_dir.path(), || async {
        said(a_dir.path(), "GPU health retired")
    })
    .await;
    assert_eq!(health(&admin, a_node).await, None, "{}", health_daemon::logs(a_dir.path()));
    drop(std::mem::replace(&mut a, daemon(server, &admin, &a_pod, a_dir.path()).await));
    until("the restarted daemon retiring", a_dir.path(), || async {
        health_daemon::logs(a_dir.path()).matches("GPU health retired").count() >= 2
    })
    .await;
    assert_eq!(health(&admin, a_node).await, None);
    assert!(!annotations(&admin, a_node).await.contains_key(nvlabel::health::values::record::ANNOTATION));

    // helm uninstall of release one, its hook run as a cluster runs it.
    let hook = uninstall_running_hooks(&helm, server, &admin, "fleet-one", ns).await;
    assert!(hook.contains("GPU health's traces removed from every node"), "{hook}");
    drop(a);
    assert_eq!(health(&admin, a_node).await, None);
    // Release two keeps all it had: its namespace, objects, condition and fault record.
    let kept = Api::<Namespace>::all(admin.clone()).get(ns).await.unwrap();
    assert!(kept.metadata.deletion_timestamp.is_none(), "the shared namespace stays");
    assert_eq!(health(&admin, b_node).await.map(|(s, _)| s), Some("False".into()), "release two's health");
    assert!(annotations(&admin, b_node).await.contains_key(nvlabel::health::values::record::ANNOTATION));
    let two = leftovers(&admin, "fleet-two", ns).await;
    assert!(two.iter().any(|o| o.starts_with("DaemonSet ")), "release two's DaemonSet: {two:?}");
    assert!(two.iter().any(|o| o.starts_with("ValidatingAdmissionPolicy ")), "{two:?}");
    Api::<ConfigMap>::namespaced(admin.clone(), ns).get("fleet-two-nvlabel-configs").await.unwrap();
    Api::<ServiceAccount>::namespaced(admin.clone(), ns).get("fleet-two-nvlabel").await.unwrap();
    assert_eq!(leftovers(&admin, "fleet-one", ns).await, Vec::<String>::new());
    uninstall_running_hooks(&helm, server, &admin, "fleet-two", ns).await;
}

#[tokio::test]
async fn under_owner_reference_enforcement_the_chart_takes_over_another_daemonsets_nodefeature() {
    let Some((server, helm, _serial)) =
        begin("under_owner_reference_enforcement_the_chart_takes_over_another_daemonsets_nodefeature").await
    else {
        return;
    };
    let admin = server.admin().await;
    let (ns, node_name) = ("strict-ns", "strict-node");
    node(&admin, node_name, json!({})).await;
    install(&helm, server, "install", "strict", &["--set", "namespace.name=strict-ns"]);
    // GFD's DaemonSet owned this node's NodeFeature before nvlabel's release came.
    let gfd = common::apiserver::apply(
        &admin,
        &json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
                "metadata": {"name": "gpu-feature-discovery", "namespace": ns},
                "spec": {"selector": {"matchLabels": {"app": "gfd"}},
                         "template": {"metadata": {"labels": {"app": "gfd"}},
                                      "spec": {"containers": [{"name": "gfd", "image": "gfd"}]}}}}),
    )
    .await;
    let object = format!("nvidia-features-for-{node_name}");
    common::apiserver::apply(
        &admin,
        &json!({"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
                "metadata": {"name": object, "namespace": ns,
                             "labels": {"nfd.node.kubernetes.io/node-name": node_name},
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                                  "name": "gpu-feature-discovery", "uid": gfd.metadata.uid,
                                                  "controller": true}]},
                "spec": {"labels": {"nvidia.com/gpu.product": "old"}}}),
    )
    .await;
    let pod = workload_pod(&admin, ns, "strict", node_name).await;
    let token =
        pod_token(&admin, ns, pod.spec.as_ref().unwrap().service_account_name.as_deref().unwrap(), &pod)
            .await;
    let kubeconfig = server.kubeconfig_for("strict", &token);
    let out = nvlabel(Some("t4"))
        .args(["--oneshot", "--no-timestamp", "--use-node-feature-api", "--kubeconfig"])
        .arg(&kubeconfig)
        .args([
            "--node-name",
            node_name,
            "--namespace",
            ns,
            "--pod-name",
            pod.metadata.name.as_deref().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let obj = nodefeatures(&admin, ns).get(&object).await.unwrap();
    assert_eq!(obj.data["spec"]["labels"]["nvidia.com/gpu.product"], "Tesla-T4");
    let owners = obj.metadata.owner_references.unwrap();
    assert_eq!(owners.len(), 1);
    assert_eq!(
        (owners[0].kind.as_str(), owners[0].name.as_str()),
        ("DaemonSet", "strict-nvlabel-nfd-nodefeature")
    );
    helm_run(&helm, server, &["uninstall", "strict"]);
}
