//! The engine's one entry: decide an object as one of pod-director's webhooks would, and a pod's
//! whole fate across them.
//!
//! The webhook path (`admission`) asks [`Decidable::at`] once per review, then
//! [`Decidable::decide`]; the audit and `explain` ask [`fate`], which decides a pod at every
//! webhook that decides it. Which decision a webhook takes for which object is written here once:
//!
//! | webhook | a pod (CREATE, UPDATE) or a workload's template | a DaemonSet's template | a namespace write |
//! |---|---|---|---|
//! | `mutate` | the placement patch (CREATE; an UPDATE is validated, not mutated) | the same, under `/spec/template` once re-rooted | not decided |
//! | `validate` | does the pod satisfy its group (and `spec.nodeName`) | the same, on the template | not decided |
//! | `validate-reservation` | does the pod intrude on another group's reserved nodes | not decided (its pods are, in a [`Fate`]) | not decided |
//! | `validate-namespace` | not decided | not decided | the group label guard |
//! | `mutate-in-tree` | the in-tree plugins' mutating phase ([`in_tree`], `inTreePlugins`) | not decided (its pods are) | not decided |
//! | `validate-in-tree` | their validating phase, on the pod as admitted | not decided | the guard of the in-tree annotations |
//!
//! A `pods/binding` CREATE is decided at `validate` (does the bound pod's node satisfy its group)
//! and `validate-reservation` (does it intrude on a reserved pool), like an UPDATE that sets the
//! pod's `spec.nodeName` to the binding's target (skipped when a trusted scheduler binds:
//! [`binding_skipped`], asked before the pod is read).
//!
//! "Not decided" is an [`Outcome`] skipped as `not_applicable`, with the reason: [`Decidable::at`]
//! tells it before anything is looked up (the admission path skips the namespace lookup for it).
//!
//! **A further rule.** Each webhook's decision is one [`Outcome`], dispatched in
//! [`Decidable::decide`]; a pod's [`Fate`] is every webhook's. A rule decided at `/mutate` and
//! `/validate` joins their arms there (its patch and denial folded into the webhook's outcome),
//! and the fate, `explain` and the audit carry it with no change of theirs. A per-pod rule of
//! its own webhook would be one more field of [`Fate`], decided in [`fate`] and given its place
//! in [`Fate::deciding`], which `explain` reads (the audit records each field under its rule).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::config::{Config, Mode};
use crate::in_tree;
use crate::namespace_guard::{self, NamespaceWrite};
use crate::placement::reservation::{self, any_reservation};
use crate::placement::{self, Context, Decision, Namespace, Outcome, Pod, Selection, SkipReason, Webhook};

/// A write of an object: its creation, or its update from the stored `old` (the review's
/// `oldObject`, which an UPDATE always has and a CREATE never does). `T` is a reference to the
/// object (what the engine decides) or its owner (what the admission path decoded).
#[derive(Debug, Clone, Copy)]
pub enum Write<T> {
    Create(T),
    Update { new: T, old: T },
}

impl<T: Copy> Write<T> {
    /// The object as written.
    pub fn object(self) -> T {
        match self {
            Write::Create(object) | Write::Update { new: object, .. } => object,
        }
    }

    /// The object before an UPDATE.
    pub fn old(self) -> Option<T> {
        match self {
            Write::Create(_) => None,
            Write::Update { old, .. } => Some(old),
        }
    }
}

impl<T: std::ops::Deref> Write<T> {
    /// The same write, borrowing the objects.
    pub fn as_deref(&self) -> Write<&T::Target> {
        match self {
            Write::Create(object) => Write::Create(object),
            Write::Update { new, old } => Write::Update { new, old },
        }
    }
}

