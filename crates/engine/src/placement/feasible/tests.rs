use k8s_openapi::api::core::v1::Node;
use serde_json::json;

use super::*;
use crate::testing::node;

fn spec(value: serde_json::Value) -> PodSpec {
    serde_json::from_value(value).expect("a valid PodSpec")
}

fn fits(pod: serde_json::Value, node: &NodeInfo) -> bool {
    let spec = spec(pod);
    feasible(&Placement::of_spec(&spec), node)
}

fn required(terms: serde_json::Value) -> serde_json::Value {
    json!({"containers": [], "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}})
}

#[test]
fn a_pod_without_placement_fits_an_untainted_schedulable_node() {
    assert!(fits(json!({"containers": []}), &node("n", &[], &[], false)));
}

#[test]
fn node_selector_needs_every_key_with_its_exact_value() {
    let n = node("n", &[("pool", "ci"), ("os", "linux")], &[], false);
    assert!(fits(json!({"containers": [], "nodeSelector": {"pool": "ci"}}), &n));
    assert!(fits(
        json!({"containers": [], "nodeSelector": {"pool": "ci", "os": "linux"}}),
        &n
    ));
    assert!(!fits(json!({"containers": [], "nodeSelector": {"pool": "gpu"}}), &n));
    assert!(!fits(
        json!({"containers": [], "nodeSelector": {"pool": "ci", "zone": "a"}}),
        &n
    ));
}

#[test]
fn each_operator_matches_as_the_scheduler_does() {
    let n = node("n", &[("pool", "ci"), ("cpu", "8"), ("odd", "x8")], &[], false);
    let one = |op: &str, key: &str, values: serde_json::Value| {
        let mut r = json!({"key": key, "operator": op});
        if !values.is_null() {
            r["values"] = values;
        }
        fits(required(json!([{"matchExpressions": [r]}])), &n)
    };
    assert!(one("In", "pool", json!(["ci", "gpu"])));
    assert!(!one("In", "pool", json!(["gpu"])));
    assert!(!one("In", "missing", json!(["ci"])));
    assert!(one("NotIn", "pool", json!(["gpu"])));
    assert!(!one("NotIn", "pool", json!(["ci"])));
    assert!(
        one("NotIn", "missing", json!(["ci"])),
        "NotIn matches a node without the label"
    );
    assert!(one("Exists", "pool", json!(null)));
    assert!(!one("Exists", "missing", json!(null)));
    assert!(one("DoesNotExist", "missing", json!(null)));
    assert!(!one("DoesNotExist", "pool", json!(null)));
    assert!(one("Gt", "cpu", json!(["4"])));
    assert!(!one("Gt", "cpu", json!(["8"])));
    assert!(one("Lt", "cpu", json!(["9"])));
    assert!(!one("Lt", "cpu", json!(["8"])));
    assert!(
        !one("Gt", "odd", json!(["1"])),
        "a label that is not an integer is not greater"
    );
    assert!(!one("Gt", "missing", json!(["1"])));
    // Requirements the API refuses match nothing.
    assert!(!one("In", "pool", json!([])));
    assert!(!one("Exists", "pool", json!(["ci"])));
    assert!(!one("Gt", "cpu", json!(["four"])));
    assert!(!one("Gt", "cpu", json!(["1", "2"])));
    assert!(!one("Equals", "pool", json!(["ci"])));
}

#[test]
fn terms_are_ored_and_requirements_anded() {
    let n = node("n", &[("pool", "ci"), ("zone", "a")], &[], false);
    let ci_in_b = json!({"matchExpressions": [
        {"key": "pool", "operator": "In", "values": ["ci"]},
        {"key": "zone", "operator": "In", "values": ["b"]}
    ]});
    let zone_a = json!({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]});
    assert!(!fits(required(json!([ci_in_b.clone()])), &n), "ANDed: zone b fails");
    assert!(
        fits(required(json!([ci_in_b, zone_a])), &n),
        "ORed: the second term matches"
    );
}

#[test]
fn an_empty_term_matches_no_node() {
    let n = node("n", &[("pool", "ci")], &[], false);
    assert!(!fits(required(json!([{}])), &n));
    assert!(!fits(required(json!([{"matchExpressions": []}])), &n));
    assert!(!fits(
        required(json!([{"matchExpressions": [], "matchFields": []}])),
        &n
    ));
    assert!(!fits(required(json!([])), &n), "no term at all matches nothing either");
    let pool = json!({"matchExpressions": [{"key": "pool", "operator": "Exists"}]});
    assert!(
        fits(required(json!([{}, pool])), &n),
        "an empty term does not spoil the others"
    );
}

#[test]
fn match_fields_select_by_node_name() {
    let n = node("worker-1", &[], &[], false);
    let field = |op: &str, values: serde_json::Value| {
        fits(
            required(json!([{"matchFields": [{"key": "metadata.name", "operator": op, "values": values}]}])),
            &n,
        )
    };
    assert!(field("In", json!(["worker-1"])));
    assert!(!field("In", json!(["worker-2"])));
    assert!(field("NotIn", json!(["worker-2"])));
    assert!(!field("NotIn", json!(["worker-1"])));
    assert!(!field("In", json!(["worker-1", "worker-2"])), "one value only");
    assert!(!field("Exists", json!(null)), "In and NotIn only");
    let both = required(json!([{
        "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["worker-1"]}],
        "matchExpressions": [{"key": "pool", "operator": "Exists"}]
    }]));
    assert!(!fits(both, &n), "fields and expressions are ANDed");
}

#[test]
fn no_schedule_and_no_execute_taints_must_be_tolerated_prefer_no_schedule_need_not() {
    let pod = |tolerations: serde_json::Value| json!({"containers": [], "tolerations": tolerations});
    let no_schedule = node("a", &[], &[("dedicated", "ci", "NoSchedule")], false);
    let no_execute = node("b", &[], &[("dedicated", "ci", "NoExecute")], false);
    let prefer = node("c", &[], &[("dedicated", "ci", "PreferNoSchedule")], false);
    assert!(!fits(pod(json!([])), &no_schedule));
    assert!(!fits(pod(json!([])), &no_execute));
    assert!(fits(pod(json!([])), &prefer));
    let ci = json!([{"key": "dedicated", "operator": "Equal", "value": "ci", "effect": "NoSchedule"}]);
    assert!(fits(pod(ci.clone()), &no_schedule));
    assert!(!fits(pod(ci), &no_execute), "the effect must match");
    assert!(fits(
        pod(json!([{"key": "dedicated", "operator": "Exists"}])),
        &no_execute
    ));
    assert!(
        fits(pod(json!([{"operator": "Exists"}])), &no_execute),
        "keyless Exists tolerates all"
    );
    assert!(
        fits(pod(json!([{"key": "dedicated", "value": "ci"}])), &no_schedule),
        "operator defaults to Equal"
    );
    assert!(!fits(
        pod(json!([{"key": "dedicated", "operator": "Equal", "value": "gpu"}])),
        &no_schedule
    ));
}

#[test]
fn a_cordoned_node_counts_only_for_pods_tolerating_the_unschedulable_taint() {
    let cordoned = node("n", &[], &[], true);
    assert!(!fits(json!({"containers": []}), &cordoned));
    assert!(fits(
        json!({"containers": [], "tolerations": [{"key": UNSCHEDULABLE_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]}),
        &cordoned
    ));
}

#[test]
fn the_first_unmet_requirement_is_named() {
    let n = node("n", &[("pool", "gpu")], &[("dedicated", "gpu", "NoSchedule")], false);
    let s = spec(json!({"containers": [], "nodeSelector": {"pool": "ci"}}));
    let why = unmet(&Placement::of_spec(&s), &n).expect("not feasible");
    assert_eq!(
        why.to_string(),
        "nodeSelector pool=ci: the node's label pool is \"gpu\""
    );
    let s = spec(json!({"containers": []}));
    let why = unmet(&Placement::of_spec(&s), &n).expect("not feasible");
    assert_eq!(why.to_string(), "taint dedicated=gpu:NoSchedule is not tolerated");
}

#[test]
fn a_node_keeps_only_name_labels_taints_and_cordon() {
    let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "w1", "labels": {"pool": "ci"}, "annotations": {"a": "b"}},
            "spec": {"unschedulable": true, "taints": [{"key": "k", "effect": "NoExecute", "timeAdded": "2026-12-01T00:00:00Z"}]},
            "status": {"images": [{"names": ["nginx"], "sizeBytes": 1}]}
        }))
        .expect("a Node");
    let info = NodeInfo::from_node(&node);
    assert_eq!(&*info.name, "w1");
    assert_eq!(info.label("pool"), Some("ci"));
    assert_eq!(info.labels.len(), 1);
    assert_eq!(&*info.taints, &[NodeTaint::new("k", "", "NoExecute")]);
    assert!(info.unschedulable);
}

#[test]
fn equal_placements_have_equal_fingerprints_and_different_ones_differ() {
    let a = spec(json!({"containers": [{"name": "x"}], "nodeSelector": {"pool": "ci"}}));
    let b = spec(json!({"containers": [{"name": "y", "image": "z"}], "nodeSelector": {"pool": "ci"}}));
    let c = spec(json!({"containers": [], "nodeSelector": {"pool": "gpu"}}));
    let d = spec(json!({"containers": [], "nodeSelector": {"pool": "ci"}, "tolerations": [{"operator": "Exists"}]}));
    let f = |s: &PodSpec| Placement::of_spec(s).fingerprint();
    assert_eq!(f(&a), f(&b), "containers do not matter");
    assert_ne!(f(&a), f(&c));
    assert_ne!(f(&a), f(&d));
}
