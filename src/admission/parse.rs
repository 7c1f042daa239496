//! Request bytes → a typed request ([`Parsed`]), in one pass ([`super::wire`]), or precisely
//! what is wrong ([`Rejected`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace as NamespaceObject;
use kube::core::admission::{AdmissionRequest, Operation};
use kube::core::{DynamicObject, TypeMeta};
use serde_json::value::RawValue;

use super::AdmissionError;
use super::wire::{self, Trail};
use pod_director_engine::decision::{Subject, Write};
use pod_director_engine::namespace_guard::NamespaceWrite;
use pod_director_engine::placement::{Pod, Webhook};

const API_VERSION: &str = "admission.k8s.io/v1";
const KIND: &str = "AdmissionReview";

/// A readable admission request.
#[derive(Debug)]
pub struct Parsed {
    /// The request, with `object` and `oldObject` moved into [`Reviewed`].
    pub request: AdmissionRequest<DynamicObject>,
    pub subject: Reviewed,
}

/// What the request is about, as far as placement cares: the objects of a CREATE or an UPDATE
/// as the operation writes them (an UPDATE without `oldObject`, or a CREATE with one, is refused).
#[derive(Debug)]
pub enum Reviewed {
    /// A pod being created or updated.
    Pod(Write<Box<Pod>>),
    /// A DaemonSet being created or updated: its pod template made into a pod
    /// (as `placement::template_pod` does).
    DaemonSet(Write<Box<Pod>>),
    /// A namespace being created or updated.
    Namespace(Write<Box<NamespaceObject>>),
    /// A `pods/binding` CREATE: its Binding object, decoded at `/validate` and `/validate-reservation`.
    Binding(Option<Box<RawValue>>),
    /// Not a pod CREATE/UPDATE: admitted untouched, for this reason.
    NotApplicable(String),
}

/// The labels (or annotations) of a namespace object without any.
static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

impl Reviewed {
    /// What the engine decides of a pod, a DaemonSet or a namespace (`name`: the request's, for
    /// a namespace object without one); for a request not decided, why.
    pub(super) fn subject<'a>(&'a self, name: &'a str) -> Result<Subject<'a>, &'a str> {
        let labels = |namespace: &'a NamespaceObject| namespace.metadata.labels.as_ref().unwrap_or(&NO_LABELS);
        let annotations =
            |namespace: &'a NamespaceObject| namespace.metadata.annotations.as_ref().unwrap_or(&NO_LABELS);
        Ok(match self {
            Reviewed::Pod(write) => Subject::Pod(write.as_deref()),
            Reviewed::DaemonSet(write) => Subject::DaemonSet(write.as_deref()),
            Reviewed::Namespace(write) => {
                let write = write.as_deref();
                Subject::Namespace(NamespaceWrite {
                    name: write.object().metadata.name.as_deref().unwrap_or(name),
                    old_labels: write.old().map(labels),
                    labels: labels(write.object()),
                    old_annotations: write.old().map(annotations),
                    annotations: annotations(write.object()),
                })
            }
            // Decided once its pod is read (`super::binding`).
            Reviewed::Binding(_) => return Err("subresource pods/binding"),
            Reviewed::NotApplicable(why) => return Err(why),
        })
    }
}

/// An unreadable request: the error and, when it could be read, the uid.
#[derive(Debug)]
pub struct Rejected {
    pub uid: Option<String>,
    pub error: AdmissionError,
}

