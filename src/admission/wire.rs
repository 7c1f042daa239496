//! The AdmissionReview on the wire, read in one pass.
//!
//! Reading: the review's fields are decoded as kube-core decodes them, except
//! the objects. A pod's `object` (and its `oldObject` on UPDATE) is decoded
//! while the review is read — in Go's field order `resource`, `subResource`
//! (omitted when empty) and `operation` come first — straight into the engine's
//! lean [`Pod`]: its placement fields are built, everything else is skipped as
//! JSON syntax. Objects of the other resources pod-director reads (DaemonSets,
//! Namespaces, a `pods/binding`'s Binding), and pods whose request names its
//! resource or operation only after the object, are kept as raw JSON borrowed
//! from the body and decoded once the request says what they are. Objects of
//! requests pod-director does not decide are skipped unread.
//!
//! JSON members are unordered, so what the request is never depends on where
//! `subResource` stands. A pod object read before any `subResource` is read on
//! the *assumption* that there is none (Go's order: an empty one is omitted, one
//! that is set comes first): when a `subResource` after it contradicts that — the
//! object of `pods/binding` is a Binding, of `pods/eviction` an Eviction — or the
//! object fails to decode as a pod, the review is read again with every object
//! kept raw ([`decode`]), and decided from the complete request. The fields of a pod's QoS
//! class are read for the in-tree webhooks only ([`Reading::new`]), typed in the same pass; one
//! without the API's shape makes the review (or the raw object) be read again with them read
//! leniently, never an error (`seeds::Qos`).
//! Fields nothing reads (`requestKind`, `requestResource`, `options`, …)
//! are skipped too. Writing: a decided request's review straight from the
//! outcome ([`decided`]); an error review with kube-core's serialization
//! ([`encode`]); the patch as base64 in both. The pod decoder's seeds are in `seeds.rs`.

mod seeds;

use std::cell::Cell;
use std::fmt;

use base64::Engine as _;
use k8s_openapi::api::authentication::v1::UserInfo;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::{DynamicObject, GroupVersionKind, GroupVersionResource, TypeMeta};
use serde::Serialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

pub(super) use self::seeds::Trail;
use self::seeds::{DaemonSetSeed, Key, Nullable, PodSeed, Qos};
use pod_director_engine::placement::{Outcome, Pod};

/// What decoding left behind for error messages: which object was being read
/// when decoding failed, and where in it ([`Trail`]).
#[derive(Debug, Default)]
pub(super) struct Reading {
    pub trail: Trail,
    /// `object` or `oldObject` while one is decoded inside the review.
    pub object: Cell<Option<&'static str>>,
    /// Set while a pod object is decoded before any `subResource` was read (on the
    /// assumption that there is none), and when the request's `subResource`
    /// contradicted that assumption: the review is then read again with raw objects.
    assumed: Cell<bool>,
    /// How a pod's QoS class is read (its containers' and its own resources, `status.qosClass`),
    /// when it is: only the in-tree plugins' webhooks decide by it; the others skip those fields unread.
    qos: Option<Qos>,
}

impl Reading {
    /// A reading that reads a pod's QoS class's fields when `qos` says so.
    pub(super) fn new(qos: bool) -> Self {
        Self {
            qos: qos.then(Qos::default),
            ..Self::default()
        }
    }

    /// How the QoS class's fields are read; none: they are skipped.
    pub(super) fn qos(&self) -> Option<&Qos> {
        self.qos.as_ref()
    }

    /// Whether a reading failed on a QoS field that did not have the API's shape: if so, it is
    /// reset to read the object again, those fields leniently.
    fn read_qos_again(&self) -> bool {
        let again = self.qos.as_ref().is_some_and(Qos::read_again);
        if again {
            self.reset();
        }
        again
    }

    /// Forgets a failed or contradicted first reading.
    fn reset(&self) {
        self.trail.reset();
        self.object.set(None);
        self.assumed.set(false);
        if let Some(qos) = &self.qos {
            qos.reset();
        }
    }
}

