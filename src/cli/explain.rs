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
use std::process::ExitCode;

use serde::Serialize;
use serde_json::Value;

use self::manifests::{Candidate, Manifested, collect, read_nodes, read_path};
use self::render::render_text;
use super::{ExplainArgs, FailOn, OutputFormat};
use pod_director_engine::config::{Config, Mode};
use pod_director_engine::decision::{self, Fate, View};
use pod_director_engine::placement::{
    Conflict, Context, Decision, FEASIBILITY_SCOPE, Namespace, NodeView, Resolution, Violation, Webhook,
};
use pod_director_engine::provision::WithProvisioners;
use pod_director_engine::syntax;

mod manifests;
mod migrate;
mod render;

pub(super) use self::migrate::migrate_in_tree;

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
    #[error("{0}")]
    UnknownGroup(#[from] super::UnknownGroup),
    #[error("--namespace {0:?} is not a valid namespace name: {1}")]
    BadNamespace(String, String),
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
    /// The in-tree plugins' decision (`inTreePlugins`): `/mutate-in-tree`'s, or `/validate-in-tree`'s
    /// refusal of the pod the groups' `/mutate` leaves.
    #[serde(skip_serializing_if = "Option::is_none")]
    in_tree: Option<InTreeView>,
}

/// The in-tree plugins' decision of a pod.
#[derive(Debug, Serialize)]
struct InTreeView {
    mode: Option<Mode>,
    decision: PodVerdict,
    patch: Value,
    reason: String,
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

pub(crate) fn run(args: &ExplainArgs) -> ExitCode {
    if args.policies {
        return super::policies::run(args);
    }
    match explain(args) {
        Ok((_, differ, Some(compared))) => {
            super::stdout::emit(&compared, if differ { ExitCode::from(1) } else { ExitCode::SUCCESS }, 2)
        }
        Ok((reports, failed, None)) => {
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

fn explain(args: &ExplainArgs) -> Result<(Vec<Report>, bool, Option<String>), InputError> {
    let path = Config::resolve_path(args.config.as_deref());
    let config = pod_director_engine::config::load_config(&path, args.pod_director_namespace.as_deref())?.config;
    super::named_group(&config, args.group.as_deref())?;
    let default_ns = args.namespace.clone().unwrap_or_else(|| "default".to_owned());
    if let Some(reason) = syntax::dns1123_label(&default_ns) {
        return Err(InputError::BadNamespace(default_ns, reason));
    }
    let mut sources = Vec::new();
    for path in &args.files {
        read_path(path, &mut sources)?;
    }
    let mut namespaces: BTreeMap<String, Manifested> = BTreeMap::new();
    let mut candidates = Vec::new();
    for source in &sources {
        collect(source, &default_ns, &mut namespaces, &mut candidates)?;
    }
    if args.compare_in_tree {
        let (text, differ) = migrate::compare(&config, &namespaces, &candidates);
        return Ok((vec![], differ, Some(text)));
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
    Ok((reports, failed, None))
}

fn decide(
    config: &Config,
    group: Option<&str>,
    namespaces: &BTreeMap<String, Manifested>,
    nodes: Option<&dyn NodeView>,
    c: Candidate,
) -> Report {
    let (forced, empty) = (
        group.map(|g| BTreeMap::from([(config.namespace_label.clone(), g.to_owned())])),
        BTreeMap::new(),
    );
    let found = namespaces.get(&c.namespace);
    let annotations = found.map_or(&empty, |(_, annotations)| annotations);
    let excluded = config.excluded_namespaces.contains(&c.namespace);
    let labels = forced.as_ref().or(found.map(|(labels, _)| labels));
    let Some(labels) = labels.or(excluded.then_some(&empty)) else {
        return Report::unresolved(c);
    };
    let namespace = Namespace::new(&c.namespace, labels).with_annotations(annotations);
    let context = Context::offline().with_nodes(nodes);
    let view = View {
        config,
        namespace: &namespace,
        context: &context,
    };
    let fate = decision::fate(&c.subject(), &view);
    Report::of(c, &fate, nodes.is_some())
}

impl Report {
    /// The report of a pod whose namespace is not in the input (and no `--group`).
    fn unresolved(c: Candidate) -> Self {
        let reason = format!(
            "namespace {:?} is not in the input: add its Namespace manifest, or pass --group",
            c.namespace
        );
        Self {
            namespace: c.namespace,
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
            reason,
            feasible_nodes: None,
            feasible_nodes_before: None,
            no_feasible_node: None,
            provisionable_by: Vec::new(),
            requester_dependent: None,
            reservation: Vec::new(),
            in_tree: None,
        }
    }

    /// The report of a pod's fate: the decision that decides it, `/mutate`'s patch, conflicts and
    /// counts, `/validate`'s violations, the reservations it intrudes on.
    fn of(c: Candidate, fate: &Fate, with_nodes: bool) -> Self {
        let (mutation, deciding) = (&fate.mutation, fate.deciding());
        let mut reason = decision::reason(deciding);
        let node_name = c.pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
        if let (Some(node), false, Some(_), Webhook::Mutate) = (
            node_name.filter(|n| !n.is_empty()),
            with_nodes,
            &mutation.group,
            deciding.webhook,
        ) {
            reason = format!("{reason} (spec.nodeName {node} not checked: pass --nodes)");
        }
        let skipped = mutation.decision == Decision::Skipped;
        Self {
            namespace: c.namespace,
            name: c.name,
            kind: c.kind,
            source: c.source,
            group: deciding.group.clone(),
            mode: deciding.mode,
            alternative: mutation.alternative.clone(),
            decision: PodVerdict::Decided(deciding.decision),
            patch: mutation.patch_json(),
            conflicts: mutation.conflicts.iter().map(ConflictView::from).collect(),
            violations: match skipped {
                true => Vec::new(),
                false => fate.validation.violations.iter().map(ViolationView::from).collect(),
            },
            reason,
            feasible_nodes: mutation.feasible_nodes,
            feasible_nodes_before: mutation.feasible_nodes_before,
            no_feasible_node: mutation.feasible_nodes.map(|_| mutation.no_feasible_node),
            provisionable_by: mutation.provisionable_by.clone(),
            requester_dependent: fate.requester_dependent.clone(),
            reservation: fate.reservation.reservation.iter().map(ToString::to_string).collect(),
            in_tree: (fate.in_tree.decision != Decision::Skipped || fate.in_tree.mode.is_some()).then(|| InTreeView {
                mode: fate.in_tree.mode,
                decision: PodVerdict::Decided(fate.in_tree.decision),
                patch: fate.in_tree.patch_json(),
                reason: decision::reason(&fate.in_tree),
            }),
        }
    }
}

impl From<&Conflict> for ConflictView {
    fn from(c: &Conflict) -> Self {
        Self {
            field: c.field.clone(),
            pod: c.pod.clone(),
            group: c.group.clone(),
            resolution: c.resolution,
        }
    }
}

impl From<&Violation> for ViolationView {
    fn from(v: &Violation) -> Self {
        Self {
            field: v.field.clone(),
            message: v.message.clone(),
        }
    }
}

#[cfg(test)]
mod tests;
