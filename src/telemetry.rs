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
//!
//! | file | what |
//! |---|---|
//! | `telemetry.rs` | the names (targets, fields) and [`init`]: the subscriber, its layers, [`Telemetry`] |
//! | `filter.rs` | the `RUST_LOG` filter, decisions kept at `info` |
//! | `otlp.rs` | the `OTEL_*` environment → the tracer provider and the OpenTelemetry layer |
//! | `trace_context.rs` | W3C trace context in, trace ids and span attributes out |
//! | `json.rs` | the JSON log layer ([`JsonLayer`]) |
//! | `batch.rs` | several fields of a span recorded in one pass ([`FieldBatch`]) |
//! | `writer.rs` | the bounded, non-blocking log output |

mod batch;
mod filter;
mod json;
mod otlp;
mod trace_context;
mod writer;

use std::sync::LazyLock;
use std::time::Duration;

use self::filter::env_filter;
use self::json::json_string;
pub(crate) use self::json::write_json_string;
use self::otlp::{otlp_enabled, tracer_provider};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

pub use self::batch::FieldBatch;
pub use self::json::JsonLayer;
pub use self::otlp::{otel_layer, provider_builder};
pub use self::trace_context::{join_caller_trace, record_trace_ids, set_bounded_attribute, set_error_status};

/// The target of the decision span and of the one-per-decision log event.
pub const DECISION_TARGET: &str = "pod_director::decision";

/// Declares the decision's fields once, in runs recorded together, in the order of the log line:
/// each run a constant, [`DECISION_FIELDS`] all of them, [`decision_span`] the span declaring them.
macro_rules! decision_fields {
    ($($(#[$doc:meta])* $run:ident = [$($field:literal),* $(,)?];)*) => {
        /// The runs of [`DECISION_FIELDS`] recorded together (each with a [`FieldBatch`]).
        pub(crate) mod fields {
            $($(#[$doc])* #[allow(dead_code)] // A run recorded field by field is listed for the order.
            pub(crate) const $run: [&str; [$($field),*].len()] = [$($field),*];)*
        }

        /// Every field of the decision log line besides `timestamp`, `level`,
        /// `target` and `message` — and every attribute of the exported decision
        /// span besides `otel.*`. Written once (the macro that also declares the span);
        /// `tests/observability_names.rs` checks the dashboards and the collector config against it.
        pub const DECISION_FIELDS: &[&str] = &[$($($field,)*)*];

        /// The decision span of one request (`name`: `POST /mutate`…), every field of
        /// [`DECISION_FIELDS`] declared, `webhook` recorded.
        pub fn decision_span(name: &'static str, webhook: &'static str) -> tracing::Span {
            let span = tracing::info_span!(
                target: DECISION_TARGET,
                "admission",
                otel.name = name,
                otel.kind = "server",
                $($($field = tracing::field::Empty,)*)*
            );
            span.record("webhook", webhook);
            span
        }
    };
}

decision_fields! {
    /// Which webhook decided (recorded when the span opens).
    WEBHOOK = ["webhook"];
    /// The request, as read.
    REQUEST = [
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
    ];
    /// The outcome, once decided.
    OUTCOME = [
        "placement.group",
        "placement.mode",
        "placement.decision",
        "placement.skip_reason",
        "placement.conflicts",
        "placement.violations",
        "placement.summary",
        "placement.message",
        "placement.warning",
        "placement.patch.op_count",
        "placement.patch.paths",
        "placement.feasible_nodes",
        "placement.no_feasible_node",
        "placement.feasible_nodes_before",
        "latency_ms",
        "error",
    ];
    /// The whole patch: a field of the log event (whole), an attribute of the span (cut).
    PATCH = ["placement.patch.json"];
    /// The configuration and the trace.
    TRACE = ["config.revision", "trace_id", "span_id"];
    /// The provisioners that could add a node for the pod.
    PROVISION = ["placement.provisionable_by"];
    /// The group's placement the pod chose: an alternative's name, or `default` (groups offering alternatives).
    ALTERNATIVE = ["placement.alternative"];
    /// The reservations the pod intrudes on.
    RESERVATION = [
        "reservation.groups",
        "reservation.reason",
        "reservation.intrusions",
        "reservation.toleration",
        "reservation.node",
        "reservation.exempt",
        "reservation.pool_nodes",
    ];
}

/// The keys every JSON log line starts with.
pub const LOG_LINE_KEYS: &[&str] = &["timestamp", "level", "target", "message"];

/// Fields whose (string) value is JSON text, written into JSON logs as JSON.
pub const JSON_FIELDS: &[&str] = &[
    "placement.patch.json",
    "placement.patch.paths",
    "placement.conflicts",
    "placement.violations",
    "placement.provisionable_by",
    "reservation.groups",
    "reservation.intrusions",
];

/// Longest span attribute value, in bytes (Tempo keeps 2 KB per attribute).
pub const MAX_ATTRIBUTE_BYTES: usize = 2048;

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
    Filter(#[source] tracing_subscriber::filter::ParseError),
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
/// [`LogMetrics`] exports it as `pod_director_log_lines_dropped_total`).
pub fn log_lines_dropped() -> prometheus_client::metrics::counter::Counter {
    static DROPPED: LazyLock<prometheus_client::metrics::counter::Counter> = LazyLock::new(Default::default);
    DROPPED.clone()
}

/// `pod_director_log_lines_dropped_total`: the process's [`log_lines_dropped`] counter.
#[derive(Debug, Clone)]
pub struct LogMetrics {
    pub lines_dropped: prometheus_client::metrics::counter::Counter,
}

impl LogMetrics {
    pub fn register(registry: &mut prometheus_client::registry::Registry) -> Self {
        let lines_dropped = log_lines_dropped();
        registry.register(
            "log_lines_dropped",
            "Log lines dropped because standard output did not keep up",
            lines_dropped.clone(),
        );
        Self { lines_dropped }
    }
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

#[cfg(test)]
mod tests;
