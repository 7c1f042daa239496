//! The audit as text (a table, then each group's verdict and findings) or JSON.

use std::fmt::Write as _;

use serde::Serialize;

use std::collections::BTreeMap;

use super::in_tree::{AnnotatedNamespace, InTreeAudit, PluginState};
use super::{AlternativeCounts, Audit, Counts, Finding, Findings, GroupAudit, Verdict};
use crate::config::Mode;
use crate::placement::FEASIBILITY_SCOPE;

#[derive(Debug, Serialize)]
struct JsonAudit<'a> {
    ready: bool,
    groups: Vec<JsonGroup<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    reservations: Vec<JsonReservation<'a>>,
    /// The in-tree plugins' rule (left out when compatibility is off and no namespace carries annotations).
    #[serde(skip_serializing_if = "Option::is_none")]
    in_tree: Option<JsonInTree<'a>>,
    scanned: JsonScanned,
    warnings: &'a [String],
}

/// The in-tree plugins' rule: the plugins, the annotated namespaces (holes among them), the pods.
#[derive(Debug, Serialize)]
struct JsonInTree<'a> {
    /// `off`, or the compatibility's mode.
    mode: &'a str,
    #[serde(flatten)]
    verdict: &'a Verdict,
    plugins: BTreeMap<&'static str, &'a PluginState>,
    namespaces: Vec<JsonAnnotated<'a>>,
    pods: Counts,
    templates: Counts,
    would_deny: Vec<&'a Finding>,
    would_deny_omitted: u64,
    would_patch: Vec<&'a Finding>,
    would_patch_omitted: u64,
}

#[derive(Debug, Serialize)]
struct JsonAnnotated<'a> {
    namespace: &'a str,
    hole: bool,
    #[serde(flatten)]
    found: &'a AnnotatedNamespace,
}

#[derive(Debug, Serialize)]
struct JsonGroup<'a> {
    group: &'a str,
    mode: &'a str,
    #[serde(flatten)]
    verdict: &'a Verdict,
    namespaces: usize,
    nodes: JsonNodes<'a>,
    pods: Counts,
    templates: Counts,
    /// Groups offering alternatives: the counts by the placement chosen.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    alternatives: &'a std::collections::BTreeMap<String, AlternativeCounts>,
    would_deny: Vec<&'a Finding>,
    would_deny_omitted: u64,
    would_patch: Vec<&'a Finding>,
    would_patch_omitted: u64,
    no_feasible_node: Vec<&'a Finding>,
    no_feasible_node_omitted: u64,
}

/// One reservation: its verdict and the intruders behind it.
#[derive(Debug, Serialize)]
struct JsonReservation<'a> {
    group: &'a str,
    mode: &'a str,
    #[serde(flatten)]
    verdict: &'a Verdict,
    /// Nodes of the pool; null without node data.
    pool_nodes: Option<usize>,
    would_deny: Vec<&'a Finding>,
    would_deny_omitted: u64,
    /// Intruding bare pods whose creator the audit cannot know (not blockers).
    requester_unknown: Vec<&'a Finding>,
    requester_unknown_omitted: u64,
    running: Vec<&'a Finding>,
    running_omitted: u64,
    exempt: u64,
}

#[derive(Debug, Serialize)]
struct JsonNodes<'a> {
    /// Nodes satisfying the group's own placement.
    feasible: Option<usize>,
    total: Option<usize>,
    /// With no feasible node: who could create one on demand.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    provisionable_by: &'a [String],
    /// With no feasible node: the NodePools that could not, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    not_provisionable_by: Vec<JsonUnprovisionable<'a>>,
}

#[derive(Debug, Serialize)]
struct JsonUnprovisionable<'a> {
    provisioner: &'a str,
    reason: &'a str,
}

#[derive(Debug, Serialize)]
struct JsonScanned {
    namespaces: usize,
    pods: u64,
    templates: u64,
    seconds: f64,
}

