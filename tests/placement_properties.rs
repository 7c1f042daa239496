//! Property tests of the placement engine over generated pods and groups:
//! the patch applies; re-planning the patched pod changes nothing; the patched
//! pod verifies unless the plan was a denial; only placement fields change;
//! required node affinity means pod terms AND group terms; a DaemonSet whose
//! template is the pod gets the pod's patch under `/spec/template`, and the
//! same template the pod would become.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PodAffinityTerm, PodAntiAffinity,
    PreferredSchedulingTerm, Toleration, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use pod_director_engine::config::{Config, Group, Mode, OnConflict};
use pod_director_engine::decision::{self, Subject, View, Write};
use pod_director_engine::placement::{self, Context, DAEMON_SET_TEMPLATE, Namespace, Pod, Webhook, plan, verify};
use pod_director_testkit::scheduler::{TestNode, terms_match};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Cases per property; the engine is fast, so many.
const CASES: u32 = 3000;

const KEYS: &[&str] = &["pool", "zone", "kubernetes.io/arch", "team.example.com/tier"];
const VALUES: &[&str] = &["a", "b", "c", "1", "5", "9"];

fn key() -> impl Strategy<Value = String> {
    prop::sample::select(KEYS).prop_map(str::to_owned)
}

fn value() -> impl Strategy<Value = String> {
    prop::sample::select(VALUES).prop_map(str::to_owned)
}

fn node_selector() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(key(), value(), 0..3)
}

fn toleration() -> impl Strategy<Value = Toleration> {
    (
        prop::option::of(key()),
        prop::sample::select(vec!["", "Equal", "Exists"]),
        value(),
        prop::sample::select(vec!["", "NoSchedule", "PreferNoSchedule", "NoExecute"]),
        prop::option::of(0i64..600),
    )
        .prop_map(|(key, op, value, effect, seconds)| {
            let exists = key.is_none() || op == "Exists";
            Toleration {
                key,
                operator: if exists {
                    Some("Exists".to_owned())
                } else {
                    (!op.is_empty()).then(|| op.to_owned())
                },
                value: (!exists).then_some(value),
                effect: (!effect.is_empty()).then(|| effect.to_owned()),
                toleration_seconds: (effect == "NoExecute").then_some(seconds).flatten(),
            }
        })
}

fn requirement() -> impl Strategy<Value = NodeSelectorRequirement> {
    (
        key(),
        prop::sample::select(vec!["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]),
        prop::collection::btree_set(value(), 1..3),
        prop::sample::select(vec!["1", "5", "9"]),
    )
        .prop_map(|(key, op, values, int)| NodeSelectorRequirement {
            key,
            operator: op.to_owned(),
            values: match op {
                "In" | "NotIn" => Some(values.into_iter().collect()),
                "Gt" | "Lt" => Some(vec![int.to_owned()]),
                _ => None,
            },
        })
}

/// Node names of the universe, and the names field requirements pick from (one no node has).
const NAMES: &[&str] = &["n1", "n2"];
const NAME_VALUES: &[&str] = &["n1", "n2", "n3"];

/// A `matchFields` requirement: `metadata.name` In/NotIn one name (the API server allows exactly one).
fn field_requirement() -> impl Strategy<Value = NodeSelectorRequirement> {
    (
        prop::sample::select(vec!["In", "NotIn"]),
        prop::sample::select(NAME_VALUES),
    )
        .prop_map(|(op, name)| NodeSelectorRequirement {
            key: "metadata.name".to_owned(),
            operator: op.to_owned(),
            values: Some(vec![name.to_owned()]),
        })
}

/// A list of requirements, absent (`None`) and empty (`Some([])`) included: both mean "none".
fn requirements(
    item: impl Strategy<Value = NodeSelectorRequirement>,
    max: usize,
) -> impl Strategy<Value = Option<Vec<NodeSelectorRequirement>>> {
    prop::option::of(prop::collection::vec(item, 0..max))
}

/// Every shape of term: expressions only, fields only, both, and empty (`{}`,
/// `{matchExpressions: []}`), which matches no node. Mostly expressions, as in real pods.
fn term() -> impl Strategy<Value = NodeSelectorTerm> {
    prop_oneof![
        6 => prop::collection::vec(requirement(), 1..3).prop_map(|reqs| NodeSelectorTerm {
            match_expressions: Some(reqs),
            match_fields: None,
        }),
        3 => (requirements(requirement(), 3), requirements(field_requirement(), 2)).prop_map(
            |(match_expressions, match_fields)| NodeSelectorTerm {
                match_expressions,
                match_fields,
            }
        ),
        1 => Just(NodeSelectorTerm::default()),
    ]
}

fn pod_affinity_term() -> impl Strategy<Value = PodAffinityTerm> {
    (prop::sample::select(vec!["kubernetes.io/hostname", "zone"]), value()).prop_map(|(topology, app)| {
        PodAffinityTerm {
            topology_key: topology.to_owned(),
            label_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([("app".to_owned(), app)])),
                match_expressions: None,
            }),
            ..PodAffinityTerm::default()
        }
    })
}

