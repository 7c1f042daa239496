//! From a pod and its namespace to an [`Outcome`] for one webhook: which group
//! applies, whether the pod is skipped, and what the group's mode makes of the
//! plan (or of the violations, for `/validate`).

use std::collections::BTreeMap;

use super::choice::choose;
use super::feasible::{
    DECLARED_PROVISIONER, NodeLookup, NodeView, Placement, combine, group_fingerprint, unmet_by_bound_pod,
};
use super::{
    Context, Decision, MAX_SUMMARY_CHARS, Outcome, Pod, PodSpec, SkipReason, Violation, Webhook, truncate_chars,
};
use crate::config::{Config, Group, Mode, OnNoFeasibleNode, UnknownGroup};

/// Annotation the kubelet puts on the API mirror of a static pod.
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// What is being decided: a pod, or a DaemonSet's pod template (made into a pod).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Noun {
    Pod,
    DaemonSet,
    /// A pod being bound (`pods/binding`) to a node: its `spec.nodeName` is the Binding's target.
    Binding,
}

impl Noun {
    /// How messages name it.
    fn noun(self) -> &'static str {
        match self {
            Noun::Pod => "the pod",
            Noun::DaemonSet => "the DaemonSet's pod template",
            Noun::Binding => "the binding",
        }
    }

    /// How messages name the node the object names, and what to do instead.
    fn node_field(self) -> (&'static str, &'static str) {
        match self {
            Noun::Binding => (
                "binding target",
                "bind the pod to a node of the group, or leave it to the scheduler",
            ),
            _ => (
                "spec.nodeName",
                "remove spec.nodeName to let the scheduler choose a node of the group, or name one",
            ),
        }
    }
}

/// The namespace of the pod, as far as placement cares.
#[derive(Debug, Clone, Copy)]
pub struct Namespace<'a> {
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    /// The in-tree plugins' annotations ([`crate::in_tree::ANNOTATIONS`]; others may be left out).
    pub annotations: &'a BTreeMap<String, String>,
}

/// No annotation.
const NO_ANNOTATIONS: &BTreeMap<String, String> = &BTreeMap::new();

impl<'a> Namespace<'a> {
    /// The namespace `name` with `labels`, without annotations.
    pub fn new(name: &'a str, labels: &'a BTreeMap<String, String>) -> Self {
        Self {
            name,
            labels,
            annotations: NO_ANNOTATIONS,
        }
    }

    /// The namespace with `annotations`.
    pub fn with_annotations(self, annotations: &'a BTreeMap<String, String>) -> Self {
        Self { annotations, ..self }
    }
}

/// Which group a namespace selects.
#[derive(Debug, Clone, PartialEq)]
pub enum Selection<'c> {
    /// In `excludedNamespaces`.
    Excluded,
    /// No group label and no `defaultGroup`.
    NoGroup,
    Group {
        name: &'c str,
        group: &'c Group,
    },
    /// The label names a group the configuration does not define.
    Unknown {
        name: String,
    },
}

/// The group a namespace selects: its label value, else `defaultGroup`.
pub(crate) fn select_group<'c>(config: &'c Config, ns: &Namespace<'_>) -> Selection<'c> {
    if config.excluded_namespaces.iter().any(|n| n == ns.name) {
        return Selection::Excluded;
    }
    let name = match ns.labels.get(&config.namespace_label) {
        Some(value) => value.as_str(),
        None => match &config.default_group {
            Some(default) => default.as_str(),
            None => return Selection::NoGroup,
        },
    };
    match config.groups.get_key_value(name) {
        Some((name, group)) => Selection::Group { name, group },
        None => Selection::Unknown { name: name.to_owned() },
    }
}

fn skipped(mut out: Outcome, reason: SkipReason) -> Outcome {
    out.decision = Decision::Skipped;
    out.summary = format!("skipped: {reason}");
    out.skip_reason = Some(reason);
    out
}

/// Whether the pod carries the mirror-pod annotation (written by whoever creates it).
pub(crate) fn has_mirror_annotation(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION))
}

/// Whether the pod names an `apps/v1` DaemonSet as its controller (written by whoever creates it).
pub(crate) fn has_daemon_set_controller_reference(pod: &Pod) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet" && o.api_version == "apps/v1" && o.controller == Some(true))
}

