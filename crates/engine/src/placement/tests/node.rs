//! Engine tests with node data: feasible-node counts on every decision,
//! `onNoFeasibleNode`, and the `spec.nodeName` check at /validate.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::super::feasible::{NodeInfo, NodeView};
use super::super::*;
use crate::config::Config;
use crate::testing::{self, assert_contains};

const CONFIG: &str = r#"
groups:
  ci:
    mode: enforce
    nodeSelector: {node-pool: ci}
    tolerations: [{key: dedicated, operator: Equal, value: ci, effect: NoSchedule}]
  shadow:
    mode: dryRun
    nodeSelector: {node-pool: ci}
    tolerations: [{key: dedicated, operator: Equal, value: ci, effect: NoSchedule}]
  loud:
    mode: warn
    nodeSelector: {node-pool: ci}
  empty:
    mode: enforce
    nodeSelector: {node-pool: none}
  strict:
    mode: enforce
    onNoFeasibleNode: deny
    nodeSelector: {node-pool: none}
  strict-shadow:
    mode: dryRun
    onNoFeasibleNode: deny
    nodeSelector: {node-pool: none}
"#;

fn config() -> Config {
    testing::config(CONFIG)
}

fn node(name: &str, pool: &str, taints: &[(&str, &str, &str)], cordoned: bool) -> Arc<NodeInfo> {
    Arc::new(testing::node(name, &[("node-pool", pool)], taints, cordoned))
}

/// Two ci nodes (tainted for ci), a gpu node, a cordoned ci node (with the taint the controller manager adds to a
/// cordoned node, as on a real cluster), a ci node with a taint the group does not tolerate.
fn cluster() -> Vec<Arc<NodeInfo>> {
    vec![
        node("ci-1", "ci", &[("dedicated", "ci", "NoSchedule")], false),
        node(
            "ci-2",
            "ci",
            &[("dedicated", "ci", "NoSchedule"), ("x", "", "PreferNoSchedule")],
            false,
        ),
        node("gpu-1", "gpu", &[], false),
        node(
            "ci-cordoned",
            "ci",
            &[
                ("dedicated", "ci", "NoSchedule"),
                ("node.kubernetes.io/unschedulable", "", "NoSchedule"),
            ],
            true,
        ),
        node(
            "ci-dirty",
            "ci",
            &[("dedicated", "ci", "NoSchedule"), ("broken", "", "NoExecute")],
            false,
        ),
    ]
}

fn pod(spec: Value) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "team"},
        "spec": spec,
    }))
    .expect("a valid Pod")
}

fn plain() -> Value {
    json!({"containers": [{"name": "app", "image": "nginx"}]})
}

fn bound(node: &str) -> Value {
    let mut spec = plain();
    spec["nodeName"] = json!(node);
    spec
}

/// A spec bound to `node` that carries the ci group's placement.
fn compliant(node: &str) -> Value {
    let mut spec = bound(node);
    spec["nodeSelector"] = json!({"node-pool": "ci"});
    spec["tolerations"] = json!([{"key": "dedicated", "operator": "Equal", "value": "ci", "effect": "NoSchedule"}]);
    spec
}

