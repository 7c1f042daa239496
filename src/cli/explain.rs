//! `pod-director explain`: offline, what would pod-director do to the pods in
//! these manifests? Namespaces supply labels; Pods and the pod templates of
//! workloads are decided exactly as `/mutate` and `/validate` would, with no
//! requester (nobody is asking offline): the skips that depend on who creates a
//! pod in a live cluster (mirror pods by their node, DaemonSet pods by the
//! DaemonSet controller) do not apply, and each report says when one would. With
//! `--nodes`, Node manifests give each pod its feasible-node counts (placement
//! only) and the nodes `spec.nodeName` is checked against. Every pod is also decided
//! against the other groups' reservations, as `/validate-reservation` would.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde::Serialize;
use serde_json::Value;

use self::render::render_text;
use super::{ExplainArgs, FailOn, OutputFormat};
use pod_director_engine::config::{Config, Mode};
use pod_director_engine::decision::{self, Subject as Decided, View};
use pod_director_engine::placement::provision::{Provisioner, Unusable, WithProvisioners};
use pod_director_engine::placement::reservation;
use pod_director_engine::placement::{
    self, Context, Decision, FEASIBILITY_SCOPE, Namespace, NodeInfo, NodeView, Resolution, Selection, SkipReason,
    Webhook,
};
use pod_director_engine::syntax;

mod render;

/// Bad input: exit code 2, nothing printed as success.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InputError {
    #[error("{0}")]
    Config(#[from] pod_director_engine::config::ConfigError),
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: document {index}: {message}")]
    Document {
        path: String,
        index: usize,
        message: String,
    },
    #[error("--group {0:?} is not a group of the configuration (groups: {1})")]
    UnknownGroup(String, String),
    #[error("--namespace {0:?} is not a valid namespace name: {1}")]
    BadNamespace(String, String),
}

/// One manifest object, with where it came from.
struct Source {
    path: String,
    index: usize,
    object: Value,
}

/// A pod to decide: a Pod, or a workload's template made into one.
struct Candidate {
    namespace: String,
    name: String,
    kind: String,
    source: String,
    /// Read as a full Pod (explain checks manifests strictly), decided through its placement fields.
    pod: placement::Pod,
}

#[derive(Debug, Serialize)]
struct Report {
    namespace: String,
    name: String,
    kind: String,
    source: String,
    group: Option<String>,
    mode: Option<Mode>,
    /// The group's placement the pod chose (groups offering alternatives): a name, or `default`.
    #[serde(skip_serializing_if = "Option::is_none")]
    alternative: Option<String>,
    decision: PodVerdict,
    patch: Value,
    conflicts: Vec<ConflictView>,
    violations: Vec<ViolationView>,
    reason: String,
    /// With `--nodes`: feasible nodes after the would-be patch, and before it.
    #[serde(skip_serializing_if = "Option::is_none")]
    feasible_nodes: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    feasible_nodes_before: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    no_feasible_node: Option<bool>,
    /// With no feasible node: who could create one on demand (`nodepool/NAME`, `declared/provisionedOnDemand`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    provisionable_by: Vec<String>,
    /// A skip this pod would get in a live cluster only from the right requester, or null.
    requester_dependent: Option<String>,
    /// The reservations of other groups the pod intrudes on (`/validate-reservation`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    reservation: Vec<String>,
}

/// A pod's decision, or why it has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PodVerdict {
    Decided(Decision),
    /// Its namespace is not in the input (and no `--group`).
    Unresolved,
}

impl PodVerdict {
    fn as_str(self) -> &'static str {
        match self {
            PodVerdict::Decided(decision) => decision.as_str(),
            PodVerdict::Unresolved => "unresolved",
        }
    }

    fn denies(self) -> bool {
        matches!(self, PodVerdict::Decided(Decision::Denied | Decision::WouldDeny))
    }

    fn patches(self) -> bool {
        matches!(self, PodVerdict::Decided(Decision::Patched | Decision::WouldPatch))
    }
}

