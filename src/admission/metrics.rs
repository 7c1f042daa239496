//! The admission path's metrics: decisions, conflicts, latency (with `trace_id` exemplars),
//! placed pods that match no node.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::exemplar::HistogramWithExemplars;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::{Registry, Unit};

use crate::metrics::{label_set, register};
use pod_director_engine::config::{Config, Mode, OnConflict};
use pod_director_engine::placement::{Decision, Outcome, Resolution, Webhook};

/// Admission latency buckets, in seconds: 0.5 ms … 10 s.
const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

label_set! {
    DecisionLabels { group: String, mode: &'static str, decision: &'static str, webhook: &'static str }
    ConflictLabels { group: String, mode: &'static str, resolution: &'static str, webhook: &'static str }
    GroupModeLabels { group: String, mode: &'static str, webhook: &'static str }
    WebhookLabels { webhook: &'static str }
    ReservationLabels { group: String, decision: &'static str }
    AlternativeLabels { group: String, alternative: String, decision: &'static str, webhook: &'static str }
    /// The exemplar of a latency observation: the decision span's trace.
    TraceLabels { trace_id: String }
}

type LatencyHistogram = HistogramWithExemplars<TraceLabels>;

/// `pod_director_reservation_decisions_total{decision}` of an intruder whose requester is exempt.
const EXEMPT: &str = "exempt";

/// `pod_director_decisions_total`, `pod_director_conflicts_total`,
/// `pod_director_admission_duration_seconds`, `pod_director_no_feasible_node_total`,
/// `pod_director_reservation_decisions_total`, `pod_director_alternative_decisions_total`,
/// `pod_director_shadow_disagreements_total`.
#[derive(Debug, Clone)]
pub struct AdmissionMetrics {
    decisions: Family<DecisionLabels, Counter>,
    conflicts: Family<ConflictLabels, Counter>,
    latency: Family<WebhookLabels, LatencyHistogram, fn() -> LatencyHistogram>,
    no_feasible_node: Family<GroupModeLabels, Counter>,
    reservations: Family<ReservationLabels, Counter>,
    alternatives: Family<AlternativeLabels, Counter>,
    shadow_disagreements: Family<GroupModeLabels, Counter>,
}

impl AdmissionMetrics {
    pub fn register(r: &mut Registry) -> Self {
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
        let no_feasible_node = register(
            r,
            "no_feasible_node",
            "Decisions whose placed pod matches no node (placement only: resources not counted), by group, mode and webhook",
            Family::default(),
        );
        let reservations = register(
            r,
            "reservation_decisions",
            "Intruders of a group's reserved nodes, by reserving group and decision (denied, would_deny, exempt)",
            Family::default(),
        );
        let alternatives = register(
            r,
            "alternative_decisions",
            "Decisions of groups that offer alternatives, by group, chosen placement (an alternative's name or default), decision and webhook",
            Family::default(),
        );
        let shadow_disagreements = register(
            r,
            "shadow_disagreements",
            "Pod CREATEs of dryRun and warn groups that /validate (the shadowValidation sample) would refuse while /mutate's decision of the same pod admits them, by group, mode and webhook",
            Family::default(),
        );
        Self {
            decisions,
            conflicts,
            latency,
            no_feasible_node,
            reservations,
            alternatives,
            shadow_disagreements,
        }
    }

    /// Exports at 0 every series that `config` can produce and that no event has
    /// created yet: each group's decisions at its current mode (mutate and validate),
    /// its conflicts at its `onConflict` resolution, its placed pods matching no node,
    /// the namespace guard's decisions for its label value, the decisions without a
    /// group (skipped, error) and the latency histograms. Called at start and after each
    /// reload (a group flipped to enforce gets its enforce series); counters are never reset.
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
        let guard_denial = |mode: Mode| {
            if mode == Mode::Enforce {
                Decision::Denied
            } else {
                Decision::WouldDeny
            }
        };
        let guard = pod_director_engine::namespace_guard::mode_of_group(config, None);
        decisions("", guard.as_str(), Webhook::ValidateNamespace, &[Decision::Noop]);
        if let Some(section) = &config.in_tree_plugins {
            let mode = section.mode;
            let of_mode = match mode {
                Mode::Enforce => [Decision::Patched, Decision::Denied, Decision::Noop, Decision::Skipped],
                _ => [
                    Decision::WouldPatch,
                    Decision::WouldDeny,
                    Decision::Noop,
                    Decision::Skipped,
                ],
            };
            for webhook in [Webhook::MutateInTree, Webhook::ValidateInTree] {
                decisions("", mode.as_str(), webhook, &of_mode);
            }
        }
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
            let guard = pod_director_engine::namespace_guard::mode_of_group(config, Some(name));
            decisions(
                name,
                guard.as_str(),
                Webhook::ValidateNamespace,
                &[Decision::Noop, guard_denial(guard)],
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
            if mode != Mode::Enforce {
                let _ = self.shadow_disagreements.get_or_create(&GroupModeLabels {
                    group: name.clone(),
                    mode: mode.as_str(),
                    webhook: Webhook::Validate.as_str(),
                });
            }
            for alternative in group.placement_names().filter(|_| !group.alternatives.is_empty()) {
                let _ = self.alternatives.get_or_create(&AlternativeLabels {
                    group: name.clone(),
                    alternative: alternative.to_owned(),
                    decision: of_mode[0].as_str(),
                    webhook: Webhook::Mutate.as_str(),
                });
            }
        }
        for reservation in pod_director_engine::placement::reservation::reservations(config) {
            decisions(
                reservation.name,
                reservation.reserve.mode.as_str(),
                Webhook::ValidateReservation,
                &[guard_denial(reservation.reserve.mode)],
            );
            for decision in [guard_denial(reservation.reserve.mode).as_str(), EXEMPT] {
                let _ = self.reservations.get_or_create(&ReservationLabels {
                    group: reservation.name.to_owned(),
                    decision,
                });
            }
        }
        for webhook in Webhook::ALL {
            let _ = self.latency.get_or_create(&WebhookLabels {
                webhook: webhook.as_str(),
            });
        }
    }

    /// Exports at 0 the `unknown_group` decisions of group label values that namespaces
    /// select but the config does not define (the orphaned groups), so that the first pod
    /// of such a namespace is counted too (see [`AdmissionMetrics::initialise`]).
    /// At most [`crate::cluster::orphans::MAX_SERIES`] groups, as the orphaned-group gauge.
    pub fn initialise_unknown_groups<'a>(&self, groups: impl IntoIterator<Item = &'a str>) {
        for group in groups.into_iter().take(crate::cluster::orphans::MAX_SERIES) {
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

    /// Counts a `/validate` refusal that `/mutate`'s decision of the same pod did not predict
    /// ([`pod_director_engine::decision::Decidable::shadow_disagrees`]).
    pub(crate) fn shadow_disagreement(&self, outcome: &Outcome) {
        self.shadow_disagreements
            .get_or_create(&GroupModeLabels {
                group: outcome.group.clone().unwrap_or_default(),
                mode: outcome.mode.map(Mode::as_str).unwrap_or_default(),
                webhook: outcome.webhook.as_str(),
            })
            .inc();
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
        if let Some(alternative) = &outcome.alternative {
            // Bounded: the engine names only the group's own alternatives and `default`.
            self.alternatives
                .get_or_create(&AlternativeLabels {
                    group: group.to_owned(),
                    alternative: alternative.clone(),
                    decision: outcome.decision.as_str(),
                    webhook,
                })
                .inc();
        }
        for intrusion in &outcome.reservation {
            let decision = match (intrusion.exempt, intrusion.mode) {
                (Some(_), _) => EXEMPT,
                (None, Mode::Enforce) => Decision::Denied.as_str(),
                (None, _) => Decision::WouldDeny.as_str(),
            };
            self.reservations
                .get_or_create(&ReservationLabels {
                    group: intrusion.group.clone(),
                    decision,
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
}
