//! The placement engine: pure code, no I/O, no clock.
//!
//! Given a Pod, its namespace and the configuration, compute a [`Plan`] — the
//! placement changes with their reasons and conflicts — and render it for one
//! webhook as an [`Outcome`]: decision, JSON Patch, denial message, warning,
//! summary. The HTTP layer, the logs, spans and `explain` all render the same
//! outcome: one computation, many views.

mod affinity;
pub mod choice;
mod context;
mod decide;
pub mod feasible;
mod plan;
mod pod;
pub mod reservation;
pub(crate) mod tolerations;
mod verify;

use std::fmt;

pub use context::{Context, NODE_USER_PREFIX, NODES_GROUP, Requester};
pub use decide::{MIRROR_POD_ANNOTATION, Namespace, Selection};
pub(crate) use decide::{
    has_daemon_set_controller_reference, has_mirror_annotation, mutate, mutate_daemon_set, needs_bound_node,
    select_group, validate, validate_binding, validate_daemon_set,
};
pub use feasible::{FEASIBILITY_SCOPE, NodeInfo, NodeLookup, NodeView, Placement};
pub use plan::{Change, Plan, plan};
pub use pod::{ContainerResources, Pod, PodMetadata, PodSpec};
pub use tolerations::{NodeTaint, TaintEffect};
pub use verify::verify;

use crate::config::Mode;

named_enum! {
    /// The webhook a request arrived at.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Webhook {
        Mutate => "mutate",
        Validate => "validate",
        /// The namespace label guard: who may change a namespace's group label.
        ValidateNamespace => "validate-namespace",
        /// Reservations: whether a pod intrudes on another group's reserved nodes.
        ValidateReservation => "validate-reservation",
        /// The in-tree plugins' mutating phase (`inTreePlugins`): PodNodeSelector, PodTolerationRestriction.
        MutateInTree => "mutate-in-tree",
        /// The in-tree plugins' validating phase, on the pod as admitted.
        ValidateInTree => "validate-in-tree",
    }
}

named_enum! {
    /// What was decided for one admission request (`placement.decision`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Decision {
        /// dryRun/warn: enforce would have patched the pod.
        WouldPatch => "would_patch",
        /// enforce: the response carries the patch.
        Patched => "patched",
        /// Nothing to change, nothing to deny.
        Noop => "noop",
        /// dryRun/warn: enforce would have denied the pod.
        WouldDeny => "would_deny",
        /// enforce (or `unknownGroup: deny`): the pod is denied.
        Denied => "denied",
        /// Not pod-director's business (see [`SkipReason`]).
        Skipped => "skipped",
        /// The namespace names a group that is not defined (`unknownGroup: allow`).
        UnknownGroup => "unknown_group",
        /// The request could not be decided (rendered by the admission layer).
        Error => "error",
    }
}

/// Why a pod was left alone (`placement.skip_reason`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// The namespace is in `excludedNamespaces` (or is pod-director's own).
    ExcludedNamespace,
    /// The namespace has no group label and there is no `defaultGroup`.
    NoGroup,
    /// A static pod's mirror (`kubernetes.io/config.mirror`).
    MirrorPod,
    /// Created by the DaemonSet controller for a DaemonSet of a group with `allowDaemonSets`.
    DaemonSetPod,
    /// A DaemonSet object of a group with `allowDaemonSets`: left alone.
    DaemonSetAllowed,
    /// The pod carries the exclusion label and its group allows it.
    ExclusionLabel,
    /// A Binding (`pods/binding`) sent by a scheduler that honours taints (`trustedSchedulers`).
    TrustedScheduler,
    /// Not a pod CREATE/UPDATE this webhook acts on (operation or subresource).
    NotApplicable(String),
}

impl SkipReason {
    pub fn as_str(&self) -> &str {
        match self {
            SkipReason::ExcludedNamespace => "excluded_namespace",
            SkipReason::NoGroup => "no_group",
            SkipReason::MirrorPod => "mirror_pod",
            SkipReason::DaemonSetPod => "daemonset_pod",
            SkipReason::DaemonSetAllowed => "daemonset_allowed",
            SkipReason::ExclusionLabel => "exclusion_label",
            SkipReason::TrustedScheduler => "trusted_scheduler",
            SkipReason::NotApplicable(_) => "not_applicable",
        }
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::NotApplicable(why) => write!(f, "not_applicable ({why})"),
            other => f.write_str(other.as_str()),
        }
    }
}

