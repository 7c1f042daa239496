//! Karpenter's scheduling requirements (`pkg/scheduling/requirements.go`, `requirement.go`):
//! a NodePool's and a pod's, and whether they are compatible ([`Requirements::compatible`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::placement::Placement;

/// The label Karpenter puts on every node of a NodePool.
pub const NODEPOOL_LABEL: &str = "karpenter.sh/nodepool";

/// Keys a NodePool may leave undefined and still be compatible (Karpenter's
/// `WellKnownLabels`, `pkg/apis/v1/labels.go`): the cloud provider fills them in.
pub const WELL_KNOWN_LABELS: &[&str] = &[
    NODEPOOL_LABEL,
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "karpenter.sh/capacity-type",
    "node.kubernetes.io/windows-build",
];

/// Deprecated keys Karpenter reads as their successors (`NormalizedLabels`).
pub(super) const NORMALIZED_LABELS: &[(&str, &str)] = &[
    ("failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/zone"),
    ("beta.kubernetes.io/arch", "kubernetes.io/arch"),
    ("beta.kubernetes.io/os", "kubernetes.io/os"),
    ("beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type"),
    (
        "failure-domain.beta.kubernetes.io/region",
        "topology.kubernetes.io/region",
    ),
];

pub(super) fn normalized(key: &str) -> &str {
    NORMALIZED_LABELS
        .iter()
        .find(|(from, _)| *from == key)
        .map_or(key, |(_, to)| to)
}

/// The values one key may take: a set (`In`; empty = `DoesNotExist`) or the
/// complement of one (`NotIn`; empty = `Exists`), with integer bounds (`Gt`, `Lt`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Requirement {
    complement: bool,
    values: BTreeSet<String>,
    /// At least (Karpenter canonicalises `Gt n` to `>= n+1`).
    gte: Option<i64>,
    /// At most (`Lt n` is `<= n-1`).
    lte: Option<i64>,
}

/// The operator a requirement reads as (Karpenter's `Requirement.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

pub(super) fn within(value: &str, gte: Option<i64>, lte: Option<i64>) -> bool {
    if gte.is_none() && lte.is_none() {
        return true;
    }
    let Ok(v) = value.parse::<i64>() else {
        return false;
    };
    gte.is_none_or(|g| v >= g) && lte.is_none_or(|l| v <= l)
}

impl Requirement {
    pub(super) fn does_not_exist() -> Self {
        Self {
            complement: false,
            values: BTreeSet::new(),
            gte: None,
            lte: None,
        }
    }

    /// A `matchExpressions` requirement; `Err` says what is wrong with it.
    pub(super) fn new(operator: &str, values: &[String]) -> Result<Self, String> {
        let set = || values.iter().cloned().collect::<BTreeSet<_>>();
        let bound = || -> Result<i64, String> {
            match values {
                [one] => one
                    .parse::<i64>()
                    .map_err(|_| format!("{operator} needs an integer value, not {one:?}")),
                _ => Err(format!("{operator} needs exactly one value, not {}", values.len())),
            }
        };
        let mut r = Self {
            complement: true,
            values: BTreeSet::new(),
            gte: None,
            lte: None,
        };
        match operator {
            "In" => {
                r.complement = false;
                r.values = set();
            }
            "NotIn" => r.values = set(),
            "Exists" => {}
            "DoesNotExist" => r.complement = false,
            "Gt" => match bound()?.checked_add(1) {
                Some(at_least) => r.gte = Some(at_least),
                None => return Ok(Self::does_not_exist()),
            },
            "Lt" => match bound()?.checked_sub(1) {
                Some(at_most) => r.lte = Some(at_most),
                None => return Ok(Self::does_not_exist()),
            },
            other => {
                return Err(format!(
                    "operator {other:?} is not one of In, NotIn, Exists, DoesNotExist, Gt, Lt"
                ));
            }
        }
        Ok(r)
    }

    pub(super) fn operator(&self) -> Operator {
        match (self.complement, self.values.is_empty()) {
            (true, false) => Operator::NotIn,
            (true, true) => Operator::Exists,
            (false, false) => Operator::In,
            (false, true) => Operator::DoesNotExist,
        }
    }

    pub(super) fn excludes(&self) -> bool {
        matches!(self.operator(), Operator::NotIn | Operator::DoesNotExist)
    }

    /// The bounds both requirements impose; `None` when they exclude each other.
    pub(super) fn bounds(&self, other: &Self) -> Option<(Option<i64>, Option<i64>)> {
        let gte = self.gte.max(other.gte);
        let lte = match (self.lte, other.lte) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match (gte, lte) {
            (Some(g), Some(l)) if g > l => None,
            bounds => Some(bounds),
        }
    }

    /// Karpenter's `Requirement.Intersection`.
    pub(super) fn intersection(&self, other: &Self) -> Self {
        let complement = self.complement && other.complement;
        let Some((gte, lte)) = self.bounds(other) else {
            return Self::does_not_exist();
        };
        let mut values: BTreeSet<String> = match (self.complement, other.complement) {
            (true, true) => self.values.union(&other.values).cloned().collect(),
            (true, false) => other.values.difference(&self.values).cloned().collect(),
            (false, true) => self.values.difference(&other.values).cloned().collect(),
            (false, false) => self.values.intersection(&other.values).cloned().collect(),
        };
        values.retain(|v| within(v, gte, lte));
        let (gte, lte) = if complement { (gte, lte) } else { (None, None) };
        Self {
            complement,
            values,
            gte,
            lte,
        }
    }