impl Serialize for PodVerdict {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

fn resolution<S: serde::Serializer>(resolution: &Resolution, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(resolution.as_str())
}

#[derive(Debug, Serialize)]
struct ConflictView {
    field: String,
    pod: String,
    group: String,
    #[serde(serialize_with = "resolution")]
    resolution: Resolution,
}

#[derive(Debug, Serialize)]
struct ViolationView {
    field: String,
    message: String,
}

pub fn run(args: &ExplainArgs) -> ExitCode {
    if args.policies {
        return super::policies::run(args);
    }
    match explain(args) {
        Ok((reports, failed)) => {
            let text = match args.output {
                OutputFormat::Json => match serde_json::to_string_pretty(&reports) {
                    Ok(text) => format!("{text}\n"),
                    Err(err) => {
                        eprintln!("error: cannot render JSON: {err}");
                        return ExitCode::from(2);
                    }
                },
                OutputFormat::Yaml => match serde_saphyr::to_string(&reports) {
                    Ok(text) => text,
                    Err(err) => {
                        eprintln!("error: cannot render YAML: {err}");
                        return ExitCode::from(2);
                    }
                },
                OutputFormat::Text => render_text(&reports, !args.nodes.is_empty()),
            };
            let decided = if failed { ExitCode::from(1) } else { ExitCode::SUCCESS };
            super::stdout::emit(&text, decided, 2)
        }
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(2)
        }
    }
}

fn explain(args: &ExplainArgs) -> Result<(Vec<Report>, bool), InputError> {
    let path = Config::resolve_path(args.config.as_deref());
    let config = pod_director_engine::config::load_config(&path, args.pod_director_namespace.as_deref())?.config;
    if let Some(g) = &args.group
        && !config.groups.contains_key(g)
    {
        let names: Vec<&str> = config.groups.keys().map(String::as_str).collect();
        return Err(InputError::UnknownGroup(g.clone(), names.join(", ")));
    }
    let default_ns = args.namespace.clone().unwrap_or_else(|| "default".to_owned());
    if let Some(reason) = syntax::dns1123_label(&default_ns) {
        return Err(InputError::BadNamespace(default_ns, reason));
    }
    let mut sources = Vec::new();
    for path in &args.files {
        read_path(path, &mut sources)?;
    }
    let mut namespaces: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut candidates = Vec::new();
    for source in &sources {
        collect(source, &default_ns, &mut namespaces, &mut candidates)?;
    }
    let nodes = read_nodes(&args.nodes)?;
    let with_pools = nodes.as_ref().map(|(nodes, pools)| WithProvisioners {
        nodes: nodes as &dyn NodeView,
        pools,
    });
    let view = with_pools.as_ref().map(|n| n as &dyn NodeView);
    let reports: Vec<Report> = candidates
        .into_iter()
        .map(|c| decide(&config, args.group.as_deref(), &namespaces, view, c))
        .collect();
    let failed = args.fail_on.is_some_and(|fail_on| {
        reports.iter().any(|r| match fail_on {
            FailOn::Deny => r.decision.denies(),
            FailOn::Patch => r.decision.denies() || r.decision.patches(),
        })
    });
    Ok((reports, failed))
}

/// The nodes and Karpenter NodePools of `--nodes`.
type NodesRead = (Vec<Arc<NodeInfo>>, Vec<Arc<Provisioner>>);