/// The pod-level skip rules, in order; `None` when the pod is in scope. The
/// exemptions are keyed on the requester: the pod's annotations and owner
/// references only narrow them down.
fn pod_skip(config: &Config, group: &Group, pod: &Pod, ctx: &Context) -> Option<SkipReason> {
    if has_mirror_annotation(pod) && ctx.requester.node_name().is_some() {
        return Some(SkipReason::MirrorPod);
    }
    if pod.spec.is_none() {
        return Some(SkipReason::NotApplicable("the pod has no spec".to_owned()));
    }
    if group.allow_daemon_sets
        && ctx.requester.username == config.daemon_set_controller
        && has_daemon_set_controller_reference(pod)
    {
        return Some(SkipReason::DaemonSetPod);
    }
    if group.allow_pod_exclusion && exclusion_requested(config, pod) {
        return Some(SkipReason::ExclusionLabel);
    }
    None
}

fn exclusion_requested(config: &Config, pod: &Pod) -> bool {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(&config.pod_exclusion_label))
        .is_some_and(|v| v == "true")
}

/// Common start of both webhooks: the group, or a finished outcome.
fn scope<'c>(
    config: &'c Config,
    ns: &Namespace<'_>,
    pod: &Pod,
    object: Noun,
    ctx: &Context,
    webhook: Webhook,
) -> Result<(&'c str, &'c Group, Outcome), Box<Outcome>> {
    let mut out = Outcome::new(webhook, Decision::Noop);
    match select_group(config, ns) {
        Selection::Excluded => Err(Box::new(skipped(out, SkipReason::ExcludedNamespace))),
        Selection::NoGroup => Err(Box::new(skipped(out, SkipReason::NoGroup))),
        Selection::Unknown { name } => {
            let text = format!(
                "namespace {:?} selects group {name:?} ({}), which is not defined in pod-director's config",
                ns.name, config.namespace_label
            );
            out.group = Some(name);
            match config.unknown_group {
                UnknownGroup::Allow => {
                    out.decision = Decision::UnknownGroup;
                    out.warning = Some(truncate_chars(format!("pod-director: {text}"), MAX_SUMMARY_CHARS));
                    out.summary = truncate_chars(format!("unknown group: {text}"), MAX_SUMMARY_CHARS);
                }
                UnknownGroup::Deny => {
                    out.deny(true, format!("pod-director: {text} (unknownGroup: deny)"));
                    out.summary = truncate_chars(format!("denied: {text}"), MAX_SUMMARY_CHARS);
                }
            }
            Err(Box::new(out))
        }
        Selection::Group { name, group } => {
            out.group = Some(name.to_owned());
            out.mode = Some(config.mode_of(group));
            if object == Noun::DaemonSet && group.allow_daemon_sets {
                return Err(Box::new(skipped(out, SkipReason::DaemonSetAllowed)));
            }
            match pod_skip(config, group, pod, ctx) {
                Some(reason) => Err(Box::new(skipped(out, reason))),
                None => Ok((name, group, out)),
            }
        }
    }
}

fn verb(decision: Decision) -> &'static str {
    match decision {
        Decision::WouldPatch => "would ",
        _ => "",
    }
}

/// The /mutate decision for a pod being created.
pub(crate) fn mutate(config: &Config, ns: &Namespace<'_>, pod: &Pod, ctx: &Context) -> Outcome {
    mutate_object(config, ns, pod, None, Noun::Pod, ctx)
}

/// The /mutate decision for a DaemonSet being created or updated, on its pod
/// template made into a pod ([`super::template_pod`]): the same engine and
/// patch as for a pod, relative to the pod (re-root it with
/// [`Outcome::rerooted`] under `/spec/template`). On UPDATE (`old` given), a
/// conflict the old template already had does not deny the update.
pub(crate) fn mutate_daemon_set(
    config: &Config,
    ns: &Namespace<'_>,
    template: &Pod,
    old: Option<&Pod>,
    ctx: &Context,
) -> Outcome {
    mutate_object(config, ns, template, old, Noun::DaemonSet, ctx)
}

