//! Provisioning on demand: could a node autoscaler create a node a pod could be
//! placed on, when none exists now?
//!
//! Karpenter NodePools (`karpenter.sh/v1`) are read as Karpenter's own scheduler
//! reads them (sigs.k8s.io/karpenter v1.15.0, `pkg/scheduling/requirements.go`,
//! `requirement.go`, `taints.go`, `pkg/controllers/provisioning/provisioner.go`):
//! - a NodePool's requirements are `spec.template.spec.requirements`, its
//!   template labels as `In`, and `karpenter.sh/nodepool In [name]`;
//! - the pod's requirements are its `nodeSelector` (as `In`) and one term of its
//!   required node affinity (Karpenter tries the terms in turn);
//! - compatible ([`Requirements::compatible`]): a custom key the pod requires
//!   must be defined by the NodePool unless the pod's operator is `NotIn` or
//!   `DoesNotExist`; a well-known key ([`WELL_KNOWN_LABELS`]) may be undefined;
//!   every key both define must intersect (two exclusions always do);
//! - the pod tolerates every taint of `spec.template.spec.taints` (all effects;
//!   `startupTaints` are removed before pods land, so they do not count);
//! - the NodePool is usable: `Ready=True`, not being deleted, not static
//!   (`spec.replicas`), and `spec.limits` not used up by `status.resources`.
//!
//! Pure: the NodePool objects come in as JSON, the answer goes out as data.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use serde::Deserialize;

use crate::config::Group;
use crate::placement::PodSpec;
use crate::placement::feasible::{self, DECLARED_PROVISIONER, NodeInfo, NodeLookup, NodeView, Placement, Unmet};
use crate::placement::tolerations::{NodeTaint, tolerates_taint};

/// The annotations that make a Cluster API MachineDeployment or MachineSet a
/// cluster-autoscaler node group (cluster-autoscaler, `cloudprovider/clusterapi`).
pub const NODE_GROUP_MIN_SIZE: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size";
pub const NODE_GROUP_MAX_SIZE: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size";
/// The prefix of the scale-from-zero annotations (`…/cpu`, `…/memory`, `…/labels`, `…/taints`).
pub const CAPACITY_PREFIX: &str = "capacity.cluster-autoscaler.kubernetes.io/";
/// The label prefixes Cluster API propagates from a machine template to its Node.
const PROPAGATED_LABEL_PREFIXES: &[&str] = &[
    "node-role.kubernetes.io/",
    "node-restriction.kubernetes.io/",
    "node.cluster.x-k8s.io/",
];

/// The items of a comma-separated annotation (none when absent or blank).
fn list(value: Option<&str>) -> impl Iterator<Item = &str> {
    value
        .into_iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|item| !item.is_empty())
}

mod requirements;

pub use self::requirements::{NODEPOOL_LABEL, RequirementUnmet, Requirements, WELL_KNOWN_LABELS};

/// Why a NodePool would not create a node now, whatever the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unusable {
    /// Its `Ready` condition is not `True` (Karpenter ignores it).
    NotReady(String),
    /// `metadata.deletionTimestamp` is set.
    Deleting,
    /// `spec.replicas` is set: a static NodePool, not provisioned on demand.
    Static,
    /// `status.resources` has used up `spec.limits` for a resource.
    LimitsExhausted {
        resource: String,
        usage: String,
        limit: String,
    },
    /// A node group at its `…-node-group-max-size`.
    AtMaxSize { replicas: u64, max: u64 },
    /// A node group at 0 replicas without the capacity annotations the autoscaler needs to
    /// scale it from zero.
    NoScaleFromZero,
    /// The object cannot be read as a provisioner.
    Invalid(String),
}

impl fmt::Display for Unusable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotReady(why) => write!(f, "not Ready ({why})"),
            Self::Deleting => f.write_str("being deleted"),
            Self::Static => f.write_str("static (spec.replicas): Karpenter does not provision it on demand"),
            Self::LimitsExhausted { resource, usage, limit } => {
                write!(f, "limits exhausted: {resource} {usage} used of {limit} (spec.limits)")
            }
            Self::AtMaxSize { replicas, max } => write!(f, "at its max size ({replicas} of {max} replicas)"),
            Self::NoScaleFromZero => write!(
                f,
                "0 replicas and no {CAPACITY_PREFIX}cpu/memory annotations: the autoscaler cannot scale it from zero \
                 (unless its infrastructure provider reports capacity; then declare nodes.provisionedOnDemand)"
            ),
            Self::Invalid(why) => write!(f, "cannot be read: {why}"),
        }
    }
}

