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
                true => (super::workloads::Verdict::WouldDeny, reason()),
                false => (
                    super::workloads::Verdict::RunsOnPool,
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
            .record(&entry, super::workloads::Verdict::RunsOnPool, &reason(), None);
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
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::Config;
    use crate::placement::NodeInfo;
    use crate::placement::reservation::Exemption;

    fn config() -> Config {
        serde_json::from_value(serde_json::json!({
            "groups": {"ci": {"nodeSelector": {"pool": "ci"},
                              "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ci", "effect": "NoSchedule"}],
                              "reserve": {"mode": "dryRun"}},
                       "web": {}}
        }))
        .expect("config")
    }

    fn intruded(exempt: Option<Exemption>) -> Outcome {
        let mut out = Outcome::new(crate::placement::Webhook::ValidateReservation, Decision::WouldDeny);
        out.reservation = vec![Intrusion {
            group: "ci".to_owned(),
            mode: Mode::DryRun,
            via: Via::Toleration {
                toleration: "* exists".to_owned(),
                taint: "dedicated=ci:NoSchedule".to_owned(),
            },
            exempt,
            pool_nodes: None,
        }];
        out
    }

    fn nodes() -> Vec<Arc<NodeInfo>> {
        vec![
            Arc::new(crate::testing::node(
                "ci-1",
                &[("pool", "ci")],
                &[("dedicated", "ci", "NoSchedule")],
                false,
            )),
            Arc::new(crate::testing::node("w-1", &[("pool", "web")], &[], false)),
        ]
    }

    #[test]
    fn an_intruder_running_on_a_pool_node_blocks_and_is_listed_with_its_node_and_toleration() {
        let config = config();
        let nodes = nodes();
        let mut audits = vec![ReservationAudit::new("ci".to_owned(), Mode::DryRun)];
        let outcome = intruded(None);
        let view: &dyn NodeView = &nodes;
        record(
            &mut audits,
            None,
            &config,
            "batch",
            "Pod/x",
            (Source::Pods, true),
            "x",
            Some(("ci-1", view)),
            &outcome,
        );
        let audit = &mut audits[0];
        audit.verdict = verdict(audit);
        assert!(!audit.verdict.ready, "{:?}", audit.verdict);
        let running: Vec<_> = audit.running.iter().collect();
        assert_eq!(running.len(), 1);
        assert!(running[0].nodes.contains("ci-1"));
        assert!(running[0].reason.contains("* exists"), "{}", running[0].reason);
    }

    #[test]
    fn an_exempt_intruder_is_counted_not_blocking_and_the_group_s_own_pods_are_no_intruders() {
        let config = config();
        let nodes = nodes();
        let view: &dyn NodeView = &nodes;
        let mut audits = vec![ReservationAudit::new("ci".to_owned(), Mode::DryRun)];
        record(
            &mut audits,
            None,
            &config,
            "kube-agents",
            "DaemonSet/agent",
            (Source::Template, true),
            "agent",
            None,
            &intruded(Some(Exemption::DaemonSetPod)),
        );
        record(
            &mut audits,
            Some("ci"),
            &config,
            "ci-runners",
            "Pod/r",
            (Source::Pods, true),
            "r",
            Some(("ci-1", view)),
            &intruded(None),
        );
        let audit = &mut audits[0];
        audit.verdict = verdict(audit);
        assert_eq!(audit.exempt, 1);
        assert!(audit.verdict.ready, "{:?}", audit.verdict);
        assert!(audit.running.is_empty());
    }

    #[test]
    fn a_bare_pod_whose_creator_may_be_allowed_is_requester_unknown_not_a_blocker() {
        let nodes = nodes();
        let view: &dyn NodeView = &nodes;
        let bare = |audits: &mut Vec<ReservationAudit>, config: &Config, known: bool| {
            record(
                audits,
                None,
                config,
                "batch",
                "Pod/b",
                (Source::Pods, known),
                "b",
                Some(("w-1", view)),
                &intruded(None),
            );
        };
        // No requester is allowed: whoever created it, its re-creation is refused: a blocker.
        let mut audits = vec![ReservationAudit::new("ci".to_owned(), Mode::DryRun)];
        bare(&mut audits, &config(), false);
        let audit = &mut audits[0];
        audit.verdict = verdict(audit);
        assert!(!audit.verdict.ready, "{:?}", audit.verdict);
        assert!(audit.requester_unknown.is_empty());
        // A requester is allowed: the bare pod's creator decides, and the audit cannot know it.
        let mut allowing = config();
        if let Some(reserve) = allowing.groups.get_mut("ci").and_then(|g| g.reserve.as_mut()) {
            reserve.allow.service_accounts = vec!["ops/runner".to_owned()];
        }
        let mut audits = vec![ReservationAudit::new("ci".to_owned(), Mode::DryRun)];
        bare(&mut audits, &allowing, false);
        let audit = &mut audits[0];
        audit.verdict = verdict(audit);
        assert!(audit.verdict.ready, "not a blocker: {:?}", audit.verdict);
        assert!(audit.would_deny.is_empty());
        assert_eq!(audit.requester_unknown.iter().count(), 1);
        assert_eq!(audit.verdict.warnings.len(), 1, "{:?}", audit.verdict);
        assert!(
            audit.verdict.warnings[0].contains("who created them is not recorded"),
            "{:?}",
            audit.verdict
        );
        // A pod whose requester is known (a controller's) is refused as before.
        let mut audits = vec![ReservationAudit::new("ci".to_owned(), Mode::DryRun)];
        bare(&mut audits, &allowing, true);
        assert_eq!(audits[0].would_deny.iter().count(), 1);
    }

    #[test]
    fn a_node_s_mirror_pod_on_a_pool_node_is_no_running_intruder() {
        let config = config();
        let nodes = nodes();
        let view: &dyn NodeView = &nodes;
        let mut audits = vec![ReservationAudit::new("ci".to_owned(), Mode::DryRun)];
        let mut mirror = Outcome::new(crate::placement::Webhook::ValidateReservation, Decision::Skipped);
        mirror.skip_reason = Some(SkipReason::MirrorPod);
        record(
            &mut audits,
            None,
            &config,
            "kube-agents",
            "Pod/etcd-ci-1",
            (Source::Pods, true),
            "etcd-ci-1",
            Some(("ci-1", view)),
            &mirror,
        );
        let audit = &mut audits[0];
        audit.verdict = verdict(audit);
        assert!(audit.running.is_empty(), "{:?}", audit.running);
        assert!(audit.verdict.warnings.is_empty(), "{:?}", audit.verdict);
        assert!(its_nodes_own(&mirror));
        let other = Outcome::new(crate::placement::Webhook::ValidateReservation, Decision::Skipped);
        assert!(!its_nodes_own(&other), "other skips are no node's own");
    }

    #[test]
    fn a_pod_bound_to_a_pool_node_without_a_reserved_toleration_is_listed_as_running() {
        let config = config();
        let nodes = nodes();
        let view: &dyn NodeView = &nodes;
        let mut audits = vec![ReservationAudit::new("ci".to_owned(), Mode::DryRun)];
        let compliant = Outcome::new(crate::placement::Webhook::ValidateReservation, Decision::Noop);
        record(
            &mut audits,
            None,
            &config,
            "batch",
            "Pod/y",
            (Source::Pods, true),
            "y",
            Some(("ci-1", view)),
            &compliant,
        );
        record(
            &mut audits,
            None,
            &config,
            "batch",
            "Pod/z",
            (Source::Pods, true),
            "z",
            Some(("w-1", view)),
            &compliant,
        );
        let audit = &mut audits[0];
        audit.verdict = verdict(audit);
        assert!(audit.verdict.ready, "running intruders warn, they do not block");
        let running: Vec<_> = audit.running.iter().collect();
        assert_eq!(running.len(), 1, "only the pool node's pod");
        assert!(running[0].reason.contains("spec.nodeName"), "{}", running[0].reason);
        assert_eq!(audit.verdict.warnings.len(), 1);
    }
}