/// What is decided.
#[derive(Debug, Clone, Copy)]
pub enum Subject<'a> {
    /// A pod being created or updated.
    Pod(Write<&'a Pod>),
    /// A workload's pod template made into the pod its controller creates from it (with the
    /// controller's owner reference): decided as that pod's creation (`explain` and the audit).
    Template(&'a Pod),
    /// A DaemonSet being created or updated: its pod template made into a pod
    /// ([`placement::template_pod`]).
    DaemonSet(Write<&'a Pod>),
    /// A namespace being created or updated: its group label before and after.
    Namespace(NamespaceWrite<'a>),
    /// A `pods/binding` CREATE: the pod (as stored) and the node it is bound to.
    Binding { pod: &'a Pod, target: &'a str },
}

impl<'a> Subject<'a> {
    /// The pod's write, for a pod or a workload's template (created).
    fn pod(&self) -> Option<Write<&'a Pod>> {
        match *self {
            Subject::Pod(write) => Some(write),
            Subject::Template(pod) => Some(Write::Create(pod)),
            _ => None,
        }
    }
}

/// What a decision sees besides the object: the configuration, the object's namespace (for a
/// pod or a DaemonSet), and who asks with which nodes.
#[derive(Clone, Copy)]
pub struct View<'a> {
    pub config: &'a Config,
    pub namespace: &'a Namespace<'a>,
    pub context: &'a Context<'a>,
}

/// Why a `pods/binding` CREATE is not decided anywhere but at `/validate` and `/validate-reservation`.
const BINDING_ELSEWHERE: &str = "subresource pods/binding";

/// Whether `webhook` decides `pods/binding` requests: `/validate` and `/validate-reservation` do.
fn decides_bindings(webhook: Webhook) -> bool {
    matches!(webhook, Webhook::Validate | Webhook::ValidateReservation)
}

/// The outcome of a `pods/binding` request at a webhook that does not decide bindings (admitted
/// untouched, whatever its object): asked before the binding is read.
pub fn binding_elsewhere(webhook: Webhook) -> Option<Outcome> {
    (!decides_bindings(webhook)).then(|| skipped(webhook, BINDING_ELSEWHERE))
}

/// Why `webhook` does not decide `subject`, if it does not: it is then admitted untouched.
fn not_decided(webhook: Webhook, subject: &Subject<'_>) -> Option<&'static str> {
    match (subject, webhook) {
        (Subject::Namespace(_), Webhook::ValidateNamespace | Webhook::ValidateInTree) => None,
        (Subject::Namespace(_), _) => Some("namespaces are decided at /validate-namespace"),
        (Subject::Binding { .. }, _) if decides_bindings(webhook) => None,
        (Subject::Binding { .. }, _) => Some(BINDING_ELSEWHERE),
        (_, Webhook::ValidateNamespace) => Some("/validate-namespace decides namespaces only"),
        (Subject::DaemonSet(_), Webhook::MutateInTree | Webhook::ValidateInTree) => {
            Some("the in-tree plugins decide pods; a DaemonSet's pods are decided as they are created")
        }
        (Subject::DaemonSet(_), Webhook::ValidateReservation) => {
            Some("/validate-reservation decides pods; DaemonSets that intrude are reported by explain and audit")
        }
        (Subject::Pod(Write::Update { .. }), Webhook::Mutate) => Some("UPDATE is validated, not mutated"),
        _ => None,
    }
}

/// A subject a webhook decides: what [`Decidable::at`] let through.
#[derive(Clone, Copy)]
pub struct Decidable<'s> {
    webhook: Webhook,
    subject: &'s Subject<'s>,
}

impl<'s> Decidable<'s> {
    /// `subject` as `webhook` decides it, or why it does not decide it (then admitted untouched:
    /// [`skipped`]): asked once, before anything is looked up.
    pub fn at(webhook: Webhook, subject: &'s Subject<'s>) -> Result<Self, &'static str> {
        match not_decided(webhook, subject) {
            Some(why) => Err(why),
            None => Ok(Self { webhook, subject }),
        }
    }

    /// The node the decision looks at (`spec.nodeName`, a binding's target), when it needs one:
    /// the caller looks it up (cache, else a bounded GET) and passes it in the context's nodes.
    pub fn node_to_look_up(&self, view: &View<'_>) -> Option<&'s str> {
        let (config, ns) = (view.config, view.namespace);
        match (self.webhook, self.subject) {
            (Webhook::Validate, Subject::Binding { pod, target }) => {
                placement::needs_bound_node(config, ns, &pod.bound_to(target), Some(*pod)).map(|_| *target)
            }
            (Webhook::ValidateReservation, Subject::Binding { pod, target }) => {
                reservation::needs_named_node(config, &pod.bound_to(target), Some(*pod)).map(|_| *target)
            }
            (Webhook::Validate, subject) => {
                let pod = subject.pod()?;
                placement::needs_bound_node(config, ns, pod.object(), pod.old())
            }
            (Webhook::ValidateReservation, subject) => {
                let pod = subject.pod()?;
                reservation::needs_named_node(config, pod.object(), pod.old())
            }
            _ => None,
        }
    }

    /// Where the patch of a review's response applies, when not to the object itself: a
    /// DaemonSet's patch is its template's pod's, under `/spec/template` ([`Outcome::rerooted`]).
    pub fn patch_root(&self) -> Option<&'static [&'static str]> {
        matches!(self.subject, Subject::DaemonSet(_)).then_some(placement::DAEMON_SET_TEMPLATE)
    }

    /// Whether `outcome`, this `/validate` decision of a pod CREATE of a group in dryRun or warn
    /// (one the `shadowValidation` sample sends: no `spec.nodeName`), refuses what `/mutate`'s
    /// decision of the same pod admits. `/mutate` predicts enforce's refusals for every such pod
    /// (the API server reinvokes it when a later mutating webhook changes the pod, so its last
    /// decision saw the pod `/validate` sees); where the two disagree, the pods the sample leaves
    /// out may hide such refusals.
    pub fn shadow_disagrees(&self, view: &View<'_>, outcome: &Outcome) -> bool {
        let Subject::Pod(Write::Create(pod)) = *self.subject else {
            return false;
        };
        let shadow = matches!(outcome.mode, Some(Mode::DryRun | Mode::Warn));
        if self.webhook != Webhook::Validate || !shadow || outcome.decision != Decision::WouldDeny {
            return false;
        }
        if pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty())
        {
            return false;
        }
        let mutate = Decidable {
            webhook: Webhook::Mutate,
            subject: self.subject,
        };
        mutate.decide(view).decision != Decision::WouldDeny
    }

    /// The webhook's decision (a DaemonSet's patch relative to its template's pod: see
    /// [`Decidable::patch_root`]). A binding is decided as if [`binding_skipped`], asked before its
    /// pod was read, said `None`.
    pub fn decide(&self, view: &View<'_>) -> Outcome {
        let (config, ns, ctx) = (view.config, view.namespace, view.context);
        let pod = match *self.subject {
            Subject::Pod(write) => write,
            Subject::Template(pod) => Write::Create(pod),
            Subject::Namespace(write) if self.webhook == Webhook::ValidateInTree => {
                return namespace_guard::decide_in_tree(config, &write, ctx);
            }
            Subject::Namespace(write) => return namespace_guard::decide(config, &write, ctx),
            Subject::Binding { pod, target } if self.webhook == Webhook::Validate => {
                return placement::validate_binding(config, ns, pod, target, ctx);
            }
            Subject::Binding { pod, target } => return reservation::decide_binding(config, ns, pod, target, ctx),
            Subject::DaemonSet(write) if self.webhook == Webhook::Mutate => {
                return placement::mutate_daemon_set(config, ns, write.object(), write.old(), ctx);
            }
            Subject::DaemonSet(write) => {
                return placement::validate_daemon_set(config, ns, write.object(), write.old(), ctx);
            }
        };
        match self.webhook {
            Webhook::MutateInTree | Webhook::ValidateInTree => in_tree_decision(self.webhook, view, pod),
            Webhook::Mutate => placement::mutate(config, ns, pod.object(), ctx),
            Webhook::ValidateReservation => reservation::decide(config, ns, pod.object(), pod.old(), ctx),
            _ => placement::validate(config, ns, pod.object(), pod.old(), ctx),
        }
    }
}

