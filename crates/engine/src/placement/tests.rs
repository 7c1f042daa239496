//! Engine tests on real Pod JSON. Each planned pod is patched with json-patch,
//! re-planned (idempotence) and verified.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelectorTerm;
use serde_json::{Value, json};

use super::affinity::{requirement_implies, unsatisfiable};
use super::*;
use crate::config::{Config, Group, Mode, OnConflict};
use crate::testing::scheduler::{TestNode, term_matches, terms_match};
use crate::testing::with;
use crate::testing::{self, assert_contains};

mod decisions;

/// A pod of one container ([`containers`]) with the fields of `spec`.
fn pod(mut spec: Value) -> Value {
    if spec.get("containers").is_none() {
        spec["containers"] = containers();
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "team-a", "labels": {"app": "web"}},
        "spec": spec,
    })
}

fn containers() -> Value {
    json!([{"name": "app", "image": "nginx:1.27"}])
}

fn typed(v: &Value) -> Pod {
    serde_json::from_value(v.clone()).expect("test pod is a valid Pod")
}

fn group(yaml: &str) -> Group {
    testing::config(&format!("groups:\n  g:\n{}", indent(yaml))).groups["g"].clone()
}

fn indent(yaml: &str) -> String {
    yaml.lines().map(|l| format!("    {l}\n")).collect()
}

/// Plans, applies the patch to the JSON pod, checks idempotence and verification; returns the patched pod.
fn plan_apply(pod_json: &Value, g: &Group) -> (Plan, Value) {
    let p = plan(&typed(pod_json), g);
    let mut patched = pod_json.clone();
    json_patch::patch(&mut patched, &p.patch().0)
        .unwrap_or_else(|e| panic!("patch {:?} does not apply: {e}", p.patch()));
    let again = plan(&typed(&patched), g);
    assert!(
        again.changes.is_empty(),
        "not idempotent: second plan {:?}",
        again.changes
    );
    if !p.rejected() {
        assert_eq!(verify(&typed(&patched), g), vec![], "patched pod does not verify");
    }
    // Nothing but placement fields changes.
    let mut a = pod_json.clone();
    let mut b = patched.clone();
    for v in [&mut a, &mut b] {
        let spec = v["spec"].as_object_mut().expect("spec");
        for k in ["nodeSelector", "tolerations", "affinity"] {
            spec.remove(k);
        }
    }
    assert_eq!(a, b, "the patch touched a non-placement field");
    (p, patched)
}

fn ops(p: &Plan) -> Value {
    serde_json::to_value(p.patch()).unwrap()
}

const SELECTOR_GROUP: &str = "nodeSelector: {node-pool: ci, kubernetes.io/os: linux}";

#[test]
fn node_selector_keys_the_pod_lacks_are_added_with_escaped_pointers() {
    let all = json!({"kubernetes.io/os": "linux", "node-pool": "ci"});
    let cases = [
        (
            "a pod without one gets the whole selector",
            None,
            json!([{"op": "add", "path": "/spec/nodeSelector", "value": all}]),
            all.clone(),
        ),
        (
            "the keys are added beside unrelated ones",
            Some(json!({"disk": "ssd"})),
            json!([
                {"op": "add", "path": "/spec/nodeSelector/kubernetes.io~1os", "value": "linux"},
                {"op": "add", "path": "/spec/nodeSelector/node-pool", "value": "ci"},
            ]),
            json!({"disk": "ssd", "kubernetes.io/os": "linux", "node-pool": "ci"}),
        ),
        (
            "some of the group's keys get only the missing ones",
            Some(json!({"node-pool": "ci"})),
            json!([{"op": "add", "path": "/spec/nodeSelector/kubernetes.io~1os", "value": "linux"}]),
            all.clone(),
        ),
        (
            "all of the group's keys need nothing",
            Some(all.clone()),
            json!([]),
            all.clone(),
        ),
        (
            "all of the group's keys and another need nothing",
            Some(json!({"disk": "ssd", "kubernetes.io/os": "linux", "node-pool": "ci"})),
            json!([]),
            json!({"disk": "ssd", "kubernetes.io/os": "linux", "node-pool": "ci"}),
        ),
    ];
    for (case, selector, expected_ops, expected_selector) in cases {
        let spec = selector.map_or(json!({}), |s| json!({"nodeSelector": s}));
        let (p, patched) = plan_apply(&pod(spec), &group(SELECTOR_GROUP));
        assert_eq!(ops(&p), expected_ops, "{case}");
        assert_eq!(p.changes.is_empty(), expected_ops == json!([]), "{case}: {p:?}");
        assert!(p.conflicts.is_empty(), "{case}: {p:?}");
        assert_eq!(patched["spec"]["nodeSelector"], expected_selector, "{case}");
    }
}

