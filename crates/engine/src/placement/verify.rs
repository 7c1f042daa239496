//! Verification: does a final pod (after every mutating webhook) satisfy its
//! group? Written independently of the planner, on the same semantics, so that
//! "a planned pod always verifies" is a real check.

use k8s_openapi::api::core::v1::{NodeAffinity, NodeSelectorTerm, PreferredSchedulingTerm};

use super::affinity::{PodKind, PodTerms, and_terms, describe_term, matches_no_node, term_implies};
use super::tolerations::{describe, is_tolerated};
use super::{Pod, PodSpec, Violation};
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
    let mut out = node_selector(spec, group, ignore);
    out.extend(tolerations(spec, group));
    let Some(wanted) = &group.affinity else {
        return out;
    };
    let have = spec.affinity.as_ref();
    if let Some(node) = &wanted.node_affinity {
        let have_node = have.and_then(|a| a.node_affinity.as_ref());
        out.extend(required_node_affinity(node, have_node, ignore));
        out.extend(preferred_node_affinity(node, have_node));
    }
    for kind in PodKind::ALL {
        if let Some(want) = kind.terms(wanted) {
            let have = have.and_then(|a| kind.terms(a));
            out.extend(pod_affinity(kind, &want, have.as_ref()));
        }
    }
    out
}

fn node_selector(spec: &PodSpec, group: &Group, ignore: bool) -> Vec<Violation> {
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
    out
}

fn tolerations(spec: &PodSpec, group: &Group) -> Vec<Violation> {
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    group
        .tolerations
        .iter()
        .filter(|wanted| !is_tolerated(tolerations, wanted))
        .map(|wanted| violation("tolerations", format!("missing a toleration of {}", describe(wanted))))
        .collect()
}

/// The pod's required terms must each imply one of the group's (the pod's terms AND the group's).
fn required_node_affinity(wanted: &NodeAffinity, have: Option<&NodeAffinity>, ignore: bool) -> Vec<Violation> {
    let Some(required) = &wanted.required_during_scheduling_ignored_during_execution else {
        return Vec::new();
    };
    let group_terms = &required.node_selector_terms;
    let pod_terms: &[NodeSelectorTerm] = have
        .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref())
        .map(|r| r.node_selector_terms.as_slice())
        .unwrap_or_default();
    let group_desc = group_terms.iter().map(describe_term).collect::<Vec<_>>().join(" or ");
    let mut out = Vec::new();
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
    out
}

fn preferred_node_affinity(wanted: &NodeAffinity, have: Option<&NodeAffinity>) -> Vec<Violation> {
    let present: &[PreferredSchedulingTerm] = have
        .and_then(|n| n.preferred_during_scheduling_ignored_during_execution.as_deref())
        .unwrap_or_default();
    wanted
        .preferred_during_scheduling_ignored_during_execution
        .iter()
        .flatten()
        .filter(|w| !present.iter().any(|p| p.preference == w.preference))
        .map(|w| {
            violation(
                "affinity.nodeAffinity.preferred",
                format!("missing the preference for nodes {}", describe_term(&w.preference)),
            )
        })
        .collect()
}

fn pod_affinity(kind: PodKind, want: &PodTerms<'_>, have: Option<&PodTerms<'_>>) -> Vec<Violation> {
    let name = kind.key();
    let none = PodTerms {
        required: None,
        preferred: None,
    };
    let have = have.unwrap_or(&none);
    let required = have.missing_required(want).into_iter().map(|t| {
        violation(
            format!("affinity.{name}.required"),
            format!("missing the term on topology {}", t.topology_key),
        )
    });
    let preferred = have.missing_preferred(want).into_iter().map(|w| {
        violation(
            format!("affinity.{name}.preferred"),
            format!(
                "missing the preferred term on topology {}",
                w.pod_affinity_term.topology_key
            ),
        )
    });
    required.chain(preferred).collect()
}
