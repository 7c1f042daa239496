//! Placement feasibility: on which nodes could a pod be placed, as far as
//! placement goes?
//!
//! A node is feasible for a pod when, as kube-scheduler's filters decide it:
//! - its labels satisfy the pod's `nodeSelector` (every key, exact value) and
//!   required node affinity (`nodeSelectorTerms` ORed; within a term
//!   `matchExpressions` and `matchFields` ANDed; a term with no requirement, or
//!   with a requirement the API would refuse, matches no node; operators `In`,
//!   `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`; `matchFields` on
//!   `metadata.name`) — the `NodeAffinity` filter;
//! - every `NoSchedule` / `NoExecute` taint of the node is tolerated by one of
//!   the pod's tolerations (`PreferNoSchedule` never excludes a node) — the
//!   `TaintToleration` filter, with the in-tree `ToleratesTaint` semantics;
//! - it is not cordoned (`spec.unschedulable`), unless the pod tolerates the
//!   `node.kubernetes.io/unschedulable:NoSchedule` taint — the
//!   `NodeUnschedulable` filter.
//!
//! **Out of scope**: resources (requests vs allocatable), pod (anti-)affinity,
//! topology spread, ports, volumes, node readiness. The count is an upper bound
//! of where the scheduler can put the pod, not a promise.

use std::collections::BTreeMap;
use std::hash::{BuildHasher as _, Hash, Hasher};
use std::sync::LazyLock;

use k8s_openapi::api::core::v1::{Affinity, NodeSelectorRequirement, NodeSelectorTerm, Toleration};

use super::PodSpec;
use super::tolerations::{NodeTaint, TaintEffect, tolerates_taint};
use crate::config::Group;

/// What the feasible-node counts leave out, as `explain` and the audit report say it.
pub const FEASIBILITY_SCOPE: &str = "placement only: nodeSelector, required node affinity, NoSchedule/NoExecute taints, cordons; \
     resources, pod affinity and topology spread are not counted";

/// The taint the node lifecycle controller puts on cordoned nodes; tolerating
/// it lets a pod onto a cordoned node (DaemonSet pods do).
pub(crate) const UNSCHEDULABLE_TAINT_KEY: &str = "node.kubernetes.io/unschedulable";

/// The hasher of placement fingerprints: fast (foldhash), seeded once per
/// process at random, so a pod's author cannot aim for another placement's key.
static FINGERPRINTS: LazyLock<foldhash::quality::RandomState> = LazyLock::new(Default::default);

fn hasher() -> impl Hasher {
    FINGERPRINTS.build_hasher()
}

/// What placement needs of a Node: its name, labels, taints and cordon — and
/// nothing else (no status, images, annotations or managed fields). Compact:
/// labels are a sorted list of boxed strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    pub name: Box<str>,
    /// Sorted by key, keys unique.
    labels: Box<[(Box<str>, Box<str>)]>,
    pub taints: Box<[NodeTaint]>,
    pub unschedulable: bool,
}

impl NodeInfo {
    pub fn new(
        name: &str,
        labels: impl IntoIterator<Item = (String, String)>,
        taints: Vec<NodeTaint>,
        unschedulable: bool,
    ) -> Self {
        // A BTreeMap sorts and de-duplicates (last value wins, as in a map).
        let labels: BTreeMap<String, String> = labels.into_iter().collect();
        Self {
            name: name.into(),
            labels: labels.into_iter().map(|(k, v)| (k.into(), v.into())).collect(),
            taints: taints.into_boxed_slice(),
            unschedulable,
        }
    }

    /// The compact form of a core/v1 Node.
    pub fn from_node(node: &k8s_openapi::api::core::v1::Node) -> Self {
        let spec = node.spec.as_ref();
        let taints = spec
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .map(|t| NodeTaint::new(&t.key, t.value.as_deref().unwrap_or_default(), &t.effect))
            .collect();
        Self::new(
            node.metadata.name.as_deref().unwrap_or_default(),
            node.metadata.labels.clone().unwrap_or_default(),
            taints,
            spec.and_then(|s| s.unschedulable).unwrap_or(false),
        )
    }

