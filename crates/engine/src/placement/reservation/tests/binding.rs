//! Bindings (`pods/binding`) of reserved nodes: trusted when a scheduler that honours taints
//! binds, otherwise decided like a `spec.nodeName` the request sets.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;

use super::super::*;
use crate::decision::{Subject, View, binding_skipped, decide};
use crate::placement::{NodeInfo, NodeView, Requester};
use crate::testing::node;

fn config(mode: &str, trusted: serde_json::Value) -> Config {
    serde_json::from_value(json!({
        "trustedSchedulers": trusted,
        "groups": {
            "gpu": {
                "nodeSelector": {"pool": "gpu"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "reserve": {"mode": mode, "allow": {"namespaces": ["ml-admin"], "users": ["alice"]}}
            },
            "web": {}
        }
    }))
    .expect("a config")
}

fn nodes() -> Vec<Arc<NodeInfo>> {
    vec![
        Arc::new(node(
            "gpu-1",
            &[("pool", "gpu")],
            &[("nvidia.com/gpu", "", "NoSchedule")],
            false,
        )),
        Arc::new(node("web-1", &[("pool", "web")], &[], false)),
    ]
}

/// A pending pod: it tolerates nothing of the pool and names no node.
fn pending() -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "batch"}, "spec": {}})).expect("a pod")
}

fn bind(config: &Config, ns: &str, group: Option<&str>, pod: &Pod, target: &str, who: Requester) -> Outcome {
    let labels: BTreeMap<String, String> = group
        .map(|g| BTreeMap::from([("pod-director/group".to_owned(), g.to_owned())]))
        .unwrap_or_default();
    let nodes = nodes();
    let ctx = Context {
        requester: who,
        nodes: Some(&nodes as &dyn NodeView),
    };
    let view = View {
        config,
        namespace: &Namespace::new(ns, &labels),
        context: &ctx,
    };
    decide(Webhook::ValidateReservation, &Subject::Binding { pod, target }, &view)
}

fn tenant() -> Requester {
    Requester::new("tenant", &["system:authenticated"])
}

#[test]
fn a_binding_to_a_pool_node_by_anyone_but_a_trusted_scheduler_is_an_intrusion() {
    let enforce = bind(
        &config("enforce", json!({})),
        "batch",
        None,
        &pending(),
        "gpu-1",
        tenant(),
    );
    assert_eq!(enforce.decision, Decision::Denied, "{enforce:?}");
    assert_eq!(enforce.group.as_deref(), Some("gpu"));
    assert_eq!(
        enforce.reservation.iter().map(|i| &i.via).collect::<Vec<_>>(),
        [&Via::Binding("gpu-1".to_owned())]
    );
    let message = enforce.message.clone().unwrap_or_default();
    for part in [
        "may not be bound",
        "\"gpu-1\"",
        "the binding targets it",
        "system:kube-scheduler",
        "trustedSchedulers",
        "reserve.allow",
    ] {
        assert!(message.contains(part), "{part:?} in {message}");
    }
    let dry = bind(
        &config("dryRun", json!({})),
        "batch",
        None,
        &pending(),
        "gpu-1",
        tenant(),
    );
    assert_eq!(dry.decision, Decision::WouldDeny, "{dry:?}");
    assert!(dry.allowed());
    // A node outside the pool, a node that does not exist: nothing to refuse.
    for target in ["web-1", "nowhere"] {
        let out = bind(
            &config("enforce", json!({})),
            "batch",
            None,
            &pending(),
            target,
            tenant(),
        );
        assert_eq!(out.decision, Decision::Noop, "{target}: {out:?}");
    }
}

#[test]
fn only_the_node_is_what_a_binding_introduces() {
    // A pod admitted with the pool's toleration (an allowed namespace's, or before enforce) is
    // bound elsewhere: its toleration is not the binding's doing.
    let tolerating: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p"},
        "spec": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}
    }))
    .expect("a pod");
    let out = bind(
        &config("enforce", json!({})),
        "batch",
        None,
        &tolerating,
        "web-1",
        tenant(),
    );
    assert_eq!(out.decision, Decision::Noop, "{out:?}");
    let out = bind(
        &config("enforce", json!({})),
        "batch",
        None,
        &tolerating,
        "gpu-1",
        tenant(),
    );
    assert_eq!(out.decision, Decision::Denied, "{out:?}");
    assert_eq!(out.reservation.len(), 1, "{out:?}");
}

