use serde_json::json;

use super::*;
use crate::testing::{ENTRY_GROUPS, assert_contains, config, rendered_entries, rendered_entries_with};

fn expressions(selector: &LabelSelector) -> Value {
    serde_json::to_value(selector.match_expressions.as_ref().expect("expressions")).unwrap()
}

#[test]
fn groups_are_selected_by_the_entry_of_their_mode() {
    let selectors = namespace_selectors(&config(ENTRY_GROUPS), &BTreeSet::new());
    let excluded = json!({"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-node-lease", "kube-public", "kube-system"]});
    assert_eq!(
        expressions(&selectors[&PodEntry::Enforce]),
        json!([{"key": "pod-director/group", "operator": "In", "values": ["ci"]}, excluded])
    );
    assert_eq!(
        expressions(&selectors[&PodEntry::Observe]),
        json!([{"key": "pod-director/group", "operator": "In", "values": ["batch", "gpu"]}, excluded])
    );
    assert_eq!(
        expressions(&selectors[&PodEntry::UnknownGroup]),
        json!([
            {"key": "pod-director/group", "operator": "Exists"},
            {"key": "pod-director/group", "operator": "NotIn", "values": ["batch", "ci", "gpu"]},
            excluded,
        ])
    );
    assert_eq!(
        expressions(&selectors[&PodEntry::DefaultGroup]),
        json!([{"key": "kubernetes.io/metadata.name", "operator": "In", "values": [NO_NAMESPACE]}, excluded]),
        "no defaultGroup: the entry selects no namespace"
    );
}

#[test]
fn an_entry_with_nothing_to_serve_selects_a_name_no_namespace_can_have() {
    let selectors = namespace_selectors(&config("groups: {a: {}}"), &BTreeSet::new());
    assert_eq!(
        expressions(&selectors[&PodEntry::Enforce])[0],
        json!({"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["none.pod-director.io"]})
    );
    assert!(
        crate::syntax::label_value(NO_NAMESPACE).is_none(),
        "a valid label value"
    );
    assert!(
        crate::syntax::dns1123_label(NO_NAMESPACE).is_some(),
        "but never a namespace's name"
    );
    let none = namespace_selectors(&config("groups: {}"), &BTreeSet::new());
    assert_eq!(
        expressions(&none[&PodEntry::UnknownGroup]),
        json!([
            {"key": "pod-director/group", "operator": "Exists"},
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-node-lease", "kube-public", "kube-system"]},
        ])
    );
}

#[test]
fn a_default_group_selects_unlabelled_namespaces_with_its_modes_policy() {
    let c = config(&format!("defaultGroup: ci\n{ENTRY_GROUPS}"));
    assert_eq!(
        expressions(&namespace_selectors(&c, &BTreeSet::new())[&PodEntry::DefaultGroup])[0],
        json!({"key": "pod-director/group", "operator": "DoesNotExist"})
    );
    assert_eq!(default_group_follows(&c), PodEntry::Enforce);
    assert_eq!(
        default_group_follows(&config(&format!("defaultGroup: gpu\n{ENTRY_GROUPS}"))),
        PodEntry::Observe
    );
    assert_eq!(default_group_follows(&config(ENTRY_GROUPS)), PodEntry::Observe);
    let by_default = config("defaultMode: enforce\ndefaultGroup: batch\ngroups: {batch: {}}");
    assert_eq!(
        default_group_follows(&by_default),
        PodEntry::Enforce,
        "mode inherited from defaultMode"
    );
}

#[test]
fn excluded_namespaces_always_include_kube_system_sorted_once() {
    let mut c = config("excludedNamespaces: [monitoring, kube-system]\ngroups: {a: {}}");
    c.excluded_namespaces.push("pod-director".to_owned());
    assert_eq!(excluded(&c), ["kube-system", "monitoring", "pod-director"]);
    let c = config("excludedNamespaces: []\nnamespaceLabel: infra.example.com/pool\ngroups: {a: {}}");
    let selectors = namespace_selectors(&c, &BTreeSet::new());
    assert_eq!(
        expressions(&selectors[&PodEntry::Observe]),
        json!([
            {"key": "infra.example.com/pool", "operator": "In", "values": ["a"]},
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]},
        ])
    );
}

