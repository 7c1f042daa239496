//! Kubernetes Events (events.k8s.io/v1) on a workload when its audit verdict **changes** — never
//! one per admission (the floods of kyverno#3185 and #10020): the continuous audit compares each
//! workload's verdict with the previous scan's and publishes one Event per change, through
//! kube-rs's [`Recorder`] (which folds a repeated event into a series), at most
//! [`MAX_EVENTS_PER_SCAN`] per scan (the others are counted in one log line; they are in the
//! reports). The first scan after start only sets the baseline: a restart publishes nothing.
//!
//! | new verdict | type | reason |
//! |---|---|---|
//! | would_deny (placement) | Warning | `WouldBeDenied` |
//! | would_patch | Normal | `WouldBePatched` |
//! | fits no node once placed | Warning | `NoFeasibleNode` |
//! | intrudes on a reservation | Warning | `IntrudesOnReservation` |
//! | runs on a reserved pool | Warning | `RunsOnReservedPool` |
//! | the in-tree rule would refuse / patch the workload's pods | Warning / Normal | `WouldBeDenied` / `WouldBePatched` |
//! | a namespace's in-tree annotations are no longer enforced (on the Namespace, in it) | Warning | `InTreeAnnotationsNotEnforced` |
//! | compliant (after something else; for a namespace: enforced again) | Normal | `Compliant` |
//!
//! The note is the verdict's one-line plan or reason, prefixed with the group and its mode.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tracing::{info, warn};

use pod_director_engine::audit::workloads::{Ledger, Rule, WorkloadVerdict};

/// Most Events published per scan.
pub(crate) const MAX_EVENTS_PER_SCAN: usize = 20;
/// The `action` of every Event.
const ACTION: &str = "Audit";
/// Longest note (the API server refuses more than 1 kB).
const MAX_NOTE_BYTES: usize = 1000;

/// A workload under one (policy, rule): namespace, `Kind/name`, policy, rule.
type EventKey = (String, String, String, Rule);

/// One verdict change to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    pub namespace: String,
    /// `Kind/name`.
    pub workload: String,
    pub type_: EventType,
    pub reason: &'static str,
    pub note: String,
}

/// The verdicts of the previous scan; `None` before the first.
#[derive(Debug, Default)]
pub(crate) struct Baseline {
    previous: Option<BTreeMap<EventKey, WorkloadVerdict>>,
}

fn reason(rule: Rule, verdict: WorkloadVerdict) -> Option<(EventType, &'static str)> {
    Some(match (rule, verdict) {
        (_, WorkloadVerdict::Skipped) | (Rule::NamespaceGuard, _) => return None,
        (Rule::Reservation, WorkloadVerdict::WouldDeny) => (EventType::Warning, "IntrudesOnReservation"),
        (_, WorkloadVerdict::RunsOnPool) => (EventType::Warning, "RunsOnReservedPool"),
        (_, WorkloadVerdict::NoFeasibleNode) => (EventType::Warning, "NoFeasibleNode"),
        (_, WorkloadVerdict::WouldDeny) => (EventType::Warning, "WouldBeDenied"),
        (_, WorkloadVerdict::Unenforced) => (EventType::Warning, "InTreeAnnotationsNotEnforced"),
        (_, WorkloadVerdict::WouldPatch) => (EventType::Normal, "WouldBePatched"),
        (_, WorkloadVerdict::Compliant) => (EventType::Normal, "Compliant"),
    })
}

impl Baseline {
    /// The changes since the previous scan (none at the first), and the new baseline.
    pub(crate) fn changes(&mut self, ledger: &Ledger) -> Vec<Change> {
        let current: BTreeMap<EventKey, (WorkloadVerdict, String, String)> = ledger
            .namespaces
            .iter()
            .filter(|(_, ns)| ns.reported())
            .flat_map(|(namespace, ns)| {
                ns.entries.iter().map(move |((workload, policy, rule), o)| {
                    let note = format!("{} ({}): {}", o.policy, o.mode.as_str(), o.message);
                    (
                        (namespace.clone(), workload.clone(), policy.clone(), *rule),
                        (o.verdict, note, o.message.to_string()),
                    )
                })
            })
            .collect();
        let previous = self
            .previous
            .replace(current.iter().map(|(k, (v, _, _))| (k.clone(), *v)).collect());
        let Some(previous) = previous else {
            return Vec::new();
        };
        current
            .into_iter()
            .filter_map(|(key, (verdict, note, _))| {
                let before = previous.get(&key).copied();
                // A new workload that is compliant is no news; any other new verdict is.
                let news = match before {
                    Some(before) => before != verdict,
                    None => verdict != WorkloadVerdict::Compliant,
                };
                if !news {
                    return None;
                }
                let (type_, reason) = reason(key.3, verdict)?;
                Some(Change {
                    namespace: key.0,
                    workload: key.1,
                    type_,
                    reason,
                    note: pod_director_engine::placement::truncate_bytes(&note, MAX_NOTE_BYTES),
                })
            })
            .collect()
    }
}

/// The object an Event is about: the workload (`Kind/name`) in its namespace.
pub(crate) fn regarding(namespace: &str, workload: &str) -> ObjectReference {
    let (kind, name) = workload.split_once('/').unwrap_or(("Pod", workload));
    let api_version = match kind {
        "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet" => "apps/v1",
        "Job" | "CronJob" => "batch/v1",
        _ => "v1",
    };
    ObjectReference {
        api_version: Some(api_version.to_owned()),
        kind: Some(kind.to_owned()),
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        ..ObjectReference::default()
    }
}

/// Publishes the Events of one scan's changes (bounded); returns how many were published.
pub(crate) async fn publish(recorder: &Recorder, changes: &[Change]) -> usize {
    let mut published = 0;
    let mut failed: Option<String> = None;
    for change in changes.iter().take(MAX_EVENTS_PER_SCAN) {
        let event = Event {
            type_: change.type_,
            reason: change.reason.to_owned(),
            note: Some(change.note.clone()),
            action: ACTION.to_owned(),
            secondary: None,
        };
        let reference = regarding(&change.namespace, &change.workload);
        match tokio::time::timeout(std::time::Duration::from_secs(10), recorder.publish(&event, &reference)).await {
            Ok(Ok(())) => published += 1,
            Ok(Err(err)) => {
                failed.get_or_insert(err.to_string());
            }
            Err(_) => {
                failed.get_or_insert("no answer within 10s".to_owned());
            }
        }
    }
    if let Some(error) = failed {
        warn!(
            error = error.as_str(),
            events.published = published as u64,
            "events: cannot publish the audit's Events (events.k8s.io create/patch)"
        );
    }
    let left = changes.len().saturating_sub(MAX_EVENTS_PER_SCAN);
    if left > 0 {
        info!(
            events.published = published as u64,
            events.left_out = left as u64,
            "events: more verdict changes than Events per scan; the rest are in the reports"
        );
    }
    published
}

/// A recorder reporting as `controller` (the chart's full name), instance this replica.
pub(crate) fn recorder(client: Client, controller: &str) -> Recorder {
    Recorder::new(
        client,
        Reporter {
            controller: controller.to_owned(),
            instance: std::env::var("POD_NAME").ok(),
        },
    )
}

#[cfg(test)]
mod tests;
