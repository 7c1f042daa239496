//! From a pod and its namespace to an [`Outcome`] for one webhook: which group
//! applies, whether the pod is skipped, and what the group's mode makes of the
//! plan (or of the violations, for `/validate`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use super::{
    Context, Decision, MAX_SUMMARY_CHARS, Outcome, SkipReason, Violation, Webhook, plan::plan, truncate_chars,
    verify::verify,
};
use crate::config::{Config, Group, Mode, UnknownGroup};

/// Annotation the kubelet puts on the API mirror of a static pod.
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// What is being decided: a pod, or a DaemonSet's pod template (made into a pod).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Object {
    Pod,
    DaemonSet,
}

impl Object {
    /// How messages name it.
    fn noun(self) -> &'static str {
        match self {
            Object::Pod => "the pod",
            Object::DaemonSet => "the DaemonSet's pod template",
        }
    }
}

/// The namespace of the pod, as far as placement cares.
#[derive(Debug, Clone, Copy)]
pub struct Namespace<'a> {
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
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
pub fn select_group<'c>(config: &'c Config, ns: &Namespace<'_>) -> Selection<'c> {
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
pub fn has_mirror_annotation(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION))
}

/// Whether the pod names an `apps/v1` DaemonSet as its controller (written by whoever creates it).
pub fn has_daemon_set_controller_reference(pod: &Pod) -> bool {
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
    let Some(spec) = &pod.spec else {
        return Some(SkipReason::NotApplicable("the pod has no spec".to_owned()));
    };
    if spec.node_name.as_deref().is_some_and(|n| !n.is_empty()) {
        return Some(SkipReason::NodeNameSet);
    }
    if config.allows_daemon_sets(group)
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
    object: Object,
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
                    out.warning = Some(truncate_chars(&format!("pod-director: {text}"), MAX_SUMMARY_CHARS));
                    out.summary = truncate_chars(&format!("unknown group: {text}"), MAX_SUMMARY_CHARS);
                }
                UnknownGroup::Deny => {
                    out.decision = Decision::Denied;
                    out.allowed = false;
                    out.summary = truncate_chars(&format!("denied: {text}"), MAX_SUMMARY_CHARS);
                    out.message = Some(format!("pod-director: {text} (unknownGroup: deny)"));
                }
            }
            Err(Box::new(out))
        }
        Selection::Group { name, group } => {
            out.group = Some(name.to_owned());
            out.mode = Some(config.mode_of(group));
            if object == Object::DaemonSet && config.allows_daemon_sets(group) {
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
pub fn mutate(config: &Config, ns: &Namespace<'_>, pod: &Pod, ctx: &Context) -> Outcome {
    mutate_object(config, ns, pod, None, Object::Pod, ctx)
}

/// The /mutate decision for a DaemonSet being created or updated, on its pod
/// template made into a pod ([`super::template_pod`]): the same engine and
/// patch as for a pod, relative to the pod (re-root it with
/// [`Outcome::rerooted`] under `/spec/template`). On UPDATE (`old` given), a
/// conflict the old template already had does not deny the update.
pub fn mutate_daemon_set(
    config: &Config,
    ns: &Namespace<'_>,
    template: &Pod,
    old: Option<&Pod>,
    ctx: &Context,
) -> Outcome {
    mutate_object(config, ns, template, old, Object::DaemonSet, ctx)
}

fn mutate_object(
    config: &Config,
    ns: &Namespace<'_>,
    pod: &Pod,
    old: Option<&Pod>,
    object: Object,
    ctx: &Context,
) -> Outcome {
    let (name, group, mut out) = match scope(config, ns, pod, object, ctx, Webhook::Mutate) {
        Ok(scoped) => scoped,
        Err(done) => return *done,
    };
    let mode = config.mode_of(group);
    let plan = plan(pod, group);
    let enforce = mode == Mode::Enforce;
    out.conflicts = plan.conflicts.clone();
    let preexisting = |plan: &super::Plan| {
        old.is_some_and(|old| {
            let before = super::plan::plan(old, group).conflicts;
            plan.conflicts
                .iter()
                .filter(|c| c.resolution == super::Resolution::Rejected)
                .all(|c| before.contains(c))
        })
    };
    if plan.rejected() && preexisting(&plan) {
        out.decision = Decision::Noop;
        out.summary = truncate_chars(
            &format!("{} conflict(s) predate this update; not denied", plan.conflicts.len()),
            MAX_SUMMARY_CHARS,
        );
    } else if plan.rejected() {
        let conflicts: Vec<String> = plan.conflicts.iter().map(ToString::to_string).collect();
        out.decision = if enforce { Decision::Denied } else { Decision::WouldDeny };
        out.allowed = !enforce;
        out.message = Some(format!(
            "pod-director: {} conflicts with placement group {name:?}: {}; remove or change {}'s own placement \
             (the group's onConflict is reject)",
            object.noun(),
            conflicts.join("; "),
            object.noun()
        ));
        out.summary = truncate_chars(
            &format!(
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
        out.decision = if enforce {
            Decision::Patched
        } else {
            Decision::WouldPatch
        };
        out.apply_patch = enforce;
        out.patch = plan.patch();
        out.summary = truncate_chars(
            &format!("{}{}", verb(out.decision), plan.describe_changes()),
            MAX_SUMMARY_CHARS,
        );
    }
    if exclusion_requested(config, pod) && !group.allow_pod_exclusion {
        out.summary = truncate_chars(
            &format!("exclusion label ignored (group does not allow it); {}", out.summary),
            MAX_SUMMARY_CHARS,
        );
    }
    out.warning = warning(mode, name, &out);
    out
}

fn warning(mode: Mode, group: &str, out: &Outcome) -> Option<String> {
    let speak = match mode {
        Mode::DryRun => false,
        Mode::Warn => out.decision != Decision::Noop,
        Mode::Enforce => !out.conflicts.is_empty() && out.allowed,
    };
    speak.then(|| truncate_chars(&format!("pod-director {group}: {}", out.summary), MAX_SUMMARY_CHARS))
}

/// The /validate decision for a final pod. On UPDATE (`old` given) only the
/// violations the update introduces can deny: a pod admitted before its group
/// was enforced can still be updated (its labels, by controllers).
pub fn validate(config: &Config, ns: &Namespace<'_>, pod: &Pod, old: Option<&Pod>, ctx: &Context) -> Outcome {
    validate_object(config, ns, pod, old, Object::Pod, ctx)
}

/// The /validate decision for a DaemonSet's final pod template (made into a pod,
/// [`super::template_pod`]); on UPDATE only the violations the update introduces deny.
pub fn validate_daemon_set(
    config: &Config,
    ns: &Namespace<'_>,
    template: &Pod,
    old: Option<&Pod>,
    ctx: &Context,
) -> Outcome {
    validate_object(config, ns, template, old, Object::DaemonSet, ctx)
}

fn validate_object(
    config: &Config,
    ns: &Namespace<'_>,
    pod: &Pod,
    old: Option<&Pod>,
    object: Object,
    ctx: &Context,
) -> Outcome {
    let (name, group, mut out) = match scope(config, ns, pod, object, ctx, Webhook::Validate) {
        Ok(scoped) => scoped,
        Err(done) => return *done,
    };
    let mode = config.mode_of(group);
    let enforce = mode == Mode::Enforce;
    let violations = verify(pod, group);
    let preexisting: Vec<Violation> = old.map(|old| verify(old, group)).unwrap_or_default();
    let introduced: Vec<&Violation> = violations.iter().filter(|v| !preexisting.contains(v)).collect();
    if introduced.is_empty() {
        out.decision = Decision::Noop;
        out.summary = if violations.is_empty() {
            "compliant".to_owned()
        } else {
            truncate_chars(
                &format!("{} violation(s) predate this update; not denied", violations.len()),
                MAX_SUMMARY_CHARS,
            )
        };
    } else {
        let listed: Vec<String> = introduced.iter().map(ToString::to_string).collect();
        out.decision = if enforce { Decision::Denied } else { Decision::WouldDeny };
        out.allowed = !enforce;
        out.message = Some(format!(
            "pod-director: {} does not satisfy placement group {name:?}: {}",
            object.noun(),
            listed.join("; ")
        ));
        out.summary = truncate_chars(
            &format!("{}{}", if enforce { "" } else { "would deny: " }, listed.join("; ")),
            MAX_SUMMARY_CHARS,
        );
    }
    out.violations = violations;
    out.warning = warning(mode, name, &out);
    out
}