fn plan(kind: Kind, live: &[Value], yaml: &str) -> (Vec<PatchOperation>, Vec<String>) {
    plan_patch(
        kind,
        "pd",
        live,
        &config(yaml),
        &EntrySettings::default(),
        &BTreeSet::new(),
    )
    .expect("a plan")
}

fn patched(live: &[Value], ops: &[PatchOperation]) -> Vec<Value> {
    let mut doc = json!({"webhooks": live});
    json_patch::patch(&mut doc, ops).expect("the patch applies");
    doc["webhooks"].as_array().cloned().unwrap_or_default()
}

fn entry<'a>(webhooks: &'a [Value], name: &str) -> &'a Value {
    webhooks
        .iter()
        .find(|w| w["name"] == name)
        .unwrap_or_else(|| panic!("no entry {name}"))
}

#[test]
fn webhooks_that_match_the_configuration_need_no_patch() {
    // With the in-tree plugins' section too: the chart renders their entries first, and the
    // reconciler takes them as they are (no insert, no reorder), in either mode.
    let enforced = format!("inTreePlugins: {{mode: enforce}}\n{ENTRY_GROUPS}");
    let dry_run = format!("inTreePlugins: {{}}\n{ENTRY_GROUPS}");
    for yaml in [ENTRY_GROUPS, enforced.as_str(), dry_run.as_str()] {
        for kind in [Kind::Mutating, Kind::Validating] {
            let live = rendered_entries(kind, "pd", yaml);
            if yaml != ENTRY_GROUPS {
                assert_eq!(live[0]["name"], in_tree::entry_name(kind, "pd").as_str(), "{kind}");
            }
            let (ops, changed) = plan(kind, &live, yaml);
            assert!(ops.is_empty() && changed.is_empty(), "{kind} {yaml}: {ops:?}");
        }
    }
}

#[test]
fn a_group_flipped_to_enforce_moves_to_the_enforce_entry_and_nothing_else_is_touched() {
    let live = rendered_entries(Kind::Validating, "pd", ENTRY_GROUPS);
    let flipped = ENTRY_GROUPS.replace("gpu: {mode: warn}", "gpu: {mode: enforce}");
    let (ops, changed) = plan(Kind::Validating, &live, &flipped);
    assert_eq!(
        changed,
        [
            "enforce.validate.pd.pod-director.io",
            "observe.validate.pd.pod-director.io",
            "enforce.namespace-guard.pd.pod-director.io",
            "observe.namespace-guard.pd.pod-director.io",
        ]
    );
    let after = patched(&live, &ops);
    assert_eq!(
        after[0]["namespaceSelector"]["matchExpressions"][0]["values"],
        json!(["ci", "gpu"])
    );
    assert_eq!(
        after[1]["namespaceSelector"]["matchExpressions"][0]["values"],
        json!(["batch"])
    );
    assert_eq!(after[2], live[2], "a foreign entry is not pod-director's to touch");
    assert_eq!(after[3], live[3]);
    for (w, before) in after.iter().zip(&live) {
        assert_eq!(
            w["clientConfig"], before["clientConfig"],
            "clientConfig is never touched"
        );
    }
    assert_eq!(
        entry(&after, "enforce.namespace-guard.pd.pod-director.io")["objectSelector"]["matchExpressions"][0]["values"],
        json!(["ci", "gpu"])
    );
    let (again, _) = plan(Kind::Validating, &after, &flipped);
    assert!(again.is_empty(), "idempotent: {again:?}");
}