/// The review: its types, and its request.
pub(super) struct Review<'a> {
    pub api_version: String,
    pub kind: String,
    pub request: Option<Request<'a>>,
}

/// An object of the request, as far as it was read.
#[derive(Debug)]
pub(super) enum Object<'a> {
    /// Absent, or `null`.
    Absent,
    /// Present, not read: the request is none of pod-director's business (or a CREATE's `oldObject`).
    Skipped,
    /// Raw JSON, to be decoded once the request says what it is.
    Raw(&'a RawValue),
    /// A pod, decoded in the review's pass.
    Pod(Box<Pod>),
}

/// kube-core's `AdmissionRequest` fields that pod-director reads, the objects as [`Object`].
pub(super) struct Request<'a> {
    pub uid: String,
    pub kind: GroupVersionKind,
    pub resource: GroupVersionResource,
    pub sub_resource: Option<String>,
    pub name: String,
    pub namespace: Option<String>,
    pub operation: Operation,
    pub user_info: UserInfo,
    pub object: Object<'a>,
    pub old_object: Object<'a>,
    pub dry_run: bool,
}

impl<'a> Request<'a> {
    /// The kube-core request without its objects (read by the response builders), and the objects.
    pub(super) fn split(self, types: TypeMeta) -> (AdmissionRequest<DynamicObject>, Object<'a>, Object<'a>) {
        let request = AdmissionRequest {
            types,
            uid: self.uid,
            kind: self.kind,
            resource: self.resource,
            sub_resource: self.sub_resource,
            request_kind: None,
            request_resource: None,
            request_sub_resource: None,
            name: self.name,
            namespace: self.namespace,
            operation: self.operation,
            user_info: self.user_info,
            object: None,
            old_object: None,
            dry_run: self.dry_run,
            options: None,
        };
        (request, self.object, self.old_object)
    }
}

/// Decodes a review from `text`, noting in `reading` where an object failed: in one
/// pass, unless a pod object read before the request's `subResource` turns out not to
/// be one (see the module's text): then again, with every object kept raw.
pub(super) fn decode<'a>(text: &'a str, reading: &Reading) -> Result<Review<'a>, serde_json::Error> {
    match decode_reading(text, reading) {
        Err(_) if reading.read_qos_again() => decode_reading(text, reading),
        review => review,
    }
}

/// [`decode`] without the QoS fields' second reading.
fn decode_reading<'a>(text: &'a str, reading: &Reading) -> Result<Review<'a>, serde_json::Error> {
    match decode_with(text, reading, false) {
        Ok(review) if !reading.assumed.get() => Ok(review),
        Err(error) if !reading.assumed.get() => Err(error),
        _ => {
            reading.reset();
            decode_with(text, reading, true)
        }
    }
}

/// [`decode`], once; `raw`: every object is kept raw.
fn decode_with<'a>(text: &'a str, reading: &Reading, raw: bool) -> Result<Review<'a>, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let review = ReviewSeed { reading, raw }.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(review)
}

/// A raw pod object decoded into the engine's [`Pod`].
pub(super) fn pod(raw: &RawValue, reading: &Reading) -> Result<Pod, serde_json::Error> {
    let read = || PodSeed::pod(reading).deserialize(&mut serde_json::Deserializer::from_str(raw.get()));
    match read() {
        Err(_) if reading.read_qos_again() => read(),
        pod => pod,
    }
}

/// A raw DaemonSet object: its pod template as a [`Pod`].
pub(super) fn daemon_set_template(raw: &RawValue, trail: &Trail) -> Result<Pod, serde_json::Error> {
    DaemonSetSeed { trail }.deserialize(&mut serde_json::Deserializer::from_str(raw.get()))
}

struct ReviewSeed<'r> {
    reading: &'r Reading,
    /// Every object is kept raw (the second reading).
    raw: bool,
}

