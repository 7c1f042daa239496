//! The audit's outcome per *workload*, per namespace: what the continuous audit hands to the
//! OpenReports writer (`crate::cluster::reports`) so that no second scan is needed.
//!
//! The group counts and findings of [`super::GroupAudit`] are bounded per group and keep only
//! the workloads enforce would change; a report needs every workload of a namespace, the
//! compliant ones too. The scan records each decided pod and template here under its workload
//! (the controller at the top of its owner chain, or the bare pod: the audit's `Kind/name`),
//! and the workload keeps its worst verdict (would_deny over would_patch over compliant over
//! skipped) with the message of that verdict. Pure: no client, no clock.
//!
//! Bounded: at most [`MAX_WORKLOADS_PER_NAMESPACE`] entries per namespace (the others are
//! counted in [`NamespaceOutcomes::omitted`]); a message is cut to [`MAX_MESSAGE_BYTES`], a
//! patch summary to [`MAX_PATCH_PATHS`] paths.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use super::AuditDecision;
use crate::config::Mode;
use crate::placement::Outcome;

/// Most workload entries kept per namespace; the others are counted.
pub const MAX_WORKLOADS_PER_NAMESPACE: usize = 2000;
/// Longest message kept per entry (bytes, cut on a character boundary).
pub const MAX_MESSAGE_BYTES: usize = 512;
/// Most JSON Patch paths kept per entry's patch summary.
pub const MAX_PATCH_PATHS: usize = 5;

named_enum! {
    /// What a finding is about (the `rule` of a report result).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum Rule {
        /// The group's placement (nodeSelector, tolerations, affinity) on the workload's pods.
        Placement => "placement",
        /// Another group's reservation of its nodes, which the workload's pods intrude on.
        Reservation => "reservation",
        /// Who may move the namespace out of its group (the namespace label guard).
        NamespaceGuard => "namespace-guard",
        /// Whether the workload's pods, once placed, fit any node.
        Feasibility => "feasibility",
        /// The in-tree plugins' namespace annotations (PodNodeSelector, PodTolerationRestriction).
        InTree => "in-tree",
    }
}

named_enum! {
    /// The verdict of one workload under one rule, worst last.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum WorkloadVerdict {
        /// A skip rule applies (excluded by label, DaemonSet pods of a group allowing them, …).
        Skipped => "skipped",
        /// Nothing to change.
        Compliant => "compliant",
        /// Running on a reserved pool's node without intruding by a toleration (bound by name,
        /// or the node was tainted after): enforce refuses no re-creation, but it sits there.
        RunsOnPool => "runs_on_pool",
        /// Enforce would patch its pods.
        WouldPatch => "would_patch",
        /// Once placed, its pods would fit no node (admitted, left Pending).
        NoFeasibleNode => "no_feasible_node",
        /// Enforce would refuse its pods.
        WouldDeny => "would_deny",
        /// A namespace whose in-tree annotations no admission plugin enforces.
        Unenforced => "unenforced",
    }
}

impl From<AuditDecision> for WorkloadVerdict {
    /// A pod's or template's verdict, as the audit counts it ([`AuditDecision::of`]).
    fn from(decision: AuditDecision) -> Self {
        match decision {
            AuditDecision::Compliant => WorkloadVerdict::Compliant,
            AuditDecision::WouldPatch => WorkloadVerdict::WouldPatch,
            AuditDecision::WouldDeny => WorkloadVerdict::WouldDeny,
            AuditDecision::Skipped => WorkloadVerdict::Skipped,
        }
    }
}

/// A bounded summary of the patch enforce would apply.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PatchSummary {
    /// Operations in the patch.
    pub ops: usize,
    /// The first [`MAX_PATCH_PATHS`] paths, in patch order.
    pub paths: Vec<String>,
}

impl PatchSummary {
    fn of(patch: &json_patch::Patch) -> Option<Self> {
        (!patch.0.is_empty()).then(|| Self {
            ops: patch.0.len(),
            paths: patch
                .0
                .iter()
                .take(MAX_PATCH_PATHS)
                .map(|op| op.path().to_string())
                .collect(),
        })
    }
}