fn mutate_object(
    config: &Config,
    ns: &Namespace<'_>,
    pod: &Pod,
    old: Option<&Pod>,
    object: Noun,
    ctx: &Context,
) -> Outcome {
    let (name, scoped, mut out) = match scope(config, ns, pod, object, ctx, Webhook::Mutate) {
        Ok(scoped) => scoped,
        Err(done) => return with_feasibility(*done, pod, ctx, None),
    };
    let mode = config.mode_of(scoped);
    let chosen = choose(config, scoped, pod);
    let group = chosen.group.as_ref();
    out.alternative = chosen.name.map(str::to_owned);
    let plan = chosen.plan(pod);
    let enforce = mode == Mode::Enforce;
    out.conflicts = plan.conflicts.clone();
    let preexisting = |plan: &super::Plan| {
        old.is_some_and(|old| {
            let before = choose(config, scoped, old).plan(old).conflicts;
            plan.conflicts
                .iter()
                .filter(|c| c.resolution == super::Resolution::Rejected)
                .all(|c| before.contains(c))
        })
    };
    if plan.rejected() && preexisting(&plan) {
        out.decision = Decision::Noop;
        out.summary = truncate_chars(
            format!("{} conflict(s) predate this update; not denied", plan.conflicts.len()),
            MAX_SUMMARY_CHARS,
        );
    } else if plan.rejected() {
        let conflicts: Vec<String> = plan.conflicts.iter().map(ToString::to_string).collect();
        out.deny(
            enforce,
            format!(
                "pod-director: {} conflicts with placement group {name:?}: {}; remove or change {}'s own placement \
                 (the group's onConflict is reject)",
                object.noun(),
                conflicts.join("; "),
                object.noun()
            ),
        );
        out.summary = truncate_chars(
            format!(
                "{}conflict: {}",
                if enforce { "" } else { "would deny, " },
                conflicts.join("; ")
            ),
            MAX_SUMMARY_CHARS,
        );
    } else if plan.changes.is_empty() {
        out.decision = Decision::Noop;
        out.summary = "compliant: nothing to change".to_owned();
    } else {
        let changes = plan.describe_changes();
        out.patch_with(enforce, plan.into_patch());
        out.summary = truncate_chars(format!("{}{changes}", verb(out.decision)), MAX_SUMMARY_CHARS);
    }
    if exclusion_requested(config, pod) && !group.allow_pod_exclusion {
        out.summary = truncate_chars(
            format!("exclusion label ignored (group does not allow it); {}", out.summary),
            MAX_SUMMARY_CHARS,
        );
    }
    let patch = std::mem::take(&mut out.patch);
    out = with_feasibility(out, pod, ctx, Some((&patch, group)));
    out.patch = patch;
    if out.no_feasible_node && out.allowed() && out.decision != Decision::WouldDeny {
        no_feasible_node(config, name, group, mode, &mut out, ctx);
    }
    out.warning = warning(mode, name, &out);
    out
}

/// The pod's spec with `patch` applied to its placement fields; `None` when
/// the patch does not apply (it always does to the pod it was planned for).
fn patched_spec(spec: &PodSpec, patch: &json_patch::Patch) -> Option<PodSpec> {
    let mut placement = serde_json::Map::new();
    if let Some(selector) = &spec.node_selector {
        placement.insert("nodeSelector".to_owned(), serde_json::to_value(selector).ok()?);
    }
    if let Some(tolerations) = &spec.tolerations {
        placement.insert("tolerations".to_owned(), serde_json::to_value(tolerations).ok()?);
    }
    if let Some(affinity) = &spec.affinity {
        placement.insert("affinity".to_owned(), serde_json::to_value(affinity).ok()?);
    }
    let mut doc = serde_json::json!({ "spec": placement });
    json_patch::patch(&mut doc, patch).ok()?;
    serde_json::from_value(doc["spec"].take()).ok()
}

