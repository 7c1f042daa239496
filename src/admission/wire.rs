//! The AdmissionReview on the wire, without detours through `serde_json::Value`.
//!
//! Reading: kube-core's shape field for field, except that `object` and
//! `oldObject` stay raw JSON (borrowed from the body), so a pod is decoded
//! once, straight into a [`Pod`], instead of JSON → `DynamicObject` → `Value`
//! → `Pod`. Writing: kube-core's serialization with the patch as base64.

use base64::Engine as _;
use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::{DynamicObject, GroupVersionKind, GroupVersionResource, TypeMeta};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// kube-core's `AdmissionReview`, its request's `object` decoded as `O` (a
/// [`Pod`], or left raw) and `oldObject` left raw.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Review<'a, O> {
    pub api_version: String,
    pub kind: String,
    #[serde(borrow)]
    pub request: Option<Request<'a, O>>,
    /// Never sent by the API server; read (and checked) as kube-core reads it.
    #[serde(default)]
    #[allow(dead_code)]
    pub response: Option<AdmissionResponse>,
}

/// [`AdmissionRequest`] with `object` as `O` and `oldObject` as raw JSON (same fields, same defaults).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(bound(deserialize = "O: Deserialize<'de>"))]
pub(super) struct Request<'a, O> {
    pub uid: String,
    pub kind: GroupVersionKind,
    pub resource: GroupVersionResource,
    #[serde(default)]
    pub sub_resource: Option<String>,
    #[serde(default)]
    pub request_kind: Option<GroupVersionKind>,
    #[serde(default)]
    pub request_resource: Option<GroupVersionResource>,
    #[serde(default)]
    pub request_sub_resource: Option<String>,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    pub operation: Operation,
    pub user_info: UserInfo,
    pub object: Option<O>,
    #[serde(borrow)]
    pub old_object: Option<&'a RawValue>,
    #[serde(default)]
    pub dry_run: bool,
    #[serde(default)]
    pub options: Option<RawExtension>,
}

/// The raw objects of a request, to be decoded once it is known what they should be.
#[derive(Clone, Copy)]
pub(super) struct RawObjects<'a> {
    pub object: Option<&'a RawValue>,
    pub old_object: Option<&'a RawValue>,
}

impl<'a> Request<'a, &'a RawValue> {
    pub fn objects(&self) -> RawObjects<'a> {
        RawObjects {
            object: self.object,
            old_object: self.old_object,
        }
    }
}

impl<'a, O> Request<'a, O> {
    /// The kube-core request without its objects; the object; the old object, raw.
    pub fn split(self, types: TypeMeta) -> (AdmissionRequest<DynamicObject>, Option<O>, Option<&'a RawValue>) {
        let request = AdmissionRequest {
            types,
            uid: self.uid,
            kind: self.kind,
            resource: self.resource,
            sub_resource: self.sub_resource,
            request_kind: self.request_kind,
            request_resource: self.request_resource,
            request_sub_resource: self.request_sub_resource,
            name: self.name,
            namespace: self.namespace,
            operation: self.operation,
            user_info: self.user_info,
            object: None,
            old_object: None,
            dry_run: self.dry_run,
            options: self.options,
        };
        (request, self.object, self.old_object)
    }
}

impl RawObjects<'_> {
    /// Both objects decoded as kube-core decodes them in an `AdmissionReview<DynamicObject>`.
    pub fn dynamic(&self) -> Result<(Option<DynamicObject>, Option<DynamicObject>), serde_json::Error> {
        let decode = |raw: Option<&RawValue>| raw.map(dynamic).transpose();
        Ok((decode(self.object)?, decode(self.old_object)?))
    }
}

/// A raw object decoded as kube-core decodes it.
pub(super) fn dynamic(raw: &RawValue) -> Result<DynamicObject, serde_json::Error> {
    serde_json::from_str(raw.get())
}