impl<'de> DeserializeSeed<'de> for ReviewSeed<'_> {
    type Value = Review<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Review<'de>, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ReviewSeed<'_> {
    type Value = Review<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an AdmissionReview object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Review<'de>, A::Error> {
        let (mut api_version, mut kind, mut request) = (None, None, None);
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.as_str() {
                "apiVersion" => once(&mut api_version, map.next_value()?, "apiVersion")?,
                "kind" => once(&mut kind, map.next_value()?, "kind")?,
                "request" => {
                    let seed = Nullable(RequestSeed {
                        reading: self.reading,
                        raw: self.raw,
                    });
                    once(&mut request, map.next_value_seed(seed)?, "request")?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Review {
            api_version: api_version.ok_or_else(|| de::Error::missing_field("apiVersion"))?,
            kind: kind.ok_or_else(|| de::Error::missing_field("kind"))?,
            request: request.flatten(),
        })
    }
}

/// Sets a field read once; a second occurrence of its key is an error, as with serde's derive.
fn once<T, E: de::Error>(slot: &mut Option<T>, value: T, name: &'static str) -> Result<(), E> {
    if slot.is_some() {
        return Err(E::duplicate_field(name));
    }
    *slot = Some(value);
    Ok(())
}

struct RequestSeed<'r> {
    reading: &'r Reading,
    raw: bool,
}

impl<'de> DeserializeSeed<'de> for RequestSeed<'_> {
    type Value = Request<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Request<'de>, D::Error> {
        deserializer.deserialize_map(self)
    }
}

/// The subresources of a namespace that are decided like the namespace (the label guard):
/// the API server persists the metadata, labels included, of writes through them.
pub(super) const DECIDED_NAMESPACE_SUBRESOURCES: [&str; 3] = ["", "status", "finalize"];

/// How an object is read, from what the request said before it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Read {
    Pod,
    /// As a pod, before the request named any subresource.
    AssumedPod,
    Raw,
    Skip,
}

/// What pod-director needs of `object` (or `oldObject`), given the request's
/// resource, subresource and operation when they came before it (else: raw;
/// `sub`: none or empty when the request has none, or has not named it yet).
fn how(resource: Option<&GroupVersionResource>, sub: Option<&str>, operation: Option<&Operation>, old: bool) -> Read {
    let (Some(resource), Some(operation)) = (resource, operation) else {
        return Read::Raw;
    };
    let decided = match (
        resource.group.as_str(),
        resource.version.as_str(),
        resource.resource.as_str(),
        sub.unwrap_or_default(),
    ) {
        ("", "v1", "pods", "") => Read::Pod,
        // The Binding of `pods/binding`: /validate and the reservation decide the node it targets.
        ("", "v1", "pods", "binding") => Read::Raw,
        ("apps", "v1", "daemonsets", "") => Read::Raw,
        ("", "v1", "namespaces", sub) if DECIDED_NAMESPACE_SUBRESOURCES.contains(&sub) => Read::Raw,
        _ => return Read::Skip,
    };
    match (operation, old) {
        (Operation::Create, false) | (Operation::Update, _) => decided,
        _ => Read::Skip,
    }
}

