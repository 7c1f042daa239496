//! `explain`'s text output: one block per pod, its decision, patch, conflicts and reasons.

use super::*;

pub(super) fn render_text(reports: &[Report], with_nodes: bool) -> String {
    if reports.is_empty() {
        return "no pods or pod templates found in the input\n".to_owned();
    }
    let mut headers = vec!["NAMESPACE", "NAME", "KIND", "GROUP", "MODE", "DECISION"];
    if with_nodes {
        headers.push("FEASIBLE");
    }
    let rows: Vec<Vec<String>> = reports
        .iter()
        .map(|r| {
            let mut row = vec![
                r.namespace.clone(),
                r.name.clone(),
                r.kind.clone(),
                r.group.clone().unwrap_or_else(|| "-".to_owned()),
                r.mode.map_or("-", Mode::as_str).to_owned(),
                r.decision.as_str().to_owned(),
            ];
            if with_nodes {
                row.push(match (r.feasible_nodes_before, r.feasible_nodes) {
                    (Some(before), Some(after)) if before != after => format!("{before}→{after}"),
                    (_, Some(after)) => after.to_string(),
                    _ => "-".to_owned(),
                });
            }
            row
        })
        .collect();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s: String = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}", w = *w))
            .collect::<Vec<_>>()
            .join("  ");
        s.truncate(s.trim_end().len());
        s.push('\n');
        s
    };
    let mut out = line(&headers.iter().map(|h| (*h).to_owned()).collect::<Vec<_>>());
    for row in &rows {
        out.push_str(&line(row));
    }
    for r in reports {
        out.push_str(&format!(
            "\n{}/{} ({}, {}): {}\n",
            r.namespace,
            r.name,
            r.kind,
            r.decision.as_str(),
            r.reason
        ));
        if let Some(alternative) = &r.alternative {
            out.push_str(&format!("  placement: {alternative}\n"));
        }
        for c in &r.conflicts {
            out.push_str(&format!(
                "  conflict: {}: pod has {}, group requires {} ({})\n",
                c.field,
                c.pod,
                c.group,
                c.resolution.as_str()
            ));
        }
        for v in &r.violations {
            out.push_str(&format!("  violation: {}: {}\n", v.field, v.message));
        }
        for intrusion in &r.reservation {
            out.push_str(&format!("  reservation: {intrusion}\n"));
        }
        if let Some(note) = &r.requester_dependent {
            out.push_str(&format!("  requester-dependent: {note}\n"));
        }
        if r.patch.as_array().is_some_and(|ops| !ops.is_empty()) {
            out.push_str(&format!("  patch: {}\n", r.patch));
        }
        if let Some(in_tree) = &r.in_tree {
            let mode = in_tree.mode.map_or("-", Mode::as_str);
            out.push_str(&format!(
                "  in-tree ({mode}, {}): {}\n",
                in_tree.decision.as_str(),
                in_tree.reason
            ));
            if in_tree.patch.as_array().is_some_and(|ops| !ops.is_empty()) {
                out.push_str(&format!("  in-tree patch: {}\n", in_tree.patch));
            }
        }
        if let (Some(before), Some(after)) = (r.feasible_nodes_before, r.feasible_nodes) {
            out.push_str(&format!(
                "  feasible nodes: {after} after the patch, {before} before{}\n",
                match (after, r.provisionable_by.as_slice()) {
                    (0, []) => " — no node could take the placed pod".to_owned(),
                    (0, by) => format!(" — none now, provisioned on demand by {}", by.join(", ")),
                    _ => String::new(),
                }
            ));
        }
    }
    if with_nodes {
        out.push_str(&format!("\nfeasible nodes: {FEASIBILITY_SCOPE}\n"));
    }
    out
}
