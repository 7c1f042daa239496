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

#[tokio::test]
async fn a_scan_pages_through_every_pod_and_attributes_each_refusal_to_its_workload() {
    use crate::testing::PagedCluster;
    const BARE_PODS: usize = PagedCluster::BARE_PODS;
    const CONFIG: &str = PagedCluster::CONFIG;
    let cluster = PagedCluster {
        namespaces: 3,
        deployments: 5,
        pods: 100,
    };
    // Pages of 7: every namespace's pods span several pages, one page ends mid-workload.
    let scanned = crate::testing::audit_scan(&cluster.client(), CONFIG, 7)
        .await
        .expect("a scan");
    assert_eq!((scanned.pods, scanned.templates, scanned.namespaces), (100, 3 * 5, 3));
    // The generator refuses every other bare pod and every replica of Deployment web-0.
    let refused = |n: usize| {
        (0..n)
            .filter(|i| {
                if *i < BARE_PODS {
                    i.is_multiple_of(2)
                } else {
                    i.is_multiple_of(5)
                }
            })
            .count()
    };
    assert_eq!(scanned.would_deny_pods, (refused(34) + refused(33) * 2) as u64);

    let config = pod_director_engine::testing::config(CONFIG);
    let options = ScanOptions {
        page_size: 7,
        ..ScanOptions::default()
    };
    let audit = scan(&cluster.client(), &config, None, &options, &mut |_| {})
        .await
        .expect("a scan");
    let group = &audit.groups[0];
    let web0 = group
        .would_deny
        .iter()
        .find(|f| f.namespace == "pd-audit-000" && f.workload == "Deployment/web-0" && f.source == Source::Pods)
        .expect("web-0's pods are refused under their Deployment");
    assert_eq!(
        web0.pods,
        (BARE_PODS..34).filter(|i| i.is_multiple_of(5)).count() as u64
    );
    assert!(web0.reason.contains("node-pool"), "{web0:?}");
}