/// Why the in-tree webhooks decide nothing without `inTreePlugins`.
const IN_TREE_OFF: &str = "inTreePlugins is off";

/// `/mutate-in-tree`'s or `/validate-in-tree`'s decision of a pod: skipped without `inTreePlugins`
/// and in the excluded namespaces (pod-director's own among them).
fn in_tree_decision(webhook: Webhook, view: &View<'_>, pod: Write<&Pod>) -> Outcome {
    let Some(section) = &view.config.in_tree_plugins else {
        return skipped(webhook, IN_TREE_OFF);
    };
    if view.config.excluded_namespaces.iter().any(|n| n == view.namespace.name) {
        let mut out = Outcome::new(webhook, Decision::Skipped);
        out.summary = format!("skipped: {}", SkipReason::ExcludedNamespace);
        out.skip_reason = Some(SkipReason::ExcludedNamespace);
        return out;
    }
    let decide = match webhook {
        Webhook::MutateInTree => in_tree::decide_mutate,
        _ => in_tree::decide_validate,
    };
    decide(section.mode, &section.files, view.namespace, pod.object(), pod.old())
}

/// `webhook`'s decision of `subject` (skipped when it does not decide it; a binding skipped as
/// [`binding_skipped`] says).
pub fn decide(webhook: Webhook, subject: &Subject<'_>, view: &View<'_>) -> Outcome {
    let decidable = match Decidable::at(webhook, subject) {
        Ok(decidable) => decidable,
        Err(why) => return skipped(webhook, why),
    };
    if let Subject::Binding { .. } = subject
        && let Some(skipped) = binding_skipped(webhook, view.config, view.namespace, view.context)
    {
        return skipped;
    }
    decidable.decide(view)
}

