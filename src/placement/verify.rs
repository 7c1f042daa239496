//! Verification: does a final pod (after every mutating webhook) satisfy its
//! group? Written independently of the planner, on the same semantics, so that
//! "a planned pod always verifies" is a real check.

use k8s_openapi::api::core::v1::{NodeSelectorTerm, PodAffinityTerm, WeightedPodAffinityTerm};

use super::affinity::{and_terms, describe_term, matches_no_node, term_implies};
use super::tolerations::{describe, is_tolerated};
use super::{Pod, Violation};
use crate::config::{Group, OnConflict};

fn violation(field: impl Into<String>, message: impl Into<String>) -> Violation {
    Violation {
        field: field.into(),
        message: message.into(),
    }
}

/// Every way in which `pod` does not satisfy `group`; empty when it does.
/// With `onConflict: ignore`, the pod's own conflicting choices are not violations.
pub fn verify(pod: &Pod, group: &Group) -> Vec<Violation> {
    let spec = super::spec_of(pod);
    let spec = spec.as_ref();
    let ignore = group.on_conflict == OnConflict::Ignore;
    let mut out = Vec::new();

    for (key, value) in &group.node_selector {
        let field = format!("nodeSelector[{key:?}]");
        match spec.node_selector.as_ref().and_then(|s| s.get(key)) {
            None => out.push(violation(field, format!("missing; the group requires {key}={value}"))),
            Some(have) if have == value => {}
            Some(_) if ignore => {}
            Some(have) => out.push(violation(field, format!("is {have:?}; the group requires {value:?}"))),
        }
    }

    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    for wanted in &group.tolerations {
        if !is_tolerated(tolerations, wanted) {
            out.push(violation(
                "tolerations",
                format!("missing a toleration of {}", describe(wanted)),
            ));
        }
    }

    let Some(wanted) = &group.affinity else {
        return out;
    };
    let have = spec.affinity.as_ref();
    if let Some(node) = &wanted.node_affinity {
        let have_node = have.and_then(|a| a.node_affinity.as_ref());
        if let Some(required) = &node.required_during_scheduling_ignored_during_execution {
            let group_terms = &required.node_selector_terms;
            let pod_terms: &[NodeSelectorTerm] = have_node
                .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref())
                .map(|r| r.node_selector_terms.as_slice())
                .unwrap_or_default();
            let group_desc = group_terms.iter().map(describe_term).collect::<Vec<_>>().join(" or ");
            if !group_terms.is_empty() && pod_terms.is_empty() {
                out.push(violation(
                    "affinity.nodeAffinity.required",
                    format!("missing; the group requires nodes {group_desc}"),
                ));
            }
            for (i, term) in pod_terms.iter().enumerate() {
                if group_terms.is_empty() || group_terms.iter().any(|g| term_implies(term, g)) {
                    continue;
                }
                let conflicting = group_terms.iter().all(|g| matches_no_node(&and_terms(term, g)));
                if ignore && conflicting {
                    continue;
                }
                out.push(violation(
                    format!("affinity.nodeAffinity.required.nodeSelectorTerms[{i}]"),
                    format!("{} does not limit nodes to {group_desc}", describe_term(term)),
                ));
            }
        }
        for w in node
            .preferred_during_scheduling_ignored_during_execution
            .iter()
            .flatten()
        {
            let present = have_node
                .and_then(|n| n.preferred_during_scheduling_ignored_during_execution.as_ref())
                .is_some_and(|p| p.iter().any(|p| p.preference == w.preference));
            if !present {
                out.push(violation(
                    "affinity.nodeAffinity.preferred",
                    format!("missing the preference for nodes {}", describe_term(&w.preference)),
                ));
            }
        }
    }
    let pod_lists = [
        (
            "podAffinity",
            wanted.pod_affinity.as_ref().map(|a| {
                (
                    &a.required_during_scheduling_ignored_during_execution,
                    &a.preferred_during_scheduling_ignored_during_execution,
                )
            }),
            have.and_then(|a| a.pod_affinity.as_ref()).map(|a| {
                (
                    &a.required_during_scheduling_ignored_during_execution,
                    &a.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
        (
            "podAntiAffinity",
            wanted.pod_anti_affinity.as_ref().map(|a| {
                (
                    &a.required_during_scheduling_ignored_during_execution,
                    &a.preferred_during_scheduling_ignored_during_execution,
                )
            }),
            have.and_then(|a| a.pod_anti_affinity.as_ref()).map(|a| {
                (
                    &a.required_during_scheduling_ignored_during_execution,
                    &a.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
    ];
    for (name, want, have) in pod_lists {
        let Some((want_req, want_pref)) = want else { continue };
        let have_req: &[PodAffinityTerm] = have.and_then(|h| h.0.as_deref()).unwrap_or_default();
        let have_pref: &[WeightedPodAffinityTerm] = have.and_then(|h| h.1.as_deref()).unwrap_or_default();
        for t in want_req.iter().flatten() {
            if !have_req.contains(t) {
                out.push(violation(
                    format!("affinity.{name}.required"),
                    format!("missing the term on topology {}", t.topology_key),
                ));
            }
        }
        for w in want_pref.iter().flatten() {
            if !have_pref.iter().any(|p| p.pod_affinity_term == w.pod_affinity_term) {
                out.push(violation(
                    format!("affinity.{name}.preferred"),
                    format!(
                        "missing the preferred term on topology {}",
                        w.pod_affinity_term.topology_key
                    ),
                ));
            }
        }
    }
    out
}