/// Why a NodePool cannot create a node a placement could land on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incompatible {
    Unusable(Unusable),
    /// A taint of the NodePool's template the pod does not tolerate.
    Taint(NodeTaint),
    Requirement(RequirementUnmet),
    /// The node a node group's autoscaler would add does not fit the pod.
    Node(Unmet),
}

impl fmt::Display for Incompatible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unusable(why) => why.fmt(f),
            Self::Taint(t) => write!(f, "taint {} is not tolerated", t.describe()),
            Self::Requirement(why) => why.fmt(f),
            Self::Node(unmet) => write!(f, "the node it would add does not fit: {unmet}"),
        }
    }
}

/// Something that creates nodes on demand, as far as placement goes: a Karpenter
/// NodePool, or a Cluster API node group the cluster-autoscaler scales.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provisioner {
    /// How decisions name it: `nodepool/NAME`, `machinedeployment/NAMESPACE/NAME`,
    /// `machineset/NAMESPACE/NAME`.
    pub name: Box<str>,
    rule: FitRule,
    /// Why it would not create a node now (`None`: usable).
    pub unusable: Option<Unusable>,
}

/// How a provisioner decides whether a pod fits the nodes it creates.
#[derive(Debug, Clone, PartialEq, Eq)]
enum FitRule {
    /// Karpenter's requirements (NodePool requirements, template labels, its name) and the
    /// template's taints.
    Karpenter {
        requirements: Requirements,
        taints: Box<[NodeTaint]>,
    },
    /// The node the cluster-autoscaler would add (its template: labels and taints), checked
    /// as the scheduler checks a node — what the autoscaler's scale-up simulation does.
    Template(NodeInfo),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PoolObject {
    #[serde(default)]
    metadata: Metadata,
    #[serde(default)]
    spec: Spec,
    #[serde(default)]
    status: Status,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Metadata {
    #[serde(default)]
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    deletion_timestamp: Option<serde_json::Value>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Spec {
    #[serde(default)]
    template: Template,
    #[serde(default)]
    limits: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    replicas: Option<serde_json::Value>,
}

#[derive(Deserialize, Default)]
struct Template {
    #[serde(default)]
    metadata: Metadata,
    #[serde(default)]
    spec: TemplateSpec,
}

#[derive(Deserialize, Default)]
struct TemplateSpec {
    #[serde(default)]
    requirements: Vec<NodeSelectorRequirement>,
    #[serde(default)]
    taints: Vec<Taint>,
}

#[derive(Deserialize)]
struct Taint {
    key: String,
    #[serde(default)]
    value: Option<String>,
    effect: String,
}

#[derive(Deserialize, Default)]
struct Status {
    #[serde(default)]
    conditions: Vec<Condition>,
    #[serde(default)]
    resources: BTreeMap<String, serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Condition {
    #[serde(rename = "type")]
    kind: String,
    status: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

impl Provisioner {
    /// A NodePool from its object (`karpenter.sh/v1`); one that cannot be read is
    /// kept, [`Unusable::Invalid`], so that it is reported rather than silently dropped.
    pub fn karpenter(object: &serde_json::Value) -> Self {
        let name = object
            .pointer("/metadata/name")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default();
        match serde_json::from_value::<PoolObject>(object.clone()) {
            Ok(parsed) => Self::from_object(parsed),
            Err(err) => Self {
                name: format!("nodepool/{name}").into(),
                rule: FitRule::Karpenter {
                    requirements: Requirements::default(),
                    taints: Box::new([]),
                },
                unusable: Some(Unusable::Invalid(err.to_string())),
            },
        }
    }

    fn from_object(object: PoolObject) -> Self {
        let name = object.metadata.name;
        let template = object.spec.template;
        let mut requirements = Requirements::default();
        let mut unusable = None;
        for r in &template.spec.requirements {
            if let Err(why) = requirements.add_expression(&r.key, &r.operator, r.values.as_deref().unwrap_or_default())
            {
                unusable = Some(Unusable::Invalid(format!("spec.template.spec.requirements: {why}")));
            }
        }
        requirements.add_labels(&template.metadata.labels);
        requirements.add_labels([(&NODEPOOL_LABEL.to_owned(), &name)]);
        let taints = template
            .spec
            .taints
            .iter()
            .map(|t| NodeTaint::new(&t.key, t.value.as_deref().unwrap_or_default(), &t.effect))
            .collect();
        let ready = object.status.conditions.iter().find(|c| c.kind == "Ready");
        let limits = exhausted(&object.spec.limits, &object.status.resources);
        let (invalid_limits, limits) = match limits {
            Some(invalid @ Unusable::Invalid(_)) => (Some(invalid), None),
            other => (None, other),
        };
        let unusable = unusable
            .or(invalid_limits)
            .or_else(|| {
                object
                    .metadata
                    .deletion_timestamp
                    .is_some()
                    .then_some(Unusable::Deleting)
            })
            .or_else(|| object.spec.replicas.is_some().then_some(Unusable::Static))
            .or_else(|| match ready {
                Some(c) if c.status == "True" => None,
                Some(c) => Some(Unusable::NotReady(format!(
                    "Ready={}{}",
                    c.status,
                    [c.reason.as_deref(), c.message.as_deref()]
                        .into_iter()
                        .flatten()
                        .filter(|s| !s.is_empty())
                        .map(|s| format!(": {s}"))
                        .collect::<String>()
                ))),
                None => Some(Unusable::NotReady("no Ready condition in its status".to_owned())),
            })
            .or(limits);
        Self {
            name: format!("nodepool/{name}").into(),
            rule: FitRule::Karpenter { requirements, taints },
            unusable,
        }
    }

    /// A Cluster API MachineDeployment or MachineSet (`kind` as the API names it) the
    /// cluster-autoscaler scales: `None` when it is not a node group (it lacks the min- and
    /// max-size annotations). The node it would add carries the labels of the
    /// `capacity.cluster-autoscaler.kubernetes.io/labels` annotation and the labels Cluster
    /// API propagates from `spec.template.metadata.labels` (`node-role.kubernetes.io/`,
    /// `node-restriction.kubernetes.io/`, `node.cluster.x-k8s.io/`), `kubernetes.io/os: linux`
    /// and `kubernetes.io/arch: amd64` unless those say otherwise (the autoscaler's defaults),
    /// and the taints of `spec.template.spec.taints` and of the `…/taints` annotation.
    pub fn node_group(kind: &str, object: &serde_json::Value) -> Option<Self> {
        let text = |pointer: &str| object.pointer(pointer).and_then(serde_json::Value::as_str);
        let annotation = |key: &str| {
            object
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(key))
                .and_then(serde_json::Value::as_str)
        };
        let max = annotation(NODE_GROUP_MAX_SIZE)?;
        annotation(NODE_GROUP_MIN_SIZE)?;
        let name: Box<str> = format!(
            "{}/{}/{}",
            kind.to_ascii_lowercase(),
            text("/metadata/namespace").unwrap_or_default(),
            text("/metadata/name").unwrap_or_default()
        )
        .into();
        let invalid = |why: String| {
            Some(Self {
                name: name.clone(),
                rule: FitRule::Template(NodeInfo::new(&name, [], Vec::new(), false)),
                unusable: Some(Unusable::Invalid(why)),
            })
        };
        let mut labels: BTreeMap<String, String> = object
            .pointer("/spec/template/metadata/labels")
            .and_then(serde_json::Value::as_object)
            .into_iter()
            .flatten()
            .filter(|(key, _)| PROPAGATED_LABEL_PREFIXES.iter().any(|p| key.starts_with(p)))
            .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_owned())))
            .collect();
        for pair in list(annotation(&format!("{CAPACITY_PREFIX}labels"))) {
            match pair.split_once('=') {
                Some((key, value)) if !key.trim().is_empty() => {
                    labels.insert(key.trim().to_owned(), value.trim().to_owned());
                }
                _ => return invalid(format!("{CAPACITY_PREFIX}labels: {pair:?} is not key=value")),
            }
        }
        for (key, default) in [("kubernetes.io/os", "linux"), ("kubernetes.io/arch", "amd64")] {
            labels.entry(key.to_owned()).or_insert_with(|| default.to_owned());
        }
        // Cluster API (v1beta2) puts the machine template's taints on its Node.
        let mut taints: Vec<NodeTaint> = object
            .pointer("/spec/template/spec/taints")
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| {
                let text = |k: &str| t.get(k).and_then(serde_json::Value::as_str);
                Some(NodeTaint::new(
                    text("key")?,
                    text("value").unwrap_or_default(),
                    text("effect")?,
                ))
            })
            .collect();
        for spec in list(annotation(&format!("{CAPACITY_PREFIX}taints"))) {
            let parsed = spec.rsplit_once(':').and_then(|(kv, effect)| {
                let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
                (!key.trim().is_empty() && matches!(effect.trim(), "NoSchedule" | "PreferNoSchedule" | "NoExecute"))
                    .then(|| NodeTaint::new(key.trim(), value.trim(), effect.trim()))
            });
            match parsed {
                Some(taint) => taints.push(taint),
                None => return invalid(format!("{CAPACITY_PREFIX}taints: {spec:?} is not key=value:Effect")),
            }
        }
        let Ok(max) = max.trim().parse::<u64>() else {
            return invalid(format!("{NODE_GROUP_MAX_SIZE}: {max:?} is not a number"));
        };
        let replicas = object
            .pointer("/spec/replicas")
            .map_or(Some(1), serde_json::Value::as_u64)
            .unwrap_or(0);
        let sized = ["cpu", "memory"]
            .iter()
            .all(|r| annotation(&format!("{CAPACITY_PREFIX}{r}")).is_some());
        let unusable = if object.pointer("/metadata/deletionTimestamp").is_some() {
            Some(Unusable::Deleting)
        } else if replicas >= max {
            Some(Unusable::AtMaxSize { replicas, max })
        } else if replicas == 0 && !sized {
            Some(Unusable::NoScaleFromZero)
        } else {
            None
        };
        Some(Self {
            rule: FitRule::Template(NodeInfo::new(&name, labels, taints, false)),
            name,
            unusable,
        })
    }

