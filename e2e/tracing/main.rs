//! pod-director's observability stack running for real: the OpenTelemetry
//! Collector with the shipped `otel/collector.yaml` (only its endpoints
//! substituted), Jaeger v2 behind it, a real kube-apiserver tracing into the same
//! collector, and a real Prometheus scraping pod-director.
//!
//! `e2e/tracing/run` sets it up (Jaeger, the collector, a loopback control plane)
//! and runs this target with
//!
//! | variable | meaning |
//! |---|---|
//! | `KUBECONFIG`, `E2E_STATE_DIR` | the control plane (webhook certificate in `$E2E_STATE_DIR/webhook/`) |
//! | `E2E_JAEGER_QUERY` | Jaeger's query API, e.g. `http://127.0.0.1:16686` |
//! | `E2E_COLLECTOR_OTLP`, `E2E_COLLECTOR_OTLP_HTTP` | the collector's OTLP receivers (gRPC, HTTP), `host:port` |
//! | `E2E_EXPECT_APISERVER_TRACE` | `true`: the API server's span must be in pod-director's trace |
//! | `E2E_PROMETHEUS` | the Prometheus binary (default: `e2e/tools.sh path prometheus`) |
//!
//! Each test sets up its scenario with the scenario suite's harness
//! (`e2e/src/harness`: the chart's webhook configurations, the suite's
//! groups, a pod-director of this checkout), with the pod-director exporting its
//! spans to the collector.
//!
//! - `spans`: a decision span arrives in Jaeger inside the API server's trace;
//!   SIGTERM flushes a span over OTLP/HTTP.
//! - `sampling`: the collector's tail-sampling policy keeps every trace of a
//!   decision that changes something, and only a share of noop/skipped.
//! - `rollout`: a rollout through the API server, then every PromQL query of every
//!   dashboard panel evaluated by Prometheus (`dashboard`), and the latency
//!   panel's exemplars found in Jaeger.
//! - `alerts`: the chart's alert rules over a Prometheus scraping pod-director and the API
//!   server: every expression valid, and the failure alerts firing on real failures.

use pod_director_e2e::{fixtures, harness};

mod alerts;
mod dashboard;
mod rollout;
mod sampling;
mod spans;

use std::time::Duration;

use serde_json::{Value, json};

use harness::jaeger::Jaeger;
use harness::{Env, env_var};

/// pod-director's `service.name` in these tests (`OTEL_SERVICE_NAME`).
pub const SERVICE: &str = "pod-director";
/// kube-apiserver's `service.name`.
pub const APISERVER_SERVICE: &str = "apiserver";
/// The `pod` label the Prometheus scrape adds (as a ServiceMonitor does).
pub const POD_LABEL: &str = "pod-director-e2e";
/// The decisions `otel/collector.yaml` promises to keep, every one.
pub const KEPT: [&str; 6] = [
    "would_patch",
    "would_deny",
    "patched",
    "denied",
    "unknown_group",
    "error",
];

fn required(name: &str) -> String {
    env_var(name).unwrap_or_else(|| panic!("{name} is not set: run e2e/tracing/run"))
}

/// The run script's Jaeger.
pub async fn jaeger() -> Jaeger {
    let jaeger = Jaeger::new(&required("E2E_JAEGER_QUERY"));
    jaeger.wait_ready().await;
    jaeger
}

/// pod-director's exporter settings: OTLP/gRPC to the collector, a short batch delay.
pub fn otel_env() -> Vec<(String, String)> {
    let endpoint = format!("http://{}", required("E2E_COLLECTOR_OTLP"));
    variables(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_BSP_SCHEDULE_DELAY", "200"),
        ("OTEL_SERVICE_NAME", SERVICE),
        ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=e2e-tracing"),
    ])
}

/// Environment variables `(name, value)`, owned.
pub fn variables(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

/// A scenario whose pod-director exports to the collector with `otel`.
pub async fn start(scenario: &str, otel: Vec<(String, String)>) -> Env {
    Env::start_with(
        scenario,
        harness::Options {
            env: otel,
            ..harness::Options::default()
        },
    )
    .await
}

/// A random lowercase hex string of `len` characters.
pub fn random_hex(len: usize) -> String {
    let mut out = String::new();
    while out.len() < len {
        out.push_str(&harness::suffix());
    }
    out.truncate(len);
    out
}

/// A W3C `traceparent` of a sampled caller span in trace `trace_id`.
pub fn sampled(trace_id: &str) -> String {
    format!("00-{trace_id}-{}-01", random_hex(16))
}

/// POSTs a review to `/mutate` directly (not through the API server), over HTTPS
/// trusting the webhook CA of the state dir, with `traceparent`; returns the HTTP
/// status and the body.
pub async fn post_mutate(env: &mut Env, review: &Value, traceparent: &str) -> (reqwest::StatusCode, Value) {
    let addr = env.pod_director().addr;
    let state_dir = env.settings.state_dir.as_ref().expect("local mode");
    let ca = std::fs::read(state_dir.join("webhook/ca.crt")).expect("the webhook CA");
    let response = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).expect("the webhook CA is PEM"))
        .timeout(Duration::from_secs(10))
        .build()
        .expect("an HTTPS client")
        .post(format!("https://{addr}/mutate"))
        .header("traceparent", traceparent)
        .json(review)
        .send()
        .await
        .expect("pod-director answers");
    let status = response.status();
    (status, response.json().await.unwrap_or_default())
}

/// A plain pod placed as its group wants: `would_be` (a would-be patch logged for a
/// plain pod of the group) applied. The API server adds tolerations of its own
/// before the webhook sees a pod, so the logged patch appends to a list.
pub fn placed_pod(name: &str, would_be: &Value) -> k8s_openapi::api::core::v1::Pod {
    let mut pod = serde_json::to_value(harness::pod(name)).expect("a pod serializes");
    pod["spec"]["tolerations"] = json!([]);
    fixtures::patched(&serde_json::from_value(pod).expect("a pod"), would_be)
}

/// A review pod-director cannot decide (no object): an `error` decision.
pub fn undecidable_review() -> Value {
    json!({
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {"uid": format!("e2e-undecidable-{}", random_hex(8))}
    })
}