    /// Karpenter's `Requirement.HasIntersection`.
    pub(super) fn has_intersection(&self, other: &Self) -> bool {
        let Some((gte, lte)) = self.bounds(other) else {
            return false;
        };
        match (self.complement, other.complement) {
            (true, true) => true,
            (true, false) => other
                .values
                .iter()
                .any(|v| !self.values.contains(v) && within(v, gte, lte)),
            (false, true) => self
                .values
                .iter()
                .any(|v| !other.values.contains(v) && within(v, gte, lte)),
            (false, false) => self
                .values
                .iter()
                .any(|v| other.values.contains(v) && within(v, gte, lte)),
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = || self.values.iter().map(String::as_str).collect::<Vec<_>>().join(", ");
        match self.operator() {
            Operator::In => write!(f, "In [{}]", list())?,
            Operator::NotIn => write!(f, "NotIn [{}]", list())?,
            Operator::Exists => f.write_str("Exists")?,
            Operator::DoesNotExist => f.write_str("DoesNotExist")?,
        }
        if let Some(g) = self.gte {
            write!(f, " >= {g}")?;
        }
        if let Some(l) = self.lte {
            write!(f, " <= {l}")?;
        }
        Ok(())
    }
}

/// Requirements by key, each key's requirements intersected.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requirements(BTreeMap<String, Requirement>);

/// The first requirement of the pod a NodePool cannot meet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequirementUnmet {
    /// A custom key the pod requires and the NodePool does not define.
    Undefined { key: String, pod: String },
    /// A key both define, with no value in common.
    Disjoint { key: String, pod: String, pool: String },
    /// A pod requirement Kubernetes would refuse (it matches no node).
    Invalid { key: String, why: String },
    /// `matchFields` (a node's name) or an empty term: no new node can match it.
    NoNewNode(&'static str),
}

impl fmt::Display for RequirementUnmet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Undefined { key, pod } => write!(
                f,
                "the pod requires label {key} {pod}, which the NodePool does not define \
                 (add it to spec.template.metadata.labels or spec.template.spec.requirements)"
            ),
            Self::Disjoint { key, pod, pool } => {
                write!(f, "the pod requires label {key} {pod}; the NodePool offers {pool}")
            }
            Self::Invalid { key, why } => write!(f, "the pod's requirement on {key} matches no node: {why}"),
            Self::NoNewNode(why) => f.write_str(why),
        }
    }
}

impl Requirements {
    pub(super) fn add(&mut self, key: &str, requirement: Requirement) {
        let key = normalized(key);
        let merged = match self.0.get(key) {
            Some(existing) => requirement.intersection(existing),
            None => requirement,
        };
        self.0.insert(key.to_owned(), merged);
    }

    /// `key In [value]` for every label.
    pub(super) fn add_labels<'a>(&mut self, labels: impl IntoIterator<Item = (&'a String, &'a String)>) {
        for (key, value) in labels {
            self.add(
                key,
                Requirement {
                    complement: false,
                    values: BTreeSet::from([value.clone()]),
                    gte: None,
                    lte: None,
                },
            );
        }
    }

    pub(super) fn add_expression(
        &mut self,
        key: &str,
        operator: &str,
        values: &[String],
    ) -> Result<(), RequirementUnmet> {
        let requirement = Requirement::new(operator, values).map_err(|why| RequirementUnmet::Invalid {
            key: key.to_owned(),
            why,
        })?;
        self.add(key, requirement);
        Ok(())
    }

    /// Whether a node of these (a NodePool's) requirements could satisfy `pod`'s
    /// (Karpenter's `Compatible` with `AllowUndefinedWellKnownLabels`).
    pub fn compatible(&self, pod: &Requirements) -> Result<(), RequirementUnmet> {
        for (key, wanted) in &pod.0 {
            if WELL_KNOWN_LABELS.contains(&key.as_str()) || self.0.contains_key(key) || wanted.excludes() {
                continue;
            }
            return Err(RequirementUnmet::Undefined {
                key: key.clone(),
                pod: wanted.to_string(),
            });
        }
        for (key, wanted) in &pod.0 {
            let Some(offered) = self.0.get(key) else { continue };
            if offered.has_intersection(wanted) || (wanted.excludes() && offered.excludes()) {
                continue;
            }
            return Err(RequirementUnmet::Disjoint {
                key: key.clone(),
                pod: wanted.to_string(),
                pool: offered.to_string(),
            });
        }
        Ok(())
    }

    /// The requirements of a placement, one set per term of its required node
    /// affinity (just the nodeSelector's without one); a term no new node can
    /// match is an `Err`.
    pub(crate) fn of_placement(placement: &Placement<'_>) -> Vec<Result<Requirements, RequirementUnmet>> {
        let mut base = Requirements::default();
        base.add_labels(placement.node_selector.into_iter().flatten());
        let Some(terms) = placement.required else {
            return vec![Ok(base)];
        };
        if terms.is_empty() {
            return vec![Err(RequirementUnmet::NoNewNode(
                "the pod's required node affinity has no nodeSelectorTerm: it matches no node",
            ))];
        }
        terms
            .iter()
            .map(|term| {
                if term.match_fields.as_ref().is_some_and(|f| !f.is_empty()) {
                    return Err(RequirementUnmet::NoNewNode(
                        "the pod's required node affinity names nodes (matchFields): a new node cannot match it",
                    ));
                }
                let expressions = term.match_expressions.as_deref().unwrap_or_default();
                if expressions.is_empty() {
                    return Err(RequirementUnmet::NoNewNode(
                        "a nodeSelectorTerm without requirements matches no node",
                    ));
                }
                let mut reqs = base.clone();
                for e in expressions {
                    reqs.add_expression(&e.key, &e.operator, e.values.as_deref().unwrap_or_default())?;
                }
                Ok(reqs)
            })
            .collect()
    }
}
