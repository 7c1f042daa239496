use std::time::Duration;

use super::*;
use crate::audit::{AuditDecision, Source, Verdict};
use crate::config::Mode;
use crate::testing::assert_contains;

fn audit() -> Audit {
    let mut g = GroupAudit::new("ci".to_owned(), Mode::DryRun);
    g.namespaces = 1;
    g.feasible_nodes = Some(0);
    g.pods.add(AuditDecision::WouldDeny);
    g.would_deny.add("team-a", "Deployment/web", Source::Pods, "web-1", || {
        "the pod conflicts with placement group \"ci\"".to_owned()
    });
    g.verdict = Verdict {
        ready: false,
        blockers: vec!["no node for the group".to_owned()],
        warnings: Vec::new(),
    };
    Audit {
        groups: vec![g],
        nodes: Some(2),
        namespaces_scanned: 1,
        pods_scanned: 1,
        templates_scanned: 0,
        elapsed: Duration::from_millis(1234),
        warnings: Vec::new(),
        reservations: Vec::new(),
        in_tree: crate::audit::in_tree::InTreeAudit::default(),
    }
}

#[test]
fn the_text_report_has_a_row_per_group_then_its_blockers_and_workloads() {
    let text = text(&audit());
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(
            "GROUP  MODE    READY  NAMESPACES  NODES  PODS  COMPLIANT  WOULD_PATCH  WOULD_DENY  SKIPPED  TEMPLATES  \
                 TEMPLATES_WOULD_DENY"
        )
    );
    assert_eq!(
        lines.next(),
        Some(
            "ci     dryRun  no     1           0/2    1     0          0            1           0        0          0"
        )
    );
    assert_contains(&text, "\nci (dryRun): NOT READY\n  blocker: no node for the group\n");
    assert_contains(
        &text,
        "  would_deny: team-a/Deployment/web: 1 pod (e.g. web-1): the pod conflicts with",
    );
    assert_contains(&text, "scanned 1 namespaces, 1 pods, 0 workload templates in 1.2 s");
}

#[test]
fn the_json_report_carries_the_verdict_counts_and_workloads() {
    let value: serde_json::Value = serde_json::from_str(&json(&audit()).expect("renders")).expect("JSON");
    assert_eq!(value["ready"], false);
    let group = &value["groups"][0];
    assert_eq!(group["group"], "ci");
    assert_eq!(group["ready"], false);
    assert_eq!(group["nodes"], serde_json::json!({"feasible": 0, "total": 2}));
    assert_eq!(group["pods"]["would_deny"], 1);
    assert_eq!(group["would_deny"][0]["workload"], "Deployment/web");
    assert_eq!(group["would_deny"][0]["source"], "pods");
    assert_eq!(value["scanned"]["seconds"], 1.234);
    assert_eq!(group["would_deny"][0].get("nodes"), None, "no node: left out");
}

fn would_patch() -> crate::placement::Outcome {
    use crate::placement::{Decision, Outcome, Webhook};
    Outcome {
        webhook: Webhook::Mutate,
        group: Some("ci".to_owned()),
        mode: Some(Mode::Enforce),
        alternative: None,
        decision: Decision::Patched,
        skip_reason: None,
        patch: json_patch::Patch(Vec::new()),
        message: None,
        warning: None,
        conflicts: Vec::new(),
        violations: Vec::new(),
        summary: "would set nodeSelector node-pool=ci".to_owned(),
        feasible_nodes: Some(1),
        feasible_nodes_before: Some(0),
        no_feasible_node: false,
        provisionable_by: Vec::new(),
        reservation: Vec::new(),
    }
}

#[test]
fn the_json_report_lists_the_workloads_enforce_would_change_with_the_nodes_their_pods_run_on() {
    let mut g = GroupAudit::new("ci".to_owned(), Mode::Enforce);
    let outcome = would_patch();
    for (pod, node) in [
        ("web-1", Some("n2")),
        ("web-2", Some("n1")),
        ("web-3", Some("n2")),
        ("web-4", None),
    ] {
        g.record("team-a", "Deployment/web", Source::Pods, pod, node, &outcome);
    }
    g.record(
        "team-a",
        "Deployment/web",
        Source::Template,
        "Deployment/web",
        None,
        &outcome,
    );
    let mut audit = audit();
    audit.groups = vec![g];
    let value: serde_json::Value = serde_json::from_str(&json(&audit).expect("renders")).expect("JSON");
    let listed = &value["groups"][0]["would_patch"];
    assert_eq!(value["groups"][0]["pods"]["would_patch"], 4);
    assert_eq!(listed[0]["workload"], "Deployment/web");
    assert_eq!(listed[0]["source"], "pods");
    assert_eq!(listed[0]["pods"], 4);
    assert_eq!(listed[0]["reason"], "would set nodeSelector node-pool=ci");
    assert_eq!(
        listed[0]["nodes"],
        serde_json::json!(["n1", "n2"]),
        "each node once, sorted"
    );
    assert_eq!(listed[1]["source"], "template");
    assert_eq!(listed[1].get("nodes"), None, "a template runs nowhere");
    assert_eq!(value["groups"][0]["would_patch_omitted"], 0);
}

