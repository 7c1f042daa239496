//! Alternatives: the configuration's rules, the choice, and the decisions that follow from it.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::config::Config;
use crate::placement::{Context, Decision, Namespace, Outcome, mutate, reservation, validate};
use crate::testing::{self, assert_contains};

const DATA: &str = r#"
groups:
  data:
    mode: enforce
    nodeSelector: {pool: general}
    alternatives:
      gpu:
        nodeSelector: {pool: gpu}
        tolerations: [{key: gpu, operator: Equal, value: "true", effect: NoSchedule}]
      spot:
        nodeSelector: {pool: spot}
  web:
    mode: enforce
    nodeSelector: {pool: web}
"#;

fn config_with(mode: &str, on_conflict: &str) -> Config {
    testing::config(&DATA.replacen(
        "mode: enforce",
        &format!("mode: {mode}\n    onConflict: {on_conflict}"),
        1,
    ))
}

fn pod(labels: &[(&str, &str)], spec: Value) -> Pod {
    let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
    let mut spec = spec;
    spec["containers"] = json!([{"name": "app", "image": "busybox"}]);
    serde_json::from_value(json!({"metadata": {"name": "p", "labels": labels}, "spec": spec})).expect("a pod")
}

fn in_group(config: &Config, group: &str, pod: &Pod, webhook: fn(&Config, &Namespace<'_>, &Pod) -> Outcome) -> Outcome {
    let labels = BTreeMap::from([(config.namespace_label.clone(), group.to_owned())]);
    webhook(config, &Namespace::new("team", &labels), pod)
}

fn mutated(config: &Config, pod: &Pod) -> Outcome {
    in_group(config, "data", pod, |c, ns, p| mutate(c, ns, p, &Context::default()))
}

fn validated(config: &Config, pod: &Pod) -> Outcome {
    in_group(config, "data", pod, |c, ns, p| {
        validate(c, ns, p, None, &Context::default())
    })
}

fn errors(yaml: &str) -> Vec<String> {
    match Config::from_yaml(yaml, "test", Vec::new()) {
        Ok(_) => Vec::new(),
        Err(e) => crate::testing::field_errors(&e)
            .iter()
            .map(ToString::to_string)
            .collect(),
    }
}

// ---- configuration -----------------------------------------------------------

#[test]
fn alternatives_load_and_leave_a_group_without_them_unchanged() {
    let config = testing::config(DATA);
    let data = &config.groups["data"];
    assert_eq!(data.placement_names().collect::<Vec<_>>(), ["default", "gpu", "spot"]);
    let gpu = data.with_alternative("gpu").expect("offered");
    assert_eq!(gpu.node_selector["pool"], "gpu");
    assert_eq!(gpu.tolerations.len(), 1);
    assert!(gpu.alternatives.is_empty());
    assert_eq!((gpu.mode, gpu.on_conflict), (data.mode, data.on_conflict));
    assert!(data.with_alternative("tpu").is_none());
    assert_eq!(config.pod_placement_label, "pod-director/placement");
    // A group without alternatives serializes (and so hashes into the revision) as before.
    assert!(
        !serde_json::to_string(&config.groups["web"])
            .unwrap()
            .contains("alternatives")
    );
    assert!(!serde_json::to_string(&config).unwrap().contains("podPlacementLabel"));
}

#[test]
fn alternatives_that_cannot_be_told_apart_are_refused() {
    let same_as_default =
        errors("groups:\n  g:\n    nodeSelector: {pool: a}\n    alternatives:\n      b: {nodeSelector: {pool: a}}\n");
    assert_eq!(same_as_default.len(), 1, "{same_as_default:?}");
    assert_contains(
        &same_as_default[0],
        "groups.g.alternatives.b: places pods exactly as \"default\" does",
    );
    let twins = errors(
        "groups:\n  g:\n    alternatives:\n      a: {nodeSelector: {pool: x}}\n      b: {nodeSelector: {pool: x}}\n",
    );
    assert_eq!(twins.len(), 1, "{twins:?}");
    assert_contains(&twins[0], "groups.g.alternatives.b: places pods exactly as \"a\" does");
}

#[test]
fn alternative_names_are_dns_labels_other_than_default_and_at_most_eight() {
    let found = errors(
        "groups:\n  g:\n    alternatives:\n      default: {nodeSelector: {pool: x}}\n      GPU: {nodeSelector: {pool: y}}\n",
    );
    assert!(
        found
            .iter()
            .any(|e| e.starts_with("groups.g.alternatives.default: \"default\" names the group's own")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|e| e.starts_with("groups.g.alternatives.GPU: alternative name \"GPU\" must consist")),
        "{found:?}"
    );
    let nine: String = (0..9)
        .map(|i| format!("      a{i}: {{nodeSelector: {{pool: p{i}}}}}\n"))
        .collect();
    let found = errors(&format!("groups:\n  g:\n    alternatives:\n{nine}"));
    assert!(
        found
            .iter()
            .any(|e| e == "groups.g.alternatives: 9 alternatives; at most 8"),
        "{found:?}"
    );
}

#[test]
fn an_alternative_is_checked_like_a_placement() {
    let found = errors(
        "groups:\n  g:\n    alternatives:\n      gpu:\n        mode: enforce\n        tolerations: [{key: gpu, operator: Equals}]\n",
    );
    assert!(
        found
            .iter()
            .any(|e| e.starts_with("groups.g.alternatives.gpu.mode: unknown key")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|e| e.starts_with("groups.g.alternatives.gpu.tolerations[0].operator: \"Equals\" is not one of")),
        "{found:?}"
    );
}

#[test]
fn a_group_with_alternatives_names_them_as_its_policy_blocker() {
    let config = testing::config(DATA);
    let blockers = config.policy_blockers("data", &config.groups["data"]);
    assert!(blockers.iter().any(|b| b.starts_with("alternatives:")), "{blockers:?}");
    assert!(config.policy_blockers("web", &config.groups["web"]).is_empty());
    assert!(
        errors(&DATA.replacen("mode: enforce", "mode: enforce\n    enforceWith: policy", 1))
            .iter()
            .any(|e| e.contains("groups.data.enforceWith: policy, but") && e.contains("alternatives"))
    );
}

// ---- the choice and its decisions ----------------------------------------------

#[test]
fn a_pod_without_the_label_gets_the_default_placement() {
    let out = mutated(&testing::config(DATA), &pod(&[], json!({})));
    assert_eq!(out.decision, Decision::Patched);
    assert_eq!(out.alternative.as_deref(), Some("default"));
    assert_eq!(
        out.patch_json(),
        json!([{"op": "add", "path": "/spec/nodeSelector", "value": {"pool": "general"}}])
    );
    // A group without alternatives reports none.
    let web = in_group(&testing::config(DATA), "web", &pod(&[], json!({})), |c, ns, p| {
        mutate(c, ns, p, &Context::default())
    });
    assert_eq!(web.alternative, None);
}

#[test]
fn a_pod_choosing_an_alternative_gets_its_selector_and_toleration() {
    let out = mutated(
        &testing::config(DATA),
        &pod(&[("pod-director/placement", "gpu")], json!({})),
    );
    assert_eq!(out.decision, Decision::Patched);
    assert_eq!(out.alternative.as_deref(), Some("gpu"));
    assert_eq!(
        out.patch_json(),
        json!([
            {"op": "add", "path": "/spec/nodeSelector", "value": {"pool": "gpu"}},
            {"op": "add", "path": "/spec/tolerations", "value": [{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]}
        ])
    );
    // The placed pod validates against its alternative, and not against the default.
    let placed = pod(
        &[("pod-director/placement", "gpu")],
        json!({"nodeSelector": {"pool": "gpu"}, "tolerations": [{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]}),
    );
    let checked = validated(&testing::config(DATA), &placed);
    assert_eq!(
        (checked.decision, checked.alternative.as_deref()),
        (Decision::Noop, Some("gpu")),
        "{checked:?}"
    );
    let relabelled = pod(&[], json!({"nodeSelector": {"pool": "gpu"}}));
    assert_eq!(
        validated(&testing::config(DATA), &relabelled).decision,
        Decision::Denied
    );
}

#[test]
fn a_choice_the_group_does_not_offer_is_a_conflict_listing_the_allowed_names() {
    let tpu = pod(&[("pod-director/placement", "tpu")], json!({}));
    let out = mutated(&config_with("enforce", "reject"), &tpu);
    assert_eq!(out.decision, Decision::Denied);
    let message = out.message.unwrap_or_default();
    assert_contains(
        &message,
        r#"metadata.labels["pod-director/placement"]: pod has "tpu", group requires one of default, gpu, spot (rejected)"#,
    );
    assert_eq!(
        mutated(&config_with("dryRun", "reject"), &tpu).decision,
        Decision::WouldDeny
    );
    let checked = validated(&config_with("dryRun", "reject"), &tpu);
    assert_eq!(
        checked.decision,
        Decision::WouldDeny,
        "shadow predicts enforce: {checked:?}"
    );
    // override and ignore apply the default placement and record the conflict.
    for policy in ["override", "ignore"] {
        let out = mutated(&config_with("enforce", policy), &tpu);
        assert_eq!(
            (out.decision, out.alternative.as_deref()),
            (Decision::Patched, Some("default")),
            "{policy}"
        );
        assert_eq!(out.conflicts.len(), 1);
        assert_eq!(out.patch_json()[0]["value"], json!({"pool": "general"}));
    }
}

#[test]
fn a_pod_selecting_an_alternative_pool_without_the_label_conflicts_with_the_default() {
    let out = mutated(
        &testing::config(DATA),
        &pod(&[], json!({"nodeSelector": {"pool": "gpu"}})),
    );
    assert_eq!(out.decision, Decision::Denied);
    assert_contains(
        &out.message.unwrap_or_default(),
        r#"nodeSelector["pool"]: pod has "gpu", group requires "general""#,
    );
}

#[test]
fn a_reservation_admits_a_group_choosing_its_pool_only_when_it_allows_the_group() {
    let reserved = |allow: &str| {
        testing::config(&format!(
            "{DATA}  ml:\n    nodeSelector: {{pool: gpu}}\n    tolerations: [{{key: gpu, operator: Equal, value: \"true\", effect: NoSchedule}}]\n    reserve: {{mode: enforce{allow}}}\n"
        ))
    };
    let placed = pod(
        &[("pod-director/placement", "gpu")],
        json!({"nodeSelector": {"pool": "gpu"}, "tolerations": [{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]}),
    );
    let decide = |config: &Config| {
        in_group(config, "data", &placed, |c, ns, p| {
            reservation::decide(c, ns, p, None, &Context::default())
        })
    };
    let closed = reserved("");
    assert_eq!(decide(&closed).decision, Decision::Denied);
    assert!(
        reservation::warnings(&closed)
            .iter()
            .any(|w| w.starts_with("groups.data.alternatives.gpu")),
        "{:?}",
        reservation::warnings(&closed)
    );
    let open = reserved(", allow: {placementGroups: [data]}");
    let out = decide(&open);
    assert_eq!(out.decision, Decision::Noop, "{out:?}");
    assert_eq!(out.reservation[0].exempt, Some(reservation::Exemption::PlacementGroup));
    assert!(
        reservation::warnings(&open).is_empty(),
        "{:?}",
        reservation::warnings(&open)
    );
}

// ---- the rule, and the plan it leads to --------------------------------------

fn a_selector() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(
        prop::sample::select(vec!["pool", "zone", "arch"]).prop_map(str::to_owned),
        prop::sample::select(vec!["a", "b", "c"]).prop_map(str::to_owned),
        0..3,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn the_chosen_placement_is_the_one_the_rule_names_and_is_planned_as_a_group_of_its_own(
        default in a_selector(),
        alternatives in prop::collection::btree_map(
            prop::sample::select(vec!["gpu", "spot", "arm"]).prop_map(str::to_owned), a_selector(), 0..3),
        label in prop::option::of(prop::sample::select(vec!["default", "gpu", "spot", "arm", "tpu"])),
        own in a_selector(),
        tolerate in any::<bool>(),
        on_conflict in prop::sample::select(vec!["reject", "override", "ignore"]),
    ) {
        let tolerations = |on: bool| if on { json!([{"key": "gpu", "operator": "Exists"}]) } else { json!([]) };
        let alts: serde_json::Map<String, Value> = alternatives.iter().enumerate()
            .map(|(i, (name, sel))| (name.clone(), json!({"nodeSelector": sel, "tolerations": tolerations(i % 2 == 0)})))
            .collect();
        let config: Config = serde_json::from_value(json!({"groups": {"g": {
            "onConflict": on_conflict, "nodeSelector": default, "alternatives": alts
        }}})).expect("config");
        let group = &config.groups["g"];
        let labels: Vec<(&str, &str)> = label.iter().map(|l| ("pod-director/placement", *l)).collect();
        let candidate = pod(&labels, json!({"nodeSelector": own, "tolerations": tolerations(tolerate)}));
        let chosen = choose(&config, group, &candidate);
        // The documented rule.
        let offered = label.filter(|l| alternatives.contains_key(*l));
        let expected_name = match (label, offered) {
            (_, Some(name)) => Some(name),
            (None, None) if alternatives.is_empty() => None,
            _ => Some("default"),
        };
        prop_assert_eq!(chosen.name, expected_name);
        prop_assert_eq!(chosen.conflict.is_some(), label.is_some_and(|l| l != "default") && offered.is_none());
        // The plan of the chosen placement is today's plan for a group whose only placement it is.
        let alone: Config = serde_json::from_value(json!({"groups": {"g": {
            "onConflict": on_conflict,
            "nodeSelector": offered.map_or(&default, |n| &alternatives[n]),
            "tolerations": offered.map_or(json!([]), |n| alts[n]["tolerations"].clone()),
        }}})).expect("config");
        let mut expected = crate::placement::plan(&candidate, &alone.groups["g"]);
        if let Some(conflict) = &chosen.conflict {
            expected.conflicts.insert(0, conflict.clone());
        }
        prop_assert_eq!(chosen.plan(&candidate), expected);
    }
}
