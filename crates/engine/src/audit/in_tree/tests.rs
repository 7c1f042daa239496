use std::collections::BTreeMap;

use serde_json::json;

use super::probe::{Probe, interpret, probe};
use super::*;
use crate::in_tree::{DEFAULT_TOLERATIONS_ANNOTATION, NODE_SELECTOR_ANNOTATION, TOLERATIONS_WHITELIST_ANNOTATION};
use crate::placement::{Decision, Webhook};

fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn outcome(decision: Decision, summary: &str, message: Option<&str>) -> Outcome {
    let mut o = Outcome::new(Webhook::Mutate, decision);
    o.summary = summary.to_owned();
    o.message = message.map(str::to_owned);
    o
}

fn pod(spec: serde_json::Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).expect("a pod")
}

/// A would-be patch setting `path` to `value`.
fn patching(path: &str, value: serde_json::Value) -> Outcome {
    let mut o = outcome(Decision::WouldPatch, "would set", None);
    o.patch = serde_json::from_value(json!([{"op": "add", "path": path, "value": value}])).expect("a patch");
    o
}

/// An audit of two annotated namespaces (team-a: a node selector; team-b: tolerations) and two
/// without in-tree annotations, in compatibility `mode`.
fn audit(mode: Option<Mode>) -> InTreeAudit {
    let mut audit = InTreeAudit::new(mode);
    let a = annotations(&[(NODE_SELECTOR_ANNOTATION, "pool=a"), ("team", "a")]);
    assert!(audit.namespace("team-a", Some(&a), false));
    let b = annotations(&[
        (TOLERATIONS_WHITELIST_ANNOTATION, "[]"),
        (DEFAULT_TOLERATIONS_ANNOTATION, "[]"),
    ]);
    assert!(audit.namespace("team-b", Some(&b), false));
    assert!(!audit.namespace("team-c", Some(&annotations(&[("team", "c")])), false));
    assert!(!audit.namespace("team-d", None, false));
    audit
}

fn hole_of<'a>(audit: &'a InTreeAudit, namespace: &str) -> &'a super::super::workloads::WorkloadOutcome {
    &audit.workloads.namespaces[namespace].entries[&(format!("Namespace/{namespace}"), POLICY.to_owned(), Rule::InTree)]
}

#[test]
fn only_the_three_in_tree_annotations_make_a_namespace_the_rule_s_business() {
    let audit = audit(None);
    assert_eq!(audit.namespaces.keys().collect::<Vec<_>>(), ["team-a", "team-b"]);
    let a = &audit.namespaces["team-a"];
    assert_eq!(a.annotations, annotations(&[(NODE_SELECTOR_ANNOTATION, "pool=a")]));
    assert_eq!(a.plugins, ["PodNodeSelector"]);
    assert_eq!(audit.namespaces["team-b"].plugins, ["PodTolerationRestriction"]);
    assert!(!audit.is_empty());
    assert!(InTreeAudit::new(None).is_empty());
    assert!(!InTreeAudit::new(Some(Mode::DryRun)).is_empty());
}

#[test]
fn with_compatibility_off_and_no_plugin_running_every_annotated_namespace_is_a_hole_naming_its_violating_pods() {
    let mut audit = audit(None);
    audit.plugin(Plugin::PodNodeSelector, PluginState::Absent("probed".to_owned()));
    audit.plugin(
        Plugin::PodTolerationRestriction,
        PluginState::Unknown("refused".to_owned()),
    );
    let patch = patching("/spec/nodeSelector", json!({"pool": "a"}));
    let plain = pod(json!({}));
    audit.record("team-a", "Deployment/web", (Source::Pods, "web-1"), &plain, &patch);
    audit.record("team-a", "Deployment/web", (Source::Pods, "web-2"), &plain, &patch);
    let ok = outcome(Decision::Noop, "no change", None);
    audit.record("team-a", "Pod/ok", (Source::Pods, "ok"), &plain, &ok);
    audit.conclude();
    let a = &audit.namespaces["team-a"];
    assert!(a.is_hole());
    assert_eq!(a.unenforced, ["PodNodeSelector"]);
    assert_eq!((a.pods, a.violating_pods), (3, 2));
    assert!(audit.namespaces["team-b"].is_hole());
    assert!(audit.verdict.ready, "{:?}", audit.verdict);
    assert_eq!(
        audit.verdict.warnings,
        [
            "2 namespaces carry in-tree annotations that no admission plugin enforces on this cluster (inTreePlugins is \
          off): team-a, team-b; 2 running pods there violate them"
        ]
    );
    // The hole is the namespace's own result in the ledger, saying why and what to do.
    let hole = hole_of(&audit, "team-a");
    assert_eq!(hole.verdict, WorkloadVerdict::Unenforced);
    assert_eq!(
        &*hole.message,
        "no admission plugin enforces this namespace's in-tree annotations (scheduler.alpha.kubernetes.io/node-selector=pool=a) \
         on this cluster (pod-director's inTreePlugins is off; PodNodeSelector not running (probed)): 2 running pods \
         violate them; set inTreePlugins.mode: enforce once the audit finds it ready"
    );
    let web =
        &audit.workloads.namespaces["team-a"].entries[&("Deployment/web".to_owned(), POLICY.to_owned(), Rule::InTree)];
    assert_eq!((web.verdict, web.pods), (WorkloadVerdict::WouldPatch, 2));
    assert_eq!(audit.would_patch.len(), 1);
    assert_eq!(
        audit.headline(),
        "ready for enforce: 2 running pods would be patched, 0 refused; 0 workload templates would be patched, 0 refused"
    );
}