impl Rejected {
    pub(super) fn new(uid: Option<&str>, error: AdmissionError) -> Self {
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
/// validated the object's schema before calling the webhook. The fields of a pod's QoS
/// class are read for the webhooks that decide by it only (the in-tree plugins').
pub fn parse(webhook: Webhook, body: &[u8]) -> Result<Parsed, Rejected> {
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
    let reading = wire::Reading::new(matches!(webhook, Webhook::MutateInTree | Webhook::ValidateInTree));
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
    let subject = match subject(&request, object, old_object, &reading) {
        Ok(subject) => subject,
        Err(error) => return Err(Rejected::new(Some(&request.uid), error)),
    };
    Ok(Parsed { request, subject })
}

const POD: &str = "v1 Pod";
const DAEMON_SET: &str = "apps/v1 DaemonSet";
const NAMESPACE: &str = "v1 Namespace";

/// An object that is not a valid `kind`: where decoding stopped, and why.
pub(super) fn invalid(
    field: &'static str,
    kind: &'static str,
    trail: &Trail,
    source: serde_json::Error,
) -> AdmissionError {
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
    reading: &wire::Reading,
) -> Result<Reviewed, AdmissionError> {
    use wire::Object;
    let trail = &reading.trail;
    if is_binding(request) {
        return Ok(Reviewed::Binding(match object {
            Object::Raw(raw) => Some(raw.to_owned()),
            _ => None,
        }));
    }
    if let Some(why) = not_applicable(request) {
        return Ok(Reviewed::NotApplicable(why));
    }
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
    let operation = &request.operation;
    match resource {
        Some(Resource::Pods) => {
            let decode = |object: Object<'_>, field: &'static str| match object {
                Object::Pod(pod) => Ok(Some(pod)),
                Object::Raw(raw) => wire::pod(raw, reading)
                    .map(|pod| Some(Box::new(pod)))
                    .map_err(|e| invalid(field, POD, trail, e)),
                Object::Absent | Object::Skipped => Ok(None),
            };
            let pod = decode(object, "object")?.ok_or(AdmissionError::MissingObject)?;
            if pod.spec.is_none() {
                return Err(AdmissionError::MissingSpec { field: "object" });
            }
            let old = match old_of(operation, old_object)? {
                Some(old) => decode(old, "oldObject")?,
                None => None,
            };
            if old.as_ref().is_some_and(|old| old.spec.is_none()) {
                return Err(AdmissionError::MissingSpec { field: "oldObject" });
            }
            Ok(Reviewed::Pod(written(pod, old)))
        }
        Some(Resource::DaemonSets) => {
            let template = |raw: &RawValue, field| {
                wire::daemon_set_template(raw, trail)
                    .map(Box::new)
                    .map_err(|e| invalid(field, DAEMON_SET, trail, e))
            };
            let object = raw(object).ok_or(AdmissionError::MissingObject)?;
            let (template, old) = object_and_old(object, old_of(operation, old_object)?.and_then(raw), template)?;
            Ok(Reviewed::DaemonSet(written(template, old)))
        }
        Some(Resource::Namespaces) => {
            let namespace = |raw: &RawValue, field| {
                serde_json::from_str::<NamespaceObject>(raw.get())
                    .map(Box::new)
                    .map_err(|e| invalid(field, NAMESPACE, &Trail::default(), e))
            };
            let object = raw(object).ok_or(AdmissionError::MissingObject)?;
            let (namespace, old) = object_and_old(object, old_of(operation, old_object)?.and_then(raw), namespace)?;
            Ok(Reviewed::Namespace(written(namespace, old)))
        }
        // not_applicable names every other resource.
        None => Ok(Reviewed::NotApplicable(
            "not a resource pod-director decides".to_owned(),
        )),
    }
}

/// The review's `oldObject` as `operation` has it: an UPDATE's (decided against the stored
/// object, which the API server always sends), none for a CREATE. A review that says otherwise
/// cannot be decided (and is never decided as the other operation).
fn old_of<'a>(operation: &Operation, old: wire::Object<'a>) -> Result<Option<wire::Object<'a>>, AdmissionError> {
    match (operation, old) {
        (Operation::Update, wire::Object::Absent) => Err(AdmissionError::MissingOldObject),
        (Operation::Update, old) => Ok(Some(old)),
        (_, wire::Object::Absent) => Ok(None),
        _ => Err(AdmissionError::UnexpectedOldObject),
    }
}

/// The write of `object`: an update from `old` ([`old_of`] gives it for an UPDATE only), else a creation.
fn written<T>(object: T, old: Option<T>) -> Write<T> {
    match old {
        Some(old) => Write::Update { new: object, old },
        None => Write::Create(object),
    }
}

/// A raw object and its old version (on UPDATE) decoded with `decode`; the old one is
/// decoded first, so its error is the one reported when both are invalid.
fn object_and_old<T>(
    object: &RawValue,
    old: Option<&RawValue>,
    decode: impl Fn(&RawValue, &'static str) -> Result<T, AdmissionError>,
) -> Result<(T, Option<T>), AdmissionError> {
    let old = old.map(|old| decode(old, "oldObject")).transpose()?;
    Ok((decode(object, "object")?, old))
}

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
pub(super) fn namespace_error(request: &AdmissionRequest<DynamicObject>) -> Option<AdmissionError> {
    let namespace = request.namespace.as_deref().unwrap_or_default();
    if namespace.is_empty() {
        return Some(AdmissionError::MissingNamespace);
    }
    pod_director_engine::syntax::dns1123_label(namespace).map(|reason| AdmissionError::InvalidNamespace {
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
        && !(Resource::of(request) == Some(Resource::Namespaces) && wire::DECIDED_NAMESPACE_SUBRESOURCES.contains(&sub))
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
    struct UidReview {
        request: Option<UidRequest>,
    }
    #[derive(serde::Deserialize)]
    struct UidRequest {
        uid: Option<String>,
    }
    let review: UidReview = serde_json::from_slice(body).ok()?;
    review.request?.uid.filter(|uid| !uid.is_empty())
}

/// Whether the request is a Binding: a CREATE of the `pods/binding` subresource.
pub(super) fn is_binding(request: &AdmissionRequest<DynamicObject>) -> bool {
    let r = &request.resource;
    (r.group.as_str(), r.version.as_str(), r.resource.as_str()) == ("", "v1", "pods")
        && request.sub_resource.as_deref() == Some("binding")
        && request.operation == Operation::Create
}
