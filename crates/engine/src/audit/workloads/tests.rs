use super::*;
use crate::placement::{Decision, Webhook};

fn entry<'a>(workload: &'a str, pod: bool) -> Entry<'a> {
    Entry {
        namespace: "team-a",
        workload,
        policy: "web",
        rule: Rule::Placement,
        mode: Mode::DryRun,
        pod,
    }
}

fn outcome(decision: Decision, summary: &str) -> Outcome {
    let mut o = Outcome::new(Webhook::Mutate, decision);
    o.summary = summary.to_owned();
    o
}

#[test]
fn a_workload_keeps_its_worst_verdict_with_that_verdict_s_message_and_counts_every_pod() {
    let mut ledger = Ledger::default();
    ledger.record_placement(&entry("Deployment/web", false), &outcome(Decision::Noop, "no change"));
    let mut patch = outcome(Decision::WouldPatch, "would add toleration dedicated=web:NoSchedule");
    patch.patch = serde_json::from_value(serde_json::json!([
        {"op": "add", "path": "/spec/tolerations", "value": []}
    ]))
    .expect("patch");
    ledger.record_placement(&entry("Deployment/web", true), &patch);
    ledger.record_placement(&entry("Deployment/web", true), &outcome(Decision::Noop, "no change"));
    let ns = &ledger.namespaces["team-a"];
    let web = &ns.entries[&("Deployment/web".to_owned(), "web".to_owned(), Rule::Placement)];
    assert_eq!(web.verdict, WorkloadVerdict::WouldPatch);
    assert_eq!(&*web.message, "would add toleration dedicated=web:NoSchedule");
    assert_eq!(
        web.patch.as_deref(),
        Some(&PatchSummary {
            ops: 1,
            paths: vec!["/spec/tolerations".to_owned()]
        })
    );
    assert_eq!((web.pods, web.templates), (2, 1));

    let mut deny = outcome(Decision::WouldDeny, "would deny");
    deny.message = Some("pod-director: nodeSelector pool=red conflicts with the group's pool=blue".to_owned());
    ledger.record_placement(&entry("Deployment/web", true), &deny);
    let web = &ledger.namespaces["team-a"].entries[&("Deployment/web".to_owned(), "web".to_owned(), Rule::Placement)];
    assert_eq!(web.verdict, WorkloadVerdict::WouldDeny);
    assert_eq!(
        &*web.message,
        "nodeSelector pool=red conflicts with the group's pool=blue"
    );
    assert_eq!(web.patch, None);
}

#[test]
fn bare_pods_with_one_plan_share_one_copy_of_its_message_and_patch() {
    let mut ledger = Ledger::default();
    let mut plan = outcome(Decision::WouldPatch, "would set nodeSelector pool=blue");
    plan.patch = serde_json::from_value(serde_json::json!([
        {"op": "add", "path": "/spec/nodeSelector", "value": {"pool": "blue"}}
    ]))
    .expect("patch");
    for i in 0..100 {
        ledger.record_placement(&entry(&format!("Pod/bare-{i}"), true), &plan);
    }
    let entries: Vec<&WorkloadOutcome> = ledger.namespaces["team-a"].entries.values().collect();
    assert_eq!(entries.len(), 100);
    assert!(entries.iter().all(|e| Arc::ptr_eq(&e.message, &entries[0].message)));
    let patches: Vec<&Arc<PatchSummary>> = entries.iter().filter_map(|e| e.patch.as_ref()).collect();
    assert_eq!(patches.len(), 100);
    assert!(patches.iter().all(|p| Arc::ptr_eq(p, patches[0])));
}

#[test]
fn a_placed_pod_that_fits_no_node_adds_a_feasibility_entry_but_a_skipped_or_denied_one_does_not() {
    let mut ledger = Ledger::default();
    let mut o = outcome(Decision::WouldPatch, "would set nodeSelector pool=blue");
    o.no_feasible_node = true;
    ledger.record_placement(&entry("Job/once", false), &o);
    let mut skipped = outcome(Decision::Skipped, "skipped");
    skipped.no_feasible_node = true;
    ledger.record_placement(&entry("Pod/agent", true), &skipped);
    let mut denied = outcome(Decision::WouldDeny, "would deny");
    denied.no_feasible_node = true;
    ledger.record_placement(&entry("Pod/debug", true), &denied);
    let rules: Vec<_> = ledger.namespaces["team-a"]
        .entries
        .keys()
        .map(|(w, _, r)| (w.as_str(), *r))
        .collect();
    assert_eq!(
        rules,
        [
            ("Job/once", Rule::Placement),
            ("Job/once", Rule::Feasibility),
            ("Pod/agent", Rule::Placement),
            ("Pod/debug", Rule::Placement)
        ]
    );
}

#[test]
fn entries_beyond_the_bound_are_counted_and_messages_are_cut() {
    let mut ledger = Ledger::default();
    for i in 0..MAX_WORKLOADS_PER_NAMESPACE + 3 {
        let name = format!("Pod/p{i}");
        ledger.record(&entry(&name, true), WorkloadVerdict::Compliant, &"x".repeat(2000), None);
    }
    let ns = &ledger.namespaces["team-a"];
    assert_eq!(ns.entries.len(), MAX_WORKLOADS_PER_NAMESPACE);
    assert_eq!(ns.omitted, 3);
    assert!(ns.entries.values().all(|e| e.message.len() <= MAX_MESSAGE_BYTES));
}

#[test]
fn the_audits_ledger_is_moved_out_of_it_not_copied() {
    let mut group = super::super::GroupAudit::new("web".to_owned(), Mode::DryRun);
    group.workloads.namespace("team-a", "web");
    for i in 0..3 {
        group.workloads.record_placement(
            &entry(&format!("Pod/p{i}"), true),
            &outcome(Decision::WouldPatch, "would add"),
        );
    }
    let mut audit = super::super::Audit {
        groups: vec![group],
        nodes: None,
        namespaces_scanned: 1,
        pods_scanned: 3,
        templates_scanned: 0,
        elapsed: std::time::Duration::ZERO,
        warnings: Vec::new(),
        reservations: Vec::new(),
        in_tree: crate::audit::in_tree::InTreeAudit::default(),
    };
    let expected = audit.groups[0].workloads.clone();
    let ledger = of_audit(&mut audit);
    assert_eq!(ledger, expected);
    assert_eq!(ledger.namespaces["team-a"].entries.len(), 3);
    assert!(
        audit.groups[0].workloads.namespaces.is_empty(),
        "the audit no longer holds a copy"
    );
}

#[test]
fn merging_keeps_the_worse_verdict_and_the_namespaces_of_both() {
    let mut a = Ledger::default();
    a.namespace("empty", "web");
    a.record(&entry("Pod/x", true), WorkloadVerdict::Compliant, "ok", None);
    let mut b = Ledger::default();
    b.record(&entry("Pod/x", true), WorkloadVerdict::WouldDeny, "no", None);
    a.merge(b);
    assert!(a.namespaces.contains_key("empty"));
    assert_eq!(
        a.namespaces["team-a"].entries.values().next().map(|e| e.verdict),
        Some(WorkloadVerdict::WouldDeny)
    );
}
