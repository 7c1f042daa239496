//! The Node cache on a real API server: feasible-node counts on every decision
//! (Node objects created through the API, played by kwok), `onNoFeasibleNode`'s
//! warning, `pod_director_group_nodes`, and pods naming their node
//! (`spec.nodeName`) checked against the group — created as a tenant would — and
//! running there (or, denied, nowhere).

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use crate::harness::k8s::{create_pod, eventually, impersonating};
use crate::harness::{Decision, Env, Target, notice, pod, suffix};

pub(crate) const POOL_LABEL: &str = "e2e.pod-director.io/nodes-pool";
const TAINT_KEY: &str = "e2e.pod-director.io/nodes";
/// The tenant the nodeName pods are created as (impersonated).
const TENANT: &str = "e2e-tenant";

/// A Node object: labels, taints, cordon.
pub(crate) fn node(name: &str, pool: &str, taints: Value, unschedulable: bool) -> Node {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {POOL_LABEL: pool, "kubernetes.io/os": "linux"}},
        "spec": {"taints": taints, "unschedulable": unschedulable},
    }))
    .expect("a Node")
}

/// The pool's own taint, which the group tolerates.
pub(crate) fn pool_taint() -> Value {
    json!({"key": TAINT_KEY, "value": "teal", "effect": "NoSchedule"})
}

/// A plain pod naming its node.
fn bound_to(name: &str, node: &str) -> Pod {
    let mut pod = pod(name);
    pod.spec.as_mut().expect("a spec").node_name = Some(node.to_owned());
    pod
}

fn count(line: &Decision, field: &str) -> Option<u64> {
    line.get(field).as_u64()
}

