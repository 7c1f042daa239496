//! Bindings at `/validate-reservation` and `/validate`: the pod read from its source, the target
//! from the Node cache, the decision the engine's; the scheduler's bindings cost no read; a pod
//! that cannot be read is a 503.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use http::StatusCode;
use serde_json::{Value, json};

use crate::admission::Admission;
use crate::app::Metrics;
use crate::cluster::nodes::Nodes;
use crate::cluster::pods::PodSource;
use crate::testing::{StaticNodes, answer};
use pod_director_engine::placement::{Pod, Webhook};
use pod_director_engine::testing::{assert_contains, node};

const CONFIG: &str = "trustedSchedulers: {serviceAccounts: [sched/second]}\ngroups:\n  gpu:\n    \
                      nodeSelector: {pool: gpu}\n    \
                      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n    \
                      reserve: {mode: enforce, allow: {users: [alice]}}\n  \
                      shadow:\n    nodeSelector: {pool: shadow}\n    \
                      tolerations: [{key: shadow, operator: Exists, effect: NoSchedule}]\n    \
                      reserve: {mode: dryRun}\n";

/// Pods by `namespace/name`; `None`: the source fails. Counts its reads.
#[derive(Default)]
struct Pods {
    pods: Mutex<HashMap<String, Option<Pod>>>,
    reads: Mutex<usize>,
}

impl PodSource for Pods {
    fn fetch<'a>(&'a self, namespace: &'a str, name: &'a str) -> BoxFuture<'a, Result<Option<Pod>, String>> {
        Box::pin(async move {
            *self.reads.lock().expect("not poisoned") += 1;
            match self
                .pods
                .lock()
                .expect("not poisoned")
                .get(&format!("{namespace}/{name}"))
            {
                Some(Some(pod)) => Ok(Some(pod.clone())),
                Some(None) => Err("connection refused".to_owned()),
                None => Ok(None),
            }
        })
    }
}

fn pending(name: &str) -> Option<Pod> {
    Some(serde_json::from_value(json!({"metadata": {"name": name, "namespace": "batch"}, "spec": {}})).expect("a pod"))
}

fn admission() -> (Admission, Metrics, Arc<Pods>) {
    let (admission, metrics) = crate::testing::admission(CONFIG, &[]);
    let nodes = StaticNodes::new();
    nodes.insert(node(
        "gpu-1",
        &[("pool", "gpu")],
        &[("nvidia.com/gpu", "", "NoSchedule")],
        false,
    ));
    nodes.insert(node(
        "shadow-1",
        &[("pool", "shadow")],
        &[("shadow", "", "NoSchedule")],
        false,
    ));
    nodes.insert(node("web-1", &[("pool", "web")], &[], false));
    let pods = Arc::new(Pods::default());
    pods.pods
        .lock()
        .expect("not poisoned")
        .extend([("batch/p".to_owned(), pending("p")), ("batch/down".to_owned(), None)]);
    let admission = admission
        .with_nodes(Arc::new(Nodes::new(Arc::new(nodes))), metrics.nodes.clone())
        .with_pods(pods.clone(), metrics.pods.clone());
    (admission, metrics, pods)
}

/// A `pods/binding` CREATE of pod `batch/<pod>` to `target`, by `user`.
fn binding(pod: &str, target: &str, user: &str) -> Vec<u8> {
    let object = json!({
        "kind": "Binding", "apiVersion": "v1",
        "metadata": {"name": pod, "namespace": "batch", "creationTimestamp": null},
        "target": {"kind": "Node", "name": target},
    });
    pod_director_testkit::fixtures::Review::new(["", "v1", "pods"], ["", "v1", "Binding"], "batch", "CREATE", object)
        .sub_resource("binding")
        .user(user, &["system:authenticated"])
        .bytes()
}

