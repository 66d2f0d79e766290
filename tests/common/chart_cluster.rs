//! The chart's release on the real API server: installing, upgrading and uninstalling it with
//! Helm, the pod its workload would run, and what a release may leave behind.
#![allow(dead_code)]

use super::apiserver::{self, apply, Server};
use super::helm::{chart, helm};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::Client;
use serde_json::json;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The admission plugin OpenShift runs by default and a plain kube-apiserver does not: changing
/// an object's owner needs `delete` on it.
pub const STRICT: &str = "--enable-admission-plugins=OwnerReferencesPermissionEnforcement";

/// One chart test at a time: they share the server's cluster-scoped objects and the node.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The server and Helm, or `None` after a one-line skip.
pub async fn begin(test: &str) -> Option<(&'static Server, PathBuf, tokio::sync::MutexGuard<'static, ()>)> {
    let helm = helm(test)?;
    // Every chart test on a strict cluster's admission (OpenShift's default): the chart's grants
    // must be enough there too.
    let server = apiserver::server_with(test, Some(STRICT))?;
    let guard = SERIAL.lock().await;
    let admin = server.admin().await;
    apply(&admin, &json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"}, "handler": "nvidia"}))
        .await;
    let crd = super::manifests::yaml_docs(&super::repo().join("testdata/crds/nodefeature.yaml")).remove(0);
    apply(&admin, &crd).await;
    apiserver::wait_for_kind(&admin, "nfd.k8s-sigs.io", "v1alpha1", "NodeFeature").await;
    Some((server, helm, guard))
}

/// Runs helm against the server (`install`, `upgrade` or `uninstall`), insisting on success.
pub fn helm_run(helm: &Path, server: &Server, args: &[&str]) {
    // The release's own namespace is `default` unless `args` say otherwise (the last one wins).
    let out = Command::new(helm)
        .args(["--namespace", "default"])
        .args(args)
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .env("HELM_CACHE_HOME", server.dir.join("helm-cache"))
        .env("HELM_CONFIG_HOME", server.dir.join("helm-config"))
        .env("HELM_DATA_HOME", server.dir.join("helm-data"))
        .output()
        .unwrap();
    assert!(out.status.success(), "helm {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// `helm install` (or upgrade) of `release` with `values`.
pub fn install(helm: &Path, server: &Server, verb: &str, release: &str, values: &[&str]) {
    let chart = chart();
    let mut args = vec![verb, release, chart.to_str().unwrap()];
    args.extend(values);
    helm_run(helm, server, &args);
}

/// The pod the release's workload would run on `node_name` (read back from the API server),
/// created, owned like the real one.
pub async fn workload_pod(admin: &Client, ns: &str, release_label: &str, node_name: &str) -> Pod {
    let selector = ListParams::default().labels(&format!("app.kubernetes.io/instance={release_label}"));
    let ds = Api::<k8s_openapi::api::apps::v1::DaemonSet>::namespaced(admin.clone(), ns)
        .list(&selector)
        .await
        .unwrap();
    let jobs =
        Api::<k8s_openapi::api::batch::v1::Job>::namespaced(admin.clone(), ns).list(&selector).await.unwrap();
    let (template, owner) = match (ds.items.first(), jobs.items.first()) {
        (Some(d), None) => (d.spec.template.clone(), Some(("DaemonSet", &d.metadata))),
        (None, Some(j)) => (j.spec.as_ref().unwrap().template.clone(), None),
        other => panic!("one workload expected: {other:?}"),
    };
    let mut spec = template.spec.unwrap();
    spec.node_name = Some(node_name.into());
    let mut pod =
        Pod { metadata: template.metadata.unwrap_or_default(), spec: Some(spec), ..Default::default() };
    pod.metadata.name = Some(format!("{release_label}-{node_name}"));
    pod.metadata.namespace = Some(ns.into());
    if let Some((kind, meta)) = owner {
        pod.metadata.owner_references =
            Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "apps/v1".into(),
                kind: kind.into(),
                name: meta.name.clone().unwrap(),
                uid: meta.uid.clone().unwrap(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]);
    }
    Api::<Pod>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("{release_label}: the workload's pod is refused: {e}"))
}

/// The NodeFeature objects of `ns`, untyped.
pub fn nodefeatures(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("nfd.k8s-sigs.io", "v1alpha1", "NodeFeature");
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk(&gvk))
}

