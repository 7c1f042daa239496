//! Conflicts under the three `onConflict` policies, and the decisions: modes, skips, groups.

use super::*;

// ---- conflicts ----------------------------------------------------------------

fn with_policy(yaml: &str, policy: &str) -> Group {
    group(&format!("onConflict: {policy}\n{yaml}"))
}

#[test]
fn conflicting_node_selector_follows_the_conflict_policy() {
    let p0 = pod(json!({"nodeSelector": {"node-pool": "gpu"}}));
    let (p, patched) = plan_apply(&p0, &with_policy("nodeSelector: {node-pool: ci}", "reject"));
    assert!(p.rejected() && p.changes.is_empty());
    assert_eq!(
        p.conflicts[0].to_string(),
        r#"nodeSelector["node-pool"]: pod has "gpu", group requires "ci" (rejected)"#
    );
    assert_eq!(patched, p0);

    let (p, patched) = plan_apply(&p0, &with_policy("nodeSelector: {node-pool: ci}", "override"));
    assert_eq!(p.conflicts[0].resolution, Resolution::Overridden);
    assert_eq!(
        ops(&p),
        json!([{"op": "replace", "path": "/spec/nodeSelector/node-pool", "value": "ci"}])
    );
    assert_eq!(patched["spec"]["nodeSelector"]["node-pool"], "ci");

    let (p, patched) = plan_apply(&p0, &with_policy("nodeSelector: {node-pool: ci}", "ignore"));
    assert_eq!(p.conflicts[0].resolution, Resolution::Ignored);
    assert!(p.changes.is_empty());
    assert_eq!(patched["spec"]["nodeSelector"]["node-pool"], "gpu");
}

#[test]
fn disjoint_required_affinity_follows_the_conflict_policy() {
    let yaml = "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [ci]}]}]}}}";
    let p0 = pod(
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term_json(&[("pool", "In", &["gpu"]), ("zone", "In", &["a"])])]}}}}),
    );
    let (p, _) = plan_apply(&p0, &with_policy(yaml, "reject"));
    assert!(p.rejected());
    assert_eq!(
        p.conflicts[0].field,
        "affinity.nodeAffinity.required.nodeSelectorTerms[0]"
    );

    let (p, patched) = plan_apply(&p0, &with_policy(yaml, "override"));
    assert!(!p.rejected());
    assert_eq!(
        required_terms(&patched).unwrap(),
        serde_json::from_value::<Vec<NodeSelectorTerm>>(json!([term_json(&[
            ("zone", "In", &["a"]),
            ("pool", "In", &["ci"])
        ])]))
        .unwrap()
    );

    let (p, patched) = plan_apply(&p0, &with_policy(yaml, "ignore"));
    assert_eq!(p.conflicts[0].resolution, Resolution::Ignored);
    assert_eq!(patched, p0);
}

#[test]
fn a_term_that_conflicts_with_only_some_group_terms_keeps_the_others() {
    let g: Group = serde_json::from_value(json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term_json(&[("pool", "In", &["ci"])]), term_json(&[("pool", "In", &["gpu"])])]}}}})).unwrap();
    let p0 = pod(
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term_json(&[("pool", "In", &["gpu"])])]}}}}),
    );
    let (p, _) = plan_apply(&p0, &g);
    assert!(
        p.conflicts.is_empty() && p.changes.is_empty(),
        "pool=gpu already satisfies the group's second term: {p:?}"
    );
}

#[test]
fn unsatisfiable_and_implication_helpers_agree_with_node_matching() {
    let t: NodeSelectorTerm =
        serde_json::from_value(term_json(&[("pool", "In", &["a"]), ("pool", "In", &["b"])])).unwrap();
    assert!(unsatisfiable(&t).is_some());
    assert!(!nodes().iter().any(|n| term_matches(n, &t)));
    let narrow: NodeSelectorTerm = serde_json::from_value(term_json(&[("pool", "In", &["ci"])])).unwrap();
    let wide: NodeSelectorTerm = serde_json::from_value(term_json(&[("pool", "In", &["ci", "gpu"])])).unwrap();
    let (n, w) = (
        &narrow.match_expressions.as_ref().unwrap()[0],
        &wide.match_expressions.as_ref().unwrap()[0],
    );
    assert!(requirement_implies(n, w));
    assert!(
        nodes()
            .iter()
            .all(|node| !term_matches(node, &narrow) || term_matches(node, &wide))
    );
}

