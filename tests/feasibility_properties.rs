//! Property tests of placement feasibility: over generated nodes and pods, the
//! engine's count equals a brute-force evaluation written here from the
//! Kubernetes semantics (scheduler filters NodeAffinity, TaintToleration,
//! NodeUnschedulable), and the Node cache's memoised count equals both, also
//! while nodes change under it.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, Toleration};
use pod_director::cluster::Nodes;
use pod_director::testing::StaticNodes;
use pod_director_engine::config::{Config, Group, Mode, OnConflict};
use pod_director_engine::placement::NodeTaint;
use pod_director_engine::placement::feasible::{self, NodeInfo, NodeView, Placement};
use pod_director_engine::placement::{Context, Namespace, Pod, PodSpec, Webhook};
use pod_director_engine::testing::decide_pod;
use proptest::prelude::*;
use serde_json::json;

const CASES: u32 = 2000;

const KEYS: &[&str] = &["pool", "zone", "cpu", "example.com/tier"];
const VALUES: &[&str] = &["a", "b", "1", "5", "9", "-3", "x1"];
const EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];
const NAMES: &[&str] = &["n0", "n1", "n2", "n3", "n4", "n5"];

/// A generated node, kept in plain form for the reference evaluation.
#[derive(Debug, Clone)]
struct RawNode {
    name: String,
    labels: BTreeMap<String, String>,
    taints: Vec<(String, String, String)>,
    unschedulable: bool,
}

impl RawNode {
    fn info(&self) -> NodeInfo {
        NodeInfo::new(
            &self.name,
            self.labels.clone(),
            self.taints.iter().map(|(k, v, e)| NodeTaint::new(k, v, e)).collect(),
            self.unschedulable,
        )
    }
}

fn text(pool: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::sample::select(pool).prop_map(str::to_owned)
}

fn node() -> impl Strategy<Value = RawNode> {
    (
        text(NAMES),
        prop::collection::btree_map(text(KEYS), text(VALUES), 0..4),
        prop::collection::vec(
            (
                prop::sample::select(vec!["dedicated", "gpu", "node.kubernetes.io/unschedulable"]),
                prop::sample::select(vec!["", "a", "b"]),
                text(EFFECTS),
            )
                .prop_map(|(k, v, e)| (k.to_owned(), v.to_owned(), e)),
            0..3,
        ),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(name, labels, taints, unschedulable)| RawNode {
            name,
            labels,
            taints,
            unschedulable,
        })
}

fn toleration() -> impl Strategy<Value = Toleration> {
    (
        prop::sample::select(vec!["", "dedicated", "gpu", "node.kubernetes.io/unschedulable"]),
        prop::sample::select(vec!["", "Equal", "Exists", "Gt"]),
        prop::sample::select(vec!["", "a", "b"]),
        prop::sample::select(vec!["", "NoSchedule", "PreferNoSchedule", "NoExecute"]),
    )
        .prop_map(|(key, op, value, effect)| pod_director_testkit::toleration(key, op, value, effect, None))
}

fn requirement(field: bool) -> impl Strategy<Value = NodeSelectorRequirement> {
    let keys: Vec<&'static str> = if field {
        vec!["metadata.name", "metadata.name", "metadata.uid"]
    } else {
        KEYS.to_vec()
    };
    (
        prop::sample::select(keys),
        prop::sample::select(vec!["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Equals"]),
        prop::option::of(prop::collection::vec(
            prop::sample::select([VALUES, NAMES].concat()),
            0..3,
        )),
    )
        .prop_map(|(key, operator, values)| NodeSelectorRequirement {
            key: key.to_owned(),
            operator: operator.to_owned(),
            values: values.map(|v| v.into_iter().map(str::to_owned).collect()),
        })
}

fn term() -> impl Strategy<Value = NodeSelectorTerm> {
    (
        prop::option::of(prop::collection::vec(requirement(false), 0..3)),
        prop::option::of(prop::collection::vec(requirement(true), 0..2)),
    )
        .prop_map(|(match_expressions, match_fields)| NodeSelectorTerm {
            match_expressions,
            match_fields,
        })
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    (
        prop::option::of(prop::collection::btree_map(text(KEYS), text(VALUES), 0..3)),
        prop::option::of(prop::collection::vec(term(), 0..3)),
        prop::option::of(prop::collection::vec(toleration(), 0..4)),
    )
        .prop_map(|(node_selector, terms, tolerations)| {
            let mut spec = json!({"containers": []});
            if let Some(selector) = node_selector {
                spec["nodeSelector"] = json!(selector);
            }
            if let Some(terms) = terms {
                spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}});
            }
            if let Some(tolerations) = tolerations {
                spec["tolerations"] = json!(tolerations);
            }
            serde_json::from_value(spec).expect("a PodSpec")
        })
}

// --- the reference: Kubernetes semantics, spelled out case by case ----------

