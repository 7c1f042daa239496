//! The decision span's fields, recorded in runs ([`FieldBatch`], the runs of [`fields`]) as the
//! request is read and the outcome known; the span itself is [`telemetry::decision_span`].

use std::time::Duration;

use kube::core::admission::Operation;
use tracing::Span;

use super::{AdmissionError, Parsed, Reviewed};
use crate::telemetry::{self, FieldBatch, fields};
use pod_director_engine::placement::{self, Decision, Outcome};

/// A field value to record, when there is one.
fn opt<T: tracing::Value>(value: &Option<T>) -> Option<&dyn tracing::Value> {
    value.as_ref().map(|v| v as &dyn tracing::Value)
}

/// The request's fields of the decision span (the `admission.*` run of
/// [`telemetry::DECISION_FIELDS`], after `webhook`), recorded in one dispatch.
static REQUEST_FIELDS: FieldBatch<10> = FieldBatch::new(fields::REQUEST);

pub(super) fn record_request(span: &Span, parsed: &Parsed) {
    let request = &parsed.request;
    let operation = match request.operation {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    };
    let name = match &parsed.subject {
        _ if !request.name.is_empty() => Some(request.name.as_str()),
        Reviewed::Namespace(write) => write.as_deref().object().metadata.name.as_deref(),
        _ => None,
    };
    let user = request.user_info.username.as_deref().filter(|u| !u.is_empty());
    let resource = Some(request.resource.resource.as_str()).filter(|r| !r.is_empty());
    let (mut generate_name, mut owner) = (None, None);
    if let Reviewed::Pod(write) = &parsed.subject {
        let pod = write.as_deref().object();
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
static OUTCOME_FIELDS: FieldBatch<16> = FieldBatch::new(fields::OUTCOME);

/// The `reservation.*` fields of the decision span (the end of [`telemetry::DECISION_FIELDS`]).
static RESERVATION_FIELDS: FieldBatch<7> = FieldBatch::new(fields::RESERVATION);

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

/// Records the outcome on the span (`patch`: the outcome's [`Outcome::patch_text`]; `exported`:
/// the span is sampled, so it carries the patch too).
pub(super) fn record_outcome(
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
        span.record(fields::PROVISION[0], json_strings(&outcome.provisionable_by).as_str());
    }
    if let Some(alternative) = &outcome.alternative {
        span.record(fields::ALTERNATIVE[0], alternative.as_str());
    }
    if !outcome.reservation.is_empty() {
        record_reservation(span, outcome);
    }
    if let Some(text) = &error_text {
        telemetry::set_error_status(span, text);
    }
    if exported {
        telemetry::set_bounded_attribute(span, fields::PATCH[0], patch);
    }
}
