//! Required node affinity on stored pods: every shape of term — empty, matchFields
//! only, expressions — ends up meaning the pod's terms AND the group's, as the API
//! server stores it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelectorTerm, Pod};
use pod_director_testkit::scheduler::{TestNode, terms_match};
use serde_json::{Value, json};

use crate::harness::Env;
use crate::harness::k8s::{IMAGE, pod_from, required_terms};

/// The e2e groups' required term (e2e/scenarios/values.yaml).
fn group_terms() -> Vec<NodeSelectorTerm> {
    serde_json::from_value(json!([{"matchExpressions": [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a", "zone-b"]}
    ]}]))
    .expect("terms")
}

fn with_terms(name: &str, terms: Value) -> Pod {
    pod_from(json!({
        "metadata": {"name": name},
        "spec": {
            "containers": [{"name": "app", "image": IMAGE}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}},
        },
    }))
}

fn nodes() -> Vec<TestNode> {
    let mut out = Vec::new();
    for name in ["node-1", "node-2"] {
        for zone in [None, Some("zone-a"), Some("zone-c")] {
            for arch in [None, Some("amd64"), Some("arm64")] {
                let mut labels = BTreeMap::new();
                if let Some(z) = zone {
                    labels.insert("topology.kubernetes.io/zone", z);
                }
                if let Some(a) = arch {
                    labels.insert("e2e.pod-director.io/arch", a);
                }
                out.push(TestNode { name, labels });
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_pods_require_exactly_the_pods_terms_and_the_groups_for_every_term_shape() {
    let env = Env::start("affinity").await;
    let ns = env.namespace(Some("e2e-enforce")).await;
    let shapes = [
        (
            "empty-and-zone",
            json!([{}, {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}]}]),
        ),
        ("never", json!([{"matchExpressions": []}])),
        (
            "by-name",
            json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]),
        ),
        (
            "mixed",
            json!([
                {"matchExpressions": [{"key": "e2e.pod-director.io/arch", "operator": "In", "values": ["arm64"]}],
                 "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node-2"]}]},
                {},
                {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["zone-b"]}]},
            ]),
        ),
    ];
    for (name, terms) in shapes {
        let submitted = with_terms(name, terms.clone());
        let created = env.create_admitted_pod(&ns, &submitted).await;
        let stored = env.get_pod(&ns, name).await;
        let (pod_terms, result) = (required_terms(&submitted), required_terms(&stored));
        for node in nodes() {
            assert_eq!(
                terms_match(&node, &result),
                terms_match(&node, &pod_terms) && terms_match(&node, &group_terms()),
                "{name}: node {} {:?}: pod terms {terms} stored as {:?}",
                node.name,
                node.labels,
                serde_json::to_value(&result).unwrap_or_default()
            );
        }
        assert_eq!(created.status, http::StatusCode::CREATED);
        let decision = env.decision(&ns, name, "mutate").await;
        assert_eq!(decision.get("placement.conflicts"), &Value::Null, "{name}: no conflict");
    }
    // The empty term is kept (it matches nothing) and never turned into the group's.
    let stored = required_terms(&env.get_pod(&ns, "empty-and-zone").await);
    assert_eq!(stored.len(), 2);
    assert!(stored[0].match_expressions.as_deref().unwrap_or_default().is_empty());
    let never = required_terms(&env.get_pod(&ns, "never").await);
    assert!(
        nodes().iter().all(|n| !terms_match(n, &never)),
        "a pod that could never be scheduled still cannot: {never:?}"
    );
    let by_name = required_terms(&env.get_pod(&ns, "by-name").await);
    assert_eq!(
        serde_json::to_value(&by_name).unwrap_or_default(),
        json!([{
            "matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a", "zone-b"]}],
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}],
        }]),
        "a matchFields-only term keeps its fields and gets the group's expressions"
    );
}
