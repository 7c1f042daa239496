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

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use http::StatusCode;
use k8s_openapi::api::core::v1::Namespace as NamespaceObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::{DynamicObject, TypeMeta};
use serde_json::Value;
use serde_json::value::RawValue;
use tracing::field::Empty;
use tracing::{Instrument as _, Level, Span};

pub use self::metrics::AdmissionMetrics;
use self::wire::Trail;
use crate::cluster::namespaces::{self, Labels, LookupError, NamespaceSource};
use crate::cluster::nodes::{NodeMetrics, Nodes};
use crate::config::Loaded;
use crate::namespace_guard::{self, NamespaceWrite};
use crate::placement::reservation;
use crate::placement::{self, Context, Decision, NodeView, Outcome, Pod, SkipReason, Webhook};
use crate::telemetry::{self, DECISION_TARGET};

mod binding;
mod metrics;
mod wire;

const API_VERSION: &str = "admission.k8s.io/v1";
const KIND: &str = "AdmissionReview";
/// Longest audit annotation value, in bytes.
pub const MAX_ANNOTATION_BYTES: usize = 1024;
/// Patch paths named in the `patch` audit annotation when the patch is too long to include.
const ANNOTATION_PATHS: usize = 10;

/// Why a request could not be decided; each maps to an HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    #[error("the request body is empty; expected an admission.k8s.io/v1 AdmissionReview")]
    EmptyBody,
    #[error("the request body is not an AdmissionReview: {0}")]
    Decode(#[source] serde_json::Error),
    #[error("kind is {0:?}; expected \"AdmissionReview\"")]
    WrongKind(String),
    #[error("apiVersion is {0:?}; only \"admission.k8s.io/v1\" is served (set admissionReviewVersions: [v1])")]
    WrongApiVersion(String),
    #[error("the AdmissionReview has no request")]
    MissingRequest,
    #[error("request.uid is empty")]
    MissingUid,
    #[error("request.object is missing")]
    MissingObject,
    #[error("request.namespace is missing (pods are namespaced)")]
    MissingNamespace,
    #[error("request.namespace {namespace:?} is not a namespace name: it {reason}")]
    InvalidNamespace { namespace: String, reason: String },
    #[error("request.{field} has no spec; expected a v1 Pod with a spec")]
    MissingSpec { field: &'static str },
    /// `at`: the path of the field refused in the object (`spec.tolerations`), empty for the object itself.
    #[error("request.{field} is not a valid {kind}: {}{source}", field_prefix(.at))]
    InvalidObject {
        field: &'static str,
        kind: &'static str,
        at: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot determine the pod's group: {0}")]
    Namespace(#[from] LookupError),
    #[error("{0}")]
    Node(String),
    #[error("{0}")]
    BoundPod(#[from] crate::cluster::pods::PodLookupError),
    #[error("no decision within {0:?} (--request-timeout)")]
    Timeout(Duration),
    #[error("cannot encode the response: {0}")]
    Encode(#[source] serde_json::Error),
}

/// `spec.tolerations: ` before an error message, or nothing.
fn field_prefix(at: &str) -> String {
    if at.is_empty() {
        String::new()
    } else {
        format!("{at}: ")
    }
}

impl AdmissionError {
    /// The HTTP status this error is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            AdmissionError::Namespace(_)
            | AdmissionError::Node(_)
            | AdmissionError::BoundPod(_)
            | AdmissionError::Timeout(_) => StatusCode::SERVICE_UNAVAILABLE,
            AdmissionError::Encode(_) => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        }
    }
}

/// A readable admission request.
#[derive(Debug)]
pub struct Parsed {
    /// The request, with `object` and `oldObject` moved into [`Subject`].
    pub request: AdmissionRequest<DynamicObject>,
    pub subject: Subject,
}

/// What the request is about, as far as placement cares.
#[derive(Debug)]
pub enum Subject {
    /// A pod being created or updated (`old` on UPDATE).
    Pod { pod: Box<Pod>, old: Option<Box<Pod>> },
    /// A DaemonSet being created or updated: its pod template made into a pod
    /// (as [`placement::template_pod`] does), and the old one on UPDATE.
    DaemonSet { template: Box<Pod>, old: Option<Box<Pod>> },
    /// A namespace being created or updated (`old` on UPDATE).
    Namespace {
        namespace: Box<NamespaceObject>,
        old: Option<Box<NamespaceObject>>,
    },
    /// A `pods/binding` CREATE: its Binding object, decoded at `/validate-reservation` only.
    Binding(Option<Box<RawValue>>),
    /// Not a pod CREATE/UPDATE: admitted untouched, for this reason.
    NotApplicable(String),
}

/// An unreadable request: the error and, when it could be read, the uid.
#[derive(Debug)]
pub struct Rejected {
    pub uid: Option<String>,
    pub error: AdmissionError,
}

impl Rejected {
    fn new(uid: Option<&str>, error: AdmissionError) -> Self {
        Self {
            uid: uid.map(str::to_owned),
            error,
        }
    }
}

/// Decodes and checks an AdmissionReview body, in one pass (see [`wire`]).
///
/// A pod's placement fields are decoded with their Kubernetes types (a value
/// of the wrong type is [`AdmissionError::InvalidObject`], naming the field);
/// the rest of the pod is checked as JSON syntax only: the API server has
/// validated the object's schema before calling the webhook.
pub fn parse(body: &[u8]) -> Result<Parsed, Rejected> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(Rejected::new(None, AdmissionError::EmptyBody));
    }
    let undecodable = |error| Rejected::new(uid_of(body).as_deref(), AdmissionError::Decode(error));
    // UTF-8 checked once for the whole body, rather than string by string.
    let text = std::str::from_utf8(body).map_err(|e| {
        undecodable(<serde_json::Error as serde::de::Error>::custom(format_args!(
            "the body is not UTF-8: {e}"
        )))
    })?;
    let reading = wire::Reading::default();
    let review = wire::decode(text, &reading).map_err(|error| match reading.object.get() {
        Some(field) if error.classify() == serde_json::error::Category::Data => {
            Rejected::new(uid_of(body).as_deref(), invalid(field, POD, &reading.trail, error))
        }
        _ => undecodable(error),
    })?;
    let uid = review.request.as_ref().map(|r| r.uid.as_str());
    if review.kind != KIND {
        return Err(Rejected::new(uid, AdmissionError::WrongKind(review.kind)));
    }
    if review.api_version != API_VERSION {
        return Err(Rejected::new(uid, AdmissionError::WrongApiVersion(review.api_version)));
    }
    let Some(request) = review.request else {
        return Err(Rejected::new(None, AdmissionError::MissingRequest));
    };
    let (request, object, old_object) = request.split(TypeMeta {
        api_version: review.api_version,
        kind: review.kind,
    });
    if request.uid.is_empty() {
        return Err(Rejected::new(None, AdmissionError::MissingUid));
    }
    let subject = match subject(&request, object, old_object, &reading.trail) {
        Ok(subject) => subject,
        Err(error) => return Err(Rejected::new(Some(&request.uid), error)),
    };
    Ok(Parsed { request, subject })
}

const POD: &str = "v1 Pod";
const DAEMON_SET: &str = "apps/v1 DaemonSet";
const NAMESPACE: &str = "v1 Namespace";

/// An object that is not a valid `kind`: where decoding stopped, and why.
fn invalid(field: &'static str, kind: &'static str, trail: &Trail, source: serde_json::Error) -> AdmissionError {
    AdmissionError::InvalidObject {
        field,
        kind,
        at: trail.path(),
        source,
    }
}

/// What the request is about, its objects decoded (those read raw, now) and checked.
fn subject<'a>(
    request: &AdmissionRequest<DynamicObject>,
    object: wire::Object<'a>,
    old_object: wire::Object<'a>,
    trail: &Trail,
) -> Result<Subject, AdmissionError> {
    use wire::Object;
    if binding::is_binding(request) {
        return Ok(Subject::Binding(match object {
            Object::Raw(raw) => Some(raw.to_owned()),
            _ => None,
        }));
    }
    if let Some(why) = not_applicable(request) {
        return Ok(Subject::NotApplicable(why));
    }
    let update = request.operation == Operation::Update;
    let resource = Resource::of(request);
    if resource != Some(Resource::Namespaces)
        && let Some(error) = namespace_error(request)
    {
        return Err(error);
    }
    let raw = |object: Object<'a>| -> Option<&'a RawValue> {
        match object {
            Object::Raw(raw) => Some(raw),
            _ => None,
        }
    };
    match resource {
        Some(Resource::Pods) => {
            let decode = |object: Object<'_>, field: &'static str| match object {
                Object::Pod(pod) => Ok(Some(pod)),
                Object::Raw(raw) => wire::pod(raw, trail)
                    .map(|pod| Some(Box::new(pod)))
                    .map_err(|e| invalid(field, POD, trail, e)),
                Object::Absent | Object::Skipped => Ok(None),
            };
            let pod = decode(object, "object")?.ok_or(AdmissionError::MissingObject)?;
            if pod.spec.is_none() {
                return Err(AdmissionError::MissingSpec { field: "object" });
            }
            let old = match update {
                true => decode(old_object, "oldObject")?,
                false => None,
            };
            if old.as_ref().is_some_and(|old| old.spec.is_none()) {
                return Err(AdmissionError::MissingSpec { field: "oldObject" });
            }
            Ok(Subject::Pod { pod, old })
        }
        Some(Resource::DaemonSets) => {
            let template = |raw: &RawValue, field| {
                wire::daemon_set_template(raw, trail)
                    .map(Box::new)
                    .map_err(|e| invalid(field, DAEMON_SET, trail, e))
            };
            let (template, old) = object_and_old(raw(object), raw(old_object).filter(|_| update), template)?;
            Ok(Subject::DaemonSet { template, old })
        }
        Some(Resource::Namespaces) => {
            let namespace = |raw: &RawValue, field| {
                serde_json::from_str::<NamespaceObject>(raw.get())
                    .map(Box::new)
                    .map_err(|e| invalid(field, NAMESPACE, &Trail::default(), e))
            };
            let (namespace, old) = object_and_old(raw(object), raw(old_object).filter(|_| update), namespace)?;
            Ok(Subject::Namespace { namespace, old })
        }
        // not_applicable names every other resource.
        None => Ok(Subject::NotApplicable("not a resource pod-director decides".to_owned())),
    }
}