/// Objects of `release` that must not outlive it: RBAC and admission policies.
pub async fn leftovers(admin: &Client, release: &str, ns: &str) -> Vec<String> {
    let selector = ListParams::default().labels(&format!("app.kubernetes.io/instance={release}"));
    let mut out = Vec::new();
    macro_rules! collect {
        ($api:expr, $kind:literal) => {
            for o in $api.list(&selector).await.unwrap().items {
                out.push(format!("{} {}", $kind, o.metadata.name.unwrap_or_default()));
            }
        };
    }
    use k8s_openapi::api::admissionregistration::v1 as adm;
    use k8s_openapi::api::rbac::v1 as rbac;
    collect!(Api::<rbac::ClusterRole>::all(admin.clone()), "ClusterRole");
    collect!(Api::<rbac::ClusterRoleBinding>::all(admin.clone()), "ClusterRoleBinding");
    collect!(Api::<rbac::Role>::namespaced(admin.clone(), ns), "Role");
    collect!(Api::<rbac::RoleBinding>::namespaced(admin.clone(), ns), "RoleBinding");
    // Health's Event grant lives where Node Events go.
    collect!(Api::<rbac::Role>::namespaced(admin.clone(), "default"), "Role");
    collect!(Api::<rbac::RoleBinding>::namespaced(admin.clone(), "default"), "RoleBinding");
    collect!(Api::<adm::ValidatingAdmissionPolicy>::all(admin.clone()), "ValidatingAdmissionPolicy");
    collect!(
        Api::<adm::ValidatingAdmissionPolicyBinding>::all(admin.clone()),
        "ValidatingAdmissionPolicyBinding"
    );
    collect!(Api::<k8s_openapi::api::apps::v1::DaemonSet>::namespaced(admin.clone(), ns), "DaemonSet");
    out.sort();
    out
}

/// No NodeFeature object in `ns` would survive garbage collection: each is owned by a DaemonSet
/// that no longer exists. (The test server runs no garbage collector; a cluster deletes them.)
pub async fn nodefeatures_are_orphans(admin: &Client, ns: &str) {
    let daemonsets = Api::<k8s_openapi::api::apps::v1::DaemonSet>::namespaced(admin.clone(), ns);
    let live: BTreeSet<String> = daemonsets
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|d| d.metadata.uid)
        .collect();
    for obj in nodefeatures(admin, ns).list(&Default::default()).await.unwrap().items {
        let owners = obj.metadata.owner_references.clone().unwrap_or_default();
        assert!(!owners.is_empty(), "{:?} has no owner: nothing would delete it", obj.metadata.name);
        assert!(
            owners.iter().all(|o| !live.contains(&o.uid)),
            "{:?} is still owned by a live DaemonSet",
            obj.metadata.name
        );
    }
}

/// `helm uninstall` of `release` as a cluster runs it: the pre-delete hook Job's pod created
/// (so Pod Security admits it), its command run with a token bound to that pod, and the Job
/// marked complete, as the job controller and a kubelet would (the test server runs neither).
/// Returns what the hook logged (empty when the release has no hook).
pub async fn uninstall_running_hooks(
    helm: &Path,
    server: &'static Server,
    admin: &Client,
    release: &str,
    ns: &str,
) -> String {
    use std::time::{Duration, Instant};
    let (h, r) = (helm.to_path_buf(), release.to_string());
    let uninstall = std::thread::spawn(move || helm_run(&h, server, &["uninstall", &r]));
    let jobs = Api::<k8s_openapi::api::batch::v1::Job>::namespaced(admin.clone(), ns);
    let selector = format!("app.kubernetes.io/instance={release},app.kubernetes.io/component=uninstall");
    let start = Instant::now();
    let mut said = String::new();
    while !uninstall.is_finished() {
        assert!(start.elapsed() < Duration::from_secs(120), "{release}: helm uninstall never ended");
        let found = jobs.list(&ListParams::default().labels(&selector)).await.unwrap().items;
        if let (Some(job), true) = (found.into_iter().next(), said.is_empty()) {
            said = run_job(server, admin, ns, &job).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    uninstall.join().unwrap();
    said
}

/// Runs `job`'s one container as its pod would, then marks the Job complete.
async fn run_job(
    server: &Server,
    admin: &Client,
    ns: &str,
    job: &k8s_openapi::api::batch::v1::Job,
) -> String {
    let name = job.metadata.name.clone().unwrap();
    let template = job.spec.clone().unwrap().template;
    let mut pod =
        Pod { metadata: template.metadata.unwrap_or_default(), spec: template.spec, ..Default::default() };
    pod.metadata.name = Some(format!("{name}-run"));
    pod.metadata.namespace = Some(ns.into());
    let pod = Api::<Pod>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("{name}: the hook's pod is refused: {e}"));
    let spec = pod.spec.clone().unwrap();
    let sa = spec.service_account_name.clone().unwrap();
    let token = apiserver::pod_token(admin, ns, &sa, &pod).await;
    let kubeconfig = server.kubeconfig_for(&sa, &token);
    let out = super::nvlabel(None)
        .args(spec.containers[0].args.clone().unwrap_or_default())
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{name}: the hook failed: {said}");
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let condition = |kind: &str| {
        json!({"type": kind, "status": "True", "lastProbeTime": now, "lastTransitionTime": now,
               "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods"})
    };
    let status = json!({"status": {"startTime": now, "completionTime": now, "succeeded": 1, "active": 0,
        "conditions": [condition("SuccessCriteriaMet"), condition("Complete")]}});
    Api::<k8s_openapi::api::batch::v1::Job>::namespaced(admin.clone(), ns)
        .patch_status(&name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&status))
        .await
        .unwrap_or_else(|e| panic!("{name}: marking the hook complete: {e}"));
    said
}