named_enum! {
    /// How a conflict was resolved, per `onConflict`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Resolution {
        /// `reject`: the pod is (or would be) denied.
        Rejected => "rejected",
        /// `override`: the group's value replaces the pod's.
        Overridden => "overridden",
        /// `ignore`: the pod's value stays.
        Ignored => "ignored",
    }
}

/// The pod asks for something its group contradicts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// Where, e.g. `nodeSelector["node-pool"]` or `affinity.nodeAffinity.required.nodeSelectorTerms[0]`.
    pub field: String,
    /// What the pod asks for.
    pub pod: String,
    /// What the group requires.
    pub group: String,
    pub resolution: Resolution,
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: pod has {}, group requires {} ({})",
            self.field,
            self.pod,
            self.group,
            self.resolution.as_str()
        )
    }
}

/// A way in which a pod does not satisfy its group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub field: String,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Everything decided for one pod at one webhook; every view renders this.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub webhook: Webhook,
    /// The group the namespace selects (also set for unknown groups).
    pub group: Option<String>,
    /// The mode the decision was taken in (None when no group applies).
    pub mode: Option<Mode>,
    /// The group's placement the pod chose ([`choice`]): an alternative's name or `default`; `None`
    /// when the group offers no alternative and the pod names none.
    pub alternative: Option<String>,
    pub decision: Decision,
    pub skip_reason: Option<SkipReason>,
    /// The patch enforce applies; in dryRun/warn the would-be patch, byte-for-byte the same.
    /// Whether the response carries it and whether the pod is admitted follow from
    /// `decision` ([`Outcome::apply_patch`], [`Outcome::allowed`]).
    pub patch: json_patch::Patch,
    /// The denial (or would-be denial) message.
    pub message: Option<String>,
    /// Admission warning for the client, at most 120 characters.
    pub warning: Option<String>,
    pub conflicts: Vec<Conflict>,
    pub violations: Vec<Violation>,
    /// One line for humans (≤120 chars), e.g. `would set nodeSelector node-pool=ci, add 1 toleration`.
    pub summary: String,
    /// Nodes on which the pod could be placed after the (would-be) patch — at
    /// `/validate`, the pod as enforce would have it. Placement only: resources,
    /// pod affinity and topology spread are not counted. `None` without node data.
    pub feasible_nodes: Option<usize>,
    /// The same count for the pod as submitted (at `/validate`: as it stands).
    pub feasible_nodes_before: Option<usize>,
    /// No node is feasible after the patch (`feasible_nodes == Some(0)`) and nothing can
    /// provision one (`provisionable_by` is empty).
    pub no_feasible_node: bool,
    /// When no node is feasible now: who could create one on demand (`nodepool/NAME`, the
    /// group's `declared/provisionedOnDemand`).
    pub provisionable_by: Vec<String>,
    /// `/validate-reservation`: the reservations the pod intrudes on (exempt ones too).
    pub reservation: Vec<reservation::Intrusion>,
}

impl Outcome {
    /// An outcome with only its webhook and decision set: admitted, no group, no patch.
    pub fn new(webhook: Webhook, decision: Decision) -> Self {
        Self {
            webhook,
            group: None,
            mode: None,
            alternative: None,
            decision,
            skip_reason: None,
            patch: json_patch::Patch(Vec::new()),
            message: None,
            warning: None,
            conflicts: Vec::new(),
            violations: Vec::new(),
            summary: String::new(),
            feasible_nodes: None,
            feasible_nodes_before: None,
            no_feasible_node: false,
            provisionable_by: Vec::new(),
            reservation: Vec::new(),
        }
    }

    /// Whether the pod is admitted: unless it is denied or the request could not be decided.
    pub fn allowed(&self) -> bool {
        !matches!(self.decision, Decision::Denied | Decision::Error)
    }

    /// Whether the admission response carries `patch`: only when enforce patches.
    pub fn apply_patch(&self) -> bool {
        self.decision == Decision::Patched
    }