#[test]
fn the_memory_pressure_toleration_alone_is_no_violation_of_the_namespace_s_annotations() {
    let mut audit = audit(None);
    let memory = json!({"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"});
    let mine = json!({"key": "team", "operator": "Equal", "value": "b", "effect": "NoSchedule"});
    let with_mine = pod(json!({"tolerations": [mine]}));
    // Only the memory-pressure toleration added: patched, not violating.
    audit.record(
        "team-b",
        "Pod/a",
        (Source::Pods, "a"),
        &with_mine,
        &patching("/spec/tolerations", json!([mine, memory])),
    );
    // A default toleration of the namespace missing: violating.
    let default = json!({"key": "dedicated", "operator": "Exists"});
    let added = patching("/spec/tolerations", json!([mine, default, memory]));
    audit.record("team-b", "Pod/b", (Source::Pods, "b"), &with_mine, &added);
    // Refused: violating.
    let refused = outcome(Decision::WouldDeny, "would deny", Some("outside the whitelist"));
    audit.record("team-b", "Pod/c", (Source::Pods, "c"), &with_mine, &refused);
    audit.conclude();
    let b = &audit.namespaces["team-b"];
    assert_eq!((b.pods, b.violating_pods), (3, 2));
    assert_eq!((audit.pods.would_patch, audit.pods.would_deny), (2, 1));
}

#[test]
fn a_running_plugin_enforces_its_annotations_and_only_those() {
    let mut audit = audit(Some(Mode::DryRun));
    audit.plugin(Plugin::PodNodeSelector, PluginState::Running("probed".to_owned()));
    audit.plugin(
        Plugin::PodTolerationRestriction,
        PluginState::Absent("declared".to_owned()),
    );
    audit.conclude();
    let a = &audit.namespaces["team-a"];
    assert!(!a.is_hole());
    assert_eq!(a.enforced_by, ["PodNodeSelector"]);
    assert_eq!(audit.namespaces["team-b"].unenforced, ["PodTolerationRestriction"]);
    crate::testing::assert_contains(&audit.verdict.warnings[0], "(inTreePlugins is in dryRun): team-b;");
    let enforced = hole_of(&audit, "team-a");
    assert_eq!(enforced.verdict, WorkloadVerdict::Compliant);
    assert_eq!(
        &*enforced.message,
        "its in-tree annotations are enforced by PodNodeSelector"
    );
}

#[test]
fn compatibility_in_enforce_closes_every_hole_but_in_excluded_namespaces_and_asks_only_about_those() {
    let mut audit = audit(Some(Mode::Enforce));
    assert!(audit.plugins_to_ask().is_empty());
    let excluded = annotations(&[(DEFAULT_TOLERATIONS_ANNOTATION, "[]")]);
    assert!(audit.namespace("kube-system", Some(&excluded), true));
    let asked: Vec<(Plugin, &str)> = audit.plugins_to_ask().into_iter().map(|(p, ns, _)| (p, ns)).collect();
    assert_eq!(asked, [(Plugin::PodTolerationRestriction, "kube-system")]);
    audit.plugin(
        Plugin::PodTolerationRestriction,
        PluginState::Absent("probed".to_owned()),
    );
    audit.conclude();
    assert_eq!(audit.namespaces["team-a"].enforced_by, ["pod-director"]);
    assert_eq!(audit.namespaces["team-b"].enforced_by, ["pod-director"]);
    assert!(audit.namespaces["kube-system"].is_hole());
    crate::testing::assert_contains(
        &hole_of(&audit, "kube-system").message,
        "(the namespace is excluded from pod-director;",
    );
}

