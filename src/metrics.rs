//! Prometheus metrics, served as OpenMetrics text on the probe port's `/metrics`.
//!
//! | metric | labels |
//! |---|---|
//! | `pod_director_decisions_total` | `group`, `mode`, `decision`, `webhook` |
//! | `pod_director_conflicts_total` | `group`, `mode`, `resolution` (`rejected`, `overridden`, `ignored`), `webhook` |
//! | `pod_director_admission_duration_seconds` (histogram, `trace_id` exemplars) | `webhook` |
//! | `pod_director_config_reloads_total` | `result` (`success`, `error`) |
//! | `pod_director_tls_reloads_total` | `result` (`success`, `error`) |
//! | `pod_director_namespace_cache_size` (gauge) | |
//! | `pod_director_orphaned_group_namespaces` (gauge) | `group` (undefined groups that namespaces select) |
//! | `pod_director_webhook_reconciles_total` | `result` (`patched`, `unchanged`, `error`) |
//! | `pod_director_node_cache_size` (gauge) | |
//! | `pod_director_node_lookups_total` | `result` (`cached`, `fetched`, `not_found`, `error`) |
//! | `pod_director_no_feasible_node_total` | `group`, `mode`, `webhook` |
//! | `pod_director_group_nodes` (gauge) | `group` |
//! | `pod_director_connections_open` (gauge) | |
//! | `pod_director_connections_rejected_total` | `reason` (`limit`, `probe_limit`) |
//! | `pod_director_connection_timeouts_total` | `timeout` (`handshake`, `first_byte`, `header_read`, `idle`) |
//! | `pod_director_log_lines_dropped_total` | |
//! | `pod_director_audit_pods` (gauge) | `group`, `decision` (`compliant`, `would_patch`, `would_deny`, `skipped`) |
//! | `pod_director_audit_templates` (gauge) | `group`, `decision` |
//! | `pod_director_group_ready` (gauge, 1 or 0) | `group` |
//! | `pod_director_group_blockers` (gauge) | `group` |
//! | `pod_director_audit_scans_total` | `result` (`success`, `error`) |
//! | `pod_director_audit_duration_seconds` (gauge) | |
//! | `pod_director_build_info` | `version` |
//!
//! `group` and `mode` are empty when no group applies (excluded namespace, no group).
//!
//! Series a dashboard counts with `increase()`/`rate()` exist at 0 before their first
//! event ([`Metrics::initialise`], [`Metrics::initialise_unknown_groups`]): Prometheus
//! cannot see the first increment of a series that appears already at 1, so a
//! dashboard's "would patch" total would miss every group's first pod.
//!
//! Latency buckets carry an OpenMetrics exemplar `{trace_id="…"}` from the
//! latest exported decision span that fell in them, so Grafana can jump from a
//! latency spike to a trace (Prometheus keeps exemplars with
//! `--enable-feature=exemplar-storage`).

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::exemplar::HistogramWithExemplars;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Metric, Registry, Unit};

use crate::config::{Config, Mode, OnConflict};
use crate::placement::{Decision, Outcome, Resolution, Webhook};

