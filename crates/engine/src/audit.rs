//! "Is it safe to enforce this group?" — the audit of the cluster as it runs.
//!
//! dryRun reports the pods created while it watches; the pods already running
//! were admitted before, and their controllers will re-create them under the new
//! rules at the next rollout. The audit decides every running pod and every
//! workload template (Deployments, StatefulSets, DaemonSets, ReplicaSets not
//! owned by a Deployment, Jobs not owned by a CronJob, CronJobs) of each group's
//! namespaces exactly as enforce would decide its re-creation now — the same
//! engine, the same skip rules, the requester its re-creation would have (see
//! [`requester`]) — counts compliant / would_patch / would_deny / skipped, names the
//! workloads behind each would_deny, counts the nodes the group can use, and gives
//! a [`Verdict`] per group (see [`verdict`]).
//!
//! The namespaces carrying the in-tree plugins' annotations are audited whatever their group, and
//! whether pod-director's compatibility is on or not: who enforces them (a hole when nothing
//! does), their pods under the in-tree rule, its verdict (see [`in_tree`]).
//!
//! This is the audit's pure half: what a pod or template is decided as, the tallies, findings
//! and verdicts, the workload ledger of the reports and what each namespace's OpenReports report says
//! (`open_reports`), the audit as text or JSON (`render`). The product
//! lists the cluster and feeds it (`src/cluster/audit/scan.rs`); `pod-director audit`
//! (`src/cli/audit.rs`) runs one scan, `serve` repeats it into gauges on the replica holding a
//! Lease (`src/cluster/audit/continuous.rs`).

pub mod in_tree;
pub mod open_reports;
pub mod render;
pub mod requester;
pub mod reservation;
pub mod tally;
pub mod verdict;
pub mod workloads;

use std::collections::BTreeMap;
use std::time::Duration;

use self::in_tree::InTreeAudit;
use self::reservation::ReservationAudit;
pub use self::verdict::Verdict;
use crate::config::Mode;
use crate::placement::{Decision, Outcome};

/// Most workloads listed per group and finding kind; the others are counted.
pub const MAX_FINDINGS: usize = 100;

named_enum! {
    /// How a running pod or template fares under enforce (`decision` label of the audit gauges).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum AuditDecision {
        /// Nothing to change.
        Compliant => "compliant",
        /// Enforce would patch its re-creation.
        WouldPatch => "would_patch",
        /// Enforce would refuse its re-creation.
        WouldDeny => "would_deny",
        /// Not pod-director's business (a skip rule applies).
        Skipped => "skipped",
    }
}

impl AuditDecision {
    /// The engine's decision, whatever the group's mode: what enforce would do.
    fn of(decision: Decision) -> Self {
        match decision {
            Decision::Noop => AuditDecision::Compliant,
            Decision::Patched | Decision::WouldPatch => AuditDecision::WouldPatch,
            // An undecidable pod is one enforce would not admit.
            Decision::Denied | Decision::WouldDeny | Decision::Error => AuditDecision::WouldDeny,
            Decision::Skipped | Decision::UnknownGroup => AuditDecision::Skipped,
        }
    }
}

/// Counts by [`AuditDecision`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    pub compliant: u64,
    pub would_patch: u64,
    pub would_deny: u64,
    pub skipped: u64,
}

impl Counts {
    fn add(&mut self, decision: AuditDecision) {
        *self.slot(decision) += 1;
    }

    fn slot(&mut self, decision: AuditDecision) -> &mut u64 {
        match decision {
            AuditDecision::Compliant => &mut self.compliant,
            AuditDecision::WouldPatch => &mut self.would_patch,
            AuditDecision::WouldDeny => &mut self.would_deny,
            AuditDecision::Skipped => &mut self.skipped,
        }
    }

    pub fn get(mut self, decision: AuditDecision) -> u64 {
        *self.slot(decision)
    }

    pub fn total(&self) -> u64 {
        self.compliant + self.would_patch + self.would_deny + self.skipped
    }
}

/// Whether a finding is about running pods or a workload's template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Running pods of the workload.
    Pods,
    /// The workload's pod template.
    Template,
}

