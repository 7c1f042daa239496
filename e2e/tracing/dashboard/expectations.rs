//! The table: what each query of each dashboard panel must show after the rollout
//! ([`EXPECTATIONS`]), one check per query.

use super::*;

/// What one query must show: wanted series from the rollout for a `$group` selection.
pub(super) type Want = fn(&Observed, &Selection) -> Series;

/// One query's check.
#[derive(Clone, Copy)]
pub(crate) enum Check {
    /// A stat panel: one series without labels whose value, rounded to the panel's
    /// decimals (0 here: the stats count pods), is the wanted total.
    Total(Want),
    /// Series by these labels at the end of the range: each wanted key with its value
    /// (rounded like [`Check::Total`]); any other series is 0.
    AtEnd(&'static [&'static str], Want),
    /// Time series by these labels over the range: exactly the wanted non-zero keys
    /// have a non-zero point; every other series stays 0.
    Active(&'static [&'static str], Want),
    /// Latency quantiles by these labels: a finite value at some point for exactly
    /// the wanted keys (the webhooks called).
    Quantiles(&'static [&'static str], Want),
    /// A gauge by these labels at the end of the range: exactly the wanted values.
    Gauge(&'static [&'static str], Want),
    /// Not Prometheus (Tempo, Loki): not evaluated here; names checked by
    /// `tests/observability_names.rs`. The text says what it is.
    NotPrometheus(&'static str),
}

impl Check {
    /// The labels a check keys its series by (none for a stat).
    pub(super) fn labels(&self) -> &'static [&'static str] {
        match self {
            Check::AtEnd(by, _) | Check::Active(by, _) | Check::Quantiles(by, _) | Check::Gauge(by, _) => by,
            Check::Total(_) | Check::NotPrometheus(_) => &[],
        }
    }
}

/// The expectations of one panel: one check per query, in `refId` order (A, B, …).
pub(crate) struct Expectation {
    pub dashboard: &'static str,
    pub panel: &'static str,
    pub checks: &'static [Check],
}

impl Expectation {
    /// The check of query `ref_id`.
    pub(super) fn check(&self, ref_id: &str) -> Option<&Check> {
        REF_IDS
            .iter()
            .position(|r| *r == ref_id)
            .and_then(|i| self.checks.get(i))
    }
}

/// Grafana's refIds, in the order it gives them to a panel's queries.
pub(super) const REF_IDS: [&str; 4] = ["A", "B", "C", "D"];

pub(super) const ROLLOUT: &str = "pod-director-rollout";
const TEMPO: Check = Check::NotPrometheus("Tempo (TraceQL)");
const LATENCY: Check = Check::Quantiles(&["webhook"], |o, _| o.decisions(&["webhook"], |_| true));

/// The rollout dashboard's panel titled `panel`, a check per query.
const fn rollout(panel: &'static str, checks: &'static [Check]) -> Expectation {
    Expectation {
        dashboard: ROLLOUT,
        panel,
        checks,
    }
}

