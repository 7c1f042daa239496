//! The reservation decision: who intrudes, who is exempt, what UPDATE may introduce — and a
//! property test of "intruder" against an independent implementation of the toleration rules.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Toleration;
use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::placement::{NodeInfo, NodeView, Requester};
use crate::testing::{node, toleration};

fn config(mode: &str) -> Config {
    serde_json::from_value(json!({
        "groups": {
            "gpu": {
                "nodeSelector": {"pool": "gpu"},
                "tolerations": [
                    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
                    {"key": "soft", "operator": "Exists", "effect": "PreferNoSchedule"}
                ],
                "reserve": {"mode": mode, "allow": {"namespaces": ["ml-admin"], "users": ["alice"], "groups": ["gpu-admins"], "serviceAccounts": ["ops/runner"]}}
            },
            "ci": {
                "nodeSelector": {"pool": "ci"},
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ci", "effect": "NoSchedule"}],
                "reserve": {}
            },
            "web": {}
        }
    }))
    .expect("a config")
}

fn labels(group: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("pod-director/group".to_owned(), group.to_owned())])
}

fn pod(spec: serde_json::Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).expect("a pod")
}

fn pool() -> Vec<Arc<NodeInfo>> {
    vec![
        Arc::new(node(
            "gpu-1",
            &[("pool", "gpu")],
            &[("nvidia.com/gpu", "", "NoSchedule")],
            false,
        )),
        Arc::new(node(
            "gpu-2",
            &[("pool", "gpu"), ("zone", "b")],
            &[("nvidia.com/gpu", "", "NoSchedule")],
            false,
        )),
        Arc::new(node(
            "ci-1",
            &[("pool", "ci")],
            &[("dedicated", "ci", "NoSchedule")],
            false,
        )),
        Arc::new(node("web-1", &[("pool", "web")], &[], false)),
    ]
}

fn decide_as(config: &Config, ns: &str, group: Option<&str>, pod: &Pod, old: Option<&Pod>, who: Requester) -> Outcome {
    let labels = group.map(labels).unwrap_or_default();
    let nodes = pool();
    let ctx = Context {
        requester: who,
        nodes: Some(&nodes as &dyn NodeView),
    };
    decide(config, &Namespace::new(ns, &labels), pod, old, &ctx)
}

fn tenant() -> Requester {
    Requester::new("tenant", &["system:authenticated"])
}