/// Creates dry-run pods until pod-director's mutate decision counts `expected`
/// feasible nodes (the Node cache follows the API server's watch), and returns that decision.
async fn decision_with_feasible(env: &Env, ns: &str, prefix: &str, expected: u64) -> Decision {
    let mut attempt = 0;
    eventually(&format!("a decision counting {expected} feasible nodes"), || {
        attempt += 1;
        let name = format!("{prefix}-{attempt}");
        async move {
            let created = env.create_pod_dry_run(ns, &pod(&name)).await;
            assert!(created.status.is_success(), "{created:?}");
            let line = env.decision(ns, &name, "mutate").await;
            (count(&line, "placement.feasible_nodes") == Some(expected)).then_some(line)
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feasible_nodes_follow_the_nodes_labels_taints_and_cordons() {
    let env = Env::start("nodes").await;
    let warn = env.namespace(Some("e2e-nodes-warn")).await;
    let dry = env.namespace(Some("e2e-nodes-dryrun")).await;
    let sfx = suffix();

    // The pool has no node: every decision says 0, with the warning (warn) or the flag alone (dryRun).
    let created = env.create_admitted_pod(&warn, &pod("lonely")).await;
    let line = env.decision(&warn, "lonely", "mutate").await;
    assert_eq!(line.decision(), "would_patch", "{line:?}");
    assert_eq!(count(&line, "placement.feasible_nodes"), Some(0), "{line:?}");
    assert_eq!(line.get("placement.no_feasible_node"), &json!(true));
    let warning = line.text("placement.warning");
    assert!(warning.contains("no feasible node"), "{warning}");
    assert!(
        created.warnings.iter().any(|w| w == warning),
        "the client got it: {:?}",
        created.warnings
    );
    env.create_admitted_pod(&dry, &pod("lonely")).await;
    let line = env.decision(&dry, "lonely", "mutate").await;
    assert_eq!(count(&line, "placement.feasible_nodes"), Some(0), "{line:?}");
    assert_eq!(line.get("placement.no_feasible_node"), &json!(true));
    assert_eq!(
        line.get("placement.warning"),
        &Value::Null,
        "dryRun never warns the client"
    );

    // A matching node (its taint tolerated by the group) → the next decision says 1.
    env.create_node(&node(&format!("e2e-teal-{sfx}"), "teal", json!([pool_taint()]), false))
        .await;
    let line = decision_with_feasible(&env, &warn, "one", 1).await;
    assert_eq!(
        count(&line, "placement.feasible_nodes_before"),
        Some(0),
        "without the group's toleration the pod fits nowhere"
    );
    assert_eq!(line.get("placement.no_feasible_node"), &json!(false));
    assert!(!line.text("placement.warning").contains("no feasible node"), "{line:?}");

    // Cordoned, or tainted NoSchedule / NoExecute untolerated: not counted. PreferNoSchedule: counted.
    let other = |key: &str, effect: &str| json!([pool_taint(), {"key": key, "effect": effect}]);
    for (name, taints, cordoned) in [
        ("cordoned", json!([pool_taint()]), true),
        ("noschedule", other("e2e.pod-director.io/broken", "NoSchedule"), false),
        ("noexecute", other("e2e.pod-director.io/broken", "NoExecute"), false),
        ("prefer", other("e2e.pod-director.io/busy", "PreferNoSchedule"), false),
    ] {
        env.create_node(&node(&format!("e2e-teal-{name}-{sfx}"), "teal", taints, cordoned))
            .await;
    }
    // A node of another pool.
    env.create_node(&node(&format!("e2e-gray-{sfx}"), "gray", json!([]), false))
        .await;
    let line = decision_with_feasible(&env, &warn, "two", 2).await;
    assert_eq!(line.text("placement.group"), "e2e-nodes-warn");

    // The group gauge: the nodes that satisfy the group's own placement.
    if let Target::Local = env.settings.target {
        let text = eventually("pod_director_group_nodes to reach 2", || async {
            let text = env.metrics().await.expect("GET /metrics");
            (text.contains("pod_director_group_nodes{group=\"e2e-nodes-warn\"} 2")
                && text.contains("pod_director_group_nodes{group=\"e2e-nodes-enforce\"} 2"))
            .then_some(text)
        })
        .await;
        assert!(
            text.contains(
                "pod_director_no_feasible_node_total{group=\"e2e-nodes-warn\",mode=\"warn\",webhook=\"mutate\"}"
            ),
            "{text}"
        );
    } else {
        notice("SKIPPED the group_nodes gauge check in cluster mode: the probe port is not reachable");
    }
}

/// A client acting as the tenant (impersonation), allowed to create pods in `namespaces`.
async fn tenant(env: &Env, namespaces: &[&str]) -> Client {
    for ns in namespaces {
        env.apply_rbac(vec![
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "e2e-tenant", "namespace": ns},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list"]}]
            }),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "e2e-tenant", "namespace": ns},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "e2e-tenant"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": TENANT}]
            }),
        ])
        .await;
    }
    impersonating(TENANT, &[]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_cannot_land_a_pod_on_a_node_outside_its_enforce_group() {
    let env = Env::start("nodename").await;
    let enforce = env.namespace(Some("e2e-nodes-enforce")).await;
    let dry = env.namespace(Some("e2e-nodes-dryrun")).await;
    let sfx = suffix();
    let inside = format!("e2e-teal-in-{sfx}");
    let outside = format!("e2e-gray-out-{sfx}");
    env.create_node(&node(&inside, "teal", json!([pool_taint()]), false))
        .await;
    env.create_node(&node(&outside, "gray", json!([]), false)).await;
    let client = tenant(&env, &[&enforce, &dry]).await;
    // The Node cache needs a moment to see the new nodes; an uncached node is fetched live anyway.

    // Outside the group: denied in enforce, naming the node and the unmet requirement.
    let denied = create_pod(&client, &enforce, &bound_to("escape", &outside), false).await;
    assert_eq!(denied.status, http::StatusCode::FORBIDDEN, "{denied:?}");
    let message = denied.error_message().unwrap_or_default();
    assert!(
        message.contains(&format!("node \"{outside}\" is not a node of the group")),
        "{message}"
    );
    assert!(
        message.contains(&format!("nodeSelector {POOL_LABEL}=teal")),
        "{message}"
    );
    assert!(message.contains("remove spec.nodeName"), "says what to do: {message}");
    assert!(
        env.pods(&enforce).get_opt("escape").await.expect("GET").is_none(),
        "nothing stored"
    );
    let line = env.decision(&enforce, "escape", "validate").await;
    assert_eq!(line.decision(), "denied", "{line:?}");
    assert_eq!(
        env.decision(&enforce, "escape", "mutate").await.decision(),
        "patched",
        "decided like any pod"
    );

    // An unknown node: denied in enforce, saying so.
    let unknown = create_pod(
        &client,
        &enforce,
        &bound_to("nowhere", &format!("e2e-ghost-{sfx}")),
        false,
    )
    .await;
    assert_eq!(unknown.status, http::StatusCode::FORBIDDEN, "{unknown:?}");
    assert!(
        unknown.error_message().unwrap_or_default().contains("does not exist"),
        "{unknown:?}"
    );

    // dryRun: admitted, would_deny logged.
    let created = create_pod(&client, &dry, &bound_to("escape", &outside), false).await;
    assert!(created.status.is_success(), "{created:?}");
    let line = env.decision(&dry, "escape", "validate").await;
    assert_eq!(line.decision(), "would_deny", "{line:?}");
    let violations = line.get("placement.violations").to_string();
    assert!(violations.contains(&outside), "{violations}");
    let created = create_pod(&client, &dry, &bound_to("nowhere", &format!("e2e-ghost-{sfx}")), false).await;
    assert!(created.status.is_success(), "{created:?}");
    assert_eq!(env.decision(&dry, "nowhere", "validate").await.decision(), "would_deny");

    // A node of the group: admitted, with the group's placement.
    let created = create_pod(&client, &enforce, &bound_to("allowed", &inside), false).await;
    assert!(created.status.is_success(), "{created:?}");
    let stored = env.get_pod(&enforce, "allowed").await;
    let spec = stored.spec.expect("a spec");
    assert_eq!(spec.node_name.as_deref(), Some(inside.as_str()));
    assert_eq!(
        spec.node_selector.and_then(|s| s.get(POOL_LABEL).cloned()).as_deref(),
        Some("teal")
    );
    assert_eq!(env.decision(&enforce, "allowed", "validate").await.decision(), "noop");

    // Where they run: the allowed pod on its node (kwok plays it); nothing on the node outside.
    if env.pods_run() {
        let running = env.wait_running(&enforce, "allowed").await;
        assert_eq!(running.spec.and_then(|s| s.node_name).as_deref(), Some(inside.as_str()));
        let on_outside = ListParams::default().fields(&format!("spec.nodeName={outside}"));
        let escaped: Vec<String> = Api::<Pod>::namespaced(env.client.clone(), &enforce)
            .list(&on_outside)
            .await
            .expect("pods listed")
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        assert!(escaped.is_empty(), "no enforce pod runs on {outside}: {escaped:?}");
    } else {
        notice("SKIPPED the Running check in cluster mode: set E2E_KWOK=true when kwok plays the suite's nodes");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_naming_a_cordoned_node_of_its_group_is_admitted_in_enforce_and_dry_run() {
    let env = Env::start("cordon").await;
    let enforce = env.namespace(Some("e2e-nodes-enforce")).await;
    let dry = env.namespace(Some("e2e-nodes-dryrun")).await;
    let cordoned = format!("e2e-teal-cordoned-{}", suffix());
    env.create_node(&node(&cordoned, "teal", json!([pool_taint()]), false))
        .await;
    // Cordon it as kubectl does; on a real cluster a cordon never comes alone: the controller
    // manager adds the node.kubernetes.io/unschedulable:NoSchedule taint.
    let nodes = kube::Api::<Node>::all(env.client.clone());
    nodes
        .patch(
            &cordoned,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"unschedulable": true}})),
        )
        .await
        .expect("cordoned");
    eventually("the controller manager's unschedulable taint", || async {
        let node = nodes.get(&cordoned).await.ok()?;
        node.spec
            .and_then(|s| s.taints)
            .into_iter()
            .flatten()
            .any(|t| t.key == "node.kubernetes.io/unschedulable" && t.effect == "NoSchedule")
            .then_some(())
    })
    .await;
    let client = tenant(&env, &[&enforce, &dry]).await;
    let created = create_pod(&client, &enforce, &bound_to("on-cordoned", &cordoned), false).await;
    assert!(created.status.is_success(), "the kubelet would run it: {created:?}");
    assert_eq!(
        env.decision(&enforce, "on-cordoned", "validate").await.decision(),
        "noop"
    );
    let created = create_pod(&client, &dry, &bound_to("on-cordoned", &cordoned), false).await;
    assert!(created.status.is_success(), "{created:?}");
    let line = env.decision(&dry, "on-cordoned", "validate").await;
    assert_eq!(line.decision(), "noop", "not a would-be denial either: {line:?}");
}
