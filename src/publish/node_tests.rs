//! The Node writer's reading of its own managedFields entry.

use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};

fn entry(subresource: Option<&str>, fields: serde_json::Value) -> ManagedFieldsEntry {
    ManagedFieldsEntry {
        manager: Some(FIELD_MANAGER.into()),
        operation: Some("Apply".into()),
        subresource: subresource.map(String::from),
        fields_v1: Some(FieldsV1(fields)),
        ..Default::default()
    }
}

#[test]
fn the_labels_are_read_from_the_main_resources_entry_not_the_status_one() {
    let mut node = Node::default();
    node.metadata.managed_fields = Some(vec![
        entry(Some("status"), json!({"f:metadata": {"f:annotations": {"f:x": {}}}, "f:status": {}})),
        entry(None, json!({"f:metadata": {"f:labels": {"f:nvidia.com/gpu.count": {}}}})),
    ]);
    let owned = owned_labels(&node).unwrap();
    assert_eq!(owned.into_iter().collect::<Vec<_>>(), vec!["nvidia.com/gpu.count".to_string()]);
}