/// `decide` on namespace `team` labelled for `group`.
fn in_group<T>(group: &str, decide: impl FnOnce(&Namespace<'_>) -> T) -> T {
    let labels = BTreeMap::from([("pod-director/group".to_owned(), group.to_owned())]);
    decide(&Namespace::new("team", &labels))
}

fn mutate_in(group: &str, spec: Value, nodes: &dyn NodeView) -> Outcome {
    in_group(group, |ns| {
        mutate(&config(), ns, &pod(spec), &Context::offline().with_nodes(Some(nodes)))
    })
}

fn validate_in(group: &str, spec: Value, old: Option<Value>, nodes: Option<&dyn NodeView>) -> Outcome {
    let old = old.map(pod);
    let ctx = Context::offline().with_nodes(nodes);
    in_group(group, |ns| validate(&config(), ns, &pod(spec), old.as_ref(), &ctx))
}

#[test]
fn a_decision_counts_feasible_nodes_before_and_after_the_patch() {
    let nodes = cluster();
    let out = mutate_in("ci", plain(), &nodes);
    assert_eq!(out.decision, Decision::Patched);
    assert_eq!(
        out.feasible_nodes_before,
        Some(1),
        "untolerated taints leave only gpu-1"
    );
    assert_eq!(
        out.feasible_nodes,
        Some(2),
        "ci-1 and ci-2 (PreferNoSchedule counts); not cordoned, not NoExecute-tainted"
    );
    assert!(!out.no_feasible_node);
    assert_eq!(
        out.warning, None,
        "enforce without conflicts and with nodes says nothing"
    );
}

#[test]
fn without_node_data_the_counts_are_absent_not_zero() {
    let out = in_group("ci", |ns| mutate(&config(), ns, &pod(plain()), &Context::default()));
    assert_eq!((out.feasible_nodes, out.feasible_nodes_before), (None, None));
    assert!(!out.no_feasible_node);
}

#[test]
fn skipped_and_unknown_group_decisions_count_the_pod_as_it_is() {
    let nodes = cluster();
    let out = mutate_in("undefined", plain(), &nodes);
    assert_eq!(out.decision, Decision::UnknownGroup);
    assert_eq!((out.feasible_nodes_before, out.feasible_nodes), (Some(1), Some(1)));
}

#[test]
fn no_feasible_node_warns_in_enforce_and_admits_the_patched_pod() {
    let nodes = cluster();
    let out = mutate_in("empty", plain(), &nodes);
    assert_eq!(
        (out.decision, out.allowed(), out.apply_patch()),
        (Decision::Patched, true, true)
    );
    assert_eq!(out.feasible_nodes, Some(0));
    assert!(out.no_feasible_node);
    let warning = out.warning.expect("a warning");
    assert!(
        warning.starts_with("pod-director empty: no feasible node (0 of 5 nodes match); set nodeSelector"),
        "{warning}"
    );
}

#[test]
fn no_feasible_node_is_flagged_but_silent_in_dry_run_and_spoken_in_warn() {
    let nodes: Vec<Arc<NodeInfo>> = Vec::new();
    let out = mutate_in("shadow", plain(), &nodes);
    assert_eq!(out.decision, Decision::WouldPatch);
    assert!(out.no_feasible_node);
    assert_eq!(out.feasible_nodes, Some(0));
    assert_eq!(out.warning, None);
    assert!(
        out.summary
            .starts_with("no feasible node (0 of 0 nodes match); would set"),
        "{}",
        out.summary
    );
    let out = mutate_in("loud", plain(), &nodes);
    assert!(out.warning.is_some_and(|w| w.contains("no feasible node")));
}

#[test]
fn on_no_feasible_node_deny_denies_in_enforce_and_would_deny_in_dry_run() {
    let nodes = cluster();
    let out = mutate_in("strict", plain(), &nodes);
    assert_eq!(
        (out.decision, out.allowed(), out.apply_patch()),
        (Decision::Denied, false, false)
    );
    let message = out.message.expect("a message");
    assert_contains(&message, "0 of 5 nodes match");
    assert!(message.contains("onNoFeasibleNode: warn"), "says what to do: {message}");
    assert_contains(&message, "resources not counted");
    let out = mutate_in("strict-shadow", plain(), &nodes);
    assert_eq!((out.decision, out.allowed()), (Decision::WouldDeny, true));
    assert!(out.no_feasible_node);
}

/// A Ready Karpenter NodePool whose nodes carry `node-pool: POOL` and, when given, a taint.
fn node_pool(name: &str, pool: &str, taint: Option<&str>) -> Arc<crate::provision::Provisioner> {
    let taints: Vec<Value> = taint
        .map(|key| json!({"key": key, "value": pool, "effect": "NoSchedule"}))
        .into_iter()
        .collect();
    Arc::new(crate::provision::Provisioner::karpenter(&json!({
        "metadata": {"name": name},
        "spec": {"template": {"metadata": {"labels": {"node-pool": pool}}, "spec": {"taints": taints}}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}
    })))
}

#[test]
fn a_pool_a_nodepool_can_provision_is_not_a_missing_node() {
    let nodes = cluster();
    let pools = [node_pool("none-pool", "none", None), node_pool("gpu", "gpu", None)];
    let view = crate::provision::WithProvisioners {
        nodes: &nodes,
        pools: &pools,
    };
    // deny + enforce: admitted and patched, since the NodePool can create a node.
    let out = mutate_in("strict", plain(), &view);
    assert_eq!((out.decision, out.feasible_nodes), (Decision::Patched, Some(0)));
    assert!(!out.no_feasible_node, "{out:?}");
    assert_eq!(out.provisionable_by, ["nodepool/none-pool"]);
    assert_eq!(out.warning, None, "nobody is warned");
    // warn: no "no feasible node" warning either.
    let loud = [node_pool("ci-pool", "ci", Some("dedicated"))];
    let empty = Vec::<Arc<NodeInfo>>::new();
    let view = crate::provision::WithProvisioners {
        nodes: &empty,
        pools: &loud,
    };
    let out = mutate_in("loud", plain(), &view);
    assert!(
        out.no_feasible_node && out.provisionable_by.is_empty(),
        "the group does not tolerate the taint: {out:?}"
    );
    assert!(out.warning.is_some_and(|w| w.contains("no feasible node")));
    let out = mutate_in("ci", plain(), &view);
    assert_eq!(out.feasible_nodes, Some(0));
    assert_eq!(
        out.provisionable_by,
        ["nodepool/ci-pool"],
        "the patched pod tolerates it"
    );
    // Feasible nodes exist: NodePools are not consulted.
    let out = mutate_in(
        "ci",
        plain(),
        &crate::provision::WithProvisioners {
            nodes: &nodes,
            pools: &loud,
        },
    );
    assert!(out.feasible_nodes.is_some_and(|n| n > 0) && out.provisionable_by.is_empty());
}

#[test]
fn a_nodepool_that_cannot_serve_the_pod_still_leaves_deny_denying() {
    let nodes = cluster();
    let pools = [node_pool("gpu", "gpu", None), node_pool("tainted", "none", Some("gpu"))];
    let view = crate::provision::WithProvisioners {
        nodes: &nodes,
        pools: &pools,
    };
    let out = mutate_in("strict", plain(), &view);
    assert_eq!(out.decision, Decision::Denied);
    assert!(out.no_feasible_node && out.provisionable_by.is_empty(), "{out:?}");
}

#[test]
fn a_group_that_declares_its_pool_provisioned_on_demand_is_not_denied() {
    let config = testing::config(
        "groups:\n  batch: {mode: enforce, onNoFeasibleNode: deny, nodes: {provisionedOnDemand: true}, nodeSelector: {node-pool: none}}\n",
    );
    let nodes = cluster();
    let ctx = Context::offline().with_nodes(Some(&nodes));
    let out = in_group("batch", |ns| mutate(&config, ns, &pod(plain()), &ctx));
    assert_eq!(out.decision, Decision::Patched);
    assert_eq!(out.provisionable_by, [crate::placement::feasible::DECLARED_PROVISIONER]);
    assert!(!out.no_feasible_node);
    let out = in_group("batch", |ns| validate(&config, ns, &pod(plain()), None, &ctx));
    assert!(!out.no_feasible_node, "/validate agrees: {out:?}");
}

#[test]
fn the_top_level_on_no_feasible_node_is_the_groups_default() {
    let config = testing::config(
        "onNoFeasibleNode: deny\ngroups:\n  g: {mode: enforce, nodeSelector: {node-pool: none}}\n  h: {mode: enforce, onNoFeasibleNode: warn, nodeSelector: {node-pool: none}}\n",
    );
    let nodes = cluster();
    let ctx = Context::offline().with_nodes(Some(&nodes));
    for (group, decision) in [("g", Decision::Denied), ("h", Decision::Patched)] {
        let out = in_group(group, |ns| mutate(&config, ns, &pod(plain()), &ctx));
        assert_eq!(out.decision, decision, "{group}");
    }
}

#[test]
fn a_pod_bound_to_a_node_is_decided_at_mutate_like_any_other() {
    let nodes = cluster();
    let out = mutate_in("ci", bound("gpu-1"), &nodes);
    assert_eq!(out.decision, Decision::Patched);
    assert_eq!(out.skip_reason, None);
}

#[test]
fn a_pod_bound_to_a_node_outside_its_group_is_denied_in_enforce_naming_node_and_requirement() {
    let nodes = cluster();
    let out = validate_in("ci", compliant("gpu-1"), None, Some(&nodes));
    assert_eq!((out.decision, out.allowed()), (Decision::Denied, false));
    assert_eq!(out.violations.len(), 1, "{:?}", out.violations);
    let message = out.message.expect("a message");
    assert_contains(
        &message,
        r#"spec.nodeName: node "gpu-1" is not a node of the group: nodeSelector node-pool=ci: the node's label node-pool is "gpu""#,
    );
    assert!(message.contains("remove spec.nodeName"), "says what to do: {message}");
}

#[test]
fn an_untolerated_taint_or_cordon_of_the_named_node_is_named() {
    let nodes = cluster();
    let out = validate_in("ci", compliant("ci-dirty"), None, Some(&nodes));
    assert!(
        out.message
            .as_deref()
            .is_some_and(|m| m.contains("taint broken:NoExecute is not tolerated")),
        "{out:?}"
    );
    let out = validate_in("ci", compliant("ci-1"), None, Some(&nodes));
    assert_eq!(out.decision, Decision::Noop, "an allowed node: {:?}", out.violations);
    // A cordon, and the unschedulable taint that comes with it, do not stop a pod that names its node (the
    // scheduler is bypassed); the node is the group's. Nor in dryRun.
    let out = validate_in("ci", compliant("ci-cordoned"), None, Some(&nodes));
    assert_eq!(out.decision, Decision::Noop, "{out:?}");
    let out = validate_in("shadow", bound("ci-cordoned"), None, Some(&nodes));
    assert_eq!(out.decision, Decision::Noop, "{out:?}");
    // Another NoSchedule taint still tells a node of another pool.
    let out = validate_in("ci", compliant("ci-dirty"), None, Some(&nodes));
    assert_eq!(out.decision, Decision::Denied, "{out:?}");
}

#[test]
fn in_dry_run_the_node_is_checked_against_the_pod_as_enforce_would_have_it() {
    let nodes = cluster();
    // The unpatched pod lacks the group's toleration; enforce would add it, so ci-1 is fine.
    let out = validate_in("shadow", bound("ci-1"), None, Some(&nodes));
    assert!(
        !out.violations.iter().any(|v| v.field == "spec.nodeName"),
        "{:?}",
        out.violations
    );
    let out = validate_in("shadow", bound("gpu-1"), None, Some(&nodes));
    assert_eq!((out.decision, out.allowed()), (Decision::WouldDeny, true));
    assert!(
        out.violations
            .iter()
            .any(|v| v.field == "spec.nodeName" && v.message.contains("gpu-1"))
    );
}

#[test]
fn an_unknown_node_is_denied_in_enforce_and_would_deny_in_dry_run() {
    let nodes = cluster();
    let out = validate_in("ci", bound("ghost"), None, Some(&nodes));
    assert_eq!(out.decision, Decision::Denied);
    assert!(
        out.message
            .as_deref()
            .is_some_and(|m| m.contains(r#"node "ghost" does not exist"#)),
        "{out:?}"
    );
    let out = validate_in("shadow", bound("ghost"), None, Some(&nodes));
    assert_eq!(out.decision, Decision::WouldDeny);
}

use crate::testing::DownNodes;

#[test]
fn a_node_that_cannot_be_looked_up_makes_an_enforce_decision_undecidable() {
    let out = validate_in("ci", bound("fresh"), None, Some(&DownNodes));
    assert_eq!((out.decision, out.allowed()), (Decision::Error, false));
    assert!(out.message.is_some_and(|m| m.contains("fresh")));
    let out = validate_in("shadow", bound("fresh"), None, Some(&DownNodes));
    assert_ne!(out.decision, Decision::Error, "dryRun is never blocked");
    assert_contains(&out.summary, "not checked");
}

#[test]
fn an_update_keeping_the_node_does_not_look_it_up_again() {
    let out = validate_in("ci", compliant("ghost"), Some(compliant("ghost")), Some(&DownNodes));
    assert_eq!(out.decision, Decision::Noop, "bound earlier: {out:?}");
}

#[test]
fn skipped_pods_with_a_node_name_are_not_checked() {
    let labels = BTreeMap::new();
    let ns = Namespace::new("kube-system", &labels);
    let ctx = Context::offline().with_nodes(Some(&DownNodes));
    let out = validate(&config(), &ns, &pod(bound("ghost")), None, &ctx);
    assert_eq!(out.decision, Decision::Skipped);
    assert_eq!(needs_bound_node(&config(), &ns, &pod(bound("ghost")), None), None);
}

/// A Binding of a pending pod (as stored: the group's placement, no node) to `target`, by `user`.
fn bind_in(group: &str, target: &str, user: &str, nodes: &dyn NodeView) -> Outcome {
    let mut pending = plain();
    pending["nodeSelector"] = json!({"node-pool": "ci"});
    pending["tolerations"] = json!([{"key": "dedicated", "operator": "Equal", "value": "ci", "effect": "NoSchedule"}]);
    let ctx = Context {
        requester: Requester::new(user, &["system:authenticated"]),
        nodes: Some(nodes),
    };
    let pod = pod(pending);
    in_group(group, |namespace| {
        let view = crate::decision::View {
            config: &config(),
            namespace,
            context: &ctx,
        };
        let binding = crate::decision::Subject::Binding { pod: &pod, target };
        crate::decision::decide(Webhook::Validate, &binding, &view)
    })
}

#[test]
fn a_binding_is_validated_like_a_spec_node_name_at_create_but_a_trusted_scheduler_s_is_skipped() {
    let nodes = cluster();
    let out = bind_in("ci", "gpu-1", "tenant", &nodes);
    assert_eq!((out.decision, out.allowed()), (Decision::Denied, false));
    let message = out.message.expect("a message");
    assert_contains(
        &message,
        r#"the binding does not satisfy placement group "ci": binding target: node "gpu-1" is not a node of the group: nodeSelector node-pool=ci"#,
    );
    assert_contains(
        &message,
        "bind the pod to a node of the group, or leave it to the scheduler",
    );
    assert_eq!(bind_in("ci", "ci-1", "tenant", &nodes).decision, Decision::Noop);
    let unknown = bind_in("ci", "ci-9", "tenant", &nodes);
    assert_eq!(unknown.decision, Decision::Denied);
    assert_contains(
        &unknown.message.unwrap_or_default(),
        r#"binding target: node "ci-9" does not exist"#,
    );
    let shadow = bind_in("shadow", "gpu-1", "tenant", &nodes);
    assert_eq!((shadow.decision, shadow.allowed()), (Decision::WouldDeny, true));
    let trusted = bind_in("ci", "gpu-1", crate::config::KUBE_SCHEDULER, &nodes);
    assert_eq!(trusted.decision, Decision::Skipped);
    assert_eq!(trusted.skip_reason, Some(SkipReason::TrustedScheduler));
}