#[test]
fn every_changed_entry_is_guarded_by_a_test_of_its_name() {
    let live = rendered_entries(Kind::Mutating, "pd", ENTRY_GROUPS);
    let (ops, _) = plan(Kind::Mutating, &live, "groups: {ci: {}}");
    let ops = serde_json::to_value(&ops).unwrap();
    assert_eq!(
        ops[0],
        json!({"op": "test", "path": "/webhooks/0/name", "value": "enforce.mutate.pd.pod-director.io"})
    );
    assert_eq!(ops[1]["op"], "add");
    assert_eq!(ops[1]["path"], "/webhooks/0/namespaceSelector");
    assert_eq!(
        ops[2],
        json!({"op": "test", "path": "/webhooks/1/name", "value": "observe.mutate.pd.pod-director.io"})
    );
    assert_eq!(
        ops[4]["path"], "/webhooks/4/name",
        "unknown-group sits after the foreign entry"
    );
}

#[test]
fn a_default_group_set_by_a_reload_gets_unlabelled_namespaces_and_the_enforce_policy() {
    let live = rendered_entries(Kind::Mutating, "pd", ENTRY_GROUPS);
    let with_default = format!("defaultGroup: ci\n{ENTRY_GROUPS}");
    let (ops, changed) = plan(Kind::Mutating, &live, &with_default);
    assert_eq!(changed, ["default-group.mutate.pd.pod-director.io"]);
    let after = patched(&live, &ops);
    let default = entry(&after, "default-group.mutate.pd.pod-director.io");
    assert_eq!(
        default["namespaceSelector"]["matchExpressions"][0],
        json!({"key": "pod-director/group", "operator": "DoesNotExist"})
    );
    assert_eq!(default["failurePolicy"], "Fail");
    // The enforce policy is the chart's choice (webhook.failurePolicy.enforce), passed as a flag.
    let relaxed = EntrySettings {
        webhook_failure_policy_enforce: "Ignore".to_owned(),
        ..EntrySettings::default()
    };
    let live = rendered_entries_with(Kind::Mutating, "pd", ENTRY_GROUPS, &relaxed);
    let (ops, _) = plan_patch(
        Kind::Mutating,
        "pd",
        &live,
        &config(&with_default),
        &relaxed,
        &BTreeSet::new(),
    )
    .unwrap();
    let after = patched(&live, &ops);
    assert_eq!(
        entry(&after, "default-group.mutate.pd.pod-director.io")["failurePolicy"],
        "Ignore"
    );
}

#[test]
fn every_field_the_chart_renders_is_restored_after_a_hand_edit() {
    let live = rendered_entries(Kind::Validating, "pd", ENTRY_GROUPS);
    let owned = live.clone();
    let mut edited = live.clone();
    let enforce = 0;
    edited[enforce]["failurePolicy"] = json!("Ignore");
    edited[enforce]["timeoutSeconds"] = json!(30);
    edited[enforce]["objectSelector"] = json!({"matchLabels": {"skip-me": "no"}});
    edited[enforce]["matchConditions"] = json!([{"name": "never", "expression": "false"}]);
    edited[enforce]["rules"][0]["operations"] = json!(["DELETE"]);
    edited[1]["sideEffects"] = json!("Some");
    edited[1]
        .as_object_mut()
        .expect("an object")
        .remove("admissionReviewVersions");
    edited[1]["clientConfig"] = json!({"url": "https://127.0.0.1:9999/elsewhere"});
    let guard = edited
        .iter()
        .position(|w| w["name"] == "enforce.namespace-guard.pd.pod-director.io")
        .expect("guard entry");
    edited[guard]["failurePolicy"] = json!("Ignore");
    edited[guard]["rules"][0]["resources"] = json!(["namespaces"]);
    let (ops, changed) = plan(Kind::Validating, &edited, ENTRY_GROUPS);
    assert_eq!(
        changed,
        [
            "enforce.validate.pd.pod-director.io",
            "observe.validate.pd.pod-director.io",
            "enforce.namespace-guard.pd.pod-director.io",
        ]
    );
    let after = patched(&edited, &ops);
    for (i, (got, want)) in after.iter().zip(&owned).enumerate() {
        if i == 1 {
            assert_eq!(
                got["clientConfig"]["url"], "https://127.0.0.1:9999/elsewhere",
                "clientConfig stays the installation's"
            );
            let mut got = got.clone();
            got["clientConfig"] = want["clientConfig"].clone();
            assert_eq!(&got, want);
        } else {
            assert_eq!(got, want, "entry {i} restored");
        }
    }
    let (again, _) = plan(Kind::Validating, &after, ENTRY_GROUPS);
    assert!(again.is_empty(), "{again:?}");
}