/// `webhook`'s decision of a Binding that needs neither its pod nor its node (so the caller
/// reads neither): skipped when a trusted scheduler binds (it places pods by their nodeSelector,
/// affinity and tolerations, which /mutate and /validate already decided, and honours the pools'
/// taints), or when nothing the webhook checks applies (no group at `/validate`, no reservation
/// at `/validate-reservation`, an excluded namespace), or when it does not decide bindings
/// ([`binding_elsewhere`]). `None`: read the pod and decide the [`Subject::Binding`].
pub fn binding_skipped(webhook: Webhook, config: &Config, ns: &Namespace<'_>, ctx: &Context) -> Option<Outcome> {
    if let Some(elsewhere) = binding_elsewhere(webhook) {
        return Some(elsewhere);
    }
    let reason = match (webhook, placement::select_group(config, ns)) {
        (Webhook::ValidateReservation, _) if !any_reservation(config) => {
            SkipReason::NotApplicable("no group reserves its nodes".to_owned())
        }
        (_, Selection::Excluded) => SkipReason::ExcludedNamespace,
        (Webhook::Validate, Selection::NoGroup) => SkipReason::NoGroup,
        _ if config.trusted_schedulers.trusts(&ctx.requester.username) => SkipReason::TrustedScheduler,
        _ => return None,
    };
    let mut out = Outcome::new(webhook, Decision::Skipped);
    out.summary = format!("skipped: {reason}");
    out.skip_reason = Some(reason);
    Some(out)
}

/// An outcome for a request `webhook` does not decide, for this reason.
pub fn skipped(webhook: Webhook, why: &str) -> Outcome {
    let mut outcome = Outcome::new(webhook, Decision::Skipped);
    outcome.skip_reason = Some(SkipReason::NotApplicable(why.to_owned()));
    outcome.summary = format!("skipped: {why}");
    outcome
}

/// A pod's fate: the decision of every webhook that decides its creation, in the order the API
/// server asks them, and the skips that depend on who would create it.
#[derive(Debug, Clone)]
pub struct Fate {
    /// `/mutate`: the placement patch (or its denial, or why the pod is skipped).
    pub mutation: Outcome,
    /// `/validate`: the pod as admitted held to its group, `spec.nodeName` included.
    pub validation: Outcome,
    /// `/validate-reservation`: the reservations of other groups the pod intrudes on (a
    /// DaemonSet's: its pods', as its controller creates them).
    pub reservation: Outcome,
    /// `/mutate-in-tree` and `/validate-in-tree` (`inTreePlugins`): the in-tree plugins' mutating
    /// phase, unless it admits the pod and their validating phase refuses the pod as the groups'
    /// `/mutate` leaves it.
    pub in_tree: Outcome,
    /// A skip the pod would get in a live cluster only from the right requester, when the one
    /// deciding it (nobody, offline) does not give it.
    pub requester_dependent: Option<String>,
}

