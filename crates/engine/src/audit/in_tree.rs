//! The in-tree plugins' rule in the audit: the namespaces whose annotations ask for
//! PodNodeSelector and PodTolerationRestriction, whether anything enforces them on this cluster,
//! and how their running pods and workload templates fare under the rule.
//!
//! A namespace carrying `scheduler.alpha.kubernetes.io/node-selector`,
//! `scheduler.alpha.kubernetes.io/defaultTolerations` or
//! `scheduler.alpha.kubernetes.io/tolerationsWhitelist` is **enforced** when pod-director's
//! compatibility (`inTreePlugins`) is in enforce, or when the API server runs the plugin each of
//! its annotations is for ([`PluginState`], told by the product: a probe or the admin's word).
//! Otherwise it is a **hole**, reported in every mode: its annotations are stored and ignored.
//! With compatibility on, a namespace under its files' defaults (a `clusterDefaultNodeSelector`,
//! default tolerations, a whitelist) is the rule's too.
//!
//! | finding | blocker or warning | why |
//! |---|---|---|
//! | an annotated namespace nothing enforces (compatibility off or in dryRun/warn, and the plugin not running) | warning, the namespace, its annotations and its violating pods named | its tenants' isolation is absent, and nothing else says so |
//! | running pods or templates the rule in enforce would refuse (`would_deny`) | **blocker**, naming the workloads | their next rollout, eviction or Job run would be refused |
//! | running pods or templates the rule would patch (`would_patch`) | counted, named | enforce changes them at their re-creation |
//! | a namespace whose group and annotations contradict | warning (of the cluster), saying what to fix | every pod pod-director places there would be refused |
//!
//! Each pod is decided as enforce would decide its re-creation (the rule's own decision,
//! [`in_tree::decide`], the same as `/mutate-in-tree` and `/validate-in-tree`); a violating pod is
//! one it would patch or refuse. The verdict counts the compatibility's readiness for enforce
//! whether it is on or not: turning it on in enforce is what would patch and refuse those pods.

pub mod probe;

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::workloads::{Entry, Ledger, Rule, WorkloadVerdict};
use super::{AuditDecision, Counts, Findings, Source, Verdict, verdict};
use crate::config::{Config, Mode};
use crate::decision::{Subject, Write};
use crate::in_tree::{self, ANNOTATIONS, MEMORY_PRESSURE_TAINT, Plugin, PluginFiles};
use crate::placement::{Namespace, Outcome, Pod};

/// The `policy` of the rule's report results and findings.
pub const POLICY: &str = "inTreePlugins";

/// The plugin named `name` (as kube-apiserver's `--enable-admission-plugins` spells it).
pub fn plugin_named(name: &str) -> Option<Plugin> {
    Plugin::ALL.into_iter().find(|p| p.as_str() == name)
}

/// Whether an in-tree plugin runs on the cluster's API server, and how the audit knows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", content = "how", rename_all = "snake_case")]
pub enum PluginState {
    /// It runs: its annotations are enforced whatever pod-director does.
    Running(String),
    /// It does not run.
    Absent(String),
    /// Not known (the probe was refused or failed): its annotations are counted as not enforced.
    Unknown(String),
    /// Not asked: no namespace carries its annotations, or pod-director's compatibility enforces them.
    NotAsked,
}

impl PluginState {
    fn running(&self) -> bool {
        matches!(self, PluginState::Running(_))
    }
}

impl fmt::Display for PluginState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PluginState::Running(how) => write!(f, "running ({how})"),
            PluginState::Absent(how) => write!(f, "not running ({how})"),
            PluginState::Unknown(why) => write!(f, "not known to run ({why})"),
            PluginState::NotAsked => f.write_str("not asked"),
        }
    }
}

/// An annotated namespace as the audit found it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AnnotatedNamespace {
    /// Its in-tree annotations, key to value.
    pub annotations: BTreeMap<String, String>,
    /// The plugins whose rules apply to it (its annotations', or the plugins' files' defaults).
    pub plugins: Vec<&'static str>,
    /// In `excludedNamespaces` (or pod-director's own): pod-director's compatibility does not decide it.
    pub excluded: bool,
    /// The plugins whose rules nothing enforces here (empty: enforced).
    pub unenforced: Vec<&'static str>,
    /// Who enforces the others: `pod-director` (compatibility in enforce), or the plugins by name.
    pub enforced_by: Vec<&'static str>,
    /// Running pods decided under the rule.
    pub pods: u64,
    /// Running pods that violate the namespace's rules: the rule would refuse them, or patch their
    /// nodeSelector or tolerations beyond the memory-pressure toleration every pod but BestEffort gets.
    pub violating_pods: u64,
    /// The node selector of its annotation (for the probe, which cannot know the API server's
    /// cluster default).
    #[serde(skip)]
    node_selector: BTreeMap<String, String>,
}