#[test]
fn the_guard_entries_split_namespaces_by_their_groups_modes() {
    let selectors = guard_object_selectors(&config(ENTRY_GROUPS));
    assert_eq!(
        expressions(&selectors[&GuardEntry::Enforce]),
        json!([{"key": "pod-director/group", "operator": "In", "values": ["ci"]}])
    );
    assert_eq!(
        expressions(&selectors[&GuardEntry::Observe]),
        json!([
            {"key": "pod-director/group", "operator": "Exists"},
            {"key": "pod-director/group", "operator": "NotIn", "values": ["ci"]},
        ])
    );
    // With an enforced defaultGroup an unlabelled namespace is in enforce.
    let selectors = guard_object_selectors(&config(&format!("defaultGroup: ci\n{ENTRY_GROUPS}")));
    assert_eq!(
        expressions(&selectors[&GuardEntry::Enforce]),
        json!([{"key": "pod-director/group", "operator": "NotIn", "values": ["batch", "gpu"]}])
    );
    assert_eq!(
        expressions(&selectors[&GuardEntry::Observe]),
        json!([{"key": "pod-director/group", "operator": "In", "values": ["batch", "gpu"]}])
    );
    // No enforce group: the enforce entry selects nothing.
    let selectors = guard_object_selectors(&config("groups: {a: {}}"));
    assert_eq!(
        expressions(&selectors[&GuardEntry::Enforce]),
        json!([{"key": "kubernetes.io/metadata.name", "operator": "In", "values": [NO_NAMESPACE]}])
    );
}

#[test]
fn the_guard_entries_failure_policies_follow_the_groups_or_the_explicit_guard_mode() {
    let policies = |yaml: &str| -> Vec<Value> {
        owned_entries(
            Kind::Validating,
            "pd",
            &config(yaml),
            &EntrySettings::default(),
            &BTreeSet::new(),
        )
        .into_iter()
        .filter(|w| w["name"].as_str().is_some_and(|n| n.contains(".namespace-guard.")))
        .map(|w| w["failurePolicy"].clone())
        .collect()
    };
    assert_eq!(policies(ENTRY_GROUPS), [json!("Fail"), json!("Ignore")]);
    assert_eq!(
        policies(&format!("namespaceGuard: {{mode: enforce}}\n{ENTRY_GROUPS}")),
        [json!("Fail"), json!("Fail")]
    );
    assert_eq!(
        policies(&format!("namespaceGuard: {{mode: dryRun}}\n{ENTRY_GROUPS}")),
        [json!("Ignore"), json!("Ignore")]
    );
    assert!(
        owned_entries(
            Kind::Mutating,
            "pd",
            &config(ENTRY_GROUPS),
            &EntrySettings::default(),
            &BTreeSet::new()
        )
        .iter()
        .all(|w| !w["name"].as_str().unwrap_or_default().contains("namespace-guard")),
        "the guard only validates"
    );
}

#[test]
fn a_missing_entry_is_an_error_and_nothing_is_added() {
    let mut live = rendered_entries(Kind::Mutating, "pd", ENTRY_GROUPS);
    live.retain(|w| w["name"] != "default-group.mutate.pd.pod-director.io");
    let err = plan_patch(
        Kind::Mutating,
        "pd",
        &live,
        &config(ENTRY_GROUPS),
        &EntrySettings::default(),
        &BTreeSet::new(),
    )
    .unwrap_err();
    assert!(
        err.to_string().starts_with(
            "MutatingWebhookConfiguration pd has no webhook entry \"default-group.mutate.pd.pod-director.io\""
        ),
        "{err}"
    );
    let mut live = rendered_entries(Kind::Validating, "pd", ENTRY_GROUPS);
    live.retain(|w| w["name"] != "observe.namespace-guard.pd.pod-director.io");
    let err = plan_patch(
        Kind::Validating,
        "pd",
        &live,
        &config(ENTRY_GROUPS),
        &EntrySettings::default(),
        &BTreeSet::new(),
    )
    .unwrap_err();
    assert_contains(&err.to_string(), "observe.namespace-guard.pd.pod-director.io");
}