fn refuses(outcome: &Outcome) -> bool {
    matches!(outcome.decision, Decision::Denied | Decision::WouldDeny)
}

impl Fate {
    /// The placement's decision: `/mutate`'s, unless `/validate` refuses the node the pod names
    /// (`spec.nodeName`) of a pod `/mutate` admits.
    pub fn placement(&self) -> &Outcome {
        let node_refused =
            refuses(&self.validation) && self.validation.violations.iter().any(|v| v.field == "spec.nodeName");
        if self.mutation.allowed() && self.mutation.decision != Decision::Skipped && node_refused {
            &self.validation
        } else {
            &self.mutation
        }
    }

    /// The outcome that decides the pod, in the API server's order: the in-tree plugins' mutating
    /// phase when it refuses (nothing after it runs), else the placement's, unless another group's
    /// reservation or the in-tree plugins' validating phase refuses a pod the placement does not, or
    /// the placement leaves the pod alone and the in-tree plugins change it.
    pub fn deciding(&self) -> &Outcome {
        let in_tree_refuses = refuses(&self.in_tree);
        if in_tree_refuses && self.in_tree.webhook == Webhook::MutateInTree {
            &self.in_tree
        } else if self.reservation_decides() {
            &self.reservation
        } else if in_tree_refuses && !refuses(self.placement()) {
            &self.in_tree
        } else if matches!(self.placement().decision, Decision::Skipped | Decision::Noop)
            && !matches!(self.in_tree.decision, Decision::Skipped | Decision::Noop)
        {
            // No group changes the pod; the in-tree plugins do.
            &self.in_tree
        } else {
            self.placement()
        }
    }

    /// Whether another group's reservation refuses the pod its placement does not.
    fn reservation_decides(&self) -> bool {
        refuses(&self.reservation) && !refuses(self.placement())
    }
}

/// Why `outcome` is what it is, in one line: why it is skipped, the denial, or the summary.
pub fn reason(outcome: &Outcome) -> String {
    match &outcome.skip_reason {
        Some(SkipReason::NotApplicable(why)) => why.clone(),
        Some(_) => outcome.summary.trim_start_matches("skipped: ").to_owned(),
        None => outcome.message.clone().unwrap_or_else(|| outcome.summary.clone()),
    }
}

/// `subject`'s fate: a pod, a workload's template or a DaemonSet (its template; its pods created
/// by the context's requester, for the reservation) decided at `/mutate`, `/validate` and
/// `/validate-reservation`.
pub fn fate(subject: &Subject<'_>, view: &View<'_>) -> Fate {
    let in_tree_mutation = decide(Webhook::MutateInTree, subject, view);
    // In enforce the groups' webhooks see the pod /mutate-in-tree patched.
    let patched = in_tree_mutation
        .apply_patch()
        .then(|| subject.pod())
        .flatten()
        .map(|write| patched_pod(write.object(), &in_tree_mutation.patch));
    let rewritten = match (&patched, subject) {
        (Some(pod), Subject::Pod(Write::Update { old, .. })) => Some(Subject::Pod(Write::Update { new: pod, old })),
        (Some(pod), Subject::Pod(_)) => Some(Subject::Pod(Write::Create(pod))),
        (Some(pod), Subject::Template(_)) => Some(Subject::Template(pod)),
        _ => None,
    };
    let subject = rewritten.as_ref().unwrap_or(subject);
    let mutation = decide(Webhook::Mutate, subject, view);
    let validation = decide(Webhook::Validate, subject, view);
    let owned;
    let pods = match subject {
        Subject::DaemonSet(write) => {
            owned = daemon_set_pod(write.object());
            Subject::Template(&owned)
        }
        other => *other,
    };
    let reservation = decide(Webhook::ValidateReservation, &pods, view);
    let in_tree = in_tree_outcome(in_tree_mutation, subject, &mutation, view);
    let mut fate = Fate {
        requester_dependent: requester_dependent(subject, view, &mutation),
        mutation,
        validation,
        reservation,
        in_tree,
    };
    if let Subject::DaemonSet(_) = subject
        && fate.reservation_decides()
        && reservation::reservations(view.config).any(|r| r.reserve.allow_daemon_sets)
    {
        fate.requester_dependent = Some(format!(
            "daemonset_pod: the reservations with allowDaemonSets admit its pods when the DaemonSet controller ({}) \
             creates them; decided here as a user's pod",
            view.config.daemon_set_controller
        ));
    }
    fate
}