/// Why a raw object is not a pod.
pub(super) enum NotAPod {
    /// Not even a Kubernetes object: the whole review used to be undecodable.
    Undecodable(serde_json::Error),
    /// A Kubernetes object, but not a valid v1 Pod.
    Invalid(serde_json::Error),
}

/// A raw object decoded straight into a Pod, with the outcome decoding it as a
/// `DynamicObject` and converting that through a `Value` had. The slow way is
/// only taken for what it decided differently: failures, and pods without
/// metadata (`"metadata": null` was refused, `"kind": 0` dropped rather than refused).
pub(super) fn pod(raw: &RawValue) -> Result<Pod, NotAPod> {
    match serde_json::from_str::<Pod>(raw.get()) {
        Ok(pod) if has_metadata(&pod) => Ok(pod),
        _ => {
            let object = dynamic(raw).map_err(NotAPod::Undecodable)?;
            serde_json::to_value(object)
                .and_then(serde_json::from_value)
                .map_err(NotAPod::Invalid)
        }
    }
}

/// Whether a directly decoded pod decodes the same through a `DynamicObject`,
/// which refused `"metadata": null` (a pod without metadata takes the slow way).
pub(super) fn has_metadata(pod: &Pod) -> bool {
    pod.metadata != ObjectMeta::default()
}

