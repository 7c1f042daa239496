use std::sync::Arc;

use super::*;
use crate::config::Config;
use crate::placement::NodeInfo;
use crate::placement::reservation::Exemption;

fn config() -> Config {
    serde_json::from_value(serde_json::json!({
            "groups": {"ci": {"nodeSelector": {"pool": "ci"},
                              "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ci", "effect": "NoSchedule"}],
                              "reserve": {"mode": "dryRun"}},
                       "web": {}}
        }))
        .expect("config")
}

fn intruded(exempt: Option<Exemption>) -> Outcome {
    let mut out = Outcome::new(crate::placement::Webhook::ValidateReservation, Decision::WouldDeny);
    out.reservation = vec![Intrusion {
        group: "ci".to_owned(),
        mode: Mode::DryRun,
        via: Via::Toleration {
            toleration: "* exists".to_owned(),
            taint: "dedicated=ci:NoSchedule".to_owned(),
        },
        exempt,
        pool_nodes: None,
    }];
    out
}

fn nodes() -> Vec<Arc<NodeInfo>> {
    vec![
        Arc::new(crate::testing::node(
            "ci-1",
            &[("pool", "ci")],
            &[("dedicated", "ci", "NoSchedule")],
            false,
        )),
        Arc::new(crate::testing::node("w-1", &[("pool", "web")], &[], false)),
    ]
}

#[test]
fn an_intruder_running_on_a_pool_node_blocks_and_is_listed_with_its_node_and_toleration() {
    let config = config();
    let nodes = nodes();
    let mut audits = vec![ReservationAudit::new("ci".to_owned(), Mode::DryRun)];
    let outcome = intruded(None);
    let view: &dyn NodeView = &nodes;
    record(
        &mut audits,
        None,
        &config,
        "batch",
        "Pod/x",
        (Source::Pods, true),
        "x",
        Some(("ci-1", view)),
        &outcome,
    );
    let audit = &mut audits[0];
    audit.verdict = verdict(audit);
    assert!(!audit.verdict.ready, "{:?}", audit.verdict);
    let running: Vec<_> = audit.running.iter().collect();
    assert_eq!(running.len(), 1);
    assert!(running[0].nodes.contains("ci-1"));
    assert!(running[0].reason.contains("* exists"), "{}", running[0].reason);
}

#[test]
fn an_exempt_intruder_is_counted_not_blocking_and_the_group_s_own_pods_are_no_intruders() {
    let config = config();
    let nodes = nodes();
    let view: &dyn NodeView = &nodes;
    let mut audits = vec![ReservationAudit::new("ci".to_owned(), Mode::DryRun)];
    record(
        &mut audits,
        None,
        &config,
        "kube-agents",
        "DaemonSet/agent",
        (Source::Template, true),
        "agent",
        None,
        &intruded(Some(Exemption::DaemonSetPod)),
    );
    record(
        &mut audits,
        Some("ci"),
        &config,
        "ci-runners",
        "Pod/r",
        (Source::Pods, true),
        "r",
        Some(("ci-1", view)),
        &intruded(None),
    );
    let audit = &mut audits[0];
    audit.verdict = verdict(audit);
    assert_eq!(audit.exempt, 1);
    assert!(audit.verdict.ready, "{:?}", audit.verdict);
    assert!(audit.running.is_empty());
}

