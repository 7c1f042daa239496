//! The audit as text (a table, then each group's verdict and findings) or JSON.

use std::fmt::Write as _;

use serde::Serialize;

use super::{AlternativeCounts, Audit, Counts, Finding, Findings, GroupAudit, Verdict};
use crate::placement::FEASIBILITY_SCOPE;

#[derive(Debug, Serialize)]
struct JsonAudit<'a> {
    ready: bool,
    groups: Vec<JsonGroup<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    reservations: Vec<JsonReservation<'a>>,
    scanned: JsonScanned,
    warnings: &'a [String],
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
    serde_json::to_string_pretty(&JsonAudit {
        ready: audit.all_ready(),
        groups,
        reservations,
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

/// The audit as text: one row per group, then each group's verdict, blockers,
/// warnings and the workloads behind them.
pub fn text(audit: &Audit) -> String {
    if audit.groups.is_empty() {
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
    let mut out = table(&rows);
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
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::audit::{AuditDecision, Source, Verdict};
    use crate::config::Mode;
    use crate::testing::assert_contains;

    fn audit() -> Audit {
        let mut g = GroupAudit::new("ci".to_owned(), Mode::DryRun);
        g.namespaces = 1;
        g.feasible_nodes = Some(0);
        g.pods.add(AuditDecision::WouldDeny);
        g.would_deny.add("team-a", "Deployment/web", Source::Pods, "web-1", || {
            "the pod conflicts with placement group \"ci\"".to_owned()
        });
        g.verdict = Verdict {
            ready: false,
            blockers: vec!["no node for the group".to_owned()],
            warnings: Vec::new(),
        };
        Audit {
            groups: vec![g],
            nodes: Some(2),
            namespaces_scanned: 1,
            pods_scanned: 1,
            templates_scanned: 0,
            elapsed: Duration::from_millis(1234),
            warnings: Vec::new(),
            reservations: Vec::new(),
        }
    }

    #[test]
    fn the_text_report_has_a_row_per_group_then_its_blockers_and_workloads() {
        let text = text(&audit());
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some(
                "GROUP  MODE    READY  NAMESPACES  NODES  PODS  COMPLIANT  WOULD_PATCH  WOULD_DENY  SKIPPED  TEMPLATES  \
                 TEMPLATES_WOULD_DENY"
            )
        );
        assert_eq!(
            lines.next(),
            Some(
                "ci     dryRun  no     1           0/2    1     0          0            1           0        0          0"
            )
        );
        assert_contains(&text, "\nci (dryRun): NOT READY\n  blocker: no node for the group\n");
        assert_contains(
            &text,
            "  would_deny: team-a/Deployment/web: 1 pod (e.g. web-1): the pod conflicts with",
        );
        assert_contains(&text, "scanned 1 namespaces, 1 pods, 0 workload templates in 1.2 s");
    }

    #[test]
    fn the_json_report_carries_the_verdict_counts_and_workloads() {
        let value: serde_json::Value = serde_json::from_str(&json(&audit()).expect("renders")).expect("JSON");
        assert_eq!(value["ready"], false);
        let group = &value["groups"][0];
        assert_eq!(group["group"], "ci");
        assert_eq!(group["ready"], false);
        assert_eq!(group["nodes"], serde_json::json!({"feasible": 0, "total": 2}));
        assert_eq!(group["pods"]["would_deny"], 1);
        assert_eq!(group["would_deny"][0]["workload"], "Deployment/web");
        assert_eq!(group["would_deny"][0]["source"], "pods");
        assert_eq!(value["scanned"]["seconds"], 1.234);
        assert_eq!(group["would_deny"][0].get("nodes"), None, "no node: left out");
    }

    fn would_patch() -> crate::placement::Outcome {
        use crate::placement::{Decision, Outcome, Webhook};
        Outcome {
            webhook: Webhook::Mutate,
            group: Some("ci".to_owned()),
            mode: Some(Mode::Enforce),
            alternative: None,
            decision: Decision::Patched,
            skip_reason: None,
            patch: json_patch::Patch(Vec::new()),
            message: None,
            warning: None,
            conflicts: Vec::new(),
            violations: Vec::new(),
            summary: "would set nodeSelector node-pool=ci".to_owned(),
            feasible_nodes: Some(1),
            feasible_nodes_before: Some(0),
            no_feasible_node: false,
            provisionable_by: Vec::new(),
            reservation: Vec::new(),
        }
    }

    #[test]
    fn the_json_report_lists_the_workloads_enforce_would_change_with_the_nodes_their_pods_run_on() {
        let mut g = GroupAudit::new("ci".to_owned(), Mode::Enforce);
        let outcome = would_patch();
        for (pod, node) in [
            ("web-1", Some("n2")),
            ("web-2", Some("n1")),
            ("web-3", Some("n2")),
            ("web-4", None),
        ] {
            g.record("team-a", "Deployment/web", Source::Pods, pod, node, &outcome);
        }
        g.record(
            "team-a",
            "Deployment/web",
            Source::Template,
            "Deployment/web",
            None,
            &outcome,
        );
        let mut audit = audit();
        audit.groups = vec![g];
        let value: serde_json::Value = serde_json::from_str(&json(&audit).expect("renders")).expect("JSON");
        let listed = &value["groups"][0]["would_patch"];
        assert_eq!(value["groups"][0]["pods"]["would_patch"], 4);
        assert_eq!(listed[0]["workload"], "Deployment/web");
        assert_eq!(listed[0]["source"], "pods");
        assert_eq!(listed[0]["pods"], 4);
        assert_eq!(listed[0]["reason"], "would set nodeSelector node-pool=ci");
        assert_eq!(
            listed[0]["nodes"],
            serde_json::json!(["n1", "n2"]),
            "each node once, sorted"
        );
        assert_eq!(listed[1]["source"], "template");
        assert_eq!(listed[1].get("nodes"), None, "a template runs nowhere");
        assert_eq!(value["groups"][0]["would_patch_omitted"], 0);
    }

    #[test]
    fn a_finding_names_at_most_twenty_nodes_and_counts_the_rest() {
        let mut g = GroupAudit::new("ci".to_owned(), Mode::Enforce);
        let outcome = would_patch();
        for i in 0..25 {
            let node = format!("n{i:02}");
            g.record(
                "team-a",
                "DaemonSet/agent",
                Source::Pods,
                "agent",
                Some(&node),
                &outcome,
            );
        }
        let found = g.would_patch.iter().next().expect("a finding");
        assert_eq!(found.nodes.len(), crate::audit::MAX_FINDING_NODES);
        assert_eq!(found.nodes_omitted, 5);
        assert_eq!(found.pods, 25);
    }
}
