//! Every tracing subscriber layer lives here: the `RUST_LOG` filter, the log
//! output (`--log-format json|text`) and, when an OTLP endpoint is configured,
//! the OpenTelemetry trace exporter.
//!
//! ## JSON log lines
//! One object per line: `timestamp`, `level`, `target`, `message`, then the
//! fields of every enclosing span (outermost first) and of the event itself,
//! flattened under their own names (`admission.request.uid`, `placement.group`,
//! …). Fields named in [`JSON_FIELDS`] carry JSON text and are written as JSON
//! values, so `placement.patch.json` is a real array, not a string. In text
//! mode the same fields appear as `key=value`.
//!
//! The decision span and its log line use the target [`DECISION_TARGET`],
//! which stays at `info` whatever `RUST_LOG` says unless `RUST_LOG` names that
//! target itself (`RUST_LOG=warn` quiets the rest, not the decisions;
//! `RUST_LOG=warn,pod_director::decision=off` silences them too).
//!
//! ## Output
//! Lines never block a request: they go through a bounded buffer to a writer
//! thread of their own ([`writer`]); when standard output does not keep up and
//! the buffer is full, lines are dropped and counted
//! (`pod_director_log_lines_dropped_total`, see [`log_lines_dropped`]), with a
//! `WARN` line once the output drains. [`Telemetry::shutdown`] flushes them.
//!
//! ## Traces
//! Export is on when `OTEL_EXPORTER_OTLP_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (and neither `OTEL_SDK_DISABLED=true`
//! nor `OTEL_TRACES_EXPORTER=none`); everything else comes from the standard
//! `OTEL_*` variables (`OTEL_EXPORTER_OTLP_PROTOCOL` `grpc` | `http/protobuf`
//! (default), `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
//! `OTEL_TRACES_SAMPLER`/`_ARG`, headers, timeouts, `OTEL_BSP_*`). Without an
//! endpoint no exporter, no OpenTelemetry layer and no background thread exist.
//! Incoming W3C `traceparent` headers make the request span a child of the
//! API server's span.
//!
//! The exported decision span carries exactly the fields of the decision log
//! line, under the same names ([`DECISION_FIELDS`]); `placement.patch.json` is
//! cut to [`MAX_ATTRIBUTE_BYTES`] on the span and whole in the log line.
//!
//! Sampling: unless `OTEL_TRACES_SAMPLER` says otherwise, every admission
//! span is recorded and exported (`always_on`). The span still joins the
//! caller's trace (same trace id, parent span id), but an *unsampled*
//! `traceparent` does not drop it. kube-apiserver propagates `traceparent`
//! even for the spans it does not sample (its default rate is 0 per million),
//! so the SDK's default `parentbased_always_on` would drop every decision of
//! a dryRun rollout — the very data it is judged by.

mod writer;

use std::fmt;
use std::io::Write as _;
use std::sync::LazyLock;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider, TracerProviderBuilder};
use tracing::field::{Field, Visit};
use tracing::span;
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer, filter};

/// The target of the decision span and of the one-per-decision log event.
pub const DECISION_TARGET: &str = "pod_director::decision";

/// Every field of the decision log line besides `timestamp`, `level`,
/// `target` and `message` — and every attribute of the exported decision
/// span: the same names in both. A unit test holds this list equal to the
/// fields the code declares; `tests/observability_names.rs` checks the
/// dashboards and the collector config against it.
pub const DECISION_FIELDS: &[&str] = &[
    "webhook",
    "admission.request.uid",
    "admission.request.operation",
    "admission.request.dryrun",
    "admission.request.namespace",
    "admission.request.name",
    "admission.request.user",
    "admission.request.resource",
    "admission.object.generate_name",
    "admission.object.owner.kind",
    "admission.object.owner.name",
    "placement.group",
    "placement.mode",
    "placement.decision",
    "placement.skip_reason",
    "placement.conflicts",
    "placement.violations",
    "placement.summary",
    "placement.message",
    "placement.warning",
    "placement.patch.json",
    "placement.patch.op_count",
    "placement.patch.paths",
    "placement.feasible_nodes",
    "placement.feasible_nodes_before",
    "placement.no_feasible_node",
    "config.revision",
    "latency_ms",
    "error",
    "trace_id",
    "span_id",
];