fn affinity() -> impl Strategy<Value = Option<Affinity>> {
    prop::option::of((
        prop::option::of(prop::collection::vec(term(), 0..3)),
        prop::option::of(prop::collection::vec((1i32..100, term()), 0..2)),
        prop::option::of(prop::collection::vec(pod_affinity_term(), 0..2)),
        prop::option::of(prop::collection::vec((1i32..100, pod_affinity_term()), 0..2)),
    ))
    .prop_map(|parts| {
        parts.map(|(required, preferred, anti_required, anti_preferred)| Affinity {
            node_affinity: (required.is_some() || preferred.is_some()).then(|| NodeAffinity {
                required_during_scheduling_ignored_during_execution: required.map(|terms| NodeSelector {
                    node_selector_terms: terms,
                }),
                preferred_during_scheduling_ignored_during_execution: preferred.map(|p| {
                    p.into_iter()
                        .map(|(weight, preference)| PreferredSchedulingTerm { weight, preference })
                        .collect()
                }),
            }),
            pod_affinity: None,
            pod_anti_affinity: (anti_required.is_some() || anti_preferred.is_some()).then(|| PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: anti_required,
                preferred_during_scheduling_ignored_during_execution: anti_preferred.map(|p| {
                    p.into_iter()
                        .map(|(weight, pod_affinity_term)| WeightedPodAffinityTerm {
                            weight,
                            pod_affinity_term,
                        })
                        .collect()
                }),
            }),
        })
    })
}

fn group() -> impl Strategy<Value = Group> {
    (
        prop::sample::select(vec![OnConflict::Reject, OnConflict::Override, OnConflict::Ignore]),
        node_selector(),
        prop::collection::vec(toleration(), 0..3),
        affinity(),
    )
        .prop_map(|(on_conflict, node_selector, tolerations, affinity)| Group {
            on_conflict,
            node_selector,
            tolerations,
            affinity: affinity.map(|mut a| {
                // A group's required terms are never an empty list (config validation).
                if let Some(n) = &mut a.node_affinity
                    && n.required_during_scheduling_ignored_during_execution
                        .as_ref()
                        .is_some_and(|r| r.node_selector_terms.is_empty())
                {
                    n.required_during_scheduling_ignored_during_execution = None;
                }
                a
            }),
            ..Group::default()
        })
}

fn pod() -> impl Strategy<Value = Value> {
    (
        prop::option::of(node_selector()),
        prop::option::of(prop::collection::vec(toleration(), 0..3)),
        affinity(),
        1usize..3,
    )
        .prop_map(|(node_selector, tolerations, affinity, containers)| {
            let mut spec = json!({
                "containers": (0..containers).map(|i| json!({"name": format!("c{i}"), "image": "busybox:1.37"})).collect::<Vec<_>>(),
                "restartPolicy": "Always",
                "serviceAccountName": "default",
            });
            if let Some(s) = node_selector {
                spec["nodeSelector"] = json!(s);
            }
            if let Some(t) = tolerations {
                spec["tolerations"] = serde_json::to_value(t).unwrap();
            }
            if let Some(a) = affinity {
                spec["affinity"] = serde_json::to_value(a).unwrap();
            }
            json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "x"}, "annotations": {"a/b": "c"}},
                "spec": spec,
                "status": {"phase": "Pending"},
            })
        })
}

fn typed(v: &Value) -> Pod {
    serde_json::from_value(v.clone()).expect("generated pod is a Pod")
}

fn without_placement(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(spec) = v["spec"].as_object_mut() {
        for k in ["nodeSelector", "tolerations", "affinity"] {
            spec.remove(k);
        }
    }
    v
}

type Labels = BTreeMap<&'static str, &'static str>;

/// The universe of nodes: a name (`metadata.name`, for matchFields) and labels.
fn nodes() -> Vec<TestNode> {
    let mut labels = vec![Labels::new()];
    for key in KEYS {
        let mut next = Vec::new();
        for node in &labels {
            for v in [None, Some("a"), Some("b"), Some("5"), Some("9")] {
                let mut n = node.clone();
                if let Some(v) = v {
                    n.insert(key, v);
                }
                next.push(n);
            }
        }
        labels = next;
    }
    NAMES
        .iter()
        .flat_map(|name| {
            labels.iter().map(|l| TestNode {
                name,
                labels: l.clone(),
            })
        })
        .collect()
}

