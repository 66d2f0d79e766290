//! The chart on a real kube-apiserver: `helm install` of every mode is admitted under its Pod
//! Security level; a token of the chart's service account bound to the pod the workload would
//! run can make exactly the calls the mode's code makes (every other verb on nodes, pods,
//! NodeFeatures, secrets, ConfigMaps and events is refused) and does its job with the binary;
//! `helm upgrade` to another mode and `helm uninstall` leave no RBAC, policy or NodeFeature
//! behind, while published Node labels stay (pruned with `nvlabel prune`); with health on, the
//! token sets its (renamed) condition on its own node and nothing else in any node's status.
//! Needs `NVLABEL_KUBE_TEST_SERVER` and a Helm binary; without either each test skips.

use crate::common;

use common::apiserver::{node, pod_token};
use common::chart_cluster::{
    begin, helm_run, install, leftovers, nodefeatures, nodefeatures_are_orphans, uninstall_running_hooks,
    workload_pod,
};
use common::deploy_checks::{needed_calls, typed, Grant};
use common::helm::template;
use common::*;
use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

/// Every (scope, group, resource, verb) probed: what a labeler could plausibly be given.
fn universe(ns: &str) -> BTreeSet<Grant> {
    let verbs = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"];
    let mut all = BTreeSet::new();
    let g =
        |s: &str, grp: &str, r: &str, v: &str| (s.to_string(), grp.to_string(), r.to_string(), v.to_string());
    for v in verbs {
        all.insert(g("cluster", "", "nodes", v));
        for scope in [ns, "kube-system"] {
            for (grp, r) in
                [("", "pods"), ("nfd.k8s-sigs.io", "nodefeatures"), ("", "secrets"), ("", "configmaps")]
            {
                all.insert(g(scope, grp, r, v));
            }
        }
    }
    for v in ["patch", "update"] {
        all.insert(g("cluster", "", "nodes/status", v));
    }
    for scope in [ns, "default"] {
        all.insert(g(scope, "", "events", "create"));
        all.insert(g(scope, "events.k8s.io", "events", "create"));
    }
    all
}

