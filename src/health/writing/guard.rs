//! nvlabel's verdict as the Node's truth: what the Node watch shows of the condition, held
//! against the verdict last written. Another writer of the same condition type (EKS's node
//! monitoring agent writes `AcceleratedHardwareReady`, a person's `kubectl patch`) must not hide
//! a recorded fault from remediation: where the Node shows another status or reason and a field
//! manager other than ours wrote it, the verdict is written back, as drift of the labels is. Not
//! an overwrite: a condition that is gone (a prune, an uninstall), a clear by hand (what
//! [`crate::health::judging::admin`] obeys), or a view of the Node older than our own last write (its
//! fields still ours).

pub use crate::health::values::report::Overwrite;
use crate::health::values::verdict::{Verdict, CLEARED_BY_ADMIN};
use crate::kubeapi::object_watch::Seen;
use k8s_openapi::api::core::v1::Node;

/// What `seen` shows of condition `kind` where another writer than `manager` (and than
/// nvlabel's own older manager, `legacy`) set a status or reason other than `ours`'.
pub fn overwritten(
    seen: &Seen<Node>,
    kind: &str,
    manager: &str,
    legacy: &str,
    ours: &Verdict,
) -> Option<Overwrite> {
    let Seen::Present(node) = seen else { return None };
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    let shown = conditions.into_iter().flatten().find(|c| c.type_ == kind)?;
    let reason = shown.reason.clone().unwrap_or_default();
    if reason == CLEARED_BY_ADMIN || (shown.status == ours.status.as_str() && reason == ours.reason) {
        return None;
    }
    let key = format!("k:{{\"type\":{}}}", serde_json::Value::String(kind.into()));
    let mut by: Vec<&str> = node
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| m.manager.as_deref().is_some_and(|n| n != manager && n != legacy))
        .filter(|m| {
            let fields = m.fields_v1.as_ref().map(|f| &f.0);
            let entry = fields.and_then(|f| f.get("f:status")?.get("f:conditions")?.get(&key));
            entry.is_some_and(|e| e.get("f:status").is_some() || e.get("f:reason").is_some())
        })
        .filter_map(|m| m.manager.as_deref())
        .collect();
    by.sort_unstable();
    by.dedup();
    if by.is_empty() {
        // Our own fields: a view of the Node from before our last write, not another writer.
        return None;
    }
    Some(Overwrite { by: by.join(", "), status: shown.status.clone(), reason })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::values::verdict::Status;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
    use serde_json::json;

    fn verdict(status: Status, reason: &str) -> Verdict {
        Verdict { status, reason: reason.into(), message: String::new(), record: None }
    }

    /// A Node showing `status`/`reason` for GPUHealthy, its fields written by `owners`.
    fn node(status: &str, reason: &str, owners: &[(&str, serde_json::Value)]) -> Seen<Node> {
        let mut n = Node::default();
        let c = NodeCondition {
            type_: "GPUHealthy".into(),
            status: status.into(),
            reason: Some(reason.into()),
            ..NodeCondition::default()
        };
        n.status = Some(NodeStatus { conditions: Some(vec![c]), ..NodeStatus::default() });
        let entries = owners.iter().map(|(m, f)| ManagedFieldsEntry {
            manager: Some(m.to_string()),
            operation: Some("Update".into()),
            subresource: Some("status".into()),
            fields_v1: Some(FieldsV1(f.clone())),
            ..Default::default()
        });
        n.metadata.managed_fields = Some(entries.collect());
        Seen::Present(n)
    }

    fn owning(fields: &[&str]) -> serde_json::Value {
        let entry: serde_json::Map<String, serde_json::Value> =
            fields.iter().map(|f| (format!("f:{f}"), json!({}))).collect();
        json!({"f:status": {"f:conditions": {"k:{\"type\":\"GPUHealthy\"}": entry}}})
    }

    #[test]
    fn another_writer_of_our_status_is_named() {
        let fault = verdict(Status::False, "XidCritical");
        let seen = node(
            "True",
            "Healthy",
            &[
                ("nvlabel", owning(&["type", "message"])),
                ("eks-node-monitoring-agent", owning(&["status", "reason"])),
            ],
        );
        let found = overwritten(&seen, "GPUHealthy", "nvlabel", "nvlabel", &fault);
        let want = Overwrite {
            by: "eks-node-monitoring-agent".into(),
            status: "True".into(),
            reason: "Healthy".into(),
        };
        assert_eq!(found, Some(want));
        // Only the reason changed: an overwrite too.
        let seen = node("False", "Other", &[("kubectl-patch", owning(&["reason"]))]);
        assert_eq!(
            overwritten(&seen, "GPUHealthy", "nvlabel", "nvlabel", &fault).unwrap().by,
            "kubectl-patch"
        );
    }

    #[test]
    fn what_is_no_overwrite() {
        let fault = verdict(Status::False, "XidCritical");
        let other = [("kubectl-patch", owning(&["status", "reason"]))];
        let kind = "GPUHealthy";
        // The Node shows our verdict.
        assert_eq!(
            overwritten(&node("False", "XidCritical", &other), kind, "nvlabel", "nvlabel", &fault),
            None
        );
        // A clear by hand keeps its meaning.
        let cleared = node("True", CLEARED_BY_ADMIN, &other);
        assert_eq!(overwritten(&cleared, kind, "nvlabel", "nvlabel", &fault), None);
        // Gone (a prune), or the Node not known.
        let pruned = Node { status: Some(NodeStatus::default()), ..Node::default() };
        assert_eq!(overwritten(&Seen::Present(pruned), kind, "nvlabel", "nvlabel", &fault), None);
        assert_eq!(overwritten(&Seen::Unknown, kind, "nvlabel", "nvlabel", &fault), None);
        // A view from before our own last write: the fields are still ours (or our older manager's).
        let stale = node("True", "GpusHealthy", &[("nvlabel-a", owning(&["status", "reason"]))]);
        assert_eq!(overwritten(&stale, kind, "nvlabel-a", "nvlabel", &fault), None);
        let legacy = node("True", "GpusHealthy", &[("nvlabel", owning(&["status", "reason"]))]);
        assert_eq!(overwritten(&legacy, kind, "nvlabel-a", "nvlabel", &fault), None);
        // Another condition type's writer is no writer of ours.
        assert_eq!(
            overwritten(&node("True", "Healthy", &other), "Other", "nvlabel", "nvlabel", &fault),
            None
        );
    }
}
