use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::filter::env_filter;
use super::otlp::{otlp_enabled, provider_builder_with_env};
use super::*;
use pod_director_engine::placement::truncate_bytes;

type Buffer = pod_director_testkit::LogCapture;

fn lines(buffer: &Buffer) -> Vec<Value> {
    buffer
        .text()
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is JSON"))
        .collect()
}

/// What the JSON log layer writes while `emit` runs, behind the `RUST_LOG` filter `filter` when given.
fn logged(filter: Option<&str>, emit: impl FnOnce()) -> Buffer {
    let buffer = Buffer::default();
    let subscriber = tracing_subscriber::registry()
        .with(filter.map(|f| env_filter(Some(f)).expect("valid")))
        .with(JsonLayer::new(buffer.clone()));
    tracing::subscriber::with_default(subscriber, emit);
    buffer
}

#[test]
fn json_lines_flatten_span_fields_and_keep_json_fields_as_json() {
    let buffer = logged(None, || {
        let span = tracing::info_span!(
            "admission",
            otel.name = "admission",
            webhook = "mutate",
            placement.group = tracing::field::Empty,
            placement.patch.paths = tracing::field::Empty,
        );
        span.record("placement.group", "ci");
        span.record("placement.patch.paths", r#"["/spec/nodeSelector"]"#);
        let _entered = span.enter();
        tracing::event!(
            target: DECISION_TARGET,
            tracing::Level::INFO,
            placement.patch.json = r#"[{"op":"add","path":"/spec/nodeSelector","value":{"a":"b"}}]"#,
            latency_ms = 1.5,
            "admission decision"
        );
    });
    let raw = buffer.text();
    let at = |key: &str| raw.find(&format!("\"{key}\":")).unwrap_or(usize::MAX);
    assert_eq!(at("timestamp"), 1, "{raw}");
    assert!(
        at("level") < at("target") && at("target") < at("message") && at("message") < at("webhook"),
        "{raw}"
    );
    let lines = lines(&buffer);
    assert_eq!(lines.len(), 1);
    let line = &lines[0];
    assert_eq!(line["message"], "admission decision");
    assert_eq!(line["level"], "INFO");
    assert_eq!(line["target"], DECISION_TARGET);
    assert_eq!(line["webhook"], "mutate");
    assert_eq!(line["placement.group"], "ci");
    assert_eq!(line["placement.patch.paths"][0], "/spec/nodeSelector");
    assert_eq!(line["placement.patch.json"][0]["op"], "add");
    assert_eq!(line["latency_ms"], 1.5);
    assert!(line.get("otel.name").is_none());
    assert!(line["timestamp"].as_str().is_some_and(|t| t.contains('T')));
}

#[test]
fn a_json_field_that_is_not_json_stays_a_string() {
    let buffer = logged(None, || {
        tracing::info!(placement.patch.json = "not json", "x");
    });
    assert_eq!(lines(&buffer)[0]["placement.patch.json"], "not json");
}

#[test]
fn json_text_with_line_breaks_stays_on_one_line() {
    let buffer = logged(None, || {
        tracing::info!(placement.patch.json = "[\n  {\"op\": \"add\"}\r\n]", note = "a\nb", "x");
    });
    let lines = lines(&buffer);
    assert_eq!(lines.len(), 1, "one event, one line");
    assert_eq!(lines[0]["placement.patch.json"][0]["op"], "add");
    assert_eq!(lines[0]["note"], "a\nb");
}

#[test]
fn later_fields_replace_earlier_ones_in_place() {
    let buffer = logged(None, || {
        let outer = tracing::info_span!("outer", a = "outer", b = 1_u64);
        let _outer = outer.enter();
        let inner = tracing::info_span!("inner", a = "inner", c = f64::NAN);
        let _inner = inner.enter();
        tracing::info!(b = true, d = -3_i64, "x");
    });
    let raw = buffer.text();
    let line: Value = serde_json::from_str(raw.trim_end()).expect("a JSON line");
    assert_eq!(line["a"], "inner");
    assert_eq!(line["b"], true);
    assert_eq!(line["c"], Value::Null, "NaN is not JSON");
    assert_eq!(line["d"], -3);
    let at = |key: &str| raw.find(&format!("\"{key}\":")).unwrap_or(usize::MAX);
    assert!(
        at("message") < at("a") && at("a") < at("b") && at("b") < at("c") && at("c") < at("d"),
        "{raw}"
    );
    assert_eq!(raw.matches("\"a\":").count(), 1, "{raw}");
}

#[test]
fn otlp_is_disabled_without_an_endpoint() {
    let env = |vars: &'static [(&'static str, &'static str)]| {
        move |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
    };
    assert!(!otlp_enabled(&env(&[])));
    assert!(!otlp_enabled(&env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])));
    assert!(otlp_enabled(&env(&[(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "http://collector:4318"
    )])));
    assert!(otlp_enabled(&env(&[(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "http://c:4318/v1/traces"
    )])));
    assert!(!otlp_enabled(&env(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
        ("OTEL_SDK_DISABLED", "true"),
    ])));
}