    /// The value of label `key`, if the node has it.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .binary_search_by(|(k, _)| k.as_ref().cmp(key))
            .ok()
            .map(|i| self.labels[i].1.as_ref())
    }
}

/// The terms of an affinity's required node affinity.
fn required_terms(affinity: Option<&Affinity>) -> Option<&[NodeSelectorTerm]> {
    let node_affinity = affinity?.node_affinity.as_ref()?;
    Some(
        &node_affinity
            .required_during_scheduling_ignored_during_execution
            .as_ref()?
            .node_selector_terms,
    )
}

/// The placement-relevant parts of a pod (or of a group's placement).
#[derive(Debug, Clone, Copy, Default)]
pub struct Placement<'a> {
    pub node_selector: Option<&'a BTreeMap<String, String>>,
    /// `requiredDuringSchedulingIgnoredDuringExecution`; `None` when the pod has none.
    pub required: Option<&'a [NodeSelectorTerm]>,
    pub tolerations: &'a [Toleration],
}

impl<'a> Placement<'a> {
    pub fn of_spec(spec: &'a PodSpec) -> Self {
        Self {
            node_selector: spec.node_selector.as_ref(),
            required: required_terms(spec.affinity.as_ref()),
            tolerations: spec.tolerations.as_deref().unwrap_or_default(),
        }
    }

    /// The group's own placement, as if it were a pod's.
    pub fn of_group(group: &'a Group) -> Self {
        Self {
            node_selector: (!group.node_selector.is_empty()).then_some(&group.node_selector),
            required: required_terms(group.affinity.as_ref()),
            tolerations: &group.tolerations,
        }
    }

    /// A hash of everything feasibility depends on: equal placements hash
    /// equally, so counts can be memoised per distinct placement.
    pub fn fingerprint(&self) -> u64 {
        let mut h = hasher();
        self.node_selector.hash(&mut h);
        self.required.map(<[_]>::len).hash(&mut h);
        for term in self.required.into_iter().flatten() {
            for list in [&term.match_expressions, &term.match_fields] {
                list.as_ref().map(Vec::len).hash(&mut h);
                for r in list.iter().flatten() {
                    (&r.key, &r.operator, &r.values).hash(&mut h);
                }
            }
        }
        self.tolerations.len().hash(&mut h);
        for t in self.tolerations {
            // tolerationSeconds does not change where a pod may be placed.
            (&t.key, &t.operator, &t.value, &t.effect).hash(&mut h);
        }
        h.finish()
    }
}

/// Why a node is not feasible for a placement: the first unmet requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unmet {
    /// `nodeSelector` key with the wanted value, and what the node has.
    NodeSelector {
        key: String,
        want: String,
        have: Option<String>,
    },
    /// No term of the required node affinity matches the node's labels.
    NodeAffinity,
    /// A `NoSchedule`/`NoExecute` taint no toleration tolerates.
    Taint(NodeTaint),
    /// The node is cordoned and the pod does not tolerate it.
    Cordoned,
}

impl std::fmt::Display for Unmet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unmet::NodeSelector { key, want, have } => match have {
                Some(have) => write!(f, "nodeSelector {key}={want}: the node's label {key} is {have:?}"),
                None => write!(f, "nodeSelector {key}={want}: the node has no label {key}"),
            },
            Unmet::NodeAffinity => f.write_str("required node affinity: no nodeSelectorTerm matches the node's labels"),
            Unmet::Taint(t) => write!(f, "taint {} is not tolerated", t.describe()),
            Unmet::Cordoned => f.write_str("the node is cordoned (spec.unschedulable)"),
        }
    }
}

/// Whether the node's labels satisfy requirement `r` of `matchExpressions`.
/// `None` when the requirement is one the API refuses (it then matches nothing).
fn expression_matches(r: &NodeSelectorRequirement, node: &NodeInfo) -> Option<bool> {
    let values = r.values.as_deref().unwrap_or_default();
    let have = node.label(&r.key);
    match r.operator.as_str() {
        "In" if !values.is_empty() => Some(have.is_some_and(|v| values.iter().any(|w| w == v))),
        "NotIn" if !values.is_empty() => Some(have.is_none_or(|v| !values.iter().any(|w| w == v))),
        "Exists" if values.is_empty() => Some(have.is_some()),
        "DoesNotExist" if values.is_empty() => Some(have.is_none()),
        "Gt" | "Lt" if values.len() == 1 => {
            let bound: i64 = values[0].parse().ok()?;
            Some(
                have.and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|n| if r.operator == "Gt" { n > bound } else { n < bound }),
            )
        }
        _ => None,
    }
}

