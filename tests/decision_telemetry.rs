//! The decision span and the decision log line, emitted by real reviews through
//! the production subscriber layers: same names, same values, the patch bounded
//! on the span only, the caller's trace joined even when unsampled, errors
//! marked, and latency exemplars pointing at exported traces.

use std::collections::BTreeSet;

use opentelemetry::trace::Status;
use opentelemetry_sdk::trace::SpanData;
use pod_director::metrics::EXEMPLAR_TRACE_LABEL;
use pod_director::telemetry::{DECISION_FIELDS, JSON_FIELDS, LOG_LINE_KEYS, MAX_ATTRIBUTE_BYTES};
use pod_director::testing::telemetry::{Request, pod_create, representative_requests, review, spec};
use serde_json::Value;

fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a opentelemetry::Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

/// A span attribute as the JSON value the log line holds for the same field.
fn as_json(key: &str, value: &opentelemetry::Value) -> Value {
    match value {
        opentelemetry::Value::Bool(b) => Value::Bool(*b),
        opentelemetry::Value::I64(i) => Value::from(*i),
        opentelemetry::Value::F64(f) => Value::from(*f),
        opentelemetry::Value::String(s) if JSON_FIELDS.contains(&key) => {
            serde_json::from_str(s.as_str()).unwrap_or_else(|_| Value::String(s.to_string()))
        }
        other => Value::String(other.to_string()),
    }
}

#[test]
fn every_decision_span_carries_the_log_lines_fields_under_the_same_names_and_values() {
    let emitted = review(representative_requests());
    let decisions = emitted.decisions();
    assert_eq!(emitted.spans.len(), representative_requests().len());
    assert_eq!(decisions.len(), emitted.spans.len(), "one log line per span");
    for (span, line) in emitted.spans.iter().zip(decisions) {
        let span_keys: BTreeSet<&str> = span.attributes.iter().map(|kv| kv.key.as_str()).collect();
        let line_keys: BTreeSet<&str> = line
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let line_fields: BTreeSet<&str> = line_keys
            .difference(&LOG_LINE_KEYS.iter().copied().collect())
            .copied()
            .collect();
        assert_eq!(span_keys, line_fields, "span {} vs line {line}", span.name);
        for key in &span_keys {
            assert!(
                DECISION_FIELDS.contains(key),
                "{key} is not a documented decision field"
            );
            let value = attribute(span, key).map(|v| as_json(key, v));
            assert_eq!(
                value.as_ref(),
                line.get(*key),
                "{key} differs between span and log line"
            );
        }
        assert_eq!(
            line["trace_id"].as_str(),
            Some(span.span_context.trace_id().to_string().as_str())
        );
        assert_eq!(
            line["span_id"].as_str(),
            Some(span.span_context.span_id().to_string().as_str())
        );
    }
}

#[test]
fn a_large_patch_is_cut_to_2_kb_on_the_span_and_kept_whole_in_the_log_line() {
    let emitted = review(vec![Request::mutate(pod_create("uid-bulky", "team-bulky", spec()))]);
    let line = emitted.decisions()[0].clone();
    assert_eq!(line["placement.decision"], "would_patch");
    let whole = line["placement.patch.json"].to_string();
    assert!(
        whole.len() > MAX_ATTRIBUTE_BYTES,
        "the test patch must be large: {}",
        whole.len()
    );
    assert!(
        line["placement.patch.json"].is_array(),
        "whole and parseable in the log"
    );
    let on_span = match attribute(&emitted.spans[0], "placement.patch.json") {
        Some(opentelemetry::Value::String(s)) => s.to_string(),
        other => panic!("placement.patch.json on the span: {other:?}"),
    };
    assert!(on_span.len() <= MAX_ATTRIBUTE_BYTES, "{} bytes", on_span.len());
    assert!(on_span.ends_with('…'));
    assert!(
        whole.starts_with(on_span.trim_end_matches('…')),
        "the span holds the patch's beginning"
    );
}

#[test]
fn an_unsampled_api_server_trace_is_joined_and_the_decision_still_exported() {
    let emitted = review(vec![
        Request::mutate(pod_create("uid-unsampled", "team-shadow", spec()))
            .with_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"),
        Request::mutate(pod_create("uid-sampled", "team-shadow", spec()))
            .with_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
    ]);
    assert_eq!(emitted.spans.len(), 2, "neither decision is dropped");
    for (span, (trace, parent)) in emitted.spans.iter().zip([
        ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"),
        ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"),
    ]) {
        assert_eq!(span.span_context.trace_id().to_string(), trace);
        assert_eq!(span.parent_span_id.to_string(), parent);
        assert!(span.parent_span_is_remote);
        assert!(span.span_context.is_sampled());
        assert_eq!(span.span_kind, opentelemetry::trace::SpanKind::Server);
        assert_eq!(span.name, "POST /mutate");
    }
    assert_eq!(emitted.decisions()[0]["trace_id"], "0af7651916cd43dd8448eb211c80319c");
}

#[test]
fn an_undecidable_request_marks_its_span_as_failed() {
    let emitted = review(vec![Request::raw(
        pod_director_engine::placement::Webhook::Validate,
        b"not an AdmissionReview",
    )]);
    let span = &emitted.spans[0];
    assert!(matches!(&span.status, Status::Error { description } if description.contains("not an AdmissionReview")));
    assert_eq!(
        attribute(span, "placement.decision")
            .map(ToString::to_string)
            .as_deref(),
        Some("error")
    );
    assert_eq!(emitted.decisions()[0]["level"], "WARN");
}

#[test]
fn latency_buckets_carry_exemplars_of_exported_traces() {
    let emitted = review(vec![Request::mutate(pod_create("uid-exemplar", "team-shadow", spec()))]);
    let trace_id = emitted.spans[0].span_context.trace_id().to_string();
    let exemplar = format!(r#" # {{{EXEMPLAR_TRACE_LABEL}="{trace_id}"}} "#);
    let bucket = emitted
        .metrics
        .lines()
        .find(|l| l.contains(&exemplar))
        .unwrap_or_else(|| panic!("no exemplar {exemplar:?} in\n{}", emitted.metrics));
    assert!(
        bucket.starts_with(r#"pod_director_admission_duration_seconds_bucket{"#),
        "{bucket}"
    );
}

#[test]
fn exported_spans_name_the_service_and_its_version() {
    let emitted = review(vec![Request::mutate(pod_create("uid-resource", "team-shadow", spec()))]);
    for key in ["service.name", "service.version"] {
        assert!(
            emitted.resource.iter().any(|k| k == key),
            "{key} in {:?}",
            emitted.resource
        );
    }
}