/// The outcome of one workload under one (policy, rule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadOutcome {
    /// The group whose rule this is (the namespace's own group; the reserving group for a reservation).
    pub policy: String,
    pub rule: Rule,
    /// That group's (or reservation's) mode now.
    pub mode: Mode,
    pub verdict: WorkloadVerdict,
    /// The one-line plan or reason of the worst verdict seen (`would add toleration …`): shared
    /// by the entries of a ledger that have the same one ([`Shared`]).
    pub message: Arc<str>,
    /// The patch of a would_patch (shared as the message).
    pub patch: Option<Arc<PatchSummary>>,
    /// Running pods decided under this workload.
    pub pods: u64,
    /// Templates decided under this workload (0 or 1).
    pub templates: u64,
}

/// The key of an entry: `Kind/name`, policy, rule.
pub type Key = (String, String, Rule);

/// The outcomes of one namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceOutcomes {
    /// The group the namespace selects (`None`: only intruders of reservations were recorded).
    pub group: Option<String>,
    pub entries: BTreeMap<Key, WorkloadOutcome>,
    /// Decisions of workloads beyond [`MAX_WORKLOADS_PER_NAMESPACE`].
    pub omitted: u64,
}

impl NamespaceOutcomes {
    /// Whether the namespace gets a report: it selects a group, or carries in-tree annotations.
    pub fn reported(&self) -> bool {
        self.group.is_some() || self.entries.keys().any(|(_, _, rule)| *rule == Rule::InTree)
    }
}

/// The outcomes of every namespace an audit recorded (the pure interface the reports consume).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ledger {
    pub namespaces: BTreeMap<String, NamespaceOutcomes>,
    shared: Shared,
}

/// One copy of each message and patch summary a ledger holds: the bare pods of a namespace (a
/// workload each) mostly share one plan, so an entry costs its key and counts, not its text.
#[derive(Debug, Clone, Default)]
struct Shared {
    messages: HashSet<Arc<str>>,
    patches: HashSet<Arc<PatchSummary>>,
}

impl PartialEq for Shared {
    /// What the entries hold is compared, not how it is shared.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Shared {}

impl Shared {
    fn message(&mut self, text: &str) -> Arc<str> {
        let text = cut(text);
        if let Some(found) = self.messages.get(text.as_str()) {
            return found.clone();
        }
        let shared: Arc<str> = Arc::from(text);
        self.messages.insert(shared.clone());
        shared
    }

    fn patch(&mut self, patch: Option<PatchSummary>) -> Option<Arc<PatchSummary>> {
        let patch = patch?;
        if let Some(found) = self.patches.get(&patch) {
            return Some(found.clone());
        }
        let shared = Arc::new(patch);
        self.patches.insert(shared.clone());
        Some(shared)
    }
}

/// One decision to record: which workload, under which policy and rule, in which mode.
pub struct Entry<'a> {
    pub namespace: &'a str,
    pub workload: &'a str,
    pub policy: &'a str,
    pub rule: Rule,
    pub mode: Mode,
    /// Whether it is about running pods (else a template).
    pub pod: bool,
}

fn cut(text: &str) -> String {
    crate::placement::truncate_bytes(text.trim_start_matches("pod-director: "), MAX_MESSAGE_BYTES)
}

impl Ledger {
    /// Notes a namespace the audit scanned for `group` (its report exists even with no workload).
    pub fn namespace(&mut self, namespace: &str, group: &str) {
        self.namespaces.entry(namespace.to_owned()).or_default().group = Some(group.to_owned());
    }