// ---- decisions: modes, skips, groups ---------------------------------------------

const CONFIG: &str = r#"
defaultMode: dryRun
groups:
  ci:
    mode: enforce
    nodeSelector: {node-pool: ci}
    tolerations: [{key: dedicated, operator: Equal, value: ci, effect: NoSchedule}]
  shadow:
    nodeSelector: {node-pool: ci}
    tolerations: [{key: dedicated, operator: Equal, value: ci, effect: NoSchedule}]
  loud:
    mode: warn
    nodeSelector: {node-pool: ci}
  optout:
    mode: enforce
    allowPodExclusion: true
    nodeSelector: {node-pool: ci}
  agents:
    mode: enforce
    allowDaemonSets: true
    nodeSelector: {node-pool: ci}
"#;

fn config(extra: &str) -> Config {
    testing::config(&format!("{extra}\n{CONFIG}"))
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn decide(c: &Config, ns: &str, ns_labels: &[(&str, &str)], p: &Value) -> Outcome {
    decide_as(c, ns, ns_labels, p, &Context::default())
}

fn decide_as(c: &Config, ns: &str, ns_labels: &[(&str, &str)], p: &Value, ctx: &Context) -> Outcome {
    let l = labels(ns_labels);
    mutate(c, &Namespace::new(ns, &l), &typed(p), ctx)
}

/// The requester of a live request, from the `userInfo` of a real AdmissionReview.
fn requester(user_info: Value) -> Context<'static> {
    Context::from_user_info(&serde_json::from_value(user_info).expect("a userInfo"))
}

fn daemon_set_controller() -> Context<'static> {
    requester(json!({
        "username": "system:serviceaccount:kube-system:daemon-set-controller",
        "uid": "5d0a1c36-8d0e-4a55-9c1b-0e6a1d0c1a11",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"]
    }))
}

fn node(name: &str) -> Context<'static> {
    requester(json!({"username": format!("system:node:{name}"), "groups": ["system:nodes", "system:authenticated"]}))
}

fn tenant() -> Context<'static> {
    requester(json!({"username": "alice", "uid": "a1", "groups": ["team-a", "system:authenticated"]}))
}

fn daemon_set_pod(controller: Option<bool>) -> Value {
    let mut p = plain_pod();
    p["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds",
        "uid": "6b1f0d2e-3c4a-4e5f-9a8b-7c6d5e4f3a2b", "controller": controller, "blockOwnerDeletion": true}]);
    p
}

/// A pod with the kubelet's mirror annotations (created without `spec.nodeName`, as a node creates it).
fn mirror_pod() -> Value {
    let mut p = plain_pod();
    p["metadata"]["annotations"] =
        json!({"kubernetes.io/config.mirror": "0f2d4b6c8e", "kubernetes.io/config.source": "file"});
    p
}

/// A pod carrying the exclusion label.
fn excluded_pod() -> Value {
    let mut p = plain_pod();
    p["metadata"]["labels"]["pod-director/exclude"] = json!("true");
    p
}

fn plain_pod() -> Value {
    pod(json!({}))
}

