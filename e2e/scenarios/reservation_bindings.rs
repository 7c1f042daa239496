//! A reserved pool reached through `pods/binding`: a user granted `create` on `pods/binding`
//! (RBAC made here, acting as themselves through impersonation against the real API server)
//! binds a pending pod that does not tolerate the pool to a gold node. dryRun admits and logs
//! `would_deny`; enforce refuses it with a message that names the node and the trusted
//! schedulers; a binding elsewhere, one by an allowed user and one by a scheduler named in
//! `trustedSchedulers` are admitted — the last without ever reaching pod-director (the entry's
//! matchCondition), as every binding of kube-scheduler (checked in `reservation.rs`'s
//! scheduling scenario).

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::PostParams;
use serde_json::{Value, json};

use super::reservation::{FRIEND, GROUP, WEBHOOK, gold_node, reservation_entry, switch_to};
use crate::harness::k8s::{IMAGE, eventually, impersonating, pod_from};
use crate::harness::{Env, suffix};

/// A pod no scheduler picks up (a scheduler name nobody runs): pending until bound by hand.
pub(crate) fn held(name: &str) -> Pod {
    pod_from(json!({
        "metadata": {"name": name},
        "spec": {"schedulerName": "e2e-binds-by-hand", "containers": [{"name": "app", "image": IMAGE}]}
    }))
}

/// A client acting as `user`, allowed to create and read pods and to bind them in `namespace`.
pub(crate) async fn binder(env: &Env, user: &str, namespace: &str) -> Client {
    let name = format!("e2e-binder-{user}");
    env.apply_rbac(vec![
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list"]},
                {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]}
            ]
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]
        }),
    ])
    .await;
    impersonating(user, &["system:authenticated"]).await
}

/// POSTs a Binding of pod `namespace/pod` to `node` as `client`: the HTTP status and the answer.
pub(crate) async fn bind(client: &Client, namespace: &str, pod: &str, node: &str) -> (http::StatusCode, Value) {
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": pod},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    });
    // The impersonated user's RBAC may take a moment to reach the authorizer's cache.
    eventually(&format!("the binding of {namespace}/{pod} answered"), || async {
        let request = kube::core::Request::new(format!("/api/v1/namespaces/{namespace}/pods/{pod}/binding"))
            .create(
                &PostParams::default(),
                serde_json::to_vec(&binding).expect("serializes"),
            )
            .expect("a request");
        let response = client.send(request.map(kube::client::Body::from)).await.ok()?;
        let status = response.status();
        let bytes = http_body_util::BodyExt::collect(response.into_body())
            .await
            .ok()?
            .to_bytes();
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let rbac_pending = status == http::StatusCode::FORBIDDEN
            && body["reason"] == "Forbidden"
            && body["message"]
                .as_str()
                .is_some_and(|m| m.contains("cannot create resource"));
        (!rbac_pending).then_some((status, body))
    })
    .await
}

