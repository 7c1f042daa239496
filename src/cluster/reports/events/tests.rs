use super::*;
use pod_director_engine::audit::workloads::Entry;
use pod_director_engine::config::Mode;

fn ledger(verdicts: &[(&str, WorkloadVerdict)]) -> Ledger {
    let mut l = Ledger::default();
    l.namespace("team-a", "web");
    for (workload, verdict) in verdicts {
        let entry = Entry {
            namespace: "team-a",
            workload,
            policy: "web",
            rule: Rule::Placement,
            mode: Mode::DryRun,
            pod: true,
        };
        // Many pods of one workload: still one verdict, hence at most one Event.
        for _ in 0..5 {
            l.record(&entry, *verdict, "would set nodeSelector pool=web", None);
        }
    }
    l
}

#[test]
fn the_first_scan_is_the_baseline_and_then_only_changes_make_events_once() {
    let mut baseline = Baseline::default();
    let start = ledger(&[
        ("Deployment/a", WorkloadVerdict::Compliant),
        ("Deployment/b", WorkloadVerdict::WouldPatch),
    ]);
    assert!(baseline.changes(&start).is_empty(), "a restart publishes nothing");
    assert!(baseline.changes(&start).is_empty(), "nothing changed");
    let worse = ledger(&[
        ("Deployment/a", WorkloadVerdict::WouldDeny),
        ("Deployment/b", WorkloadVerdict::WouldPatch),
    ]);
    let changes = baseline.changes(&worse);
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(
        (changes[0].workload.as_str(), changes[0].reason, changes[0].type_),
        ("Deployment/a", "WouldBeDenied", EventType::Warning)
    );
    assert_eq!(changes[0].note, "web (dryRun): would set nodeSelector pool=web");
    assert!(
        baseline.changes(&worse).is_empty(),
        "the same verdict again: no second Event"
    );
    let fixed = ledger(&[
        ("Deployment/a", WorkloadVerdict::Compliant),
        ("Deployment/b", WorkloadVerdict::WouldPatch),
    ]);
    let back = baseline.changes(&fixed);
    assert_eq!(back.iter().map(|c| c.reason).collect::<Vec<_>>(), ["Compliant"]);
}

#[test]
fn a_new_workload_is_news_unless_it_is_compliant() {
    let mut baseline = Baseline::default();
    baseline.changes(&ledger(&[]));
    let changes = baseline.changes(&ledger(&[
        ("Pod/x", WorkloadVerdict::Compliant),
        ("Pod/y", WorkloadVerdict::WouldPatch),
    ]));
    assert_eq!(
        changes.iter().map(|c| c.workload.as_str()).collect::<Vec<_>>(),
        ["Pod/y"]
    );
    assert_eq!(changes[0].reason, "WouldBePatched");
}

#[test]
fn the_event_is_about_the_workload_with_its_api_version() {
    let r = regarding("team-a", "CronJob/nightly");
    assert_eq!(
        (
            r.api_version.as_deref(),
            r.kind.as_deref(),
            r.name.as_deref(),
            r.namespace.as_deref()
        ),
        (Some("batch/v1"), Some("CronJob"), Some("nightly"), Some("team-a"))
    );
}

/// team-a's ledger plus namespace tenant-a of no group whose in-tree annotations are `verdict`
/// (unenforced: a hole; compliant: enforced).
fn with_tenant(verdict: WorkloadVerdict) -> Ledger {
    let mut l = ledger(&[("Deployment/a", WorkloadVerdict::Compliant)]);
    let entry = Entry {
        namespace: "tenant-a",
        workload: "Namespace/tenant-a",
        policy: "inTreePlugins",
        rule: Rule::InTree,
        mode: Mode::DryRun,
        pod: false,
    };
    l.record(
        &entry,
        verdict,
        "no admission plugin enforces this namespace's in-tree annotations",
        None,
    );
    l
}

#[test]
fn a_namespace_whose_in_tree_annotations_stop_being_enforced_gets_a_warning_in_itself() {
    let mut baseline = Baseline::default();
    baseline.changes(&with_tenant(WorkloadVerdict::Compliant));
    let changes = baseline.changes(&with_tenant(WorkloadVerdict::Unenforced));
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(
        (
            changes[0].namespace.as_str(),
            changes[0].workload.as_str(),
            changes[0].reason,
            changes[0].type_
        ),
        (
            "tenant-a",
            "Namespace/tenant-a",
            "InTreeAnnotationsNotEnforced",
            EventType::Warning
        )
    );
    assert_eq!(
        changes[0].note,
        "inTreePlugins (dryRun): no admission plugin enforces this namespace's in-tree annotations"
    );
    let reference = regarding(&changes[0].namespace, &changes[0].workload);
    assert_eq!(
        (
            reference.api_version.as_deref(),
            reference.kind.as_deref(),
            reference.name.as_deref()
        ),
        (Some("v1"), Some("Namespace"), Some("tenant-a"))
    );
    let back = baseline.changes(&with_tenant(WorkloadVerdict::Compliant));
    assert_eq!(back.iter().map(|c| c.reason).collect::<Vec<_>>(), ["Compliant"]);
}
