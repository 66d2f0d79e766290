//! What every rendering's admission policies must pass (`deploy/` or the chart): each write the
//! pod's service account may make that RBAC cannot narrow to its own node (node labels,
//! `nodes/status`, Events, DeviceTaintRules) is fenced by a policy scoped to that account and to
//! the node-name claim of its pod-bound token; no other policy; every one bound with `Deny`.
#![allow(dead_code)]

use super::deploy_checks::{needed_calls, settings_of, Rendered};
use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use std::collections::BTreeSet;

/// The admission policies of a rendering that match `resource` updates.
fn policies_on<'a>(r: &'a Rendered, resource: &str) -> Vec<&'a ValidatingAdmissionPolicy> {
    r.policies
        .iter()
        .filter(|p| {
            let rules = p.spec.as_ref().and_then(|s| s.match_constraints.as_ref()?.resource_rules.clone());
            rules.iter().flatten().any(|rule| rule.resources.iter().flatten().any(|x| x == resource))
        })
        .collect()
}

/// A workload that patches nodes is fenced by the admission policy for its service account (own
/// node, nvidia.com/ labels only); one that patches nodes/status (health) by the health policy
/// (own node, its one condition type); one that writes Events by the Event policy (about its own
/// Node); one that writes DeviceTaintRules by the device-taint policy; one that cannot has none. Every policy is bound, with
/// Deny.
pub fn check_policy(label: &str, r: &Rendered) {
    let needed = needed_calls(r);
    let patches = |resource: &str| needed.iter().any(|(_, _, res, verb)| res == resource && verb == "patch");
    let (what, namespace, pod) = &r.pods[0];
    let user = format!("system:serviceaccount:{namespace}:{}", pod.service_account_name.as_deref().unwrap());
    let scoped = |policy: &ValidatingAdmissionPolicy| {
        let spec = policy.spec.as_ref().unwrap();
        let condition = &spec.match_conditions.as_ref().unwrap()[0].expression;
        assert!(condition.contains(&format!("'{user}'")), "{label}: scoped to {user}: {condition}");
        let validations: Vec<String> =
            spec.validations.iter().flatten().map(|v| v.expression.clone()).collect();
        let text = serde_json::to_string(spec).unwrap();
        assert!(text.contains("authentication.kubernetes.io/node-name"), "{label}: the pod's node");
        validations
    };
    let labels = policies_on(r, "nodes");
    if patches("nodes") {
        assert_eq!(labels.len(), 1, "{label}: one label policy");
        assert!(scoped(labels[0]).iter().any(|v| v.contains("nvidia.com/")), "{label}");
    } else {
        assert!(labels.is_empty(), "{label} cannot write nodes at all");
    }
    let health = policies_on(r, "nodes/status");
    if patches("nodes/status") {
        assert_eq!(health.len(), 1, "{label}: one health policy");
        let validations = scoped(health[0]);
        assert!(validations.iter().any(|v| v.contains("variables.others == variables.oldOthers")), "{label}");
        // The policy's condition is the one the pod writes.
        let condition_type = &settings_of(what, namespace, &pod.containers[0]).health.condition_type;
        let vars = health[0].spec.as_ref().unwrap().variables.clone().unwrap_or_default();
        let var = vars.iter().find(|v| v.name == "conditionType").expect("a conditionType variable");
        assert_eq!(var.expression, format!("'{condition_type}'"), "{label}: the policy follows the flag");
        // The one annotation it lets change is the one the code writes its fault record to.
        let var = vars.iter().find(|v| v.name == "recordKey").expect("a recordKey variable");
        let key = nvlabel::health::values::record::ANNOTATION;
        assert_eq!(var.expression, format!("'{key}'"), "{label}: the policy lets the record through");
    } else {
        assert!(health.is_empty(), "{label} cannot write node status at all");
    }
    // A workload that writes DeviceTaintRules (cluster-scoped) is fenced to its node's pool.
    let taints = policies_on(r, "devicetaintrules");
    if patches("devicetaintrules") {
        assert_eq!(taints.len(), 1, "{label}: one device-taint policy");
        let validations = scoped(taints[0]);
        let key = nvlabel::health::writing::taints::KEY;
        assert!(validations.iter().any(|v| v.contains(&format!("'{key}'"))), "{label}: the code's taint key");
        assert!(validations.iter().any(|v| v.contains("deviceSelector.?pool")), "{label}: the pool");
    } else {
        assert!(taints.is_empty(), "{label} cannot write device taints at all");
    }
    // A workload that writes Events (health) is fenced to Events regarding its own Node, on a
    // create and on a patch (a repeat's series), the Event as it was included.
    let events = policies_on(r, "events");
    let writes_events = needed.iter().any(|(_, _, res, verb)| res == "events" && verb == "create");
    if writes_events {
        assert_eq!(events.len(), 1, "{label}: one Event policy");
        let spec = events[0].spec.as_ref().unwrap();
        let rules = spec.match_constraints.as_ref().unwrap().resource_rules.clone().unwrap_or_default();
        let ops: BTreeSet<String> =
            rules.iter().flat_map(|r| r.operations.clone().unwrap_or_default()).collect();
        let writes: BTreeSet<String> = needed
            .iter()
            .filter(|(_, _, res, _)| res == "events")
            .map(|(_, _, _, verb)| if verb == "create" { "CREATE".into() } else { "UPDATE".into() })
            .collect();
        assert_eq!(ops, writes, "{label}: every Event write the code makes is checked");
        let groups: Vec<String> =
            rules.iter().flat_map(|r| r.api_groups.clone().unwrap_or_default()).collect();
        assert_eq!(groups, ["events.k8s.io"], "{label}: the Events the code writes");
        scoped(events[0]);
        let text = serde_json::to_string(spec).unwrap();
        for fence in ["regarding", "'Node'", "oldObject", "'nvidia.com/nvlabel'"] {
            assert!(text.contains(fence), "{label}: the Event policy checks {fence}: {text}");
        }
    } else {
        assert!(events.is_empty(), "{label} cannot write Events at all");
    }
    assert_eq!(
        labels.len() + health.len() + taints.len() + events.len(),
        r.policies.len(),
        "{label}: no other policy"
    );
    assert_eq!(r.policy_bindings.len(), r.policies.len(), "{label}: every policy is bound");
    for policy in &r.policies {
        let name = policy.metadata.name.as_deref();
        let b = r.policy_bindings.iter().find(|b| Some(b.spec.policy_name.as_str()) == name);
        let b = b.unwrap_or_else(|| panic!("{label}: {name:?} is not bound"));
        assert_eq!(b.spec.validation_actions, vec!["Deny".to_string()], "{label}");
    }
}
