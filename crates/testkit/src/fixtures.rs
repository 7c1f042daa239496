//! AdmissionReview bodies shaped like kube-apiserver's, for tests and benches:
//! the one review builder of the tree (unit tests, `tests/`, `benches/`), and
//! the pod a ReplicaSet creates ([`replica_set_pod`]), a review's JSON edited ([`with`], [`without`]) and a response's patch ([`decoded_patch`]);
//! for the server tests, a pod with its default tolerations ([`pod`]), its reviews ([`review`], [`pod_create`],
//! [`review_bytes`], [`raw_request`]) and the pod a patch makes ([`patched`]).
//!
//! [`Review::bytes`] writes the fields in the order kube-apiserver's Go
//! encoder writes them (`uid`, `kind`, `resource`, … `operation`, `userInfo`,
//! `object`, `oldObject`, `dryRun`, `options`): the order the one-pass decoder
//! is built for. [`Review::value`] gives the same review as a JSON value to
//! edit; bytes serialized from an edited `Value` have their keys sorted
//! (`object` before `operation` and `resource`), which takes the decoder's
//! path for objects that come before their request's resource.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::Serialize;
use serde_json::{Value, json};

/// A review's JSON edited: the engine's test helpers, shared.
pub use pod_director_engine::testing::{with, without};

/// The requester of [`Review::pod`]: the ReplicaSet controller, as kube-controller-manager runs it.
pub(crate) const REPLICA_SET_CONTROLLER: &str = "system:serviceaccount:kube-system:replicaset-controller";

/// A pod as the ReplicaSet controller creates it in `namespace`: `generateName`,
/// no name yet, its owner, one container and the spec defaults the API server fills in.
pub fn replica_set_pod(namespace: &str) -> Value {
    json!({
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "generateName": "web-7c9f8d-",
            "namespace": namespace,
            "creationTimestamp": null,
            "labels": {"app": "web", "pod-template-hash": "7c9f8d"},
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7c9f8d",
                "uid": "0f8e3c1a-2b4d-4e6f-8a9b-1c2d3e4f5a6b", "controller": true, "blockOwnerDeletion": true
            }]
        },
        "spec": {
            "containers": [{"name": "web", "image": "nginx:1.27", "resources": {},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority",
            "priority": 0
        },
        "status": {}
    })
}

/// An AdmissionReview (`admission.k8s.io/v1`) request, built field by field.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Review {
    kind: &'static str,
    api_version: &'static str,
    pub request: Request,
}

/// The review's request, fields in kube-apiserver's order.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    pub uid: String,
    pub kind: Value,
    pub resource: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sub_resource: Option<String>,
    pub request_kind: Value,
    pub request_resource: Value,
    pub name: String,
    pub namespace: String,
    pub operation: String,
    pub user_info: Value,
    pub object: Value,
    pub old_object: Value,
    pub dry_run: bool,
    pub options: Value,
}

impl Review {
    /// A request on `resource` (`[group, version, resource]`) for an object of
    /// `kind` (`[group, version, kind]`), by the ReplicaSet controller; the name
    /// is the object's `metadata.name` (empty when it has none yet).
    pub fn new(resource: [&str; 3], kind: [&str; 3], namespace: &str, operation: &str, object: Value) -> Self {
        let resource = json!({"group": resource[0], "version": resource[1], "resource": resource[2]});
        let kind = json!({"group": kind[0], "version": kind[1], "kind": kind[2]});
        let options = match operation {
            "CREATE" => json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}),
            "UPDATE" => json!({"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}),
            "DELETE" => json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"}),
            _ => Value::Null,
        };
        Self {
            kind: "AdmissionReview",
            api_version: "admission.k8s.io/v1",
            request: Request {
                uid: "705ab4f5-6393-11e8-b7cc-42010a800002".to_owned(),
                kind: kind.clone(),
                resource: resource.clone(),
                sub_resource: None,
                request_kind: kind,
                request_resource: resource,
                name: object["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
                namespace: namespace.to_owned(),
                operation: operation.to_owned(),
                user_info: json!({
                    "username": REPLICA_SET_CONTROLLER,
                    "uid": "b4ac6e8f-8d6e-4b4f-9a1e-3f1e2d3c4b5a",
                    "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"]
                }),
                object,
                old_object: Value::Null,
                dry_run: false,
                options,
            },
        }
    }