/// The in-tree decision of a fate: `/mutate-in-tree`'s, unless it admits the pod and
/// `/validate-in-tree` refuses the pod as the groups' `/mutate` (`mutation`) leaves it.
fn in_tree_outcome(mutation_in_tree: Outcome, subject: &Subject<'_>, mutation: &Outcome, view: &View<'_>) -> Outcome {
    if refuses(&mutation_in_tree) || mutation_in_tree.decision == Decision::Skipped {
        return mutation_in_tree;
    }
    let Some(write) = subject.pod() else {
        return mutation_in_tree;
    };
    let admitted = match mutation.apply_patch() {
        true => patched_pod(write.object(), &mutation.patch),
        false => write.object().clone(),
    };
    let admitted = match write {
        Write::Create(_) => Subject::Pod(Write::Create(&admitted)),
        Write::Update { old, .. } => Subject::Pod(Write::Update { new: &admitted, old }),
    };
    let validation = decide(Webhook::ValidateInTree, &admitted, view);
    if refuses(&validation) {
        validation
    } else {
        mutation_in_tree
    }
}

/// `pod` with `patch` applied (its placement fields; the QoS class kept); unchanged when the
/// patch does not apply.
pub(crate) fn patched_pod(pod: &Pod, patch: &json_patch::Patch) -> Pod {
    let Ok(mut value) = serde_json::to_value(pod) else {
        return pod.clone();
    };
    if json_patch::patch(&mut value, patch).is_err() {
        return pod.clone();
    }
    match serde_json::from_value::<Pod>(value) {
        Ok(mut patched) => {
            patched.status_qos_class = pod.status_qos_class.clone();
            patched
        }
        Err(_) => pod.clone(),
    }
}

/// A DaemonSet's template pod as the DaemonSet controller creates it: controlled by a DaemonSet.
fn daemon_set_pod(template: &Pod) -> Pod {
    let mut owned = template.clone();
    owned.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "apps/v1".to_owned(),
        kind: "DaemonSet".to_owned(),
        name: template.metadata.name.clone().unwrap_or_default(),
        controller: Some(true),
        ..OwnerReference::default()
    }]);
    owned
}

/// The skip `subject` would get in a live cluster from the right requester only, if any.
fn requester_dependent(subject: &Subject<'_>, view: &View<'_>, mutation: &Outcome) -> Option<String> {
    let config = view.config;
    let Selection::Group { group, .. } = placement::select_group(config, view.namespace) else {
        return None;
    };
    if mutation.skip_reason == Some(SkipReason::DaemonSetAllowed) {
        return Some(format!(
            "daemonset_pod: its pods are skipped when the DaemonSet controller ({}) creates them",
            config.daemon_set_controller
        ));
    }
    let (Subject::Pod(write), false) = (subject, mutation.decision == Decision::Skipped) else {
        return None;
    };
    if placement::has_mirror_annotation(write.object()) {
        return Some(
            "mirror_pod: skipped only when its node creates it (system:node:NAME in group system:nodes); \
             decided here as a user's pod"
                .to_owned(),
        );
    }
    if group.allow_daemon_sets && placement::has_daemon_set_controller_reference(write.object()) {
        return Some(format!(
            "daemonset_pod: skipped only when the DaemonSet controller ({}) creates it; decided here as a user's pod",
            config.daemon_set_controller
        ));
    }
    None
}

#[cfg(test)]
mod tests;
