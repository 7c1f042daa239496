//! Reviews with a Node cache: the node a pod names is looked up before
//! deciding, a lookup that cannot be answered makes an enforce decision
//! undecidable (503), and every decision logs its feasible-node counts.

use std::sync::Arc;

use serde_json::json;

use super::super::*;
use crate::app::Metrics;
use crate::testing::{StaticNodes, answer};
use pod_director_engine::testing::{assert_contains, node};

const CONFIG: &str = "groups:\n  ci: {mode: enforce, nodeSelector: {pool: ci}, tolerations: [{key: dedicated, operator: Equal, value: ci, effect: NoSchedule}]}\n  shadow: {mode: dryRun, nodeSelector: {pool: ci}, tolerations: [{key: dedicated, operator: Equal, value: ci, effect: NoSchedule}]}\n";

fn nodes() -> Arc<StaticNodes> {
    let nodes = StaticNodes::new();
    let tainted = node("ci-1", &[("pool", "ci")], &[("dedicated", "ci", "NoSchedule")], false);
    nodes.insert(tainted);
    nodes.insert(node("gpu-1", &[("pool", "gpu")], &[], false));
    Arc::new(nodes)
}

fn admission(nodes: Arc<StaticNodes>) -> (Admission, Metrics) {
    let (admission, metrics) = crate::testing::admission(CONFIG, &[("team-ci", "ci"), ("team-shadow", "shadow")]);
    let node_metrics = metrics.nodes.clone();
    (admission.with_nodes(Arc::new(Nodes::new(nodes)), node_metrics), metrics)
}

/// A pod CREATE in `namespace`, bound to `node` when given, already carrying the ci placement.
fn review(namespace: &str, node: Option<&str>) -> Vec<u8> {
    let mut spec = json!({
        "containers": [{"name": "web", "image": "nginx"}],
        "nodeSelector": {"pool": "ci"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ci", "effect": "NoSchedule"}],
    });
    if let Some(node) = node {
        spec["nodeName"] = json!(node);
    }
    let pod =
        json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "web", "namespace": namespace}, "spec": spec});
    pod_director_testkit::fixtures::Review::pod("CREATE", pod)
        .uid("u-1")
        .user("tenant", &[])
        .bytes()
}

#[tokio::test]
async fn a_pod_on_a_node_outside_its_enforce_group_is_denied_at_validate() {
    let (admission, metrics) = admission(nodes());
    let (status, value) = answer(&admission, Webhook::Validate, &review("team-ci", Some("gpu-1"))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(value["response"]["allowed"], false);
    let message = value["response"]["status"]["message"].as_str().unwrap_or_default();
    assert_contains(message, r#"node "gpu-1" is not a node of the group"#);
    let (_, value) = answer(&admission, Webhook::Validate, &review("team-ci", Some("ci-1"))).await;
    assert_eq!(value["response"]["allowed"], true, "a node of the group");
    assert_contains(
        &metrics.encode(),
        r#"pod_director_node_lookups_total{result="cached"} 2"#,
    );
}

#[tokio::test]
async fn a_node_not_cached_is_fetched_before_deciding() {
    let nodes = nodes();
    nodes.insert_remote(node("fresh", &[("pool", "gpu")], &[], false));
    let (admission, metrics) = admission(nodes);
    let (_, value) = answer(&admission, Webhook::Validate, &review("team-ci", Some("fresh"))).await;
    assert_eq!(value["response"]["allowed"], false, "{value}");
    let (_, value) = answer(&admission, Webhook::Validate, &review("team-ci", Some("ghost"))).await;
    let message = value["response"]["status"]["message"].as_str().unwrap_or_default();
    assert_contains(message, r#"node "ghost" does not exist"#);
    let text = metrics.encode();
    assert_contains(&text, r#"pod_director_node_lookups_total{result="fetched"} 1"#);
    assert_contains(&text, r#"pod_director_node_lookups_total{result="not_found"} 1"#);
}

#[tokio::test]
async fn an_unanswerable_node_lookup_is_a_503_for_enforce_and_not_for_dry_run() {
    let nodes = nodes();
    nodes.set_unreachable(true);
    let (admission, _) = admission(nodes);
    let (status, value) = answer(&admission, Webhook::Validate, &review("team-ci", Some("fresh"))).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{value}");
    assert_eq!(value["response"]["status"]["reason"], "ServiceUnavailable");
    assert!(
        value["response"]["status"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("fresh"),
        "{value}"
    );
    let (status, value) = answer(&admission, Webhook::Validate, &review("team-shadow", Some("fresh"))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(value["response"]["allowed"], true, "a dryRun group is never blocked");
    let (status, _) = answer(&admission, Webhook::Mutate, &review("team-ci", Some("fresh"))).await;
    assert_eq!(status, StatusCode::OK, "/mutate does not look the node up");
}

#[tokio::test]
async fn readiness_waits_for_the_node_cache() {
    let nodes = nodes();
    nodes.set_ready(false);
    let (admission, _) = admission(nodes.clone());
    assert!(!admission.is_ready());
    nodes.set_ready(true);
    assert!(admission.is_ready());
    assert_eq!(admission.cached_nodes(), Some(2));
}
