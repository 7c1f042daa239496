//! "Is it safe to enforce this reservation?" — intruders of a group's reserved nodes as the
//! cluster runs.
//!
//! Every running pod and workload template of every namespace the audit scans (all but the
//! excluded ones, while a group reserves) is decided as `/validate-reservation` would decide
//! its re-creation now, with the requester of that re-creation ([`super::requester`]): the
//! ReplicaSet controller for a Deployment's pods, the DaemonSet controller for a DaemonSet's
//! (exempt with `allowDaemonSets`), a user for a bare pod. Found per reservation:
//!
//! | finding | blocker or warning | why |
//! |---|---|---|
//! | pods or templates the reservation would refuse (`would_deny`) | **blocker**, naming the workloads | their next rollout, eviction or Job run would be refused |
//! | intruding bare pods whose creator the audit cannot know (`requester_unknown`), while the reservation allows requesters | warning, naming them | a bare pod's creator is not recorded on the object: an allowed requester's re-creation is admitted, anyone else's refused |
//! | intruders running on the pool's nodes now (pod, node, the toleration that let it in; not a node's mirror pod) | warning | enforce refuses new intruders; it does not evict these: drain them |
//! | the pool has no node now | warning | decided from the tolerations alone until it has |

use super::{Findings, Source, Verdict};
use crate::config::Mode;
use crate::placement::reservation::{Intrusion, Via, in_pool};
use crate::placement::{Decision, NodeLookup, NodeView, Outcome, SkipReason};

/// The audit of one reservation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReservationAudit {
    /// The reserving group.
    pub group: String,
    /// The reservation's mode now.
    pub mode: Mode,
    /// Nodes of the pool; `None` without node data.
    pub pool_nodes: Option<usize>,
    /// Pods and templates whose re-creation the reservation in enforce would refuse.
    pub would_deny: Findings,
    /// Intruding bare pods whose creator cannot be known, while the reservation allows some
    /// requesters: not blockers (see the module's table).
    pub requester_unknown: Findings,
    /// Intruders running on the pool's nodes now, with the node.
    pub running: Findings,
    /// Intruding pods and templates whose requester is exempt.
    pub exempt: u64,
    pub verdict: Verdict,
    /// Intruding workloads by namespace (for the reports).
    pub workloads: super::workloads::Ledger,
}

impl ReservationAudit {
    pub fn new(group: String, mode: Mode) -> Self {
        Self {
            group,
            mode,
            ..Self::default()
        }
    }
}

/// Records the reservation decision of one pod (with the node it runs on) or template into
/// the audits of the reservations it intrudes on. A running pod on a pool node that intrudes
/// by no toleration (bound by `spec.nodeName`, or its node was tainted after) is listed as
/// running with that reason. `requester_known`: false for a bare pod, decided as an unknown
/// user's — its refusal is [`ReservationAudit::requester_unknown`] where the reservation allows
/// requesters.
#[allow(clippy::too_many_arguments)]
pub fn record(
    audits: &mut [ReservationAudit],
    group_of_namespace: Option<&str>,
    config: &crate::config::Config,
    namespace: &str,
    workload: &str,
    (source, requester_known): (Source, bool),
    example: &str,
    node: Option<(&str, &dyn NodeView)>,
    outcome: &Outcome,
) {
    for audit in audits.iter_mut() {
        if group_of_namespace == Some(audit.group.as_str()) {
            continue;
        }
        let entry = super::workloads::Entry {
            namespace,
            workload,
            policy: &audit.group,
            rule: super::workloads::Rule::Reservation,
            mode: audit.mode,
            pod: source == Source::Pods,
        };
        let intrusion: Option<&Intrusion> = outcome.reservation.iter().find(|i| i.group == audit.group);
        if let Some(intrusion) = intrusion {
            if intrusion.exempt.is_some() {
                audit.exempt += 1;
                continue;
            }
            let reason = || {
                format!(
                    "{}{}",
                    intrusion,
                    if outcome.decision == Decision::Error {
                        " (node not checked)"
                    } else {
                        ""
                    }
                )
            };
            let known = requester_known || !allows_requesters(config, &audit.group);
            // A bare pod whose creator the audit cannot know is a warning, not a refusal.
            let (verdict, why) = match known {
                true => (super::workloads::WorkloadVerdict::WouldDeny, reason()),
                false => (
                    super::workloads::WorkloadVerdict::RunsOnPool,
                    format!(
                        "requester unknown (an allowed requester may have created it): {}",
                        reason()
                    ),
                ),
            };
            audit.workloads.record(&entry, verdict, &why, None);
            let findings = match known {
                true => &mut audit.would_deny,
                false => &mut audit.requester_unknown,
            };
            if let Some(found) = findings.add(namespace, workload, source, example, reason)
                && let Some((node, _)) = node
            {
                found.add_node(node);
            }
        }
        // Running on a pool node now?
        let Some((node, nodes)) = node else { continue };
        let Some(group) = config.groups.get(&audit.group) else {
            continue;
        };
        if its_nodes_own(outcome) {
            continue;
        }
        let NodeLookup::Found(info) = nodes.node(node) else {
            continue;
        };
        if !in_pool(group, &info) {
            continue;
        }
        let reason = || match intrusion.map(|i| &i.via) {
            Some(Via::Toleration { toleration, taint }) => {
                format!("runs on pool node {node}: its toleration {toleration:?} tolerates reserved taint {taint}")
            }
            _ => format!(
                "runs on pool node {node} without a toleration of a reserved taint (bound by spec.nodeName, or the \
                 node was tainted after it started)"
            ),
        };
        audit
            .workloads
            .record(&entry, super::workloads::WorkloadVerdict::RunsOnPool, &reason(), None);
        if let Some(found) = audit.running.add(namespace, workload, source, example, reason) {
            found.add_node(node);
        }
    }
}

