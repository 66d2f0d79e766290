//! A pod's required node affinity evaluated against a node's labels, as the scheduler and the
//! DaemonSet controller do: terms ORed, a term's expressions ANDed (no scheduler runs on the
//! test API server).
#![allow(dead_code)]

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, PodSpec};
use std::collections::BTreeMap;

/// Whether the pod may run on a node with these labels.
pub fn admits(pod: &PodSpec, labels: &[(&str, &str)]) -> bool {
    let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
    let na = pod.affinity.as_ref().and_then(|a| a.node_affinity.as_ref());
    let Some(required) = na.and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref())
    else {
        return true;
    };
    required.node_selector_terms.iter().any(|t| {
        assert!(t.match_fields.is_none(), "{t:?}: matchFields is not expected");
        let exprs = t.match_expressions.as_deref().unwrap_or_default();
        // An empty term selects nothing.
        !exprs.is_empty() && exprs.iter().all(|e| matches(e, &labels))
    })
}

fn matches(e: &NodeSelectorRequirement, labels: &BTreeMap<&str, &str>) -> bool {
    let value = labels.get(e.key.as_str());
    let values = e.values.as_deref().unwrap_or_default();
    match e.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|w| w == v)),
        "NotIn" => value.is_none_or(|v| values.iter().all(|w| w != v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        op => panic!("{e:?}: operator {op} is not evaluated here"),
    }
}
