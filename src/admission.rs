//! AdmissionReview in → AdmissionReview out.
//!
//! [`parse`] turns request bytes into a typed request in one pass ([`wire`]:
//! a pod's placement fields are built, the rest of it skipped), or says
//! precisely what is wrong; the placement engine decides, and [`respond`] writes the
//! response the way the API server reads it ([`to_wire`] an undecidable request's).
//! [`Admission::review`] strings these together with the namespace lookup, the
//! decision log line, the span and the metrics.
//!
//! What each kind of request gets:
//!
//! | request | HTTP | response |
//! |---|---|---|
//! | a Pod CREATE (or UPDATE at /validate) | 200 | the decision: allowed (+ patch in enforce) or denied |
//! | an apps/v1 DaemonSet CREATE or UPDATE at /mutate or /validate | 200 | its pod template decided as a pod (patch under `/spec/template`) |
//! | a Namespace CREATE or UPDATE at /validate-namespace, also through its `status` or `finalize` subresource | 200 | the namespace label guard's decision |
//! | a `pods/binding` CREATE at /validate-reservation | 200 | the reservation's decision of the binding's target node ([`binding`]; the pod read from the API server, 503 when it cannot be) |
//! | pod UPDATE at /mutate, DELETE, CONNECT, any other subresource (`pods/binding` elsewhere, `pods/status`…, whatever its object), another resource, or a resource at the wrong endpoint | 200 | allowed, untouched; logged as `skipped` / `not_applicable` |
//! | unreadable: empty, not JSON, not an `admission.k8s.io/v1` AdmissionReview, no request/uid/object/namespace, a namespace that is not a DNS-1123 label, object not of its resource's kind, a Pod without a spec, a field placement reads (metadata name, generateName, namespace, labels, annotations, ownerReferences; spec nodeName, nodeSelector, tolerations, affinity) of the wrong type | 400 | an AdmissionReview whose `response.status` says what is wrong, naming the field (uid copied whenever the body has one, even beyond serde_json's number limits) |
//!
//! The other fields of a pod (containers, volumes, status…) are checked as JSON
//! syntax only: the API server validated the object before calling the webhook.
//! | the namespace's labels cannot be read (API server unreachable) | 503 | likewise, with the lookup error |
//! | an enforce group's pod names a node (`spec.nodeName`) that cannot be looked up | 503 | likewise, with the lookup error |
//!
//! Any non-200 answer makes the API server apply the webhook's
//! failurePolicy, so bad input never blocks pods of a dryRun group (Ignore) and
//! never slips through an enforce group (Fail).

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
use crate::cluster::namespaces::{self, Labels, NamespaceSource};
use crate::cluster::nodes::{NodeMetrics, Nodes};
use crate::cluster::pods::{PodMetrics, PodSource};
use crate::telemetry;
use pod_director_engine::config::Loaded;
use pod_director_engine::decision::{self, Subject as Decided, View};
use pod_director_engine::namespace_guard::NamespaceWrite;
use pod_director_engine::placement::{self, Context, Decision, NodeView, Outcome, Webhook};

mod binding;
mod error;
mod log;
mod metrics;
mod parse;
mod render;
mod span;
mod wire;

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
            },
            webhook.as_str(),
        );
        telemetry::join_caller_trace(&span, headers);
        let trace_id = telemetry::record_trace_ids(&span);
        let loaded = self.config.load_full();
        span.record("config.revision", loaded.revision.as_str());

        let result = self
            .decide(webhook, &loaded, body, &span)
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

    async fn decide(
        &self,
        webhook: Webhook,
        loaded: &Loaded,
        body: &[u8],
        span: &Span,
    ) -> Result<(Parsed, Outcome), Rejected> {
        let parsed = parse(body)?;
        record_request(span, &parsed);
        let outcome = tokio::time::timeout(self.timeout, self.placement(webhook, loaded, &parsed))
            .await
            .unwrap_or(Err(AdmissionError::Timeout(self.timeout)))
            .map_err(|e| Rejected::new(Some(&parsed.request.uid), e))?;
        Ok((parsed, outcome))
    }

    async fn placement(&self, webhook: Webhook, loaded: &Loaded, parsed: &Parsed) -> Result<Outcome, AdmissionError> {
        let request = &parsed.request;
        let config = &loaded.config;
        let context = Context::from_user_info(&request.user_info);
        let empty = Labels::new();
        let write;
        let subject = match &parsed.subject {
            Reviewed::NotApplicable(why) => return Ok(decision::skipped(webhook, why)),
            Reviewed::Binding(object) if matches!(webhook, Webhook::Validate | Webhook::ValidateReservation) => {
                return self.binding(webhook, config, request, object.as_deref()).await;
            }
            Reviewed::Binding(_) => return Ok(decision::skipped(webhook, decision::BINDING_ELSEWHERE)),
            Reviewed::Pod { pod, old } => Decided::Pod {
                pod,
                old: old.as_deref(),
            },
            Reviewed::DaemonSet { template, old } => Decided::DaemonSet {
                template,
                old: old.as_deref(),
            },
            Reviewed::Namespace { namespace, old } => {
                write = NamespaceWrite {
                    name: namespace.metadata.name.as_deref().unwrap_or(request.name.as_str()),
                    old_labels: old.as_ref().map(|o| o.metadata.labels.as_ref().unwrap_or(&empty)),
                    labels: namespace.metadata.labels.as_ref().unwrap_or(&empty),
                };
                Decided::Namespace(&write)
            }
        };
        if let Some(why) = decision::not_decided(webhook, &subject) {
            return Ok(decision::skipped(webhook, why));
        }
        // A namespace write is its own namespace; a pod's or a DaemonSet's is looked up.
        let labels = match &subject {
            Decided::Namespace(write) => write.labels.clone(),
            _ => self.labels(config, request).await?,
        };
        let namespace = placement::Namespace {
            name: request.namespace.as_deref().unwrap_or(request.name.as_str()),
            labels: &labels,
        };
        // The node a pod names is looked up (cache, else a bounded GET) before deciding.
        let named = decision::node_to_look_up(
            webhook,
            &subject,
            &View {
                config,
                namespace: &namespace,
                context: &context,
            },
        );
        let bound = match (&self.nodes, named) {
            (Some((nodes, metrics)), Some(node)) => Some((node, nodes.lookup(node, metrics).await)),
            _ => None,
        };
        let nodes = self.nodes.as_ref().map(|(nodes, _)| nodes.view(bound));
        let context = context.with_nodes(nodes.as_ref().map(|v| v as &dyn NodeView));
        let view = View {
            config,
            namespace: &namespace,
            context: &context,
        };
        let outcome = decision::decide(webhook, &subject, &view);
        match subject {
            Decided::DaemonSet { .. } => Ok(outcome.rerooted(placement::DAEMON_SET_TEMPLATE)),
            _ if outcome.decision == Decision::Error => Err(AdmissionError::Node(
                outcome
                    .message
                    .unwrap_or_else(|| "the pod's node cannot be checked".to_owned()),
            )),
            _ => Ok(outcome),
        }
    }

    /// The labels of the request's namespace (none for an excluded one: not looked up).
    async fn labels(
        &self,
        config: &pod_director_engine::config::Config,
        request: &AdmissionRequest<DynamicObject>,
    ) -> Result<Labels, AdmissionError> {
        let name = request.namespace.as_deref().unwrap_or_default();
        if config.excluded_namespaces.iter().any(|n| n == name) {
            Ok(Labels::new())
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
mod log_tests;
#[cfg(test)]
mod node_tests;
#[cfg(test)]
mod requester_tests;
#[cfg(test)]
mod tests;