impl AnnotatedNamespace {
    /// Whether nothing enforces some of its rules.
    pub fn is_hole(&self) -> bool {
        !self.unenforced.is_empty()
    }
}

/// The audit of the in-tree rule across the cluster.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InTreeAudit {
    /// The compatibility's mode (`inTreePlugins.mode`); `None`: off.
    pub mode: Option<Mode>,
    /// The plugins' files of the compatibility (empty when off).
    files: PluginFiles,
    /// Whether each plugin runs on the API server, by name.
    pub plugins: BTreeMap<&'static str, PluginState>,
    /// The namespaces the rule applies to (they carry in-tree annotations), by name.
    pub namespaces: BTreeMap<String, AnnotatedNamespace>,
    pub pods: Counts,
    pub templates: Counts,
    /// Workloads whose pods or template the rule in enforce would refuse.
    pub would_deny: Findings,
    /// Workloads whose pods or template the rule would patch.
    pub would_patch: Findings,
    pub verdict: Verdict,
    /// Every workload of the annotated namespaces with its outcome under the rule (for the reports).
    pub workloads: Ledger,
}

impl InTreeAudit {
    /// An audit of the rule in compatibility mode `mode` (`None`: off).
    pub fn new(mode: Option<Mode>) -> Self {
        Self {
            mode,
            plugins: Plugin::ALL
                .into_iter()
                .map(|p| (p.as_str(), PluginState::NotAsked))
                .collect(),
            ..Self::default()
        }
    }

    /// The audit of `config`'s compatibility (off without `inTreePlugins`).
    pub(crate) fn of(config: &Config) -> Self {
        let section = config.in_tree_plugins.as_ref();
        Self {
            files: section.map(|s| s.files.clone()).unwrap_or_default(),
            ..Self::new(section.map(|s| s.mode))
        }
    }

    /// Whether there is anything to say: compatibility is on, or a namespace carries annotations.
    pub fn is_empty(&self) -> bool {
        self.mode.is_none() && self.namespaces.is_empty()
    }

