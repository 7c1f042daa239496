//! Node selector semantics: implication between requirements and terms,
//! AND-ing a group's term into a pod's term, and detecting terms no node can
//! satisfy. Terms of a `nodeSelectorTerms` list are ORed; the requirements of a
//! term (`matchExpressions` and `matchFields`) are ANDed. A term without any
//! requirement (`{}`, `{matchExpressions: []}`) matches **no** node (core/v1:
//! "a null or empty node selector term matches no objects"), so it is not the
//! neutral element of AND: `{} AND g` matches nothing, never what `g` matches.

use k8s_openapi::api::core::v1::{
    Affinity, NodeSelectorRequirement, NodeSelectorTerm, PodAffinityTerm, WeightedPodAffinityTerm,
};

/// podAffinity or podAntiAffinity: k8s-openapi types them apart, but the engine treats
/// them alike (the group's terms must be present; nothing is ever removed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PodKind {
    Affinity,
    AntiAffinity,
}

/// The terms of one [`PodKind`] of an affinity.
#[derive(Clone, Copy)]
pub(crate) struct PodTerms<'a> {
    pub required: Option<&'a Vec<PodAffinityTerm>>,
    pub preferred: Option<&'a Vec<WeightedPodAffinityTerm>>,
}

impl PodKind {
    pub(super) const ALL: [PodKind; 2] = [PodKind::Affinity, PodKind::AntiAffinity];

    /// The key under `spec.affinity`.
    pub(super) fn key(self) -> &'static str {
        match self {
            PodKind::Affinity => "podAffinity",
            PodKind::AntiAffinity => "podAntiAffinity",
        }
    }

    /// How reasons name it.
    pub(super) fn name(self) -> &'static str {
        match self {
            PodKind::Affinity => "pod affinity",
            PodKind::AntiAffinity => "pod anti-affinity",
        }
    }

    /// This kind's terms in `affinity`, when it has the kind at all.
    pub(super) fn terms(self, affinity: &Affinity) -> Option<PodTerms<'_>> {
        match self {
            PodKind::Affinity => affinity.pod_affinity.as_ref().map(|a| PodTerms {
                required: a.required_during_scheduling_ignored_during_execution.as_ref(),
                preferred: a.preferred_during_scheduling_ignored_during_execution.as_ref(),
            }),
            PodKind::AntiAffinity => affinity.pod_anti_affinity.as_ref().map(|a| PodTerms {
                required: a.required_during_scheduling_ignored_during_execution.as_ref(),
                preferred: a.preferred_during_scheduling_ignored_during_execution.as_ref(),
            }),
        }
    }

    /// This kind of `affinity` as JSON (`null` when absent).
    pub(super) fn json(self, affinity: &Affinity) -> serde_json::Value {
        let value = match self {
            PodKind::Affinity => affinity.pod_affinity.as_ref().map(serde_json::to_value),
            PodKind::AntiAffinity => affinity.pod_anti_affinity.as_ref().map(serde_json::to_value),
        };
        value.and_then(Result::ok).unwrap_or_default()
    }
}

impl<'a> PodTerms<'a> {
    /// The required terms, none when absent.
    pub(super) fn required(&self) -> &'a [PodAffinityTerm] {
        self.required.map(Vec::as_slice).unwrap_or_default()
    }

    /// The preferred terms, none when absent.
    pub(super) fn preferred(&self) -> &'a [WeightedPodAffinityTerm] {
        self.preferred.map(Vec::as_slice).unwrap_or_default()
    }

    /// The group's required terms `self` lacks.
    pub(crate) fn missing_required<'w>(&self, wanted: &PodTerms<'w>) -> Vec<&'w PodAffinityTerm> {
        let present = self.required();
        wanted.required().iter().filter(|t| !present.contains(t)).collect()
    }

    /// The group's preferred terms `self` lacks (whatever their weight).
    pub(crate) fn missing_preferred<'w>(&self, wanted: &PodTerms<'w>) -> Vec<&'w WeightedPodAffinityTerm> {
        let present = self.preferred();
        wanted
            .preferred()
            .iter()
            .filter(|w| !present.iter().any(|p| p.pod_affinity_term == w.pod_affinity_term))
            .collect()
    }
}

/// The requirement's values. A requirement has a few values, so membership is a scan:
/// these checks run on every review and build no set.
fn values(r: &NodeSelectorRequirement) -> &[String] {
    r.values.as_deref().unwrap_or_default()
}