/// Whether the node's fields satisfy requirement `r` of `matchFields`
/// (`In`/`NotIn` with exactly one value; `metadata.name` is the only field a node has).
fn field_matches(r: &NodeSelectorRequirement, node: &NodeInfo) -> Option<bool> {
    let values = r.values.as_deref().unwrap_or_default();
    let have = if r.key == "metadata.name" { &*node.name } else { "" };
    match (r.operator.as_str(), values) {
        ("In", [value]) => Some(have == value),
        ("NotIn", [value]) => Some(have != value),
        _ => None,
    }
}

/// Whether a node selector term matches the node. A term without requirements,
/// or with a requirement the API would refuse, matches no node.
pub(crate) fn term_matches(term: &NodeSelectorTerm, node: &NodeInfo) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    expressions.iter().all(|r| expression_matches(r, node) == Some(true))
        && fields.iter().all(|r| field_matches(r, node) == Some(true))
}

/// The first reason the node is not feasible for `placement`; `None` when it is.
pub fn unmet(placement: &Placement<'_>, node: &NodeInfo) -> Option<Unmet> {
    unmet_by_labels_or(placement, node, |_| false).or_else(|| {
        let cordon = NodeTaint::new(UNSCHEDULABLE_TAINT_KEY, "", "NoSchedule");
        (node.unschedulable && !placement.tolerations.iter().any(|tol| tolerates_taint(tol, &cordon)))
            .then_some(Unmet::Cordoned)
    })
}

/// What a pod naming its node (`spec.nodeName`, no scheduler) must satisfy:
/// [`unmet`] without the cordon. A cordon never comes alone: the controller
/// manager taints a cordoned node `node.kubernetes.io/unschedulable:NoSchedule`,
/// and that taint is the cordon too — only the scheduler reads it (the kubelet
/// admits a bound pod whatever its NoSchedule taints), so it is not checked here.
/// Every other NoSchedule/NoExecute taint is: it tells another pool's node.
pub(crate) fn unmet_by_bound_pod(placement: &Placement<'_>, node: &NodeInfo) -> Option<Unmet> {
    unmet_by_labels_or(placement, node, |t| {
        &*t.key == UNSCHEDULABLE_TAINT_KEY && t.effect == TaintEffect::NoSchedule
    })
}

/// The nodeSelector, required node affinity and taints (those `ignored` left out) the node fails.
fn unmet_by_labels_or(
    placement: &Placement<'_>,
    node: &NodeInfo,
    ignored: impl Fn(&NodeTaint) -> bool,
) -> Option<Unmet> {
    for (key, want) in placement.node_selector.into_iter().flatten() {
        let have = node.label(key);
        if have != Some(want.as_str()) {
            return Some(Unmet::NodeSelector {
                key: key.clone(),
                want: want.clone(),
                have: have.map(str::to_owned),
            });
        }
    }
    if let Some(terms) = placement.required
        && !terms.iter().any(|t| term_matches(t, node))
    {
        return Some(Unmet::NodeAffinity);
    }
    if let Some(taint) = node.taints.iter().find(|t| {
        t.effect.excludes() && !ignored(t) && !placement.tolerations.iter().any(|tol| tolerates_taint(tol, t))
    }) {
        return Some(Unmet::Taint(taint.clone()));
    }
    None
}

/// Whether the pod could be placed on the node, as far as placement goes.
pub fn feasible(placement: &Placement<'_>, node: &NodeInfo) -> bool {
    unmet(placement, node).is_none()
}

/// How many of `nodes` are feasible for `placement`.
pub fn count<'n>(placement: &Placement<'_>, nodes: impl IntoIterator<Item = &'n NodeInfo>) -> usize {
    nodes.into_iter().filter(|n| feasible(placement, n)).count()
}

