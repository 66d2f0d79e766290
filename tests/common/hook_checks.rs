//! The chart's uninstall hook, checked as every rendering's workload is: there exactly where
//! health is on, locked down, its arguments accepted by nvlabel, and its RBAC exact.
#![allow(dead_code)]

use super::deploy_checks::{calls, grants, settings_of, typed, Rendered};
use serde_json::Value;
use std::collections::BTreeSet;

/// The uninstall hook: there exactly where health is on, a pre-delete Job run as its own
/// service account, locked down as the workload is, whose arguments nvlabel accepts and whose
/// RBAC grants exactly what `nvlabel prune --health-only --all-nodes` calls.
pub fn check_uninstall_hook(label: &str, r: &Rendered) {
    let (what, namespace, pod) = &r.pods[0];
    let settings = settings_of(what, namespace, &pod.containers[0]);
    let pruned = !label.contains("pruneOnUninstall=false");
    assert_eq!(!r.hooks.is_empty(), settings.health.enabled && pruned, "{label}: {:?}", r.hooks);
    if r.hooks.is_empty() {
        return;
    }
    for doc in &r.hooks {
        assert_eq!(doc["metadata"]["annotations"]["helm.sh/hook"], "pre-delete", "{label}: {doc}");
    }
    let hooks = typed(label, &r.hooks.iter().map(without_hook).collect::<Vec<_>>());
    assert_eq!(hooks.pods.len(), 1, "{label}: one hook Job");
    let (what, namespace, job) = &hooks.pods[0];
    assert_ne!(job.service_account_name, pod.service_account_name, "{label}: not the DaemonSet's account");
    let psc = job.security_context.clone().expect("a pod securityContext");
    assert_eq!(
        (psc.run_as_non_root, psc.seccomp_profile.map(|s| s.type_)),
        (Some(true), Some("RuntimeDefault".into()))
    );
    let c = &job.containers[0];
    let sc = c.security_context.clone().expect("a container securityContext");
    assert_eq!(
        (sc.allow_privilege_escalation, sc.read_only_root_filesystem),
        (Some(false), Some(true)),
        "{what}"
    );
    assert!(sc.capabilities.and_then(|c| c.drop).unwrap_or_default().contains(&"ALL".to_string()), "{what}");
    // Only this release's health: the instance the DaemonSet writes as, in its namespace.
    let instance = pod.service_account_name.clone().unwrap();
    assert_eq!(
        c.args.clone().unwrap_or_default(),
        [
            "prune",
            "--health-only",
            "--all-nodes",
            &format!("--instance={instance}"),
            &format!("--namespace={namespace}")
        ],
        "{what}"
    );
    let hook = settings_of(what, namespace, c);
    assert_eq!(
        hook.health_config().instance,
        settings.health_config().instance,
        "{label}: the same instance"
    );
    assert!(settings.health_config().instance.is_some(), "{label}: the DaemonSet writes as its instance");
    let sa = format!("ServiceAccount/{namespace}/{}", job.service_account_name.as_deref().unwrap());
    let mut granted = BTreeSet::new();
    for (role, ns, kind, subjects) in &hooks.bindings {
        assert_eq!(subjects, &vec![sa.clone()], "{label}");
        let (_, _, rules) = hooks
            .rules
            .iter()
            .find(|(n, rns, _)| n == role && (kind == "ClusterRole" || rns == ns))
            .expect("the bound role");
        granted.extend(grants(ns.as_deref().unwrap_or("cluster"), rules));
    }
    let mut needed = calls(nvlabel::health::commands::prune::API_CALLS, namespace);
    needed.extend(calls(nvlabel::health::writing::retirement::PRUNE_CALLS, namespace));
    if settings.allocation_mode != nvlabel::labels::AllocationMode::DevicePlugin {
        needed.extend(calls(nvlabel::health::writing::taints::PRUNE_CALLS, namespace));
    }
    assert_eq!(granted, needed, "{label}: the uninstall hook's grants");
}

/// `doc` without its hook annotations, typed as any object.
fn without_hook(doc: &Value) -> Value {
    let mut doc = doc.clone();
    if let Some(a) = doc["metadata"]["annotations"].as_object_mut() {
        a.retain(|k, _| !k.starts_with("helm.sh/hook"));
    }
    doc
}