#[test]
fn what_enforce_would_refuse_blocks_and_is_named() {
    let mut audit = audit(Some(Mode::Warn));
    let refused = outcome(
        Decision::WouldDeny,
        "would deny",
        Some("pod-director: pod node label selector conflicts with its namespace node label selector"),
    );
    audit.record(
        "team-a",
        "StatefulSet/db",
        (Source::Pods, "db-0"),
        &pod(json!({})),
        &refused,
    );
    audit.record(
        "team-a",
        "StatefulSet/db",
        (Source::Template, "db"),
        &pod(json!({})),
        &refused,
    );
    audit.conclude();
    assert!(!audit.verdict.ready);
    assert_eq!(
        audit.verdict.blockers,
        [
            "1 running pod and 1 workload template would be refused by the in-tree rule in enforce: team-a/StatefulSet/db \
          (1 pod), team-a/StatefulSet/db (template)"
        ]
    );
    let finding = audit.would_deny.iter().next().expect("a finding");
    assert_eq!(
        finding.reason,
        "pod node label selector conflicts with its namespace node label selector"
    );
    assert_eq!(audit.namespaces["team-a"].violating_pods, 1);
    assert!(
        audit
            .headline()
            .starts_with("NOT READY for enforce: 0 running pods would be patched, 1 refused")
    );
}

#[test]
fn compatibility_on_without_annotated_namespaces_warns_that_it_changes_nothing() {
    let mut audit = InTreeAudit::new(Some(Mode::DryRun));
    audit.conclude();
    assert_eq!(
        audit.verdict.warnings,
        ["no namespace carries in-tree annotations: enforcing the rule changes nothing yet"]
    );
}

#[test]
fn each_plugin_is_asked_about_in_the_first_namespace_that_gives_its_probe_something_to_answer() {
    let mut audit = InTreeAudit::new(None);
    audit.namespace("a-empty", Some(&annotations(&[(NODE_SELECTOR_ANNOTATION, "")])), false);
    audit.namespace(
        "c-selector",
        Some(&annotations(&[(NODE_SELECTOR_ANNOTATION, "pool=c,zone=z")])),
        false,
    );
    audit.namespace(
        "d-tolerations",
        Some(&annotations(&[(DEFAULT_TOLERATIONS_ANNOTATION, "[]")])),
        false,
    );
    let asked: Vec<(Plugin, &str)> = audit.plugins_to_ask().into_iter().map(|(p, ns, _)| (p, ns)).collect();
    assert_eq!(
        asked,
        [
            (Plugin::PodNodeSelector, "c-selector"),
            (Plugin::PodTolerationRestriction, "d-tolerations")
        ]
    );
}

fn selector(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    annotations(pairs)
}

#[test]
fn the_node_selector_probe_conflicts_with_the_namespace_even_when_it_names_the_probe_s_value() {
    let p = probe(
        Plugin::PodNodeSelector,
        "team-a",
        &selector(&[("pool", "a"), ("zone", "z")]),
    )
    .expect("a probe");
    assert_eq!(p.pod["spec"]["nodeSelector"], json!({"pool": "pod-director-probe"}));
    assert_eq!(p.pod["metadata"]["namespace"], "team-a");
    let p = probe(
        Plugin::PodNodeSelector,
        "team-a",
        &selector(&[("pool", "pod-director-probe")]),
    )
    .expect("a probe");
    assert_eq!(p.pod["spec"]["nodeSelector"]["pool"], "pod-director-probe-2");
    // Burstable, so that PodTolerationRestriction (if it runs) adds its toleration; restricted Pod Security.
    assert_eq!(p.pod["spec"]["containers"][0]["resources"]["requests"]["cpu"], "1m");
    assert_eq!(p.pod["spec"]["securityContext"]["runAsNonRoot"], true);
    assert_eq!(probe(Plugin::PodNodeSelector, "team-a", &BTreeMap::new()), None);
}

fn probe_of(plugin: Plugin) -> Probe {
    probe(plugin, "team-a", &selector(&[("pool", "a")])).expect("a probe")
}

#[test]
fn pod_node_selector_s_refusal_says_it_runs_an_admission_after_it_says_it_does_not_anything_else_is_unknown() {
    let probe = probe_of(Plugin::PodNodeSelector);
    let refused = "pods \"pod-director-in-tree-probe\" is forbidden: pod node label selector conflicts with its \
                   namespace node label selector";
    assert!(matches!(interpret(&probe, Err(refused)), PluginState::Running(_)));
    assert!(matches!(interpret(&probe, Ok(&json!({}))), PluginState::Absent(_)));
    let webhook = "admission webhook \"validate.pod-director.io\" denied the request: pod-director: conflict";
    assert!(matches!(interpret(&probe, Err(webhook)), PluginState::Absent(_)));
    let rbac =
        "pods is forbidden: User \"u\" cannot create resource \"pods\" in API group \"\" in the namespace \"team-a\"";
    assert_eq!(
        interpret(&probe, Err(rbac)),
        PluginState::Unknown(format!("the dry-run probe in namespace team-a was refused: {rbac}"))
    );
}