/// The `Content-Type` of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Admission latency buckets, in seconds: 0.5 ms … 10 s.
const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A label set of `&'static str` values and `String`s, one field per label, in label order.
macro_rules! label_set {
    ($($(#[$attr:meta])* $name:ident { $($field:ident: $type:ty),* })*) => {
        $(
            $(#[$attr])*
            #[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
            struct $name {
                $($field: $type),*
            }
        )*
    };
}

label_set! {
    DecisionLabels { group: String, mode: &'static str, decision: &'static str, webhook: &'static str }
    ConflictLabels { group: String, mode: &'static str, resolution: &'static str, webhook: &'static str }
    GroupModeLabels { group: String, mode: &'static str, webhook: &'static str }
    GroupLabels { group: String }
    GroupDecisionLabels { group: String, decision: &'static str }
    WebhookLabels { webhook: &'static str }
    /// The exemplar of a latency observation: the decision span's trace.
    TraceLabels { trace_id: String }
    ResultLabels { result: &'static str }
    VersionLabels { version: &'static str }
    ReasonLabels { reason: &'static str }
    TimeoutLabels { timeout: &'static str }
}

/// The exemplar label naming the trace (Grafana's `exemplarTraceIdDestinations[].name`).
pub const EXEMPLAR_TRACE_LABEL: &str = "trace_id";

type LatencyHistogram = HistogramWithExemplars<TraceLabels>;

named_enum! {
    /// What one reconciliation of the webhook configurations ended with (`result` label).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ReconcileResult {
        /// Some namespaceSelector differed from the live configuration's and was patched.
        Patched => "patched",
        /// Every namespaceSelector already matched.
        Unchanged => "unchanged",
        /// The configurations could not be read or patched (retried).
        Error => "error",
    }
}

named_enum! {
    /// Why a connection was refused at accept (`reason` label).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Rejection {
        /// The admission port holds `--max-connections` connections.
        Limit => "limit",
        /// The probe port holds its own maximum.
        ProbeLimit => "probe_limit",
    }
}

named_enum! {
    /// Which connection timer closed a connection (`timeout` label).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ConnectionTimeout {
        /// The TLS handshake did not finish in time.
        Handshake => "handshake",
        /// Connected (and TLS done), but no byte arrived in time.
        FirstByte => "first_byte",
        /// A request's head (for HTTP/2, the preface and first request) did not arrive in time.
        HeaderRead => "header_read",
        /// No request for the idle timeout.
        Idle => "idle",
    }
}

named_enum! {
    /// What a reload attempt ended with (`result` label).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ReloadResult {
        Success => "success",
        Error => "error",
    }
}

named_enum! {
    /// What one continuous audit scan ended with (`result` label).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ScanResult {
        Success => "success",
        /// The scan could not complete (the API server did not answer, RBAC); the gauges keep the last scan.
        Error => "error",
    }
}

named_enum! {
    /// How a node lookup (`spec.nodeName`) was answered (`result` label).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum NodeLookupResult {
        /// From the Node cache.
        Cached => "cached",
        /// Not cached; the live GET found it.
        Fetched => "fetched",
        /// Not cached; the live GET says it does not exist.
        NotFound => "not_found",
        /// Not cached; the live GET failed or timed out.
        Error => "error",
    }
}

/// Every metric pod-director exports, registered once.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    decisions: Family<DecisionLabels, Counter>,
    conflicts: Family<ConflictLabels, Counter>,
    latency: Family<WebhookLabels, LatencyHistogram, fn() -> LatencyHistogram>,
    config_reloads: Family<ResultLabels, Counter>,
    tls_reloads: Family<ResultLabels, Counter>,
    namespace_cache_size: Gauge,
    orphaned_group_namespaces: Family<GroupLabels, Gauge>,
    webhook_reconciles: Family<ResultLabels, Counter>,
    node_cache_size: Gauge,
    node_lookups: Family<ResultLabels, Counter>,
    no_feasible_node: Family<GroupModeLabels, Counter>,
    group_nodes: Family<GroupLabels, Gauge>,
    connections_open: Gauge,
    connections_rejected: Family<ReasonLabels, Counter>,
    connection_timeouts: Family<TimeoutLabels, Counter>,
    audit_pods: Family<GroupDecisionLabels, Gauge>,
    audit_templates: Family<GroupDecisionLabels, Gauge>,
    group_ready: Family<GroupLabels, Gauge>,
    group_blockers: Family<GroupLabels, Gauge>,
    audit_scans: Family<ResultLabels, Counter>,
    audit_duration: Gauge<f64, AtomicU64>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// Registers `metric` under `pod_director_{name}` and returns it (a handle to the same series).
fn register<M: Metric + Clone>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M {
    registry.register(name, help, metric.clone());
    metric
}

/// A count as a gauge value.
fn gauge(count: usize) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("pod_director");
        let r = &mut registry;
        // Registered in this order, which is the exposition's.
        let decisions = register(
            r,
            "decisions",
            "Admission decisions by group, mode, decision and webhook",
            Family::default(),
        );
        let conflicts = register(
            r,
            "conflicts",
            "Conflicts between a pod's own placement and its group's, by group, mode, resolution and webhook",
            Family::default(),
        );
        let latency: Family<WebhookLabels, LatencyHistogram, fn() -> LatencyHistogram> =
            Family::new_with_constructor(|| HistogramWithExemplars::new(LATENCY_BUCKETS.into_iter()));
        r.register_with_unit(
            "admission_duration",
            "Time from request received to response ready, by webhook",
            Unit::Seconds,
            latency.clone(),
        );
        let config_reloads = register(
            r,
            "config_reloads",
            "Configuration reload attempts by result",
            Family::default(),
        );
        let tls_reloads = register(
            r,
            "tls_reloads",
            "TLS certificate reload attempts by result",
            Family::default(),
        );
        let namespace_cache_size = register(
            r,
            "namespace_cache_size",
            "Namespaces held in the namespace cache",
            Gauge::default(),
        );
        let orphaned_group_namespaces = register(
            r,
            "orphaned_group_namespaces",
            "Namespaces whose group label names a group the configuration does not define, by group",
            Family::default(),
        );
        let webhook_reconciles = register(
            r,
            "webhook_reconciles",
            "Reconciliations of the webhook configurations' namespaceSelectors with the live configuration, by result",
            Family::default(),
        );
        let node_cache_size = register(r, "node_cache_size", "Nodes held in the Node cache", Gauge::default());
        let node_lookups = register(
            r,
            "node_lookups",
            "Lookups of the node a pod names in spec.nodeName, by result",
            Family::default(),
        );
        let no_feasible_node = register(
            r,
            "no_feasible_node",
            "Decisions whose placed pod matches no node (placement only: resources not counted), by group, mode and webhook",
            Family::default(),
        );
        let group_nodes = register(
            r,
            "group_nodes",
            "Nodes that satisfy each group's own placement (nodeSelector, required node affinity, tolerated taints, not cordoned)",
            Family::default(),
        );
        let connections_open = register(
            r,
            "connections_open",
            "Connections open on the admission port (accepted, not yet closed)",
            Gauge::default(),
        );
        let connections_rejected = register(
            r,
            "connections_rejected",
            "Connections closed at accept, before the TLS handshake, by reason",
            Family::default(),
        );
        let connection_timeouts = register(
            r,
            "connection_timeouts",
            "Connections closed by a connection timer, by timer",
            Family::default(),
        );
        let audit_pods = register(
            r,
            "audit_pods",
            "Running pods of each group by what enforce would decide for their re-creation (latest audit)",
            Family::default(),
        );
        let audit_templates = register(
            r,
            "audit_templates",
            "Workload pod templates of each group by what enforce would decide (latest audit)",
            Family::default(),
        );
        let group_ready = register(
            r,
            "group_ready",
            "1 when the latest audit found the group ready to enforce (no blocker), else 0",
            Family::default(),
        );
        let group_blockers = register(
            r,
            "group_blockers",
            "Blockers the latest audit found for enforcing each group",
            Family::default(),
        );
        let audit_scans = register(r, "audit_scans", "Continuous audit scans by result", Family::default());
        let audit_duration = Gauge::<f64, AtomicU64>::default();
        r.register_with_unit(
            "audit_duration",
            "Duration of the latest continuous audit scan",
            Unit::Seconds,
            audit_duration.clone(),
        );
        r.register(
            "log_lines_dropped",
            "Log lines dropped because standard output did not keep up",
            crate::telemetry::log_lines_dropped(),
        );
        let version = VersionLabels {
            version: env!("CARGO_PKG_VERSION"),
        };
        r.register("build", "pod-director build information", Info::new(version));
        Self {
            registry,
            decisions,
            conflicts,
            latency,
            config_reloads,
            tls_reloads,
            namespace_cache_size,
            orphaned_group_namespaces,
            webhook_reconciles,
            node_cache_size,
            node_lookups,
            no_feasible_node,
            group_nodes,
            connections_open,
            connections_rejected,
            connection_timeouts,
            audit_pods,
            audit_templates,
            group_ready,
            group_blockers,
            audit_scans,
            audit_duration,
        }
    }

    /// Exports at 0 every series that `config` can produce and that no event has
    /// created yet: each group's decisions at its current mode (mutate and validate),
    /// its conflicts at its `onConflict` resolution, its placed pods matching no node,
    /// the namespace guard's decisions for its label value, the decisions without a
    /// group (skipped, error), the latency histograms, and the reload and reconcile
    /// results. Called at start and after each reload (a group flipped to enforce gets
    /// its enforce series); counters are never reset.
    pub fn initialise(&self, config: &Config) {
        let decisions = |group: &str, mode: &'static str, webhook: Webhook, decisions: &[Decision]| {
            for decision in decisions {
                let _ = self.decisions.get_or_create(&DecisionLabels {
                    group: group.to_owned(),
                    mode,
                    decision: decision.as_str(),
                    webhook: webhook.as_str(),
                });
            }
        };
        for webhook in Webhook::ALL {
            decisions("", "", webhook, &[Decision::Skipped, Decision::Error]);
        }
        let guard = config.namespace_guard.mode;
        let guard_denial = if guard == Mode::Enforce {
            Decision::Denied
        } else {
            Decision::WouldDeny
        };
        decisions("", guard.as_str(), Webhook::ValidateNamespace, &[Decision::Noop]);
        for (name, group) in &config.groups {
            let mode = config.mode_of(group);
            let of_mode = if mode == Mode::Enforce {
                [Decision::Patched, Decision::Denied, Decision::Noop, Decision::Skipped]
            } else {
                [
                    Decision::WouldPatch,
                    Decision::WouldDeny,
                    Decision::Noop,
                    Decision::Skipped,
                ]
            };
            for webhook in [Webhook::Mutate, Webhook::Validate] {
                decisions(name, mode.as_str(), webhook, &of_mode);
            }
            decisions(
                name,
                guard.as_str(),
                Webhook::ValidateNamespace,
                &[Decision::Noop, guard_denial],
            );
            let resolution = match group.on_conflict {
                OnConflict::Reject => Resolution::Rejected,
                OnConflict::Override => Resolution::Overridden,
                OnConflict::Ignore => Resolution::Ignored,
            };
            let _ = self.conflicts.get_or_create(&ConflictLabels {
                group: name.clone(),
                mode: mode.as_str(),
                resolution: resolution.as_str(),
                webhook: Webhook::Mutate.as_str(),
            });
            let _ = self.no_feasible_node.get_or_create(&GroupModeLabels {
                group: name.clone(),
                mode: mode.as_str(),
                webhook: Webhook::Mutate.as_str(),
            });
        }
        for webhook in Webhook::ALL {
            let _ = self.latency.get_or_create(&WebhookLabels {
                webhook: webhook.as_str(),
            });
        }
        for result in ReloadResult::ALL {
            let labels = ResultLabels {
                result: result.as_str(),
            };
            let _ = self.config_reloads.get_or_create(&labels);
            let _ = self.tls_reloads.get_or_create(&labels);
        }
        for result in ReconcileResult::ALL {
            let _ = self.webhook_reconciles.get_or_create(&ResultLabels {
                result: result.as_str(),
            });
        }
    }

    /// Exports at 0 the `unknown_group` decisions of group label values that namespaces
    /// select but the config does not define (the orphaned groups), so that the first pod
    /// of such a namespace is counted too (see [`Metrics::initialise`]).
    /// At most [`crate::orphans::MAX_SERIES`] groups, as the orphaned-group gauge.
    pub fn initialise_unknown_groups<'a>(&self, groups: impl IntoIterator<Item = &'a str>) {
        for group in groups.into_iter().take(crate::orphans::MAX_SERIES) {
            // Such a pod has no placement; it may match no node.
            let _ = self.no_feasible_node.get_or_create(&GroupModeLabels {
                group: group.to_owned(),
                mode: "",
                webhook: Webhook::Mutate.as_str(),
            });
            for webhook in [Webhook::Mutate, Webhook::Validate] {
                let _ = self.decisions.get_or_create(&DecisionLabels {
                    group: group.to_owned(),
                    mode: "",
                    decision: Decision::UnknownGroup.as_str(),
                    webhook: webhook.as_str(),
                });
            }
        }
    }

    /// Counts one decision and its latency.
    pub fn observe_decision(&self, outcome: &Outcome, latency: Duration) {
        self.observe_traced_decision(outcome, latency, None);
    }

    /// Counts one decision, its conflicts and its latency; `trace_id` (of an
    /// exported span) becomes the latency bucket's exemplar.
    pub(crate) fn observe_traced_decision(&self, outcome: &Outcome, latency: Duration, trace_id: Option<&str>) {
        let webhook = outcome.webhook.as_str();
        let group = outcome.group.as_deref().unwrap_or_default();
        let mode = outcome.mode.map(Mode::as_str).unwrap_or_default();
        self.decisions
            .get_or_create(&DecisionLabels {
                group: group.to_owned(),
                mode,
                decision: outcome.decision.as_str(),
                webhook,
            })
            .inc();
        for conflict in &outcome.conflicts {
            self.conflicts
                .get_or_create(&ConflictLabels {
                    group: group.to_owned(),
                    mode,
                    resolution: conflict.resolution.as_str(),
                    webhook,
                })
                .inc();
        }
        if outcome.no_feasible_node {
            self.no_feasible_node
                .get_or_create(&GroupModeLabels {
                    group: group.to_owned(),
                    mode,
                    webhook,
                })
                .inc();
        }
        let exemplar = trace_id.map(|id| TraceLabels {
            trace_id: id.to_owned(),
        });
        self.latency
            .get_or_create(&WebhookLabels { webhook })
            .observe(latency.as_secs_f64(), exemplar, None);
    }

    pub fn config_reloaded(&self, result: ReloadResult) {
        self.config_reloads
            .get_or_create(&ResultLabels {
                result: result.as_str(),
            })
            .inc();
    }

    pub fn tls_reloaded(&self, result: ReloadResult) {
        self.tls_reloads
            .get_or_create(&ResultLabels {
                result: result.as_str(),
            })
            .inc();
    }

    pub fn set_namespace_cache_size(&self, size: usize) {
        self.namespace_cache_size.set(gauge(size));
    }

    /// Replaces the orphaned-group gauge with `orphaned` (group → namespaces), at most
    /// [`crate::orphans::MAX_SERIES`] series: groups no namespace selects any more disappear.
    pub fn set_orphaned_groups(&self, orphaned: &std::collections::BTreeMap<String, usize>) {
        self.orphaned_group_namespaces.clear();
        for (group, count) in crate::orphans::bounded(orphaned) {
            self.orphaned_group_namespaces
                .get_or_create(&GroupLabels { group })
                .set(gauge(count));
        }
    }

    pub fn webhook_reconciled(&self, result: ReconcileResult) {
        self.webhook_reconciles
            .get_or_create(&ResultLabels {
                result: result.as_str(),
            })
            .inc();
    }

    /// The open connections gauge of the admission port (moved by the server as connections come and go).
    pub(crate) fn connections_open(&self) -> &Gauge {
        &self.connections_open
    }

    pub fn connection_rejected(&self, reason: Rejection) {
        self.connections_rejected
            .get_or_create(&ReasonLabels {
                reason: reason.as_str(),
            })
            .inc();
    }

    pub fn set_node_cache_size(&self, size: usize) {
        self.node_cache_size.set(gauge(size));
    }

    pub fn node_looked_up(&self, result: NodeLookupResult) {
        self.node_lookups
            .get_or_create(&ResultLabels {
                result: result.as_str(),
            })
            .inc();
    }

    pub fn connection_timed_out(&self, timeout: ConnectionTimeout) {
        self.connection_timeouts
            .get_or_create(&TimeoutLabels {
                timeout: timeout.as_str(),
            })
            .inc();
    }

    /// Sets `pod_director_group_nodes` to exactly these groups (removed groups disappear).
    pub fn set_group_nodes(&self, counts: &[(String, usize)]) {
        self.group_nodes.clear();
        for (group, count) in counts {
            self.group_nodes
                .get_or_create(&GroupLabels { group: group.clone() })
                .set(gauge(*count));
        }
    }

    /// Sets the audit gauges to exactly this audit's groups (groups it did not audit disappear).
    pub fn set_audit(&self, audit: &crate::audit::Audit) {
        self.clear_audit();
        let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        for g in &audit.groups {
            for decision in crate::audit::AuditDecision::ALL {
                let labels = GroupDecisionLabels {
                    group: g.group.clone(),
                    decision: decision.as_str(),
                };
                self.audit_pods.get_or_create(&labels).set(count(g.pods.get(decision)));
                self.audit_templates
                    .get_or_create(&labels)
                    .set(count(g.templates.get(decision)));
            }
            let group = GroupLabels { group: g.group.clone() };
            self.group_ready.get_or_create(&group).set(i64::from(g.verdict.ready));
            self.group_blockers
                .get_or_create(&group)
                .set(gauge(g.verdict.blockers.len()));
        }
    }

    /// Removes every audit gauge series (this replica no longer audits).
    pub fn clear_audit(&self) {
        self.audit_pods.clear();
        self.audit_templates.clear();
        self.group_ready.clear();
        self.group_blockers.clear();
    }

    pub fn audit_scanned(&self, result: ScanResult) {
        self.audit_scans
            .get_or_create(&ResultLabels {
                result: result.as_str(),
            })
            .inc();
    }

    pub fn set_audit_duration(&self, elapsed: Duration) {
        self.audit_duration.set(elapsed.as_secs_f64());
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
        metrics.set_orphaned_groups(&[("old".to_owned(), 3)].into());
        metrics.webhook_reconciled(ReconcileResult::Patched);
        metrics.connections_open().inc();
        metrics.connection_rejected(Rejection::Limit);
        metrics.connection_timed_out(ConnectionTimeout::Idle);
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
            r#"pod_director_orphaned_group_namespaces{group="old"} 3"#,
            r#"pod_director_webhook_reconciles_total{result="patched"} 1"#,
            "pod_director_connections_open 1",
            r#"pod_director_connections_rejected_total{reason="limit"} 1"#,
            r#"pod_director_connection_timeouts_total{timeout="idle"} 1"#,
            "pod_director_log_lines_dropped_total ",
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

    fn conflict(resolution: crate::placement::Resolution) -> crate::placement::Conflict {
        crate::placement::Conflict {
            field: "nodeSelector[\"node-pool\"]".to_owned(),
            pod: "gpu".to_owned(),
            group: "ci".to_owned(),
            resolution,
        }
    }

    #[test]
    fn the_whole_exposition_is_exactly_this() {
        let metrics = Metrics::new();
        let mut denied = outcome(Some("ci"), Some(Mode::DryRun), Decision::WouldDeny);
        denied.no_feasible_node = true;
        denied.conflicts = vec![
            conflict(crate::placement::Resolution::Rejected),
            conflict(crate::placement::Resolution::Rejected),
        ];
        metrics.observe_traced_decision(
            &denied,
            Duration::from_micros(1500),
            Some("4bf92f3577b34da6a3ce929d0e0e4736"),
        );
        metrics.config_reloaded(ReloadResult::Error);
        metrics.tls_reloaded(ReloadResult::Success);
        metrics.set_namespace_cache_size(7);
        metrics.set_orphaned_groups(&[("gone".to_owned(), 2)].into());
        metrics.webhook_reconciled(ReconcileResult::Unchanged);
        metrics.set_node_cache_size(5);
        metrics.node_looked_up(NodeLookupResult::NotFound);
        metrics.set_group_nodes(&[("gone".to_owned(), 9)]);
        // One group: the order of a family's samples is not defined.
        metrics.set_group_nodes(&[("ci".to_owned(), 3)]);
        metrics.connections_open().set(3);
        metrics.connection_rejected(Rejection::ProbeLimit);
        metrics.connection_timed_out(ConnectionTimeout::HeaderRead);
        metrics.audit_scanned(ScanResult::Success);
        metrics.set_audit_duration(Duration::from_millis(1500));
        let expected = EXPOSITION
            .replace("VERSION", env!("CARGO_PKG_VERSION"))
            .replace("DROPPED", &crate::telemetry::log_lines_dropped().get().to_string());
        assert_eq!(metrics.encode(), expected);
    }

    const EXPOSITION: &str = "\
# HELP pod_director_decisions Admission decisions by group, mode, decision and webhook.
# TYPE pod_director_decisions counter
pod_director_decisions_total{group=\"ci\",mode=\"dryRun\",decision=\"would_deny\",webhook=\"mutate\"} 1
# HELP pod_director_conflicts Conflicts between a pod's own placement and its group's, by group, mode, resolution and webhook.
# TYPE pod_director_conflicts counter
pod_director_conflicts_total{group=\"ci\",mode=\"dryRun\",resolution=\"rejected\",webhook=\"mutate\"} 2
# HELP pod_director_admission_duration_seconds Time from request received to response ready, by webhook.
# TYPE pod_director_admission_duration_seconds histogram
# UNIT pod_director_admission_duration_seconds seconds
pod_director_admission_duration_seconds_sum{webhook=\"mutate\"} 0.0015
pod_director_admission_duration_seconds_count{webhook=\"mutate\"} 1
pod_director_admission_duration_seconds_bucket{le=\"0.0005\",webhook=\"mutate\"} 0
pod_director_admission_duration_seconds_bucket{le=\"0.001\",webhook=\"mutate\"} 0
pod_director_admission_duration_seconds_bucket{le=\"0.0025\",webhook=\"mutate\"} 1 # {trace_id=\"4bf92f3577b34da6a3ce929d0e0e4736\"} 0.0015
pod_director_admission_duration_seconds_bucket{le=\"0.005\",webhook=\"mutate\"} 1
pod_director_admission_duration_seconds_bucket{le=\"0.01\",webhook=\"mutate\"} 1
pod_director_admission_duration_seconds_bucket{le=\"0.025\",webhook=\"mutate\"} 1
pod_director_admission_duration_seconds_bucket{le=\"0.05\",webhook=\"mutate\"} 1
pod_director_admission_duration_seconds_bucket{le=\"0.1\",webhook=\"mutate\"} 1
pod_director_admission_duration_seconds_bucket{le=\"0.25\",webhook=\"mutate\"} 1
pod_director_admission_duration_seconds_bucket{le=\"0.5\",webhook=\"mutate\"} 1
pod_director_admission_duration_seconds_bucket{le=\"1.0\",webhook=\"mutate\"} 1
pod_director_admission_duration_seconds_bucket{le=\"2.5\",webhook=\"mutate\"} 1
pod_director_admission_duration_seconds_bucket{le=\"5.0\",webhook=\"mutate\"} 1
pod_director_admission_duration_seconds_bucket{le=\"10.0\",webhook=\"mutate\"} 1
pod_director_admission_duration_seconds_bucket{le=\"+Inf\",webhook=\"mutate\"} 1
# HELP pod_director_config_reloads Configuration reload attempts by result.
# TYPE pod_director_config_reloads counter
pod_director_config_reloads_total{result=\"error\"} 1
# HELP pod_director_tls_reloads TLS certificate reload attempts by result.
# TYPE pod_director_tls_reloads counter
pod_director_tls_reloads_total{result=\"success\"} 1
# HELP pod_director_namespace_cache_size Namespaces held in the namespace cache.
# TYPE pod_director_namespace_cache_size gauge
pod_director_namespace_cache_size 7
# HELP pod_director_orphaned_group_namespaces Namespaces whose group label names a group the configuration does not define, by group.
# TYPE pod_director_orphaned_group_namespaces gauge
pod_director_orphaned_group_namespaces{group=\"gone\"} 2
# HELP pod_director_webhook_reconciles Reconciliations of the webhook configurations' namespaceSelectors with the live configuration, by result.
# TYPE pod_director_webhook_reconciles counter
pod_director_webhook_reconciles_total{result=\"unchanged\"} 1
# HELP pod_director_node_cache_size Nodes held in the Node cache.
# TYPE pod_director_node_cache_size gauge
pod_director_node_cache_size 5
# HELP pod_director_node_lookups Lookups of the node a pod names in spec.nodeName, by result.
# TYPE pod_director_node_lookups counter
pod_director_node_lookups_total{result=\"not_found\"} 1
# HELP pod_director_no_feasible_node Decisions whose placed pod matches no node (placement only: resources not counted), by group, mode and webhook.
# TYPE pod_director_no_feasible_node counter
pod_director_no_feasible_node_total{group=\"ci\",mode=\"dryRun\",webhook=\"mutate\"} 1
# HELP pod_director_group_nodes Nodes that satisfy each group's own placement (nodeSelector, required node affinity, tolerated taints, not cordoned).
# TYPE pod_director_group_nodes gauge
pod_director_group_nodes{group=\"ci\"} 3
# HELP pod_director_connections_open Connections open on the admission port (accepted, not yet closed).
# TYPE pod_director_connections_open gauge
pod_director_connections_open 3
# HELP pod_director_connections_rejected Connections closed at accept, before the TLS handshake, by reason.
# TYPE pod_director_connections_rejected counter
pod_director_connections_rejected_total{reason=\"probe_limit\"} 1
# HELP pod_director_connection_timeouts Connections closed by a connection timer, by timer.
# TYPE pod_director_connection_timeouts counter
pod_director_connection_timeouts_total{timeout=\"header_read\"} 1
# HELP pod_director_audit_scans Continuous audit scans by result.
# TYPE pod_director_audit_scans counter
pod_director_audit_scans_total{result=\"success\"} 1
# HELP pod_director_audit_duration_seconds Duration of the latest continuous audit scan.
# TYPE pod_director_audit_duration_seconds gauge
# UNIT pod_director_audit_duration_seconds seconds
pod_director_audit_duration_seconds 1.5
# HELP pod_director_log_lines_dropped Log lines dropped because standard output did not keep up.
# TYPE pod_director_log_lines_dropped counter
pod_director_log_lines_dropped_total DROPPED
# HELP pod_director_build pod-director build information.
# TYPE pod_director_build info
pod_director_build_info{version=\"VERSION\"} 1
# EOF
";

    #[test]
    fn the_orphaned_group_gauge_follows_the_latest_count() {
        let metrics = Metrics::new();
        metrics.set_orphaned_groups(&[("old".to_owned(), 3), ("older".to_owned(), 1)].into());
        metrics.set_orphaned_groups(&[("old".to_owned(), 2)].into());
        let text = metrics.encode();
        assert!(
            text.contains(r#"pod_director_orphaned_group_namespaces{group="old"} 2"#),
            "{text}"
        );
        assert!(
            !text.contains("older"),
            "a group no namespace selects any more has no series: {text}"
        );
        metrics.set_orphaned_groups(&Default::default());
        assert!(!metrics.encode().contains("pod_director_orphaned_group_namespaces{"));
    }

    fn audited(group: &str, ready: bool) -> crate::audit::Audit {
        crate::audit::Audit {
            groups: vec![crate::audit::GroupAudit {
                group: group.to_owned(),
                mode: Mode::DryRun,
                namespaces: 2,
                pods: crate::audit::Counts {
                    compliant: 4,
                    would_patch: 3,
                    would_deny: 2,
                    skipped: 1,
                },
                templates: crate::audit::Counts {
                    would_deny: 1,
                    ..Default::default()
                },
                feasible_nodes: Some(0),
                would_deny: Default::default(),
                would_patch: Default::default(),
                no_feasible_node: Default::default(),
                verdict: crate::audit::Verdict {
                    ready,
                    blockers: if ready {
                        Vec::new()
                    } else {
                        vec!["a".to_owned(), "b".to_owned()]
                    },
                    warnings: Vec::new(),
                },
            }],
            nodes: Some(3),
            namespaces_scanned: 2,
            pods_scanned: 10,
            templates_scanned: 1,
            elapsed: Duration::from_millis(5),
            warnings: Vec::new(),
        }
    }

    #[test]
    fn the_audit_gauges_follow_the_latest_scan_and_disappear_when_cleared() {
        let metrics = Metrics::new();
        metrics.set_audit(&audited("old", true));
        metrics.set_audit(&audited("ci", false));
        let text = metrics.encode();
        for expected in [
            r#"pod_director_audit_pods{group="ci",decision="compliant"} 4"#,
            r#"pod_director_audit_pods{group="ci",decision="would_patch"} 3"#,
            r#"pod_director_audit_pods{group="ci",decision="would_deny"} 2"#,
            r#"pod_director_audit_pods{group="ci",decision="skipped"} 1"#,
            r#"pod_director_audit_templates{group="ci",decision="would_deny"} 1"#,
            r#"pod_director_group_ready{group="ci"} 0"#,
            r#"pod_director_group_blockers{group="ci"} 2"#,
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
        assert!(
            !text.contains(r#"group="old""#),
            "a group the latest scan did not audit has no series: {text}"
        );
        metrics.clear_audit();
        let text = metrics.encode();
        for family in [
            "pod_director_audit_pods{",
            "pod_director_group_ready{",
            "pod_director_group_blockers{",
        ] {
            assert!(!text.contains(family), "cleared: {text}");
        }
    }

    #[test]
    fn a_decision_without_an_exported_span_has_no_exemplar() {
        let metrics = Metrics::new();
        metrics.observe_decision(&outcome(None, None, Decision::Skipped), Duration::from_micros(200));
        let text = metrics.encode();
        assert!(!text.contains(" # {"), "{text}");
        assert!(
            !text.contains("pod_director_conflicts_total{"),
            "no conflict, no sample: {text}"
        );
    }

    fn config(yaml: &str) -> Config {
        Config::from_yaml(yaml, "test", Vec::new())
            .unwrap_or_else(|e| panic!("a valid test config: {e}"))
            .config
    }

    const TWO_GROUPS: &str = "namespaceLabel: pod-director/group
groups:
  ci: {mode: enforce, onConflict: override, nodeSelector: {pool: ci}}
  web: {nodeSelector: {pool: web}}
";

    #[test]
    fn every_series_a_group_can_produce_exists_at_zero_before_its_first_event() {
        let metrics = Metrics::new();
        metrics.initialise(&config(TWO_GROUPS));
        let text = metrics.encode();
        for sample in [
            r#"pod_director_decisions_total{group="ci",mode="enforce",decision="patched",webhook="mutate"} 0"#,
            r#"pod_director_decisions_total{group="ci",mode="enforce",decision="denied",webhook="validate"} 0"#,
            r#"pod_director_decisions_total{group="web",mode="dryRun",decision="would_patch",webhook="mutate"} 0"#,
            r#"pod_director_decisions_total{group="web",mode="dryRun",decision="noop",webhook="mutate"} 0"#,
            r#"pod_director_decisions_total{group="",mode="",decision="skipped",webhook="mutate"} 0"#,
            r#"pod_director_decisions_total{group="",mode="",decision="error",webhook="validate"} 0"#,
            r#"pod_director_decisions_total{group="web",mode="dryRun",decision="would_deny",webhook="validate-namespace"} 0"#,
            r#"pod_director_conflicts_total{group="ci",mode="enforce",resolution="overridden",webhook="mutate"} 0"#,
            r#"pod_director_conflicts_total{group="web",mode="dryRun",resolution="rejected",webhook="mutate"} 0"#,
            r#"pod_director_no_feasible_node_total{group="web",mode="dryRun",webhook="mutate"} 0"#,
            r#"pod_director_admission_duration_seconds_count{webhook="validate-namespace"} 0"#,
            r#"pod_director_config_reloads_total{result="error"} 0"#,
            r#"pod_director_tls_reloads_total{result="error"} 0"#,
            r#"pod_director_webhook_reconciles_total{result="error"} 0"#,
        ] {
            assert!(text.contains(sample), "missing {sample} in\n{text}");
        }
        for absent in [
            r#"group="web",mode="dryRun",decision="patched""#,
            r#"group="ci",mode="enforce",decision="would_patch""#,
            r#"group="ci",mode="enforce",resolution="rejected""#,
        ] {
            assert!(!text.contains(absent), "a series its mode never produces: {absent}");
        }
    }

    #[test]
    fn a_group_flipped_to_enforce_gets_its_enforce_series_and_keeps_its_counts() {
        let metrics = Metrics::new();
        metrics.initialise(&config(TWO_GROUPS));
        metrics.observe_decision(
            &outcome(Some("web"), Some(Mode::DryRun), Decision::WouldPatch),
            Duration::ZERO,
        );
        metrics.initialise(&config(&TWO_GROUPS.replace("web: {", "web: {mode: enforce, ")));
        let text = metrics.encode();
        assert!(
            text.contains(r#"{group="web",mode="enforce",decision="patched",webhook="mutate"} 0"#),
            "{text}"
        );
        assert!(
            text.contains(r#"{group="web",mode="dryRun",decision="would_patch",webhook="mutate"} 1"#),
            "{text}"
        );
    }

    #[test]
    fn unknown_groups_that_namespaces_select_are_counted_from_zero() {
        let metrics = Metrics::new();
        metrics.initialise_unknown_groups(["gone"]);
        let text = metrics.encode();
        for webhook in ["mutate", "validate"] {
            let sample = format!(
                r#"pod_director_decisions_total{{group="gone",mode="",decision="unknown_group",webhook="{webhook}"}} 0"#
            );
            assert!(text.contains(&sample), "missing {sample} in\n{text}");
        }
        let sample = r#"pod_director_no_feasible_node_total{group="gone",mode="",webhook="mutate"} 0"#;
        assert!(text.contains(sample), "missing {sample} in\n{text}");
    }
}