#[test]
fn rust_log_warn_quiets_everything_but_the_decisions() {
    let buffer = logged(Some("warn"), || {
        let span = tracing::info_span!(target: DECISION_TARGET, "admission", webhook = "mutate");
        span.in_scope(|| {
            tracing::info!("chatter");
            tracing::info!(target: DECISION_TARGET, "admission decision");
        });
    });
    let lines = lines(&buffer);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["message"], "admission decision");
    assert_eq!(lines[0]["webhook"], "mutate", "the span is enabled too");
}

#[test]
fn rust_log_can_still_silence_the_decisions() {
    let buffer = logged(Some("warn,pod_director::decision=off"), || {
        tracing::info!(target: DECISION_TARGET, "admission decision");
    });
    assert!(lines(&buffer).is_empty());
    assert!(matches!(
        env_filter(Some("pod_director=[")),
        Err(TelemetryError::Filter(_))
    ));
}

/// Collects exported spans.
#[derive(Debug, Clone, Default)]
struct Exported(Arc<Mutex<Vec<opentelemetry_sdk::trace::SpanData>>>);

impl opentelemetry_sdk::trace::SpanExporter for Exported {
    async fn export(&self, batch: Vec<opentelemetry_sdk::trace::SpanData>) -> opentelemetry_sdk::error::OTelSdkResult {
        if let Ok(mut spans) = self.0.lock() {
            spans.extend(batch);
        }
        Ok(())
    }
}