impl<'de> Visitor<'de> for RequestSeed<'_> {
    type Value = Request<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an AdmissionRequest object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Request<'de>, A::Error> {
        let mut uid = None;
        let mut kind = None;
        let mut resource: Option<GroupVersionResource> = None;
        let mut sub_resource: Option<Option<String>> = None;
        let mut name: Option<Option<String>> = None;
        let mut namespace: Option<Option<String>> = None;
        let mut operation: Option<Operation> = None;
        let mut user_info = None;
        let mut object = None;
        let mut old_object = None;
        let mut dry_run: Option<Option<bool>> = None;
        // Whether `object`, `oldObject` were read as pods before any subResource.
        let mut assumed = [false; 2];
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.as_str() {
                "uid" => once(&mut uid, map.next_value::<String>()?, "uid")?,
                "kind" => once(&mut kind, map.next_value()?, "kind")?,
                "resource" => once(&mut resource, map.next_value()?, "resource")?,
                "subResource" => once(&mut sub_resource, map.next_value()?, "subResource")?,
                "name" => once(&mut name, map.next_value()?, "name")?,
                "namespace" => once(&mut namespace, map.next_value()?, "namespace")?,
                "operation" => once(&mut operation, map.next_value()?, "operation")?,
                "userInfo" => once(&mut user_info, map.next_value()?, "userInfo")?,
                "dryRun" => once(&mut dry_run, map.next_value()?, "dryRun")?,
                field @ ("object" | "oldObject") => {
                    let old = field == "oldObject";
                    let sub = sub_resource.as_ref().and_then(|s| s.as_deref());
                    let read = match how(resource.as_ref(), sub, operation.as_ref(), old) {
                        Read::Pod if self.raw => Read::Raw,
                        // Read on the assumption that no subResource follows (Go's order).
                        Read::Pod if sub_resource.is_none() => Read::AssumedPod,
                        read => read,
                    };
                    let value = self.object(&mut map, read, if old { "oldObject" } else { "object" })?;
                    assumed[usize::from(old)] = read == Read::AssumedPod;
                    let (slot, name) = if old {
                        (&mut old_object, "oldObject")
                    } else {
                        (&mut object, "object")
                    };
                    once(slot, value, name)?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let sub = sub_resource.as_ref().and_then(|s| s.as_deref());
        for (slot, old) in [(&mut object, false), (&mut old_object, true)] {
            if assumed[usize::from(old)] {
                match how(resource.as_ref(), sub, operation.as_ref(), old) {
                    Read::Pod | Read::AssumedPod => {}
                    Read::Skip => *slot = Some(Object::Skipped),
                    // A pod read where the complete request says otherwise: read it again.
                    Read::Raw => self.reading.assumed.set(true),
                }
            }
        }
        Ok(Request {
            uid: uid.ok_or_else(|| de::Error::missing_field("uid"))?,
            kind: kind.ok_or_else(|| de::Error::missing_field("kind"))?,
            resource: resource.ok_or_else(|| de::Error::missing_field("resource"))?,
            sub_resource: sub_resource.flatten(),
            name: name.flatten().unwrap_or_default(),
            namespace: namespace.flatten(),
            operation: operation.ok_or_else(|| de::Error::missing_field("operation"))?,
            user_info: user_info.ok_or_else(|| de::Error::missing_field("userInfo"))?,
            object: object.unwrap_or(Object::Absent),
            old_object: old_object.unwrap_or(Object::Absent),
            dry_run: dry_run.flatten().unwrap_or_default(),
        })
    }
}

impl RequestSeed<'_> {
    fn object<'de, A: MapAccess<'de>>(
        &self,
        map: &mut A,
        read: Read,
        field: &'static str,
    ) -> Result<Object<'de>, A::Error> {
        Ok(match read {
            // `null` (a CREATE's `oldObject` as the API server sends it) is no object.
            Read::Skip => match map.next_value::<Option<IgnoredAny>>()? {
                Some(_) => Object::Skipped,
                None => Object::Absent,
            },
            Read::Raw => map
                .next_value::<Option<&'de RawValue>>()?
                .map_or(Object::Absent, Object::Raw),
            Read::Pod | Read::AssumedPod => {
                let assumed = read == Read::AssumedPod;
                self.reading.object.set(Some(field));
                // Left set when the pod fails to decode: the review is read again.
                self.reading.assumed.set(assumed);
                let pod = map.next_value_seed(Nullable(PodSeed::pod(self.reading)))?;
                self.reading.assumed.set(false);
                self.reading.object.set(None);
                pod.map_or(Object::Absent, |pod| Object::Pod(Box::new(pod)))
            }
        })
    }
}

