//! Prometheus metrics, served as OpenMetrics text on the probe port's `/metrics`.
//!
//! | metric | labels |
//! |---|---|
//! | `pod_director_decisions_total` | `group`, `mode`, `decision`, `webhook` |
//! | `pod_director_admission_duration_seconds` (histogram) | `webhook` |
//! | `pod_director_config_reloads_total` | `result` (`success`, `error`) |
//! | `pod_director_tls_reloads_total` | `result` (`success`, `error`) |
//! | `pod_director_namespace_cache_size` (gauge) | |
//! | `pod_director_build_info` | `version` |
//!
//! `group` and `mode` are empty when no group applies (excluded namespace, no group).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};

use crate::placement::Outcome;

/// The `Content-Type` of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Admission latency buckets, in seconds: 0.5 ms … ~4 s.
const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    group: String,
    mode: String,
    decision: String,
    webhook: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WebhookLabels {
    webhook: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabels {
    version: String,
}

/// What a reload attempt ended with (`result` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadResult {
    Success,
    Error,
}

impl ReloadResult {
    pub fn as_str(self) -> &'static str {
        match self {
            ReloadResult::Success => "success",
            ReloadResult::Error => "error",
        }
    }
}

/// Every metric pod-director exports, registered once.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    decisions: Family<DecisionLabels, Counter>,
    latency: Family<WebhookLabels, Histogram, fn() -> Histogram>,
    config_reloads: Family<ResultLabels, Counter>,
    tls_reloads: Family<ResultLabels, Counter>,
    namespace_cache_size: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("pod_director");
        let decisions = Family::<DecisionLabels, Counter>::default();
        registry.register(
            "decisions",
            "Admission decisions by group, mode, decision and webhook",
            decisions.clone(),
        );
        let latency: Family<WebhookLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(|| Histogram::new(LATENCY_BUCKETS));
        registry.register_with_unit(
            "admission_duration",
            "Time from request received to response ready, by webhook",
            Unit::Seconds,
            latency.clone(),
        );
        let config_reloads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "config_reloads",
            "Configuration reload attempts by result",
            config_reloads.clone(),
        );
        let tls_reloads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "tls_reloads",
            "TLS certificate reload attempts by result",
            tls_reloads.clone(),
        );
        let namespace_cache_size = Gauge::default();
        registry.register(
            "namespace_cache_size",
            "Namespaces held in the namespace cache",
            namespace_cache_size.clone(),
        );
        registry.register(
            "build",
            "pod-director build information",
            Info::new(VersionLabels {
                version: env!("CARGO_PKG_VERSION").to_owned(),
            }),
        );
        Self {
            registry,
            decisions,
            latency,
            config_reloads,
            tls_reloads,
            namespace_cache_size,
        }
    }

    /// Counts one decision and its latency.
    pub fn observe_decision(&self, outcome: &Outcome, latency: Duration) {
        let webhook = outcome.webhook.as_str().to_owned();
        self.decisions
            .get_or_create(&DecisionLabels {
                group: outcome.group.clone().unwrap_or_default(),
                mode: outcome.mode.map(|m| m.as_str().to_owned()).unwrap_or_default(),
                decision: outcome.decision.as_str().to_owned(),
                webhook: webhook.clone(),
            })
            .inc();
        self.latency
            .get_or_create(&WebhookLabels { webhook })
            .observe(latency.as_secs_f64());
    }

    pub fn config_reloaded(&self, result: ReloadResult) {
        self.config_reloads
            .get_or_create(&ResultLabels {
                result: result.as_str().to_owned(),
            })
            .inc();
    }

    pub fn tls_reloaded(&self, result: ReloadResult) {
        self.tls_reloads
            .get_or_create(&ResultLabels {
                result: result.as_str().to_owned(),
            })
            .inc();
    }

    pub fn set_namespace_cache_size(&self, size: usize) {
        self.namespace_cache_size.set(i64::try_from(size).unwrap_or(i64::MAX));
    }

    /// The registry as OpenMetrics text (see [`CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Mode;
    use crate::placement::{Decision, Webhook};

    fn outcome(group: Option<&str>, mode: Option<Mode>, decision: Decision) -> Outcome {
        let mut outcome = Outcome::new(Webhook::Mutate, decision);
        outcome.group = group.map(str::to_owned);
        outcome.mode = mode;
        outcome
    }

    #[test]
    fn the_text_output_names_every_metric_with_its_labels() {
        let metrics = Metrics::new();
        metrics.observe_decision(
            &outcome(Some("ci"), Some(Mode::DryRun), Decision::WouldPatch),
            Duration::from_millis(3),
        );
        metrics.observe_decision(&outcome(None, None, Decision::Skipped), Duration::from_micros(200));
        metrics.config_reloaded(ReloadResult::Success);
        metrics.config_reloaded(ReloadResult::Error);
        metrics.tls_reloaded(ReloadResult::Success);
        metrics.set_namespace_cache_size(42);
        let text = metrics.encode();
        for expected in [
            r#"pod_director_decisions_total{group="ci",mode="dryRun",decision="would_patch",webhook="mutate"} 1"#,
            r#"pod_director_decisions_total{group="",mode="",decision="skipped",webhook="mutate"} 1"#,
            r#"pod_director_admission_duration_seconds_bucket{le="0.005",webhook="mutate"} 2"#,
            r#"pod_director_admission_duration_seconds_count{webhook="mutate"} 2"#,
            r#"pod_director_config_reloads_total{result="success"} 1"#,
            r#"pod_director_config_reloads_total{result="error"} 1"#,
            r#"pod_director_tls_reloads_total{result="success"} 1"#,
            "pod_director_namespace_cache_size 42",
            &format!(
                r#"pod_director_build_info{{version="{}"}} 1"#,
                env!("CARGO_PKG_VERSION")
            ),
            "# TYPE pod_director_admission_duration_seconds histogram",
            "# EOF",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
    }
}