/// Every panel of every dashboard (rows excepted). Add a panel, add its line here.
pub(crate) const EXPECTATIONS: &[Expectation] = &[
    rollout(
        "Would patch",
        &[Check::Total(|o, s| mutated(o, s, &[], &["would_patch"]))],
    ),
    rollout(
        "Would deny",
        &[Check::Total(|o, s| mutated(o, s, &[], &["would_deny"]))],
    ),
    rollout("Patched", &[Check::Total(|o, s| mutated(o, s, &[], &["patched"]))]),
    // Every webhook's denials (the query has no webhook matcher).
    rollout(
        "Denied",
        &[Check::Total(|o, s| {
            o.decisions(&[], |l| is(l, "placement.decision", &["denied"]) && in_group(l, s))
        })],
    ),
    rollout(
        "Unknown groups",
        &[Check::Total(|o, _| {
            o.decisions(&[], |l| is(l, "placement.decision", &["unknown_group"]))
        })],
    ),
    rollout(
        "Errors",
        &[Check::Total(|o, _| {
            o.decisions(&[], |l| is(l, "placement.decision", &["error"]))
        })],
    ),
    rollout(
        "Decisions per group (mutate webhook, time range)",
        &[Check::AtEnd(&["group", "mode", "decision"], |o, s| {
            mutated(o, s, &["group", "mode", "decision"], &[])
        })],
    ),
    rollout(
        "Would patch, by group",
        &[Check::AtEnd(&["group"], |o, s| {
            mutated(o, s, &["group"], &["would_patch"])
        })],
    ),
    rollout(
        "Would deny, by group",
        &[Check::AtEnd(&["group"], |o, s| {
            mutated(o, s, &["group"], &["would_deny"])
        })],
    ),
    rollout(
        "Decisions per second, by group and decision (mutate)",
        &[Check::Active(&["group", "decision"], |o, s| {
            mutated(o, s, &["group", "decision"], &[])
        })],
    ),
    rollout(
        "Skipped and noop, by group (mutate)",
        &[Check::Active(&["group", "decision"], |o, s| {
            mutated(o, s, &["group", "decision"], &["skipped", "noop"])
        })],
    ),
    rollout(
        "Readiness verdict",
        &[Check::Gauge(&["group"], |o, s| {
            group_gauge(o, s, "pod_director_group_ready")
        })],
    ),
    rollout(
        "Blockers, by group",
        &[Check::Gauge(&["group"], |o, s| {
            group_gauge(o, s, "pod_director_group_blockers")
        })],
    ),
    rollout(
        "Running pods enforce would change / refuse",
        &[Check::Gauge(&["group", "decision"], |o, s| {
            o.gauge("pod_director_audit_pods", &["group", "decision"], |x| {
                s.admits(&x.labels["group"]) && ["would_patch", "would_deny"].contains(&x.labels["decision"].as_str())
            })
        })],
    ),
    rollout(
        "Nodes available to each group, and provisioners that can create them",
        &[
            Check::Gauge(&["group"], |o, s| group_gauge(o, s, "pod_director_group_nodes")),
            Check::Gauge(&["group"], |o, s| group_gauge(o, s, "pod_director_group_provisioners")),
        ],
    ),
    rollout(
        "Placed pods matching no node, by group and mode (time range)",
        &[Check::AtEnd(&["group", "mode"], |o, s| {
            o.decisions(&["group", "mode"], |l| {
                mutate(l) && l["placement.no_feasible_node"] == true && in_group(l, s)
            })
        })],
    ),
    rollout("Recent decisions whose placed pod matches no node (traces)", &[TEMPO]),
    // Every webhook's conflicts (the query has no webhook matcher).
    rollout(
        "Conflicts by group and resolution (time range)",
        &[Check::AtEnd(&["group", "resolution"], |o, s| {
            o.conflicts(&["group", "resolution"], |l| in_group(l, s))
        })],
    ),
    rollout("Recent conflicts (traces)", &[TEMPO]),
    rollout("Recent would-be patches", &[TEMPO]),
    rollout("Recent would-be and actual denials", &[TEMPO]),
    rollout("Admission latency p50 / p99", &[LATENCY, LATENCY]),
    rollout(
        "Errors and unknown groups per second",
        &[Check::Active(&["webhook", "decision", "group"], |o, _| {
            o.decisions(&["webhook", "decision", "group"], |l| {
                is(l, "placement.decision", &["error", "unknown_group"])
            })
        })],
    ),
    rollout(
        "Config reload failures",
        &[Check::Total(|o, _| failures(o, "pod_director_config_reloads_total"))],
    ),
    rollout(
        "TLS reload failures",
        &[Check::Total(|o, _| failures(o, "pod_director_tls_reloads_total"))],
    ),
    rollout(
        "Config and TLS reloads",
        &[
            Check::Active(&["result"], |o, _| {
                o.increase("pod_director_config_reloads_total", &["result"])
            }),
            Check::Active(&["result"], |o, _| {
                o.increase("pod_director_tls_reloads_total", &["result"])
            }),
        ],
    ),
    rollout(
        "Namespace and Node cache size",
        &[
            Check::Gauge(&["pod"], |o, _| pod_gauge(o, "pod_director_namespace_cache_size")),
            Check::Gauge(&["pod"], |o, _| pod_gauge(o, "pod_director_node_cache_size")),
        ],
    ),
    rollout(
        "Versions running",
        &[Check::AtEnd(&["version"], |_, _| {
            Series::from([(vec![env!("CARGO_PKG_VERSION").to_owned()], 1.0)])
        })],
    ),
    rollout(
        "Validate webhook decisions, by group",
        &[Check::Active(&["group", "decision"], |o, s| {
            o.decisions(&["group", "decision"], |l| {
                is(l, "webhook", &["validate"]) && in_group(l, s)
            })
        })],
    ),
    rollout(
        "Namespaces selecting an undefined group",
        &[Check::Gauge(&["group"], |o, _| {
            o.gauge("pod_director_orphaned_group_namespaces", &["group"], |_| true)
        })],
    ),
    rollout(
        "Webhook reconcile failures",
        &[Check::Total(|o, _| {
            failures(o, "pod_director_webhook_reconciles_total")
        })],
    ),
    rollout(
        "Webhook reconciles",
        &[Check::Active(&["result"], |o, _| {
            o.increase("pod_director_webhook_reconciles_total", &["result"])
        })],
    ),
    rollout("Decision log lines", &[Check::NotPrometheus("Loki (LogQL)")]),
    rollout(
        "Intruders now, by reservation (continuous audit)",
        &[Check::Gauge(&["group", "state"], |o, s| {
            o.gauge("pod_director_reservation_intruders", &["group", "state"], |x| {
                s.admits(&x.labels["group"])
            })
        })],
    ),
    rollout(
        "Group label changes refused or that would be (by decision and guard mode)",
        &[Check::Active(&["decision", "mode"], |o, _| {
            o.decisions(&["decision", "mode"], |l| {
                is(l, "webhook", &["validate-namespace"]) && is(l, "placement.decision", &["would_deny", "denied"])
            })
        })],
    ),
];

/// The mutate webhook's decisions of the selected groups, by `by`: those in
/// `decisions`, or every one when it is empty.
fn mutated(o: &Observed, s: &Selection, by: &[&str], decisions: &[&str]) -> Series {
    o.decisions(by, |l| {
        mutate(l) && (decisions.is_empty() || is(l, "placement.decision", decisions)) && in_group(l, s)
    })
}

/// A gauge by `group`, of the selected groups.
fn group_gauge(o: &Observed, s: &Selection, name: &str) -> Series {
    o.gauge(name, &["group"], |x| s.admits(&x.labels["group"]))
}

/// The increase of counter `name`'s `result="error"` series, as one total.
fn failures(o: &Observed, name: &str) -> Series {
    let by = o.increase(name, &["result"]);
    Series::from([(vec![], by.get(&vec!["error".to_owned()]).copied().unwrap_or_default())])
}

/// A gauge without labels of its own, keyed by the `pod` label the scrape adds.
fn pod_gauge(o: &Observed, name: &str) -> Series {
    o.gauge(name, &[], |_| true)
        .into_values()
        .map(|v| (vec![crate::POD_LABEL.to_owned()], v))
        .collect()
}
