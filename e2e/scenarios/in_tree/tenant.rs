//! A Capsule-style tenant under the in-tree plugins' annotation: its namespace carries the
//! node-selector annotation only (no group label), as Capsule writes it for a Tenant with
//! `spec.nodeSelector`. The tenant (an impersonated user with a Role to write pods, bind them
//! and a ClusterRole to edit its own namespace) does the same on both servers:
//!
//! - its pods get the selector, and one asking for another tenant's is refused (both servers);
//! - `pods/binding` is a subresource, which neither the plugins nor pod-director's in-tree
//!   webhooks look at: a tenant allowed to bind places its pod on a node outside the selector on
//!   both servers alike (the plugins' hole, kept: RBAC is what closes it);
//! - removing or changing the annotation: the plugins have no guard (the reference server
//!   stores the change), pod-director's namespace guard in enforce refuses it; a trusted admin
//!   (`system:masters`) changes it, and the next pod gets the new selector.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::{NODE_SELECTOR, Outcome};
use crate::harness::k8s::{self, IMAGE, impersonating, pod_from};
use crate::harness::plugins::Reference;
use crate::harness::{Env, apply_rbac, suffix};

const KEY: &str = "e2e.pod-director.io/tenant";

/// The tenant's grants in `namespace`, for `user`.
fn grants(namespace: &str, user: &str, cluster_role: &str) -> Vec<Value> {
    let subjects = json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]);
    vec![
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "tenant", "namespace": namespace},
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list", "update", "patch"]},
                {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
            ]
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "tenant", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tenant"},
            "subjects": subjects,
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": cluster_role},
            "rules": [{"apiGroups": [""], "resources": ["namespaces"], "resourceNames": [namespace], "verbs": ["get", "patch", "update"]}]
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": cluster_role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
            "subjects": subjects,
        }),
    ]
}

/// Whether `message` is RBAC's refusal (a grant just made is not seen yet), not admission's.
fn rbac_refusal(outcome: &Outcome) -> bool {
    matches!(outcome, Outcome::Refused { status: 403, message } if message.contains(" cannot "))
}

/// Creates a pod as the tenant through `client`, retrying RBAC's refusals for a few seconds.
async fn create(client: &Client, namespace: &str, pod: &Pod) -> Outcome {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let created = k8s::create_pod(client, namespace, pod, false).await;
        let outcome = Outcome::of(created.status, &created.body);
        if !rbac_refusal(&outcome) || tokio::time::Instant::now() > deadline {
            return outcome;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Binds pod `namespace/name` to `node` through `client` (`pods/binding`); the API server's answer.
async fn bind(client: &Client, namespace: &str, name: &str, node: &str) -> Result<Value, kube::Error> {
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    });
    let request = kube::core::Request::new(format!("/api/v1/namespaces/{namespace}/pods/{name}/binding"))
        .create(
            &PostParams::default(),
            serde_json::to_vec(&binding).expect("serializes"),
        )
        .expect("a binding request");
    client.request::<Value>(request).await
}

async fn annotate(client: &Client, namespace: &str, value: Value) -> Result<Namespace, kube::Error> {
    let patch = json!({"metadata": {"annotations": {NODE_SELECTOR: value}}});
    Api::<Namespace>::all(client.clone())
        .patch(namespace, &PatchParams::default(), &Patch::Merge(&patch))
        .await
}

fn annotation(namespace: &Namespace) -> Option<&str> {
    namespace
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(NODE_SELECTOR))
        .map(String::as_str)
}

/// A pod the scheduler leaves alone (no scheduler of that name runs): bound by hand.
fn unscheduled(name: &str) -> Pod {
    pod_from(json!({
        "metadata": {"name": name},
        "spec": {"schedulerName": "e2e-binds-by-hand", "containers": [{"name": "app", "image": IMAGE}]},
    }))
}

fn plain(name: &str, selector: Value) -> Pod {
    let mut pod = unscheduled(name);
    if let Some(spec) = pod.spec.as_mut() {
        spec.node_selector = serde_json::from_value(selector).expect("a selector");
    }
    pod
}

fn selector_of(outcome: &Outcome) -> Option<&Value> {
    match outcome {
        Outcome::Stored { node_selector, .. } => Some(node_selector),
        Outcome::Refused { .. } => None,
    }
}