/// The node named by a pod's `spec.nodeName`, as far as it could be looked up.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeLookup {
    Found(std::sync::Arc<NodeInfo>),
    /// No node of that name exists.
    Unknown,
    /// The lookup could not be answered (the API server did not answer in time).
    Unavailable(String),
}

/// The provisioner a group declares (`nodes.provisionedOnDemand`), as decisions name it.
pub const DECLARED_PROVISIONER: &str = "declared/provisionedOnDemand";

/// What placement knows of the cluster's nodes. Implemented by the Node cache
/// (memoised counts) and by `explain --nodes` (a plain list).
pub trait NodeView: Send + Sync + std::fmt::Debug {
    /// How many nodes are feasible for `placement`; `None` without node data.
    fn feasible(&self, placement: &Placement<'_>) -> Option<usize> {
        self.feasible_keyed(placement, placement.fingerprint())
    }
    /// [`NodeView::feasible`], given the placement's [`Placement::fingerprint`].
    fn feasible_keyed(&self, placement: &Placement<'_>, key: u64) -> Option<usize>;
    /// A count known by `key` — a fingerprint of everything it depends on —
    /// remembered for the current nodes; `count` computes it when it is not.
    fn remembered(&self, key: u64, count: &mut dyn FnMut() -> Option<usize>) -> Option<usize> {
        let _ = key;
        count()
    }
    /// How many nodes there are; `None` without node data.
    fn total(&self) -> Option<usize>;
    /// The node named `name`.
    fn node(&self, name: &str) -> NodeLookup;
    /// How many nodes `keep` accepts (one pass, not remembered); `None` without node data.
    fn count_where(&self, keep: &dyn Fn(&NodeInfo) -> bool) -> Option<usize>;
    /// The provisioners (`nodepool/NAME`) that could create a node for a pod spec's
    /// placement, known by `key` (a fingerprint of it); `spec` makes the spec when the
    /// answer is not remembered. Empty without NodePools, and `spec` is not called.
    fn provisioners(&self, key: u64, spec: &mut dyn FnMut() -> Option<PodSpec>) -> std::sync::Arc<[Box<str>]> {
        let _ = (key, spec);
        std::sync::Arc::from([])
    }
    /// Every NodePool, for a pod spec's placement: `Ok(provisioner)` when it could create a
    /// node for it, `Err((provisioner, why not))` otherwise (not remembered: for reports).
    fn node_pools_for(&self, spec: &PodSpec) -> Vec<Result<String, (String, String)>> {
        let _ = spec;
        Vec::new()
    }
}

/// A fingerprint of a group's own placement and its conflict policy: with the
/// pod's [`Placement::fingerprint`], it determines the feasibility of the
/// planned pod (the plan depends on nothing else that feasibility reads).
pub fn group_fingerprint(group: &Group) -> u64 {
    let mut h = hasher();
    Placement::of_group(group).fingerprint().hash(&mut h);
    group.on_conflict.as_str().hash(&mut h);
    h.finish()
}

/// Combines fingerprints into one key.
pub fn combine(a: u64, b: u64) -> u64 {
    let mut h = hasher();
    (a, b).hash(&mut h);
    h.finish()
}

/// A plain list of nodes: counts by evaluating every node.
impl NodeView for Vec<std::sync::Arc<NodeInfo>> {
    fn feasible_keyed(&self, placement: &Placement<'_>, _key: u64) -> Option<usize> {
        Some(count(placement, self.iter().map(|n| &**n)))
    }

    fn total(&self) -> Option<usize> {
        Some(self.len())
    }

    fn count_where(&self, keep: &dyn Fn(&NodeInfo) -> bool) -> Option<usize> {
        Some(self.iter().filter(|n| keep(n)).count())
    }

    fn node(&self, name: &str) -> NodeLookup {
        match self.iter().find(|n| &*n.name == name) {
            Some(node) => NodeLookup::Found(node.clone()),
            None => NodeLookup::Unknown,
        }
    }
}

#[cfg(test)]
mod tests;