/// The review answering a decided request, written straight from the outcome: what
/// kube-core's `AdmissionResponse` would carry (`status` `{}` when allowed, a 403
/// `Failure` when denied), the patch as base64, no intermediate response object.
pub(super) fn decided(
    uid: &str,
    outcome: &Outcome,
    annotations: &[(&str, std::borrow::Cow<'_, str>)],
    patch: &str,
) -> Vec<u8> {
    let annotated: usize = annotations.iter().map(|(k, v)| k.len() + v.len() + 8).sum();
    let mut out = Vec::with_capacity(160 + uid.len() + patch.len() * 4 / 3 + annotated);
    out.extend_from_slice(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"#);
    string(&mut out, uid);
    if outcome.allowed() {
        out.extend_from_slice(br#","allowed":true,"status":{}"#);
        if outcome.apply_patch() && !outcome.patch.0.is_empty() {
            out.extend_from_slice(br#","patch":""#);
            let start = out.len();
            // The exact room needed; encoding into it cannot fail (a patch of over 2^63 bytes cannot exist).
            out.resize(start + base64::encoded_len(patch.len(), true).unwrap_or_default(), 0);
            let _ = base64::engine::general_purpose::STANDARD.encode_slice(patch, &mut out[start..]);
            out.extend_from_slice(br#"","patchType":"JSONPatch""#);
        }
    } else {
        let fallback;
        let message = match &outcome.message {
            Some(message) => message.as_str(),
            None => {
                fallback = format!("pod-director: {}", outcome.decision);
                fallback.as_str()
            }
        };
        out.extend_from_slice(br#","allowed":false,"status":{"status":"Failure","code":403"#);
        if !message.is_empty() {
            out.extend_from_slice(br#","message":"#);
            string(&mut out, message);
        }
        out.extend_from_slice(br#","reason":"Forbidden"}"#);
    }
    if !annotations.is_empty() {
        out.extend_from_slice(br#","auditAnnotations":{"#);
        for (i, (key, value)) in annotations.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            string(&mut out, key);
            out.push(b':');
            string(&mut out, value);
        }
        out.push(b'}');
    }
    if let Some(warning) = &outcome.warning {
        out.extend_from_slice(br#","warnings":["#);
        string(&mut out, warning);
        out.push(b']');
    }
    out.extend_from_slice(b"}}");
    out
}

/// Appends `text` as a JSON string (as serde_json writes it, faster: the log lines' writer).
fn string(out: &mut Vec<u8>, text: &str) {
    crate::telemetry::write_json_string(out, text);
}

/// The review as the API server reads it: kube-core's serialization, except
/// `response.patch`, which kube-core writes as an array of numbers
/// (kube-rs#1781) where Go decodes `[]byte` from a base64 string.
pub(super) fn encode(mut review: AdmissionReview<DynamicObject>) -> Result<Vec<u8>, serde_json::Error> {
    #[derive(Serialize)]
    struct EncodedReview<'a> {
        #[serde(flatten)]
        types: &'a TypeMeta,
        #[serde(skip_serializing_if = "Option::is_none")]
        request: Option<&'a AdmissionRequest<DynamicObject>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        response: Option<EncodedResponse<'a>>,
    }
    #[derive(Serialize)]
    struct EncodedResponse<'a> {
        /// Without its patch, which follows as base64.
        #[serde(flatten)]
        response: &'a AdmissionResponse,
        #[serde(skip_serializing_if = "Option::is_none")]
        patch: Option<String>,
    }
    // Taken out of the (owned) response rather than copying the response without it.
    let patch = review
        .response
        .as_mut()
        .and_then(|response| response.patch.take())
        .map(|patch| base64::engine::general_purpose::STANDARD.encode(patch));
    serde_json::to_vec(&EncodedReview {
        types: &review.types,
        request: review.request.as_ref(),
        response: review
            .response
            .as_ref()
            .map(|response| EncodedResponse { response, patch }),
    })
}

#[cfg(test)]
mod tests;