    /// The provisioner's name, as decisions write it.
    pub fn provisioner(&self) -> String {
        self.name.to_string()
    }

    /// Whether this provisioner could create a node `placement` could land on.
    pub fn compatible(&self, placement: &Placement<'_>) -> Result<(), Incompatible> {
        if let Some(why) = &self.unusable {
            return Err(Incompatible::Unusable(why.clone()));
        }
        let (requirements, taints) = match &self.rule {
            FitRule::Karpenter { requirements, taints } => (requirements, taints),
            FitRule::Template(node) => {
                return match feasible::unmet(placement, node) {
                    None => Ok(()),
                    Some(unmet) => Err(Incompatible::Node(unmet)),
                };
            }
        };
        if let Some(taint) = taints
            .iter()
            .find(|taint| !placement.tolerations.iter().any(|t| tolerates_taint(t, taint)))
        {
            return Err(Incompatible::Taint(taint.clone()));
        }
        let mut first = None;
        for term in Requirements::of_placement(placement) {
            match term.and_then(|pod| requirements.compatible(&pod)) {
                Ok(()) => return Ok(()),
                Err(why) => {
                    first.get_or_insert(why);
                }
            }
        }
        Err(Incompatible::Requirement(first.unwrap_or(RequirementUnmet::NoNewNode(
            "the pod's required node affinity matches no node",
        ))))
    }
}

