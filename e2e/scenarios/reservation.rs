//! A group reserves its nodes (`reserve`): tenants of other namespaces, acting as themselves
//! (impersonation) against the real API server, try every way onto the gold pool — the pool's
//! toleration copied, the wildcard toleration, an `Exists` toleration of the pool's key, a pool
//! node's `spec.nodeName`, a toleration added by UPDATE to a pending pod, a forged DaemonSet
//! owner reference. dryRun admits and logs them (`would_deny`, `reservation.reason: reserved`);
//! enforce, switched on in the live config, refuses them. Pods with neither field never reach
//! pod-director (the entry's matchCondition). With the scheduling cluster, what is admitted
//! really runs where the scheduler and kwok put it: an admin's DaemonSet on the pool, a dryRun
//! intruder on the pool — which the audit then lists with its node (a bare pod: "requester unknown" while
//! the reservation allows a user, a blocker where it allows no requester).

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::fixtures::controller;
use crate::harness::k8s::{IMAGE, create_pod, eventually, impersonating, pod_from};
use crate::harness::scheduling::node_of;
use crate::harness::{Env, suffix};

pub(crate) const GROUP: &str = "e2e-reserved";
const KEY: &str = "e2e.pod-director.io/reserved";
pub(crate) const FRIEND: &str = "e2e-reserve-friend";
pub(crate) const WEBHOOK: &str = "validate-reservation";

/// A gold node: the reserved pool's label and taint.
pub(crate) fn gold_node(name: &str) -> Node {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"e2e.pod-director.io/reserved-pool": "gold", "kubernetes.io/os": "linux"}},
        "spec": {"taints": [{"key": KEY, "value": "gold", "effect": "NoSchedule"}]},
    }))
    .expect("a Node")
}

/// A pod named `name` with these spec fields (besides its container).
fn pod_with(name: &str, spec: Value) -> Pod {
    let mut value = json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "app", "image": IMAGE}]}});
    if let (Some(into), Some(fields)) = (value["spec"].as_object_mut(), spec.as_object()) {
        into.extend(fields.clone());
    }
    pod_from(value)
}

/// The four ways onto the pool, for a pool node named `node`.
fn intruders(node: &str, tag: &str) -> Vec<(String, Pod)> {
    [
        (
            "copied",
            json!({"tolerations": [{"key": KEY, "operator": "Equal", "value": "gold", "effect": "NoSchedule"}]}),
        ),
        ("wildcard", json!({"tolerations": [{"operator": "Exists"}]})),
        ("exists", json!({"tolerations": [{"key": KEY, "operator": "Exists"}]})),
        ("nodename", json!({"nodeName": node})),
    ]
    .into_iter()
    .map(|(way, spec)| {
        let name = format!("{way}-{tag}");
        let pod = pod_with(&name, spec);
        (name, pod)
    })
    .collect()
}

/// A client acting as `user`, allowed to create, get and patch pods in `namespace`.
async fn as_user(env: &Env, user: &str, namespace: &str) -> Client {
    env.apply_rbac(vec![
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": format!("e2e-{user}"), "namespace": namespace},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list", "patch", "update"]}]
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": format!("e2e-{user}"), "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": format!("e2e-{user}")},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]
        }),
    ])
    .await;
    impersonating(user, &["system:authenticated"]).await
}

/// The reservation entry of the suite's ValidatingWebhookConfiguration, if rendered.
pub(crate) async fn reservation_entry(env: &Env) -> Option<Value> {
    let (_, validating): (_, ValidatingWebhookConfiguration) = env.webhook_configurations().await;
    let name = format!("reservation.{}.pod-director.io", env.settings.fullname);
    validating
        .webhooks
        .unwrap_or_default()
        .into_iter()
        .find(|w| w.name == name)
        .map(|w| serde_json::to_value(w).expect("an entry serializes"))
}