    /// Records a verdict under `entry`'s workload; the workload keeps its worst verdict.
    pub fn record(&mut self, entry: &Entry<'_>, verdict: WorkloadVerdict, message: &str, patch: Option<PatchSummary>) {
        let ns = self.namespaces.entry(entry.namespace.to_owned()).or_default();
        let key = (entry.workload.to_owned(), entry.policy.to_owned(), entry.rule);
        let (pods, templates) = (u64::from(entry.pod), u64::from(!entry.pod));
        if let Some(found) = ns.entries.get_mut(&key) {
            found.pods += pods;
            found.templates += templates;
            if verdict > found.verdict {
                found.verdict = verdict;
                found.message = self.shared.message(message);
                found.patch = self.shared.patch(patch);
            }
            return;
        }
        if ns.entries.len() >= MAX_WORKLOADS_PER_NAMESPACE {
            ns.omitted += 1;
            return;
        }
        ns.entries.insert(
            key,
            WorkloadOutcome {
                policy: entry.policy.to_owned(),
                rule: entry.rule,
                mode: entry.mode,
                verdict,
                message: self.shared.message(message),
                patch: self.shared.patch(patch),
                pods,
                templates,
            },
        );
    }

    /// Records the placement decision of a pod or template of a group (and, when it would fit
    /// no node once placed, its feasibility).
    pub(crate) fn record_placement(&mut self, entry: &Entry<'_>, outcome: &Outcome) {
        let verdict = WorkloadVerdict::from(AuditDecision::of(outcome.decision));
        let message = match verdict {
            WorkloadVerdict::WouldDeny => outcome.message.as_deref().unwrap_or(&outcome.summary),
            _ => outcome.summary.as_str(),
        };
        let patch = (verdict == WorkloadVerdict::WouldPatch)
            .then(|| PatchSummary::of(&outcome.patch))
            .flatten();
        self.record(entry, verdict, message, patch);
        // As the group's findings: a pod enforce would refuse is not also one that fits no node.
        if outcome.no_feasible_node && !matches!(verdict, WorkloadVerdict::Skipped | WorkloadVerdict::WouldDeny) {
            let feasibility = Entry {
                rule: Rule::Feasibility,
                ..*entry
            };
            self.record(&feasibility, WorkloadVerdict::NoFeasibleNode, &outcome.summary, None);
        }
    }

    /// Moves another ledger's entries into this one (the reservations' into the groups'); a
    /// workload in both keeps the worse verdict.
    pub fn merge(&mut self, other: Ledger) {
        if self.namespaces.is_empty() {
            *self = other;
            return;
        }
        for (namespace, theirs) in other.namespaces {
            let ours = self.namespaces.entry(namespace).or_default();
            if ours.group.is_none() {
                ours.group = theirs.group;
            }
            ours.omitted += theirs.omitted;
            for (key, outcome) in theirs.entries {
                let full = ours.entries.len() >= MAX_WORKLOADS_PER_NAMESPACE;
                match ours.entries.get_mut(&key) {
                    Some(found) if outcome.verdict > found.verdict => *found = outcome,
                    Some(_) => {}
                    None if full => ours.omitted += 1,
                    None => {
                        ours.entries.insert(key, outcome);
                    }
                }
            }
        }
    }
}

impl Clone for Entry<'_> {
    fn clone(&self) -> Self {
        *self
    }
}

impl Copy for Entry<'_> {}

/// The whole audit's outcomes per namespace: the groups' namespaces with their workloads, and
/// the reservations' intruders in those namespaces (intruders of namespaces that select no
/// audited group are in the audit's findings and gauges only). The ledgers are moved out of
/// `audit`, not copied: a scan of thousands of bare pods (a workload each) is held once.
pub fn of_audit(audit: &mut super::Audit) -> Ledger {
    let mut ledger = Ledger::default();
    for group in &mut audit.groups {
        ledger.merge(std::mem::take(&mut group.workloads));
    }
    ledger.merge(std::mem::take(&mut audit.in_tree.workloads));
    for reservation in &mut audit.reservations {
        let mut intruders = std::mem::take(&mut reservation.workloads);
        intruders
            .namespaces
            .retain(|ns, _| ledger.namespaces.get(ns).is_some_and(|o| o.group.is_some()));
        ledger.merge(intruders);
    }
    ledger
}

#[cfg(test)]
mod tests;