    /// A pod `operation` (`CREATE`, `UPDATE`…) in the pod's `metadata.namespace`.
    pub fn pod(operation: &str, pod: Value) -> Self {
        let namespace = pod["metadata"]["namespace"].as_str().unwrap_or_default().to_owned();
        Self::new(["", "v1", "pods"], ["", "v1", "Pod"], &namespace, operation, pod)
    }

    /// A DaemonSet `operation` in `namespace`.
    pub fn daemon_set(namespace: &str, operation: &str, daemon_set: Value) -> Self {
        Self::new(
            ["apps", "v1", "daemonsets"],
            ["apps", "v1", "DaemonSet"],
            namespace,
            operation,
            daemon_set,
        )
    }

    /// A Namespace `operation` (the request's namespace is the namespace's own name).
    pub fn namespace(operation: &str, namespace: Value) -> Self {
        let name = namespace["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        Self::new(
            ["", "v1", "namespaces"],
            ["", "v1", "Namespace"],
            &name,
            operation,
            namespace,
        )
    }

    pub fn uid(mut self, uid: &str) -> Self {
        self.request.uid = uid.to_owned();
        self
    }

    /// The object before the update (`oldObject`).
    pub fn old(mut self, old: Value) -> Self {
        self.request.old_object = old;
        self
    }

    /// The requester (`userInfo`: `username`, `groups`).
    pub fn user(mut self, username: &str, groups: &[&str]) -> Self {
        self.request.user_info = json!({"username": username, "uid": "0c1d2e3f", "groups": groups});
        self
    }

    /// The requester as a whole `userInfo` object.
    pub fn user_info(mut self, user_info: Value) -> Self {
        self.request.user_info = user_info;
        self
    }

    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.request.dry_run = dry_run;
        self
    }

    pub fn sub_resource(mut self, sub_resource: &str) -> Self {
        self.request.sub_resource = Some(sub_resource.to_owned());
        self
    }

    /// The body, fields in kube-apiserver's order.
    pub fn bytes(&self) -> Vec<u8> {
        // Serializing JSON values and strings into a Vec cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// The review as a JSON value, to edit.
    pub fn value(&self) -> Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// The patch of an AdmissionReview `response`, base64-decoded (`None` when it carries none).
pub fn decoded_patch(response: &Value) -> Option<json_patch::Patch> {
    let encoded = response["patch"].as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .expect("patch is base64");
    Some(serde_json::from_slice(&bytes).expect("patch is a JSON Patch"))
}

/// `pairs` as a label map.
pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

/// A pod as a ReplicaSet creates it ([`replica_set_pod`]), with the
/// DefaultTolerationSeconds tolerations; `spec` entries are merged into it.
pub fn pod(namespace: &str, extra_spec: Value) -> Value {
    let mut pod = replica_set_pod(namespace);
    pod["spec"]["tolerations"] = json!([
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    ]);
    if let (Some(spec), Value::Object(extra)) = (pod["spec"].as_object_mut(), extra_spec) {
        for (k, v) in extra {
            if k == "tolerations" {
                if let (Some(Value::Array(have)), Value::Array(more)) = (spec.get_mut("tolerations"), v) {
                    have.extend(more);
                }
            } else {
                spec.insert(k, v);
            }
        }
    }
    pod
}

/// A pod AdmissionReview exactly as kube-apiserver sends it ([`Review`]).
pub fn review(uid: &str, operation: &str, object: &Value, old_object: Option<&Value>) -> Value {
    let review = Review::pod(operation, object.clone()).uid(uid);
    match old_object {
        Some(old) => review.old(old.clone()).value(),
        None => review.value(),
    }
}

/// A CREATE review of a plain [`pod`] in `namespace`.
pub fn pod_create(uid: &str, namespace: &str) -> Value {
    review(uid, "CREATE", &pod(namespace, json!({})), None)
}

/// The bytes of a CREATE review of a plain [`pod`] in namespace `ns`.
pub fn review_bytes(uid: &str) -> Vec<u8> {
    serde_json::to_vec(&pod_create(uid, "ns")).unwrap_or_default()
}

/// A whole HTTP/1.1 `POST /mutate` of [`review_bytes`].
pub fn raw_request(uid: &str) -> Vec<u8> {
    let body = review_bytes(uid);
    let mut request = format!(
        "POST /mutate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(&body);
    request
}

/// `pod` with `patch` applied, as the API server would.
pub fn patched(pod: &Value, patch: &json_patch::Patch) -> Value {
    let mut doc = pod.clone();
    json_patch::patch(&mut doc, patch).expect("the patch applies to the original pod");
    doc
}

#[cfg(test)]
mod tests;