/// The first resource of `limits` that `usage` has used up (remaining ≤ 0: Karpenter
/// can launch no instance type within it, `scheduling/scheduler.go`).
fn exhausted(
    limits: &BTreeMap<String, serde_json::Value>,
    usage: &BTreeMap<String, serde_json::Value>,
) -> Option<Unusable> {
    for (resource, limit) in limits {
        let Some(limit_value) = quantity(limit) else {
            return Some(Unusable::Invalid(format!(
                "spec.limits.{resource}: {limit} is not a quantity"
            )));
        };
        let Some(used) = usage.get(resource) else { continue };
        let Some(used_value) = quantity(used) else { continue };
        if used_value >= limit_value {
            let text = |v: &serde_json::Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            return Some(Unusable::LimitsExhausted {
                resource: resource.clone(),
                usage: text(used),
                limit: text(limit),
            });
        }
    }
    None
}

/// A Kubernetes quantity (`100`, `1.5`, `500m`, `64Gi`, `1e3`) as a number.
fn quantity(value: &serde_json::Value) -> Option<f64> {
    let text = match value {
        serde_json::Value::Number(n) => return n.as_f64(),
        serde_json::Value::String(s) => s.trim(),
        _ => return None,
    };
    const SUFFIXES: &[(&str, f64)] = &[
        ("Ki", 1024.0),
        ("Mi", 1_048_576.0),
        ("Gi", 1_073_741_824.0),
        ("Ti", 1_099_511_627_776.0),
        ("Pi", 1_125_899_906_842_624.0),
        ("Ei", 1_152_921_504_606_846_976.0),
        ("n", 1e-9),
        ("u", 1e-6),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
    ];
    let (number, scale) = SUFFIXES
        .iter()
        .find_map(|(suffix, scale)| text.strip_suffix(suffix).map(|n| (n, *scale)))
        .unwrap_or((text, 1.0));
    let plain = number.strip_prefix(['+', '-']).unwrap_or(number);
    if plain.is_empty()
        || !plain
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
    {
        return None;
    }
    number.parse::<f64>().ok().filter(|n| n.is_finite()).map(|n| n * scale)
}

