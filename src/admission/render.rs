//! A decided request's AdmissionReview (allowed or denied, the patch, the audit annotations), and
//! an undecidable one's, written the way the API server reads them.

use std::borrow::Cow;

use http::StatusCode;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionResponse, AdmissionReview};
use serde_json::Value;

use super::AdmissionError;
use super::wire;
use pod_director_engine::placement::{Outcome, Webhook};

/// Longest audit annotation value, in bytes.
pub const MAX_ANNOTATION_BYTES: usize = 1024;
/// Patch paths named in the `patch` audit annotation when the patch is too long to include.
const ANNOTATION_PATHS: usize = 10;

/// The AdmissionReview answering a decided request, as the API server reads it.
pub fn respond(uid: &str, outcome: &Outcome, revision: &str) -> Vec<u8> {
    respond_with_patch(uid, outcome, revision, &outcome.patch_text())
}

/// [`respond`], given the outcome's [`Outcome::patch_text`] (serialized once per review).
pub(super) fn respond_with_patch(uid: &str, outcome: &Outcome, revision: &str, patch: &str) -> Vec<u8> {
    // A group's decision, or the in-tree plugins' (no group, the section's mode).
    let in_tree = matches!(outcome.webhook, Webhook::MutateInTree | Webhook::ValidateInTree) && outcome.mode.is_some();
    let annotations = match outcome.group {
        Some(_) => annotations(outcome, revision, patch),
        None if in_tree => annotations(outcome, revision, patch),
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
            Cow::Owned(pod_director_engine::placement::truncate_bytes(
                &value,
                MAX_ANNOTATION_BYTES,
            ))
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