#[test]
fn dry_run_would_patch_with_exactly_the_enforce_patch() {
    let c = config("");
    let dry = decide(&c, "a", &[("pod-director/group", "shadow")], &plain_pod());
    let enforce = decide(&c, "a", &[("pod-director/group", "ci")], &plain_pod());
    assert_eq!(
        (dry.decision, dry.mode, dry.apply_patch(), dry.allowed()),
        (Decision::WouldPatch, Some(Mode::DryRun), false, true)
    );
    assert_eq!((enforce.decision, enforce.apply_patch()), (Decision::Patched, true));
    assert_eq!(
        serde_json::to_vec(&dry.patch).unwrap(),
        serde_json::to_vec(&enforce.patch).unwrap()
    );
    assert_eq!(dry.warning, None);
    assert_eq!(enforce.warning, None);
    assert_eq!(
        dry.summary,
        "would set nodeSelector node-pool=ci, add toleration dedicated=ci:NoSchedule"
    );
    assert_eq!(enforce.patch_paths(), ["/spec/nodeSelector", "/spec/tolerations"]);
}

#[test]
fn warn_mode_admits_untouched_and_warns_in_at_most_120_chars() {
    let c = config("");
    let out = decide(&c, "a", &[("pod-director/group", "loud")], &plain_pod());
    assert_eq!(
        (out.decision, out.apply_patch(), out.allowed()),
        (Decision::WouldPatch, false, true)
    );
    let w = out.warning.expect("warn mode warns");
    assert!(w.starts_with("pod-director loud: "), "{w}");
    assert!(w.chars().count() <= MAX_SUMMARY_CHARS);
    let many = pod(json!({"nodeSelector": {}}));
    let selector: Vec<String> = (0..30).map(|i| format!("key-number-{i}: value-{i}")).collect();
    let long = testing::config(&format!(
        "groups:\n  loud:\n    mode: warn\n    nodeSelector: {{{}}}",
        selector.join(", ")
    ));
    let out = decide(&long, "a", &[("pod-director/group", "loud")], &many);
    let w = out.warning.unwrap();
    assert_eq!(w.chars().count(), MAX_SUMMARY_CHARS);
    assert!(w.ends_with('…'));
}

#[test]
fn conflicts_deny_in_enforce_and_would_deny_otherwise() {
    let c = config("");
    let gpu = pod(json!({"nodeSelector": {"node-pool": "gpu"}}));
    let out = decide(&c, "a", &[("pod-director/group", "ci")], &gpu);
    assert_eq!((out.decision, out.allowed()), (Decision::Denied, false));
    assert_contains(
        out.message.as_deref().unwrap(),
        r#"nodeSelector["node-pool"]: pod has "gpu", group requires "ci""#,
    );
    assert!(out.patch.0.is_empty());
    let out = decide(&c, "a", &[("pod-director/group", "shadow")], &gpu);
    assert_eq!((out.decision, out.allowed()), (Decision::WouldDeny, true));
    assert!(out.message.is_some());
}

#[test]
fn compliant_pods_are_noops() {
    let c = config("");
    let p = pod(
        json!({"nodeSelector": {"node-pool": "ci"}, "tolerations": [{"key": "dedicated", "value": "ci", "effect": "NoSchedule"}]}),
    );
    let out = decide(&c, "a", &[("pod-director/group", "ci")], &p);
    assert_eq!(out.decision, Decision::Noop);
    assert!(out.patch.0.is_empty());
}

#[test]
fn every_skip_rule_has_its_reason() {
    let c = config("");
    let ci = [("pod-director/group", "ci")];
    let agents = [("pod-director/group", "agents")];
    type Case<'a> = (Value, &'a str, &'a [(&'a str, &'a str)], Context<'static>, SkipReason);
    let cases: Vec<Case> = vec![
        (plain_pod(), "kube-system", &ci, tenant(), SkipReason::ExcludedNamespace),
        (plain_pod(), "a", &[], tenant(), SkipReason::NoGroup),
        (mirror_pod(), "a", &ci, node("node-1"), SkipReason::MirrorPod),
        (
            daemon_set_pod(Some(true)),
            "a",
            &agents,
            daemon_set_controller(),
            SkipReason::DaemonSetPod,
        ),
        (
            excluded_pod(),
            "a",
            &[("pod-director/group", "optout")],
            tenant(),
            SkipReason::ExclusionLabel,
        ),
        (
            with(plain_pod(), "/spec", Value::Null),
            "a",
            &ci,
            tenant(),
            SkipReason::NotApplicable("the pod has no spec".into()),
        ),
    ];
    for (p, ns, l, ctx, reason) in cases {
        let out = decide_as(&c, ns, l, &p, &ctx);
        assert_eq!(out.decision, Decision::Skipped, "{reason:?}");
        assert_eq!(out.skip_reason, Some(reason));
        assert!(out.allowed() && out.patch.0.is_empty());
    }
}