/// `labels.Requirement.Matches` with `NewRequirement`'s validation (invalid → `None`).
fn reference_expression(r: &NodeSelectorRequirement, labels: &BTreeMap<String, String>) -> Option<bool> {
    let values: Vec<&str> = r.values.iter().flatten().map(String::as_str).collect();
    let have = labels.get(&r.key).map(String::as_str);
    match r.operator.as_str() {
        "In" => {
            if values.is_empty() {
                return None;
            }
            Some(matches!(have, Some(v) if values.contains(&v)))
        }
        "NotIn" => {
            if values.is_empty() {
                return None;
            }
            Some(match have {
                None => true,
                Some(v) => !values.contains(&v),
            })
        }
        "Exists" | "DoesNotExist" => {
            if !values.is_empty() {
                return None;
            }
            Some(have.is_some() == (r.operator == "Exists"))
        }
        "Gt" | "Lt" => {
            if values.len() != 1 {
                return None;
            }
            let bound: i64 = values[0].parse().ok()?;
            let Some(v) = have else { return Some(false) };
            let Ok(n) = v.parse::<i64>() else { return Some(false) };
            Some(if r.operator == "Gt" { n > bound } else { n < bound })
        }
        _ => None,
    }
}

/// `nodeSelectorRequirementsAsFieldSelector`: In/NotIn with one value; a node has only `metadata.name`.
fn reference_field(r: &NodeSelectorRequirement, name: &str) -> Option<bool> {
    let values: Vec<&str> = r.values.iter().flatten().map(String::as_str).collect();
    if values.len() != 1 {
        return None;
    }
    let have = if r.key == "metadata.name" { name } else { "" };
    match r.operator.as_str() {
        "In" => Some(have == values[0]),
        "NotIn" => Some(have != values[0]),
        _ => None,
    }
}

fn reference_term(t: &NodeSelectorTerm, node: &RawNode) -> bool {
    let exprs = t.match_expressions.clone().unwrap_or_default();
    let fields = t.match_fields.clone().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    let mut ok = true;
    for r in &exprs {
        match reference_expression(r, &node.labels) {
            Some(true) => {}
            _ => ok = false,
        }
    }
    for r in &fields {
        match reference_field(r, &node.name) {
            Some(true) => {}
            _ => ok = false,
        }
    }
    ok
}

/// `Toleration.ToleratesTaint`.
fn reference_tolerates(t: &Toleration, key: &str, value: &str, effect: &str) -> bool {
    let s = |o: &Option<String>| o.clone().unwrap_or_default();
    if !s(&t.effect).is_empty() && s(&t.effect) != effect {
        return false;
    }
    if !s(&t.key).is_empty() && s(&t.key) != key {
        return false;
    }
    match s(&t.operator).as_str() {
        "" | "Equal" => s(&t.value) == value,
        "Exists" => true,
        _ => false,
    }
}

fn reference_feasible(spec: &PodSpec, node: &RawNode) -> bool {
    if let Some(selector) = &spec.node_selector {
        for (k, v) in selector {
            if node.labels.get(k) != Some(v) {
                return false;
            }
        }
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref());
    if let Some(required) = required {
        let mut any = false;
        for t in &required.node_selector_terms {
            if reference_term(t, node) {
                any = true;
            }
        }
        if !any {
            return false;
        }
    }
    let tolerations = spec.tolerations.clone().unwrap_or_default();
    for (key, value, effect) in &node.taints {
        if effect == "PreferNoSchedule" {
            continue;
        }
        if !tolerations.iter().any(|t| reference_tolerates(t, key, value, effect)) {
            return false;
        }
    }
    if node.unschedulable
        && !tolerations
            .iter()
            .any(|t| reference_tolerates(t, "node.kubernetes.io/unschedulable", "", "NoSchedule"))
    {
        return false;
    }
    true
}

/// Generated nodes with unique names (the last of a name wins, as in the cache).
fn unique(nodes: Vec<RawNode>) -> Vec<RawNode> {
    let by_name: BTreeMap<String, RawNode> = nodes.into_iter().map(|n| (n.name.clone(), n)).collect();
    by_name.into_values().collect()
}

fn group() -> impl Strategy<Value = Group> {
    (
        pod_spec(),
        prop::sample::select(vec![OnConflict::Reject, OnConflict::Override, OnConflict::Ignore]),
    )
        .prop_map(|(spec, on_conflict)| Group {
            mode: Some(Mode::Enforce),
            on_conflict,
            node_selector: spec.node_selector.unwrap_or_default(),
            // Valid group tolerations only: keyless ones must be Exists, as config validation requires.
            tolerations: spec
                .tolerations
                .unwrap_or_default()
                .into_iter()
                .filter(|t| t.key.is_some() || t.operator.as_deref() == Some("Exists"))
                .filter(|t| matches!(t.operator.as_deref(), None | Some("Equal") | Some("Exists")))
                .collect(),
            affinity: spec.affinity,
            ..Group::default()
        })
}

