//! AdmissionReview in → AdmissionReview out.
//!
//! The walk of one review ([`Admission::review`]): [`parse`] turns the bytes into a typed
//! request in one pass ([`wire`]: a pod's placement fields are built, the rest of it skipped),
//! or says precisely what is wrong; the engine is asked once whether the webhook decides the
//! request (`Decidable::at`); the namespace's labels are looked up (cache, else a bounded GET),
//! then [`Admission::decide`] looks up the node the decision names and takes the engine's
//! decision; the response is written the way the API server reads it ([`respond`], [`to_wire`]
//! an undecidable request's), with one decision log line ([`log`]), the span ([`span`]) and the
//! metrics. A `pods/binding` reads its pod before the same decision ([`binding`]).
//!
//! What each kind of request gets:
//!
//! | request | HTTP | response |
//! |---|---|---|
//! | a Pod CREATE (or UPDATE at /validate and /validate-reservation) | 200 | the decision: allowed (+ patch in enforce) or denied |
//! | an apps/v1 DaemonSet CREATE or UPDATE at /mutate or /validate | 200 | its pod template decided as a pod (patch under `/spec/template`) |
//! | a Namespace CREATE or UPDATE at /validate-namespace, also through its `status` or `finalize` subresource | 200 | the namespace label guard's decision |
//! | a `pods/binding` CREATE at /validate or /validate-reservation | 200 | the decision of the binding's target node ([`binding`]; the pod read from the API server, 503 when it cannot be) |
//! | pod UPDATE at /mutate, DELETE, CONNECT, any other subresource (`pods/binding` elsewhere, `pods/status`…, whatever its object), another resource, or a resource at the wrong endpoint | 200 | allowed, untouched; logged as `skipped` / `not_applicable` |
//! | unreadable: empty, not JSON, not an `admission.k8s.io/v1` AdmissionReview, no request/uid/object/namespace, an UPDATE without `oldObject` or a CREATE with one, a namespace that is not a DNS-1123 label, object not of its resource's kind, a Pod without a spec, a field placement reads (metadata name, generateName, namespace, labels, annotations, ownerReferences; spec nodeName, nodeSelector, tolerations, affinity) of the wrong type | 400 | an AdmissionReview whose `response.status` says what is wrong, naming the field (uid copied whenever the body has one, even beyond serde_json's number limits) |
//! | the namespace's labels cannot be read (API server unreachable) | 503 | likewise, with the lookup error |
//! | an enforce decision names a node (`spec.nodeName`, a binding's target) that cannot be looked up | 503 | likewise, with the lookup error |
//!
//! The other fields of a pod (containers, volumes, status…) are checked as JSON syntax only: the
//! API server validated the object before calling the webhook. Any non-200 answer makes the API
//! server apply the webhook's failurePolicy, so bad input never blocks pods of a dryRun group
//! (Ignore) and never slips through an enforce group (Fail).

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use http::StatusCode;
use kube::core::DynamicObject;
use kube::core::admission::AdmissionRequest;
use tracing::{Instrument as _, Span};

pub use self::error::AdmissionError;
use self::log::log_decision;
pub use self::metrics::AdmissionMetrics;
pub use self::parse::{Parsed, Rejected, Reviewed, parse};
#[cfg(test)]
pub(crate) use self::render::audit_annotations;
pub(crate) use self::render::render_error;
use self::render::respond_with_patch;
pub use self::render::{MAX_ANNOTATION_BYTES, respond, to_wire};
use self::span::record_request;
use crate::cluster::namespaces::{self, NamespaceData, NamespaceSource};
use crate::cluster::nodes::{NodeMetrics, Nodes};
use crate::cluster::pods::{PodMetrics, PodSource};
use crate::telemetry;
use pod_director_engine::config::{Config, Loaded};
use pod_director_engine::decision::{self, Decidable, Subject, View};
use pod_director_engine::placement::{self, Context, Decision, NodeView, Outcome, Webhook};

mod binding;
mod error;
mod log;
mod metrics;
mod parse;
mod render;
mod span;
mod wire;

/// Logged (WARN, in the decision's span) when `/validate` would refuse a pod of a dryRun or warn
/// group that `/mutate`'s decision of the same pod admits: the `shadowValidation` sample matters.
pub const SHADOW_DISAGREES: &str = "shadow: /validate would refuse a pod that /mutate's decision admits; pods the shadowValidation sample leaves out may hide such refusals";

