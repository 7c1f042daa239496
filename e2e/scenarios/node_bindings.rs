//! A group's pool reached around `/validate` through `pods/binding`: a tenant granted `create`
//! on `pods/binding` (RBAC made here, acting as themselves through impersonation against the
//! real API server) binds a pending pod of an enforce group to a node outside the group's
//! pool. `/validate` decides the binding as it decides a `spec.nodeName` at CREATE: enforce
//! refuses it with a message that says why, a binding to a node of the pool is admitted and the
//! pod runs there, dryRun admits and logs `would_deny`; kube-scheduler's bindings never reach
//! pod-director (the entries' matchCondition), as every other scenario shows by scheduling.

use serde_json::json;

use super::nodes::{POOL_LABEL, node, pool_taint};
use super::reservation_bindings::{bind, binder, held, node_of, skips_trusted_schedulers};
use crate::harness::k8s::eventually;
use crate::harness::{Env, notice, suffix};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_s_binding_outside_its_enforce_group_s_pool_is_refused_at_validate() {
    let env = Env::start("node-bind").await;
    let enforce = env.namespace(Some("e2e-nodes-enforce")).await;
    let dry = env.namespace(Some("e2e-nodes-dryrun")).await;
    let sfx = suffix();
    let inside = format!("e2e-teal-bind-{sfx}");
    let outside = format!("e2e-gray-bind-{sfx}");
    // Ready before any binding: a fresh node's not-ready NoSchedule taint is tolerated by no group.
    env.create_ready_node(&node(&inside, "teal", json!([pool_taint()]), false))
        .await;
    env.create_node(&node(&outside, "gray", json!([]), false)).await;
    let tenant_name = format!("node-binder-{sfx}");
    let tenant = binder(&env, &tenant_name, &enforce).await;
    binder(&env, &tenant_name, &dry).await;

    // Every /validate entry sends bindings, and skips the trusted schedulers' in its matchCondition.
    let (_, validating) = env.webhook_configurations().await;
    let entry_name = format!("enforce.validate.{}.pod-director.io", env.settings.fullname);
    let entry = validating
        .webhooks
        .unwrap_or_default()
        .into_iter()
        .find(|w| w.name == entry_name)
        .map(|w| serde_json::to_value(w).expect("an entry serializes"))
        .expect("the enforce entry");
    let rules = entry["rules"].as_array().cloned().unwrap_or_default();
    assert!(
        rules
            .iter()
            .any(|r| r["resources"] == json!(["pods/binding"]) && r["operations"] == json!(["CREATE"])),
        "{entry}"
    );
    skips_trusted_schedulers(&entry, 0);

    // enforce, a node outside the pool: refused, saying why; the pod stays pending.
    env.create_admitted_pod(&enforce, &held("escape")).await;
    let (status, body) = bind(&tenant, &enforce, "escape", &outside).await;
    assert_eq!(status.as_u16(), 403, "enforce refuses the binding: {body}");
    let message = body["message"].as_str().unwrap_or_default();
    for part in [
        "e2e-nodes-enforce",
        &format!("binding target: node \"{outside}\" is not a node of the group"),
        &format!("nodeSelector {POOL_LABEL}=teal"),
        "bind the pod to a node of the group",
    ] {
        assert!(message.contains(part), "{part:?} in {message}");
    }
    assert_eq!(node_of(&env.get_pod(&enforce, "escape").await), None, "still pending");
    // The line is written as the answer is sent: wait for it rather than race it.
    let decided = eventually("the enforce binding's decision", || async {
        let lines = env
            .decisions_with(&[
                ("admission.request.namespace", enforce.as_str()),
                ("admission.request.name", "escape"),
                ("admission.request.user", tenant_name.as_str()),
                ("webhook", "validate"),
            ])
            .await;
        (!lines.is_empty()).then_some(lines)
    })
    .await;
    assert_eq!(
        decided.iter().map(|d| d.decision()).collect::<Vec<_>>(),
        ["denied"],
        "{decided:?}"
    );

    // enforce, a node of the pool (Ready: created with create_ready_node): admitted, and the pod runs there.
    let (status, body) = bind(&tenant, &enforce, "escape", &inside).await;
    assert!(status.is_success(), "a node of the group: {status} {body}");
    assert_eq!(node_of(&env.get_pod(&enforce, "escape").await), Some(inside.as_str()));
    if env.pods_run() {
        let running = env.wait_running(&enforce, "escape").await;
        assert_eq!(node_of(&running), Some(inside.as_str()));
    } else {
        notice("SKIPPED the Running check in cluster mode: set E2E_KWOK=true when kwok plays the suite's nodes");
    }

    // dryRun, a node outside the pool: admitted, and logged as what enforce would refuse.
    env.create_admitted_pod(&dry, &held("escape")).await;
    let (status, body) = bind(&tenant, &dry, "escape", &outside).await;
    assert!(status.is_success(), "dryRun admits the binding: {status} {body}");
    assert_eq!(node_of(&env.get_pod(&dry, "escape").await), Some(outside.as_str()));
    let line = eventually("the dryRun binding's decision", || async {
        env.decisions_with(&[
            ("admission.request.namespace", dry.as_str()),
            ("admission.request.name", "escape"),
            ("admission.request.user", tenant_name.as_str()),
            ("webhook", "validate"),
        ])
        .await
        .pop()
    })
    .await;
    assert_eq!(line.decision(), "would_deny", "{line:?}");
    assert!(
        line.get("placement.violations").to_string().contains(&outside),
        "{line:?}"
    );

    // kube-scheduler's bindings (every pod scheduled in this run) never reach /validate.
    let scheduler = env
        .decisions_with(&[
            ("admission.request.user", "system:kube-scheduler"),
            ("webhook", "validate"),
        ])
        .await;
    assert!(
        scheduler.is_empty(),
        "the scheduler's bindings reached pod-director: {scheduler:?}"
    );
}