/// `pod` with `patch` (its group's plan) applied to its placement fields: the pod
/// enforce would have admitted. Borrowed when there is nothing to apply.
fn as_enforced<'p>(pod: &'p Pod, patch: &json_patch::Patch) -> std::borrow::Cow<'p, Pod> {
    let patched = pod
        .spec
        .as_ref()
        .filter(|_| !patch.0.is_empty())
        .and_then(|spec| patched_spec(spec, patch));
    match patched {
        Some(spec) => std::borrow::Cow::Owned(Pod {
            metadata: pod.metadata.clone(),
            spec: Some(PodSpec {
                node_name: spec
                    .node_name
                    .or_else(|| pod.spec.as_ref().and_then(|s| s.node_name.clone())),
                ..spec
            }),
            status_qos_class: pod.status_qos_class.clone(),
        }),
        None => std::borrow::Cow::Borrowed(pod),
    }
}

/// Records the feasible-node counts: before = the pod as given, after = with
/// `patch` (the group's plan) applied — the same when there is none. The count
/// after the patch is remembered by the pod's and the group's placement, so
/// the patch is applied only the first time a placement is seen.
fn with_feasibility(
    mut out: Outcome,
    pod: &Pod,
    ctx: &Context<'_>,
    patch: Option<(&json_patch::Patch, &Group)>,
) -> Outcome {
    let Some(nodes) = ctx.nodes else {
        return out;
    };
    let spec = super::spec_of(pod);
    let placement = Placement::of_spec(&spec);
    let fingerprint = placement.fingerprint();
    let before = nodes.feasible_keyed(&placement, fingerprint);
    let after = match patch.filter(|(p, _)| !p.0.is_empty()) {
        None => before,
        Some((patch, group)) => {
            let key = combine(fingerprint, group_fingerprint(group));
            nodes.remembered(key, &mut || {
                let patched = patched_spec(&spec, patch)?;
                nodes.feasible(&Placement::of_spec(&patched))
            })
        }
    };
    out.feasible_nodes_before = before;
    out.feasible_nodes = after;
    if after == Some(0) {
        out.provisionable_by = provisionable(nodes, &spec, fingerprint, patch);
    }
    out.no_feasible_node = after == Some(0) && out.provisionable_by.is_empty();
    out
}

/// Who could create a node for the placed pod when none exists now: the compatible
/// NodePools (remembered like the counts), then the group's declaration.
fn provisionable(
    nodes: &dyn NodeView,
    spec: &PodSpec,
    fingerprint: u64,
    patch: Option<(&json_patch::Patch, &Group)>,
) -> Vec<String> {
    let group = patch.map(|(_, group)| group);
    let patch = patch.filter(|(p, _)| !p.0.is_empty());
    let key = match patch {
        None => fingerprint,
        Some((_, group)) => combine(fingerprint, group_fingerprint(group)),
    };
    let found = nodes.provisioners(key, &mut || match patch {
        None => Some(spec.clone()),
        Some((patch, _)) => patched_spec(spec, patch),
    });
    let mut by: Vec<String> = found.iter().map(|p| p.to_string()).collect();
    if group.is_some_and(|g| g.nodes.provisioned_on_demand) {
        by.push(DECLARED_PROVISIONER.to_owned());
    }
    by
}

/// How many nodes there are, for messages: `0 of 12 nodes`.
fn of_nodes(nodes: Option<&dyn NodeView>) -> String {
    match nodes.and_then(NodeView::total) {
        Some(1) => "0 of 1 node".to_owned(),
        Some(total) => format!("0 of {total} nodes"),
        None => "0 nodes".to_owned(),
    }
}

/// `onNoFeasibleNode`: no node could take the placed pod.
fn no_feasible_node(config: &Config, name: &str, group: &Group, mode: Mode, out: &mut Outcome, ctx: &Context<'_>) {
    let counted = of_nodes(ctx.nodes);
    match config.on_no_feasible_node_of(group) {
        OnNoFeasibleNode::Warn => {
            out.summary = truncate_chars(
                format!("no feasible node ({counted} match); {}", out.summary),
                MAX_SUMMARY_CHARS,
            );
        }
        OnNoFeasibleNode::Deny => {
            let enforce = mode == Mode::Enforce;
            out.deny(
                enforce,
                format!(
                    "pod-director: no node could take this pod with placement group {name:?}: {counted} match its \
                     nodeSelector, required node affinity, NoSchedule/NoExecute taints and cordons (resources not \
                     counted). Label or untaint the group's nodes, fix the group's placement, or set \
                     onNoFeasibleNode: warn to admit such pods (e.g. when a cluster autoscaler adds nodes)"
                ),
            );
            out.summary = truncate_chars(
                format!(
                    "{}no feasible node ({counted} match)",
                    if enforce { "" } else { "would deny, " }
                ),
                MAX_SUMMARY_CHARS,
            );
        }
    }
}