/// A raw object and its old version (on UPDATE) decoded with `decode`; the old one is
/// decoded first, so its error is the one reported when both are invalid.
fn object_and_old<T>(
    object: Option<&RawValue>,
    old: Option<&RawValue>,
    decode: impl Fn(&RawValue, &'static str) -> Result<T, AdmissionError>,
) -> Result<(T, Option<T>), AdmissionError> {
    let object = object.ok_or(AdmissionError::MissingObject)?;
    let old = old.map(|old| decode(old, "oldObject")).transpose()?;
    Ok((decode(object, "object")?, old))
}

/// The subresources of a namespace that are decided like the namespace (the label guard):
/// the API server persists the metadata, labels included, of writes through them.
pub(crate) const DECIDED_NAMESPACE_SUBRESOURCES: [&str; 3] = ["", "status", "finalize"];

/// The resources pod-director decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resource {
    /// core/v1 pods (/mutate, /validate).
    Pods,
    /// apps/v1 daemonsets: their pod templates (/mutate, /validate).
    DaemonSets,
    /// core/v1 namespaces: the group label guard (/validate-namespace).
    Namespaces,
}

impl Resource {
    fn of(request: &AdmissionRequest<DynamicObject>) -> Option<Self> {
        let r = &request.resource;
        match (r.group.as_str(), r.version.as_str(), r.resource.as_str()) {
            ("", "v1", "pods") => Some(Resource::Pods),
            ("apps", "v1", "daemonsets") => Some(Resource::DaemonSets),
            ("", "v1", "namespaces") => Some(Resource::Namespaces),
            _ => None,
        }
    }
}