#[test]
fn pointer_tokens_escape_slash_and_tilde() {
    let mut g = Group::default();
    g.node_selector.insert("example.com/a~b".to_owned(), "x".to_owned());
    let (p, patched) = plan_apply(&pod(json!({"nodeSelector": {}})), &g);
    assert_eq!(
        p.patch().0[0].path().to_string(),
        "/spec/nodeSelector/example.com~1a~0b"
    );
    assert_eq!(patched["spec"]["nodeSelector"]["example.com/a~b"], "x");
    // The escaping plan.rs relies on (json-patch's PointerBuf), for one token.
    assert_eq!(
        json_patch::jsonptr::PointerBuf::from_tokens(["a/b~c"]).to_string(),
        "/a~1b~0c"
    );
}

const TOLERATION_GROUP: &str = "tolerations:
  - {key: dedicated, operator: Equal, value: ci, effect: NoSchedule}
  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}";

fn tolerations_of(v: &Value) -> Vec<Value> {
    v["spec"]["tolerations"].as_array().cloned().unwrap_or_default()
}

#[test]
fn tolerations_the_pod_lacks_are_added_once() {
    let dedicated = json!({"key": "dedicated", "operator": "Equal", "value": "ci", "effect": "NoSchedule"});
    let gpu = json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"});
    let append = |t: &Value| json!({"op": "add", "path": "/spec/tolerations/-", "value": t});
    let not_ready = json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300});
    let cases = [
        (
            "a pod without any gets the group's as a list",
            None,
            json!([{"op": "add", "path": "/spec/tolerations", "value": [dedicated, gpu]}]),
            2,
        ),
        (
            "the group's are appended to unrelated ones",
            Some(json!([not_ready])),
            json!([append(&dedicated), append(&gpu)]),
            3,
        ),
        (
            "one partly present gets only the missing one",
            Some(json!([{"key": "dedicated", "value": "ci", "effect": "NoSchedule"}])),
            json!([append(&gpu)]),
            2,
        ),
        ("all present need nothing", Some(json!([dedicated, gpu])), json!([]), 2),
        (
            "all present with extras need nothing",
            Some(json!([dedicated, gpu, {"key": "spot", "operator": "Exists"}])),
            json!([]),
            3,
        ),
    ];
    for (case, tolerations, expected_ops, count) in cases {
        let spec = tolerations.map_or(json!({}), |t| json!({"tolerations": t}));
        let (p, patched) = plan_apply(&pod(spec), &group(TOLERATION_GROUP));
        assert_eq!(ops(&p), expected_ops, "{case}");
        assert_eq!(
            Some(p.changes.len()),
            expected_ops.as_array().map(Vec::len),
            "{case}: {p:?}"
        );
        assert_eq!(tolerations_of(&patched).len(), count, "{case}");
    }
}

