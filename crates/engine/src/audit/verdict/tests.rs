use super::*;
use crate::audit::{AuditDecision, Counts};

fn config(guard: &str) -> Config {
    crate::testing::config(&format!(
        "namespaceGuard: {{mode: {guard}}}\ngroups:\n  ci:\n    nodeSelector: {{pool: ci}}\n"
    ))
}

fn group() -> GroupAudit {
    let mut group = GroupAudit::new("ci".to_owned(), Mode::DryRun);
    group.namespaces = 2;
    group.feasible_nodes = Some(3);
    group
}

#[test]
fn a_group_with_nodes_and_nothing_to_refuse_is_ready() {
    let mut g = group();
    g.pods = Counts {
        compliant: 4,
        would_patch: 10,
        would_deny: 0,
        skipped: 1,
    };
    let v = verdict(&config("enforce"), &g, Some(5));
    assert!(v.ready, "{v:?}");
    assert!(v.blockers.is_empty() && v.warnings.is_empty(), "{v:?}");
}

#[test]
fn a_pool_with_no_node_that_a_nodepool_can_provision_is_ready_and_names_it() {
    let mut g = group();
    g.feasible_nodes = Some(0);
    g.provisionable_by = vec!["nodepool/gpu".to_owned()];
    let v = verdict(&config("enforce"), &g, Some(5));
    assert!(v.ready, "{v:?}");
    assert_eq!(
        v.warnings,
        ["0 nodes for the group now: provisioned on demand by nodepool/gpu"]
    );
}

#[test]
fn a_pool_no_nodepool_can_provision_blocks_naming_each_and_why() {
    let mut g = group();
    g.feasible_nodes = Some(0);
    g.not_provisionable_by = vec![
        (
            "nodepool/gpu".to_owned(),
            "taint gpu=true:NoSchedule is not tolerated".to_owned(),
        ),
        ("nodepool/cpu".to_owned(), "not Ready (Ready=False)".to_owned()),
    ];
    let v = verdict(&config("enforce"), &g, Some(5));
    assert!(!v.ready);
    assert_eq!(v.blockers.len(), 1, "{v:?}");
    assert!(
        v.blockers[0].contains(
            "and no NodePool can provision one (nodepool/gpu: taint gpu=true:NoSchedule is not tolerated; \
                 nodepool/cpu: not Ready (Ready=False))"
        ),
        "{v:?}"
    );
}

#[test]
fn a_group_whose_pool_has_no_node_is_not_ready_and_says_so() {
    let mut g = group();
    g.feasible_nodes = Some(0);
    let v = verdict(&config("enforce"), &g, Some(5));
    assert!(!v.ready);
    assert_eq!(v.blockers.len(), 1, "{v:?}");
    assert!(
        v.blockers[0].starts_with("no node for the group: 0 of 5 nodes"),
        "{v:?}"
    );
}

#[test]
fn would_deny_workloads_are_named_in_the_blocker() {
    let mut g = group();
    for pod in ["web-1", "web-2"] {
        g.pods.add(AuditDecision::WouldDeny);
        g.would_deny
            .add("team-a", "Deployment/web", Source::Pods, pod, || "conflict".to_owned());
    }
    g.templates.add(AuditDecision::WouldDeny);
    g.would_deny
        .add("team-a", "Deployment/web", Source::Template, "Deployment/web", || {
            "conflict".to_owned()
        });
    let v = verdict(&config("enforce"), &g, Some(5));
    assert!(!v.ready);
    assert_eq!(
        v.blockers,
        vec![
            "2 running pods and 1 workload template would be denied by enforce: team-a/Deployment/web (2 pods), \
                 team-a/Deployment/web (template)"
                .to_owned()
        ]
    );
}

#[test]
fn an_unenforced_namespace_guard_and_an_empty_group_are_warnings_not_blockers() {
    let mut g = group();
    g.namespaces = 0;
    let v = verdict(&config("dryRun"), &g, Some(5));
    assert!(v.ready, "{v:?}");
    assert_eq!(v.warnings.len(), 2, "{v:?}");
    assert!(v.warnings[0].contains("namespace label guard is in dryRun"), "{v:?}");
    assert!(v.warnings[1].contains("no namespace selects the group"), "{v:?}");
}

#[test]
fn a_guard_that_follows_the_groups_is_no_warning_a_group_about_to_be_enforced_needs() {
    let config = crate::testing::config("groups:\n  ci:\n    nodeSelector: {pool: ci}\n");
    let v = verdict(&config, &group(), Some(5));
    assert!(v.ready, "{v:?}");
    assert!(v.warnings.is_empty(), "{v:?}");
}

#[test]
fn workloads_beyond_the_limit_are_counted_not_dropped() {
    let mut g = group();
    for i in 0..(crate::audit::MAX_FINDINGS + 2) {
        g.pods.add(AuditDecision::WouldDeny);
        g.would_deny.add("ns", &format!("Pod/p{i:03}"), Source::Pods, "p", || {
            "conflict".to_owned()
        });
    }
    assert_eq!(g.would_deny.len(), crate::audit::MAX_FINDINGS);
    assert_eq!(g.would_deny.omitted, 2);
    let v = verdict(&config("enforce"), &g, Some(1));
    assert!(
        v.blockers[0].ends_with(&format!("{} more", crate::audit::MAX_FINDINGS - NAMED + 2)),
        "{v:?}"
    );
}