/// Why the request's namespace cannot be looked up, if it cannot: missing, or
/// not a DNS-1123 label (`ns/status`, `ns#x` must never reach the namespace GET URL).
fn namespace_error(request: &AdmissionRequest<DynamicObject>) -> Option<AdmissionError> {
    let namespace = request.namespace.as_deref().unwrap_or_default();
    if namespace.is_empty() {
        return Some(AdmissionError::MissingNamespace);
    }
    crate::config::syntax::dns1123_label(namespace).map(|reason| AdmissionError::InvalidNamespace {
        namespace: namespace.to_owned(),
        reason,
    })
}

/// Why a well-formed request is none of pod-director's business, if it is not.
fn not_applicable(request: &AdmissionRequest<DynamicObject>) -> Option<String> {
    let r = &request.resource;
    if Resource::of(request).is_none() {
        let group = if r.group.is_empty() { "core" } else { r.group.as_str() };
        return Some(format!(
            "resource {group}/{}/{} is not pods, apps/v1 daemonsets or namespaces",
            r.version, r.resource
        ));
    }
    if let Some(sub) = request.sub_resource.as_deref().filter(|s| !s.is_empty())
        && !(Resource::of(request) == Some(Resource::Namespaces) && DECIDED_NAMESPACE_SUBRESOURCES.contains(&sub))
    {
        return Some(format!("subresource {}/{sub}", r.resource));
    }
    match request.operation {
        Operation::Create | Operation::Update => None,
        Operation::Delete => Some("operation DELETE".to_owned()),
        Operation::Connect => Some("operation CONNECT".to_owned()),
    }
}