/// Switches the reservation to `mode` in the live config and waits until the reconciler gave the
/// entry the failurePolicy that mode takes.
pub(crate) async fn switch_to(env: &mut Env, mode: &str, policy: &str) {
    let revision = env.loaded_revision().await;
    env.edit_config(|c| c["groups"][GROUP]["reserve"]["mode"] = json!(mode));
    env.reloaded_from(&revision).await;
    eventually(&format!("the reservation entry's failurePolicy {policy}"), || async {
        let entry = reservation_entry(env).await?;
        (entry["failurePolicy"] == policy).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_cannot_land_on_a_reserved_pool_by_toleration_wildcard_exists_or_node_name() {
    let Some(mut env) = Env::start_local("reserve", "switches the reservation to enforce in the live config").await
    else {
        return;
    };
    let sfx = suffix();
    let gold = format!("e2e-gold-{sfx}");
    env.create_node(&gold_node(&gold)).await;
    let free = env.namespace(None).await;
    let other_group = env.namespace(Some("e2e-dryrun")).await;
    let tenant = as_user(&env, &format!("tenant-{sfx}"), &free).await;
    let other_tenant = as_user(&env, &format!("tenant-b-{sfx}"), &other_group).await;

    // The entry sees every namespace but the excluded ones, and only pods that may intrude.
    let entry = reservation_entry(&env).await.expect("rendered: a group reserves");
    assert_eq!(entry["failurePolicy"], "Ignore", "dryRun: {entry}");
    let condition = entry["matchConditions"][0]["expression"].as_str().unwrap_or_default();
    assert!(condition.contains(&format!("'{KEY}'")), "{condition}");

    // dryRun: admitted, logged with the reason and the toleration that intrudes.
    for (name, pod) in intruders(&gold, "dry") {
        let created = create_pod(&tenant, &free, &pod, false).await;
        assert!(created.status.is_success(), "dryRun admits {name}: {:?}", created.body);
        let line = env.decision(&free, &name, WEBHOOK).await;
        assert_eq!(line.decision(), "would_deny", "{name}: {line:?}");
        assert_eq!(line.text("reservation.reason"), "reserved", "{name}");
        assert_eq!(line.text("placement.group"), GROUP, "{name}");
        assert_eq!(line.get("reservation.groups"), &json!([GROUP]), "{name}");
        if name.starts_with("nodename") {
            assert_eq!(line.text("reservation.node"), gold, "{name}");
        } else {
            assert!(!line.text("reservation.toleration").is_empty(), "{name}: {line:?}");
        }
    }
    // Another group's tenant is an intruder too.
    let created = create_pod(
        &other_tenant,
        &other_group,
        &pod_with("grouped-dry", json!({"tolerations": [{"operator": "Exists"}]})),
        false,
    )
    .await;
    assert!(created.status.is_success());
    assert_eq!(
        env.decision(&other_group, "grouped-dry", WEBHOOK).await.decision(),
        "would_deny"
    );

    // The same pods without those fields never reach pod-director (nor one tolerating another key).
    let plain = [
        ("plain-dry", json!({})),
        (
            "elsewhere-dry",
            json!({"tolerations": [{"key": "e2e.pod-director.io/other", "operator": "Exists"}]}),
        ),
    ];
    for (name, spec) in &plain {
        let created = create_pod(&tenant, &free, &pod_with(name, spec.clone()), false).await;
        assert!(created.status.is_success(), "{name}: {:?}", created.body);
    }
    // Ordered after the plain pods: once its line is logged, theirs would have been too.
    let marker = intruders(&gold, "marker").remove(1);
    assert!(create_pod(&tenant, &free, &marker.1, false).await.status.is_success());
    env.decision(&free, &marker.0, WEBHOOK).await;
    for (name, _) in &plain {
        assert!(
            env.decisions_with(&[
                ("admission.request.namespace", free.as_str()),
                ("admission.request.name", name),
                ("webhook", WEBHOOK)
            ])
            .await
            .is_empty(),
            "{name} reached /validate-reservation: the matchCondition should keep it away"
        );
    }

    // A pending pod (no node has its label), created before enforce.
    let pending = pod_with("pending", json!({"nodeSelector": {"e2e.pod-director.io/nowhere": "x"}}));
    assert!(create_pod(&tenant, &free, &pending, false).await.status.is_success());

    // enforce, in the live config: the reconciler makes the entry fail closed.
    switch_to(&mut env, "enforce", "Fail").await;
    for (name, pod) in intruders(&gold, "enforce") {
        let created = create_pod(&tenant, &free, &pod, false).await;
        assert_eq!(
            created.status.as_u16(),
            403,
            "enforce refuses {name}: {:?}",
            created.body
        );
        let message = created.error_message().unwrap_or_default();
        assert!(
            message.contains(GROUP) && message.contains("reserve.allow"),
            "{name}: {message}"
        );
        let line = env.decision(&free, &name, WEBHOOK).await;
        assert_eq!(line.decision(), "denied", "{name}");
    }
    let created = create_pod(&tenant, &free, &pod_with("plain-enforce", json!({})), false).await;
    assert!(
        created.status.is_success(),
        "a pod that does not intrude: {:?}",
        created.body
    );

    // UPDATE: a pending pod may not gain the pool's toleration.
    let pods: Api<Pod> = Api::namespaced(tenant.clone(), &free);
    let patch = json!({"spec": {"tolerations": [{"key": KEY, "operator": "Exists", "effect": "NoSchedule"}]}});
    let refused = pods
        .patch("pending", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .expect_err("enforce refuses the added toleration");
    assert!(refused.to_string().contains(GROUP), "{refused}");
    let line = env
        .decisions_with(&[
            ("admission.request.name", "pending"),
            ("admission.request.operation", "UPDATE"),
            ("webhook", WEBHOOK),
        ])
        .await;
    assert!(line.iter().any(|l| l.decision() == "denied"), "{line:?}");

    // A forged DaemonSet owner reference does not exempt a tenant's pod.
    let forged = pod_from(json!({
        "metadata": {"name": "forged", "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "00000000-0000-0000-0000-000000000000", "controller": true}]},
        "spec": {"containers": [{"name": "app", "image": IMAGE}], "tolerations": [{"operator": "Exists"}]}
    }));
    let created = create_pod(&tenant, &free, &forged, false).await;
    assert_eq!(created.status.as_u16(), 403, "{:?}", created.body);

    // The allow-list: the friend's pod is admitted, and reported as exempt.
    let friend = as_user(&env, FRIEND, &free).await;
    let created = create_pod(
        &friend,
        &free,
        &pod_with("friend", json!({"tolerations": [{"operator": "Exists"}]})),
        false,
    )
    .await;
    assert!(created.status.is_success(), "{:?}", created.body);
    let line = env.decision(&free, "friend", WEBHOOK).await;
    assert_eq!(line.text("reservation.exempt"), "allowed_user", "{line:?}");

    let metrics = env.metrics().await.unwrap_or_default();
    for sample in [
        format!(r#"pod_director_reservation_decisions_total{{group="{GROUP}",decision="denied"}}"#),
        format!(r#"pod_director_reservation_decisions_total{{group="{GROUP}",decision="would_deny"}}"#),
        format!(r#"pod_director_reservation_decisions_total{{group="{GROUP}",decision="exempt"}}"#),
    ] {
        let value = env.metric(&sample).await.unwrap_or(0.0);
        assert!(value >= 1.0, "{sample} = {value}\n{metrics}");
    }

    // No group reserves any more: the entry goes; a reservation again: it comes back, with the
    // /validate entry's clientConfig at /validate-reservation.
    let revision = env.loaded_revision().await;
    env.edit_config(|c| {
        c["groups"][GROUP]
            .as_object_mut()
            .map(|g| g.remove("reserve"))
            .map(|_| ())
            .unwrap_or(())
    });
    env.reloaded_from(&revision).await;
    eventually("the reservation entry removed", || async {
        reservation_entry(&env).await.is_none().then_some(())
    })
    .await;
    let revision = env.loaded_revision().await;
    env.edit_config(|c| c["groups"][GROUP]["reserve"] = json!({"mode": "enforce"}));
    env.reloaded_from(&revision).await;
    let entry = eventually("the reservation entry added back", || async {
        reservation_entry(&env).await
    })
    .await;
    let url = entry["clientConfig"]["url"].as_str().unwrap_or_default();
    assert!(url.ends_with("/validate-reservation"), "{entry}");
    let created = create_pod(&tenant, &free, &intruders(&gold, "again").remove(1).1, false).await;
    assert_eq!(created.status.as_u16(), 403, "{:?}", created.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_run_on_the_reserved_pool_a_dry_run_intruder_lands_there_and_the_audit_names_it() {
    let Some(env) = Env::start_scheduling("reserve-sched").await else {
        return;
    };
    let sfx = suffix();
    let gold = format!("e2e-gold-s-{sfx}");
    env.create_node(&gold_node(&gold)).await;
    env.wait_nodes_ready(std::slice::from_ref(&gold)).await;
    let wildcard = json!({"containers": [{"name": "agent", "image": IMAGE}], "tolerations": [{"operator": "Exists"}]});

    // The admin's node agent in kube-system (excluded), and in an ungrouped namespace (its pods
    // come from the DaemonSet controller: exempt).
    let agents = env.namespace(None).await;
    for namespace in ["kube-system", agents.as_str()] {
        let name = format!("e2e-agent-{sfx}");
        Api::<DaemonSet>::namespaced(env.client.clone(), namespace)
            .create(
                &PostParams::default(),
                &controller::<DaemonSet>(&name, wildcard.clone()),
            )
            .await
            .expect("DaemonSet created");
        let running = eventually(&format!("{namespace}'s agent running on {gold}"), || async {
            let pods: Api<Pod> = Api::namespaced(env.client.clone(), namespace);
            let list = pods
                .list(&kube::api::ListParams::default().labels(&format!("app={name}")))
                .await
                .ok()?;
            list.items.into_iter().find(|p| {
                node_of(p) == Some(gold.as_str())
                    && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
            })
        })
        .await;
        if namespace != "kube-system" {
            let pod_name = running.metadata.name.clone().unwrap_or_default();
            let line = env.decision(namespace, &pod_name, WEBHOOK).await;
            assert_eq!(line.text("reservation.exempt"), "daemonset_pod", "{line:?}");
        }
        Api::<DaemonSet>::namespaced(env.client.clone(), namespace)
            .delete(&name, &Default::default())
            .await
            .expect("DaemonSet deleted");
    }

    // dryRun: an intruder is admitted and the scheduler really puts it on the pool.
    let batch = env.namespace(None).await;
    let intruder = pod_with(
        "batch-job",
        json!({"tolerations": [{"operator": "Exists"}], "nodeSelector": {"e2e.pod-director.io/reserved-pool": "gold"}}),
    );
    env.create_admitted_pod(&batch, &intruder).await;
    let running = env.wait_running(&batch, "batch-job").await;
    assert_eq!(node_of(&running), Some(gold.as_str()));
    let line = env.decision(&batch, "batch-job", WEBHOOK).await;
    assert_eq!(line.decision(), "would_deny");
    assert_eq!(line.get("reservation.pool_nodes").as_u64(), Some(1), "{line:?}");
    // kube-scheduler bound it (and every other pod) to the pool: none of its bindings was sent.
    let bindings = env
        .decisions_with(&[
            ("admission.request.user", "system:kube-scheduler"),
            ("webhook", WEBHOOK),
        ])
        .await;
    assert!(
        bindings.is_empty(),
        "the scheduler's bindings reached pod-director: {bindings:?}"
    );

    // The audit lists it, running on its node, with the toleration that let it in.
    let audit = |config: Value| async move {
        let file = tempfile::Builder::new()
            .suffix(".json")
            .tempfile()
            .expect("a temp file");
        std::fs::write(file.path(), config.to_string()).expect("written");
        let (code, report) = crate::audit::audit(file.path(), &["--group", GROUP, "--fail-on", "not-ready"]).await;
        let reservation = report["reservations"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["group"] == GROUP))
            .cloned()
            .unwrap_or_else(|| panic!("no reservation in {report}"));
        (code, reservation)
    };
    let listed = |findings: &Value| {
        findings.as_array().is_some_and(|f| {
            f.iter()
                .any(|f| f["namespace"] == batch.as_str() && f["workload"] == "Pod/batch-job")
        })
    };
    let config = serde_json::to_value(&env.config).expect("config");
    // The suite's reservation allows a user, and a bare pod's creator is recorded nowhere: whether
    // its re-creation is refused depends on who sends it, so it is "requester unknown", not a blocker.
    let (code, reservation) = audit(config.clone()).await;
    assert_eq!(code, 0, "ready: {reservation}");
    assert_eq!(reservation["ready"], true, "{reservation}");
    assert!(listed(&reservation["requester_unknown"]), "{reservation}");
    assert!(!listed(&reservation["would_deny"]), "{reservation}");
    let warnings = reservation["warnings"].to_string();
    assert!(warnings.contains("who created them is not recorded"), "{reservation}");
    let running = reservation["running"].as_array().cloned().unwrap_or_default();
    let found = running
        .iter()
        .find(|f| f["namespace"] == batch.as_str() && f["workload"] == "Pod/batch-job")
        .unwrap_or_else(|| panic!("the intruder is not listed as running: {reservation}"));
    assert!(
        found["nodes"].as_array().is_some_and(|n| n.contains(&json!(gold))),
        "{found}"
    );
    assert!(
        found["reason"].as_str().is_some_and(|r| r.contains("* exists")),
        "{found}"
    );
    // A reservation that allows no requester would refuse anyone's re-creation of it: it blocks
    // enforcing (the blocker names the first three workloads).
    let mut strict = config;
    if let Some(reserve) = strict["groups"][GROUP]["reserve"].as_object_mut() {
        reserve.remove("allow");
    }
    let (code, reservation) = audit(strict).await;
    assert_eq!(code, 1, "not ready: {reservation}");
    assert_eq!(reservation["ready"], false, "{reservation}");
    assert!(
        reservation["blockers"].as_array().is_some_and(|b| !b.is_empty()),
        "{reservation}"
    );
    assert!(listed(&reservation["would_deny"]), "{reservation}");
    assert!(!listed(&reservation["requester_unknown"]), "{reservation}");
}
