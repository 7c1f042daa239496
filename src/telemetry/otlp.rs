//! Traces: the standard `OTEL_*` environment → the OTLP exporter and the tracer provider
//! (resource, sampler), and the OpenTelemetry layer exporting spans through it.

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider, TracerProviderBuilder};
use tracing::Subscriber;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{Layer, filter};

use super::{DECISION_TARGET, TelemetryError};

/// `service.name` unless the environment names the service.
const SERVICE_NAME: &str = "pod-director";

/// The OpenTelemetry layer exporting spans through `provider`: span attributes
/// are exactly the spans' fields (no source location, thread or timing extras),
/// and the decision log event — which repeats the span's fields plus the whole
/// patch — stays off the span.
pub fn otel_layer<S>(provider: &SdkTracerProvider) -> impl Layer<S> + use<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    LAYER_BUILT.store(true, Ordering::Relaxed);
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

/// Set once an OpenTelemetry layer has been built in this process, never unset.
static LAYER_BUILT: AtomicBool = AtomicBool::new(false);

/// Whether spans may be exported: until an OpenTelemetry layer exists, no span
/// has a trace context, so the W3C headers need not be read (a review's
/// cost when traces are off).
pub(super) fn layer_built() -> bool {
    LAYER_BUILT.load(Ordering::Relaxed)
}

pub(super) fn otlp_enabled(env: &impl Fn(&str) -> Option<String>) -> bool {
    let set = |name: &str| env(name).is_some_and(|v| !v.trim().is_empty());
    let disabled = env("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
        || env("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim().eq_ignore_ascii_case("none"));
    !disabled && (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
}

pub(super) fn tracer_provider(env: &impl Fn(&str) -> Option<String>) -> Result<SdkTracerProvider, TelemetryError> {
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

pub(super) fn provider_builder_with_env(env: &impl Fn(&str) -> Option<String>) -> TracerProviderBuilder {
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
