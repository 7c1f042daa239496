//! The engine's one entry: decide an object as one of pod-director's webhooks would.
//!
//! The webhook path (`admission`), the audit and `explain` all call [`decide`]; which
//! decision a webhook takes for which object is written here once:
//!
//! | webhook | a pod (CREATE, UPDATE) | a DaemonSet's template | a namespace write |
//! |---|---|---|---|
//! | `mutate` | the placement patch (CREATE; an UPDATE is validated, not mutated) | the same, under `/spec/template` once re-rooted | not decided |
//! | `validate` | does the pod satisfy its group (and `spec.nodeName`) | the same, on the template | not decided |
//! | `validate-reservation` | does the pod intrude on another group's reserved nodes | not decided (explain and audit report intruding DaemonSets) | not decided |
//! | `validate-namespace` | not decided | not decided | the group label guard |
//!
//! A `pods/binding` CREATE is decided at `validate` (does the bound pod's node satisfy its group)
//! and `validate-reservation` (does it intrude on a reserved pool), like an UPDATE that sets the
//! pod's `spec.nodeName` to the binding's target (skipped when a trusted scheduler binds).
//!
//! "Not decided" is an [`Outcome`] skipped as `not_applicable`, with the reason:
//! [`not_decided`] tells it before anything is looked up (the admission path skips the
//! namespace lookup for it).

use crate::config::Config;
use crate::namespace_guard::{self, NamespaceWrite};
use crate::placement::{self, Context, Decision, Namespace, Outcome, Pod, SkipReason, Webhook, reservation};

/// What is decided.
#[derive(Debug, Clone, Copy)]
pub enum Subject<'a> {
    /// A pod being created (`old: None`) or updated (`old`: the stored pod).
    Pod { pod: &'a Pod, old: Option<&'a Pod> },
    /// A DaemonSet being created or updated: its pod template made into a pod
    /// ([`placement::template_pod`]), and the old one on UPDATE.
    DaemonSet { template: &'a Pod, old: Option<&'a Pod> },
    /// A namespace being created or updated: its group label before and after.
    Namespace(&'a NamespaceWrite<'a>),
    /// A `pods/binding` CREATE: the pod (as stored) and the node it is bound to.
    Binding { pod: &'a Pod, target: &'a str },
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
pub const BINDING_ELSEWHERE: &str = "subresource pods/binding";

/// Why `webhook` does not decide `subject`, if it does not: it is then admitted untouched.
pub fn not_decided(webhook: Webhook, subject: &Subject<'_>) -> Option<&'static str> {
    match (subject, webhook) {
        (Subject::Namespace(_), Webhook::ValidateNamespace) => None,
        (Subject::Namespace(_), _) => Some("namespaces are decided at /validate-namespace"),
        (Subject::Binding { .. }, Webhook::ValidateReservation | Webhook::Validate) => None,
        (Subject::Binding { .. }, _) => Some(BINDING_ELSEWHERE),
        (_, Webhook::ValidateNamespace) => Some("/validate-namespace decides namespaces only"),
        (Subject::DaemonSet { .. }, Webhook::ValidateReservation) => {
            Some("/validate-reservation decides pods; DaemonSets that intrude are reported by explain and audit")
        }
        (Subject::Pod { old: Some(_), .. }, Webhook::Mutate) => Some("UPDATE is validated, not mutated"),
        _ => None,
    }
}

/// The node `webhook`'s decision of `subject` looks at (`spec.nodeName`), when it needs one:
/// the caller looks it up (cache, else a bounded GET) and passes it in the context's nodes.
pub fn node_to_look_up<'p>(webhook: Webhook, subject: &Subject<'p>, view: &View<'_>) -> Option<&'p str> {
    match (webhook, subject) {
        (Webhook::Validate, Subject::Pod { pod, old }) => {
            placement::needs_bound_node(view.config, view.namespace, pod, *old)
        }
        (Webhook::ValidateReservation, Subject::Pod { pod, old }) => {
            reservation::needs_named_node(view.config, pod, *old)
        }
        (Webhook::Validate, Subject::Binding { pod, target }) => placement::needs_bound_node(
            view.config,
            view.namespace,
            &reservation::bound_to(pod, target),
            Some(*pod),
        )
        .map(|_| *target),
        (Webhook::ValidateReservation, Subject::Binding { pod, target }) => {
            reservation::needs_named_node(view.config, &reservation::bound_to(pod, target), Some(*pod)).map(|_| *target)
        }
        _ => None,
    }
}

/// `webhook`'s decision of `subject`. A DaemonSet's patch is relative to its template made into a
/// pod; the admission path re-roots it under `/spec/template` ([`Outcome::rerooted`]).
pub fn decide(webhook: Webhook, subject: &Subject<'_>, view: &View<'_>) -> Outcome {
    if let Some(why) = not_decided(webhook, subject) {
        return skipped(webhook, why);
    }
    let (config, ns, ctx) = (view.config, view.namespace, view.context);
    match (subject, webhook) {
        (Subject::Namespace(write), _) => namespace_guard::decide(config, write, ctx),
        (Subject::Binding { pod, target }, Webhook::Validate) => {
            placement::validate_binding(config, ns, pod, target, ctx)
        }
        (Subject::Binding { pod, target }, _) => reservation::decide_binding(config, ns, pod, target, ctx),
        (Subject::Pod { pod, .. }, Webhook::Mutate) => placement::mutate(config, ns, pod, ctx),
        (Subject::Pod { pod, old }, Webhook::ValidateReservation) => reservation::decide(config, ns, pod, *old, ctx),
        (Subject::Pod { pod, old }, _) => placement::validate(config, ns, pod, *old, ctx),
        (Subject::DaemonSet { template, old }, Webhook::Mutate) => {
            placement::mutate_daemon_set(config, ns, template, *old, ctx)
        }
        (Subject::DaemonSet { template, old }, _) => placement::validate_daemon_set(config, ns, template, *old, ctx),
    }
}

/// `webhook`'s decision of a Binding that needs neither its pod nor its node (so the caller
/// reads neither): skipped when the webhook does not decide bindings, when a trusted scheduler
/// binds, or when nothing the webhook checks applies (no group, an excluded namespace, no
/// reservation). `None`: read the pod and decide the [`Subject::Binding`] with [`decide`].
pub fn binding_skipped(webhook: Webhook, config: &Config, ns: &Namespace<'_>, ctx: &Context) -> Option<Outcome> {
    match webhook {
        Webhook::ValidateReservation => reservation::binding_skipped(config, ns, ctx),
        Webhook::Validate => placement::binding_skipped(config, ns, ctx),
        _ => Some(skipped(webhook, BINDING_ELSEWHERE)),
    }
}

/// An outcome for a request `webhook` does not decide, for this reason.
pub fn skipped(webhook: Webhook, why: &str) -> Outcome {
    let mut outcome = Outcome::new(webhook, Decision::Skipped);
    outcome.skip_reason = Some(SkipReason::NotApplicable(why.to_owned()));
    outcome.summary = format!("skipped: {why}");
    outcome
}