/// Whether the token's RBAC allows one call (a SelfSubjectAccessReview, as that token).
async fn allowed(sa: &Client, (scope, group, resource, verb): &Grant) -> bool {
    let (resource, sub) = resource.split_once('/').map_or((resource.as_str(), None), |(r, s)| (r, Some(s)));
    let review: SelfSubjectAccessReview = serde_json::from_value(json!({
        "spec": {"resourceAttributes": {
            "namespace": if scope == "cluster" { None } else { Some(scope) },
            "group": group, "resource": resource, "subresource": sub, "verb": verb,
        }}
    }))
    .unwrap();
    let answer = Api::<SelfSubjectAccessReview>::all(sa.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap();
    answer.status.unwrap().allowed
}

/// A new admission policy takes effect a moment after it is created: wait (bounded) until a
/// change it forbids (a dry run on `other`, not the pod's node) is refused.
async fn policy_in_force(sa: &Client, other: &str) {
    let body = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": other, "labels": {"nvidia.com/probe": "1"}}});
    let params = PatchParams { dry_run: true, ..PatchParams::apply("policy-probe").force() };
    for _ in 0..200 {
        if Api::<Node>::all(sa.clone()).patch(other, &params, &Patch::Apply(&body)).await.is_err() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the node-label admission policy never took effect");
}

/// nvlabel, once, as the pod runs it, with the pod-bound token.
fn label_once(kubeconfig: &Path, args: &[&str]) -> std::process::Output {
    nvlabel(Some("t4"))
        .args(["--oneshot", "--no-timestamp", "--kubeconfig"])
        .arg(kubeconfig)
        .args(args)
        .output()
        .unwrap()
}

#[tokio::test]
async fn every_mode_installs_admitted_and_its_token_can_do_exactly_its_job() {
    let Some((server, helm, _serial)) =
        begin("every_mode_installs_admitted_and_its_token_can_do_exactly_its_job").await
    else {
        return;
    };
    let admin = server.admin().await;
    for (i, mode) in ["nfd-nodefeature", "nfd-file", "node", "job"].into_iter().enumerate() {
        let (release, ns, node_name) = (format!("inst{i}"), format!("inst{i}-ns"), format!("inst{i}-node"));
        node(&admin, &node_name, json!({"team": "ml"})).await;
        node(&admin, &format!("{node_name}-other"), json!({})).await;
        let values =
            [format!("mode={mode}"), format!("namespace.name={ns}"), format!("job.nodeName={node_name}")];
        let mut args = Vec::new();
        for v in &values {
            args.extend(["--set", v.as_str()]);
        }
        install(&helm, server, "install", &release, &args);
        let levels = Api::<Namespace>::all(admin.clone()).get(&ns).await.unwrap().metadata.labels.unwrap();
        let enforce = levels.get("pod-security.kubernetes.io/enforce").map(String::as_str);
        assert_eq!(enforce, Some(if mode == "nfd-file" { "privileged" } else { "restricted" }), "{mode}");
        let pod = workload_pod(&admin, &ns, &release, &node_name).await;
        let sa_name = pod.spec.as_ref().unwrap().service_account_name.clone().unwrap();
        let token = pod_token(&admin, &ns, &sa_name, &pod).await;
        let kubeconfig = server.kubeconfig_for(&release, &token);
        let sa = apiserver::client_from(&kubeconfig).await;

        // Exactly the calls the code makes, as nvlabel reads the rendered container.
        let docs = template(&helm, &release, &args).unwrap();
        let needed = needed_calls(&typed(mode, &docs));
        for call in universe(&ns) {
            assert_eq!(allowed(&sa, &call).await, needed.contains(&call), "{mode}: {call:?}");
        }
        assert!(!needed.is_empty() || mode == "nfd-file", "{mode}");

        // And the job itself, with that token.
        match mode {
            "node" | "job" => {
                let out = label_once(&kubeconfig, &["--sink=node", "--node-name", &node_name]);
                assert!(out.status.success(), "{mode}: {}", String::from_utf8_lossy(&out.stderr));
                let labels =
                    Api::<Node>::all(admin.clone()).get(&node_name).await.unwrap().metadata.labels.unwrap();
                assert_eq!(
                    labels.get("nvidia.com/gpu.product").map(String::as_str),
                    Some("Tesla-T4"),
                    "{mode}"
                );
                let other = format!("{node_name}-other");
                policy_in_force(&sa, &other).await;
                let out = label_once(&kubeconfig, &["--sink=node", "--node-name", &other]);
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert!(stderr.contains("may only change the node its pod runs on"), "{mode}: {stderr}");
            }
            "nfd-nodefeature" => {
                let pod_name = pod.metadata.name.clone().unwrap();
                let out = label_once(
                    &kubeconfig,
                    &[
                        "--use-node-feature-api",
                        "--node-name",
                        &node_name,
                        "--namespace",
                        &ns,
                        "--pod-name",
                        &pod_name,
                    ],
                );
                assert!(out.status.success(), "{mode}: {}", String::from_utf8_lossy(&out.stderr));
                let obj =
                    nodefeatures(&admin, &ns).get(&format!("nvidia-features-for-{node_name}")).await.unwrap();
                assert_eq!(obj.data["spec"]["labels"]["nvidia.com/gpu.product"], "Tesla-T4");
                let owner = &obj.metadata.owner_references.unwrap()[0];
                assert_eq!(
                    (owner.kind.as_str(), owner.name.as_str()),
                    ("DaemonSet", "inst0-nvlabel-nfd-nodefeature")
                );
            }
            _ => {}
        }
        helm_run(&helm, server, &["uninstall", &release]);
    }
}

#[tokio::test]
async fn upgrade_to_another_mode_and_uninstall_leave_nothing_behind() {
    let Some((server, helm, _serial)) =
        begin("upgrade_to_another_mode_and_uninstall_leave_nothing_behind").await
    else {
        return;
    };
    let admin = server.admin().await;
    let (release, ns, node_name) = ("moves", "moves-ns", "moves-node");
    node(&admin, node_name, json!({"team": "ml"})).await;
    let set = |mode: &str| vec![format!("mode={mode}"), format!("namespace.name={ns}")];
    let args =
        |values: &[String]| values.iter().flat_map(|v| ["--set".to_string(), v.clone()]).collect::<Vec<_>>();
    let run = |verb: &str, mode: &str| {
        let a = args(&set(mode));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        install(&helm, server, verb, release, &a);
    };

    // NodeFeature mode publishes an object owned by its DaemonSet.
    run("install", "nfd-nodefeature");
    let pod = workload_pod(&admin, ns, release, node_name).await;
    let token = pod_token(&admin, ns, "moves-nvlabel", &pod).await;
    let kubeconfig = server.kubeconfig_for(release, &token);
    let pod_name = pod.metadata.name.clone().unwrap();
    let out = label_once(
        &kubeconfig,
        &["--use-node-feature-api", "--node-name", node_name, "--namespace", ns, "--pod-name", &pod_name],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(nodefeatures(&admin, ns).list(&Default::default()).await.unwrap().items.len(), 1);

    // To Node mode: the NodeFeature RBAC and DaemonSet go (and with it, its objects).
    run("upgrade", "node");
    let left = leftovers(&admin, release, ns).await;
    assert!(!left.iter().any(|o| o.contains("nodefeature")), "{left:?}");
    assert!(left.contains(&"ValidatingAdmissionPolicy moves-nvlabel-node-labels".to_string()), "{left:?}");
    nodefeatures_are_orphans(&admin, ns).await;
    Api::<Pod>::namespaced(admin.clone(), ns)
        .delete(&pod_name, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() })
        .await
        .unwrap();
    let pod = workload_pod(&admin, ns, release, node_name).await;
    let token = pod_token(&admin, ns, "moves-nvlabel", &pod).await;
    let kubeconfig = server.kubeconfig_for(release, &token);
    for _ in 0..100 {
        // The new policy and grants take a moment to be in force.
        if label_once(&kubeconfig, &["--sink=node", "--node-name", node_name]).status.success() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let labels = Api::<Node>::all(admin.clone()).get(node_name).await.unwrap().metadata.labels.unwrap();
    assert_eq!(labels.get("nvidia.com/gpu.product").map(String::as_str), Some("Tesla-T4"));

    // To the feature file: the node writer's RBAC and the policy go.
    run("upgrade", "nfd-file");
    let left = leftovers(&admin, release, ns).await;
    assert!(!left.iter().any(|o| o.contains("node-writer") || o.contains("ValidatingAdmission")), "{left:?}");

    // Uninstall: nothing of the release's RBAC, policies or workloads is left.
    helm_run(&helm, server, &["uninstall", release]);
    assert_eq!(leftovers(&admin, release, ns).await, Vec::<String>::new());
    nodefeatures_are_orphans(&admin, ns).await;
    // The Node labels stay, as documented; `nvlabel prune` with an administrator's kubeconfig
    // removes exactly them.
    let labels = Api::<Node>::all(admin.clone()).get(node_name).await.unwrap().metadata.labels.unwrap();
    assert!(labels.contains_key("nvidia.com/gpu.product"), "published labels stay: {labels:?}");
    let out = nvlabel(None)
        .args(["prune", "--sink", "node", "--node-name", node_name, "--kubeconfig"])
        .arg(server.kubeconfig())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let labels = Api::<Node>::all(admin.clone()).get(node_name).await.unwrap().metadata.labels.unwrap();
    assert!(!labels.keys().any(|k| k.starts_with("nvidia.com/")), "{labels:?}");
    assert_eq!(labels.get("team").map(String::as_str), Some("ml"));
}

#[tokio::test]
async fn installed_with_its_release_in_the_namespace_it_creates() {
    let Some((server, helm, _serial)) = begin("installed_with_its_release_in_the_namespace_it_creates").await
    else {
        return;
    };
    let admin = server.admin().await;
    let (release, ns, node_name) = ("own", "own-ns", "own-node");
    node(&admin, node_name, json!({})).await;
    // `helm install -n NS --create-namespace`: Helm makes the namespace first, then applies the
    // chart's Namespace over it, Pod Security labels included.
    let ns_arg = format!("namespace.name={ns}");
    install(
        &helm,
        server,
        "install",
        release,
        &["--namespace", ns, "--create-namespace", "--set", &ns_arg, "--set", "mode=nfd-file"],
    );
    let labels = Api::<Namespace>::all(admin.clone()).get(ns).await.unwrap().metadata.labels.unwrap();
    assert_eq!(labels.get("pod-security.kubernetes.io/enforce").map(String::as_str), Some("privileged"));
    assert_eq!(labels.get("pod-security.kubernetes.io/warn").map(String::as_str), Some("restricted"));
    workload_pod(&admin, ns, release, node_name).await;
    helm_run(&helm, server, &["uninstall", release, "--namespace", ns]);
    assert_eq!(leftovers(&admin, release, ns).await, Vec::<String>::new());
}

/// A Node condition as server-side apply sends it.
fn condition(node: &str, kind: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
           "status": {"conditions": [{"type": kind, "status": "False", "reason": "Test", "message": "test"}]}})
}

#[tokio::test]
async fn with_health_the_token_sets_its_own_condition_and_nothing_else() {
    let Some((server, helm, _serial)) =
        begin("with_health_the_token_sets_its_own_condition_and_nothing_else").await
    else {
        return;
    };
    let admin = server.admin().await;
    for (i, mode) in ["node", "nfd-nodefeature"].into_iter().enumerate() {
        let (release, ns, node_name) = (format!("hl{i}"), format!("hl{i}-ns"), format!("hl{i}-node"));
        let other = format!("{node_name}-other");
        node(&admin, &node_name, json!({})).await;
        node(&admin, &other, json!({})).await;
        let values = [
            format!("mode={mode}"),
            format!("namespace.name={ns}"),
            "health.enabled=true".to_string(),
            "health.conditionType=GPUsOK".to_string(),
        ];
        let args: Vec<&str> = values.iter().flat_map(|v| ["--set", v.as_str()]).collect();
        install(&helm, server, "install", &release, &args);
        let pod = workload_pod(&admin, &ns, &release, &node_name).await;
        let sa_name = pod.spec.as_ref().unwrap().service_account_name.clone().unwrap();
        let token = pod_token(&admin, &ns, &sa_name, &pod).await;
        let sa = apiserver::client_from(&server.kubeconfig_for(&release, &token)).await;

        // Exactly the calls the code makes, health's included (Events in default).
        let needed = needed_calls(&typed(mode, &template(&helm, &release, &args).unwrap()));
        assert!(needed.contains(&(
            "default".into(),
            "events.k8s.io".into(),
            "events".into(),
            "create".into()
        )));
        for call in universe(&ns) {
            assert_eq!(allowed(&sa, &call).await, needed.contains(&call), "{mode}: {call:?}");
        }

        // The policy follows health.conditionType: the renamed condition on the pod's node only.
        let nodes = Api::<Node>::all(sa.clone());
        let probe = PatchParams { dry_run: true, ..PatchParams::apply("nvlabel").force() };
        for n in 0.. {
            if nodes.patch_status(&other, &probe, &Patch::Apply(condition(&other, "GPUsOK"))).await.is_err() {
                break;
            }
            assert!(n < 200, "{mode}: the health admission policy never took effect");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // As the daemon writes it: under its instance's field manager (the hook removes that).
        let instance =
            nvlabel::health::values::instance::Instance { namespace: ns.clone(), name: sa_name.clone() };
        let ssa = PatchParams::apply(&instance.manager()).force();
        nodes
            .patch_status(&node_name, &ssa, &Patch::Apply(condition(&node_name, "GPUsOK")))
            .await
            .unwrap_or_else(|e| panic!("{mode}: its own condition: {e}"));
        let refused = |r: Result<Node, kube::Error>| match r {
            Err(kube::Error::Api(e)) => e.message,
            other => panic!("{mode}: not refused: {other:?}"),
        };
        let m = refused(nodes.patch_status(&other, &ssa, &Patch::Apply(condition(&other, "GPUsOK"))).await);
        assert!(m.contains("only change the status of the node its pod runs on"), "{mode}: {m}");
        for kind in ["GPUHealthy", "Ready"] {
            let m = refused(
                nodes.patch_status(&node_name, &ssa, &Patch::Apply(condition(&node_name, kind))).await,
            );
            assert!(m.contains("only change its own GPU health condition"), "{mode} {kind}: {m}");
        }
        let m = refused(
            nodes
                .patch_status(
                    &node_name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"capacity": {"nvidia.com/gpu": "8"}}})),
                )
                .await,
        );
        assert!(m.contains("only change conditions"), "{mode}: {m}");

        // The uninstall's hook removes the condition nvlabel's token wrote, and only that.
        let said = uninstall_running_hooks(&helm, server, &admin, &release, &ns).await;
        assert!(said.contains("GPU health's traces removed from every node"), "{mode}: {said}");
        let node = Api::<Node>::all(admin.clone()).get(&node_name).await.unwrap();
        let kinds: Vec<String> =
            node.status.and_then(|s| s.conditions).into_iter().flatten().map(|c| c.type_).collect();
        assert!(!kinds.contains(&"GPUsOK".to_string()), "{mode}: {kinds:?}");
        assert_eq!(leftovers(&admin, &release, &ns).await, Vec::<String>::new(), "{mode}");
    }
}
