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

#[test]
fn a_namespace_whose_group_and_in_tree_annotations_contradict_is_a_warning_of_the_scan() {
    let config = crate::testing::config("groups:\n  gpu:\n    nodeSelector: {pool: gpu}\n");
    let namespace = |name: &str, selector: &str| -> ObjectMeta {
        serde_json::from_value(serde_json::json!({
            "name": name,
            "labels": {"pod-director/group": "gpu"},
            "annotations": {crate::in_tree::NODE_SELECTOR_ANNOTATION: selector},
        }))
        .expect("metadata")
    };
    let mut scan = Scan::new(&config, None, None);
    scan.namespace(namespace("agrees", "pool=gpu"));
    scan.namespace(namespace("contradicts", "pool=team"));
    let audit = scan.finish(Duration::ZERO);
    assert_eq!(audit.warnings.len(), 1, "{:?}", audit.warnings);
    crate::testing::assert_contains(
        &audit.warnings[0],
        "nodeSelector pool: the in-tree selector of namespace contradicts sets team, group gpu sets gpu",
    );
    // Both are the in-tree rule's too (compatibility off: holes).
    assert_eq!(
        audit.in_tree.namespaces.keys().collect::<Vec<_>>(),
        ["agrees", "contradicts"]
    );
}

#[test]
fn a_namespace_being_deleted_is_no_in_tree_hole_and_gets_no_probe() {
    let config = crate::testing::config("groups: {}\n");
    let namespace = |name: &str, deleted: Option<&str>| -> ObjectMeta {
        serde_json::from_value(serde_json::json!({
            "name": name,
            "deletionTimestamp": deleted,
            "annotations": {crate::in_tree::NODE_SELECTOR_ANNOTATION: "pool=a"},
        }))
        .expect("metadata")
    };
    let mut scan = Scan::new(&config, None, None);
    // Listed in name order: the namespace being deleted comes first.
    scan.namespace(namespace("a-leaving", Some("2026-12-06T22:00:00Z")));
    scan.namespace(namespace("b-staying", None));
    let probed: Vec<String> = scan.plugin_probes().into_iter().map(|p| p.namespace).collect();
    assert_eq!(probed, ["b-staying"]);
    assert_eq!(scan.namespaces(), ["b-staying"]);
    let audit = scan.finish(Duration::ZERO);
    assert_eq!(audit.in_tree.namespaces.keys().collect::<Vec<_>>(), ["b-staying"]);
}