/// Nodes named per finding (the nodes its running pods are bound to); the rest are counted.
pub const MAX_FINDING_NODES: usize = 20;

/// One workload behind a would_deny, a would_patch (or a placed pod that fits no node).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    pub namespace: String,
    /// `Kind/name`: `Deployment/web`, `CronJob/nightly`, `Pod/debug` for a bare pod.
    pub workload: String,
    pub source: Source,
    /// Running pods concerned (0 for a template).
    pub pods: u64,
    /// One of them, by name (the template's workload name for a template).
    pub example: String,
    /// Why (the denial enforce would send), for the first one seen.
    pub reason: String,
    /// The nodes its running pods are bound to (`spec.nodeName`), at most [`MAX_FINDING_NODES`].
    #[serde(skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub nodes: std::collections::BTreeSet<String>,
    /// Further nodes, beyond [`MAX_FINDING_NODES`].
    #[serde(skip_serializing_if = "is_zero")]
    pub nodes_omitted: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Finding {
    fn add_node(&mut self, node: &str) {
        if self.nodes.contains(node) {
            return;
        }
        if self.nodes.len() < MAX_FINDING_NODES {
            self.nodes.insert(node.to_owned());
        } else {
            self.nodes_omitted += 1;
        }
    }
}

/// Findings of one kind for one group, at most [`MAX_FINDINGS`] workloads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Findings {
    by_workload: BTreeMap<(String, String, Source), Finding>,
    /// Pods and templates of workloads beyond [`MAX_FINDINGS`].
    pub omitted: u64,
}

impl Findings {
    /// Counts a pod or template under its workload; the workload's finding, unless omitted.
    fn add(
        &mut self,
        namespace: &str,
        workload: &str,
        source: Source,
        example: &str,
        reason: impl FnOnce() -> String,
    ) -> Option<&mut Finding> {
        let key = (namespace.to_owned(), workload.to_owned(), source);
        if self.by_workload.contains_key(&key) {
            let found = self.by_workload.get_mut(&key)?;
            found.pods += u64::from(source == Source::Pods);
            return Some(found);
        }
        if self.by_workload.len() >= MAX_FINDINGS {
            self.omitted += 1;
            return None;
        }
        Some(self.by_workload.entry(key).or_insert_with(|| Finding {
            namespace: namespace.to_owned(),
            workload: workload.to_owned(),
            source,
            pods: u64::from(source == Source::Pods),
            example: example.to_owned(),
            reason: reason(),
            nodes: std::collections::BTreeSet::new(),
            nodes_omitted: 0,
        }))
    }

    pub fn iter(&self) -> impl Iterator<Item = &Finding> {
        self.by_workload.values()
    }

    pub fn is_empty(&self) -> bool {
        self.by_workload.is_empty() && self.omitted == 0
    }

    pub fn len(&self) -> usize {
        self.by_workload.len()
    }
}

/// The audit of one group.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroupAudit {
    pub group: String,
    /// The group's mode now (the audit decides as enforce would, whatever it is).
    pub mode: Mode,
    /// Namespaces that select the group.
    pub namespaces: usize,
    pub pods: Counts,
    pub templates: Counts,
    /// Nodes that satisfy the group's own placement; `None` without node data.
    pub feasible_nodes: Option<usize>,
    /// With no such node now: who could create one on demand (`nodepool/NAME`,
    /// `declared/provisionedOnDemand`).
    pub provisionable_by: Vec<String>,
    /// With no such node now: the NodePools that could not, and why.
    pub not_provisionable_by: Vec<(String, String)>,
    /// Workloads whose pods or template enforce would refuse.
    pub would_deny: Findings,
    /// Workloads whose pods or template enforce would change (patch).
    pub would_patch: Findings,
    /// Workloads whose placed pods would fit no node (admitted, but left Pending).
    pub no_feasible_node: Findings,
    pub verdict: Verdict,
    /// Every workload of the group's namespaces with its outcome (for the reports).
    pub workloads: workloads::Ledger,
    /// Groups offering alternatives: the pods and templates by the placement they chose.
    pub alternatives: std::collections::BTreeMap<String, AlternativeCounts>,
}