/// The pod after the engine's patch, as JSON applied with json-patch (not the engine's own shortcut).
fn patched(pod: &Pod, patch: &json_patch::Patch) -> Option<PodSpec> {
    let mut value = serde_json::to_value(pod).ok()?;
    json_patch::patch(&mut value, patch).ok()?;
    serde_json::from_value(value["spec"].take()).ok()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn every_decision_counts_the_pod_before_and_after_its_patch(
        nodes in prop::collection::vec(node(), 0..6),
        spec in pod_spec(),
        group in group(),
    ) {
        let nodes = unique(nodes);
        let source = Arc::new(StaticNodes::new());
        for n in &nodes {
            source.insert(n.info());
        }
        let cache = Nodes::new(source);
        let view = cache.view(None);
        let config = Config { groups: BTreeMap::from([("g".to_owned(), group)]), ..Config::default() };
        let labels = BTreeMap::from([(config.namespace_label.clone(), "g".to_owned())]);
        let ns = Namespace::new("team", &labels);
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).expect("a Pod");
        let ctx = Context::offline().with_nodes(Some(&view as &dyn NodeView));
        let out = decide_pod(Webhook::Mutate, &config, &ns, &pod, &ctx);
        let after_spec = if out.patch.0.is_empty() { Some(spec.clone()) } else { patched(&pod, &out.patch) };
        let after_spec = after_spec.expect("the patch applies");
        let count = |s: &PodSpec| nodes.iter().filter(|n| reference_feasible(s, n)).count();
        prop_assert_eq!(out.feasible_nodes_before, Some(count(&spec)));
        prop_assert_eq!(out.feasible_nodes, Some(count(&after_spec)), "patch {:?}", out.patch);
        prop_assert_eq!(out.no_feasible_node, count(&after_spec) == 0);
        // Again, from the memo.
        let again = decide_pod(Webhook::Mutate, &config, &ns, &pod, &ctx);
        prop_assert_eq!(again.feasible_nodes, out.feasible_nodes);
        prop_assert_eq!(again.feasible_nodes_before, out.feasible_nodes_before);
        // A pod differing only where feasibility does not look (tolerationSeconds, preferences,
        // pod anti-affinity) shares the memo entries; its counts must still be its own.
        let mut twin = serde_json::to_value(&pod).expect("JSON");
        for t in twin["spec"]["tolerations"].as_array_mut().into_iter().flatten() {
            if t["effect"] == "NoExecute" {
                t["tolerationSeconds"] = json!(30);
            }
        }
        let anti = json!({"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]});
        match twin["spec"]["affinity"].as_object_mut() {
            Some(affinity) => { affinity.insert("podAntiAffinity".to_owned(), anti); }
            None => twin["spec"]["affinity"] = json!({"podAntiAffinity": anti}),
        }
        let twin: Pod = serde_json::from_value(twin).expect("a Pod");
        let out = decide_pod(Webhook::Mutate, &config, &ns, &twin, &ctx);
        let twin_spec = twin.spec.clone().expect("a spec");
        let after = if out.patch.0.is_empty() { Some(twin_spec.clone()) } else { patched(&twin, &out.patch) };
        prop_assert_eq!(out.feasible_nodes_before, Some(count(&twin_spec)));
        prop_assert_eq!(out.feasible_nodes, Some(count(&after.expect("the patch applies"))));
    }

    #[test]
    fn feasibility_equals_the_brute_force_evaluation(nodes in prop::collection::vec(node(), 0..6), spec in pod_spec()) {
        let nodes = unique(nodes);
        let placement = Placement::of_spec(&spec);
        for n in &nodes {
            prop_assert_eq!(feasible::feasible(&placement, &n.info()), reference_feasible(&spec, n), "node {:?}", n);
        }
        let infos: Vec<NodeInfo> = nodes.iter().map(RawNode::info).collect();
        let expected = nodes.iter().filter(|n| reference_feasible(&spec, n)).count();
        prop_assert_eq!(feasible::count(&placement, &infos), expected);
    }

    #[test]
    fn the_memoised_count_follows_the_nodes_as_they_change(
        steps in prop::collection::vec((prop::option::of(node()), text(NAMES)), 1..8),
        specs in prop::collection::vec(pod_spec(), 1..4),
    ) {
        let source = Arc::new(StaticNodes::new());
        let cache = Nodes::new(source.clone());
        let mut live: BTreeMap<String, RawNode> = BTreeMap::new();
        for (change, removed) in steps {
            match change {
                Some(n) => {
                    source.insert(n.info());
                    live.insert(n.name.clone(), n);
                }
                None => {
                    source.remove(&removed);
                    live.remove(&removed);
                }
            }
            for spec in &specs {
                let expected = live.values().filter(|n| reference_feasible(spec, n)).count();
                // Twice: the second answer comes from the memo.
                prop_assert_eq!(cache.feasible(&Placement::of_spec(spec)), Some(expected));
                prop_assert_eq!(cache.feasible(&Placement::of_spec(spec)), Some(expected));
            }
        }
    }
}
