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
mod tests;