/// The keys every JSON log line starts with.
pub const LOG_LINE_KEYS: &[&str] = &["timestamp", "level", "target", "message"];

/// Fields whose (string) value is JSON text, written into JSON logs as JSON.
pub const JSON_FIELDS: &[&str] = &[
    "placement.patch.json",
    "placement.patch.paths",
    "placement.conflicts",
    "placement.violations",
];

/// Longest span attribute value, in bytes (Tempo keeps 2 KB per attribute).
pub const MAX_ATTRIBUTE_BYTES: usize = 2048;

const SERVICE_NAME: &str = "pod-director";

/// The log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line.
    #[default]
    Json,
    /// Human-readable lines.
    Text,
}

/// Why telemetry could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("RUST_LOG is not a valid filter (e.g. `info,pod_director=debug`): {0}")]
    Filter(#[source] filter::ParseError),
    #[error("cannot build the OTLP trace exporter (check OTEL_EXPORTER_OTLP_*): {0}")]
    Exporter(#[source] opentelemetry_otlp::ExporterBuildError),
    #[error("OTEL_EXPORTER_OTLP_PROTOCOL {0:?} is not one of grpc, http/protobuf")]
    Protocol(String),
    #[error("cannot start the log writer thread: {0}")]
    Writer(#[source] std::io::Error),
    #[error("a global tracing subscriber is already installed: {0}")]
    AlreadyInstalled(#[source] tracing_subscriber::util::TryInitError),
}

/// Log lines dropped because standard output did not keep up (one counter per process;
/// [`crate::metrics::Metrics`] exports it as `pod_director_log_lines_dropped_total`).
pub fn log_lines_dropped() -> prometheus_client::metrics::counter::Counter {
    static DROPPED: LazyLock<prometheus_client::metrics::counter::Counter> = LazyLock::new(Default::default);
    DROPPED.clone()
}

pub use writer::{LogWriter, WriterGuard};

/// A log writer moving lines to `out` off the calling threads, as `serve` writes to standard
/// output (for benches and tests; [`init`] starts its own). Dropped lines count in [`log_lines_dropped`].
pub fn log_writer<W: std::io::Write + Send + 'static>(
    out: W,
    format: LogFormat,
) -> std::io::Result<(LogWriter, WriterGuard)> {
    writer::spawn(out, writer::BUFFER_BYTES, format, log_lines_dropped())
}

/// Longest wait for buffered log lines at shutdown (standard output may be blocked for good).
const FLUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// Handle on installed telemetry; [`Telemetry::shutdown`] flushes pending spans and log lines.
#[derive(Debug, Default)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
    output: Option<writer::WriterGuard>,
}

impl Telemetry {
    /// Whether spans are exported over OTLP.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Flushes and stops the trace exporter, then writes out the buffered log lines.
    pub fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(err) = provider.shutdown()
        {
            eprintln!("warning: flushing traces failed: {err}");
        }
        if let Some(output) = self.output
            && !output.shutdown(FLUSH_TIMEOUT)
        {
            eprintln!("warning: standard output did not take the last log lines within {FLUSH_TIMEOUT:?}");
        }
    }
}

/// Installs the global subscriber: filter from `RUST_LOG` (default `info`),
/// log lines on standard output, OTLP traces when configured (call inside the
/// tokio runtime).
pub fn init(format: LogFormat) -> Result<Telemetry, TelemetryError> {
    init_with_env(format, |name| std::env::var(name).ok())
}