/// The Node and Karpenter NodePool manifests of `--nodes` (`None` when not given): Nodes,
/// NodePools (`karpenter.sh/v1`), Lists of them (`kubectl get nodes,nodepools -o yaml`),
/// directories of either. Other kinds are refused.
fn read_nodes(paths: &[PathBuf]) -> Result<Option<NodesRead>, InputError> {
    if paths.is_empty() {
        return Ok(None);
    }
    let mut sources = Vec::new();
    for path in paths {
        read_path(path, &mut sources)?;
    }
    let mut nodes: BTreeMap<String, Arc<NodeInfo>> = BTreeMap::new();
    let mut pools: BTreeMap<String, Arc<Provisioner>> = BTreeMap::new();
    for source in sources {
        let err = |message: String| InputError::Document {
            path: source.path.clone(),
            index: source.index,
            message,
        };
        let kind = source.object.get("kind").and_then(Value::as_str).unwrap_or_default();
        let api_version = source
            .object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let name = source
            .object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let pool = match (kind, api_version.split('/').next().unwrap_or_default()) {
            ("NodePool", "karpenter.sh") if api_version == "karpenter.sh/v1" => {
                Some(Some(Provisioner::karpenter(&source.object)))
            }
            ("MachineDeployment" | "MachineSet", "cluster.x-k8s.io") => {
                Some(Provisioner::node_group(kind, &source.object))
            }
            _ => None,
        };
        if let Some(pool) = pool {
            if name.is_empty() {
                return Err(err(format!("a {kind} without metadata.name")));
            }
            // A MachineDeployment the autoscaler does not scale provisions nothing.
            let Some(pool) = pool else { continue };
            if let Some(Unusable::Invalid(why)) = &pool.unusable {
                return Err(err(format!("cannot read {kind} {name}: {why}")));
            }
            pools.insert(pool.name.to_string(), Arc::new(pool));
            continue;
        }
        if kind != "Node" {
            return Err(err(format!(
                "--nodes reads Node manifests and provisioners (NodePool karpenter.sh/v1, MachineDeployment and \
                 MachineSet cluster.x-k8s.io); this is a {kind} ({api_version})"
            )));
        }
        let node: k8s_openapi::api::core::v1::Node =
            serde_json::from_value(source.object).map_err(|e| err(format!("cannot read Node: {e}")))?;
        let info = NodeInfo::from_node(&node);
        if info.name.is_empty() {
            return Err(err("a Node without metadata.name".to_owned()));
        }
        nodes.insert(info.name.to_string(), Arc::new(info));
    }
    Ok(Some((nodes.into_values().collect(), pools.into_values().collect())))
}

fn read_path(path: &Path, out: &mut Vec<Source>) -> Result<(), InputError> {
    let shown = path.display().to_string();
    let read_err = |source| InputError::Read {
        path: shown.clone(),
        source,
    };
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(read_err)?;
        return parse_documents("(stdin)", &text, out);
    }
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(read_err)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.is_dir()
                    || p.extension()
                        .and_then(|e| e.to_str())
                        .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
            })
            .collect();
        entries.sort();
        for entry in entries {
            read_path(&entry, out)?;
        }
        return Ok(());
    }
    let text = std::fs::read_to_string(path).map_err(read_err)?;
    parse_documents(&shown, &text, out)
}

/// Splits a YAML stream on `---` lines; each document is parsed on its own so
/// errors can name it (1-based index).
fn parse_documents(path: &str, text: &str, out: &mut Vec<Source>) -> Result<(), InputError> {
    let mut docs: Vec<String> = vec![String::new()];
    for line in text.lines() {
        if line.starts_with("---") && line[3..].trim().is_empty() {
            docs.push(String::new());
        } else if let Some(last) = docs.last_mut() {
            last.push_str(line);
            last.push('\n');
        }
    }
    for (i, doc) in docs.iter().enumerate() {
        let index = i + 1;
        let meaningful = doc.lines().any(|l| {
            let t = l.trim();
            !t.is_empty() && !t.starts_with('#') && t != "..."
        });
        if !meaningful {
            continue;
        }
        let value: Value = serde_saphyr::from_str(doc).map_err(|e| InputError::Document {
            path: path.to_owned(),
            index,
            message: format!("not valid YAML/JSON: {e}"),
        })?;
        let err = |message: &str| InputError::Document {
            path: path.to_owned(),
            index,
            message: message.to_owned(),
        };
        match &value {
            Value::Null => continue,
            Value::Object(map) => {
                if map.get("kind").is_none_or(|k| k.as_str().is_none_or(str::is_empty)) {
                    return Err(err("missing kind: every manifest needs `kind` (and `apiVersion`)"));
                }
                if map.get("kind").and_then(Value::as_str) == Some("List") {
                    for item in map.get("items").and_then(Value::as_array).into_iter().flatten() {
                        if item.get("kind").and_then(Value::as_str).is_none() {
                            return Err(err("a List item is missing kind"));
                        }
                        out.push(Source {
                            path: path.to_owned(),
                            index,
                            object: item.clone(),
                        });
                    }
                    continue;
                }
            }
            _ => return Err(err("expected a Kubernetes object (a mapping with kind)")),
        }
        out.push(Source {
            path: path.to_owned(),
            index,
            object: value,
        });
    }
    Ok(())
}