/// The audit as pretty-printed JSON.
pub fn json(audit: &Audit) -> Result<String, serde_json::Error> {
    let groups = audit
        .groups
        .iter()
        .map(|g| JsonGroup {
            group: &g.group,
            mode: g.mode.as_str(),
            verdict: &g.verdict,
            namespaces: g.namespaces,
            nodes: JsonNodes {
                feasible: g.feasible_nodes,
                total: audit.nodes,
                provisionable_by: &g.provisionable_by,
                not_provisionable_by: g
                    .not_provisionable_by
                    .iter()
                    .map(|(provisioner, reason)| JsonUnprovisionable { provisioner, reason })
                    .collect(),
            },
            pods: g.pods,
            templates: g.templates,
            alternatives: &g.alternatives,
            would_deny: g.would_deny.iter().collect(),
            would_deny_omitted: g.would_deny.omitted,
            would_patch: g.would_patch.iter().collect(),
            would_patch_omitted: g.would_patch.omitted,
            no_feasible_node: g.no_feasible_node.iter().collect(),
            no_feasible_node_omitted: g.no_feasible_node.omitted,
        })
        .collect();
    let reservations = audit
        .reservations
        .iter()
        .map(|r| JsonReservation {
            group: &r.group,
            mode: r.mode.as_str(),
            verdict: &r.verdict,
            pool_nodes: r.pool_nodes,
            would_deny: r.would_deny.iter().collect(),
            would_deny_omitted: r.would_deny.omitted,
            requester_unknown: r.requester_unknown.iter().collect(),
            requester_unknown_omitted: r.requester_unknown.omitted,
            running: r.running.iter().collect(),
            running_omitted: r.running.omitted,
            exempt: r.exempt,
        })
        .collect();
    let in_tree = &audit.in_tree;
    let in_tree = (!in_tree.is_empty()).then(|| JsonInTree {
        mode: in_tree.mode.map_or("off", Mode::as_str),
        verdict: &in_tree.verdict,
        plugins: in_tree.plugins.iter().map(|(p, s)| (*p, s)).collect(),
        namespaces: (in_tree.namespaces.iter())
            .map(|(namespace, found)| JsonAnnotated {
                namespace,
                hole: found.is_hole(),
                found,
            })
            .collect(),
        pods: in_tree.pods,
        templates: in_tree.templates,
        would_deny: in_tree.would_deny.iter().collect(),
        would_deny_omitted: in_tree.would_deny.omitted,
        would_patch: in_tree.would_patch.iter().collect(),
        would_patch_omitted: in_tree.would_patch.omitted,
    });
    serde_json::to_string_pretty(&JsonAudit {
        ready: audit.all_ready(),
        groups,
        reservations,
        in_tree,
        scanned: JsonScanned {
            namespaces: audit.namespaces_scanned,
            pods: audit.pods_scanned,
            templates: audit.templates_scanned,
            seconds: (audit.elapsed.as_secs_f64() * 1000.0).round() / 1000.0,
        },
        warnings: &audit.warnings,
    })
}

fn table(rows: &[Vec<String>]) -> String {
    let mut widths = vec![0usize; rows.first().map_or(0, Vec::len)];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}", w = *w))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

fn findings(out: &mut String, label: &str, findings: &Findings) {
    for f in findings.iter() {
        let _ = match f.source {
            super::Source::Pods => writeln!(
                out,
                "  {label}: {}/{}: {} pod{} (e.g. {}): {}",
                f.namespace,
                f.workload,
                f.pods,
                if f.pods == 1 { "" } else { "s" },
                f.example,
                f.reason
            ),
            super::Source::Template => {
                writeln!(out, "  {label}: {}/{}: template: {}", f.namespace, f.workload, f.reason)
            }
        };
    }
    if findings.omitted > 0 {
        let _ = writeln!(
            out,
            "  {label}: {} more pods and templates (workloads beyond the first {})",
            findings.omitted,
            super::MAX_FINDINGS
        );
    }
}

fn nodes(group: &GroupAudit, total: Option<usize>) -> String {
    match (group.feasible_nodes, total) {
        (Some(feasible), Some(total)) => format!("{feasible}/{total}"),
        _ => "-".to_owned(),
    }
}

/// `title: ready to enforce` (or `NOT READY`) after a blank line, then the blockers and warnings.
fn verdict(out: &mut String, title: &str, verdict: &Verdict) {
    let state = if verdict.ready { "ready to enforce" } else { "NOT READY" };
    let _ = writeln!(out, "\n{title}: {state}");
    for blocker in &verdict.blockers {
        let _ = writeln!(out, "  blocker: {blocker}");
    }
    for warning in &verdict.warnings {
        let _ = writeln!(out, "  warning: {warning}");
    }
}