const RESERVING: &str = "
groups:
  gpu:
    mode: enforce
    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
    reserve: {mode: dryRun}
  batch: {}
";

#[test]
fn the_reservation_entry_is_added_when_a_group_starts_to_reserve_and_removed_when_none_does() {
    let reservation = "reservation.pd.pod-director.io";
    // Live: rendered without a reservation; a group starts to reserve.
    let live = rendered_entries(Kind::Validating, "pd", ENTRY_GROUPS);
    assert!(live.iter().all(|w| w["name"] != reservation));
    let (ops, changed) = plan(Kind::Validating, &live, RESERVING);
    assert!(changed.contains(&reservation.to_owned()), "{changed:?}");
    let after = patched(&live, &ops);
    let added = entry(&after, reservation);
    assert_eq!(added["failurePolicy"], "Ignore", "dryRun: {added}");
    assert_eq!(
        added["clientConfig"],
        json!({"url": "https://127.0.0.1:8443/validate-reservation", "caBundle": "Q0E="}),
        "the /validate entry's clientConfig at /validate-reservation"
    );
    assert_contains(
        added["matchConditions"][0]["expression"].as_str().unwrap_or_default(),
        "t.key in ['nvidia.com/gpu']",
    );
    // Added before the other entries were brought in step, guarded by the last entry's name.
    assert!(matches!(&ops[0], PatchOperation::Test(_)), "{ops:?}");
    // In step now.
    let (ops, changed) = plan(Kind::Validating, &after, RESERVING);
    assert!(ops.is_empty(), "{changed:?}");
    // Enforce: the entry fails closed.
    let enforced = RESERVING.replace("reserve: {mode: dryRun}", "reserve: {mode: enforce}");
    let (ops, _) = plan(Kind::Validating, &after, &enforced);
    assert_eq!(entry(&patched(&after, &ops), reservation)["failurePolicy"], "Fail");
    // Nobody reserves any more: the entry goes, and nothing else changes.
    let unreserved = RESERVING.replace("    reserve: {mode: dryRun}\n", "");
    let (ops, changed) = plan(Kind::Validating, &after, &unreserved);
    assert_eq!(changed, [reservation], "{ops:?}");
    let gone = patched(&after, &ops);
    assert!(gone.iter().all(|w| w["name"] != reservation));
    assert_eq!(gone.len(), after.len() - 1);
    // The mutating configuration never has one.
    let mutating = rendered_entries(Kind::Mutating, "pd", RESERVING);
    assert!(mutating.iter().all(|w| w["name"] != reservation));
    let (ops, _) = plan(Kind::Mutating, &mutating, RESERVING);
    assert!(ops.is_empty());
}

#[test]
fn a_service_client_config_is_copied_with_the_reservation_path() {
    let validate = json!({"clientConfig": {"service": {"name": "pd", "namespace": "ns", "path": "/validate", "port": 443}, "caBundle": "Q0E="}});
    assert_eq!(
        reservation::client_config_from(&validate),
        Some(
            json!({"service": {"name": "pd", "namespace": "ns", "path": "/validate-reservation", "port": 443}, "caBundle": "Q0E="})
        )
    );
    assert_eq!(
        reservation::client_config_from(&json!({"clientConfig": {"url": "https://x/elsewhere"}})),
        None
    );
}

pub(super) const ON_POLICY: &str = "
groups:
  ci: {mode: enforce, enforceWith: policy, nodeSelector: {pool: ci}}
  web: {mode: enforce}
";