/// Where a workload keeps its pod template, and the owner its pods get.
fn template_of(kind: &str) -> Option<(&'static [&'static str], &'static str)> {
    match kind {
        "Deployment" => Some((&["spec", "template"], "ReplicaSet")),
        "ReplicaSet" => Some((&["spec", "template"], "ReplicaSet")),
        "StatefulSet" => Some((&["spec", "template"], "StatefulSet")),
        "DaemonSet" => Some((&["spec", "template"], "DaemonSet")),
        "Job" => Some((&["spec", "template"], "Job")),
        "CronJob" => Some((&["spec", "jobTemplate", "spec", "template"], "Job")),
        _ => None,
    }
}

fn collect(
    source: &Source,
    default_ns: &str,
    namespaces: &mut BTreeMap<String, BTreeMap<String, String>>,
    candidates: &mut Vec<Candidate>,
) -> Result<(), InputError> {
    let obj = &source.object;
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    let meta = obj.get("metadata");
    let text = |key: &str| meta.and_then(|m| m.get(key)).and_then(Value::as_str);
    let err = |message: String| InputError::Document {
        path: source.path.clone(),
        index: source.index,
        message,
    };
    let name = text("name")
        .map(str::to_owned)
        .or_else(|| text("generateName").map(|g| format!("{g}*")))
        .unwrap_or_else(|| "(unnamed)".to_owned());
    let namespace = text("namespace").unwrap_or(default_ns).to_owned();
    let mut pod: Pod = match kind {
        "Namespace" => {
            let labels: BTreeMap<String, String> = meta
                .and_then(|m| m.get("labels"))
                .map(|l| serde_json::from_value(l.clone()))
                .transpose()
                .map_err(|e| err(format!("Namespace {name}: labels must be a map of strings: {e}")))?
                .unwrap_or_default();
            namespaces.insert(name, labels);
            return Ok(());
        }
        "Pod" => serde_json::from_value(obj.clone()).map_err(|e| err(format!("cannot read Pod {name}: {e}")))?,
        _ => {
            let Some((path, owner_kind)) = template_of(kind) else {
                return Ok(());
            };
            let template = path
                .iter()
                .try_fold(obj, |v, k| v.get(*k))
                .ok_or_else(|| err(format!("{kind} {name} has no pod template at .{}", path.join("."))))?;
            let mut pod_json = serde_json::json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": template.get("metadata").cloned().unwrap_or_else(|| serde_json::json!({})),
                "spec": template.get("spec").cloned().unwrap_or(Value::Null),
            });
            pod_json["metadata"]["namespace"] = Value::String(namespace.clone());
            let mut pod: Pod = serde_json::from_value(pod_json)
                .map_err(|e| err(format!("cannot read the pod template of {kind} {name}: {e}")))?;
            // A DaemonSet is decided as the object it is (its template), like /mutate does;
            // other templates get the owner their real pods will have.
            if kind != "DaemonSet" {
                pod.metadata.owner_references = Some(vec![OwnerReference {
                    api_version: if owner_kind == "Job" { "batch/v1" } else { "apps/v1" }.to_owned(),
                    kind: owner_kind.to_owned(),
                    name: name.clone(),
                    controller: Some(true),
                    ..OwnerReference::default()
                }]);
            }
            pod
        }
    };
    as_stored(&mut pod);
    candidates.push(Candidate {
        namespace,
        name,
        kind: kind.to_owned(),
        source: format!("{}#{}", source.path, source.index),
        pod: placement::Pod::from(&pod),
    });
    Ok(())
}