/// The in-tree rule's section: its readiness for enforce, the plugins, each annotated namespace
/// (a hole or who enforces it), the workloads it would refuse and patch.
fn in_tree_text(out: &mut String, in_tree: &InTreeAudit) {
    if in_tree.is_empty() {
        return;
    }
    let mode = in_tree.mode.map_or("off", Mode::as_str);
    let _ = writeln!(out, "\ninTreePlugins ({mode}): {}", in_tree.headline());
    for blocker in &in_tree.verdict.blockers {
        let _ = writeln!(out, "  blocker: {blocker}");
    }
    for warning in &in_tree.verdict.warnings {
        let _ = writeln!(out, "  warning: {warning}");
    }
    for (plugin, state) in &in_tree.plugins {
        let _ = writeln!(out, "  plugin {plugin}: {state}");
    }
    for (name, ns) in &in_tree.namespaces {
        let annotations: Vec<String> = ns.annotations.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let annotations = annotations.join(" ");
        let pods = format!(
            "{} of {} running pod{} violate{}",
            ns.violating_pods,
            ns.pods,
            if ns.pods == 1 { "" } else { "s" },
            if ns.violating_pods == 1 { "s" } else { "" }
        );
        let _ = if ns.is_hole() {
            writeln!(out, "  hole: {name}: {annotations}: enforced by nothing; {pods}")
        } else {
            writeln!(
                out,
                "  enforced: {name}: {annotations}: by {}; {pods}",
                ns.enforced_by.join(" and ")
            )
        };
    }
    findings(out, "would_deny", &in_tree.would_deny);
    findings(out, "would_patch", &in_tree.would_patch);
}

/// The audit as text: one row per group, then each group's verdict, blockers,
/// warnings and the workloads behind them.
pub fn text(audit: &Audit) -> String {
    if audit.groups.is_empty() && audit.in_tree.is_empty() {
        return "no groups in the configuration: nothing to audit\n".to_owned();
    }
    let mut rows = vec![
        [
            "GROUP",
            "MODE",
            "READY",
            "NAMESPACES",
            "NODES",
            "PODS",
            "COMPLIANT",
            "WOULD_PATCH",
            "WOULD_DENY",
            "SKIPPED",
            "TEMPLATES",
            "TEMPLATES_WOULD_DENY",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    for g in &audit.groups {
        rows.push(vec![
            g.group.clone(),
            g.mode.as_str().to_owned(),
            if g.verdict.ready { "yes" } else { "no" }.to_owned(),
            g.namespaces.to_string(),
            nodes(g, audit.nodes),
            g.pods.total().to_string(),
            g.pods.compliant.to_string(),
            g.pods.would_patch.to_string(),
            g.pods.would_deny.to_string(),
            g.pods.skipped.to_string(),
            g.templates.total().to_string(),
            g.templates.would_deny.to_string(),
        ]);
    }
    let mut out = if audit.groups.is_empty() {
        "no groups in the configuration\n".to_owned()
    } else {
        table(&rows)
    };
    for g in &audit.groups {
        verdict(&mut out, &format!("{} ({})", g.group, g.mode.as_str()), &g.verdict);
        for (name, c) in &g.alternatives {
            let _ = writeln!(
                out,
                "  placement {name}: {} pods ({} compliant, {} would_patch, {} would_deny), {} templates ({} would_deny)",
                c.pods.total(),
                c.pods.compliant,
                c.pods.would_patch,
                c.pods.would_deny,
                c.templates.total(),
                c.templates.would_deny
            );
        }
        findings(&mut out, "would_deny", &g.would_deny);
        findings(&mut out, "no feasible node", &g.no_feasible_node);
    }
    for r in &audit.reservations {
        let pool = r.pool_nodes.map_or_else(|| "-".to_owned(), |n| n.to_string());
        let title = format!("reservation {} ({}, pool nodes: {pool})", r.group, r.mode.as_str());
        verdict(&mut out, &title, &r.verdict);
        findings(&mut out, "would_deny", &r.would_deny);
        findings(&mut out, "requester unknown", &r.requester_unknown);
        findings(&mut out, "running intruder", &r.running);
        if r.exempt > 0 {
            let _ = writeln!(
                out,
                "  exempt: {} intruding pods and templates (requester allowed)",
                r.exempt
            );
        }
    }
    in_tree_text(&mut out, &audit.in_tree);
    for warning in &audit.warnings {
        let _ = writeln!(out, "\nwarning: {warning}");
    }
    let _ = writeln!(
        out,
        "\nscanned {} namespaces, {} pods, {} workload templates in {:.1} s; decided as enforce would decide their \
         re-creation now; nodes: {FEASIBILITY_SCOPE}",
        audit.namespaces_scanned,
        audit.pods_scanned,
        audit.templates_scanned,
        audit.elapsed.as_secs_f64()
    );
    out
}

#[cfg(test)]
mod tests;