#[test]
fn a_daemonset_pod_is_skipped_only_when_the_daemonset_controller_creates_it_in_a_group_that_allows_it() {
    let c = config("");
    let agents = [("pod-director/group", "agents")];
    let (ds_pod, controller) = (daemon_set_pod(Some(true)), daemon_set_controller());
    let out = decide_as(&c, "a", &agents, &ds_pod, &controller);
    assert_eq!(out.skip_reason, Some(SkipReason::DaemonSetPod));
    // A tenant forging the owner reference, with controller true or false, or none.
    for controller in [Some(true), Some(false), None] {
        let out = decide_as(&c, "a", &agents, &daemon_set_pod(controller), &tenant());
        assert_eq!(
            out.decision,
            Decision::Patched,
            "forged owner reference (controller {controller:?})"
        );
    }
    // The controller, but without a controller reference, or one of another API group or kind.
    for owner in [
        json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "1", "controller": false}]),
        json!([{"apiVersion": "apps/v1beta2", "kind": "DaemonSet", "name": "ds", "uid": "1", "controller": true}]),
        json!([{"apiVersion": "example.com/v1", "kind": "DaemonSet", "name": "ds", "uid": "1", "controller": true}]),
        json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "ds", "uid": "1", "controller": true}]),
    ] {
        let mut p = plain_pod();
        p["metadata"]["ownerReferences"] = owner.clone();
        let out = decide_as(&c, "a", &agents, &p, &controller);
        assert_eq!(out.decision, Decision::Patched, "{owner}");
    }
    // The controller's real pods in a group that does not allow DaemonSets: decided like pods.
    let out = decide_as(&c, "a", &[("pod-director/group", "ci")], &ds_pod, &controller);
    assert_eq!(out.decision, Decision::Patched);
    // A controller that is only named like the DaemonSet controller in a group.
    let impostor = requester(
        json!({"username": "mallory", "groups": ["system:serviceaccount:kube-system:daemon-set-controller"]}),
    );
    assert_eq!(
        decide_as(&c, "a", &agents, &ds_pod, &impostor).decision,
        Decision::Patched
    );
}

#[test]
fn the_daemonset_controller_username_is_configurable() {
    let c = config("daemonSetController: system:kube-controller-manager");
    let agents = [("pod-director/group", "agents")];
    let kcm = requester(json!({"username": "system:kube-controller-manager", "groups": ["system:authenticated"]}));
    assert_eq!(
        decide_as(&c, "a", &agents, &daemon_set_pod(Some(true)), &kcm).skip_reason,
        Some(SkipReason::DaemonSetPod)
    );
    assert_eq!(
        decide_as(&c, "a", &agents, &daemon_set_pod(Some(true)), &daemon_set_controller()).decision,
        Decision::Patched,
        "the default name no longer exempts"
    );
}

#[test]
fn a_mirror_pod_is_skipped_only_when_a_node_creates_it() {
    let c = config("");
    let ci = [("pod-director/group", "ci")];
    let p = mirror_pod();
    assert_eq!(
        decide_as(&c, "a", &ci, &p, &node("node-1")).skip_reason,
        Some(SkipReason::MirrorPod)
    );
    let not_a_node = [
        tenant(),
        Context::offline(),
        // The node username without the nodes group, and the group without a node username.
        requester(json!({"username": "system:node:node-1", "groups": ["system:authenticated"]})),
        requester(json!({"username": "alice", "groups": ["system:nodes"]})),
        requester(json!({"username": "system:node:", "groups": ["system:nodes"]})),
    ];
    for ctx in not_a_node {
        let out = decide_as(&c, "a", &ci, &p, &ctx);
        assert_eq!(out.decision, Decision::Patched, "{:?}", ctx.requester);
        assert_eq!(out.skip_reason, None);
    }
}

