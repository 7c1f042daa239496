//! Prometheus metrics, served as OpenMetrics text on the probe port's `/metrics`.
//!
//! Each owner registers its own families (`XMetrics::register(&mut Registry) -> Self`) and keeps the
//! handle it counts with; [`crate::app::Metrics`] composes them in the exposition's order, and this
//! module only gives them a [`registry`] and encodes it ([`Exposition`]), the build information last.
//!
//! Every family, its labels and meaning: the book's reference page `docs/src/reference/metrics.md`,
//! the one list (`tests/observability_names.rs` holds it equal to what `/metrics` exposes, both ways).
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