fn required(pod: &Pod) -> Option<Vec<NodeSelectorTerm>> {
    pod.spec
        .as_ref()?
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()
        .map(|r| r.node_selector_terms.clone())
        .filter(|t| !t.is_empty())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, ..ProptestConfig::default() })]

    #[test]
    fn planned_patch_applies_is_idempotent_verifies_and_touches_only_placement(pod_json in pod(), g in group()) {
        let original = typed(&pod_json);
        let p = plan(&original, &g);
        let mut patched_json = pod_json.clone();
        let applied = json_patch::patch(&mut patched_json, &p.patch().0);
        prop_assert!(applied.is_ok(), "patch {:?} does not apply: {:?}", p.patch(), applied);
        let patched = typed(&patched_json);

        let again = plan(&patched, &g);
        prop_assert!(again.changes.is_empty(), "second plan not empty: {:?}", again.changes);
        prop_assert_eq!(again.conflicts.len(), p.conflicts.iter().filter(|c| c.resolution != pod_director_engine::placement::Resolution::Overridden).count());

        if !p.rejected() {
            let violations = verify(&patched, &g);
            prop_assert!(violations.is_empty(), "patched pod violates its group: {:?}", violations);
        }
        prop_assert_eq!(without_placement(&pod_json), without_placement(&patched_json));
    }

    #[test]
    fn a_daemonset_gets_its_template_pod_s_patch_under_spec_template(pod_json in pod(), g in group()) {
        let config = Config {
            groups: BTreeMap::from([("g".to_owned(), Group { mode: Some(Mode::Enforce), ..g })]),
            ..Config::default()
        };
        let labels = BTreeMap::from([("pod-director/group".to_owned(), "g".to_owned())]);
        let ns = Namespace::new("ns", &labels);
        let ctx = Context::default();
        let view = View { config: &config, namespace: &ns, context: &ctx };
        let pod = typed(&pod_json);
        let as_pod = decision::decide(Webhook::Mutate, &Subject::Pod(Write::Create(&pod)), &view);
        let mut daemon_set = json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds", "namespace": "ns"},
            "spec": {"selector": {"matchLabels": {"app": "x"}},
                     "template": {"metadata": pod_json["metadata"].clone(), "spec": pod_json["spec"].clone()}},
        });
        let template: k8s_openapi::api::core::v1::PodTemplateSpec =
            serde_json::from_value(daemon_set["spec"]["template"].clone()).expect("a template");
        let template = placement::template_pod(&template);
        let as_daemon_set = decision::decide(Webhook::Mutate, &Subject::DaemonSet(Write::Create(&template)), &view);
        prop_assert_eq!(as_daemon_set.decision, as_pod.decision);
        prop_assert_eq!(&as_daemon_set.patch, &as_pod.patch, "the same patch relative to the pod");
        let rerooted = as_daemon_set.rerooted(DAEMON_SET_TEMPLATE);
        let prefixed: Vec<String> = as_pod.patch_paths().iter().map(|p| format!("/spec/template{p}")).collect();
        prop_assert_eq!(rerooted.patch_paths(), prefixed);
        let applied = json_patch::patch(&mut daemon_set, &rerooted.patch.0);
        prop_assert!(applied.is_ok(), "{:?}", applied);
        let mut patched_pod = pod_json.clone();
        json_patch::patch(&mut patched_pod, &as_pod.patch.0).unwrap();
        prop_assert_eq!(&daemon_set["spec"]["template"]["spec"], &patched_pod["spec"]);
    }

    #[test]
    fn in_dry_run_and_warn_validate_refuses_no_pod_create_that_mutate_admits(
        pod_json in pod(),
        g in group(),
        warn in any::<bool>(),
    ) {
        // The shadow predicts enforce's refusals at /mutate: /validate's sample only re-judges them.
        let mode = if warn { Mode::Warn } else { Mode::DryRun };
        let config = Config {
            groups: BTreeMap::from([("g".to_owned(), Group { mode: Some(mode), ..g })]),
            ..Config::default()
        };
        let labels = BTreeMap::from([("pod-director/group".to_owned(), "g".to_owned())]);
        let ns = Namespace::new("ns", &labels);
        let ctx = Context::default();
        let view = View { config: &config, namespace: &ns, context: &ctx };
        let pod = typed(&pod_json);
        let subject = Subject::Pod(Write::Create(&pod));
        let validate = decision::Decidable::at(Webhook::Validate, &subject).expect("decided at /validate");
        let outcome = validate.decide(&view);
        let mutate = decision::decide(Webhook::Mutate, &subject, &view);
        prop_assert!(
            !validate.shadow_disagrees(&view, &outcome),
            "/validate {:?} ({}) where /mutate {:?} ({})",
            outcome.decision, outcome.summary, mutate.decision, mutate.summary
        );
    }

    #[test]
    fn required_node_affinity_of_the_result_is_pod_and_group(pod_json in pod(), g in group()) {
        let original = typed(&pod_json);
        let p = plan(&original, &g);
        if !p.conflicts.is_empty() {
            // A conflict is resolved by policy (deny, group wins, pod wins): not an AND.
            return Ok(());
        }
        let Some(group_terms) = g.affinity.as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref())
            .map(|r| r.node_selector_terms.clone()) else {
            return Ok(());
        };
        let mut patched_json = pod_json.clone();
        json_patch::patch(&mut patched_json, &p.patch().0).unwrap();
        let result = required(&typed(&patched_json)).expect("the result has required terms");
        let pod_terms = required(&original);
        for node in nodes() {
            let expected = pod_terms.as_ref().is_none_or(|t| terms_match(&node, t)) && terms_match(&node, &group_terms);
            prop_assert_eq!(terms_match(&node, &result), expected, "node {:?}", node);
        }
    }
}
