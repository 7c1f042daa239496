//! The plugins' semantics, case by case, each against what kube-apiserver v1.37.2's code does
//! (`plugin/pkg/admission/podnodeselector`, `.../podtolerationrestriction`, `pkg/util/tolerations`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Toleration;
use serde_json::json;

use super::*;
use crate::testing::{assert_contains, toleration};

fn pod(value: serde_json::Value) -> Pod {
    let full: k8s_openapi::api::core::v1::Pod = serde_json::from_value(value).expect("a pod");
    Pod::from(&full)
}

/// A BestEffort pod (no resources) with `spec` merged in.
fn best_effort_pod(spec: serde_json::Value) -> Pod {
    let mut base =
        json!({"metadata": {"name": "p", "namespace": "team"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
    if let (Some(target), Some(extra)) = (base["spec"].as_object_mut(), spec.as_object()) {
        target.extend(extra.clone());
    }
    pod(base)
}

/// A Burstable pod (a cpu request) with `spec` merged in.
fn burstable_pod(spec: serde_json::Value) -> Pod {
    let mut p = best_effort_pod(spec);
    let containers = p.spec.as_mut().and_then(|s| s.containers.as_mut()).expect("containers");
    containers[0].resources = serde_json::from_value(json!({"requests": {"cpu": "100m"}})).ok();
    p
}

fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

const NO_LABELS: &BTreeMap<String, String> = &BTreeMap::new();

fn ns<'a>(annotations: &'a BTreeMap<String, String>) -> Namespace<'a> {
    Namespace::new("team", NO_LABELS).with_annotations(annotations)
}

fn selector(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    annotations(pairs)
}

fn memory_pressure() -> Toleration {
    toleration(MEMORY_PRESSURE_TAINT, "Exists", "", "NoSchedule", None)
}

fn files() -> PluginFiles {
    PluginFiles::default()
}

fn refused(result: Result<impl std::fmt::Debug, Refusal>) -> Refusal {
    match result {
        Err(refusal) => refusal,
        Ok(other) => panic!("expected a refusal, got {other:?}"),
    }
}

// PodNodeSelector

#[test]
fn the_namespace_selector_is_merged_into_the_pod_s_on_create() {
    let a = annotations(&[(NODE_SELECTOR_ANNOTATION, "pool=team, zone = a")]);
    let p = best_effort_pod(json!({"nodeSelector": {"disk": "ssd"}}));
    let changes = admit(&files(), &ns(&a), &p, None).expect("admitted");
    assert_eq!(
        changes.node_selector,
        Some(selector(&[("disk", "ssd"), ("pool", "team"), ("zone", "a")]))
    );
    assert_eq!(changes.tolerations, None, "BestEffort: no memory-pressure toleration");
    assert_eq!(
        serde_json::to_value(changes.patch()).unwrap(),
        json!([{"op": "add", "path": "/spec/nodeSelector", "value": {"disk": "ssd", "pool": "team", "zone": "a"}}])
    );
}

#[test]
fn a_selector_equal_to_the_pod_s_changes_nothing() {
    let a = annotations(&[(NODE_SELECTOR_ANNOTATION, "pool=team")]);
    let p = best_effort_pod(json!({"nodeSelector": {"pool": "team"}}));
    assert!(admit(&files(), &ns(&a), &p, None).expect("admitted").is_empty());
}

#[test]
fn a_conflicting_key_is_refused_at_admit_and_at_validate() {
    let a = annotations(&[(NODE_SELECTOR_ANNOTATION, "pool=team")]);
    let p = best_effort_pod(json!({"nodeSelector": {"pool": "other", "disk": "ssd"}}));
    let refusal = refused(admit(&files(), &ns(&a), &p, None));
    assert_eq!(
        refusal,
        Refusal {
            plugin: Plugin::PodNodeSelector,
            message: CONFLICT_MESSAGE.to_owned()
        }
    );
    assert_eq!(refused(validate(&files(), &ns(&a), &p, None)), refusal);
}

#[test]
fn an_empty_annotation_is_an_empty_selector_and_hides_the_cluster_default() {
    let mut f = files();
    f.cluster_default_node_selector = selector(&[("pool", "shared")]);
    let p = best_effort_pod(json!({}));
    let empty = annotations(&[(NODE_SELECTOR_ANNOTATION, "")]);
    assert!(admit(&f, &ns(&empty), &p, None).expect("admitted").is_empty());
    let none = annotations(&[]);
    assert_eq!(
        admit(&f, &ns(&none), &p, None).expect("admitted").node_selector,
        Some(selector(&[("pool", "shared")])),
        "no annotation: the cluster default"
    );
    let other = annotations(&[(DEFAULT_TOLERATIONS_ANNOTATION, "[]")]);
    assert_eq!(
        admit(&f, &ns(&other), &p, None).expect("admitted").node_selector,
        Some(selector(&[("pool", "shared")])),
        "another annotation does not hide the default"
    );
}

#[test]
fn the_namespace_annotation_wins_over_the_cluster_default() {
    let mut f = files();
    f.cluster_default_node_selector = selector(&[("pool", "shared")]);
    let a = annotations(&[(NODE_SELECTOR_ANNOTATION, "pool=team")]);
    let p = best_effort_pod(json!({}));
    assert_eq!(
        admit(&f, &ns(&a), &p, None).expect("admitted").node_selector,
        Some(selector(&[("pool", "team")]))
    );
}

#[test]
fn a_key_written_twice_in_the_annotation_keeps_its_last_value() {
    let a = annotations(&[(NODE_SELECTOR_ANNOTATION, "pool=a,pool=b")]);
    let p = best_effort_pod(json!({}));
    assert_eq!(
        admit(&files(), &ns(&a), &p, None).expect("admitted").node_selector,
        Some(selector(&[("pool", "b")]))
    );
}

#[test]
fn an_annotation_that_does_not_parse_refuses_the_pod() {
    for bad in ["pool", "pool=a,", "=a", "pool=a=b", "pool=a b", "Bad_Prefix/x=y"] {
        let a = annotations(&[(NODE_SELECTOR_ANNOTATION, bad)]);
        let refusal = refused(admit(&files(), &ns(&a), &best_effort_pod(json!({})), None));
        assert_eq!(refusal.plugin, Plugin::PodNodeSelector, "{bad:?}");
    }
}

#[test]
fn the_whitelist_holds_every_key_of_the_final_selector() {
    let mut f = files();
    f.node_selector_whitelists
        .insert("team".to_owned(), selector(&[("pool", "team"), ("zone", "a")]));
    let a = annotations(&[(NODE_SELECTOR_ANNOTATION, "pool=team")]);
    assert!(
        admit(
            &f,
            &ns(&a),
            &best_effort_pod(json!({"nodeSelector": {"zone": "a"}})),
            None
        )
        .is_ok()
    );
    let refusal = refused(admit(
        &f,
        &ns(&a),
        &best_effort_pod(json!({"nodeSelector": {"disk": "ssd"}})),
        None,
    ));
    assert_eq!(refusal.message, WHITELIST_MESSAGE);
    // A key added after the plugins' mutating phase (a mutating webhook: a group's /mutate) is
    // refused in the validating phase.
    let later = best_effort_pod(json!({"nodeSelector": {"pool": "team", "gpu": "yes"}}));
    assert_eq!(refused(validate(&f, &ns(&a), &later, None)).message, WHITELIST_MESSAGE);
    // Another namespace's whitelist does not apply; an empty whitelist allows everything.
    let other = Namespace::new("other", NO_LABELS).with_annotations(&a);
    assert!(validate(&f, &other, &later, None).is_ok());
    f.node_selector_whitelists.insert("team".to_owned(), BTreeMap::new());
    assert!(validate(&f, &ns(&a), &later, None).is_ok());
}

#[test]
fn pod_node_selector_leaves_updates_alone() {
    let a = annotations(&[(NODE_SELECTOR_ANNOTATION, "pool=team")]);
    let p = best_effort_pod(json!({"nodeSelector": {"pool": "other"}}));
    assert!(admit(&files(), &ns(&a), &p, Some(&p)).expect("admitted").is_empty());
    assert!(validate(&files(), &ns(&a), &p, Some(&p)).is_ok());
}

// PodTolerationRestriction

#[test]
fn default_tolerations_are_merged_on_create_and_the_file_s_only_without_the_annotation() {
    let mut f = files();
    f.default_tolerations = vec![toleration("cluster", "Exists", "", "NoSchedule", None)];
    let a = annotations(&[(
        DEFAULT_TOLERATIONS_ANNOTATION,
        r#"[{"key":"team","operator":"Equal","value":"a","effect":"NoSchedule"}]"#,
    )]);
    let p = best_effort_pod(json!({"tolerations": [{"key": "own", "operator": "Exists"}]}));
    let changes = admit(&f, &ns(&a), &p, None).expect("admitted");
    assert_eq!(
        changes.tolerations,
        Some(vec![
            toleration("own", "Exists", "", "", None),
            toleration("team", "Equal", "a", "NoSchedule", None),
        ])
    );
    let none = annotations(&[]);
    assert_eq!(
        admit(&f, &ns(&none), &p, None).expect("admitted").tolerations,
        Some(vec![
            toleration("own", "Exists", "", "", None),
            toleration("cluster", "Exists", "", "NoSchedule", None),
        ])
    );
    for empty in ["", "[]", "null"] {
        let a = annotations(&[(DEFAULT_TOLERATIONS_ANNOTATION, empty)]);
        assert_eq!(
            admit(&f, &ns(&a), &p, None).expect("admitted").tolerations,
            None,
            "{empty:?}"
        );
    }
}

#[test]
fn every_pod_but_best_effort_ones_tolerates_memory_pressure_on_create_and_update_in_every_namespace() {
    let none = annotations(&[]);
    let p = burstable_pod(json!({}));
    assert_eq!(
        admit(&files(), &ns(&none), &p, None).expect("admitted").tolerations,
        Some(vec![memory_pressure()])
    );
    assert_eq!(
        admit(&files(), &ns(&none), &p, Some(&p)).expect("admitted").tolerations,
        Some(vec![memory_pressure()]),
        "UPDATE too"
    );
    let tolerated = burstable_pod(json!({"tolerations": [{"operator": "Exists"}]}));
    assert!(
        admit(&files(), &ns(&none), &tolerated, None)
            .expect("admitted")
            .is_empty(),
        "already tolerated"
    );
    assert!(
        admit(&files(), &ns(&none), &best_effort_pod(json!({})), None)
            .expect("admitted")
            .is_empty()
    );
}

#[test]
fn default_tolerations_are_not_merged_on_update() {
    let a = annotations(&[(
        DEFAULT_TOLERATIONS_ANNOTATION,
        r#"[{"key":"team","operator":"Exists"}]"#,
    )]);
    let p = best_effort_pod(json!({}));
    assert!(admit(&files(), &ns(&a), &p, Some(&p)).expect("admitted").is_empty());
}

#[test]
fn the_qos_class_is_the_status_s_when_set_else_computed() {
    let mut p = burstable_pod(json!({}));
    assert!(!best_effort(&p));
    p.status_qos_class = Some("BestEffort".to_owned());
    assert!(best_effort(&p), "status.qosClass is read first, as GetPodQOS does");
    let zero = pod(
        json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "0", "ephemeral-storage": "1Gi"}}}]}}),
    );
    assert!(
        best_effort(&zero),
        "zero cpu and memory, other resources only: BestEffort"
    );
    let init = pod(
        json!({"spec": {"initContainers": [{"name": "i", "resources": {"limits": {"memory": "1Gi"}}}], "containers": [{"name": "c"}]}}),
    );
    assert!(!best_effort(&init), "init containers count");
    let pod_level = pod(json!({"spec": {"resources": {"requests": {"memory": "1Gi"}}, "containers": [{"name": "c"}]}}));
    assert!(!best_effort(&pod_level), "pod-level resources");
    let pod_level_other = pod(
        json!({"spec": {"resources": {"requests": {"example.com/x": "1"}}, "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}),
    );
    assert!(
        !best_effort(&pod_level_other),
        "pod-level resources without cpu or memory: the containers decide"
    );
}

#[test]
fn quantities_compare_by_value() {
    for (text, value) in [
        ("100m", 0.1),
        ("0.1", 0.1),
        ("1Gi", 1_073_741_824.0),
        ("1e3", 1000.0),
        ("1k", 1000.0),
        ("0", 0.0),
    ] {
        assert_eq!(quantity(text), Some(value), "{text}");
    }
    for bad in ["", "m", "1.2.3", "abc", "1x"] {
        assert_eq!(quantity(bad), None, "{bad}");
    }
}

#[test]
fn a_merge_keeps_the_wider_of_two_tolerations_and_the_first_of_equal_ones() {
    let a = annotations(&[(
        DEFAULT_TOLERATIONS_ANNOTATION,
        r#"[{"key":"k","operator":"Exists"},{"key":"x","operator":"Equal","value":"1","effect":"NoSchedule"}]"#,
    )]);
    // The pod's own toleration of k=v is within the default `k Exists`: Go's merge drops it.
    let p = best_effort_pod(json!({"tolerations": [
        {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
        {"key": "x", "operator": "Equal", "value": "1", "effect": "NoSchedule"}
    ]}));
    assert_eq!(
        admit(&files(), &ns(&a), &p, None).expect("admitted").tolerations,
        Some(vec![
            toleration("x", "Equal", "1", "NoSchedule", None),
            toleration("k", "Exists", "", "", None),
        ])
    );
}

#[test]
fn an_empty_effect_and_an_empty_key_exists_are_wider_than_any() {
    let wide = toleration("k", "Exists", "", "", None);
    assert!(is_superset(&wide, &toleration("k", "Equal", "v", "NoExecute", Some(5))));
    let all = toleration("", "Exists", "", "", None);
    assert!(is_superset(
        &all,
        &toleration("other", "Exists", "", "NoSchedule", None)
    ));
    assert!(!is_superset(&toleration("k", "Exists", "", "NoSchedule", None), &wide));
}

#[test]
fn toleration_seconds_bound_no_execute_tolerations() {
    let bounded = toleration("k", "Exists", "", "NoExecute", Some(60));
    assert!(is_superset(
        &bounded,
        &toleration("k", "Exists", "", "NoExecute", Some(30))
    ));
    assert!(!is_superset(
        &bounded,
        &toleration("k", "Exists", "", "NoExecute", Some(90))
    ));
    assert!(
        !is_superset(&bounded, &toleration("k", "Exists", "", "NoExecute", None)),
        "forever is longer"
    );
    assert!(is_superset(&toleration("k", "Exists", "", "NoExecute", None), &bounded));
}

#[test]
fn an_empty_operator_is_not_equal_as_the_plugins_compare() {
    // Go's isSuperset: ss Equal (or empty) covers t only when t's operator is "Equal" as written.
    let written = toleration("k", "Equal", "v", "NoSchedule", None);
    let omitted = toleration("k", "", "v", "NoSchedule", None);
    assert!(!is_superset(&written, &omitted));
    assert!(is_superset(&omitted, &omitted), "equal ones are");
    assert!(is_superset(&omitted, &written));
}

#[test]
fn the_whitelist_is_the_namespace_s_else_the_cluster_s_and_an_empty_one_allows_all() {
    let mut f = files();
    f.tolerations_whitelist = vec![toleration("cluster", "Exists", "", "", None)];
    let p = best_effort_pod(json!({"tolerations": [{"key": "team", "operator": "Exists"}]}));
    let none = annotations(&[]);
    assert_eq!(
        refused(validate(&f, &ns(&none), &p, None)).message,
        "pod tolerations (possibly merged with namespace default tolerations) conflict with its cluster whitelist"
    );
    let listed = annotations(&[(
        TOLERATIONS_WHITELIST_ANNOTATION,
        r#"[{"key":"team","operator":"Exists"}]"#,
    )]);
    assert!(validate(&f, &ns(&listed), &p, None).is_ok());
    let other = annotations(&[(TOLERATIONS_WHITELIST_ANNOTATION, r#"[{"key":"x","operator":"Exists"}]"#)]);
    assert_eq!(
        refused(validate(&f, &ns(&other), &p, None)).message,
        "pod tolerations (possibly merged with namespace default tolerations) conflict with its namespace whitelist"
    );
    for empty in ["", "[]", "null"] {
        let a = annotations(&[(TOLERATIONS_WHITELIST_ANNOTATION, empty)]);
        assert!(
            validate(&f, &ns(&a), &p, None).is_ok(),
            "{empty:?}: empty, no check, no fallback"
        );
    }
    assert!(
        validate(&f, &ns(&none), &best_effort_pod(json!({})), None).is_ok(),
        "no tolerations, no check"
    );
}

#[test]
fn the_whitelist_is_checked_on_update_and_after_the_merge() {
    let a = annotations(&[(
        TOLERATIONS_WHITELIST_ANNOTATION,
        r#"[{"key":"team","operator":"Exists"}]"#,
    )]);
    // The memory-pressure toleration the plugin adds is itself held to the whitelist.
    let refusal = refused(admit(&files(), &ns(&a), &burstable_pod(json!({})), None));
    assert_eq!(refusal.plugin, Plugin::PodTolerationRestriction);
    let p = best_effort_pod(json!({"tolerations": [{"key": "x", "operator": "Exists"}]}));
    assert!(
        validate(&files(), &ns(&a), &p, Some(&p)).is_err(),
        "UPDATE is held to it too"
    );
}

#[test]
fn annotation_json_is_read_as_go_reads_it() {
    let a = annotations(&[(
        DEFAULT_TOLERATIONS_ANNOTATION,
        r#"[{"KEY":"a","Operator":"Equal","value":"x","value":null,"unknown":1,"tolerationSeconds":5,"tolerationseconds":null}, null]"#,
    )]);
    let tolerations = namespace_tolerations(&ns(&a), DEFAULT_TOLERATIONS_ANNOTATION).expect("parses");
    assert_eq!(
        tolerations,
        Some(vec![toleration("a", "Equal", "x", "", None), Toleration::default()])
    );
    let kelvin = annotations(&[(DEFAULT_TOLERATIONS_ANNOTATION, "[{\"\u{212A}ey\":\"k\"}]")]);
    assert_eq!(
        namespace_tolerations(&ns(&kelvin), DEFAULT_TOLERATIONS_ANNOTATION).expect("parses"),
        Some(vec![toleration("k", "", "", "", None)])
    );
    for bad in [
        "{}",
        "[1]",
        r#"[{"key":1}]"#,
        r#"[{"tolerationSeconds":1.5}]"#,
        "[",
        "x",
        r#"[] []"#,
    ] {
        let a = annotations(&[(DEFAULT_TOLERATIONS_ANNOTATION, bad)]);
        assert!(
            namespace_tolerations(&ns(&a), DEFAULT_TOLERATIONS_ANNOTATION).is_err(),
            "{bad:?}"
        );
        let refusal = refused(admit(&files(), &ns(&a), &best_effort_pod(json!({})), None));
        assert_eq!(refusal.plugin, Plugin::PodTolerationRestriction, "{bad:?}");
    }
}

// The webhooks' outcomes

#[test]
fn dry_run_reports_byte_for_byte_the_patch_enforce_applies() {
    let a = annotations(&[(NODE_SELECTOR_ANNOTATION, "pool=team")]);
    let p = burstable_pod(json!({}));
    let enforce = decide_mutate(Mode::Enforce, &files(), &ns(&a), &p, None);
    let dry = decide_mutate(Mode::DryRun, &files(), &ns(&a), &p, None);
    let warn = decide_mutate(Mode::Warn, &files(), &ns(&a), &p, None);
    assert_eq!(
        (enforce.decision, dry.decision, warn.decision),
        (Decision::Patched, Decision::WouldPatch, Decision::WouldPatch)
    );
    assert_eq!(enforce.patch_text(), dry.patch_text());
    assert_eq!(enforce.patch_text(), warn.patch_text());
    assert!(enforce.apply_patch() && !dry.apply_patch());
    assert_eq!(
        (enforce.warning.is_some(), dry.warning.is_some(), warn.warning.is_some()),
        (false, false, true)
    );
    assert_eq!(enforce.webhook, Webhook::MutateInTree);
}

#[test]
fn a_refusal_denies_in_enforce_and_would_deny_otherwise() {
    let a = annotations(&[(NODE_SELECTOR_ANNOTATION, "pool=team")]);
    let p = best_effort_pod(json!({"nodeSelector": {"pool": "x"}}));
    let enforce = decide_mutate(Mode::Enforce, &files(), &ns(&a), &p, None);
    assert_eq!(enforce.decision, Decision::Denied);
    assert_contains(enforce.message.as_deref().unwrap_or_default(), CONFLICT_MESSAGE);
    let dry = decide_validate(Mode::DryRun, &files(), &ns(&a), &p, None);
    assert_eq!(
        (dry.decision, dry.webhook),
        (Decision::WouldDeny, Webhook::ValidateInTree)
    );
    assert!(dry.allowed());
}

#[test]
fn the_pod_s_decision_is_validate_s_when_it_refuses_what_admit_makes() {
    let mut section = InTreePlugins::default();
    section.files.tolerations_whitelist = vec![toleration("team", "Exists", "", "", None)];
    let none = annotations(&[]);
    // Admit's own validation refuses first: the memory-pressure toleration is not whitelisted.
    let out = decide(Some(&section), &ns(&none), &burstable_pod(json!({})), None);
    assert_eq!(
        (out.webhook, out.decision),
        (Webhook::MutateInTree, Decision::WouldDeny)
    );
    let fine = decide(Some(&section), &ns(&none), &best_effort_pod(json!({})), None);
    assert_eq!(fine.decision, Decision::Noop);
    let off = decide(None, &ns(&none), &burstable_pod(json!({})), None);
    assert_eq!(
        (off.decision, off.mode),
        (Decision::WouldPatch, Some(Mode::DryRun)),
        "compatibility off: as the plugins would"
    );
    assert!(!has_rules(&PluginFiles::default(), &ns(&none)));
    let annotated = annotations(&[(NODE_SELECTOR_ANNOTATION, "")]);
    assert!(has_rules(&PluginFiles::default(), &ns(&annotated)));
}

#[test]
fn contradictions_between_a_namespace_s_annotations_and_its_group_are_named() {
    let config = crate::testing::config(
        "inTreePlugins: {mode: enforce}\ngroups:\n  gpu:\n    nodeSelector: {pool: gpu}\n    tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]\n",
    );
    let labels = annotations(&[("pod-director/group", "gpu")]);
    let agreeing = annotations(&[(NODE_SELECTOR_ANNOTATION, "pool=gpu")]);
    assert!(contradictions(&config, &Namespace::new("team", &labels).with_annotations(&agreeing)).is_empty());
    let contradicting = annotations(&[
        (NODE_SELECTOR_ANNOTATION, "pool=team"),
        (
            TOLERATIONS_WHITELIST_ANNOTATION,
            r#"[{"key":"other","operator":"Exists"}]"#,
        ),
    ]);
    let found = contradictions(
        &config,
        &Namespace::new("team", &labels).with_annotations(&contradicting),
    );
    assert_eq!(found.len(), 2, "{found:?}");
    assert_contains(
        &found[0],
        "nodeSelector pool: the in-tree selector of namespace team sets team, group gpu sets gpu",
    );
    assert_contains(
        &found[1],
        "tolerations of group gpu are outside the tolerations whitelist of namespace team",
    );
    let unlabelled = annotations(&[]);
    assert!(
        contradictions(
            &config,
            &Namespace::new("team", &unlabelled).with_annotations(&contradicting)
        )
        .is_empty(),
        "no group"
    );
}