/// The tenant's story on both servers; panics at the first difference from what is described above.
pub(super) async fn a_capsule_tenant_cannot_escape(env: &Env, reference: &Reference, prefix: &str) {
    let namespace = format!("{prefix}-capsule");
    let annotations = [(NODE_SELECTOR.to_owned(), format!("{KEY}=acme"))].into();
    env.annotated_namespace(&namespace, &annotations).await;
    reference.namespace(&namespace, &annotations).await;
    let user = format!("tenant-{}", suffix());
    let cluster_role = format!("e2e-{user}");
    apply_rbac(&env.client, &namespace, grants(&namespace, &user, &cluster_role)).await;
    apply_rbac(&reference.client, &namespace, grants(&namespace, &user, &cluster_role)).await;
    let tenant = impersonating(&user, &["system:authenticated"]).await;
    let tenant_ref = reference.impersonating(&user, &["system:authenticated"]).await;
    let acme = json!({KEY: "acme"});

    // Its pods get the selector; another tenant's is refused.
    for (name, selector, expected) in [
        ("free", Value::Null, Some(&acme)),
        ("same", json!({KEY: "acme"}), Some(&acme)),
        ("escape", json!({KEY: "other"}), None),
    ] {
        let pod = plain(name, selector);
        let (main, plugins) = (
            create(&tenant, &namespace, &pod).await,
            create(&tenant_ref, &namespace, &pod).await,
        );
        println!("tenant pod {name}: pod-director {main:?}\n    plugins {plugins:?}");
        assert_eq!(selector_of(&plugins), expected, "the plugins and the tenant's {name}");
        assert!(
            main.agrees(&plugins),
            "{name}: pod-director {main:?}, plugins {plugins:?}"
        );
    }

    // A binding is a subresource: neither looks at it.
    let node = format!("e2e-intree-elsewhere-{}", suffix());
    bind(&tenant_ref, &namespace, "free", &node)
        .await
        .expect("the plugins ignore pods/binding");
    bind(&tenant, &namespace, "free", &node)
        .await
        .expect("pod-director's in-tree webhooks ignore pods/binding, as the plugins do");
    let bound = env.get_pod(&namespace, "free").await;
    assert_eq!(
        bound.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some(node.as_str())
    );

    // The annotation: no guard in the plugins; pod-director's guard refuses the tenant.
    for change in [Value::Null, json!(format!("{KEY}=other"))] {
        let refused = annotate(&tenant, &namespace, change.clone()).await;
        let Err(kube::Error::Api(status)) = &refused else {
            panic!("the namespace guard let the tenant set the annotation to {change}: {refused:?}");
        };
        println!(
            "the guard refused the tenant's annotation {change}: {} {}",
            status.code, status.message
        );
        assert!(
            !status.message.contains(" cannot "),
            "refused by the guard, not RBAC: {status:?}"
        );
    }
    let stored = Api::<Namespace>::all(env.client.clone())
        .get(&namespace)
        .await
        .expect("the namespace");
    assert_eq!(annotation(&stored), Some(format!("{KEY}=acme").as_str()));
    let on_reference = annotate(&tenant_ref, &namespace, Value::Null)
        .await
        .expect("the plugins have no guard: the tenant removes the annotation");
    assert_eq!(annotation(&on_reference), None);

    // A trusted admin changes it; the next pod gets the new selector.
    annotate(&env.client, &namespace, json!(format!("{KEY}=beta")))
        .await
        .expect("the admin changes the annotation");
    let mut attempt = 0;
    k8s::eventually("the tenant's pods to get the admin's new selector", || {
        attempt += 1;
        let (tenant, namespace) = (&tenant, &namespace);
        async move {
            let pod = plain(&format!("after-{attempt}"), Value::Null);
            let created = k8s::create_pod(tenant, namespace, &pod, true).await;
            let outcome = Outcome::of(created.status, &created.body);
            (selector_of(&outcome) == Some(&json!({KEY: "beta"}))).then_some(())
        }
    })
    .await;
    delete_cluster_rbac(&env.client, &cluster_role).await;
}

async fn delete_cluster_rbac(client: &Client, name: &str) {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let dp = kube::api::DeleteParams::default();
    let _ = Api::<ClusterRoleBinding>::all(client.clone()).delete(name, &dp).await;
    let _ = Api::<ClusterRole>::all(client.clone()).delete(name, &dp).await;
}
