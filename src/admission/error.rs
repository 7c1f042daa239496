//! Why a request could not be decided, and the HTTP status each reason is answered with.

use std::time::Duration;

use http::StatusCode;

use crate::cluster::namespaces::LookupError;

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
    #[error(
        "request.oldObject is missing: an UPDATE is decided against the object it replaces, which the API server \
         always sends"
    )]
    MissingOldObject,
    #[error(
        "request.oldObject is set on a CREATE: only an UPDATE replaces an object (send operation UPDATE, or no oldObject)"
    )]
    UnexpectedOldObject,
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
