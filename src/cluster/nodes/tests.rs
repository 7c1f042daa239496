use std::sync::Mutex as StdMutex;

use http::{Request, Response, StatusCode};
use kube::client::Body;
use pod_director_engine::placement::PodSpec;
use serde_json::json;

use super::*;
use crate::metrics::Exposition;
use crate::testing::StaticNodes;

/// Node metrics on a registry of their own, and its exposition.
fn registered() -> (NodeMetrics, Exposition) {
    let mut registry = crate::metrics::registry();
    let metrics = NodeMetrics::register(&mut registry);
    (metrics, Exposition::new(registry))
}

fn node(name: &str, pool: &str) -> NodeInfo {
    pod_director_engine::testing::node(name, &[("pool", pool)], &[], false)
}

fn spec(value: serde_json::Value) -> PodSpec {
    serde_json::from_value(value).expect("a PodSpec")
}

#[test]
fn counts_are_memoised_until_the_nodes_change() {
    let source = Arc::new(StaticNodes::new());
    source.insert(node("a", "ci"));
    let nodes = Nodes::new(source.clone());
    let ci = spec(json!({"containers": [], "nodeSelector": {"pool": "ci"}}));
    assert_eq!(nodes.feasible(&Placement::of_spec(&ci)), Some(1));
    source.insert(node("b", "ci"));
    assert_eq!(
        nodes.feasible(&Placement::of_spec(&ci)),
        Some(2),
        "a new node is counted"
    );
    let tainted = pod_director_engine::testing::node("b", &[("pool", "ci")], &[("k", "", "NoSchedule")], false);
    source.insert(tainted);
    assert_eq!(nodes.feasible(&Placement::of_spec(&ci)), Some(1), "a new taint is seen");
    source.remove("a");
    assert_eq!(nodes.feasible(&Placement::of_spec(&ci)), Some(0));
}

#[test]
fn an_unchanged_node_does_not_change_the_generation() {
    let store = NodeStore::new();
    store.apply(node("a", "ci"));
    let generation = store.generation();
    store.apply(node("a", "ci"));
    assert_eq!(store.generation(), generation, "a status-only update is not a change");
    store.apply(node("a", "gpu"));
    assert_ne!(store.generation(), generation);
}

#[test]
fn no_counts_before_the_cache_has_synced() {
    let source = Arc::new(StaticNodes::new());
    source.set_ready(false);
    let nodes = Nodes::new(source);
    assert_eq!(nodes.feasible(&Placement::default()), None);
    assert_eq!(nodes.view(None).total(), None);
}

#[test]
fn group_counts_use_each_groups_own_placement() {
    let config = pod_director_engine::testing::config(
        "groups:\n  ci: {nodeSelector: {pool: ci}}\n  gpu: {nodeSelector: {pool: gpu}, tolerations: [{key: gpu, operator: Exists}]}\n",
    );
    let source = Arc::new(StaticNodes::new());
    source.insert(node("a", "ci"));
    source.insert(node("b", "ci"));
    let gpu = pod_director_engine::testing::node("g", &[("pool", "gpu")], &[("gpu", "", "NoSchedule")], false);
    source.insert(gpu);
    let nodes = Nodes::new(source);
    assert_eq!(
        nodes.group_counts(&config),
        Some(vec![("ci".to_owned(), 2), ("gpu".to_owned(), 1)])
    );
}

#[tokio::test]
async fn a_node_not_cached_is_fetched_and_a_missing_one_is_unknown() {
    let source = Arc::new(StaticNodes::new());
    source.insert(node("cached", "ci"));
    source.insert_remote(node("fresh", "ci"));
    let nodes = Nodes::new(source.clone());
    let (metrics, exposition) = registered();
    assert!(matches!(nodes.lookup("cached", &metrics).await, NodeLookup::Found(n) if &*n.name == "cached"));
    assert!(matches!(nodes.lookup("fresh", &metrics).await, NodeLookup::Found(n) if &*n.name == "fresh"));
    assert_eq!(nodes.lookup("ghost", &metrics).await, NodeLookup::Unknown);
    source.set_unreachable(true);
    assert!(matches!(nodes.lookup("ghost", &metrics).await, NodeLookup::Unavailable(why) if why.contains("ghost")));
    let text = exposition.encode();
    for result in ["cached", "fetched", "not_found", "error"] {
        assert!(
            text.contains(&format!("pod_director_node_lookups_total{{result=\"{result}\"}} 1")),
            "{result}: {text}"
        );
    }
}

/// A kube client whose "API server" answers GET /api/v1/nodes/{name}: `known` found,
/// `explode` 500, `slow` never, the rest 404.
fn fake_client(seen: Arc<StdMutex<Vec<String>>>) -> Client {
    let service = tower::service_fn(move |req: Request<Body>| {
        let seen = seen.clone();
        async move {
            let path = req.uri().path().to_owned();
            if let Ok(mut seen) = seen.lock() {
                seen.push(format!("{} {path}", req.method()));
            }
            let name = path.trim_start_matches("/api/v1/nodes/").to_owned();
            if name == "slow" {
                tokio::time::sleep(Duration::from_secs(60)).await;
            }
            let status = |code: u16, reason: &str| {
                json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code,
                       "message": format!("nodes \"{name}\": {reason}")})
            };
            let (code, body) = match name.as_str() {
                "known" => (
                    StatusCode::OK,
                    json!({"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": "known", "labels": {"pool": "ci"}, "managedFields": [{"manager": "kubelet"}]},
                           "spec": {"taints": [{"key": "dedicated", "value": "ci", "effect": "NoSchedule"}]},
                           "status": {"images": [{"names": ["busybox"], "sizeBytes": 1}]}}),
                ),
                "explode" => (StatusCode::INTERNAL_SERVER_ERROR, status(500, "InternalError")),
                _ => (StatusCode::NOT_FOUND, status(404, "NotFound")),
            };
            Response::builder()
                .status(code)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Body::from(serde_json::to_vec(&body).unwrap_or_default()))
        }
    });
    Client::new(service, "default")
}