/// The review as the API server reads it: kube-core's serialization, except
/// `response.patch`, which kube-core writes as an array of numbers
/// (kube-rs#1781) where Go decodes `[]byte` from a base64 string.
pub(super) fn encode(mut review: AdmissionReview<DynamicObject>) -> Result<Vec<u8>, serde_json::Error> {
    #[derive(Serialize)]
    struct Review<'a> {
        #[serde(flatten)]
        types: &'a TypeMeta,
        #[serde(skip_serializing_if = "Option::is_none")]
        request: Option<&'a AdmissionRequest<DynamicObject>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        response: Option<Response<'a>>,
    }
    #[derive(Serialize)]
    struct Response<'a> {
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
    serde_json::to_vec(&Review {
        types: &review.types,
        request: review.request.as_ref(),
        response: review.response.as_ref().map(|response| Response { response, patch }),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::{AdmissionError, Parsed, Rejected, Subject, parse};
    use super::*;

    /// `parse` as it was before this module: the whole review decoded as
    /// `AdmissionReview<DynamicObject>`, each pod converted through a `Value`;
    /// plus the checks added since (the namespace is a DNS-1123 label, pods have a spec).
    fn reference(body: &[u8]) -> Result<Parsed, Rejected> {
        let rejected = |uid: Option<&str>, error| Rejected {
            uid: uid.map(str::to_owned),
            error,
        };
        let to_pod = |object: DynamicObject| serde_json::to_value(object).and_then(serde_json::from_value::<Pod>);
        if body.iter().all(u8::is_ascii_whitespace) {
            return Err(rejected(None, AdmissionError::EmptyBody));
        }
        let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body)
            .map_err(|e| rejected(super::super::uid_of(body).as_deref(), AdmissionError::Decode(e)))?;
        let uid = review.request.as_ref().map(|r| r.uid.as_str());
        if review.types.kind != super::super::KIND {
            return Err(rejected(uid, AdmissionError::WrongKind(review.types.kind)));
        }
        if review.types.api_version != super::super::API_VERSION {
            return Err(rejected(uid, AdmissionError::WrongApiVersion(review.types.api_version)));
        }
        let mut request: AdmissionRequest<DynamicObject> = review
            .try_into()
            .map_err(|_| rejected(None, AdmissionError::MissingRequest))?;
        if request.uid.is_empty() {
            return Err(rejected(None, AdmissionError::MissingUid));
        }
        let uid = Some(request.uid.clone());
        let reject = |error| rejected(uid.as_deref(), error);
        if let Some(why) = super::super::not_applicable(&request) {
            return Ok(Parsed {
                request,
                subject: Subject::NotApplicable(why),
            });
        }
        if request.namespace.as_deref().is_none_or(str::is_empty) {
            return Err(reject(AdmissionError::MissingNamespace));
        }
        if let Some(reason) = request
            .namespace
            .as_deref()
            .and_then(crate::config::syntax::dns1123_label)
        {
            return Err(reject(AdmissionError::InvalidNamespace {
                namespace: request.namespace.clone().unwrap_or_default(),
                reason,
            }));
        }
        let object = request
            .object
            .take()
            .ok_or_else(|| reject(AdmissionError::MissingObject))?;
        let pod = to_pod(object).map_err(|e| reject(AdmissionError::InvalidPod(e)))?;
        if pod.spec.is_none() {
            return Err(reject(AdmissionError::MissingSpec { field: "object" }));
        }
        let old = match (request.operation == Operation::Update, request.old_object.take()) {
            (true, Some(old)) => {
                let old = to_pod(old).map_err(|e| reject(AdmissionError::InvalidOldPod(e)))?;
                if old.spec.is_none() {
                    return Err(reject(AdmissionError::MissingSpec { field: "oldObject" }));
                }
                Some(Box::new(old))
            }
            (false, Some(old)) => {
                request.old_object = Some(old);
                None
            }
            _ => None,
        };
        Ok(Parsed {
            request,
            subject: Subject::Pod {
                pod: Box::new(pod),
                old,
            },
        })
    }

    fn pod() -> Value {
        json!({
            "kind": "Pod", "apiVersion": "v1",
            "metadata": {
                "generateName": "web-7c9f8d-", "namespace": "team-ci", "creationTimestamp": null,
                "labels": {"app": "web"}, "annotations": {"a": "b"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7c9f8d",
                    "uid": "0f8e3c1a", "controller": true}]
            },
            "spec": {
                "containers": [{"name": "web", "image": "nginx:1.27", "resources": {"limits": {"cpu": "1"}}}],
                "nodeSelector": {"disk": "ssd"},
                "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 30}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}}},
                "terminationGracePeriodSeconds": 30, "priority": 0
            },
            "status": {}
        })
    }

    fn review(operation: &str, resource: &str, old: Value) -> Value {
        json!({
            "kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
            "request": {
                "uid": "705ab4f5", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": resource},
                "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
                "requestResource": {"group": "", "version": "v1", "resource": resource},
                "name": "", "namespace": "team-ci", "operation": operation,
                "userInfo": {"username": "u", "uid": "b4", "groups": ["g"]},
                "object": pod(), "oldObject": old, "dryRun": false,
                "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
            }
        })
    }

    /// Every JSON Pointer inside `value`, depth first.
    fn pointers(value: &Value, at: &str, out: &mut Vec<String>) {
        let children: Vec<(String, &Value)> = match value {
            Value::Object(map) => map
                .iter()
                .map(|(k, v)| (k.replace('~', "~0").replace('/', "~1"), v))
                .collect(),
            Value::Array(items) => items.iter().enumerate().map(|(i, v)| (i.to_string(), v)).collect(),
            _ => Vec::new(),
        };
        for (token, child) in children {
            let pointer = format!("{at}/{token}");
            out.push(pointer.clone());
            pointers(child, &pointer, out);
        }
    }

    /// What a parse result says, comparably: the request and subject, or the error kind and uid.
    fn summary(result: Result<Parsed, Rejected>) -> String {
        match result {
            Ok(parsed) => format!(
                "ok {} {:?}",
                serde_json::to_value(&parsed.request)
                    .map(|v| v.to_string())
                    .unwrap_or_default(),
                parsed.subject
            ),
            Err(rejected) => {
                let text = format!("{:?}", rejected.error);
                let kind = text.split(['(', ' ']).next().unwrap_or_default().to_owned();
                format!("err {kind} uid={:?}", rejected.uid)
            }
        }
    }

    /// `to_wire` as it was before [`encode`]: through a `Value`, the patch swapped for base64.
    fn reference_wire(review: &AdmissionReview<DynamicObject>) -> Value {
        let mut value = serde_json::to_value(review).unwrap_or_default();
        if let (Some(patch), Some(slot)) = (
            review.response.as_ref().and_then(|r| r.patch.as_ref()),
            value.pointer_mut("/response/patch"),
        ) {
            *slot = Value::String(base64::engine::general_purpose::STANDARD.encode(patch));
        }
        value
    }

    #[test]
    fn responses_encode_as_they_did_through_a_value_and_patches_as_the_same_text() {
        use crate::config::Config;
        use crate::placement::{self, Namespace};
        let config = "groups:\n  ci:\n    mode: enforce\n    nodeSelector: {pool: ci}\n    \
                      tolerations: [{key: dedicated, operator: Equal, value: ci, effect: NoSchedule}]\n  \
                      strict: {mode: enforce, onConflict: reject, nodeSelector: {disk: hdd}}\n  \
                      loose: {mode: enforce, onConflict: override, nodeSelector: {disk: hdd}}\n  \
                      shadow: {mode: dryRun, nodeSelector: {pool: ci}}\n";
        let loaded = Config::from_yaml(config, "test", Vec::new()).expect("valid config");
        let body = serde_json::to_vec(&review("CREATE", "pods", Value::Null)).unwrap_or_default();
        let parsed = parse(&body).expect("parses");
        let Subject::Pod { pod, .. } = &parsed.subject else {
            panic!("a pod")
        };
        let mut checked = 0;
        for group in ["ci", "strict", "loose", "shadow", "unknown"] {
            let labels = std::collections::BTreeMap::from([("pod-director/group".to_owned(), group.to_owned())]);
            let namespace = Namespace {
                name: "team-ci",
                labels: &labels,
            };
            let outcome = placement::mutate(&loaded.config, &namespace, pod, &placement::Context::default());
            assert_eq!(outcome.patch_text(), outcome.patch_json().to_string(), "{group}");
            let review = super::super::render(&parsed.request, &outcome, &loaded.revision).expect("renders");
            let wire: Value = serde_json::from_slice(&encode(review.clone()).expect("encodes")).expect("JSON");
            assert_eq!(wire, reference_wire(&review), "{group}");
            checked += usize::from(review.response.as_ref().is_some_and(|r| r.patch.is_some()));
        }
        let error = super::super::render_error(Some("uid"), &AdmissionError::MissingObject);
        let wire: Value = serde_json::from_slice(&encode(error.clone()).expect("encodes")).expect("JSON");
        assert_eq!(wire, reference_wire(&error));
        assert!(checked >= 2, "patched responses checked: {checked}");
    }

    #[test]
    fn every_single_field_change_parses_or_fails_exactly_as_the_dynamic_object_decoder_did() {
        let replacements = [
            Value::Null,
            json!(0),
            json!(-1),
            json!(""),
            json!("x"),
            json!([]),
            json!({}),
            json!(true),
            json!(1.5e300),
            json!("v1"),
            json!("Pod"),
        ];
        let bases = [
            review("CREATE", "pods", Value::Null),
            review("UPDATE", "pods", pod()),
            review("CREATE", "pods", pod()),
            review("CREATE", "deployments", Value::Null),
        ];
        let mut checked = 0;
        for base in bases {
            let mut all = Vec::new();
            pointers(&base, "", &mut all);
            for pointer in &all {
                let mut variants: Vec<Value> = replacements
                    .iter()
                    .map(|replacement| {
                        let mut body = base.clone();
                        if let Some(slot) = body.pointer_mut(pointer) {
                            *slot = replacement.clone();
                        }
                        body
                    })
                    .collect();
                let (parent, key) = pointer.rsplit_once('/').unwrap_or_default();
                let mut removed = base.clone();
                if let Some(Value::Object(map)) = removed.pointer_mut(parent) {
                    map.remove(key);
                }
                variants.push(removed);
                for body in variants {
                    let bytes = serde_json::to_vec(&body).unwrap_or_default();
                    assert_eq!(
                        summary(parse(&bytes)),
                        summary(reference(&bytes)),
                        "{pointer} in {body}"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 1000, "{checked}");
    }
}