#[test]
fn a_bare_pod_whose_creator_may_be_allowed_is_requester_unknown_not_a_blocker() {
    let nodes = nodes();
    let view: &dyn NodeView = &nodes;
    let bare = |audits: &mut Vec<ReservationAudit>, config: &Config, known: bool| {
        record(
            audits,
            None,
            config,
            "batch",
            "Pod/b",
            (Source::Pods, known),
            "b",
            Some(("w-1", view)),
            &intruded(None),
        );
    };
    // No requester is allowed: whoever created it, its re-creation is refused: a blocker.
    let mut audits = vec![ReservationAudit::new("ci".to_owned(), Mode::DryRun)];
    bare(&mut audits, &config(), false);
    let audit = &mut audits[0];
    audit.verdict = verdict(audit);
    assert!(!audit.verdict.ready, "{:?}", audit.verdict);
    assert!(audit.requester_unknown.is_empty());
    // A requester is allowed: the bare pod's creator decides, and the audit cannot know it.
    let mut allowing = config();
    if let Some(reserve) = allowing.groups.get_mut("ci").and_then(|g| g.reserve.as_mut()) {
        reserve.allow.service_accounts = vec!["ops/runner".to_owned()];
    }
    let mut audits = vec![ReservationAudit::new("ci".to_owned(), Mode::DryRun)];
    bare(&mut audits, &allowing, false);
    let audit = &mut audits[0];
    audit.verdict = verdict(audit);
    assert!(audit.verdict.ready, "not a blocker: {:?}", audit.verdict);
    assert!(audit.would_deny.is_empty());
    assert_eq!(audit.requester_unknown.iter().count(), 1);
    assert_eq!(audit.verdict.warnings.len(), 1, "{:?}", audit.verdict);
    assert!(
        audit.verdict.warnings[0].contains("who created them is not recorded"),
        "{:?}",
        audit.verdict
    );
    // A pod whose requester is known (a controller's) is refused as before.
    let mut audits = vec![ReservationAudit::new("ci".to_owned(), Mode::DryRun)];
    bare(&mut audits, &allowing, true);
    assert_eq!(audits[0].would_deny.iter().count(), 1);
}

#[test]
fn a_node_s_mirror_pod_on_a_pool_node_is_no_running_intruder() {
    let config = config();
    let nodes = nodes();
    let view: &dyn NodeView = &nodes;
    let mut audits = vec![ReservationAudit::new("ci".to_owned(), Mode::DryRun)];
    let mut mirror = Outcome::new(crate::placement::Webhook::ValidateReservation, Decision::Skipped);
    mirror.skip_reason = Some(SkipReason::MirrorPod);
    record(
        &mut audits,
        None,
        &config,
        "kube-agents",
        "Pod/etcd-ci-1",
        (Source::Pods, true),
        "etcd-ci-1",
        Some(("ci-1", view)),
        &mirror,
    );
    let audit = &mut audits[0];
    audit.verdict = verdict(audit);
    assert!(audit.running.is_empty(), "{:?}", audit.running);
    assert!(audit.verdict.warnings.is_empty(), "{:?}", audit.verdict);
    assert!(its_nodes_own(&mirror));
    let other = Outcome::new(crate::placement::Webhook::ValidateReservation, Decision::Skipped);
    assert!(!its_nodes_own(&other), "other skips are no node's own");
}

#[test]
fn a_pod_bound_to_a_pool_node_without_a_reserved_toleration_is_listed_as_running() {
    let config = config();
    let nodes = nodes();
    let view: &dyn NodeView = &nodes;
    let mut audits = vec![ReservationAudit::new("ci".to_owned(), Mode::DryRun)];
    let compliant = Outcome::new(crate::placement::Webhook::ValidateReservation, Decision::Noop);
    record(
        &mut audits,
        None,
        &config,
        "batch",
        "Pod/y",
        (Source::Pods, true),
        "y",
        Some(("ci-1", view)),
        &compliant,
    );
    record(
        &mut audits,
        None,
        &config,
        "batch",
        "Pod/z",
        (Source::Pods, true),
        "z",
        Some(("w-1", view)),
        &compliant,
    );
    let audit = &mut audits[0];
    audit.verdict = verdict(audit);
    assert!(audit.verdict.ready, "running intruders warn, they do not block");
    let running: Vec<_> = audit.running.iter().collect();
    assert_eq!(running.len(), 1, "only the pool node's pod");
    assert!(running[0].reason.contains("spec.nodeName"), "{}", running[0].reason);
    assert_eq!(audit.verdict.warnings.len(), 1);
}