/// The placement fields as the API server stores them, so that offline is online: it
/// drops an empty list or map of an `omitempty` field (`matchExpressions: []` of a node
/// selector term is stored, and sent to webhooks, as `{}`; so are an empty
/// `nodeSelector`, `tolerations` or list of preferred terms).
fn as_stored(pod: &mut Pod) {
    fn drop_empty<T>(list: &mut Option<Vec<T>>) {
        if list.as_ref().is_some_and(Vec::is_empty) {
            *list = None;
        }
    }
    fn term(term: &mut k8s_openapi::api::core::v1::NodeSelectorTerm) {
        drop_empty(&mut term.match_expressions);
        drop_empty(&mut term.match_fields);
        for requirement in term
            .match_expressions
            .iter_mut()
            .chain(term.match_fields.iter_mut())
            .flatten()
        {
            drop_empty(&mut requirement.values);
        }
    }
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    if spec.node_selector.as_ref().is_some_and(BTreeMap::is_empty) {
        spec.node_selector = None;
    }
    drop_empty(&mut spec.tolerations);
    if let Some(node) = spec.affinity.as_mut().and_then(|a| a.node_affinity.as_mut()) {
        if let Some(required) = node.required_during_scheduling_ignored_during_execution.as_mut() {
            required.node_selector_terms.iter_mut().for_each(term);
        }
        drop_empty(&mut node.preferred_during_scheduling_ignored_during_execution);
        for preferred in node
            .preferred_during_scheduling_ignored_during_execution
            .iter_mut()
            .flatten()
        {
            term(&mut preferred.preference);
        }
    }
}