/// The request uid of an otherwise unreadable body, when there is one.
///
/// Lenient: everything but `request.uid` is skipped unparsed (serde_json
/// skips ignored values without converting numbers or recursing), so a body
/// that is valid JSON beyond serde_json's limits — `1e400`, thousands of
/// nested objects — still has its uid echoed.
fn uid_of(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Review {
        request: Option<Request>,
    }
    #[derive(serde::Deserialize)]
    struct Request {
        uid: Option<String>,
    }
    let review: Review = serde_json::from_slice(body).ok()?;
    review.request?.uid.filter(|uid| !uid.is_empty())
}

/// The AdmissionReview answering a decided request, as the API server reads it.
pub fn respond(uid: &str, outcome: &Outcome, revision: &str) -> Vec<u8> {
    respond_with_patch(uid, outcome, revision, &outcome.patch_text())
}

/// [`respond`], given the outcome's [`Outcome::patch_text`] (serialized once per review).
fn respond_with_patch(uid: &str, outcome: &Outcome, revision: &str, patch: &str) -> Vec<u8> {
    let annotations = match outcome.group {
        Some(_) => annotations(outcome, revision, patch),
        None => Vec::new(),
    };
    wire::decided(uid, outcome, &annotations, patch)
}

/// The response for a request that could not be decided.
pub(crate) fn render_error(uid: Option<&str>, error: &AdmissionError) -> AdmissionReview<DynamicObject> {
    let mut response = AdmissionResponse::invalid(error);
    response.uid = uid.unwrap_or_default().to_owned();
    let status = error.status();
    response.result.code = status.as_u16();
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response.result.reason = "ServiceUnavailable".to_owned();
    }
    response.into_review()
}

/// Audit annotations for a response concerning a group (the API server prefixes
/// each key with the webhook's name). Values are bounded to [`MAX_ANNOTATION_BYTES`].
#[cfg(test)]
pub(crate) fn audit_annotations(outcome: &Outcome, revision: &str) -> std::collections::BTreeMap<&'static str, String> {
    let patch = outcome.patch_text();
    annotations(outcome, revision, &patch)
        .into_iter()
        .map(|(key, value)| (key, value.into_owned()))
        .collect()
}