/// The NodePools that could create a node `placement` could land on, as provisioners
/// (`nodepool/NAME`), in the order given.
pub fn provisioners<'a>(pools: impl IntoIterator<Item = &'a Provisioner>, placement: &Placement<'_>) -> Vec<Box<str>> {
    pools
        .into_iter()
        .filter(|pool| pool.compatible(placement).is_ok())
        .map(|pool| pool.provisioner().into_boxed_str())
        .collect()
}

/// The provisioners of a group's own placement: the compatible NodePools, then the
/// group's declaration.
pub fn of_group<'a>(group: &Group, pools: impl IntoIterator<Item = &'a Provisioner>) -> Vec<String> {
    let mut by: Vec<String> = provisioners(pools, &Placement::of_group(group))
        .into_iter()
        .map(String::from)
        .collect();
    if group.nodes.provisioned_on_demand {
        by.push(DECLARED_PROVISIONER.to_owned());
    }
    by
}

/// For each of `pools`: `Ok(provisioner)` when it could create a node `placement` could
/// land on, `Err((provisioner, why not))` otherwise — [`NodeView::node_pools_for`]'s answer.
pub fn assess<'a>(
    pools: impl IntoIterator<Item = &'a Provisioner>,
    placement: &Placement<'_>,
) -> Vec<Result<String, (String, String)>> {
    pools
        .into_iter()
        .map(|pool| match pool.compatible(placement) {
            Ok(()) => Ok(pool.provisioner()),
            Err(why) => Err((pool.provisioner(), why.to_string())),
        })
        .collect()
}

/// A [`NodeView`] with NodePools beside it (`explain --nodes`, tests): the nodes' answers,
/// and provisioners found among `pools` (not remembered).
#[derive(Debug)]
pub struct WithProvisioners<'a> {
    pub nodes: &'a dyn NodeView,
    pub pools: &'a [Arc<Provisioner>],
}

impl NodeView for WithProvisioners<'_> {
    fn feasible_keyed(&self, placement: &Placement<'_>, key: u64) -> Option<usize> {
        self.nodes.feasible_keyed(placement, key)
    }

    fn remembered(&self, key: u64, count: &mut dyn FnMut() -> Option<usize>) -> Option<usize> {
        self.nodes.remembered(key, count)
    }

    fn total(&self) -> Option<usize> {
        self.nodes.total()
    }

    fn node(&self, name: &str) -> NodeLookup {
        self.nodes.node(name)
    }

    fn count_where(&self, keep: &dyn Fn(&NodeInfo) -> bool) -> Option<usize> {
        self.nodes.count_where(keep)
    }

    fn node_pools_for(&self, spec: &PodSpec) -> Vec<Result<String, (String, String)>> {
        assess(self.pools.iter().map(|p| &**p), &Placement::of_spec(spec))
    }

    fn provisioners(&self, _key: u64, spec: &mut dyn FnMut() -> Option<PodSpec>) -> Arc<[Box<str>]> {
        match spec().filter(|_| !self.pools.is_empty()) {
            Some(spec) => provisioners(self.pools.iter().map(|p| &**p), &Placement::of_spec(&spec)).into(),
            None => Arc::from([]),
        }
    }
}

#[cfg(test)]
mod tests;