#[test]
fn groups_handed_over_to_their_policies_leave_the_enforce_entry_for_the_policy_entries() {
    let c = config(ON_POLICY);
    let handed = BTreeSet::from(["ci".to_owned()]);
    let before = namespace_selectors(&c, &BTreeSet::new());
    assert_eq!(
        expressions(&before[&PodEntry::Enforce])[0]["values"],
        json!(["ci", "web"])
    );
    let after = namespace_selectors(&c, &handed);
    assert_eq!(expressions(&after[&PodEntry::Enforce])[0]["values"], json!(["web"]));
    let names = |kind| -> Vec<String> {
        owned_entries(kind, "pd", &c, &EntrySettings::default(), &handed)
            .iter()
            .map(|w| w["name"].as_str().unwrap_or_default().to_owned())
            .filter(|n| n.starts_with("policy"))
            .collect()
    };
    assert_eq!(
        names(Kind::Mutating),
        [
            "policy.mutate.pd.pod-director.io",
            "policy-observe.mutate.pd.pod-director.io"
        ]
    );
    assert_eq!(names(Kind::Validating), ["policy.validate.pd.pod-director.io"]);
    let entries = owned_entries(Kind::Mutating, "pd", &c, &EntrySettings::default(), &handed);
    let fallback = entry(&entries, "policy.mutate.pd.pod-director.io");
    assert_eq!(fallback["failurePolicy"], "Fail");
    assert_eq!(
        fallback["matchConditions"][0]["expression"],
        admission_policies::WEBHOOK_ONLY
    );
    assert_eq!(expressions_of(fallback)[0]["values"], json!(["ci"]));
    let observe = entry(&entries, "policy-observe.mutate.pd.pod-director.io");
    assert_eq!(observe["failurePolicy"], "Ignore");
    assert_contains(
        observe["matchConditions"][0]["expression"].as_str().unwrap_or_default(),
        "ownerReferences[0].uid",
    );
    // Nothing handed over: the chart's entries exactly.
    assert_eq!(
        owned_entries(Kind::Mutating, "pd", &c, &EntrySettings::default(), &BTreeSet::new()),
        owned_entries(
            Kind::Mutating,
            "pd",
            &config("groups: {ci: {mode: enforce}, web: {mode: enforce}}"),
            &EntrySettings::default(),
            &BTreeSet::new()
        )
    );
}

#[test]
fn a_group_checked_by_its_validating_policy_leaves_only_the_validating_enforce_entry() {
    let c = config(
        "groups:\n  ci: {mode: enforce, enforceWith: policy, nodeSelector: {pool: ci}}\n  \
         v: {mode: enforce, enforceWith: webhookAndPolicy, nodeSelector: {pool: v}}\n  web: {mode: enforce}\n",
    );
    let handed = BTreeSet::from(["ci".to_owned(), "v".to_owned()]);
    let groups = |kind, entry: &str| {
        let entries = owned_entries(kind, "pd", &c, &EntrySettings::default(), &handed);
        let found = entries.iter().find(|w| w["name"] == entry).cloned();
        found.map(|e| expressions_of(&e)[0]["values"].clone())
    };
    // Placed by the webhook: still sent to /mutate (one call), not to /validate.
    assert_eq!(
        groups(Kind::Mutating, "enforce.mutate.pd.pod-director.io"),
        Some(json!(["v", "web"]))
    );
    assert_eq!(
        groups(Kind::Validating, "enforce.validate.pd.pod-director.io"),
        Some(json!(["web"]))
    );
    // Its bindings, updates and nodeName pods still reach /validate, by the policy entry.
    assert_eq!(
        groups(Kind::Validating, "policy.validate.pd.pod-director.io"),
        Some(json!(["ci", "v"]))
    );
    assert_eq!(
        groups(Kind::Mutating, "policy.mutate.pd.pod-director.io"),
        Some(json!(["ci"]))
    );
    assert_eq!(
        groups(Kind::Mutating, "policy-observe.mutate.pd.pod-director.io"),
        Some(json!(["ci"]))
    );
    // Only webhookAndPolicy handed over: no mutating policy entry at all.
    let only_v = BTreeSet::from(["v".to_owned()]);
    let mutating = owned_entries(Kind::Mutating, "pd", &c, &EntrySettings::default(), &only_v);
    assert!(
        !mutating
            .iter()
            .any(|w| w["name"].as_str().unwrap_or_default().starts_with("policy"))
    );
}

fn expressions_of(entry: &Value) -> Value {
    entry["namespaceSelector"]["matchExpressions"].clone()
}

