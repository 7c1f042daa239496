//! What each namespace's OpenReports `Report` says, built from the audit's outcomes per workload
//! ([`Ledger`]), written by the product (`src/cluster/reports.rs`): pure — no client, no clock (no result carries a timestamp, so an unchanged
//! cluster gives a byte-identical report).
//!
//! | audit verdict | `rule` | `result` |
//! |---|---|---|
//! | compliant | placement | pass |
//! | would_patch | placement | warn |
//! | would_deny | placement | fail |
//! | skipped (a skip rule applies) | placement | skip |
//! | fits no node once placed | feasibility | fail |
//! | intrudes on another group's reservation | reservation | fail |
//! | runs on a reserved pool's node without intruding by a toleration | reservation | warn |
//! | the namespace label guard enforces the namespace's group | namespace-guard | pass |
//! | … it does not (dryRun or warn) | namespace-guard | warn |
//! | the in-tree rule would change nothing (a workload of an annotated namespace) | in-tree | pass |
//! | … would patch its pods / would refuse them | in-tree | warn / fail |
//! | the namespace's in-tree annotations are enforced (compatibility in enforce, or the plugin runs) | in-tree | pass |
//! | … no admission plugin enforces them (a hole, in every mode) | in-tree | fail |
//!
//! A namespace that carries in-tree annotations gets a report whether or not it selects a group
//! (the in-tree results' `policy` is `inTreePlugins`).
//!
//! `scored` is true only for results of a group (or reservation, or guard) in `enforce`: in
//! dryRun and warn a result says what enforce *would* do; `properties.mode` names the mode.
//! Results are bounded by `maxResults`: the worst are kept (fail, then warn, then skip, then
//! pass, each by workload name); the summary counts every result, kept or not, and the
//! annotation [`OMITTED_ANNOTATION`] says how many were left out.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use super::workloads::{Ledger, NamespaceOutcomes, Rule, WorkloadOutcome, WorkloadVerdict};
use crate::compile::{MANAGED_BY, MANAGED_BY_LABEL};
use crate::config::{Config, Mode};

/// `apiVersion` of the reports.
pub const API_GROUP: &str = "openreports.io";
pub const API_VERSION: &str = "openreports.io/v1alpha1";
/// The `source` of every report and result.
pub const SOURCE: &str = "pod-director";
/// The digest of the content written, compared at each audit instead of the object itself.
pub const DIGEST_ANNOTATION: &str = "pod-director/report-digest";
/// Results left out by `maxResults`.
pub const OMITTED_ANNOTATION: &str = "pod-director/results-omitted";
/// Default `maxResults` per report.
pub const DEFAULT_MAX_RESULTS: usize = 100;
/// Longest property value (bytes).
const MAX_PROPERTY_BYTES: usize = 256;

/// How reports are named and bounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The name of the report in each namespace.
    pub name: String,
    /// Most results per report.
    pub max_results: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            name: "pod-director".to_owned(),
            max_results: DEFAULT_MAX_RESULTS,
        }
    }
}

/// The `result` of a report result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ResultStatus {
    Pass,
    Skip,
    Warn,
    Fail,
}