/// [`audit_annotations`], given the outcome's [`Outcome::patch_text`], in the order they are written.
fn annotations<'a>(outcome: &'a Outcome, revision: &'a str, patch: &'a str) -> Vec<(&'static str, Cow<'a, str>)> {
    let mut annotations = Vec::with_capacity(8);
    let mut put = |key: &'static str, value: Cow<'a, str>| {
        let value = if value.len() <= MAX_ANNOTATION_BYTES {
            value
        } else {
            Cow::Owned(telemetry::truncate_bytes(&value, MAX_ANNOTATION_BYTES))
        };
        annotations.push((key, value));
    };
    put("decision", outcome.decision.as_str().into());
    if let Some(group) = &outcome.group {
        put("group", group.into());
    }
    if let Some(mode) = outcome.mode {
        put("mode", mode.as_str().into());
    }
    if let Some(reason) = &outcome.skip_reason {
        put("skip-reason", reason.to_string().into());
    }
    if !outcome.summary.is_empty() {
        put("summary", outcome.summary.as_str().into());
    }
    if !outcome.patch.0.is_empty() {
        put("patch", patch_annotation(outcome, patch));
    }
    if !outcome.conflicts.is_empty() {
        let conflicts: Vec<String> = outcome.conflicts.iter().map(ToString::to_string).collect();
        put("conflicts", conflicts.join("; ").into());
    }
    put("config-revision", revision.into());
    annotations
}

/// The patch as compact JSON when it fits, else its size and first paths.
fn patch_annotation<'a>(outcome: &Outcome, patch: &'a str) -> Cow<'a, str> {
    if patch.len() <= MAX_ANNOTATION_BYTES {
        return Cow::Borrowed(patch);
    }
    let ops: Vec<String> = outcome
        .patch
        .0
        .iter()
        .take(ANNOTATION_PATHS)
        .map(|op| {
            let name = serde_json::to_value(op)
                .ok()
                .and_then(|v| v.get("op").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_default();
            format!("{name} {}", op.path())
        })
        .collect();
    let more = outcome.patch.0.len().saturating_sub(ANNOTATION_PATHS);
    let tail = if more > 0 {
        format!(", … {more} more")
    } else {
        String::new()
    };
    Cow::Owned(format!(
        "{} operations: {}{tail}",
        outcome.patch.0.len(),
        ops.join(", ")
    ))
}

