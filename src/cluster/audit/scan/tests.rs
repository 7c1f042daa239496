//! The scan against an in-process API server that pages (`testing::PagedCluster`).

use super::{ScanOptions, scan};
use pod_director_engine::audit::Source;

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
