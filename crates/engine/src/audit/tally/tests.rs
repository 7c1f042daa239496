use super::*;

fn meta(managed: serde_json::Value) -> ObjectMeta {
    serde_json::from_value(serde_json::json!({"name": "team-a", "managedFields": managed})).expect("metadata")
}

#[test]
fn a_group_label_written_through_the_status_subresource_is_named_with_its_writer() {
    let labels = serde_json::json!({"f:metadata": {"f:labels": {"f:pod-director/group": {}}}});
    let through_status = meta(serde_json::json!([
        {"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1", "time": "2026-12-01T10:00:00Z",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:other": {}}}}},
        {"manager": "curl", "operation": "Update", "apiVersion": "v1", "time": "2026-12-02T10:00:00Z",
         "fieldsType": "FieldsV1", "fieldsV1": labels, "subresource": "status"},
    ]));
    let write = label_written_through_subresource(&through_status, "pod-director/group").expect("seen");
    assert_eq!(write.subresource, "status");
    assert!(
        write.by.starts_with("field manager \"curl\" at 2026-12-02T10:00:00"),
        "{write:?}"
    );
    // The same label written through the namespace itself is the guard's business, seen at the time.
    let direct = meta(serde_json::json!([
        {"manager": "kubectl-label", "operation": "Update", "apiVersion": "v1",
         "fieldsType": "FieldsV1", "fieldsV1": labels},
    ]));
    assert_eq!(label_written_through_subresource(&direct, "pod-director/group"), None);
    // Another label through finalize is not the group label.
    let other = meta(serde_json::json!([
        {"manager": "m", "operation": "Update", "apiVersion": "v1", "subresource": "finalize",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:team": {}}}}},
    ]));
    assert_eq!(label_written_through_subresource(&other, "pod-director/group"), None);
}