/// The pods and templates of one placement of a group (an alternative, or `default`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct AlternativeCounts {
    pub pods: Counts,
    pub templates: Counts,
}

impl GroupAudit {
    pub fn new(group: String, mode: Mode) -> Self {
        Self {
            group,
            mode,
            ..Self::default()
        }
    }

    /// Counts one decided pod or template (a pod with the node it is bound to), and keeps its
    /// workload when it is a finding.
    pub fn record(
        &mut self,
        namespace: &str,
        workload: &str,
        source: Source,
        example: &str,
        node: Option<&str>,
        outcome: &Outcome,
    ) {
        let decision = AuditDecision::of(outcome.decision);
        let entry = workloads::Entry {
            namespace,
            workload,
            policy: &self.group,
            rule: workloads::Rule::Placement,
            mode: self.mode,
            pod: source == Source::Pods,
        };
        self.workloads.record_placement(&entry, outcome);
        match source {
            Source::Pods => self.pods.add(decision),
            Source::Template => self.templates.add(decision),
        }
        if let Some(alternative) = &outcome.alternative {
            let counts = self.alternatives.entry(alternative.clone()).or_default();
            match source {
                Source::Pods => counts.pods.add(decision),
                Source::Template => counts.templates.add(decision),
            }
        }
        let reason = || {
            outcome
                .message
                .as_deref()
                .unwrap_or(&outcome.summary)
                .trim_start_matches("pod-director: ")
                .to_owned()
        };
        let found = if decision == AuditDecision::WouldDeny {
            self.would_deny.add(namespace, workload, source, example, reason)
        } else if outcome.no_feasible_node && decision != AuditDecision::Skipped {
            self.no_feasible_node
                .add(namespace, workload, source, example, || outcome.summary.clone())
        } else {
            None
        };
        if let (Some(found), Some(node)) = (found, node) {
            found.add_node(node);
        }
        if decision == AuditDecision::WouldPatch
            && let Some(found) = self
                .would_patch
                .add(namespace, workload, source, example, || outcome.summary.clone())
            && let Some(node) = node
        {
            found.add_node(node);
        }
    }
}

/// The whole audit.
#[derive(Debug, Clone, PartialEq)]
pub struct Audit {
    /// One per group of the configuration (or the one `--group` names), in name order.
    pub groups: Vec<GroupAudit>,
    /// Nodes seen; `None` without node data.
    pub nodes: Option<usize>,
    /// Namespaces scanned (those selecting an audited group).
    pub namespaces_scanned: usize,
    pub pods_scanned: u64,
    pub templates_scanned: u64,
    pub elapsed: Duration,
    /// About the cluster rather than one group (namespaces selecting undefined groups).
    pub warnings: Vec<String>,
    /// One per audited group that reserves its nodes, in name order.
    pub reservations: Vec<ReservationAudit>,
    /// The in-tree plugins' rule: the annotated namespaces, who enforces them, their pods.
    pub in_tree: InTreeAudit,
}

impl Audit {
    /// An audit of these groups and reservations as a scan that decided them concludes it: the
    /// namespaces, pods and templates it counted scanned; no node data, no warning (what the
    /// reports, gauges and their tests start from; a scan's own audit is [`tally::Scan::finish`]'s).
    pub fn of(groups: Vec<GroupAudit>, reservations: Vec<ReservationAudit>) -> Self {
        Self {
            namespaces_scanned: groups.iter().map(|g| g.namespaces).sum(),
            pods_scanned: groups.iter().map(|g| g.pods.total()).sum(),
            templates_scanned: groups.iter().map(|g| g.templates.total()).sum(),
            groups,
            nodes: None,
            elapsed: Duration::ZERO,
            warnings: Vec::new(),
            reservations,
            in_tree: InTreeAudit::default(),
        }
    }

    /// Whether every audited group, every audited reservation and the in-tree rule (when its
    /// compatibility is on) is ready to enforce.
    pub fn all_ready(&self) -> bool {
        self.groups.iter().all(|g| g.verdict.ready)
            && self.reservations.iter().all(|r| r.verdict.ready)
            && (self.in_tree.mode.is_none() || self.in_tree.verdict.ready)
    }
}