fn warning(mode: Mode, group: &str, out: &Outcome) -> Option<String> {
    // onNoFeasibleNode speaks at /mutate, where the patch is decided.
    let no_node = out.no_feasible_node && out.webhook == Webhook::Mutate;
    let speak = match mode {
        Mode::DryRun => false,
        Mode::Warn => out.decision != Decision::Noop || no_node,
        Mode::Enforce => (!out.conflicts.is_empty() || no_node) && out.allowed(),
    };
    speak.then(|| truncate_chars(format!("pod-director {group}: {}", out.summary), MAX_SUMMARY_CHARS))
}

/// The /validate decision for a final pod. On UPDATE (`old` given) only the
/// violations the update introduces can deny: a pod admitted before its group
/// was enforced can still be updated (its labels, by controllers).
///
/// A pod with `spec.nodeName` (newly set: at CREATE) must name a node its
/// group allows: the node's labels satisfy the pod's nodeSelector and required
/// node affinity, its NoSchedule/NoExecute taints are tolerated (a cordon, and the
/// `node.kubernetes.io/unschedulable` taint that comes with it, do not matter: the
/// scheduler is bypassed) — the pod taken
/// as enforce would have it (its group's plan applied). When the node cannot be
/// looked up, an enforce decision is [`Decision::Error`] (undecidable).
pub(crate) fn validate(config: &Config, ns: &Namespace<'_>, pod: &Pod, old: Option<&Pod>, ctx: &Context) -> Outcome {
    validate_object(config, ns, pod, old, Noun::Pod, ctx)
}

/// The /validate decision for a Binding (`pods/binding` CREATE) of `pod` (as stored, pending) to
/// node `target`, its requester in `ctx`, once `decision::binding_skipped` let it through: decided
/// as [`validate`] decides an UPDATE that sets `spec.nodeName` to `target` — the node is all a
/// binding introduces, so only a target that is not a node of the group can deny. Look the node
/// up first ([`needs_bound_node`] of the bound pod).
pub(crate) fn validate_binding(config: &Config, ns: &Namespace<'_>, pod: &Pod, target: &str, ctx: &Context) -> Outcome {
    validate_object(config, ns, &pod.bound_to(target), Some(pod), Noun::Binding, ctx)
}

/// The /validate decision for a DaemonSet's final pod template (made into a pod,
/// [`super::template_pod`]); on UPDATE only the violations the update introduces deny.
pub(crate) fn validate_daemon_set(
    config: &Config,
    ns: &Namespace<'_>,
    template: &Pod,
    old: Option<&Pod>,
    ctx: &Context,
) -> Outcome {
    validate_object(config, ns, template, old, Noun::DaemonSet, ctx)
}