fn init_with_env(format: LogFormat, env: impl Fn(&str) -> Option<String>) -> Result<Telemetry, TelemetryError> {
    let filter = env_filter(env("RUST_LOG").as_deref())?;
    let provider = if otlp_enabled(&env) {
        Some(tracer_provider(&env)?)
    } else {
        None
    };
    let otel = provider.as_ref().map(|p| {
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        opentelemetry::global::set_tracer_provider(p.clone());
        otel_layer(p)
    });
    let (output, guard) = writer::spawn(std::io::stdout(), writer::BUFFER_BYTES, format, log_lines_dropped())
        .map_err(TelemetryError::Writer)?;
    let (json, text) = match format {
        LogFormat::Json => (Some(JsonLayer::new(output)), None),
        LogFormat::Text => (
            None,
            Some(
                tracing_subscriber::fmt::layer()
                    .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
                    .with_writer(output),
            ),
        ),
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(otel)
        .with(json)
        .with(text)
        .try_init()
        .map_err(TelemetryError::AlreadyInstalled)?;
    Ok(Telemetry {
        provider,
        output: Some(guard),
    })
}

/// `RUST_LOG` (default `info`), with decisions kept at `info` unless it names their target.
fn env_filter(rust_log: Option<&str>) -> Result<EnvFilter, TelemetryError> {
    let directives = rust_log.unwrap_or_default();
    let filter = EnvFilter::builder()
        .with_default_directive(filter::LevelFilter::INFO.into())
        .parse(directives)
        .map_err(TelemetryError::Filter)?;
    if directives.contains(DECISION_TARGET) {
        return Ok(filter);
    }
    let decisions = format!("{DECISION_TARGET}=info")
        .parse()
        .map_err(TelemetryError::Filter)?;
    Ok(filter.add_directive(decisions))
}

/// The OpenTelemetry layer exporting spans through `provider`: span attributes
/// are exactly the spans' fields (no source location, thread or timing extras),
/// and the decision log event — which repeats the span's fields plus the whole
/// patch — stays off the span.
pub fn otel_layer<S>(provider: &SdkTracerProvider) -> impl Layer<S> + use<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    tracing_opentelemetry::layer()
        .with_tracer(provider.tracer(SERVICE_NAME))
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_tracked_inactivity(false)
        .with_filter(filter::filter_fn(|meta| {
            meta.is_span() || meta.target() != DECISION_TARGET
        }))
}

