//! The one decision log line: the outcome recorded on the decision span, then one event in it.

use std::time::Duration;

use tracing::{Level, Span};

use super::AdmissionError;
use super::span::record_outcome;
use crate::telemetry::DECISION_TARGET;
use pod_director_engine::placement::Outcome;

/// Records the outcome on the span and writes the one decision log line
/// (`patch`: the outcome's [`Outcome::patch_text`]; `exported`: the span is sampled, so it carries the patch too).
pub(super) fn log_decision(
    span: &Span,
    outcome: &Outcome,
    patch: &str,
    latency: Duration,
    error: Option<&AdmissionError>,
    exported: bool,
) {
    record_outcome(span, outcome, patch, latency, error, exported);
    span.in_scope(|| match error {
        None => {
            tracing::event!(target: DECISION_TARGET, Level::INFO, placement.patch.json = patch, "admission decision")
        }
        Some(_) => {
            tracing::event!(target: DECISION_TARGET, Level::WARN, placement.patch.json = patch, "admission decision")
        }
    });
}