fn validate_object(
    config: &Config,
    ns: &Namespace<'_>,
    pod: &Pod,
    old: Option<&Pod>,
    object: Noun,
    ctx: &Context,
) -> Outcome {
    let (name, scoped, mut out) = match scope(config, ns, pod, object, ctx, Webhook::Validate) {
        Ok(scoped) => scoped,
        Err(done) => return with_feasibility(*done, pod, ctx, None),
    };
    let mode = config.mode_of(scoped);
    let enforce = mode == Mode::Enforce;
    let chosen = choose(config, scoped, pod);
    let chosen_old = old.map(|old| choose(config, scoped, old));
    let group = chosen.group.as_ref();
    out.alternative = chosen.name.map(str::to_owned);
    let planned = chosen.plan(pod);
    let planned_patch = planned.patch();
    out = with_feasibility(out, pod, ctx, Some((&planned_patch, group)));
    // Shadow predicts enforce: in dryRun and warn the pod has not been patched, so it is
    // judged as enforce would have left it — its group's would-be patch applied (the old
    // pod of an UPDATE too). `would_deny` then means "enforce would refuse this request".
    // In enforce the pod arrives patched; a placement another webhook undid still fails.
    let shadowed;
    let shadowed_old;
    let (pod, old) = if enforce {
        (pod, old)
    } else {
        shadowed = as_enforced(pod, &planned_patch);
        shadowed_old = old
            .zip(chosen_old.as_ref())
            .map(|(old, chosen)| as_enforced(old, &chosen.plan(old).patch()));
        (shadowed.as_ref(), shadowed_old.as_ref().map(AsRef::as_ref))
    };
    let mut violations = chosen.verify(pod);
    let mut unchecked = None;
    if let Some(node_name) = bound_node(pod, old) {
        let spec = super::spec_of(pod);
        // In enforce the pod is usually planned already; anything still missing is what enforce would add.
        let effective = if !enforce || planned.changes.is_empty() {
            None
        } else {
            patched_spec(&spec, &planned_patch)
        };
        let effective = effective.as_ref().unwrap_or(&spec);
        let (field, instead) = object.node_field();
        match ctx.nodes.map(|n| n.node(node_name)) {
            None => unchecked = Some(format!("{field} {node_name} not checked: no node data")),
            Some(NodeLookup::Found(node)) => {
                if let Some(why) = unmet_by_bound_pod(&Placement::of_spec(effective), &node) {
                    violations.push(Violation {
                        field: field.to_owned(),
                        message: format!("node {node_name:?} is not a node of the group: {why}; {instead}"),
                    });
                }
            }
            Some(NodeLookup::Unknown) => violations.push(Violation {
                field: field.to_owned(),
                message: format!("node {node_name:?} does not exist; {instead}"),
            }),
            Some(NodeLookup::Unavailable(reason)) => {
                if enforce {
                    let mut error = Outcome::undecidable(
                        Webhook::Validate,
                        format!("cannot check {field} {node_name:?}: {reason}"),
                    );
                    error.group = out.group;
                    error.mode = out.mode;
                    return error;
                }
                unchecked = Some(format!("{field} {node_name} not checked: {reason}"));
            }
        }
    }
    let preexisting: Vec<Violation> = old
        .zip(chosen_old.as_ref())
        .map(|(old, chosen)| chosen.verify(old))
        .unwrap_or_default();
    let introduced: Vec<&Violation> = violations.iter().filter(|v| !preexisting.contains(v)).collect();
    if introduced.is_empty() {
        out.decision = Decision::Noop;
        out.summary = if violations.is_empty() {
            "compliant".to_owned()
        } else {
            truncate_chars(
                format!("{} violation(s) predate this update; not denied", violations.len()),
                MAX_SUMMARY_CHARS,
            )
        };
    } else {
        let listed: Vec<String> = introduced.iter().map(ToString::to_string).collect();
        out.deny(
            enforce,
            format!(
                "pod-director: {} does not satisfy placement group {name:?}: {}",
                object.noun(),
                listed.join("; ")
            ),
        );
        out.summary = truncate_chars(
            format!("{}{}", if enforce { "" } else { "would deny: " }, listed.join("; ")),
            MAX_SUMMARY_CHARS,
        );
    }
    if let Some(note) = unchecked {
        out.summary = truncate_chars(format!("{note}; {}", out.summary), MAX_SUMMARY_CHARS);
    }
    out.violations = violations;
    out.warning = warning(mode, name, &out);
    out
}

/// The node a pod names in `spec.nodeName` when the request sets it: at CREATE,
/// or an UPDATE that changes it (the API server refuses that, but it is not
/// pod-director's to assume). A pod bound earlier keeps its node.
pub(crate) fn bound_node<'p>(pod: &'p Pod, old: Option<&Pod>) -> Option<&'p str> {
    let name = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())?;
    let before = old.and_then(|o| o.spec.as_ref()).and_then(|s| s.node_name.as_deref());
    (before != Some(name)).then_some(name)
}

/// Whether deciding `pod` at /validate needs the node its `spec.nodeName`
/// names (so the caller can look it up before deciding).
pub(crate) fn needs_bound_node<'p>(
    config: &Config,
    ns: &Namespace<'_>,
    pod: &'p Pod,
    old: Option<&Pod>,
) -> Option<&'p str> {
    match select_group(config, ns) {
        Selection::Group { .. } => bound_node(pod, old),
        _ => None,
    }
}