#[test]
fn equivalent_toleration_spellings_are_not_duplicated() {
    let spellings = [
        json!([{"key": "dedicated", "value": "ci", "effect": "NoSchedule"}, {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]),
        json!([{"key": "dedicated", "operator": "Equal", "value": "ci"}, {"key": "nvidia.com/gpu", "operator": "Exists"}]),
        json!([{"key": "dedicated", "operator": "Exists"}, {"key": "nvidia.com/gpu", "operator": "Exists", "effect": ""}]),
        json!([{"operator": "Exists"}]),
        json!([{"operator": "Exists", "effect": "NoSchedule"}]),
    ];
    for t in spellings {
        let (p, _) = plan_apply(&pod(json!({"tolerations": t.clone()})), &group(TOLERATION_GROUP));
        assert!(p.changes.is_empty(), "{t} should already tolerate the group: {p:?}");
    }
    // Not a superset: wrong value, narrower effect.
    let narrower = json!([{"key": "dedicated", "value": "gpu"}, {"operator": "Exists", "effect": "NoExecute"}]);
    let (p, _) = plan_apply(&pod(json!({"tolerations": narrower})), &group(TOLERATION_GROUP));
    assert_eq!(p.changes.len(), 2);
}

#[test]
fn group_toleration_with_omitted_operator_is_added_normalized() {
    let (p, _) = plan_apply(&pod(json!({})), &group("tolerations: [{key: dedicated, value: ci}]"));
    assert_eq!(
        ops(&p)[0]["value"],
        json!([{"key": "dedicated", "operator": "Equal", "value": "ci"}])
    );
}

// ---- node affinity, checked semantically ------------------------------------

fn required_terms(v: &Value) -> Option<Vec<NodeSelectorTerm>> {
    let terms =
        &v["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
    (!terms.is_null()).then(|| serde_json::from_value(terms.clone()).unwrap())
}

fn nodes() -> Vec<TestNode> {
    let mut out = Vec::new();
    for name in ["node-1", "node-2", "node-3"] {
        for pool in [None, Some("ci"), Some("gpu"), Some("web")] {
            for zone in [None, Some("a"), Some("b")] {
                for arch in [None, Some("amd64"), Some("arm64")] {
                    let mut labels = BTreeMap::new();
                    if let Some(p) = pool {
                        labels.insert("pool", p);
                    }
                    if let Some(z) = zone {
                        labels.insert("zone", z);
                    }
                    if let Some(a) = arch {
                        labels.insert("kubernetes.io/arch", a);
                    }
                    out.push(TestNode { name, labels });
                }
            }
        }
    }
    out
}

fn term_json(reqs: &[(&str, &str, &[&str])]) -> Value {
    json!({"matchExpressions": reqs.iter().map(|(k, op, vals)| json!({"key": k, "operator": op, "values": vals})).collect::<Vec<_>>()})
}

fn fields_json(names: &[&str]) -> Value {
    json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": names}]})
}

fn with_required(terms: &[Value]) -> Value {
    json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}})
}

fn required_group(terms: &[Value]) -> Group {
    // Built directly: config validation refuses empty group terms, the engine must not rely on it.
    serde_json::from_value(json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}})).unwrap()
}

/// Plans `pod_terms` (none: a pod without required affinity) against `group_terms` and
/// checks, node by node, that the result matches exactly where pod AND group match.
fn assert_pod_and_group(pod_terms: &[Value], group_terms: &[Value]) -> Option<Vec<NodeSelectorTerm>> {
    let spec = if pod_terms.is_empty() {
        json!({})
    } else {
        with_required(pod_terms)
    };
    let original = pod(spec);
    let (p, patched) = plan_apply(&original, &required_group(group_terms));
    if !p.conflicts.is_empty() {
        return None;
    }
    let pod_t: Option<Vec<NodeSelectorTerm>> = required_terms(&original);
    let group_t: Vec<NodeSelectorTerm> = serde_json::from_value(Value::Array(group_terms.to_vec())).unwrap();
    let result = required_terms(&patched).expect("result has required terms");
    for node in nodes() {
        let expected = pod_t.as_ref().is_none_or(|t| terms_match(&node, t)) && terms_match(&node, &group_t);
        assert_eq!(
            terms_match(&node, &result),
            expected,
            "node {} {:?}: pod terms {pod_terms:?} AND group terms {group_terms:?} gave {result:?}",
            node.name,
            node.labels
        );
    }
    Some(result)
}

