//! `explain`'s input: the manifests of `-f` (Namespaces, Pods, workloads' pod templates, as the
//! API server would store them) and of `--nodes` (Nodes, the provisioners of on-demand nodes).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::Value;

use super::InputError;
use pod_director_engine::decision::{Subject, Write};
use pod_director_engine::placement::{self, NodeInfo};
use pod_director_engine::provision::{Provisioner, Unusable};

/// One manifest object, with where it came from.
pub(super) struct Manifest {
    pub(super) path: String,
    pub(super) index: usize,
    pub(super) object: Value,
}

/// A pod to decide: a Pod, or a workload's template made into one.
pub(super) struct Candidate {
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) kind: String,
    pub(super) source: String,
    /// Read as a full Pod (explain checks manifests strictly), decided through its placement fields.
    pub(super) pod: placement::Pod,
}

impl Candidate {
    /// What the engine decides: a Pod's creation, a DaemonSet (its template), or another
    /// workload's template as the pods its controller creates.
    pub(super) fn subject(&self) -> Subject<'_> {
        match self.kind.as_str() {
            "Pod" => Subject::Pod(Write::Create(&self.pod)),
            "DaemonSet" => Subject::DaemonSet(Write::Create(&self.pod)),
            _ => Subject::Template(&self.pod),
        }
    }
}

/// The nodes and Karpenter NodePools of `--nodes`.
pub(super) type NodesRead = (Vec<Arc<NodeInfo>>, Vec<Arc<Provisioner>>);

/// The Node and Karpenter NodePool manifests of `--nodes` (`None` when not given): Nodes,
/// NodePools (`karpenter.sh/v1`), Lists of them (`kubectl get nodes,nodepools -o yaml`),
/// directories of either. Other kinds are refused.
pub(super) fn read_nodes(paths: &[PathBuf]) -> Result<Option<NodesRead>, InputError> {
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

pub(super) fn read_path(path: &Path, out: &mut Vec<Manifest>) -> Result<(), InputError> {
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
fn parse_documents(path: &str, text: &str, out: &mut Vec<Manifest>) -> Result<(), InputError> {
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
                        out.push(Manifest {
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
        out.push(Manifest {
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

/// A namespace of the input: its labels, and its in-tree plugins' annotations.
pub(super) type Manifested = (BTreeMap<String, String>, BTreeMap<String, String>);

pub(super) fn collect(
    source: &Manifest,
    default_ns: &str,
    namespaces: &mut BTreeMap<String, Manifested>,
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
            let annotations: BTreeMap<String, String> = meta
                .and_then(|m| m.get("annotations"))
                .map(|a| serde_json::from_value(a.clone()))
                .transpose()
                .map_err(|e| err(format!("Namespace {name}: annotations must be a map of strings: {e}")))?
                .unwrap_or_default();
            let annotations = annotations
                .into_iter()
                .filter(|(key, _)| pod_director_engine::in_tree::ANNOTATIONS.contains(&key.as_str()))
                .collect();
            namespaces.insert(name, (labels, annotations));
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