#[test]
fn a_finding_names_at_most_twenty_nodes_and_counts_the_rest() {
    let mut g = GroupAudit::new("ci".to_owned(), Mode::Enforce);
    let outcome = would_patch();
    for i in 0..25 {
        let node = format!("n{i:02}");
        g.record(
            "team-a",
            "DaemonSet/agent",
            Source::Pods,
            "agent",
            Some(&node),
            &outcome,
        );
    }
    let found = g.would_patch.iter().next().expect("a finding");
    assert_eq!(found.nodes.len(), crate::audit::MAX_FINDING_NODES);
    assert_eq!(found.nodes_omitted, 5);
    assert_eq!(found.pods, 25);
}

/// An audit of no group with one hole (team-a: a node selector nothing enforces, one violating
/// pod of two) and one namespace PodTolerationRestriction enforces.
fn in_tree_audit() -> Audit {
    use crate::audit::in_tree::{InTreeAudit, PluginState};
    use crate::in_tree::Plugin;
    use crate::placement::{Decision, Outcome, Webhook};
    let annotations = |key: &str, value: &str| std::collections::BTreeMap::from([(key.to_owned(), value.to_owned())]);
    let mut in_tree = InTreeAudit::new(None);
    in_tree.namespace(
        "team-a",
        Some(&annotations("scheduler.alpha.kubernetes.io/node-selector", "pool=a")),
        false,
    );
    in_tree.namespace(
        "team-b",
        Some(&annotations("scheduler.alpha.kubernetes.io/defaultTolerations", "[]")),
        false,
    );
    in_tree.plugin(
        Plugin::PodNodeSelector,
        PluginState::Absent("a dry-run pod … was admitted".to_owned()),
    );
    in_tree.plugin(
        Plugin::PodTolerationRestriction,
        PluginState::Running("declared".to_owned()),
    );
    let pod: crate::placement::Pod = serde_json::from_value(serde_json::json!({"spec": {}})).expect("a pod");
    let mut patch = Outcome::new(Webhook::Mutate, Decision::WouldPatch);
    patch.summary = "would set nodeSelector pool=a".to_owned();
    patch.patch = serde_json::from_value(
        serde_json::json!([{"op": "add", "path": "/spec/nodeSelector", "value": {"pool": "a"}}]),
    )
    .expect("a patch");
    in_tree.record("team-a", "Deployment/web", (Source::Pods, "web-1"), &pod, &patch);
    in_tree.record(
        "team-a",
        "Pod/ok",
        (Source::Pods, "ok"),
        &pod,
        &Outcome::new(Webhook::Mutate, Decision::Noop),
    );
    in_tree.conclude();
    let mut audit = Audit::of(Vec::new(), Vec::new());
    audit.in_tree = in_tree;
    audit
}

#[test]
fn with_no_group_the_text_report_still_names_the_holes_and_the_pods_violating_them() {
    let text = text(&in_tree_audit());
    assert_eq!(
        text.lines().take(8).collect::<Vec<_>>(),
        [
            "no groups in the configuration",
            "",
            "inTreePlugins (off): ready for enforce: 1 running pod would be patched, 0 refused; 0 workload templates \
             would be patched, 0 refused",
            "  warning: 1 namespace carries in-tree annotations that no admission plugin enforces on this cluster \
             (inTreePlugins is off): team-a; 1 running pod there violates them",
            "  plugin PodNodeSelector: not running (a dry-run pod … was admitted)",
            "  plugin PodTolerationRestriction: running (declared)",
            "  hole: team-a: scheduler.alpha.kubernetes.io/node-selector=pool=a: enforced by nothing; 1 of 2 running \
             pods violates",
            "  enforced: team-b: scheduler.alpha.kubernetes.io/defaultTolerations=[]: by PodTolerationRestriction; 0 of \
             0 running pods violate",
        ]
    );
    assert_contains(
        &text,
        "  would_patch: team-a/Deployment/web: 1 pod (e.g. web-1): would set nodeSelector pool=a\n",
    );
    assert_eq!(
        super::text(&Audit::of(Vec::new(), Vec::new())),
        "no groups in the configuration: nothing to audit\n"
    );
}

#[test]
fn the_json_report_has_the_in_tree_rule_only_when_there_is_something_to_say() {
    let value: serde_json::Value = serde_json::from_str(&json(&in_tree_audit()).expect("renders")).expect("JSON");
    let in_tree = &value["in_tree"];
    assert_eq!(in_tree["mode"], "off");
    assert_eq!(in_tree["ready"], true);
    assert_eq!(
        in_tree["plugins"]["PodNodeSelector"],
        serde_json::json!({"state": "absent", "how": "a dry-run pod … was admitted"})
    );
    let a = &in_tree["namespaces"][0];
    assert_eq!(a["namespace"], "team-a");
    assert_eq!(a["hole"], true);
    assert_eq!(a["unenforced"], serde_json::json!(["PodNodeSelector"]));
    assert_eq!((a["pods"].as_u64(), a["violating_pods"].as_u64()), (Some(2), Some(1)));
    assert_eq!(in_tree["would_patch"][0]["workload"], "Deployment/web");
    assert_eq!(in_tree["pods"]["would_patch"], 1);
    // Compatibility off, no annotated namespace: nothing, as before the rule existed.
    let plain: serde_json::Value = serde_json::from_str(&json(&audit()).expect("renders")).expect("JSON");
    assert_eq!(plain.get("in_tree"), None);
}
