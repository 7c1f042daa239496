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
