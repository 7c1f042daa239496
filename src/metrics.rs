//! Prometheus metrics, served as OpenMetrics text on the probe port's `/metrics`.
//!
//! Each owner registers its own families (`XMetrics::register(&mut Registry) -> Self`) and keeps the
//! handle it counts with; [`crate::app::Metrics`] composes them in the exposition's order, and this
//! module only gives them a [`registry`] and encodes it ([`Exposition`]), the build information last.
//!
//! | metric | labels | owner |
//! |---|---|---|
//! | `pod_director_decisions_total` | `group`, `mode`, `decision`, `webhook` | [`crate::admission::AdmissionMetrics`] |
//! | `pod_director_conflicts_total` | `group`, `mode`, `resolution` (`rejected`, `overridden`, `ignored`), `webhook` | 〃 |
//! | `pod_director_admission_duration_seconds` (histogram, `trace_id` exemplars) | `webhook` | 〃 |
//! | `pod_director_no_feasible_node_total` | `group`, `mode`, `webhook` | 〃 |
//! | `pod_director_config_reloads_total` | `result` (`success`, `error`) | [`crate::server::ReloadMetrics`] |
//! | `pod_director_tls_reloads_total` | `result` (`success`, `error`) | 〃 |
//! | `pod_director_namespace_cache_size` (gauge) | | [`crate::cluster::namespaces::NamespaceMetrics`] |
//! | `pod_director_orphaned_group_namespaces` (gauge) | `group` (undefined groups that namespaces select) | [`crate::cluster::orphans::OrphanMetrics`] |
//! | `pod_director_webhook_reconciles_total` | `result` (`patched`, `unchanged`, `error`) | [`crate::cluster::webhooks::ReconcileMetrics`] |
//! | `pod_director_node_cache_size` (gauge) | | [`crate::cluster::nodes::NodeMetrics`] |
//! | `pod_director_node_lookups_total` | `result` (`cached`, `fetched`, `not_found`, `error`) | 〃 |
//! | `pod_director_group_nodes` (gauge) | `group` | 〃 |
//! | `pod_director_binding_pod_lookups_total` | `result` (`found`, `not_found`, `error`) | [`crate::cluster::pods::PodMetrics`] |
//! | `pod_director_connections_open` (gauge) | | [`crate::server::ConnectionMetrics`] |
//! | `pod_director_connections_rejected_total` | `reason` (`limit`, `probe_limit`) | 〃 |
//! | `pod_director_connection_timeouts_total` | `timeout` (`handshake`, `first_byte`, `header_read`, `idle`) | 〃 |
//! | `pod_director_audit_pods` (gauge) | `group`, `decision` (`compliant`, `would_patch`, `would_deny`, `skipped`) | [`crate::cluster::audit::continuous::AuditMetrics`] |
//! | `pod_director_audit_templates` (gauge) | `group`, `decision` | 〃 |
//! | `pod_director_group_ready` (gauge, 1 or 0) | `group` | 〃 |
//! | `pod_director_group_blockers` (gauge) | `group` | 〃 |
//! | `pod_director_audit_scans_total` | `result` (`success`, `error`) | 〃 |
//! | `pod_director_audit_duration_seconds` (gauge) | | 〃 |
//! | `pod_director_log_lines_dropped_total` | | [`crate::telemetry::LogMetrics`] |
//! | `pod_director_build_info` | `version` | [`Exposition`] |
//!
//! `group` and `mode` are empty when no group applies (excluded namespace, no group).
//!
//! Series a dashboard counts with `increase()`/`rate()` exist at 0 before their first
//! event (the owners' `initialise`): Prometheus cannot see the first increment of a
//! series that appears already at 1, so a dashboard's "would patch" total would miss
//! every group's first pod.
//!
//! Latency buckets carry an OpenMetrics exemplar `{trace_id="…"}` from the
//! latest exported decision span that fell in them, so Grafana can jump from a
//! latency spike to a trace (Prometheus keeps exemplars with
//! `--enable-feature=exemplar-storage`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Metric, Registry};

/// The `Content-Type` of [`Exposition::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The exemplar label naming the trace (Grafana's `exemplarTraceIdDestinations[].name`).
pub const EXEMPLAR_TRACE_LABEL: &str = "trace_id";

/// A label set of `&'static str` values and `String`s, one field per label, in label order.
macro_rules! label_set {
    ($($(#[$attr:meta])* $name:ident { $($field:ident: $type:ty),* })*) => {
        $(
            $(#[$attr])*
            #[derive(Debug, Clone, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
            pub(crate) struct $name {
                $(pub(crate) $field: $type),*
            }
        )*
    };
}
pub(crate) use label_set;

label_set! {
    /// One label, `group`.
    GroupLabels { group: String }
    /// One label, `result`.
    ResultLabels { result: &'static str }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabels {
    version: &'static str,
}

/// A registry with pod-director's prefix (`pod_director_`), for the owners to register their families in.
pub fn registry() -> Registry {
    Registry::with_prefix("pod_director")
}

/// Registers `metric` under `pod_director_{name}` and returns it (a handle to the same series).
pub(crate) fn register<M: Metric + Clone>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M {
    registry.register(name, help, metric.clone());
    metric
}

/// A count as a gauge value.
pub(crate) fn gauge(count: usize) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// The families the owners registered, then the build information: what `/metrics` serves.
#[derive(Debug)]
pub struct Exposition {
    registry: Registry,
}

impl Exposition {
    /// Closes `registry` (from [`registry`], every owner's families registered) with `pod_director_build_info`.
    pub fn new(mut registry: Registry) -> Self {
        let version = VersionLabels {
            version: env!("CARGO_PKG_VERSION"),
        };
        registry.register("build", "pod-director build information", Info::new(version));
        Self { registry }
    }

    /// The registry as OpenMetrics text (see [`CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
