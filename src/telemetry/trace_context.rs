//! W3C trace context: the caller's `traceparent` made the span's parent, the span's ids
//! recorded for the log lines, attributes and status set on the exported span only.

use opentelemetry_http::HeaderExtractor;
use opentelemetry_sdk::propagation::TraceContextPropagator;

use super::MAX_ATTRIBUTE_BYTES;
use pod_director_engine::placement::truncate_bytes;

/// Reads W3C trace context (`traceparent`, `tracestate`) from request headers
/// and makes it the span's parent, sampled or not. A no-op when traces are not
/// exported or the header is absent or malformed.
pub fn join_caller_trace(span: &tracing::Span, headers: &http::HeaderMap) {
    use opentelemetry::propagation::TextMapPropagator as _;
    use opentelemetry::trace::TraceContextExt as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    if !super::otlp::layer_built() || !headers.contains_key("traceparent") {
        return;
    }
    let parent = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
    if parent.span().span_context().is_valid() {
        // Fails only when the span has already started exporting, which it has not.
        let _ = span.set_parent(parent);
    }
}

/// Records `trace_id` and `span_id` on the span (so every log line inside it
/// carries them) when it is exported; otherwise leaves them empty. Returns the
/// trace id when the span is sampled, i.e. when the trace will exist in the
/// backend (for exemplars).
pub fn record_trace_ids(span: &tracing::Span) -> Option<String> {
    use opentelemetry::trace::TraceContextExt as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    if !super::otlp::layer_built() {
        return None;
    }
    let context = span.context();
    let otel_span = context.span();
    let ids = otel_span.span_context();
    if !ids.is_valid() {
        return None;
    }
    let trace_id = ids.trace_id().to_string();
    span.record(super::fields::TRACE[1], trace_id.as_str());
    span.record(super::fields::TRACE[2], ids.span_id().to_string().as_str());
    ids.is_sampled().then_some(trace_id)
}

/// Marks the exported span as failed (`status = error` in TraceQL).
pub fn set_error_status(span: &tracing::Span, description: &str) {
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    span.set_status(opentelemetry::trace::Status::error(description.to_owned()));
}

/// Sets a string attribute on the exported span only, cut to [`MAX_ATTRIBUTE_BYTES`].
pub fn set_bounded_attribute(span: &tracing::Span, key: &'static str, value: &str) {
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    span.set_attribute(key, truncate_bytes(value, MAX_ATTRIBUTE_BYTES));
}
