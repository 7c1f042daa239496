//! What tracing costs per admission review: the whole `Admission::review`
//! (decode, namespace lookup, decide, encode, the decision span, the JSON
//! decision log line, the metrics) under three subscribers:
//!
//! - `logs`: the JSON log layer (writing to a sink) — pod-director without an
//!   OTLP endpoint;
//! - `logs+otel`: the same plus the production OpenTelemetry layer
//!   (`telemetry::otel_layer`), sampler `always_on`, a batch span processor and
//!   an exporter that drops the batches — pod-director exporting traces, minus
//!   the network;
//! - `none`: no subscriber at all (spans and events disabled), the floor.
//!
//! The tracing overhead is `logs+otel` − `logs`, for a dryRun group (a
//! would-be patch: the product's main case) and pods of three sizes. Each
//! request carries an unsampled W3C `traceparent`, as from kube-apiserver.
//!
//! Before criterion's runs, a paired report that stands up to a noisy, shared
//! machine: for each pod size, rounds that alternate a batch of reviews under
//! `logs` and under `logs+otel`, measuring wall time and the process's on-CPU
//! time (all threads, so the batch exporter's thread counts; from
//! `/proc/self/task/*/schedstat`, which excludes time spent waiting for a CPU),
//! and counting heap allocations per review. It prints medians and the median
//! of the per-round differences.
//!
//! `cargo bench --bench tracing` (add `-- --quick` for a fast pass).

use std::hint::black_box;
use std::time::Instant;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use pod_director::telemetry::{self, JsonLayer};
use pod_director_engine::placement::Webhook;
use tracing_subscriber::layer::SubscriberExt as _;

use pod_director_testkit::pods;

use pod_director_testkit::alloc;

#[global_allocator]
static GLOBAL: alloc::Counting = alloc::Counting;

/// Drops every batch: measures the span pipeline, not a network.
#[derive(Debug)]
struct Discard;

impl SpanExporter for Discard {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        black_box(batch);
        Ok(())
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn headers() -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    headers.insert(
        "traceparent",
        http::HeaderValue::from_static("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"),
    );
    headers
}

fn provider() -> SdkTracerProvider {
    telemetry::provider_builder().with_batch_exporter(Discard).build()
}

/// The subscribers compared: `logs` and `logs+otel` (see the module docs).
fn dispatchers(provider: &SdkTracerProvider) -> [(&'static str, tracing::Dispatch); 2] {
    let logs = tracing_subscriber::registry()
        .with(tracing_subscriber::EnvFilter::new("info"))
        .with(JsonLayer::new(std::io::sink));
    let traced = tracing_subscriber::registry()
        .with(tracing_subscriber::EnvFilter::new("info"))
        .with(telemetry::otel_layer(provider))
        .with(JsonLayer::new(std::io::sink));
    [
        ("logs", tracing::Dispatch::new(logs)),
        ("logs+otel", tracing::Dispatch::new(traced)),
    ]
}

use pod_director_testkit::stats;

use stats::{median, paired_rounds, process_cpu_ns};

/// The paired report (see the module docs).
fn report_paired() {
    const ROUNDS: usize = 15;
    let runtime = runtime();
    let admission = pod_director::testing::admission(pods::CONFIG, pods::NAMESPACES).0;
    let headers = headers();
    let provider = provider();
    let dispatchers = dispatchers(&provider);
    println!(
        "tracing overhead per review (median of {ROUNDS} alternating rounds; dryRun group, unsampled traceparent):"
    );
    println!(
        "  {:<8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7} {:>7}",
        "pod", "wall logs", "+otel", "Δ wall", "cpu logs", "+otel", "Δ cpu", "allocs", "+otel"
    );
    for size in pods::SIZES {
        let body = pods::review("705ab4f5-6393-11e8-b7cc-42010a800002", &pods::sized(size, "team-a"));
        let batch = match size {
            "small" => 2000,
            "typical" => 500,
            _ => 40,
        };
        // [subscriber] → per-round (wall µs, cpu µs, allocations) per review
        let samples = paired_rounds(ROUNDS, |i| {
            let (cpu, allocations, wall) = (process_cpu_ns(), alloc::heap().allocations, Instant::now());
            tracing::dispatcher::with_default(&dispatchers[i].1, || {
                for _ in 0..batch {
                    black_box(runtime.block_on(admission.review(Webhook::Mutate, &headers, black_box(&body))));
                }
            });
            let per = |total: f64| total / batch as f64;
            (
                per(wall.elapsed().as_secs_f64() * 1e6),
                per(process_cpu_ns().saturating_sub(cpu) as f64 / 1e3),
                per((alloc::heap().allocations - allocations) as f64),
            )
        });
        let column = |i: usize, f: fn(&(f64, f64, f64)) -> f64| median(samples[i].iter().map(f).collect());
        let delta = |f: fn(&(f64, f64, f64)) -> f64| {
            median(samples[0].iter().zip(&samples[1]).map(|(a, b)| f(b) - f(a)).collect())
        };
        println!(
            "  {size:<8} {:>8.1}µs {:>8.1}µs {:>+8.1}µs {:>8.1}µs {:>8.1}µs {:>+8.1}µs {:>7.0} {:>7.0}",
            column(0, |s| s.0),
            column(1, |s| s.0),
            delta(|s| s.0),
            column(0, |s| s.1),
            column(1, |s| s.1),
            delta(|s| s.1),
            column(0, |s| s.2),
            column(1, |s| s.2),
        );
    }
    let _ = provider.shutdown();
}

fn bench(c: &mut Criterion) {
    let runtime = runtime();
    let admission = pod_director::testing::admission(pods::CONFIG, pods::NAMESPACES).0;
    let headers = headers();
    let run = |g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>, name: &str, body: &[u8]| {
        g.bench_with_input(BenchmarkId::from_parameter(name), body, |b, body| {
            b.iter(|| runtime.block_on(admission.review(Webhook::Mutate, &headers, black_box(body))))
        });
    };
    for size in pods::SIZES {
        let body = pods::review("705ab4f5-6393-11e8-b7cc-42010a800002", &pods::sized(size, "team-a"));
        let mut g = c.benchmark_group(format!("tracing/{size}"));
        g.throughput(Throughput::Bytes(body.len() as u64));

        tracing::subscriber::with_default(tracing::subscriber::NoSubscriber::default(), || {
            run(&mut g, "none", &body)
        });

        let provider = provider();
        for (name, dispatch) in dispatchers(&provider) {
            tracing::dispatcher::with_default(&dispatch, || run(&mut g, name, &body));
        }
        let _ = provider.shutdown();
        g.finish();
    }
}

criterion_group!(benches, bench);

fn main() {
    report_paired();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