#[test]
fn exclusion_label_is_ignored_when_the_group_does_not_allow_it() {
    let c = config("");
    let out = decide(&c, "a", &[("pod-director/group", "ci")], &excluded_pod());
    assert_eq!(out.decision, Decision::Patched);
    assert_contains(&out.summary, "exclusion label ignored");
}

/// A DaemonSet's pod template, of [`pod`]'s spec for `spec`.
fn daemon_set_template(spec: Value) -> Pod {
    let spec = pod(spec)["spec"].clone();
    template_pod(
        &serde_json::from_value(json!({"metadata": {"labels": {"app": "agent"}}, "spec": spec}))
            .expect("a pod template"),
    )
}

#[test]
fn a_daemonset_of_a_group_without_allow_daemonsets_gets_its_pods_placement_under_spec_template() {
    let c = config("");
    let l = labels(&[("pod-director/group", "ci")]);
    let ns = Namespace::new("a", &l);
    let mutate_ds = |template: &Pod, old: Option<&Pod>| mutate_daemon_set(&c, &ns, template, old, &tenant());
    let validate_ds = |template: &Pod, old: Option<&Pod>| validate_daemon_set(&c, &ns, template, old, &tenant());
    let template = daemon_set_template(json!({}));
    let as_pod = mutate(&c, &ns, &template, &tenant());
    let out = mutate_ds(&template, None);
    assert_eq!(out.decision, Decision::Patched);
    assert_eq!(
        out.patch, as_pod.patch,
        "the same engine, the same patch relative to the pod"
    );
    let rerooted = out.rerooted(DAEMON_SET_TEMPLATE);
    assert_eq!(
        serde_json::to_value(&rerooted.patch).unwrap(),
        json!([
            {"op": "add", "path": "/spec/template/spec/nodeSelector", "value": {"node-pool": "ci"}},
            {"op": "add", "path": "/spec/template/spec/tolerations", "value": [
                {"effect": "NoSchedule", "key": "dedicated", "operator": "Equal", "value": "ci"}]},
        ])
    );
    // Applied to the DaemonSet, the template is what the pod would have become.
    let mut ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {"containers": containers()}}}});
    json_patch::patch(&mut ds, &rerooted.patch.0).expect("the patch applies to the DaemonSet");
    let placed = daemon_set_template(ds["spec"]["template"]["spec"].clone());
    assert!(verify(&placed, &c.groups["ci"]).is_empty());
    assert_eq!(mutate_ds(&placed, None).decision, Decision::Noop);
    // /validate checks the final template.
    assert_eq!(validate_ds(&template, None).decision, Decision::Denied);
    assert_eq!(validate_ds(&placed, None).decision, Decision::Noop);
    let message = validate_ds(&template, None).message.unwrap_or_default();
    assert_contains(&message, "the DaemonSet's pod template does not satisfy");
}

#[test]
fn a_daemonset_of_a_group_with_allow_daemonsets_is_left_alone() {
    let c = config("");
    let l = labels(&[("pod-director/group", "agents")]);
    let ns = Namespace::new("a", &l);
    let template = daemon_set_template(json!({}));
    for out in [
        mutate_daemon_set(&c, &ns, &template, None, &tenant()),
        validate_daemon_set(&c, &ns, &template, None, &tenant()),
    ] {
        assert_eq!(out.skip_reason, Some(SkipReason::DaemonSetAllowed));
        assert!(out.allowed() && out.patch.0.is_empty());
    }
}