pub(crate) fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_to_a_reserved_node_is_decided_and_the_trusted_schedulers_bind_freely() {
    let Some(mut env) =
        Env::start_local("reserve-bind", "switches the reservation to enforce in the live config").await
    else {
        return;
    };
    let sfx = suffix();
    let gold = format!("e2e-gold-b-{sfx}");
    env.create_node(&gold_node(&gold)).await;
    let plain = format!("e2e-plain-b-{sfx}");
    let plain_node: Node = serde_json::from_value(json!({"metadata": {"name": plain}})).expect("a Node");
    env.create_node(&plain_node).await;
    let free = env.namespace(None).await;
    let tenant_name = format!("binder-{sfx}");
    let tenant = binder(&env, &tenant_name, &free).await;

    // The entry sends bindings, and skips the trusted schedulers' in its matchCondition.
    let entry = reservation_entry(&env).await.expect("rendered: a group reserves");
    assert_eq!(entry["rules"][1]["resources"], json!(["pods/binding"]), "{entry}");
    assert_eq!(entry["rules"][1]["operations"], json!(["CREATE"]), "{entry}");
    skips_trusted_schedulers(&entry, 1);

    // dryRun: the binding is admitted and logged as the intrusion it is.
    env.create_admitted_pod(&free, &held("held-dry")).await;
    let (status, body) = bind(&tenant, &free, "held-dry", &gold).await;
    assert!(status.is_success(), "dryRun admits the binding: {status} {body}");
    let line = env.decision(&free, "held-dry", WEBHOOK).await;
    assert_eq!(line.decision(), "would_deny", "{line:?}");
    assert_eq!(line.text("reservation.node"), gold, "{line:?}");
    assert_eq!(line.text("placement.group"), GROUP, "{line:?}");
    assert_eq!(line.text("admission.request.user"), tenant_name, "{line:?}");
    assert_eq!(node_of(&env.get_pod(&free, "held-dry").await), Some(gold.as_str()));

    // enforce: refused, with what to do; the pod stays pending.
    switch_to(&mut env, "enforce", "Fail").await;
    env.create_admitted_pod(&free, &held("held")).await;
    let (status, body) = bind(&tenant, &free, "held", &gold).await;
    assert_eq!(status.as_u16(), 403, "enforce refuses the binding: {body}");
    let message = body["message"].as_str().unwrap_or_default();
    for part in [
        "may not be bound to another group's reserved nodes",
        GROUP,
        gold.as_str(),
        "system:kube-scheduler",
        "trustedSchedulers",
        "reserve.allow",
    ] {
        assert!(message.contains(part), "{part:?} in {message}");
    }
    assert_eq!(env.decision(&free, "held", WEBHOOK).await.decision(), "denied");
    assert_eq!(node_of(&env.get_pod(&free, "held").await), None, "still pending");

    // A node outside the pool: admitted.
    let (status, body) = bind(&tenant, &free, "held", &plain).await;
    assert!(status.is_success(), "a binding elsewhere: {status} {body}");

    // The allow-list: a friend's binding is admitted, and reported as exempt.
    let friend = binder(&env, FRIEND, &free).await;
    env.create_admitted_pod(&free, &held("held-friend")).await;
    let (status, body) = bind(&friend, &free, "held-friend", &gold).await;
    assert!(status.is_success(), "an allowed user binds: {status} {body}");
    let line = env.decision(&free, "held-friend", WEBHOOK).await;
    assert_eq!(line.text("reservation.exempt"), "allowed_user", "{line:?}");

    // A secondary scheduler named in trustedSchedulers: its binding never reaches pod-director.
    let second = format!("e2e-second-scheduler-{sfx}");
    let revision = env.loaded_revision().await;
    // (Edits start from the suite's config: the reservation stays in enforce.)
    env.edit_config(|c| {
        c["groups"][GROUP]["reserve"]["mode"] = json!("enforce");
        c["trustedSchedulers"] = json!({"users": [second]});
    });
    env.reloaded_from(&revision).await;
    eventually("the entry's matchCondition trusting the second scheduler", || async {
        let entry = reservation_entry(&env).await?;
        let expression = entry["matchConditions"][1]["expression"].as_str()?.to_owned();
        expression.contains(&format!("'{second}'")).then_some(())
    })
    .await;
    let scheduler = binder(&env, &second, &free).await;
    env.create_admitted_pod(&free, &held("held-trusted")).await;
    let (status, body) = bind(&scheduler, &free, "held-trusted", &gold).await;
    assert!(status.is_success(), "a trusted scheduler binds: {status} {body}");
    assert_eq!(node_of(&env.get_pod(&free, "held-trusted").await), Some(gold.as_str()));
    // Ordered after it: once the tenant's next binding is logged, the scheduler's would have been.
    env.create_admitted_pod(&free, &held("marker")).await;
    let (status, _) = bind(&tenant, &free, "marker", &gold).await;
    assert_eq!(status.as_u16(), 403);
    env.decision(&free, "marker", WEBHOOK).await;
    let sent = env
        .decisions_with(&[
            ("admission.request.namespace", free.as_str()),
            ("admission.request.name", "held-trusted"),
            ("webhook", WEBHOOK),
        ])
        .await;
    assert!(
        sent.is_empty(),
        "the trusted scheduler's binding reached pod-director: {sent:?}"
    );
}

/// Asserts that matchCondition `index` of `entry` is the one that keeps kube-scheduler's (and
/// the trusted schedulers') bindings away from pod-director.
pub(super) fn skips_trusted_schedulers(entry: &Value, index: usize) {
    let condition = &entry["matchConditions"][index];
    assert_eq!(condition["name"], "binding-not-by-a-trusted-scheduler", "{entry}");
    assert!(
        condition["expression"]
            .as_str()
            .is_some_and(|e| e.contains("'system:kube-scheduler'")),
        "{condition}"
    );
}