    /// Patches the pod (enforce) or reports the patch it would apply (dryRun, warn).
    pub(crate) fn patch_with(&mut self, enforce: bool, patch: json_patch::Patch) {
        self.decision = if enforce {
            Decision::Patched
        } else {
            Decision::WouldPatch
        };
        self.patch = patch;
    }

    /// Denies the pod (enforce) or reports the denial it would get (dryRun, warn), with
    /// `message` for the client; no patch is applied or reported.
    pub fn deny(&mut self, enforce: bool, message: String) {
        self.decision = if enforce { Decision::Denied } else { Decision::WouldDeny };
        self.message = Some(message);
        self.patch = json_patch::Patch(Vec::new());
    }

    /// A request that could not be decided (the admission layer answers it with an error status).
    pub(crate) fn undecidable(webhook: Webhook, message: String) -> Self {
        let mut out = Self::new(webhook, Decision::Error);
        out.message = Some(message);
        out
    }

    /// The patch as JSON (an array of RFC 6902 operations).
    pub fn patch_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.patch).unwrap_or_else(|_| serde_json::Value::Array(Vec::new()))
    }

    /// The patch as compact JSON text: the bytes enforce sends, the same text as
    /// `patch_json().to_string()` without building the `Value`.
    pub fn patch_text(&self) -> String {
        serde_json::to_string(&self.patch).unwrap_or_else(|_| "[]".to_owned())
    }

    /// The JSON Pointer of every operation, in order.
    pub fn patch_paths(&self) -> Vec<String> {
        self.patch.0.iter().map(|op| op.path().to_string()).collect()
    }

    /// The outcome with its patch moved under `prefix` (e.g. `["spec", "template"]`
    /// for a DaemonSet whose pod template was decided as a pod): the same
    /// operations, values and order, each path prefixed.
    pub fn rerooted(mut self, prefix: &[&str]) -> Self {
        let prefix = json_patch::jsonptr::PointerBuf::from_tokens(prefix.iter().copied());
        let moved = |path: &json_patch::jsonptr::PointerBuf| prefix.concat(path);
        for op in &mut self.patch.0 {
            use json_patch::PatchOperation as Op;
            match op {
                Op::Add(o) => o.path = moved(&o.path),
                Op::Remove(o) => o.path = moved(&o.path),
                Op::Replace(o) => o.path = moved(&o.path),
                Op::Test(o) => o.path = moved(&o.path),
                Op::Move(o) => {
                    o.path = moved(&o.path);
                    o.from = moved(&o.from);
                }
                Op::Copy(o) => {
                    o.path = moved(&o.path);
                    o.from = moved(&o.from);
                }
            }
        }
        self
    }
}

/// Where a DaemonSet keeps its pod template's pod: its patch paths are the pod's under this prefix.
pub const DAEMON_SET_TEMPLATE: &[&str] = &["spec", "template"];

/// A DaemonSet's pod template as the pod the engine decides: the template's
/// metadata and spec (the pods the controller creates from it carry both).
pub fn template_pod(template: &k8s_openapi::api::core::v1::PodTemplateSpec) -> Pod {
    Pod::from_template(template)
}

/// The pod's spec; an empty one for a pod without (its patch then needs a spec to apply to).
fn spec_of(pod: &Pod) -> std::borrow::Cow<'_, PodSpec> {
    match &pod.spec {
        Some(spec) => std::borrow::Cow::Borrowed(spec),
        None => std::borrow::Cow::Owned(Default::default()),
    }
}

/// Longest admission warning or summary, in characters.
pub(crate) const MAX_SUMMARY_CHARS: usize = 120;

/// Cuts `text` to at most `max` characters, marking the cut with `…`.
pub(crate) fn truncate_chars(mut text: String, max: usize) -> String {
    if text.char_indices().nth(max).is_none() {
        return text;
    }
    // Over `max` characters: keep `max - 1`, cut where the next one starts.
    let cut = text.char_indices().nth(max.saturating_sub(1)).map_or(0, |(at, _)| at);
    text.truncate(cut);
    text.push('…');
    text
}

/// Cuts `text` to at most `max` bytes on a character boundary, marking the cut with `…`.
pub fn truncate_bytes(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let marker = '…';
    let mut end = max.saturating_sub(marker.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = text[..end].to_owned();
    out.push(marker);
    out
}

#[cfg(test)]
mod tests;