#[test]
fn a_daemonset_update_reapplies_the_placement_and_denies_only_conflicts_it_introduces() {
    let c = testing::config("groups: {ci: {mode: enforce, onConflict: reject, nodeSelector: {node-pool: ci}}}");
    let l = labels(&[("pod-director/group", "ci")]);
    let ns = Namespace::new("a", &l);
    let mutate_ds = |template: &Pod, old: Option<&Pod>| mutate_daemon_set(&c, &ns, template, old, &tenant());
    let validate_ds = |template: &Pod, old: Option<&Pod>| validate_daemon_set(&c, &ns, template, old, &tenant());
    let placed = daemon_set_template(json!({"nodeSelector": {"node-pool": "ci"}}));
    let stripped = daemon_set_template(json!({}));
    let gpu = daemon_set_template(json!({"nodeSelector": {"node-pool": "gpu"}}));
    // A tenant drops the placement: /mutate puts it back, /validate would have denied.
    let out = mutate_ds(&stripped, Some(&placed));
    assert_eq!(out.decision, Decision::Patched);
    assert_eq!(validate_ds(&stripped, Some(&placed)).decision, Decision::Denied);
    // A conflict the update introduces is denied; one the DaemonSet already had is not.
    assert_eq!(mutate_ds(&gpu, Some(&placed)).decision, Decision::Denied);
    let relabelled = {
        let mut t = gpu.clone();
        t.metadata.labels.get_or_insert_default().insert("v".into(), "2".into());
        t
    };
    let out = mutate_ds(&relabelled, Some(&gpu));
    assert_eq!((out.decision, out.allowed()), (Decision::Noop, true));
    assert_contains(&out.summary, "predate this update");
    assert_eq!(validate_ds(&relabelled, Some(&gpu)).decision, Decision::Noop);
}