#[tokio::test]
async fn a_live_get_keeps_only_placement_data_and_maps_404_to_unknown() {
    let seen = Arc::new(StdMutex::new(Vec::new()));
    let nodes = Nodes::new(Arc::new(KubeNodes::with_store(
        Arc::new(NodeStore::new()),
        fake_client(seen.clone()),
    )));
    let (metrics, _) = registered();
    let NodeLookup::Found(found) = nodes.lookup("known", &metrics).await else {
        panic!("known is found")
    };
    let expected =
        pod_director_engine::testing::node("known", &[("pool", "ci")], &[("dedicated", "ci", "NoSchedule")], false);
    assert_eq!(*found, expected);
    assert_eq!(nodes.lookup("ghost", &metrics).await, NodeLookup::Unknown);
    assert!(matches!(nodes.lookup("explode", &metrics).await, NodeLookup::Unavailable(why) if why.contains("explode")));
    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    assert_eq!(seen[0], "GET /api/v1/nodes/known");
}

#[tokio::test]
async fn a_live_get_that_does_not_answer_is_bounded_by_the_fetch_timeout() {
    let nodes = Nodes::new(Arc::new(KubeNodes::with_store(
        Arc::new(NodeStore::new()),
        fake_client(Arc::default()),
    )))
    .with_fetch_timeout(Duration::from_millis(50));
    let started = std::time::Instant::now();
    let lookup = nodes.lookup("slow", &registered().0).await;
    assert!(
        matches!(&lookup, NodeLookup::Unavailable(why) if why.contains("within 50ms")),
        "{lookup:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "bounded: {:?}",
        started.elapsed()
    );
}

#[test]
fn provisioners_are_memoised_until_the_nodepools_change_and_free_without_any() {
    let pools = Arc::new(ProvisionerStore::new());
    let nodes = Nodes::new(Arc::new(StaticNodes::new())).with_provisioners(pools.clone());
    let spec = spec(json!({"containers": [], "nodeSelector": {"pool": "ci"}}));
    let calls = std::cell::Cell::new(0);
    let mut make = || {
        calls.set(calls.get() + 1);
        Some(spec.clone())
    };
    assert!(nodes.provisioners(7, &mut make).is_empty());
    assert_eq!(calls.get(), 0, "without NodePools the spec is not even made");
    let ready = |name: &str, pool: &str| {
        Provisioner::karpenter(&json!({"metadata": {"name": name},
            "spec": {"template": {"metadata": {"labels": {"pool": pool}}}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}))
    };
    pools.replace_where(|_| true, vec![ready("a", "ci"), ready("b", "gpu")]);
    assert_eq!(&*nodes.provisioners(7, &mut make), [Box::from("nodepool/a")]);
    assert_eq!(&*nodes.provisioners(7, &mut make), [Box::from("nodepool/a")]);
    assert_eq!(calls.get(), 1, "remembered");
    pools.apply(ready("c", "ci"));
    assert_eq!(
        &*nodes.provisioners(7, &mut make),
        [Box::from("nodepool/a"), Box::from("nodepool/c")]
    );
    assert_eq!(calls.get(), 2, "a NodePool change is seen");
}

#[test]
fn readiness_waits_for_the_nodepools_to_be_known() {
    let pools = Arc::new(ProvisionerStore::new());
    pools.expect(2);
    let nodes = Nodes::new(Arc::new(StaticNodes::new())).with_provisioners(pools.clone());
    assert!(!nodes.is_ready());
    pools.known();
    assert!(!nodes.is_ready(), "one source of two");
    pools.known();
    assert!(nodes.is_ready());
    pools.known();
    assert!(nodes.is_ready(), "a source known twice does not underflow");
}

fn pool(name: &str) -> Provisioner {
    Provisioner::karpenter(
        &json!({"metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
    )
}

#[test]
fn the_generation_changes_only_when_the_pools_do() {
    let store = ProvisionerStore::new();
    let start = store.generation();
    store.apply(pool("b"));
    store.apply(pool("a"));
    let names: Vec<String> = store.pools().iter().map(|p| p.name.to_string()).collect();
    assert_eq!(names, ["nodepool/a", "nodepool/b"], "sorted by name");
    let generation = store.generation();
    assert_ne!(generation, start);
    store.apply(pool("a"));
    assert_eq!(store.generation(), generation, "an unchanged NodePool is not a change");
    store.delete("nodepool/a");
    assert_ne!(store.generation(), generation);
    assert_eq!(store.pools().len(), 1);
    store.delete("ghost");
    assert_eq!(store.pools().len(), 1);
}
