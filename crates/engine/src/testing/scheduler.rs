//! The scheduler's reading of required node affinity, written apart from the
//! engine: the oracle the unit and property tests check it against without a
//! cluster. It is not the reference: e2e/scenarios/differential.rs holds the
//! engine's feasible-node count to kube-scheduler's own verdict.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm};

/// A node as the oracle sees it: a name (`metadata.name`, for `matchFields`) and labels.
#[derive(Debug, Clone)]
pub struct TestNode {
    pub name: &'static str,
    pub labels: BTreeMap<&'static str, &'static str>,
}

/// Whether requirement `r` holds for a label (or field) value `have` (`None`: absent).
pub fn requirement_holds(have: Option<&str>, r: &NodeSelectorRequirement) -> bool {
    let values: Vec<&str> = r.values.iter().flatten().map(String::as_str).collect();
    let compare = |f: fn(i64, i64) -> bool| matches!((have.and_then(|h| h.parse().ok()), values.first().and_then(|v| v.parse().ok())), (Some(a), Some(b)) if f(a, b));
    match r.operator.as_str() {
        "In" => have.is_some_and(|h| values.contains(&h)),
        "NotIn" => have.is_none_or(|h| !values.contains(&h)),
        "Exists" => have.is_some(),
        "DoesNotExist" => have.is_none(),
        "Gt" => compare(|a, b| a > b),
        "Lt" => compare(|a, b| a < b),
        _ => false,
    }
}

/// A term matches when all its expressions (on labels) and fields (on
/// `metadata.name`) hold; a term without requirements matches no node.
pub fn term_matches(node: &TestNode, term: &NodeSelectorTerm) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    (!expressions.is_empty() || !fields.is_empty())
        && expressions
            .iter()
            .all(|r| requirement_holds(node.labels.get(r.key.as_str()).copied(), r))
        && fields
            .iter()
            .all(|r| r.key == "metadata.name" && requirement_holds(Some(node.name), r))
}

/// Terms are ORed.
pub fn terms_match(node: &TestNode, terms: &[NodeSelectorTerm]) -> bool {
    terms.iter().any(|t| term_matches(node, t))
}