#[test]
fn pod_toleration_restriction_is_known_by_the_memory_pressure_toleration_it_adds_or_its_whitelist_refusal() {
    let probe = probe_of(Plugin::PodTolerationRestriction);
    assert_eq!(probe.pod["spec"].get("nodeSelector"), None);
    let with = json!({"spec": {"tolerations": [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    ]}});
    assert!(matches!(interpret(&probe, Ok(&with)), PluginState::Running(_)));
    let without = json!({"spec": {"tolerations": [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    ]}});
    assert!(matches!(interpret(&probe, Ok(&without)), PluginState::Absent(_)));
    let whitelist =
        "pod tolerations (possibly merged with namespace default tolerations) conflict with its namespace whitelist";
    assert!(matches!(interpret(&probe, Err(whitelist)), PluginState::Running(_)));
    assert!(matches!(
        interpret(&probe, Err("admission webhook \"x\" denied")),
        PluginState::Unknown(_)
    ));
}

/// Decides running pod `name` with `spec` of namespace `ns` as the scan does.
fn decide_pod(audit: &mut InTreeAudit, config: &Config, ns: &str, name: &str, spec: serde_json::Value) {
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("a pod");
    let labels = BTreeMap::new();
    let workload = format!("Pod/{name}");
    audit.decide(
        config,
        &Namespace::new(ns, &labels),
        &workload,
        (Source::Pods, name),
        &Subject::Pod(Write::Create(&pod)),
    );
}

#[test]
fn each_running_pod_is_decided_by_the_in_tree_rule_as_the_plugins_would_decide_its_re_creation() {
    let config = Config::default();
    let mut audit = audit(None);
    decide_pod(&mut audit, &config, "team-a", "lacks", json!({}));
    decide_pod(
        &mut audit,
        &config,
        "team-a",
        "conflicts",
        json!({"nodeSelector": {"pool": "b"}}),
    );
    decide_pod(
        &mut audit,
        &config,
        "team-a",
        "complies",
        json!({"nodeSelector": {"pool": "a"}}),
    );
    // Not annotated: not the rule's business.
    decide_pod(&mut audit, &config, "team-c", "elsewhere", json!({}));
    audit.conclude();
    let a = &audit.namespaces["team-a"];
    assert_eq!((a.pods, a.violating_pods), (3, 2));
    assert_eq!(
        (audit.pods.compliant, audit.pods.would_patch, audit.pods.would_deny),
        (1, 1, 1)
    );
    let patched = audit.would_patch.iter().next().expect("a would-be patch");
    assert_eq!(
        (patched.workload.as_str(), patched.reason.as_str()),
        ("Pod/lacks", "would set nodeSelector pool=a")
    );
    let refused = audit.would_deny.iter().next().expect("a would-be refusal");
    assert_eq!(refused.workload, "Pod/conflicts");
    crate::testing::assert_contains(&refused.reason, crate::in_tree::CONFLICT_MESSAGE);
    assert!(!audit.verdict.ready);
}

#[test]
fn a_plugin_file_s_cluster_default_puts_every_namespace_under_the_rule() {
    let mut config = Config::default();
    config.in_tree_plugins = Some(crate::config::InTreePlugins {
        mode: Mode::DryRun,
        files: PluginFiles {
            cluster_default_node_selector: annotations(&[("pool", "shared")]),
            ..PluginFiles::default()
        },
        ..Default::default()
    });
    let mut audit = InTreeAudit::of(&config);
    assert_eq!(audit.mode, Some(Mode::DryRun));
    assert!(audit.namespace("plain", None, false));
    assert_eq!(audit.namespaces["plain"].plugins, ["PodNodeSelector"]);
    // The probe reads the annotation alone: the API server's own default is not known.
    assert!(audit.plugins_to_ask().is_empty());
    decide_pod(&mut audit, &config, "plain", "lacks", json!({}));
    audit.conclude();
    assert_eq!(audit.namespaces["plain"].violating_pods, 1);
    assert_eq!(
        audit.would_patch.iter().next().map(|f| f.reason.as_str()),
        Some("would set nodeSelector pool=shared")
    );
}
