//! Who else writes nvlabel's labels: the field manager a fight is with, read from the object's
//! `managedFields`, so the one line that reports a fight names the other writer.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The field managers other than `ours` that last wrote one of `keys` under `path` (for a Node
/// `["f:metadata", "f:labels"]`, for a NodeFeature `["f:spec", "f:labels"]`). A writer that
/// removed a label owns nothing of it any more: then the latest other writer of that map is named.
pub fn field_managers<'a>(
    meta: &ObjectMeta,
    ours: &str,
    path: [&str; 2],
    keys: impl Iterator<Item = &'a String> + Clone,
) -> Option<String> {
    let entries = meta.managed_fields.as_ref()?;
    let others = entries.iter().filter(|m| m.manager.as_deref().is_some_and(|n| n != ours));
    let map = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry| {
        m.fields_v1.as_ref()?.0.get(path[0])?.get(path[1])?.as_object().cloned()
    };
    let mut owning: Vec<&str> = others
        .clone()
        .filter(|m| map(m).is_some_and(|f| keys.clone().any(|k| f.contains_key(&format!("f:{k}")))))
        .filter_map(|m| m.manager.as_deref())
        .collect();
    owning.dedup();
    if !owning.is_empty() {
        return Some(owning.join(", "));
    }
    others
        .filter(|m| map(m).is_some())
        .max_by_key(|m| m.time.clone().map(|t| t.0))
        .and_then(|m| m.manager.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
    use serde_json::json;

    fn entry(manager: &str, fields: serde_json::Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some("Update".into()),
            fields_v1: Some(FieldsV1(fields)),
            ..Default::default()
        }
    }

    #[test]
    fn the_writer_owning_one_of_our_labels_is_named_not_ourselves() {
        let meta = ObjectMeta {
            managed_fields: Some(vec![
                entry("nvlabel", json!({"f:metadata": {"f:labels": {"f:nvidia.com/gpu.count": {}}}})),
                entry("kubelet", json!({"f:metadata": {"f:labels": {"f:kubernetes.io/os": {}}}})),
                entry("flipper", json!({"f:metadata": {"f:labels": {"f:nvidia.com/gpu.product": {}}}})),
            ]),
            ..Default::default()
        };
        let keys = ["nvidia.com/gpu.count".to_string(), "nvidia.com/gpu.product".to_string()];
        let named = field_managers(&meta, "nvlabel", ["f:metadata", "f:labels"], keys.iter());
        assert_eq!(named.as_deref(), Some("flipper"));
    }
}