#[test]
fn the_scheduler_and_configured_schedulers_are_trusted_by_username_only() {
    let trusted = json!({"users": ["my-scheduler"], "serviceAccounts": ["sched/second"]});
    let config = config("enforce", trusted);
    for who in [
        Requester::new(crate::config::KUBE_SCHEDULER, &[]),
        Requester::new("my-scheduler", &[]),
        Requester::new("system:serviceaccount:sched:second", &["system:serviceaccounts"]),
    ] {
        let out = bind(&config, "batch", None, &pending(), "gpu-1", who.clone());
        assert_eq!(out.decision, Decision::Skipped, "{who:?}: {out:?}");
        assert_eq!(
            out.skip_reason.as_ref().map(SkipReason::as_str),
            Some("trusted_scheduler")
        );
    }
    // Neither a group named like the scheduler, nor another service account of its namespace.
    for who in [
        Requester::new("tenant", &[crate::config::KUBE_SCHEDULER]),
        Requester::new("system:serviceaccount:sched:other", &["system:serviceaccounts"]),
        Requester::unknown(),
    ] {
        let out = bind(&config, "batch", None, &pending(), "gpu-1", who.clone());
        assert_eq!(out.decision, Decision::Denied, "{who:?}: {out:?}");
    }
}

#[test]
fn the_reservation_s_own_group_allowed_requesters_and_excluded_namespaces_bind_freely() {
    let config = config("enforce", json!({}));
    let own = bind(&config, "ml", Some("gpu"), &pending(), "gpu-1", tenant());
    assert_eq!(own.decision, Decision::Noop, "{own:?}");
    let allowed_ns = bind(&config, "ml-admin", None, &pending(), "gpu-1", tenant());
    assert!(allowed_ns.allowed(), "{allowed_ns:?}");
    assert_eq!(allowed_ns.reservation[0].exempt, Some(Exemption::Namespace));
    let alice = bind(
        &config,
        "batch",
        None,
        &pending(),
        "gpu-1",
        Requester::new("alice", &[]),
    );
    assert!(alice.allowed(), "{alice:?}");
    assert_eq!(alice.reservation[0].exempt, Some(Exemption::User));
    let excluded = bind(&config, "kube-system", None, &pending(), "gpu-1", tenant());
    assert_eq!(excluded.skip_reason, Some(SkipReason::ExcludedNamespace));
    let labels = BTreeMap::new();
    let ns = Namespace::new("batch", &labels);
    let ctx = Context {
        requester: tenant(),
        nodes: None,
    };
    assert!(
        binding_skipped(Webhook::ValidateReservation, &config, &ns, &ctx).is_none(),
        "a tenant's binding needs its pod"
    );
    let none: Config = serde_json::from_value(json!({"groups": {"web": {}}})).expect("a config");
    assert_eq!(
        binding_skipped(Webhook::ValidateReservation, &none, &ns, &ctx).map(|o| o.decision),
        Some(Decision::Skipped),
        "no reservation: nothing to read"
    );
}

#[test]
fn a_target_that_cannot_be_looked_up_is_undecidable_in_enforce() {
    use crate::testing::DownNodes;
    let labels = BTreeMap::new();
    let ns = Namespace::new("batch", &labels);
    let ctx = Context {
        requester: tenant(),
        nodes: Some(&DownNodes),
    };
    let enforce = decide_binding(&config("enforce", json!({})), &ns, &pending(), "gpu-1", &ctx);
    assert_eq!(enforce.decision, Decision::Error, "{enforce:?}");
    assert!(
        enforce
            .message
            .unwrap_or_default()
            .contains("the binding's target \"gpu-1\"")
    );
    let dry = decide_binding(&config("dryRun", json!({})), &ns, &pending(), "gpu-1", &ctx);
    assert_eq!(dry.decision, Decision::Noop, "{dry:?}");
}
