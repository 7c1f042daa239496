//! Skip rules and the namespace label guard on real AdmissionReview JSON, as
//! the API server sends it: the decision trusts `request.userInfo`, never the
//! fields the object's author wrote.

use serde_json::{Value, json};

use super::super::*;
use crate::testing;
use pod_director_engine::testing::assert_contains;
use pod_director_testkit::fixtures::{Review, decoded_patch};
use pod_director_testkit::json_pointers;

const CONFIG: &str = r#"
namespaceGuard:
  mode: enforce
  allowedUsers: [platform-bot]
  allowedServiceAccounts: [argocd/argocd-application-controller]
groups:
  ci:
    mode: enforce
    nodeSelector: {node-pool: ci}
    tolerations: [{key: dedicated, operator: Equal, value: ci, effect: NoSchedule}]
  shadow:
    mode: dryRun
    nodeSelector: {node-pool: ci}
  agents:
    mode: enforce
    allowDaemonSets: true
    nodeSelector: {node-pool: agents}
"#;

const DAEMON_SET_CONTROLLER: &str = "system:serviceaccount:kube-system:daemon-set-controller";

fn admission_with(config: &str) -> Admission {
    let namespaces = [("team-ci", "ci"), ("team-shadow", "shadow"), ("team-agents", "agents")];
    crate::testing::admission(config, &namespaces).0
}

fn user(username: &str, groups: &[&str]) -> Value {
    json!({"username": username, "uid": "0c1d2e3f", "groups": groups})
}

fn tenant() -> Value {
    user("alice", &["team-ci-devs", "system:authenticated"])
}

fn controller() -> Value {
    user(
        DAEMON_SET_CONTROLLER,
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:kube-system",
            "system:authenticated",
        ],
    )
}

fn pod_review(namespace: &str, user_info: Value, metadata: Value, spec: Value) -> Value {
    let mut object = json!({"kind": "Pod", "apiVersion": "v1", "metadata": metadata, "spec": spec, "status": {}});
    object["metadata"]["namespace"] = json!(namespace);
    Review::pod("CREATE", object).user_info(user_info).value()
}

fn daemon_set_pod(namespace: &str, user_info: Value, controller: bool) -> Value {
    pod_review(
        namespace,
        user_info,
        json!({
            "generateName": "node-agent-", "labels": {"app": "node-agent", "controller-revision-hash": "6d4b9c"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "node-agent",
                "uid": "9a8b7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d", "controller": controller, "blockOwnerDeletion": true}]
        }),
        json!({
            "containers": [{"name": "agent", "image": "agent:1"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}}},
            "tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
        }),
    )
}

fn daemon_set(name: &str, template_spec: Value) -> Value {
    json!({
        "kind": "DaemonSet", "apiVersion": "apps/v1",
        "metadata": {"name": name, "namespace": "team-ci", "generation": 1},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": template_spec},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
            "revisionHistoryLimit": 10
        },
        "status": {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0}
    })
}

fn daemon_set_review(namespace: &str, operation: &str, object: Value, old: Value) -> Value {
    Review::daemon_set(namespace, operation, object)
        .user_info(tenant())
        .old(old)
        .value()
}