/// The mapping of the module's table.
pub fn outcome(rule: Rule, verdict: WorkloadVerdict) -> ResultStatus {
    match (rule, verdict) {
        (_, WorkloadVerdict::Compliant) => ResultStatus::Pass,
        (_, WorkloadVerdict::Skipped) => ResultStatus::Skip,
        (_, WorkloadVerdict::WouldPatch | WorkloadVerdict::RunsOnPool) => ResultStatus::Warn,
        (_, WorkloadVerdict::WouldDeny | WorkloadVerdict::NoFeasibleNode | WorkloadVerdict::Unenforced) => {
            ResultStatus::Fail
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
struct ObjectRef {
    api_version: String,
    kind: String,
    name: String,
    namespace: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
struct ReportResult {
    source: &'static str,
    policy: String,
    rule: &'static str,
    result: ResultStatus,
    scored: bool,
    message: String,
    properties: BTreeMap<&'static str, String>,
    resources: Vec<ObjectRef>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub pass: u64,
    pub fail: u64,
    pub warn: u64,
    pub error: u64,
    pub skip: u64,
}

impl Summary {
    fn add(&mut self, outcome: ResultStatus) {
        match outcome {
            ResultStatus::Pass => self.pass += 1,
            ResultStatus::Fail => self.fail += 1,
            ResultStatus::Warn => self.warn += 1,
            ResultStatus::Skip => self.skip += 1,
        }
    }
}

/// The report wanted in one namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub namespace: String,
    /// The whole object to apply (apiVersion, kind, metadata with labels and the digest annotation, content).
    pub object: Value,
    /// The digest of its content (also in the object's [`DIGEST_ANNOTATION`]).
    pub digest: String,
    pub summary: Summary,
    /// Results left out by `maxResults`.
    pub omitted: u64,
}

/// `apps/v1` for the apps workloads, `batch/v1` for Jobs and CronJobs, `v1` for pods and namespaces.
fn api_version_of(kind: &str) -> &'static str {
    match kind {
        "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet" => "apps/v1",
        "Job" | "CronJob" => "batch/v1",
        _ => "v1",
    }
}

fn property(text: &str) -> String {
    crate::placement::truncate_bytes(text, MAX_PROPERTY_BYTES)
}

fn result_of(namespace: &str, workload: &str, o: &WorkloadOutcome) -> ReportResult {
    let (kind, name) = workload.split_once('/').unwrap_or(("Pod", workload));
    // A Namespace is cluster-scoped: its reference names no namespace.
    let scope = if kind == "Namespace" { "" } else { namespace };
    let mut properties = BTreeMap::from([
        ("decision", o.verdict.as_str().to_owned()),
        ("mode", o.mode.as_str().to_owned()),
    ]);
    if o.pods > 0 {
        properties.insert("pods", o.pods.to_string());
    }
    if o.templates > 0 {
        properties.insert("template", "true".to_owned());
    }
    if let Some(patch) = &o.patch {
        properties.insert("patch.ops", patch.ops.to_string());
        properties.insert("patch.paths", property(&patch.paths.join(",")));
    }
    let message = if o.message.is_empty() {
        o.verdict.as_str().replace('_', " ")
    } else {
        o.message.to_string()
    };
    ReportResult {
        source: SOURCE,
        policy: o.policy.clone(),
        rule: o.rule.as_str(),
        result: outcome(o.rule, o.verdict),
        scored: o.mode == Mode::Enforce,
        message,
        properties,
        resources: vec![ObjectRef {
            api_version: api_version_of(kind).to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
            namespace: scope.to_owned(),
        }],
    }
}

/// The namespace guard's result for a namespace of `group`.
fn guard_result(config: &Config, namespace: &str, group: &str) -> ReportResult {
    let mode = crate::namespace_guard::mode_of_group(config, Some(group));
    let (result, message) = if mode == Mode::Enforce {
        (
            ResultStatus::Pass,
            format!("the namespace label guard keeps this namespace in group {group}"),
        )
    } else {
        (
            ResultStatus::Warn,
            format!(
                "the namespace label guard is in {} for group {group}: a tenant can still relabel this namespace out \
                 of the group",
                mode.as_str()
            ),
        )
    };
    ReportResult {
        source: SOURCE,
        policy: group.to_owned(),
        rule: Rule::NamespaceGuard.as_str(),
        result,
        scored: mode == Mode::Enforce,
        message,
        properties: BTreeMap::from([("mode", mode.as_str().to_owned())]),
        resources: vec![ObjectRef {
            api_version: "v1".to_owned(),
            kind: "Namespace".to_owned(),
            name: namespace.to_owned(),
            namespace: String::new(),
        }],
    }
}

/// The reports wanted: one per namespace of `ledger` that selects a group or carries in-tree
/// annotations.
pub fn desired(ledger: &Ledger, config: &Config, settings: &Settings) -> BTreeMap<String, Report> {
    ledger
        .namespaces
        .iter()
        .filter(|(_, outcomes)| outcomes.reported())
        .map(|(namespace, outcomes)| {
            let group = outcomes.group.as_deref();
            (namespace.clone(), report(namespace, group, outcomes, config, settings))
        })
        .collect()
}

/// The report of one namespace (of `group`, if it selects one).
pub fn report(
    namespace: &str,
    group: Option<&str>,
    outcomes: &NamespaceOutcomes,
    config: &Config,
    settings: &Settings,
) -> Report {
    let mut all: Vec<ReportResult> = outcomes
        .entries
        .iter()
        .map(|((workload, _, _), o)| result_of(namespace, workload, o))
        .collect();
    if let Some(group) = group {
        all.push(guard_result(config, namespace, group));
    }
    let mut summary = Summary::default();
    for r in &all {
        summary.add(r.result);
    }
    // Keep the worst (stable: the ledger is in workload order), then show them in workload order.
    let key = |r: &ReportResult| {
        (
            r.resources.first().map(|o| (o.kind.clone(), o.name.clone())),
            r.policy.clone(),
            r.rule,
        )
    };
    all.sort_by(|a, b| b.result.cmp(&a.result).then_with(|| key(a).cmp(&key(b))));
    let omitted = all.len().saturating_sub(settings.max_results) as u64 + outcomes.omitted;
    all.truncate(settings.max_results);
    all.sort_by_key(key);
    let content = json!({
        "source": SOURCE,
        "scope": {"apiVersion": "v1", "kind": "Namespace", "name": namespace},
        "configuration": {"limits": {"maxResults": settings.max_results}},
        "summary": summary,
        "results": all,
    });
    let digest = digest(&content, omitted);
    let mut object = json!({
        "apiVersion": API_VERSION,
        "kind": "Report",
        "metadata": {
            "name": settings.name,
            "namespace": namespace,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY},
            "annotations": {DIGEST_ANNOTATION: digest, OMITTED_ANNOTATION: omitted.to_string()},
        },
    });
    if let (Some(o), Value::Object(c)) = (object.as_object_mut(), content) {
        o.extend(c);
    }
    Report {
        namespace: namespace.to_owned(),
        object,
        digest,
        summary,
        omitted,
    }
}

/// SHA-256 of the canonical content (serde_json writes the same value as the same bytes: keys
/// in the fixed order of the types above and sorted maps), hex.
fn digest(content: &Value, omitted: u64) -> String {
    let mut hasher = Sha256::new();
    hasher.update(serde_json::to_vec(content).unwrap_or_default());
    hasher.update(omitted.to_le_bytes());
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests;