#[test]
fn required_node_affinity_means_pod_terms_and_group_terms() {
    let pod_term_sets: Vec<Vec<Value>> = vec![
        vec![],
        vec![term_json(&[("zone", "In", &["a"])])],
        vec![
            term_json(&[("zone", "In", &["a"])]),
            term_json(&[("kubernetes.io/arch", "In", &["arm64"]), ("zone", "NotIn", &["a"])]),
            term_json(&[("pool", "In", &["ci", "gpu"])]),
        ],
    ];
    let group_term_sets: Vec<Vec<Value>> = vec![
        vec![term_json(&[("pool", "In", &["ci"])])],
        vec![
            term_json(&[("pool", "In", &["ci"]), ("kubernetes.io/arch", "In", &["amd64"])]),
            term_json(&[("pool", "In", &["web"])]),
        ],
    ];
    for pod_terms in &pod_term_sets {
        for group_terms in &group_term_sets {
            assert!(
                assert_pod_and_group(pod_terms, group_terms).is_some(),
                "no conflict expected: {pod_terms:?} / {group_terms:?}"
            );
        }
    }
}

#[test]
fn required_node_affinity_is_pod_and_group_for_empty_and_match_fields_terms() {
    let shapes: Vec<Value> = vec![
        json!({}),
        json!({"matchExpressions": []}),
        json!({"matchExpressions": [], "matchFields": []}),
        fields_json(&["node-1", "node-2"]),
        json!({"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node-1"]}]}),
        json!({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}], "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-2"]}]}),
        term_json(&[("zone", "In", &["a"])]),
        term_json(&[("pool", "In", &["ci"])]),
        term_json(&[("pool", "Exists", &[])]),
    ];
    let mut sets: Vec<Vec<Value>> = vec![vec![]];
    for a in &shapes {
        sets.push(vec![a.clone()]);
        for b in &shapes {
            sets.push(vec![a.clone(), b.clone()]);
        }
    }
    let mut checked = 0;
    for pod_terms in &sets {
        for group_terms in sets.iter().filter(|g| !g.is_empty()) {
            checked += usize::from(assert_pod_and_group(pod_terms, group_terms).is_some());
        }
    }
    assert!(
        checked > sets.len() * sets.len() / 2,
        "most combinations plan without conflict: {checked}"
    );
}

#[test]
fn an_empty_pod_term_stays_empty_and_never_becomes_the_groups_term() {
    let group = [term_json(&[("node-pool", "In", &["gpu"])])];
    let result = assert_pod_and_group(&[json!({}), term_json(&[("zone", "In", &["z1"])])], &group).unwrap();
    assert_eq!(
        serde_json::to_value(&result).unwrap(),
        json!([{}, {"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["z1"]},
            {"key": "node-pool", "operator": "In", "values": ["gpu"]},
        ]}]),
        "the empty term still matches no node; the zone term gets the group's requirement"
    );
}

#[test]
fn a_pod_that_can_never_be_scheduled_is_left_unschedulable_without_a_conflict() {
    let group = required_group(&[term_json(&[("node-pool", "In", &["gpu"])])]);
    for never in [
        json!({"matchExpressions": []}),
        json!({}),
        term_json(&[("zone", "In", &["a"]), ("zone", "In", &["b"])]),
    ] {
        let original = pod(with_required(std::slice::from_ref(&never)));
        let (p, patched) = plan_apply(&original, &group);
        assert!(p.changes.is_empty() && p.conflicts.is_empty(), "{never}: {p:?}");
        assert_eq!(patched, original);
        assert!(
            !nodes()
                .iter()
                .any(|n| terms_match(n, &required_terms(&patched).unwrap()))
        );
        assert_eq!(
            verify(&typed(&original), &group),
            vec![],
            "nothing it could run on is outside the group"
        );
    }
}