fn traced_span(headers: &http::HeaderMap) -> (Vec<opentelemetry_sdk::trace::SpanData>, Option<String>, Vec<Value>) {
    let exported = Exported::default();
    let buffer = Buffer::default();
    let provider = provider_builder_with_env(&|_: &str| None)
        .with_simple_exporter(exported.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(otel_layer(&provider))
        .with(JsonLayer::new(buffer.clone()));
    let sampled = tracing::subscriber::with_default(subscriber, || {
        let span = tracing::info_span!(
            target: DECISION_TARGET,
            "admission",
            otel.name = "POST /mutate",
            otel.kind = "server",
            placement.decision = tracing::field::Empty,
            trace_id = tracing::field::Empty,
            span_id = tracing::field::Empty,
        );
        join_caller_trace(&span, headers);
        let sampled = record_trace_ids(&span);
        span.record("placement.decision", "would_patch");
        span.in_scope(|| tracing::info!(target: DECISION_TARGET, "admission decision"));
        sampled
    });
    let spans = exported.0.lock().map(|s| s.clone()).unwrap_or_default();
    (spans, sampled, lines(&buffer))
}

#[test]
fn an_unsampled_caller_trace_is_joined_and_the_span_is_still_exported() {
    let mut headers = http::HeaderMap::new();
    headers.insert(
        "traceparent",
        http::HeaderValue::from_static("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"),
    );
    let (spans, sampled, lines) = traced_span(&headers);
    assert_eq!(
        spans.len(),
        1,
        "the decision span is exported despite the unsampled parent"
    );
    let span = &spans[0];
    assert_eq!(
        span.span_context.trace_id().to_string(),
        "4bf92f3577b34da6a3ce929d0e0e4736"
    );
    assert_eq!(span.parent_span_id.to_string(), "00f067aa0ba902b7");
    assert!(span.span_context.is_sampled());
    assert_eq!(span.name, "POST /mutate");
    assert_eq!(span.span_kind, opentelemetry::trace::SpanKind::Server);
    assert_eq!(sampled.as_deref(), Some("4bf92f3577b34da6a3ce929d0e0e4736"));
    assert_eq!(lines[0]["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(lines[0]["span_id"], span.span_context.span_id().to_string());
}

#[test]
fn without_traceparent_the_span_starts_its_own_trace() {
    let (spans, sampled, lines) = traced_span(&http::HeaderMap::new());
    assert_eq!(spans.len(), 1);
    let trace_id = spans[0].span_context.trace_id().to_string();
    assert_eq!(spans[0].parent_span_id, opentelemetry::trace::SpanId::INVALID);
    assert_eq!(sampled.as_deref(), Some(trace_id.as_str()));
    assert_eq!(lines[0]["trace_id"], trace_id.as_str());
}

#[test]
fn a_malformed_traceparent_is_ignored() {
    let mut headers = http::HeaderMap::new();
    headers.insert(
        "traceparent",
        http::HeaderValue::from_static("00-zz-00f067aa0ba902b7-01"),
    );
    let (spans, _, _) = traced_span(&headers);
    assert_eq!(spans.len(), 1);
    assert_eq!(spans[0].parent_span_id, opentelemetry::trace::SpanId::INVALID);
}

#[test]
fn exported_attributes_are_the_span_fields_and_nothing_else() {
    let (spans, _, _) = traced_span(&http::HeaderMap::new());
    let mut keys: Vec<String> = spans[0].attributes.iter().map(|kv| kv.key.to_string()).collect();
    keys.sort();
    assert_eq!(keys, ["placement.decision", "span_id", "trace_id"]);
    assert!(spans[0].events.is_empty(), "the decision event stays off the span");
}

#[test]
fn without_a_subscriber_layer_there_are_no_trace_ids() {
    let span = tracing::info_span!("admission", trace_id = tracing::field::Empty);
    assert_eq!(record_trace_ids(&span), None);
}

#[test]
fn attributes_are_cut_on_a_character_boundary() {
    assert_eq!(truncate_bytes("short", 10), "short");
    let cut = truncate_bytes(&"é".repeat(2000), MAX_ATTRIBUTE_BYTES);
    assert!(cut.len() <= MAX_ATTRIBUTE_BYTES);
    assert!(cut.ends_with('…'));
}

#[test]
fn json_timestamps_are_rfc3339_utc_with_microseconds_as_tracing_subscriber_writes_them() {
    use std::time::{Duration, UNIX_EPOCH};
    let cases = [
        (0, 0, "1970-01-01T00:00:00.000000Z"),
        // 2000-02-29 (a leap day of a century leap year), 23:59:59.999999.
        (951_868_799, 999_999, "2000-02-29T23:59:59.999999Z"),
        (1_796_135_113, 123_456, "2026-12-01T14:25:13.123456Z"),
        // 2100-03-01: 2100 is not a leap year.
        (4_107_542_400, 7, "2100-03-01T00:00:00.000007Z"),
    ];
    for (secs, micros, expected) in cases {
        let at = UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros);
        let mut out = Vec::new();
        super::json::write_timestamp(&mut out, at);
        assert_eq!(String::from_utf8_lossy(&out), expected, "{secs}");
    }
}

#[test]
fn json_strings_are_written_byte_for_byte_as_serde_json_writes_them() {
    let mut cases: Vec<String> = vec![
        String::new(),
        "plain".to_owned(),
        "exactly8".to_owned(),
        r#"[{"op":"add","path":"/spec/nodeSelector","value":{"node-pool":"ci"}}]"#.to_owned(),
        "é, ✓, 𝄞 and \u{7f}\u{80}\u{ff} stay as they are".to_owned(),
        "a\\b\"c/d\u{2028}".to_owned(),
    ];
    // Every ASCII byte at every place in and around an eight-byte chunk, alone and beside an escape.
    for byte in 0u8..0x80 {
        let c = char::from(byte);
        for at in 0..18 {
            let mut text: String = "x".repeat(at);
            text.push(c);
            text.push_str(&"y".repeat(17 - at));
            cases.push(text.clone());
            text.push('"');
            text.insert(0, '\n');
            cases.push(text);
        }
    }
    for text in cases {
        let mut out = Vec::new();
        super::json::write_json_string(&mut out, &text);
        let expected = serde_json::to_string(&text).expect("a string serializes");
        assert_eq!(String::from_utf8_lossy(&out), expected, "{text:?}");
    }
}