fn has(values: &[String], value: &str) -> bool {
    values.iter().any(|v| v == value)
}

fn int_value(r: &NodeSelectorRequirement) -> Option<i64> {
    values(r).first()?.parse().ok()
}

/// Whether every node satisfying `p` also satisfies `g` (same key only).
pub(crate) fn requirement_implies(p: &NodeSelectorRequirement, g: &NodeSelectorRequirement) -> bool {
    if p.key != g.key {
        return false;
    }
    if p == g {
        return true;
    }
    let (pv, gv) = (values(p), values(g));
    let all_ints = |test: &dyn Fn(i64) -> bool| !pv.is_empty() && pv.iter().all(|v| v.parse::<i64>().is_ok_and(test));
    match (p.operator.as_str(), g.operator.as_str()) {
        ("In", "In") => !pv.is_empty() && pv.iter().all(|v| has(gv, v)),
        ("In", "NotIn") => !pv.iter().any(|v| has(gv, v)),
        ("NotIn", "NotIn") => gv.iter().all(|v| has(pv, v)),
        ("DoesNotExist", "NotIn") => true,
        ("In" | "Exists" | "Gt" | "Lt", "Exists") => true,
        ("DoesNotExist", "DoesNotExist") => true,
        ("Gt", "Gt") => matches!((int_value(p), int_value(g)), (Some(a), Some(b)) if a >= b),
        ("Lt", "Lt") => matches!((int_value(p), int_value(g)), (Some(a), Some(b)) if a <= b),
        ("In", "Gt") => int_value(g).is_some_and(|b| all_ints(&|v| v > b)),
        ("In", "Lt") => int_value(g).is_some_and(|b| all_ints(&|v| v < b)),
        _ => false,
    }
}

fn list_implies(pod: &[NodeSelectorRequirement], group: &[NodeSelectorRequirement]) -> bool {
    group.iter().all(|g| pod.iter().any(|p| requirement_implies(p, g)))
}

fn expressions(t: &NodeSelectorTerm) -> &[NodeSelectorRequirement] {
    t.match_expressions.as_deref().unwrap_or_default()
}

fn fields(t: &NodeSelectorTerm) -> &[NodeSelectorRequirement] {
    t.match_fields.as_deref().unwrap_or_default()
}

/// Whether the term has no requirement at all (and so matches no node).
pub(super) fn is_empty(t: &NodeSelectorTerm) -> bool {
    expressions(t).is_empty() && fields(t).is_empty()
}

/// Whether no node can match the term: it is empty, or its requirements contradict.
pub(crate) fn matches_no_node(t: &NodeSelectorTerm) -> bool {
    is_empty(t) || unsatisfiable(t).is_some()
}

/// Whether every node matching `pod` also matches `group` (syntactic, per
/// requirement). A pod term matching no node implies anything; a group term
/// matching no node is implied by nothing else.
pub(crate) fn term_implies(pod: &NodeSelectorTerm, group: &NodeSelectorTerm) -> bool {
    if matches_no_node(pod) {
        return true;
    }
    if matches_no_node(group) {
        return false;
    }
    list_implies(expressions(pod), expressions(group)) && list_implies(fields(pod), fields(group))
}

fn and_lists(
    pod: &[NodeSelectorRequirement],
    group: &[NodeSelectorRequirement],
) -> Option<Vec<NodeSelectorRequirement>> {
    let mut out = pod.to_vec();
    for g in group {
        if !pod.iter().any(|p| requirement_implies(p, g)) {
            out.push(g.clone());
        }
    }
    (!out.is_empty()).then_some(out)
}

/// `pod AND group` as one term: the pod's requirements plus the group's that
/// the pod's do not already imply. When either term is empty (matches no node)
/// the result is the empty term: it matches no node either.
pub(crate) fn and_terms(pod: &NodeSelectorTerm, group: &NodeSelectorTerm) -> NodeSelectorTerm {
    if is_empty(pod) || is_empty(group) {
        return NodeSelectorTerm::default();
    }
    NodeSelectorTerm {
        match_expressions: and_lists(expressions(pod), expressions(group)),
        match_fields: and_lists(fields(pod), fields(group)),
    }
}