/// Whether reservation `group` exempts some requesters (`reserve.allow` users, groups or service
/// accounts): then who created a bare pod decides whether its re-creation is admitted, and the
/// audit cannot know it (the API server records no creator on the object; `managedFields` names
/// a field manager, which any client chooses freely).
fn allows_requesters(config: &crate::config::Config, group: &str) -> bool {
    let allow = config
        .groups
        .get(group)
        .and_then(|g| g.reserve.as_ref())
        .map(|r| &r.allow);
    allow.is_some_and(|a| !(a.users.is_empty() && a.groups.is_empty() && a.service_accounts.is_empty()))
}

/// Whether a pod on a pool node is its node's own, so no intruder whatever it tolerates: a static
/// pod's mirror, which admission skips (`mirror_pod`) because its node creates it — the audit's
/// requester of its re-creation is that node, `system:node:<spec.nodeName>`, when the node exists
/// (`super::requester::recreation`).
fn its_nodes_own(outcome: &Outcome) -> bool {
    outcome.skip_reason == Some(SkipReason::MirrorPod)
}

/// The verdict of a reservation (see the module's table).
pub fn verdict(audit: &ReservationAudit) -> Verdict {
    let mut blockers = Vec::new();
    let mut warnings = Vec::new();
    if !audit.would_deny.is_empty() {
        let pods: u64 = audit.would_deny.iter().map(|f| f.pods).sum();
        let templates =
            audit.would_deny.iter().filter(|f| f.source == Source::Template).count() as u64 + audit.would_deny.omitted;
        blockers.push(format!(
            "{} of other namespaces would be refused by the reservation in enforce: {}",
            super::verdict::counted(pods, templates),
            super::verdict::named(&audit.would_deny)
        ));
    }
    if !audit.requester_unknown.is_empty() {
        let pods: u64 = audit.requester_unknown.iter().map(|f| f.pods).sum::<u64>() + audit.requester_unknown.omitted;
        warnings.push(format!(
            "{pods} bare pod(s) of other namespaces intrude, and who created them is not recorded ({}): enforce admits \
             their re-creation by a requester in reserve.allow (users, groups, serviceAccounts) and refuses anyone \
             else's; check who creates them",
            super::verdict::named(&audit.requester_unknown)
        ));
    }
    if !audit.running.is_empty() {
        let pods: u64 = audit.running.iter().map(|f| f.pods).sum();
        warnings.push(format!(
            "{pods} pod(s) of other namespaces run on the pool's nodes now ({}): enforce refuses new intruders, it \
             does not evict these; drain them once their workloads are fixed",
            super::verdict::named(&audit.running)
        ));
    }
    if audit.pool_nodes == Some(0) {
        warnings.push(
            "the pool has no node now (scaled to zero?): intruders are decided from their tolerations alone".to_owned(),
        );
    }
    Verdict {
        ready: blockers.is_empty(),
        blockers,
        warnings,
    }
}

#[cfg(test)]
mod tests;