/// An HTTP answer: a status and an AdmissionReview JSON body.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: StatusCode,
    pub body: Vec<u8>,
}

/// Everything a review needs: the live configuration, namespace labels, node data, metrics.
pub struct Admission {
    config: Arc<ArcSwap<Loaded>>,
    namespaces: Arc<dyn NamespaceSource>,
    /// `None`: decisions carry no feasibility counts and `spec.nodeName` is not checked.
    /// The node metrics count the lookups of `spec.nodeName`.
    nodes: Option<(Arc<Nodes>, NodeMetrics)>,
    /// Where the pods of `pods/binding` requests are read (`None`: bindings are undecidable).
    pods: Option<(Arc<dyn PodSource>, PodMetrics)>,
    metrics: AdmissionMetrics,
    timeout: Duration,
}

impl Admission {
    /// `timeout` bounds each decision (the namespace lookup may wait on the API server).
    pub fn new(
        config: Arc<ArcSwap<Loaded>>,
        namespaces: Arc<dyn NamespaceSource>,
        metrics: AdmissionMetrics,
        timeout: Duration,
    ) -> Self {
        Self {
            config,
            namespaces,
            nodes: None,
            pods: None,
            metrics,
            timeout,
        }
    }

    /// Decides with node data: feasibility counts, and `spec.nodeName` checked.
    pub fn with_nodes(mut self, nodes: Arc<Nodes>, metrics: NodeMetrics) -> Self {
        self.nodes = Some((nodes, metrics));
        self
    }

    /// Reviews one request body arriving at `webhook`: decides, logs one
    /// decision line, counts, and answers. Never fails.
    pub async fn review(&self, webhook: Webhook, headers: &http::HeaderMap, body: &[u8]) -> Reply {
        let started = Instant::now();
        let span = telemetry::decision_span(
            match webhook {
                Webhook::Mutate => "POST /mutate",
                Webhook::Validate => "POST /validate",
                Webhook::ValidateNamespace => "POST /validate-namespace",
                Webhook::ValidateReservation => "POST /validate-reservation",
                Webhook::MutateInTree => "POST /mutate-in-tree",
                Webhook::ValidateInTree => "POST /validate-in-tree",
            },
            webhook.as_str(),
        );
        telemetry::join_caller_trace(&span, headers);
        let trace_id = telemetry::record_trace_ids(&span);
        let loaded = self.config.load_full();
        span.record(telemetry::fields::TRACE[0], loaded.revision.as_str());

        let result = self
            .decide_body(webhook, &loaded, body, &span)
            .instrument(span.clone())
            .await;
        let (outcome, patch, reply, error) = match result {
            Ok((parsed, outcome)) => {
                // Serialized once for the response, the audit annotation and the log line.
                let patch = outcome.patch_text();
                let body = respond_with_patch(&parsed.request.uid, &outcome, &loaded.revision, &patch);
                (
                    outcome,
                    patch,
                    Reply {
                        status: StatusCode::OK,
                        body,
                    },
                    None,
                )
            }
            Err(rejected) => {
                let status = rejected.error.status();
                let review = render_error(rejected.uid.as_deref(), &rejected.error);
                // An error review carries no patch and serializes; fall back to the bare message anyway.
                let body = to_wire(review).unwrap_or_else(|_| rejected.error.to_string().into_bytes());
                (
                    Outcome::new(webhook, Decision::Error),
                    "[]".to_owned(),
                    Reply { status, body },
                    Some(rejected.error),
                )
            }
        };
        let latency = started.elapsed();
        self.metrics
            .observe_traced_decision(&outcome, latency, trace_id.as_deref());
        log_decision(&span, &outcome, &patch, latency, error.as_ref(), trace_id.is_some());
        reply
    }

    /// The body parsed, then decided within the timeout.
    async fn decide_body(
        &self,
        webhook: Webhook,
        loaded: &Loaded,
        body: &[u8],
        span: &Span,
    ) -> Result<(Parsed, Outcome), Rejected> {
        let parsed = parse(webhook, body)?;
        record_request(span, &parsed);
        let outcome = tokio::time::timeout(self.timeout, self.placement(webhook, loaded, &parsed))
            .await
            .unwrap_or(Err(AdmissionError::Timeout(self.timeout)))
            .map_err(|e| Rejected::new(Some(&parsed.request.uid), e))?;
        Ok((parsed, outcome))
    }