#[test]
fn the_policy_entries_are_added_with_the_enforce_entrys_client_config_and_removed_after() {
    let handed = BTreeSet::from(["ci".to_owned()]);
    let live = rendered_entries(Kind::Mutating, "pd", ON_POLICY);
    let (ops, changed) = plan_patch(
        Kind::Mutating,
        "pd",
        &live,
        &config(ON_POLICY),
        &EntrySettings::default(),
        &handed,
    )
    .expect("plan");
    assert!(
        changed.contains(&"policy.mutate.pd.pod-director.io".to_owned()),
        "{changed:?}"
    );
    let after = patched(&live, &ops);
    let added = entry(&after, "policy.mutate.pd.pod-director.io");
    assert_eq!(
        added["clientConfig"],
        entry(&live, "enforce.mutate.pd.pod-director.io")["clientConfig"]
    );
    assert!(
        after
            .iter()
            .any(|w| w["name"] == "policy-observe.mutate.pd.pod-director.io")
    );
    // Handed over: a second plan changes nothing.
    let (ops, _) = plan_patch(
        Kind::Mutating,
        "pd",
        &after,
        &config(ON_POLICY),
        &EntrySettings::default(),
        &handed,
    )
    .expect("plan");
    assert!(ops.is_empty(), "{ops:?}");
    // Taken back by the webhook: both entries go, the enforce entry selects the group again.
    let (ops, changed) = plan(Kind::Mutating, &after, ON_POLICY);
    let back = patched(&after, &ops);
    assert!(
        back.iter()
            .all(|w| !w["name"].as_str().unwrap_or_default().starts_with("policy")),
        "{changed:?}"
    );
    assert_eq!(back, live);
}

#[test]
fn the_in_tree_entries_go_first_while_the_section_is_set_and_go_away_with_it() {
    let on = format!("inTreePlugins: {{mode: enforce}}\n{ENTRY_GROUPS}");
    for kind in [Kind::Mutating, Kind::Validating] {
        let live = rendered_entries(kind, "pd", ENTRY_GROUPS);
        let (ops, changed) = plan(kind, &live, &on);
        let name = in_tree::entry_name(kind, "pd");
        assert_eq!(changed, std::slice::from_ref(&name), "{kind}");
        let after = patched(&live, &ops);
        assert_eq!(after[0]["name"], name.as_str(), "{kind}: first");
        assert_eq!(after.len(), live.len() + 1);
        assert_eq!(after[1..], live[..], "{kind}: the others unchanged, in order");
        let path = if kind == Kind::Mutating {
            "/mutate-in-tree"
        } else {
            "/validate-in-tree"
        };
        assert_eq!(after[0]["clientConfig"]["url"], format!("https://127.0.0.1:8443{path}"));
        assert_eq!(after[0]["failurePolicy"], "Fail");
        let operations = after[0]["rules"][0]["operations"].clone();
        assert_eq!(
            operations,
            json!(["CREATE", "UPDATE"]),
            "{kind}: PodTolerationRestriction decides UPDATEs"
        );
        let (again, _) = plan(kind, &after, &on);
        assert!(again.is_empty(), "{kind}: {again:?}");
        let (off, changed) = plan(kind, &after, ENTRY_GROUPS);
        assert_eq!(changed, [name], "{kind}");
        assert_eq!(patched(&after, &off), live, "{kind}: removed when the section goes");
    }
    let dry = format!("inTreePlugins: {{mode: dryRun}}\n{ENTRY_GROUPS}");
    let entries = owned_entries(
        Kind::Mutating,
        "pd",
        &config(&dry),
        &EntrySettings::default(),
        &BTreeSet::new(),
    );
    assert_eq!(entries[0]["failurePolicy"], "Ignore");
    assert_eq!(entries[0]["reinvocationPolicy"], "Never");
    let validating = owned_entries(
        Kind::Validating,
        "pd",
        &config(&dry),
        &EntrySettings::default(),
        &BTreeSet::new(),
    );
    assert_contains(&validating[0]["rules"].to_string(), "namespaces/finalize");
}