fn namespace_review(operation: &str, user_info: Value, labels: Value, old_labels: Option<Value>) -> Value {
    let object = |labels: Value| {
        json!({"kind": "Namespace", "apiVersion": "v1",
            "metadata": {"name": "team-ci", "uid": "7e6d5c4b", "labels": labels},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
    };
    let review = Review::namespace(operation, object(labels)).user_info(user_info);
    match old_labels {
        Some(old) => review.old(object(old)).value(),
        None => review.value(),
    }
}

async fn answer(admission: &Admission, webhook: Webhook, body: &Value) -> Value {
    // Reviewed under a live subscriber: a callsite first met with no subscriber alive would be
    // cached as never enabled, and the tests that read decision lines would then see none.
    let _subscriber = tracing::subscriber::set_default(tracing_subscriber::registry());
    let (status, value) = testing::answer(admission, webhook, &serde_json::to_vec(body).unwrap_or_default()).await;
    assert_eq!(status, StatusCode::OK, "{value}");
    value["response"].clone()
}

fn annotation<'a>(response: &'a Value, key: &str) -> &'a str {
    response["auditAnnotations"][key].as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_tenant_s_pod_with_a_forged_daemonset_owner_is_decided_like_any_pod() {
    let admission = admission_with(CONFIG);
    for namespace in ["team-ci", "team-agents"] {
        for controller_ref in [true, false] {
            let body = daemon_set_pod(namespace, tenant(), controller_ref);
            let response = answer(&admission, Webhook::Mutate, &body).await;
            assert_eq!(
                annotation(&response, "decision"),
                "patched",
                "{namespace} controller={controller_ref}"
            );
            assert!(decoded_patch(&response).is_some_and(|ops| !ops.0.is_empty()));
        }
    }
}

#[tokio::test]
async fn the_daemonset_controller_s_pods_are_skipped_only_in_a_group_that_allows_daemonsets() {
    let admission = admission_with(CONFIG);
    let body = daemon_set_pod("team-agents", controller(), true);
    let response = answer(&admission, Webhook::Mutate, &body).await;
    assert_eq!(annotation(&response, "decision"), "skipped");
    assert_eq!(annotation(&response, "skip-reason"), "daemonset_pod");
    assert!(response.get("patch").is_none());
    // The same controller in a group that does not allow DaemonSets.
    let body = daemon_set_pod("team-ci", controller(), true);
    let response = answer(&admission, Webhook::Mutate, &body).await;
    assert_eq!(annotation(&response, "decision"), "patched");
    // /validate too: the final pod of a tenant is checked.
    let body = daemon_set_pod("team-agents", tenant(), true);
    let response = answer(&admission, Webhook::Validate, &body).await;
    assert_eq!(response["allowed"], false);
    let body = daemon_set_pod("team-agents", controller(), true);
    let response = answer(&admission, Webhook::Validate, &body).await;
    assert_eq!(response["allowed"], true);
}

#[tokio::test]
async fn a_mirror_annotation_exempts_only_a_pod_its_node_creates() {
    let admission = admission_with(CONFIG);
    let metadata = json!({"name": "etcd-node-1", "annotations": {
        "kubernetes.io/config.mirror": "a3f0c1", "kubernetes.io/config.hash": "a3f0c1", "kubernetes.io/config.source": "file"}});
    let spec = json!({"containers": [{"name": "etcd", "image": "etcd:3"}]});
    let node = user("system:node:node-1", &["system:nodes", "system:authenticated"]);
    let body = pod_review("team-ci", node, metadata.clone(), spec.clone());
    let response = answer(&admission, Webhook::Mutate, &body).await;
    assert_eq!(annotation(&response, "skip-reason"), "mirror_pod");
    let body = pod_review("team-ci", tenant(), metadata, spec);
    let response = answer(&admission, Webhook::Mutate, &body).await;
    assert_eq!(annotation(&response, "decision"), "patched");
}

#[tokio::test]
async fn a_tenant_s_daemonset_gets_its_group_s_placement_in_its_pod_template() {
    let admission = admission_with(CONFIG);
    let body = daemon_set_review(
        "team-ci",
        "CREATE",
        daemon_set(
            "node-agent",
            json!({"containers": [{"name": "agent", "image": "agent:1"}]}),
        ),
        Value::Null,
    );
    let response = answer(&admission, Webhook::Mutate, &body).await;
    assert_eq!(response["allowed"], true);
    assert_eq!(response["patchType"], "JSONPatch");
    assert_eq!(
        serde_json::to_value(decoded_patch(&response)).unwrap_or_default(),
        json!([
            {"op": "add", "path": "/spec/template/spec/nodeSelector", "value": {"node-pool": "ci"}},
            {"op": "add", "path": "/spec/template/spec/tolerations", "value": [
                {"effect": "NoSchedule", "key": "dedicated", "operator": "Equal", "value": "ci"}]}
        ])
    );
    // The patched DaemonSet validates.
    let mut patched = body["request"]["object"].clone();
    let ops = decoded_patch(&response).expect("a patch");
    json_patch::patch(&mut patched, &ops.0).expect("applies");
    let final_review = daemon_set_review("team-ci", "CREATE", patched.clone(), Value::Null);
    assert_eq!(
        answer(&admission, Webhook::Validate, &final_review).await["allowed"],
        true
    );

    // An UPDATE that drops the placement: /mutate puts it back; /validate denies the stripped template.
    let stripped = daemon_set(
        "node-agent",
        json!({"containers": [{"name": "agent", "image": "agent:2"}]}),
    );
    let update = daemon_set_review("team-ci", "UPDATE", stripped, patched);
    let response = answer(&admission, Webhook::Mutate, &update).await;
    assert_eq!(annotation(&response, "decision"), "patched");
    let response = answer(&admission, Webhook::Validate, &update).await;
    assert_eq!(response["allowed"], false);
    let message = response["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("pod-director: the DaemonSet's pod template does not satisfy placement group \"ci\""),
        "{message}"
    );
}

#[tokio::test]
async fn a_daemonset_of_a_group_that_allows_daemonsets_is_left_alone() {
    let admission = admission_with(CONFIG);
    let mut object = daemon_set(
        "node-agent",
        json!({"containers": [{"name": "agent", "image": "agent:1"}]}),
    );
    object["metadata"]["namespace"] = json!("team-agents");
    let body = daemon_set_review("team-agents", "CREATE", object, Value::Null);
    let response = answer(&admission, Webhook::Mutate, &body).await;
    assert_eq!(annotation(&response, "skip-reason"), "daemonset_allowed");
    assert!(response.get("patch").is_none());
}

#[tokio::test]
async fn a_daemonset_that_is_not_one_is_refused_with_400() {
    let admission = admission_with(CONFIG);
    let mut object = daemon_set("broken", json!({"containers": [{"name": "agent", "image": "agent:1"}]}));
    object["spec"]["template"] = json!("not a template");
    let body = daemon_set_review("team-ci", "CREATE", object, Value::Null);
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    let (status, value) = testing::answer(&admission, Webhook::Mutate, &bytes).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let message = value["response"]["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("request.object is not a valid apps/v1 DaemonSet"),
        "{message}"
    );
}

#[tokio::test]
async fn a_tenant_cannot_move_remove_or_invent_its_namespace_s_group() {
    let admission = admission_with(CONFIG);
    let ci = json!({"pod-director/group": "ci", "kubernetes.io/metadata.name": "team-ci"});
    let cases = [
        (
            "UPDATE",
            json!({"pod-director/group": "agents"}),
            Some(ci.clone()),
            "change label pod-director/group from \"ci\" to \"agents\"",
        ),
        (
            "UPDATE",
            json!({"kubernetes.io/metadata.name": "team-ci"}),
            Some(ci.clone()),
            "remove label pod-director/group",
        ),
        (
            "UPDATE",
            json!({"pod-director/group": "nope"}),
            Some(ci.clone()),
            "a group pod-director's config does not define",
        ),
        (
            "CREATE",
            json!({"pod-director/group": "agents"}),
            None,
            "set label pod-director/group=agents",
        ),
    ];
    for (operation, labels, old, what) in cases {
        let body = namespace_review(operation, tenant(), labels, old);
        let response = answer(&admission, Webhook::ValidateNamespace, &body).await;
        assert_eq!(response["allowed"], false, "{what}");
        assert_eq!(response["status"]["code"], 403);
        let message = response["status"]["message"].as_str().unwrap_or_default();
        assert_contains(message, what);
        assert_contains(
            message,
            "Only users platform-bot; members of system:masters; service accounts argocd/argocd-application-controller may change it",
        );
        assert_contains(message, "leave the label as it is");
    }
}

#[tokio::test]
async fn a_namespace_update_that_leaves_the_label_alone_is_never_denied() {
    let admission = admission_with(CONFIG);
    let old = json!({"pod-director/group": "ci"});
    let new = json!({"pod-director/group": "ci", "team": "web"});
    let body = namespace_review("UPDATE", tenant(), new, Some(old));
    let response = answer(&admission, Webhook::ValidateNamespace, &body).await;
    assert_eq!(response["allowed"], true);
    assert!(response.get("warnings").is_none());
}

#[tokio::test]
async fn allowed_requesters_change_the_group_label_freely() {
    let admission = admission_with(CONFIG);
    let old = Some(json!({"pod-director/group": "ci"}));
    for requester in [
        user("kubernetes-admin", &["system:masters", "system:authenticated"]),
        user("platform-bot", &["system:authenticated"]),
        user(
            "system:serviceaccount:argocd:argocd-application-controller",
            &["system:serviceaccounts"],
        ),
    ] {
        let labels = json!({"pod-director/group": "agents"});
        let body = namespace_review("UPDATE", requester.clone(), labels, old.clone());
        let response = answer(&admission, Webhook::ValidateNamespace, &body).await;
        assert_eq!(response["allowed"], true, "{requester}");
        assert_eq!(annotation(&response, "decision"), "noop");
    }
    // An undefined group is allowed for them, with a warning.
    let admin = user("kubernetes-admin", &["system:masters"]);
    let body = namespace_review("UPDATE", admin, json!({"pod-director/group": "nope"}), old);
    let response = answer(&admission, Webhook::ValidateNamespace, &body).await;
    assert_eq!(response["allowed"], true);
    assert_contains(
        response["warnings"][0].as_str().unwrap_or_default(),
        "\"nope\" is not defined",
    );
}

#[tokio::test]
async fn the_guard_in_dry_run_admits_and_reports_what_it_would_deny() {
    for (mode, warns) in [("dryRun", false), ("warn", true)] {
        let admission = admission_with(&CONFIG.replace(
            "mode: enforce\n  allowedUsers",
            &format!("mode: {mode}\n  allowedUsers"),
        ));
        let old = Some(json!({"pod-director/group": "ci"}));
        let body = namespace_review("UPDATE", tenant(), json!({}), old);
        let response = answer(&admission, Webhook::ValidateNamespace, &body).await;
        assert_eq!(response["allowed"], true, "{mode}");
        assert_eq!(annotation(&response, "decision"), "would_deny");
        assert_eq!(annotation(&response, "mode"), mode);
        assert_eq!(response.get("warnings").is_some(), warns, "{mode}: {response}");
    }
}

#[tokio::test]
async fn each_endpoint_decides_only_its_own_resources() {
    let admission = admission_with(CONFIG);
    let ns = namespace_review("UPDATE", tenant(), json!({}), Some(json!({"pod-director/group": "ci"})));
    for webhook in [Webhook::Mutate, Webhook::Validate] {
        let response = answer(&admission, webhook, &ns).await;
        assert_eq!(
            (response["allowed"].clone(), annotation(&response, "decision")),
            (json!(true), "")
        );
    }
    let pod = daemon_set_pod("team-ci", tenant(), true);
    let response = answer(&admission, Webhook::ValidateNamespace, &pod).await;
    assert_eq!(response["allowed"], true);
    assert!(response.get("patch").is_none());
}

#[tokio::test]
async fn any_single_field_change_of_a_daemonset_or_namespace_review_is_answered_without_a_panic() {
    let admission = admission_with(CONFIG);
    let bases = [
        daemon_set_review(
            "team-ci",
            "UPDATE",
            daemon_set(
                "a",
                json!({"containers": [{"name": "a", "image": "b"}], "nodeSelector": {"x": "y"}}),
            ),
            daemon_set("a", json!({"containers": [{"name": "a", "image": "b"}]})),
        ),
        namespace_review("UPDATE", tenant(), json!({"pod-director/group": "ci"}), Some(json!({}))),
    ];
    let replacements = [
        Value::Null,
        json!(0),
        json!(""),
        json!([]),
        json!({}),
        json!(true),
        json!("apps/v1"),
    ];
    let mut answered = 0;
    for base in bases {
        for pointer in &json_pointers(&base) {
            for replacement in &replacements {
                let mut body = base.clone();
                if let Some(slot) = body.pointer_mut(pointer) {
                    *slot = replacement.clone();
                }
                let bytes = serde_json::to_vec(&body).unwrap_or_default();
                for webhook in Webhook::ALL {
                    let reply = admission.review(webhook, &http::HeaderMap::new(), &bytes).await;
                    assert!(
                        [StatusCode::OK, StatusCode::BAD_REQUEST, StatusCode::SERVICE_UNAVAILABLE]
                            .contains(&reply.status),
                        "{pointer} = {replacement}: {}",
                        reply.status
                    );
                    answered += 1;
                }
            }
        }
    }
    assert!(answered > 1000, "{answered}");
}