    /// `webhook`'s decision of the parsed request: the engine asked once whether it decides it,
    /// the namespace looked up, then [`Admission::decide`] (a binding's pod read first: [`binding`]).
    async fn placement(&self, webhook: Webhook, loaded: &Loaded, parsed: &Parsed) -> Result<Outcome, AdmissionError> {
        let (request, config) = (&parsed.request, &loaded.config);
        if let Reviewed::Binding(object) = &parsed.subject {
            return self.binding(webhook, config, request, object.as_deref()).await;
        }
        let subject = match parsed.subject.subject(&request.name) {
            Ok(subject) => subject,
            Err(why) => return Ok(decision::skipped(webhook, why)),
        };
        let decidable = match Decidable::at(webhook, &subject) {
            Ok(decidable) => decidable,
            Err(why) => return Ok(decision::skipped(webhook, why)),
        };
        // A namespace write is its own namespace; a pod's or a DaemonSet's is looked up.
        let found = match &subject {
            Subject::Namespace(write) => NamespaceData::from(write.labels.clone()),
            _ => self.namespace(config, request).await?,
        };
        let name = request.namespace.as_deref().unwrap_or(request.name.as_str());
        let namespace = placement::Namespace::new(name, &found.labels).with_annotations(&found.annotations);
        let context = Context::from_user_info(&request.user_info);
        self.decide(decidable, config, &namespace, context).await
    }

    /// The engine's decision of `decidable` in `namespace`: the node it names looked up first
    /// (cache, else a bounded GET); a node that cannot be looked up where it matters (an enforce
    /// decision) makes the request undecidable. The patch as the response carries it.
    async fn decide(
        &self,
        decidable: Decidable<'_>,
        config: &Config,
        namespace: &placement::Namespace<'_>,
        context: Context<'_>,
    ) -> Result<Outcome, AdmissionError> {
        let named = decidable.node_to_look_up(&View {
            config,
            namespace,
            context: &context,
        });
        let looked_up = match (&self.nodes, named) {
            (Some((nodes, metrics)), Some(node)) => Some((node, nodes.lookup(node, metrics).await)),
            _ => None,
        };
        let nodes = self.nodes.as_ref().map(|(nodes, _)| nodes.view(looked_up));
        let context = context.with_nodes(nodes.as_ref().map(|v| v as &dyn NodeView));
        let view = View {
            config,
            namespace,
            context: &context,
        };
        let outcome = decidable.decide(&view);
        if decidable.shadow_disagrees(&view, &outcome) {
            self.metrics.shadow_disagreement(&outcome);
            tracing::warn!(
                placement.group = outcome.group.as_deref().unwrap_or_default(),
                placement.summary = outcome.summary.as_str(),
                "{SHADOW_DISAGREES}"
            );
        }
        if outcome.decision == Decision::Error {
            let message = outcome
                .message
                .unwrap_or_else(|| "the node cannot be checked".to_owned());
            return Err(AdmissionError::Node(message));
        }
        Ok(match decidable.patch_root() {
            Some(root) => outcome.rerooted(root),
            None => outcome,
        })
    }

    /// The request's namespace: its labels and in-tree annotations (none for an excluded one:
    /// not looked up).
    async fn namespace(
        &self,
        config: &Config,
        request: &AdmissionRequest<DynamicObject>,
    ) -> Result<NamespaceData, AdmissionError> {
        let name = request.namespace.as_deref().unwrap_or_default();
        if config.excluded_namespaces.iter().any(|n| n == name) {
            Ok(NamespaceData::default())
        } else {
            Ok(namespaces::lookup(self.namespaces.as_ref(), name).await?)
        }
    }

    /// Whether the namespace cache (and the Node cache, when there is one) has
    /// synced (the configuration is always valid once loaded).
    pub fn is_ready(&self) -> bool {
        self.namespaces.is_ready() && self.nodes.as_ref().is_none_or(|(n, _)| n.is_ready())
    }

    /// How many nodes the Node cache holds (`None` without one).
    pub(crate) fn cached_nodes(&self) -> Option<usize> {
        self.nodes.as_ref().map(|(n, _)| n.cached_count())
    }

    /// How many namespaces the namespace cache holds.
    pub(crate) fn cached_namespaces(&self) -> usize {
        self.namespaces.cached_count()
    }

    /// Groups that cached namespaces select but the live configuration does not define.
    pub(crate) fn orphaned_groups(&self) -> std::collections::BTreeMap<String, usize> {
        crate::cluster::orphans::count(&self.config.load().config, self.namespaces.as_ref())
    }
}

#[cfg(test)]
mod tests;