#[test]
fn each_way_in_is_an_intrusion_denied_in_enforce_and_reported_in_dry_run() {
    let ways = [
        (
            "the wildcard toleration",
            json!({"tolerations": [{"operator": "Exists"}]}),
        ),
        (
            "an Exists toleration of the key",
            json!({"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}),
        ),
        (
            "a copied toleration",
            json!({"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}),
        ),
        (
            "an Equal toleration of any value",
            json!({"tolerations": [{"key": "nvidia.com/gpu", "value": "x", "effect": "NoSchedule"}]}),
        ),
        ("a pool node's name", json!({"nodeName": "gpu-1"})),
    ];
    for (what, spec) in ways {
        let pod = pod(spec);
        let enforce = decide_as(&config("enforce"), "batch", None, &pod, None, tenant());
        assert_eq!(enforce.decision, Decision::Denied, "{what}: {enforce:?}");
        let message = enforce.message.clone().unwrap_or_default();
        assert!(
            message.contains("\"gpu\"") && message.contains("reserve.allow"),
            "{what}: {message}"
        );
        assert_eq!(enforce.group.as_deref(), Some("gpu"), "{what}");
        let dry = decide_as(&config("dryRun"), "batch", None, &pod, None, tenant());
        assert_eq!(dry.decision, Decision::WouldDeny, "{what}: {dry:?}");
        assert!(dry.allowed(), "{what}: dryRun admits");
        assert!(
            dry.reservation.iter().any(|i| i.group == "gpu" && i.exempt.is_none()),
            "{what}"
        );
    }
}

#[test]
fn the_pool_count_is_the_pool_nodes_the_intruder_could_land_on() {
    let zone_b = pod(json!({"tolerations": [{"operator": "Exists"}], "nodeSelector": {"zone": "b"}}));
    let out = decide_as(&config("dryRun"), "batch", None, &zone_b, None, tenant());
    let gpu = out
        .reservation
        .iter()
        .find(|i| i.group == "gpu")
        .expect("intrudes on gpu");
    assert_eq!(gpu.pool_nodes, Some((1, 2)), "{gpu:?}");
    assert!(gpu.to_string().contains("1 of the pool's 2 nodes"), "{gpu}");
    // The wildcard toleration intrudes on the ci pool too.
    assert!(out.reservation.iter().any(|i| i.group == "ci"));
}

#[test]
fn what_reserves_nothing_does_not_intrude() {
    let harmless = [
        json!({}),
        json!({"tolerations": [{"key": "soft", "operator": "Exists", "effect": "PreferNoSchedule"}]}),
        json!({"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "PreferNoSchedule"}]}),
        // DefaultTolerationSeconds gives every pod these.
        json!({"tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        ]}),
        json!({"tolerations": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}),
        json!({"nodeName": "web-1"}),
        json!({"nodeName": "no-such-node"}),
    ];
    for spec in harmless {
        let out = decide_as(&config("enforce"), "batch", None, &pod(spec.clone()), None, tenant());
        assert_eq!(out.decision, Decision::Noop, "{spec}: {out:?}");
        assert!(out.reservation.is_empty(), "{spec}");
    }
}

#[test]
fn the_group_s_own_pods_and_excluded_namespaces_are_no_intruders() {
    let wildcard = pod(json!({"tolerations": [{"operator": "Exists"}]}));
    let own = decide_as(&config("enforce"), "ml", Some("gpu"), &wildcard, None, tenant());
    assert!(own.reservation.iter().all(|i| i.group != "gpu"), "{own:?}");
    assert!(
        own.reservation.iter().any(|i| i.group == "ci"),
        "but another group's pool is reserved from it"
    );
    let system = decide_as(&config("enforce"), "kube-system", None, &wildcard, None, tenant());
    assert_eq!(system.decision, Decision::Skipped);
    assert_eq!(system.skip_reason, Some(SkipReason::ExcludedNamespace));
}

#[test]
fn exemptions_are_keyed_on_the_requester_never_on_the_pod() {
    let config = config("enforce");
    let daemon: Pod = serde_json::from_value(json!({
        "metadata": {"name": "agent-x", "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "u", "controller": true}]},
        "spec": {"tolerations": [{"operator": "Exists"}]}
    }))
    .expect("a pod");
    let controller = Requester::new(
        crate::config::DEFAULT_DAEMON_SET_CONTROLLER,
        &["system:serviceaccounts"],
    );
    let by_controller = decide_as(&config, "monitoring", None, &daemon, None, controller);
    assert!(by_controller.allowed(), "{by_controller:?}");
    assert!(
        by_controller
            .reservation
            .iter()
            .all(|i| i.exempt == Some(Exemption::DaemonSetPod))
    );
    // The same pod with its forged owner reference, created by a tenant.
    let forged = decide_as(&config, "monitoring", None, &daemon, None, tenant());
    assert_eq!(forged.decision, Decision::Denied, "{forged:?}");

    let wildcard = pod(json!({"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}));
    let cases = [
        ("ml-admin", tenant(), Some(Exemption::Namespace)),
        ("batch", Requester::new("alice", &[]), Some(Exemption::User)),
        ("batch", Requester::new("bob", &["gpu-admins"]), Some(Exemption::Group)),
        (
            "batch",
            Requester::new("system:serviceaccount:ops:runner", &[]),
            Some(Exemption::ServiceAccount),
        ),
        ("batch", Requester::new("system:serviceaccount:ops:other", &[]), None),
        ("batch", Requester::new("bob", &["gpu-admin"]), None),
    ];
    for (ns, who, exempt) in cases {
        let out = decide_as(&config, ns, None, &wildcard, None, who.clone());
        let gpu = out.reservation.iter().find(|i| i.group == "gpu").expect("intrudes");
        assert_eq!(gpu.exempt, exempt, "{ns} {who:?}");
        assert_eq!(out.allowed(), exempt.is_some(), "{ns} {who:?}: {out:?}");
    }
    // A mirror pod is its node's: skipped only when a node creates it.
    let mirror: Pod = serde_json::from_value(json!({
        "metadata": {"name": "m", "annotations": {"kubernetes.io/config.mirror": "x"}},
        "spec": {"nodeName": "gpu-1"}
    }))
    .expect("a pod");
    let node = Requester::new("system:node:gpu-1", &["system:nodes"]);
    assert_eq!(
        decide_as(&config, "batch", None, &mirror, None, node).decision,
        Decision::Skipped
    );
    assert_eq!(
        decide_as(&config, "batch", None, &mirror, None, tenant()).decision,
        Decision::Denied
    );
}

#[test]
fn on_update_only_what_the_update_introduces_denies() {
    let config = config("enforce");
    let before = pod(json!({"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}));
    let relabelled = before.clone();
    let out = decide_as(&config, "batch", None, &relabelled, Some(&before), tenant());
    assert_eq!(
        out.decision,
        Decision::Noop,
        "an intruder admitted before can still be updated"
    );
    let pending = pod(json!({"tolerations": [{"key": "other", "operator": "Exists"}]}));
    let gains =
        pod(json!({"tolerations": [{"key": "other", "operator": "Exists"}, {"key": "dedicated", "value": "ci"}]}));
    let out = decide_as(&config, "batch", None, &gains, Some(&pending), tenant());
    assert_eq!(out.decision, Decision::WouldDeny, "ci reserves in dryRun: {out:?}");
    assert_eq!(out.group.as_deref(), Some("ci"));
    let gains_gpu = pod(
        json!({"tolerations": [{"key": "other", "operator": "Exists"}, {"key": "nvidia.com/gpu", "operator": "Exists"}]}),
    );
    let out = decide_as(&config, "batch", None, &gains_gpu, Some(&pending), tenant());
    assert_eq!(
        (out.decision, out.group.as_deref()),
        (Decision::Denied, Some("gpu")),
        "{out:?}"
    );
}

#[test]
fn mixed_modes_deny_for_the_enforce_reservation_and_report_the_others() {
    let mut config = config("dryRun");
    if let Some(ci) = config.groups.get_mut("ci").and_then(|g| g.reserve.as_mut()) {
        ci.mode = Mode::Enforce;
    }
    let out = decide_as(
        &config,
        "batch",
        None,
        &pod(json!({"tolerations": [{"operator": "Exists"}]})),
        None,
        tenant(),
    );
    assert_eq!((out.decision, out.group.as_deref()), (Decision::Denied, Some("ci")));
    assert_eq!(out.reservation.len(), 2, "both intrusions are reported: {out:?}");
}

#[test]
fn warn_warns_the_client() {
    let out = decide_as(
        &config("warn"),
        "batch",
        None,
        &pod(json!({"nodeName": "gpu-2"})),
        None,
        tenant(),
    );
    assert_eq!(out.decision, Decision::WouldDeny);
    assert!(out.warning.as_deref().is_some_and(|w| w.contains("gpu-2")), "{out:?}");
}

#[test]
fn a_node_that_cannot_be_looked_up_is_undecidable_only_in_enforce() {
    use crate::testing::DownNodes;
    let labels = BTreeMap::new();
    let ns = Namespace::new("batch", &labels);
    let ctx = Context {
        requester: tenant(),
        nodes: Some(&DownNodes),
    };
    let bound = pod(json!({"nodeName": "gpu-1"}));
    assert_eq!(
        decide(&config("enforce"), &ns, &bound, None, &ctx).decision,
        Decision::Error
    );
    assert_ne!(
        decide(&config("dryRun"), &ns, &bound, None, &ctx).decision,
        Decision::Error
    );
}

#[test]
fn the_warnings_name_a_reservation_without_taints_and_a_group_that_intrudes() {
    let config: Config = serde_json::from_value(json!({"groups": {
        "a": {"nodeSelector": {"pool": "a"}, "reserve": {}},
        "b": {"tolerations": [{"key": "dedicated", "operator": "Exists"}], "reserve": {}},
        "c": {"tolerations": [{"key": "dedicated", "value": "c", "effect": "NoSchedule"}]}
    }}))
    .expect("config");
    let warnings = warnings(&config);
    assert!(
        warnings.iter().any(|w| w.starts_with("groups.a.reserve:")),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("groups.c.tolerations:") && w.contains("\"b\"")),
        "{warnings:?}"
    );
    assert_eq!(reserved_keys(&config), ["dedicated"]);
}

// --- the property: an independent implementation of the toleration rules ---

/// Taints a toleration of the test's alphabet can meet.
fn universe() -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for key in ["a", "b", "node.kubernetes.io/not-ready"] {
        for value in ["", "x", "y"] {
            for effect in ["NoSchedule", "NoExecute", "PreferNoSchedule"] {
                out.push((key.to_owned(), value.to_owned(), effect.to_owned()));
            }
        }
    }
    out
}

/// Kubernetes' ToleratesTaint, written again from its documentation.
fn tolerates(t: &Toleration, (key, value, effect): &(String, String, String)) -> bool {
    let t_effect = t.effect.clone().unwrap_or_default();
    let t_key = t.key.clone().unwrap_or_default();
    let op = t
        .operator
        .clone()
        .filter(|o| !o.is_empty())
        .unwrap_or_else(|| "Equal".to_owned());
    (t_effect.is_empty() || t_effect == *effect)
        && (t_key.is_empty() || t_key == *key)
        && match op.as_str() {
            "Exists" => true,
            "Equal" => t.value.clone().unwrap_or_default() == *value,
            _ => false,
        }
}

/// "The pod tolerates a taint the group's tolerations exist for": some taint that keeps pods
/// off (NoSchedule/NoExecute), of a key that is not the node lifecycle's, tolerated by both.
fn intrudes_by_enumeration(pod: &[Toleration], group: &[Toleration]) -> bool {
    universe().iter().any(|taint| {
        taint.2 != "PreferNoSchedule"
            && !taint.0.starts_with("node.kubernetes.io/")
            && group.iter().any(|g| tolerates(g, taint))
            && pod.iter().any(|p| tolerates(p, taint))
    })
}

fn a_toleration(keyless: bool) -> impl Strategy<Value = Toleration> {
    let keys: Vec<&str> = if keyless {
        vec!["", "a", "b", "node.kubernetes.io/not-ready"]
    } else {
        vec!["a", "b", "node.kubernetes.io/not-ready"]
    };
    (
        prop::sample::select(keys),
        prop::sample::select(vec!["", "Equal", "Exists"]),
        prop::sample::select(vec!["", "x", "y"]),
        prop::sample::select(vec!["", "NoSchedule", "NoExecute", "PreferNoSchedule"]),
    )
        .prop_filter("valid as the API server takes it", |(key, op, value, _)| {
            // Exists takes no value; an empty key needs Exists.
            let exists = *op == "Exists";
            (!exists || value.is_empty()) && (exists || !key.is_empty())
        })
        .prop_map(|(key, op, value, effect)| toleration(key, op, value, effect, None))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn intruder_is_exactly_tolerating_a_taint_the_group_reserves(
        group in prop::collection::vec(a_toleration(false), 1..3),
        pod_tolerations in prop::collection::vec(a_toleration(true), 0..3),
    ) {
        let config: Config = serde_json::from_value(json!({"groups": {
            "pool": {"nodeSelector": {"pool": "p"}, "tolerations": group, "reserve": {"mode": "enforce"}}
        }})).expect("config");
        let candidate = pod(json!({"tolerations": pod_tolerations}));
        let labels = BTreeMap::new();
        let ctx = Context { requester: tenant(), nodes: None };
        let out = decide(&config, &Namespace::new("other", &labels), &candidate, None, &ctx);
        let expected = intrudes_by_enumeration(&pod_tolerations, &config.groups["pool"].tolerations);
        prop_assert_eq!(out.decision == Decision::Denied, expected, "{:?}", out);
        // A witness the engine names is one both tolerate.
        for t in &pod_tolerations {
            for g in reserving_tolerations(&config.groups["pool"]) {
                if let Some(w) = shared_taint(t, g) {
                    prop_assert!(tolerates_taint(t, &w) && tolerates_taint(g, &w));
                    prop_assert!(w.effect.excludes());
                }
            }
        }
    }
}

mod binding;