fn message(value: &Value) -> &str {
    value["response"]["status"]["message"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_tenant_s_binding_to_a_reserved_node_is_denied_in_enforce_and_would_be_in_dry_run() {
    let (admission, metrics, pods) = admission();
    let (status, value) = answer(
        &admission,
        Webhook::ValidateReservation,
        &binding("p", "gpu-1", "tenant"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{value}");
    assert_eq!(value["response"]["allowed"], false, "{value}");
    assert_eq!(value["response"]["status"]["code"], 403);
    assert_contains(
        message(&value),
        r#"group "gpu" reserves node "gpu-1": the binding targets it"#,
    );
    assert_contains(message(&value), "system:kube-scheduler");

    let (_, value) = answer(
        &admission,
        Webhook::ValidateReservation,
        &binding("p", "shadow-1", "tenant"),
    )
    .await;
    assert_eq!(value["response"]["allowed"], true, "dryRun admits: {value}");
    let (_, value) = answer(
        &admission,
        Webhook::ValidateReservation,
        &binding("p", "web-1", "tenant"),
    )
    .await;
    assert_eq!(value["response"]["allowed"], true, "not a pool node: {value}");
    let (_, value) = answer(
        &admission,
        Webhook::ValidateReservation,
        &binding("p", "gpu-1", "alice"),
    )
    .await;
    assert_eq!(value["response"]["allowed"], true, "an allowed user: {value}");
    assert_eq!(*pods.reads.lock().expect("not poisoned"), 4);

    let text = metrics.encode();
    for sample in [
        r#"pod_director_binding_pod_lookups_total{result="found"} 4"#,
        r#"pod_director_reservation_decisions_total{group="gpu",decision="denied"} 1"#,
        r#"pod_director_reservation_decisions_total{group="shadow",decision="would_deny"} 1"#,
        r#"pod_director_reservation_decisions_total{group="gpu",decision="exempt"} 1"#,
    ] {
        assert_contains(&text, sample);
    }
}

#[tokio::test]
async fn a_trusted_scheduler_s_binding_is_admitted_without_reading_its_pod() {
    let (admission, _, pods) = admission();
    for scheduler in ["system:kube-scheduler", "system:serviceaccount:sched:second"] {
        let (status, value) = answer(
            &admission,
            Webhook::ValidateReservation,
            &binding("p", "gpu-1", scheduler),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(value["response"]["allowed"], true, "{scheduler}: {value}");
        assert_eq!(value["response"]["auditAnnotations"], Value::Null, "{value}");
    }
    assert_eq!(*pods.reads.lock().expect("not poisoned"), 0, "no pod read");
}

#[tokio::test]
async fn a_binding_whose_pod_cannot_be_read_is_undecidable() {
    let (admission, metrics, _) = admission();
    let (status, value) = answer(
        &admission,
        Webhook::ValidateReservation,
        &binding("down", "gpu-1", "tenant"),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{value}");
    assert_contains(message(&value), "pod batch/down (the binding's) cannot be read");
    assert_contains(
        &metrics.encode(),
        r#"pod_director_binding_pod_lookups_total{result="error"} 1"#,
    );
    // A pod that does not exist: the API server refuses its binding; nothing to decide.
    let (status, value) = answer(
        &admission,
        Webhook::ValidateReservation,
        &binding("gone", "gpu-1", "tenant"),
    )
    .await;
    assert_eq!(
        (status, value["response"]["allowed"].clone()),
        (StatusCode::OK, json!(true))
    );
    // Without a pod source (no cluster client), a binding cannot be decided either.
    let (bare, _) = crate::testing::admission(CONFIG, &[]);
    let (status, _) = answer(&bare, Webhook::ValidateReservation, &binding("p", "gpu-1", "tenant")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
}

#[tokio::test]
async fn a_binding_without_a_target_is_refused_as_unreadable() {
    let (admission, _, _) = admission();
    let mut body: Value = serde_json::from_slice(&binding("p", "", "tenant")).expect("JSON");
    let (status, value) = answer(
        &admission,
        Webhook::ValidateReservation,
        &serde_json::to_vec(&body).unwrap_or_default(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{value}");
    assert_contains(message(&value), "request.object is not a valid v1 Binding");
    body["request"]["object"] = json!({"kind": "Binding", "apiVersion": "v1", "metadata": {}, "target": "gpu-1"});
    let (status, _) = answer(
        &admission,
        Webhook::ValidateReservation,
        &serde_json::to_vec(&body).unwrap_or_default(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = answer(
        &admission,
        Webhook::Validate,
        &serde_json::to_vec(&body).unwrap_or_default(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "/validate reads the target too");
    // At /mutate a binding is admitted untouched, whatever its object.
    let (status, value) = answer(
        &admission,
        Webhook::Mutate,
        &serde_json::to_vec(&body).unwrap_or_default(),
    )
    .await;
    assert_eq!(
        (status, value["response"]["allowed"].clone()),
        (StatusCode::OK, json!(true))
    );
}

/// Groups without reservations: `ci` in enforce (namespace `batch`), `web` in dryRun (`dry`).
const GROUPS: &str = "trustedSchedulers: {users: [second-scheduler]}\ngroups:\n  \
                      ci:\n    mode: enforce\n    nodeSelector: {pool: ci}\n  \
                      web:\n    mode: dryRun\n    nodeSelector: {pool: web}\n";

/// The admission path on [`GROUPS`], nodes `ci-1` and `web-1`, pending pods `batch/p`, `dry/p`.
fn validating() -> (Admission, Metrics, Arc<Pods>) {
    let (admission, metrics) = crate::testing::admission(GROUPS, &[("batch", "ci"), ("dry", "web")]);
    let nodes = StaticNodes::new();
    nodes.insert(node("ci-1", &[("pool", "ci")], &[], false));
    nodes.insert(node("web-1", &[("pool", "web")], &[], false));
    let pods = Arc::new(Pods::default());
    pods.pods
        .lock()
        .expect("not poisoned")
        .extend([("batch/p".to_owned(), pending("p")), ("dry/p".to_owned(), pending("p"))]);
    let admission = admission
        .with_nodes(Arc::new(Nodes::new(Arc::new(nodes))), metrics.nodes.clone())
        .with_pods(pods.clone(), metrics.pods.clone());
    (admission, metrics, pods)
}

/// [`binding`] in namespace `namespace`.
fn binding_in(namespace: &str, pod: &str, target: &str, user: &str) -> Vec<u8> {
    let mut body: Value = serde_json::from_slice(&binding(pod, target, user)).expect("JSON");
    body["request"]["namespace"] = json!(namespace);
    body["request"]["object"]["metadata"]["namespace"] = json!(namespace);
    serde_json::to_vec(&body).unwrap_or_default()
}

#[tokio::test]
async fn a_tenant_s_binding_outside_its_group_s_nodes_is_denied_at_validate() {
    let (admission, metrics, pods) = validating();
    let (status, value) = answer(
        &admission,
        Webhook::Validate,
        &binding_in("batch", "p", "web-1", "tenant"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{value}");
    assert_eq!(value["response"]["allowed"], false, "{value}");
    assert_eq!(value["response"]["status"]["code"], 403);
    assert_contains(
        message(&value),
        r#"the binding does not satisfy placement group "ci": binding target: node "web-1" is not a node of the group"#,
    );
    assert_contains(message(&value), "bind the pod to a node of the group");
    let (_, value) = answer(
        &admission,
        Webhook::Validate,
        &binding_in("batch", "p", "gone-1", "tenant"),
    )
    .await;
    assert_eq!(value["response"]["allowed"], false, "{value}");
    assert_contains(message(&value), r#"binding target: node "gone-1" does not exist"#);
    let (_, value) = answer(
        &admission,
        Webhook::Validate,
        &binding_in("batch", "p", "ci-1", "tenant"),
    )
    .await;
    assert_eq!(value["response"]["allowed"], true, "a node of the group: {value}");
    let (_, value) = answer(&admission, Webhook::Validate, &binding_in("dry", "p", "ci-1", "tenant")).await;
    assert_eq!(value["response"]["allowed"], true, "dryRun admits: {value}");
    assert_eq!(*pods.reads.lock().expect("not poisoned"), 4);
    let text = metrics.encode();
    for sample in [
        r#"pod_director_decisions_total{group="ci",mode="enforce",decision="denied",webhook="validate"} 2"#,
        r#"pod_director_decisions_total{group="ci",mode="enforce",decision="noop",webhook="validate"} 1"#,
        r#"pod_director_decisions_total{group="web",mode="dryRun",decision="would_deny",webhook="validate"} 1"#,
    ] {
        assert_contains(&text, sample);
    }
}

#[tokio::test]
async fn at_validate_a_trusted_scheduler_s_binding_and_one_outside_any_group_read_no_pod() {
    let (admission, _, pods) = validating();
    for (namespace, user) in [
        ("batch", "system:kube-scheduler"),
        ("batch", "second-scheduler"),
        ("elsewhere", "tenant"),
    ] {
        let (status, value) = answer(
            &admission,
            Webhook::Validate,
            &binding_in(namespace, "p", "web-1", user),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(value["response"]["allowed"], true, "{namespace}, {user}: {value}");
    }
    assert_eq!(*pods.reads.lock().expect("not poisoned"), 0, "no pod read");
}