#[test]
fn a_match_fields_only_term_keeps_its_fields_and_gets_the_groups_expressions() {
    let group = [term_json(&[("pool", "In", &["gpu"])])];
    let result = assert_pod_and_group(&[fields_json(&["node-1"])], &group).unwrap();
    assert_eq!(
        serde_json::to_value(&result).unwrap(),
        json!([{
            "matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}],
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}],
        }])
    );
}

#[test]
fn an_empty_group_term_adds_nothing_a_node_could_match() {
    let result = assert_pod_and_group(
        &[term_json(&[("zone", "In", &["a"])])],
        &[json!({}), term_json(&[("pool", "In", &["ci"])])],
    )
    .unwrap();
    assert_eq!(
        serde_json::to_value(&result).unwrap(),
        json!([{"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a"]},
            {"key": "pool", "operator": "In", "values": ["ci"]},
        ]}])
    );
    // A group whose only term matches no node: no pod term can satisfy it.
    let p = plan(
        &typed(&pod(with_required(&[term_json(&[("zone", "In", &["a"])])]))),
        &required_group(&[json!({})]),
    );
    assert_eq!(p.conflicts.len(), 1, "{p:?}");
}

#[test]
fn verify_reads_empty_terms_as_the_planner_does() {
    let group = required_group(&[term_json(&[("pool", "In", &["gpu"])])]);
    let stored = typed(&pod(with_required(&[json!({}), term_json(&[("zone", "In", &["z1"])])])));
    let violations = verify(&stored, &group);
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!(
        violations[0].field,
        "affinity.nodeAffinity.required.nodeSelectorTerms[1]"
    );
    let loosened = typed(&pod(with_required(&[term_json(&[("pool", "In", &["gpu"])])])));
    assert_eq!(
        verify(&loosened, &required_group(&[json!({})])).len(),
        1,
        "an empty group term is not satisfied by a real one"
    );
}

#[test]
fn requirements_already_implied_by_the_pod_are_not_repeated() {
    let spec = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term_json(&[("pool", "In", &["ci"])])]}}}});
    let wider = group(
        "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [ci, ci2]}]}]}}}",
    );
    let (p, _) = plan_apply(&pod(spec), &wider);
    assert!(
        p.changes.is_empty(),
        "a narrower pod term already satisfies the group: {p:?}"
    );
}

#[test]
fn preferred_and_pod_affinity_terms_are_appended_once() {
    let g = group(
        "affinity:
  nodeAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - {weight: 10, preference: {matchExpressions: [{key: zone, operator: In, values: [a]}]}}
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: build}}}
  podAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 5
        podAffinityTerm: {topologyKey: zone, labelSelector: {matchLabels: {app: cache}}}",
    );
    let existing = json!({
        "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": term_json(&[("disk", "In", &["ssd"])])}]},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]},
    });
    let (p, patched) = plan_apply(&pod(json!({"affinity": existing})), &g);
    let paths: Vec<String> = p.patch().0.iter().map(|o| o.path().to_string()).collect();
    assert_eq!(
        paths,
        [
            "/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution/-",
            "/spec/affinity/podAffinity",
            "/spec/affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution",
        ]
    );
    let prefs = patched["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        .as_array()
        .unwrap();
    assert_eq!(prefs.len(), 2);
    // A pod without affinity gets the group's whole affinity in one operation.
    let (p, patched) = plan_apply(&pod(json!({})), &g);
    assert_eq!(ops(&p)[0]["path"], "/spec/affinity");
    assert_eq!(
        patched["spec"]["affinity"],
        serde_json::to_value(g.affinity.as_ref().unwrap()).unwrap()
    );
}

mod node;