fn decide(
    config: &Config,
    group: Option<&str>,
    namespaces: &BTreeMap<String, BTreeMap<String, String>>,
    nodes: Option<&dyn NodeView>,
    c: Candidate,
) -> Report {
    let forced;
    let labels = match (group, namespaces.get(&c.namespace)) {
        (Some(g), _) => {
            forced = BTreeMap::from([(config.namespace_label.clone(), g.to_owned())]);
            Some(&forced)
        }
        (None, found) => found,
    };
    let empty = BTreeMap::new();
    let excluded = config.excluded_namespaces.contains(&c.namespace);
    let Some(labels) = labels.or(excluded.then_some(&empty)) else {
        return Report {
            namespace: c.namespace.clone(),
            name: c.name,
            kind: c.kind,
            source: c.source,
            group: None,
            mode: None,
            alternative: None,
            decision: PodVerdict::Unresolved,
            patch: Value::Array(Vec::new()),
            conflicts: Vec::new(),
            violations: Vec::new(),
            reason: format!(
                "namespace {:?} is not in the input: add its Namespace manifest, or pass --group",
                c.namespace
            ),
            feasible_nodes: None,
            feasible_nodes_before: None,
            no_feasible_node: None,
            provisionable_by: Vec::new(),
            requester_dependent: None,
            reservation: Vec::new(),
        };
    };
    let ns = Namespace {
        name: &c.namespace,
        labels,
    };
    let context = Context::offline().with_nodes(nodes);
    let daemon_set = c.kind == "DaemonSet";
    let subject = match daemon_set {
        true => Decided::DaemonSet {
            template: &c.pod,
            old: None,
        },
        false => Decided::Pod { pod: &c.pod, old: None },
    };
    let view = View {
        config,
        namespace: &ns,
        context: &context,
    };
    let mutation = decision::decide(Webhook::Mutate, &subject, &view);
    let validation = decision::decide(Webhook::Validate, &subject, &view);
    // A DaemonSet's pods are decided by the reservation when created; its template here, as a pod.
    let reserved = decision::decide(
        Webhook::ValidateReservation,
        &Decided::Pod { pod: &c.pod, old: None },
        &view,
    );
    let mut requester_dependent = requester_dependent(config, &ns, &c, &mutation);
    let mut reason = match &mutation.skip_reason {
        Some(SkipReason::NotApplicable(why)) => why.clone(),
        Some(_) => mutation.summary.trim_start_matches("skipped: ").to_owned(),
        None => mutation.message.clone().unwrap_or_else(|| mutation.summary.clone()),
    };
    // /validate checks spec.nodeName; its denial is the pod's fate even when /mutate admits it.
    let node_name = c
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty());
    let mut decision = mutation.decision;
    if mutation.allowed()
        && mutation.decision != Decision::Skipped
        && validation.violations.iter().any(|v| v.field == "spec.nodeName")
        && matches!(validation.decision, Decision::Denied | Decision::WouldDeny)
    {
        decision = validation.decision;
        reason = validation.message.clone().unwrap_or_else(|| validation.summary.clone());
    } else if let (Some(node), None, Some(_)) = (node_name, nodes, &mutation.group) {
        reason = format!("{reason} (spec.nodeName {node} not checked: pass --nodes)");
    }
    // Another group's reservation refuses the pod whatever its own group makes of it.
    let mut group = mutation.group.clone();
    let mut mode = mutation.mode;
    if matches!(reserved.decision, Decision::Denied | Decision::WouldDeny)
        && !matches!(decision, Decision::Denied | Decision::WouldDeny)
    {
        decision = reserved.decision;
        reason = reserved.message.clone().unwrap_or_else(|| reserved.summary.clone());
        group = reserved.group.clone();
        mode = reserved.mode;
        if daemon_set && reservation::reservations(config).any(|r| r.reserve.allow_daemon_sets) {
            requester_dependent = Some(format!(
                "daemonset_pod: the reservations with allowDaemonSets admit its pods when the DaemonSet controller \
                 ({}) creates them; decided here as a user's pod",
                config.daemon_set_controller
            ));
        }
    }
    Report {
        namespace: c.namespace,
        name: c.name,
        kind: c.kind,
        source: c.source,
        group,
        mode,
        alternative: mutation.alternative.clone(),
        decision: PodVerdict::Decided(decision),
        patch: mutation.patch_json(),
        conflicts: mutation
            .conflicts
            .iter()
            .map(|c| ConflictView {
                field: c.field.clone(),
                pod: c.pod.clone(),
                group: c.group.clone(),
                resolution: c.resolution,
            })
            .collect(),
        violations: if mutation.decision == Decision::Skipped {
            Vec::new()
        } else {
            validation
                .violations
                .iter()
                .map(|v| ViolationView {
                    field: v.field.clone(),
                    message: v.message.clone(),
                })
                .collect()
        },
        reason,
        feasible_nodes: mutation.feasible_nodes,
        feasible_nodes_before: mutation.feasible_nodes_before,
        no_feasible_node: mutation.feasible_nodes.map(|_| mutation.no_feasible_node),
        provisionable_by: mutation.provisionable_by.clone(),
        requester_dependent,
        reservation: reserved.reservation.iter().map(ToString::to_string).collect(),
    }
}

/// The skip a pod would get in a live cluster from the right requester only, if any.
fn requester_dependent(
    config: &Config,
    ns: &Namespace<'_>,
    c: &Candidate,
    mutation: &placement::Outcome,
) -> Option<String> {
    let Selection::Group { group, .. } = placement::select_group(config, ns) else {
        return None;
    };
    if mutation.skip_reason == Some(SkipReason::DaemonSetAllowed) {
        return Some(format!(
            "daemonset_pod: its pods are skipped when the DaemonSet controller ({}) creates them",
            config.daemon_set_controller
        ));
    }
    if c.kind != "Pod" || mutation.decision == Decision::Skipped {
        return None;
    }
    if placement::has_mirror_annotation(&c.pod) {
        return Some(
            "mirror_pod: skipped only when its node creates it (system:node:NAME in group system:nodes); \
             decided here as a user's pod"
                .to_owned(),
        );
    }
    if group.allow_daemon_sets && placement::has_daemon_set_controller_reference(&c.pod) {
        return Some(format!(
            "daemonset_pod: skipped only when the DaemonSet controller ({}) creates it; decided here as a user's pod",
            config.daemon_set_controller
        ));
    }
    None
}

#[cfg(test)]
mod front_ends_tests;