    /// Notes namespace `name` when the rule applies to it (`excluded`: pod-director's exclusions
    /// cover it); returns whether it does.
    pub(crate) fn namespace(
        &mut self,
        name: &str,
        annotations: Option<&BTreeMap<String, String>>,
        excluded: bool,
    ) -> bool {
        let found: BTreeMap<String, String> = (annotations.into_iter().flatten())
            .filter(|(key, _)| ANNOTATIONS.contains(&key.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let no_labels = BTreeMap::new();
        let ns = Namespace::new(name, &no_labels).with_annotations(&found);
        let plugins: Vec<&'static str> = (in_tree::plugins_with_rules(&self.files, &ns).into_iter())
            .map(Plugin::as_str)
            .collect();
        if plugins.is_empty() {
            return false;
        }
        // The probe reads the annotation alone: the API server's own cluster default is not known.
        let node_selector = in_tree::namespace_node_selector(&PluginFiles::default(), &ns).unwrap_or_default();
        self.namespaces.insert(
            name.to_owned(),
            AnnotatedNamespace {
                node_selector,
                annotations: found,
                plugins,
                excluded,
                ..AnnotatedNamespace::default()
            },
        );
        true
    }

    /// Whether pod-director's compatibility enforces namespace `ns`'s rules.
    fn by_pod_director(&self, ns: &AnnotatedNamespace) -> bool {
        self.mode == Some(Mode::Enforce) && !ns.excluded
    }

    /// The plugins whose state matters, each with the first namespace (in name order) that gives
    /// its probe something to answer: those the annotated namespaces ask for, unless pod-director
    /// enforces them there itself.
    pub(crate) fn plugins_to_ask(&self) -> Vec<(Plugin, &str, &BTreeMap<String, String>)> {
        Plugin::ALL
            .into_iter()
            .filter_map(|plugin| {
                let (name, ns) = self.namespaces.iter().find(|(_, ns)| {
                    ns.plugins.contains(&plugin.as_str())
                        && !self.by_pod_director(ns)
                        && (plugin != Plugin::PodNodeSelector || !ns.node_selector.is_empty())
                })?;
                Some((plugin, name.as_str(), &ns.node_selector))
            })
            .collect()
    }

    /// Records what the product found out about `plugin`.
    pub(crate) fn plugin(&mut self, plugin: Plugin, state: PluginState) {
        self.plugins.insert(plugin.as_str(), state);
    }

    /// Decides `subject` (a running pod, a template) of `workload` in namespace `ns` under the rule,
    /// as enforce would decide its re-creation, and records it: when the rule applies there.
    pub(crate) fn decide(
        &mut self,
        config: &Config,
        ns: &Namespace<'_>,
        workload: &str,
        what: (Source, &str),
        subject: &Subject<'_>,
    ) {
        let Some(found) = self.namespaces.get(ns.name) else {
            return;
        };
        let pod = match subject {
            Subject::Pod(Write::Create(pod)) | Subject::Template(pod) | Subject::DaemonSet(Write::Create(pod)) => *pod,
            _ => return,
        };
        let annotated = Namespace::new(ns.name, ns.labels).with_annotations(&found.annotations);
        let outcome = in_tree::decide(config.in_tree_plugins.as_ref(), &annotated, pod, None);
        self.record(ns.name, workload, what, pod, &outcome);
    }

    /// Counts one pod or template (`pod`, as it is) of an annotated namespace as the rule decided
    /// it, and keeps its workload when enforce would patch or refuse it.
    pub(crate) fn record(
        &mut self,
        namespace: &str,
        workload: &str,
        (source, example): (Source, &str),
        pod: &Pod,
        outcome: &Outcome,
    ) {
        let decision = AuditDecision::of(outcome.decision);
        let entry = Entry {
            namespace,
            workload,
            policy: POLICY,
            rule: Rule::InTree,
            mode: self.mode.unwrap_or(Mode::DryRun),
            pod: source == Source::Pods,
        };
        self.workloads.record_placement(&entry, outcome);
        match source {
            Source::Pods => {
                self.pods.add(decision);
                if let Some(ns) = self.namespaces.get_mut(namespace) {
                    ns.pods += 1;
                    ns.violating_pods += u64::from(violates(decision, outcome, pod));
                }
            }
            Source::Template => self.templates.add(decision),
        }
        let reason = || {
            outcome
                .message
                .as_deref()
                .unwrap_or(&outcome.summary)
                .trim_start_matches("pod-director: ")
                .to_owned()
        };
        match decision {
            AuditDecision::WouldDeny => {
                self.would_deny.add(namespace, workload, source, example, reason);
            }
            AuditDecision::WouldPatch => {
                self.would_patch
                    .add(namespace, workload, source, example, || outcome.summary.clone());
            }
            _ => {}
        }
    }

    /// Who enforces each namespace's rules, the holes (each a result of its namespace in the
    /// ledger), and the verdict.
    pub(crate) fn conclude(&mut self) {
        let mode = self.mode;
        let plugins = &self.plugins;
        for (name, ns) in &mut self.namespaces {
            ns.unenforced.clear();
            ns.enforced_by.clear();
            for plugin in ns.plugins.clone() {
                if mode == Some(Mode::Enforce) && !ns.excluded {
                    push_once(&mut ns.enforced_by, "pod-director");
                } else if plugins.get(plugin).is_some_and(PluginState::running) {
                    push_once(&mut ns.enforced_by, plugin);
                } else {
                    ns.unenforced.push(plugin);
                }
            }
            let workload = format!("Namespace/{name}");
            let entry = Entry {
                namespace: name,
                workload: &workload,
                policy: POLICY,
                rule: Rule::InTree,
                mode: mode.unwrap_or(Mode::DryRun),
                pod: false,
            };
            let (verdict, message) = if ns.is_hole() {
                (WorkloadVerdict::Unenforced, hole_message(mode, plugins, ns))
            } else {
                (
                    WorkloadVerdict::Compliant,
                    format!(
                        "its in-tree annotations are enforced by {}",
                        ns.enforced_by.join(" and ")
                    ),
                )
            };
            self.workloads.record(&entry, verdict, &message, None);
        }
        self.verdict = self.verdict();
    }

    fn verdict(&self) -> Verdict {
        let mut blockers = Vec::new();
        let mut warnings = Vec::new();
        if self.pods.would_deny + self.templates.would_deny > 0 {
            blockers.push(format!(
                "{} would be refused by the in-tree rule in enforce: {}",
                verdict::counted(self.pods.would_deny, self.templates.would_deny),
                verdict::named(&self.would_deny)
            ));
        }
        let holes: Vec<&str> = (self.namespaces.iter())
            .filter(|(_, ns)| ns.is_hole())
            .map(|(name, _)| name.as_str())
            .collect();
        if !holes.is_empty() {
            let violating: u64 = (self.namespaces.values().filter(|ns| ns.is_hole()))
                .map(|ns| ns.violating_pods)
                .sum();
            let one = holes.len() == 1;
            warnings.push(format!(
                "{} namespace{} in-tree annotations that no admission plugin enforces on this cluster ({}): {}; \
                 {violating} running pod{} there {}",
                holes.len(),
                if one { " carries" } else { "s carry" },
                match self.mode {
                    None => "inTreePlugins is off".to_owned(),
                    Some(mode) => format!("inTreePlugins is in {mode}"),
                },
                holes.join(", "),
                plural(violating),
                if violating == 1 {
                    "violates them"
                } else {
                    "violate them"
                },
            ));
        }
        if self.mode.is_some() && self.namespaces.is_empty() {
            warnings
                .push("no namespace carries in-tree annotations: enforcing the rule changes nothing yet".to_owned());
        }
        Verdict {
            ready: blockers.is_empty(),
            blockers,
            warnings,
        }
    }

    /// The readiness line: `ready for enforce: N running pods would be patched, M refused; …`.
    pub(crate) fn headline(&self) -> String {
        format!(
            "{}: {} running pod{} would be patched, {} refused; {} workload template{} would be patched, {} refused",
            if self.verdict.ready {
                "ready for enforce"
            } else {
                "NOT READY for enforce"
            },
            self.pods.would_patch,
            plural(self.pods.would_patch),
            self.pods.would_deny,
            self.templates.would_patch,
            plural(self.templates.would_patch),
            self.templates.would_deny,
        )
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn push_once(list: &mut Vec<&'static str>, item: &'static str) {
    if !list.contains(&item) {
        list.push(item);
    }
}

/// Whether a pod the rule decided as `decision` violates its namespace's rules: refused, or
/// patched beyond the memory-pressure toleration PodTolerationRestriction gives every pod that is
/// not BestEffort (a pod admitted without the plugin lacks it, whatever its namespace says).
fn violates(decision: AuditDecision, outcome: &Outcome, pod: &Pod) -> bool {
    if decision != AuditDecision::WouldPatch {
        return decision == AuditDecision::WouldDeny;
    }
    let own = |t: &serde_json::Value| t.get("key").and_then(serde_json::Value::as_str) != Some(MEMORY_PRESSURE_TAINT);
    let had: Vec<serde_json::Value> = (pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_ref())
        .into_iter()
        .flatten())
    .filter_map(|t| serde_json::to_value(t).ok())
    .filter(own)
    .collect();
    outcome.patch.0.iter().any(|op| match op {
        json_patch::PatchOperation::Add(add) if add.path.as_str() == "/spec/tolerations" => {
            let kept: Vec<&serde_json::Value> = add.value.as_array().into_iter().flatten().filter(|t| own(t)).collect();
            kept.len() != had.len() || kept.iter().zip(&had).any(|(a, b)| *a != b)
        }
        _ => true,
    })
}

/// What a hole's result and Event say: which plugins' rules nothing enforces, why, and what to do.
fn hole_message(mode: Option<Mode>, plugins: &BTreeMap<&'static str, PluginState>, ns: &AnnotatedNamespace) -> String {
    let why: Vec<String> = (ns.unenforced.iter())
        .map(|p| format!("{p} {}", plugins.get(p).unwrap_or(&PluginState::NotAsked)))
        .collect();
    let compatibility = match (mode, ns.excluded) {
        (_, true) => "the namespace is excluded from pod-director".to_owned(),
        (None, _) => "pod-director's inTreePlugins is off".to_owned(),
        (Some(mode), _) => format!("pod-director's inTreePlugins is in {mode}"),
    };
    let annotations: Vec<String> = ns.annotations.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!(
        "no admission plugin enforces this namespace's in-tree annotations ({}) on this cluster ({compatibility}; {}): \
         {} running pod{} violate them; set inTreePlugins.mode: enforce once the audit finds it ready",
        annotations.join(" "),
        why.join("; "),
        ns.violating_pods,
        plural(ns.violating_pods),
    )
}

#[cfg(test)]
mod tests;