fn otlp_enabled(env: &impl Fn(&str) -> Option<String>) -> bool {
    let set = |name: &str| env(name).is_some_and(|v| !v.trim().is_empty());
    let disabled = env("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
        || env("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim().eq_ignore_ascii_case("none"));
    !disabled && (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
}

fn tracer_provider(env: &impl Fn(&str) -> Option<String>) -> Result<SdkTracerProvider, TelemetryError> {
    use opentelemetry_otlp::{SpanExporter, WithExportConfig as _};
    let protocol = env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .unwrap_or_else(|| "http/protobuf".to_owned());
    let exporter = match protocol.trim() {
        "grpc" => SpanExporter::builder().with_tonic().build(),
        "http/protobuf" => SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .build(),
        other => return Err(TelemetryError::Protocol(other.to_owned())),
    }
    .map_err(TelemetryError::Exporter)?;
    Ok(provider_builder_with_env(env).with_batch_exporter(exporter).build())
}

/// A tracer provider builder with pod-director's resource and sampler, from
/// the `OTEL_*` environment: `service.name` `pod-director` unless
/// `OTEL_SERVICE_NAME` or `OTEL_RESOURCE_ATTRIBUTES` names it, `service.version`,
/// the sampler of `OTEL_TRACES_SAMPLER`, else `always_on` (see the module docs).
/// The caller adds the exporter (benches and tests use in-memory ones).
pub fn provider_builder() -> TracerProviderBuilder {
    provider_builder_with_env(&|name: &str| std::env::var(name).ok())
}

fn provider_builder_with_env(env: &impl Fn(&str) -> Option<String>) -> TracerProviderBuilder {
    // Resource::builder() also reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
    let mut resource = opentelemetry_sdk::Resource::builder().with_attribute(opentelemetry::KeyValue::new(
        "service.version",
        env!("CARGO_PKG_VERSION"),
    ));
    let named_by_env = env("OTEL_SERVICE_NAME").is_some_and(|n| !n.trim().is_empty())
        || env("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|a| a.contains("service.name="));
    if !named_by_env {
        resource = resource.with_service_name(SERVICE_NAME);
    }
    let builder = SdkTracerProvider::builder().with_resource(resource.build());
    // The SDK reads OTEL_TRACES_SAMPLER (and _ARG) itself; only its default differs.
    if env("OTEL_TRACES_SAMPLER").is_some_and(|s| !s.trim().is_empty()) {
        builder
    } else {
        builder.with_sampler(Sampler::AlwaysOn)
    }
}

/// Reads W3C trace context (`traceparent`, `tracestate`) from request headers
/// and makes it the span's parent, sampled or not. A no-op when traces are not
/// exported or the header is absent or malformed.
pub fn join_caller_trace(span: &tracing::Span, headers: &http::HeaderMap) {
    use opentelemetry::propagation::TextMapPropagator as _;
    use opentelemetry::trace::TraceContextExt as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    if !headers.contains_key("traceparent") {
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
    let context = span.context();
    let otel_span = context.span();
    let ids = otel_span.span_context();
    if !ids.is_valid() {
        return None;
    }
    let trace_id = ids.trace_id().to_string();
    span.record("trace_id", trace_id.as_str());
    span.record("span_id", ids.span_id().to_string().as_str());
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

/// Cuts `text` to at most `max` bytes on a character boundary, marking the cut with `…`.
pub fn truncate_bytes(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let marker = '…';
    let mut end = max.saturating_sub(marker.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = text[..end].to_owned();
    out.push(marker);
    out
}

struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl opentelemetry::propagation::Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// Named values, each already encoded as JSON text, in the order their names
/// were first set; setting a name again replaces the value. Values are encoded
/// once, when recorded, into one buffer (one allocation for a span's fields,
/// not one per field), and copied into each line as text.
#[derive(Debug, Default, Clone)]
struct Fields {
    /// Each name and where its JSON text is in `json`.
    names: Vec<(&'static str, std::ops::Range<usize>)>,
    json: Vec<u8>,
}

impl Fields {
    /// A buffer sized for a decision span's fields.
    fn with_capacity(names: usize, bytes: usize) -> Self {
        Self {
            names: Vec::with_capacity(names),
            json: Vec::with_capacity(bytes),
        }
    }

    /// Sets `name` to the JSON text `write` appends to the buffer. A replaced
    /// value's text stays in the buffer unused (values are rarely set twice).
    fn set(&mut self, name: &'static str, write: impl FnOnce(&mut Vec<u8>)) {
        let start = self.json.len();
        write(&mut self.json);
        let range = start..self.json.len();
        match self.names.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = range,
            None => self.names.push((name, range)),
        }
    }

    fn get(&self, name: &str) -> Option<&[u8]> {
        let (_, range) = self.names.iter().find(|(n, _)| *n == name)?;
        self.json.get(range.clone())
    }

    /// Every name with its JSON text.
    fn iter(&self) -> impl Iterator<Item = (&'static str, &[u8])> {
        self.names
            .iter()
            .map(|(name, range)| (*name, self.json.get(range.clone()).unwrap_or_default()))
    }

    fn insert(&mut self, field: &Field, write: impl FnOnce(&mut Vec<u8>)) {
        let name = field.name();
        // `otel.*` fields steer the exporter (span name, kind); they are not log fields.
        if !name.starts_with("otel.") {
            self.set(name, write);
        }
    }
}

/// `text` as a JSON string.
fn json_string(text: &str) -> String {
    // Serializing a string cannot fail.
    serde_json::to_string(text).unwrap_or_else(|_| "null".to_owned())
}

/// Appends `text` as a JSON string.
fn write_json_string(out: &mut Vec<u8>, text: &str) {
    // Serializing a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, text);
}

/// Appends `text` as a JSON value when it is JSON (kept on one line), else as a string.
fn write_json_value(out: &mut Vec<u8>, text: &str) {
    if serde_json::from_str::<serde::de::IgnoredAny>(text).is_err() {
        return write_json_string(out, text);
    }
    if text.contains(['\n', '\r']) {
        // Valid JSON with line breaks between tokens: re-encoded compactly so the line stays one line.
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(value) => {
                let _ = serde_json::to_writer(&mut *out, &value);
            }
            Err(_) => write_json_string(out, text),
        }
        return;
    }
    out.extend_from_slice(text.trim().as_bytes());
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if JSON_FIELDS.contains(&field.name()) {
            self.insert(field, |out| write_json_value(out, value));
        } else {
            self.insert(field, |out| write_json_string(out, value));
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.insert(field, |out| {
            out.extend_from_slice(if value { b"true" } else { b"false" })
        });
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.insert(field, |out| {
            let _ = serde_json::to_writer(out, &value);
        });
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.insert(field, |out| {
            let _ = serde_json::to_writer(out, &value);
        });
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        // JSON has no NaN or infinity; serde_json writes them as null.
        self.insert(field, |out| {
            let _ = serde_json::to_writer(out, &value);
        });
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.record_str(field, &value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // `%value` arrives here too; its Debug is the Display text.
        self.record_str(field, &format!("{value:?}"));
    }
}

/// Writes each event as one flat JSON object (see the module docs).
pub struct JsonLayer<W> {
    make_writer: W,
}

impl<W> JsonLayer<W> {
    pub fn new(make_writer: W) -> Self {
        Self { make_writer }
    }
}

impl<S, W> Layer<S> for JsonLayer<W>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + 'static,
{
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            // Room for every field the span declares (a decision span's line is about 1.5 KB).
            let declared = attrs.metadata().fields().len();
            let mut fields = Fields::with_capacity(declared, declared * 40);
            attrs.record(&mut fields);
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<Fields>()
        {
            values.record(fields);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let meta = event.metadata();
        let mut own = Fields::with_capacity(4, 256);
        event.record(&mut own);
        // Enclosing spans' fields are read in place, under their extension guards.
        let spans: Vec<_> = ctx
            .event_scope(event)
            .map(|scope| scope.from_root().collect())
            .unwrap_or_default();
        let extensions: Vec<_> = spans.iter().map(|span| span.extensions()).collect();
        let sources: Vec<&Fields> = extensions
            .iter()
            .filter_map(|extensions| extensions.get::<Fields>())
            .chain([&own])
            .collect();

        // timestamp, level, target, message first; then span fields (outermost first), then the
        // event's. A name set again later replaces the earlier value in place.
        let mut entries: Vec<(&'static str, &[u8])> =
            Vec::with_capacity(sources.iter().map(|f| f.names.len()).sum::<usize>());
        for (at, fields) in sources.iter().enumerate() {
            for (name, json) in fields.iter() {
                if name == "message" {
                    continue;
                }
                // The first source's names are unique; later ones may repeat an earlier name.
                match (at > 0).then(|| entries.iter_mut().find(|(n, _)| *n == name)).flatten() {
                    Some(slot) => slot.1 = json,
                    None => entries.push((name, json)),
                }
            }
        }
        let size = entries.iter().map(|(n, v)| n.len() + v.len() + 4).sum::<usize>();
        let mut line = Vec::with_capacity(size + 160);
        line.extend_from_slice(b"{\"timestamp\":\"");
        let mut timestamp = String::with_capacity(32);
        if SystemTime
            .format_time(&mut tracing_subscriber::fmt::format::Writer::new(&mut timestamp))
            .is_ok()
        {
            line.extend_from_slice(timestamp.as_bytes());
        }
        line.extend_from_slice(b"\",\"level\":");
        write_json_string(&mut line, meta.level().as_str());
        line.extend_from_slice(b",\"target\":");
        write_json_string(&mut line, meta.target());
        if let Some(message) = own.get("message") {
            line.extend_from_slice(b",\"message\":");
            line.extend_from_slice(message);
        }
        for (name, json) in &entries {
            line.push(b',');
            // Field names are identifiers from the source; escaped all the same.
            write_json_string(&mut line, name);
            line.push(b':');
            line.extend_from_slice(json);
        }
        line.extend_from_slice(b"}\n");
        // A log line that cannot be written has nowhere else to go.
        let _ = self.make_writer.make_writer_for(meta).write_all(&line);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use serde_json::Value;

    use super::*;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| std::io::Error::other("poisoned"))?
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'w self) -> Self::Writer {
            self.clone()
        }
    }

    fn lines(buffer: &Buffer) -> Vec<Value> {
        let bytes = buffer.0.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes)
            .lines()
            .map(|l| serde_json::from_str(l).expect("every line is JSON"))
            .collect()
    }

    #[test]
    fn json_lines_flatten_span_fields_and_keep_json_fields_as_json() {
        let buffer = Buffer::default();
        let subscriber = tracing_subscriber::registry().with(JsonLayer::new(buffer.clone()));
        tracing::subscriber::with_default(subscriber, || {
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
        let raw = String::from_utf8(buffer.0.lock().map(|b| b.clone()).unwrap_or_default()).unwrap_or_default();
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
        let buffer = Buffer::default();
        let subscriber = tracing_subscriber::registry().with(JsonLayer::new(buffer.clone()));
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(placement.patch.json = "not json", "x");
        });
        assert_eq!(lines(&buffer)[0]["placement.patch.json"], "not json");
    }

    #[test]
    fn json_text_with_line_breaks_stays_on_one_line() {
        let buffer = Buffer::default();
        let subscriber = tracing_subscriber::registry().with(JsonLayer::new(buffer.clone()));
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(placement.patch.json = "[\n  {\"op\": \"add\"}\r\n]", note = "a\nb", "x");
        });
        let lines = lines(&buffer);
        assert_eq!(lines.len(), 1, "one event, one line");
        assert_eq!(lines[0]["placement.patch.json"][0]["op"], "add");
        assert_eq!(lines[0]["note"], "a\nb");
    }

    #[test]
    fn later_fields_replace_earlier_ones_in_place() {
        let buffer = Buffer::default();
        let subscriber = tracing_subscriber::registry().with(JsonLayer::new(buffer.clone()));
        tracing::subscriber::with_default(subscriber, || {
            let outer = tracing::info_span!("outer", a = "outer", b = 1_u64);
            let _outer = outer.enter();
            let inner = tracing::info_span!("inner", a = "inner", c = f64::NAN);
            let _inner = inner.enter();
            tracing::info!(b = true, d = -3_i64, "x");
        });
        let raw = String::from_utf8(buffer.0.lock().map(|b| b.clone()).unwrap_or_default()).unwrap_or_default();
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
        let buffer = Buffer::default();
        let filter = env_filter(Some("warn")).expect("valid");
        let subscriber = tracing_subscriber::registry()
            .with(filter)
            .with(JsonLayer::new(buffer.clone()));
        tracing::subscriber::with_default(subscriber, || {
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
        let buffer = Buffer::default();
        let filter = env_filter(Some("warn,pod_director::decision=off")).expect("valid");
        let subscriber = tracing_subscriber::registry()
            .with(filter)
            .with(JsonLayer::new(buffer.clone()));
        tracing::subscriber::with_default(subscriber, || {
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
        async fn export(
            &self,
            batch: Vec<opentelemetry_sdk::trace::SpanData>,
        ) -> opentelemetry_sdk::error::OTelSdkResult {
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
}