#[test]
fn unknown_groups_warn_or_deny_per_policy() {
    let out = decide(&config(""), "a", &[("pod-director/group", "nope")], &plain_pod());
    assert_eq!(
        (out.decision, out.allowed(), out.group.as_deref()),
        (Decision::UnknownGroup, true, Some("nope"))
    );
    assert_contains(&out.warning.unwrap(), r#"selects group "nope""#);
    let deny = config("unknownGroup: deny");
    let out = decide(&deny, "a", &[("pod-director/group", "nope")], &plain_pod());
    assert_eq!((out.decision, out.allowed()), (Decision::Denied, false));
    assert_contains(&out.message.unwrap(), "not defined");
}

#[test]
fn default_group_applies_to_unlabelled_namespaces_only() {
    let c = config("defaultGroup: shadow");
    assert_eq!(decide(&c, "a", &[], &plain_pod()).group.as_deref(), Some("shadow"));
    let labelled = decide(&c, "a", &[("pod-director/group", "ci")], &plain_pod());
    assert_eq!(labelled.group.as_deref(), Some("ci"));
    assert_eq!(decide(&c, "kube-system", &[], &plain_pod()).decision, Decision::Skipped);
}

#[test]
fn the_configured_label_key_is_the_one_read() {
    let c = config("namespaceLabel: example.com/placement");
    assert_eq!(
        decide(&c, "a", &[("pod-director/group", "ci")], &plain_pod()).skip_reason,
        Some(SkipReason::NoGroup)
    );
    assert_eq!(
        decide(&c, "a", &[("example.com/placement", "ci")], &plain_pod()).decision,
        Decision::Patched
    );
}

/// `/validate` of `p` (`old`: before the update) in namespace `a` of `group`.
fn validate_in(c: &Config, group: &str, p: &Value, old: Option<&Value>) -> Outcome {
    let l = labels(&[("pod-director/group", group)]);
    let ns = Namespace::new("a", &l);
    validate(c, &ns, &typed(p), old.map(typed).as_ref(), &Context::default())
}

#[test]
fn validate_lists_every_violation_and_denies_only_in_enforce() {
    let c = config("");
    let out = validate_in(&c, "ci", &plain_pod(), None);
    assert_eq!((out.decision, out.allowed()), (Decision::Denied, false));
    assert_eq!(out.violations.len(), 2);
    let msg = out.message.unwrap();
    assert!(
        msg.contains(r#"nodeSelector["node-pool"]: missing"#)
            && msg.contains("tolerations: missing a toleration of dedicated=ci:NoSchedule"),
        "{msg}"
    );

    // Shadow predicts enforce: the plain pod is judged with its would-be patch applied, so
    // it passes, as it would in enforce after /mutate.
    let out = validate_in(&c, "shadow", &plain_pod(), None);
    assert_eq!((out.decision, out.allowed()), (Decision::Noop, true), "{out:?}");
    assert!(out.violations.is_empty(), "{out:?}");
    // What enforce would refuse stays a would-be denial, and only that is listed.
    let gpu = pod(json!({"nodeSelector": {"node-pool": "gpu"}}));
    let out = validate_in(&c, "shadow", &gpu, None);
    assert_eq!((out.decision, out.allowed()), (Decision::WouldDeny, true));
    assert_eq!(
        out.violations.len(),
        1,
        "only the conflict, not the missing toleration: {out:?}"
    );
    assert_eq!(out.violations[0].field, r#"nodeSelector["node-pool"]"#);
    // On UPDATE, the old pod is taken as enforce would have stored it too: a change that
    // strips nothing enforce added introduces nothing.
    let mut relabelled = plain_pod();
    relabelled["metadata"]["labels"]["version"] = json!("2");
    let out = validate_in(&c, "shadow", &relabelled, Some(&plain_pod()));
    assert_eq!(out.decision, Decision::Noop);
}

#[test]
fn validate_on_update_denies_only_what_the_update_introduces() {
    let c = config("");
    let mut relabelled = plain_pod();
    relabelled["metadata"]["labels"]["version"] = json!("2");
    assert_eq!(
        validate_in(&c, "ci", &relabelled, Some(&plain_pod())).decision,
        Decision::Noop
    );

    let compliant = pod(
        json!({"nodeSelector": {"node-pool": "ci"}, "tolerations": [{"key": "dedicated", "value": "ci", "effect": "NoSchedule"}]}),
    );
    let stripped = pod(json!({"nodeSelector": {"node-pool": "ci"}, "tolerations": []}));
    let out = validate_in(&c, "ci", &stripped, Some(&compliant));
    assert_eq!(out.decision, Decision::Denied);
    assert_eq!(out.violations.len(), 1);
}

#[test]
fn validate_respects_ignore_but_not_reject_conflicts() {
    let p = pod(json!({"nodeSelector": {"node-pool": "gpu"}}));
    let reject = with_policy("nodeSelector: {node-pool: ci}", "reject");
    let ignore = with_policy("nodeSelector: {node-pool: ci}", "ignore");
    assert_eq!(verify(&typed(&p), &reject).len(), 1);
    assert!(verify(&typed(&p), &ignore).is_empty());
}

#[test]
fn enforce_warns_when_a_conflict_is_overridden() {
    let c = testing::config("groups: {ci: {mode: enforce, onConflict: override, nodeSelector: {node-pool: ci}}}");
    let p = pod(json!({"nodeSelector": {"node-pool": "gpu"}}));
    let out = decide(&c, "a", &[("pod-director/group", "ci")], &p);
    assert_eq!(out.decision, Decision::Patched);
    assert_eq!(out.conflicts.len(), 1);
    assert_contains(&out.warning.unwrap(), "override nodeSelector node-pool=gpu with ci");
}

#[test]
fn the_on_conflict_default_is_reject() {
    assert_eq!(Group::default().on_conflict, OnConflict::Reject);
}

#[test]
fn truncation_keeps_at_most_max_characters_and_marks_the_cut() {
    for (text, max, expected) in [
        ("", 3, ""),
        ("abc", 3, "abc"),
        ("abcd", 3, "ab…"),
        ("ünïcödé", 7, "ünïcödé"),
        ("ünïcödé", 4, "ünï…"),
        ("𝄞𝄞𝄞", 2, "𝄞…"),
        ("ab", 1, "…"),
        ("ab", 0, "…"),
        ("", 0, ""),
    ] {
        assert_eq!(truncate_chars(text.to_owned(), max), expected, "{text:?} to {max}");
    }
}