/// Serializes a review for the API server. kube-core writes `response.patch`
/// (`Vec<u8>`) as an array of numbers (kube-rs#1781); Go decodes `[]byte` from
/// a base64 string, so the patch is written as one.
pub fn to_wire(review: AdmissionReview<DynamicObject>) -> Result<Vec<u8>, AdmissionError> {
    wire::encode(review).map_err(AdmissionError::Encode)
}

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
    pods: Option<(
        Arc<dyn crate::cluster::pods::PodSource>,
        crate::cluster::pods::PodMetrics,
    )>,
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
        let span = decision_span(webhook);
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
        let ctx = Context::from_user_info(&request.user_info);
        let update = request.operation == Operation::Update;
        match (&parsed.subject, webhook) {
            (Subject::NotApplicable(why), _) => Ok(skipped(webhook, why)),
            (Subject::Namespace { namespace, old }, Webhook::ValidateNamespace) => {
                let empty = Labels::new();
                let write = NamespaceWrite {
                    name: namespace.metadata.name.as_deref().unwrap_or(request.name.as_str()),
                    old_labels: old.as_ref().map(|o| o.metadata.labels.as_ref().unwrap_or(&empty)),
                    labels: namespace.metadata.labels.as_ref().unwrap_or(&empty),
                };
                Ok(namespace_guard::decide(config, &write, &ctx))
            }
            (Subject::Namespace { .. }, _) => Ok(skipped(webhook, "namespaces are decided at /validate-namespace")),
            (Subject::Binding(object), Webhook::ValidateReservation) => {
                self.binding(config, request, object.as_deref()).await
            }
            (Subject::Binding(_), _) => Ok(skipped(webhook, "subresource pods/binding")),
            (_, Webhook::ValidateNamespace) => Ok(skipped(webhook, "/validate-namespace decides namespaces only")),
            (Subject::DaemonSet { .. }, Webhook::ValidateReservation) => Ok(skipped(
                webhook,
                "/validate-reservation decides pods; DaemonSets that intrude are reported by explain and audit",
            )),
            (Subject::Pod { .. }, Webhook::Mutate) if update => {
                Ok(skipped(webhook, "UPDATE is validated, not mutated"))
            }
            (Subject::Pod { pod, old }, _) => {
                let labels = self.labels(config, request).await?;
                let namespace = placement::Namespace {
                    name: request.namespace.as_deref().unwrap_or_default(),
                    labels: &labels,
                };
                // The node a pod names is looked up (cache, else a bounded GET) before deciding.
                let named = match webhook {
                    Webhook::Validate => placement::needs_bound_node(config, &namespace, pod, old.as_deref()),
                    Webhook::ValidateReservation => reservation::needs_named_node(config, pod, old.as_deref()),
                    _ => None,
                };
                let bound = match (&self.nodes, named) {
                    (Some((nodes, metrics)), Some(node)) => Some((node, nodes.lookup(node, metrics).await)),
                    _ => None,
                };
                let view = self.nodes.as_ref().map(|(nodes, _)| nodes.view(bound));
                let ctx = ctx.with_nodes(view.as_ref().map(|v| v as &dyn NodeView));
                let outcome = match webhook {
                    Webhook::Mutate => placement::mutate(config, &namespace, pod, &ctx),
                    Webhook::ValidateReservation => reservation::decide(config, &namespace, pod, old.as_deref(), &ctx),
                    _ => placement::validate(config, &namespace, pod, old.as_deref(), &ctx),
                };
                if outcome.decision == Decision::Error {
                    return Err(AdmissionError::Node(
                        outcome
                            .message
                            .unwrap_or_else(|| "the pod's node cannot be checked".to_owned()),
                    ));
                }
                Ok(outcome)
            }
            (Subject::DaemonSet { template, old }, _) => {
                let labels = self.labels(config, request).await?;
                let namespace = placement::Namespace {
                    name: request.namespace.as_deref().unwrap_or_default(),
                    labels: &labels,
                };
                let view = self.nodes.as_ref().map(|(nodes, _)| nodes.view(None));
                let ctx = ctx.with_nodes(view.as_ref().map(|v| v as &dyn NodeView));
                let outcome = match webhook {
                    Webhook::Mutate => placement::mutate_daemon_set(config, &namespace, template, old.as_deref(), &ctx),
                    _ => placement::validate_daemon_set(config, &namespace, template, old.as_deref(), &ctx),
                };
                Ok(outcome.rerooted(placement::DAEMON_SET_TEMPLATE))
            }
        }
    }

    /// The labels of the request's namespace (none for an excluded one: not looked up).
    async fn labels(
        &self,
        config: &crate::config::Config,
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

fn skipped(webhook: Webhook, why: &str) -> Outcome {
    let mut outcome = Outcome::new(webhook, Decision::Skipped);
    outcome.skip_reason = Some(SkipReason::NotApplicable(why.to_owned()));
    outcome.summary = format!("skipped: {why}");
    outcome
}

/// The request span; its fields are the decision log line's and the exported span's attributes
/// (listed in [`telemetry::DECISION_FIELDS`], held equal by a test).
fn decision_span(webhook: Webhook) -> Span {
    let name = match webhook {
        Webhook::Mutate => "POST /mutate",
        Webhook::Validate => "POST /validate",
        Webhook::ValidateNamespace => "POST /validate-namespace",
        Webhook::ValidateReservation => "POST /validate-reservation",
    };
    tracing::info_span!(
        target: DECISION_TARGET,
        "admission",
        otel.name = name,
        otel.kind = "server",
        webhook = webhook.as_str(),
        admission.request.uid = Empty,
        admission.request.operation = Empty,
        admission.request.dryrun = Empty,
        admission.request.namespace = Empty,
        admission.request.name = Empty,
        admission.request.user = Empty,
        admission.request.resource = Empty,
        admission.object.generate_name = Empty,
        admission.object.owner.kind = Empty,
        admission.object.owner.name = Empty,
        placement.group = Empty,
        placement.mode = Empty,
        placement.decision = Empty,
        placement.skip_reason = Empty,
        placement.conflicts = Empty,
        placement.violations = Empty,
        placement.summary = Empty,
        placement.message = Empty,
        placement.warning = Empty,
        placement.patch.op_count = Empty,
        placement.patch.paths = Empty,
        placement.feasible_nodes = Empty,
        placement.feasible_nodes_before = Empty,
        placement.no_feasible_node = Empty,
        config.revision = Empty,
        latency_ms = Empty,
        error = Empty,
        trace_id = Empty,
        span_id = Empty,
        placement.provisionable_by = Empty,
        reservation.groups = Empty,
        reservation.reason = Empty,
        reservation.intrusions = Empty,
        reservation.toleration = Empty,
        reservation.node = Empty,
        reservation.exempt = Empty,
        reservation.pool_nodes = Empty,
    )
}

/// A field value to record, when there is one.
fn opt<T: tracing::Value>(value: &Option<T>) -> Option<&dyn tracing::Value> {
    value.as_ref().map(|v| v as &dyn tracing::Value)
}

/// The request's fields of the decision span (the `admission.*` run of
/// [`telemetry::DECISION_FIELDS`], after `webhook`), recorded in one dispatch.
static REQUEST_FIELDS: telemetry::FieldBatch<10> = telemetry::FieldBatch::new(telemetry::decision_fields(1));

fn record_request(span: &Span, parsed: &Parsed) {
    let request = &parsed.request;
    let operation = match request.operation {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    };
    let name = match &parsed.subject {
        _ if !request.name.is_empty() => Some(request.name.as_str()),
        Subject::Namespace { namespace, .. } => namespace.metadata.name.as_deref(),
        _ => None,
    };
    let user = request.user_info.username.as_deref().filter(|u| !u.is_empty());
    let resource = Some(request.resource.resource.as_str()).filter(|r| !r.is_empty());
    let (mut generate_name, mut owner) = (None, None);
    if let Subject::Pod { pod, .. } = &parsed.subject {
        generate_name = pod.metadata.generate_name.as_deref();
        let owners = pod.metadata.owner_references.as_deref().unwrap_or_default();
        owner = owners.iter().find(|o| o.controller == Some(true)).or(owners.first());
    }
    let owner_kind = owner.map(|o| o.kind.as_str());
    let owner_name = owner.map(|o| o.name.as_str());
    REQUEST_FIELDS.record(
        span,
        [
            Some(&request.uid.as_str()),
            Some(&operation),
            Some(&request.dry_run),
            opt(&request.namespace.as_deref()),
            opt(&name),
            opt(&user),
            opt(&resource),
            opt(&generate_name),
            opt(&owner_kind),
            opt(&owner_name),
        ],
    );
}

/// Items as a JSON array of their text.
fn json_strings<T: ToString>(items: &[T]) -> String {
    let strings: Vec<String> = items.iter().map(ToString::to_string).collect();
    serde_json::to_string(&strings).unwrap_or_else(|_| "[]".to_owned())
}

/// The outcome's fields of the decision span (the run of [`telemetry::DECISION_FIELDS`] from
/// `placement.group` to `error`), recorded in one dispatch.
static OUTCOME_FIELDS: telemetry::FieldBatch<16> = telemetry::FieldBatch::new(telemetry::decision_fields(11));

/// The `reservation.*` fields of the decision span (the end of [`telemetry::DECISION_FIELDS`]).
static RESERVATION_FIELDS: telemetry::FieldBatch<7> =
    telemetry::FieldBatch::new(telemetry::decision_fields(telemetry::RESERVATION_FIELDS_START));

/// Records the reservations the pod intrudes on: every one (`groups`, `intrusions`), and the
/// one that decided (the first refused, enforce first): how, whether exempt, the pool count.
fn record_reservation(span: &Span, outcome: &Outcome) {
    use placement::reservation::Via;
    let found = &outcome.reservation;
    let lead = found
        .iter()
        .find(|i| i.exempt.is_none() && Some(i.group.as_str()) == outcome.group.as_deref())
        .or(found.first());
    let mut groups: Vec<&str> = found.iter().map(|i| i.group.as_str()).collect();
    groups.dedup();
    let groups = serde_json::to_string(&groups).unwrap_or_else(|_| "[]".to_owned());
    let intrusions = json_strings(found);
    let refused = matches!(outcome.decision, Decision::Denied | Decision::WouldDeny);
    let reason = refused.then_some("reserved");
    let toleration = lead.and_then(|i| match &i.via {
        Via::Toleration { toleration, .. } => Some(toleration.as_str()),
        Via::NodeName(_) | Via::Binding(_) => None,
    });
    let node = lead.and_then(|i| match &i.via {
        Via::NodeName(node) | Via::Binding(node) => Some(node.as_str()),
        Via::Toleration { .. } => None,
    });
    let exempt = (!refused)
        .then(|| found.iter().find_map(|i| i.exempt))
        .flatten()
        .map(|e| e.as_str());
    let pool = lead
        .and_then(|i| i.pool_nodes)
        .map(|(fits, _)| i64::try_from(fits).unwrap_or(i64::MAX));
    RESERVATION_FIELDS.record(
        span,
        [
            Some(&groups.as_str()),
            opt(&reason),
            Some(&intrusions.as_str()),
            opt(&toleration),
            opt(&node),
            opt(&exempt),
            opt(&pool),
        ],
    );
}

/// Records the outcome on the span and writes the one decision log line
/// (`patch`: the outcome's [`Outcome::patch_text`]; `exported`: the span is sampled, so it carries the patch too).
fn log_decision(
    span: &Span,
    outcome: &Outcome,
    patch: &str,
    latency: Duration,
    error: Option<&AdmissionError>,
    exported: bool,
) {
    let conflicts = (!outcome.conflicts.is_empty()).then(|| json_strings(&outcome.conflicts));
    let violations = (!outcome.violations.is_empty()).then(|| json_strings(&outcome.violations));
    // i64, not usize: tracing-opentelemetry exports u64 fields as strings.
    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    let paths: Vec<&str> = outcome.patch.0.iter().map(|op| op.path().as_str()).collect();
    let paths = serde_json::to_string(&paths).unwrap_or_else(|_| "[]".to_owned());
    let feasible = outcome.feasible_nodes.map(count);
    let error_text = error.map(ToString::to_string);
    OUTCOME_FIELDS.record(
        span,
        [
            opt(&outcome.group.as_deref()),
            opt(&outcome.mode.map(|m| m.as_str())),
            Some(&outcome.decision.as_str()),
            opt(&outcome.skip_reason.as_ref().map(|r| r.as_str())),
            opt(&conflicts.as_deref()),
            opt(&violations.as_deref()),
            opt(&Some(outcome.summary.as_str()).filter(|s| !s.is_empty())),
            opt(&outcome.message.as_deref()),
            opt(&outcome.warning.as_deref()),
            Some(&count(outcome.patch.0.len())),
            Some(&paths.as_str()),
            opt(&feasible),
            opt(&feasible.map(|_| outcome.no_feasible_node)),
            opt(&outcome.feasible_nodes_before.map(count)),
            // Microsecond precision is plenty and keeps the number short.
            Some(&(latency.as_micros() as f64 / 1000.0)),
            opt(&error_text.as_deref()),
        ],
    );
    if !outcome.provisionable_by.is_empty() {
        span.record(
            "placement.provisionable_by",
            json_strings(&outcome.provisionable_by).as_str(),
        );
    }
    if !outcome.reservation.is_empty() {
        record_reservation(span, outcome);
    }
    if let Some(text) = &error_text {
        telemetry::set_error_status(span, text);
    }
    if exported {
        telemetry::set_bounded_attribute(span, "placement.patch.json", patch);
    }
    span.in_scope(|| match error {
        None => {
            tracing::event!(target: DECISION_TARGET, Level::INFO, placement.patch.json = patch, "admission decision")
        }
        Some(_) => {
            tracing::event!(target: DECISION_TARGET, Level::WARN, placement.patch.json = patch, "admission decision")
        }
    });
}

#[cfg(test)]
mod node_tests;
#[cfg(test)]
mod requester_tests;
#[cfg(test)]
mod tests;
