//! The readiness verdict of a group: ready to enforce, or the list of blockers.
//!
//! | signal | blocker or warning | why |
//! |---|---|---|
//! | no node satisfies the group's own placement | **blocker** | every pod enforce places would stay Pending (with a cluster autoscaler that creates nodes from zero this is expected: enforce knowingly) |
//! | running pods or templates enforce would refuse (`would_deny`) | **blocker**, naming the workloads | their next rollout, eviction or Job run would be refused |
//! | placed pods that would fit no node (the group has nodes, the pod's own requirements AND the group's match none) | **blocker**, naming the workloads | admitted, but they would stay Pending |
//! | the namespace label guard is not enforced | warning | enforcing the group is safe for its workloads; but a tenant could still move its namespace out of the group |
//! | no namespace selects the group | warning | enforcing it changes nothing yet |
//!
//! A group already in `enforce` gets the same verdict: whatever blocks it is
//! what its next rollouts will meet.

use super::{Findings, GroupAudit, Source};
use crate::config::{Config, Mode};

/// Ready to enforce, or why not.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Verdict {
    pub ready: bool,
    pub blockers: Vec<String>,
    pub warnings: Vec<String>,
}

/// At most this many workloads are named in one blocker's text (all are in the report).
const NAMED: usize = 3;

pub fn named(findings: &Findings) -> String {
    let mut names: Vec<String> = findings
        .iter()
        .take(NAMED)
        .map(|f| match f.source {
            Source::Pods => format!("{}/{} ({} pod{})", f.namespace, f.workload, f.pods, plural(f.pods)),
            Source::Template => format!("{}/{} (template)", f.namespace, f.workload),
        })
        .collect();
    let more = findings.len().saturating_sub(NAMED) as u64 + findings.omitted;
    if more > 0 {
        names.push(format!("{more} more"));
    }
    names.join(", ")
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

pub fn counted(pods: u64, templates: u64) -> String {
    match (pods, templates) {
        (p, 0) => format!("{p} running pod{}", plural(p)),
        (0, t) => format!("{t} workload template{}", plural(t)),
        (p, t) => format!("{p} running pod{} and {t} workload template{}", plural(p), plural(t)),
    }
}

/// The verdict of `group`, from its counts and findings; `nodes` is how many nodes there are.
pub fn verdict(config: &Config, group: &GroupAudit, nodes: Option<usize>) -> Verdict {
    let mut blockers = Vec::new();
    let mut warnings = Vec::new();
    let no_node = group.feasible_nodes == Some(0);
    let no_pool = no_node && group.provisionable_by.is_empty();
    if no_pool {
        let pools = if group.not_provisionable_by.is_empty() {
            String::new()
        } else {
            let why: Vec<String> = group
                .not_provisionable_by
                .iter()
                .map(|(pool, why)| format!("{pool}: {why}"))
                .collect();
            format!("; and no NodePool can provision one ({})", why.join("; "))
        };
        blockers.push(format!(
            "no node for the group: 0 of {} nodes match its nodeSelector, required node affinity and tolerated \
             taints (cordoned nodes not counted){pools}; label or untaint the pool's nodes, or fix the group's \
             placement (or declare nodes.provisionedOnDemand when an autoscaler creates them)",
            nodes.unwrap_or(0)
        ));
    } else if no_node {
        warnings.push(format!(
            "0 nodes for the group now: provisioned on demand by {}",
            group.provisionable_by.join(", ")
        ));
    }
    if group.pods.would_deny + group.templates.would_deny > 0 {
        blockers.push(format!(
            "{} would be denied by enforce: {}",
            counted(group.pods.would_deny, group.templates.would_deny),
            named(&group.would_deny)
        ));
    }
    if !no_pool && !group.no_feasible_node.is_empty() {
        let pods: u64 = group.no_feasible_node.iter().map(|f| f.pods).sum();
        let templates = group
            .no_feasible_node
            .iter()
            .filter(|f| f.source == Source::Template)
            .count() as u64;
        blockers.push(format!(
            "{} would match no node once placed (their own placement AND the group's): {}",
            counted(pods, templates),
            named(&group.no_feasible_node)
        ));
    }
    if let Some(mode) = config.namespace_guard.mode.filter(|m| *m != Mode::Enforce) {
        warnings.push(format!(
            "the namespace label guard is in {} (namespaceGuard.mode): tenants can still relabel their namespace \
             out of the group (leave namespaceGuard.mode unset to enforce it for groups in enforce)",
            mode.as_str()
        ));
    }
    if group.namespaces == 0 {
        warnings.push(format!(
            "no namespace selects the group ({}={})",
            config.namespace_label, group.group
        ));
    }
    Verdict {
        ready: blockers.is_empty(),
        blockers,
        warnings,
    }
}

#[cfg(test)]
mod tests {
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
}