/// What `override` puts in place of a pod term that conflicts with `group`: the
/// pod's requirements on keys the group does not constrain, AND the group's term.
/// When the pod constrains nothing else, that is the group's term alone.
pub(super) fn overridden(pod: &NodeSelectorTerm, group: &NodeSelectorTerm) -> NodeSelectorTerm {
    let rest = without_keys_of(pod, group);
    if is_empty(&rest) {
        group.clone()
    } else {
        and_terms(&rest, group)
    }
}

/// The pod's term without its requirements on the keys the group's term constrains.
pub(crate) fn without_keys_of(pod: &NodeSelectorTerm, group: &NodeSelectorTerm) -> NodeSelectorTerm {
    let strip = |p: &[NodeSelectorRequirement], g: &[NodeSelectorRequirement]| {
        let kept: Vec<NodeSelectorRequirement> = p
            .iter()
            .filter(|r| !g.iter().any(|k| k.key == r.key))
            .cloned()
            .collect();
        (!kept.is_empty()).then_some(kept)
    };
    NodeSelectorTerm {
        match_expressions: strip(expressions(pod), expressions(group)),
        match_fields: strip(fields(pod), fields(group)),
    }
}

/// The first key (in sorted order) on which the requirements cannot all hold, if any.
fn contradiction(reqs: &[NodeSelectorRequirement]) -> Option<String> {
    let mut first: Option<&str> = None;
    for (i, r) in reqs.iter().enumerate() {
        let key = r.key.as_str();
        let seen = reqs[..i].iter().any(|e| e.key == key);
        if !seen && first.is_none_or(|f| key < f) && contradicts(reqs, key) {
            first = Some(key);
        }
    }
    first.map(str::to_owned)
}

/// Whether the requirements on `key` cannot all hold.
fn contradicts(reqs: &[NodeSelectorRequirement], key: &str) -> bool {
    let on_key = || reqs.iter().filter(move |r| r.key == key);
    let mut must_exist = false;
    let mut must_not_exist = false;
    let mut first_in: Option<&NodeSelectorRequirement> = None;
    let mut lower: Option<i64> = None;
    let mut upper: Option<i64> = None;
    for r in on_key() {
        match r.operator.as_str() {
            "In" => {
                must_exist = true;
                first_in = first_in.or(Some(r));
            }
            "Exists" => must_exist = true,
            "DoesNotExist" => must_not_exist = true,
            "Gt" => {
                must_exist = true;
                if let Some(n) = int_value(r) {
                    lower = Some(lower.map_or(n, |l| l.max(n)));
                }
            }
            "Lt" => {
                must_exist = true;
                if let Some(n) = int_value(r) {
                    upper = Some(upper.map_or(n, |u| u.min(n)));
                }
            }
            _ => {}
        }
    }
    if must_exist && must_not_exist {
        return true;
    }
    let in_range = |v: &str| {
        if lower.is_none() && upper.is_none() {
            return true;
        }
        v.parse::<i64>()
            .is_ok_and(|n| lower.is_none_or(|l| n > l) && upper.is_none_or(|u| n < u))
    };
    match first_in {
        // A value every `In` allows, no `NotIn` forbids, and within the bounds.
        Some(first_in) => !values(first_in).iter().any(|v| {
            in_range(v)
                && on_key().all(|r| match r.operator.as_str() {
                    "In" => has(values(r), v),
                    "NotIn" => !has(values(r), v),
                    _ => true,
                })
        }),
        None => matches!((lower, upper), (Some(l), Some(u)) if u.saturating_sub(l) < 2),
    }
}

/// The first key (or field) on which no node can satisfy the term, if any.
pub(crate) fn unsatisfiable(term: &NodeSelectorTerm) -> Option<String> {
    contradiction(expressions(term)).or_else(|| contradiction(fields(term)))
}

/// Short human form: `[node-pool In (ci), cpu Gt 4]`.
pub(crate) fn describe_term(term: &NodeSelectorTerm) -> String {
    let mut out = String::from("[");
    for (i, r) in expressions(term).iter().chain(fields(term)).enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&r.key);
        out.push(' ');
        out.push_str(&r.operator);
        for (j, v) in values(r).iter().enumerate() {
            out.push_str(if j == 0 { " (" } else { "," });
            out.push_str(v);
        }
        if !values(r).is_empty() {
            out.push(')');
        }
    }
    out.push(']');
    out
}

#[cfg(test)]
mod tests;
