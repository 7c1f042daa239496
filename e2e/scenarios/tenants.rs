//! A tenant cannot escape an enforce group. Acting as a tenant (impersonation:
//! a user with a Role to create pods and DaemonSets in its namespace and to
//! patch that namespace), every escape is tried against the real API server:
//! a forged DaemonSet owner reference, a DaemonSet of its own, a forged mirror
//! annotation, relabelling the namespace. And the legitimate paths still work:
//! the real DaemonSet controller's pods in a group that allows DaemonSets, the
//! API server's binding path, an allowed admin relabelling.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Binding, Namespace, Node, Pod};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

use crate::fixtures::{Placement, controller, group_toleration, labels, workload, workload_spec};
use crate::harness::k8s::{IMAGE, eventually, impersonating, label_namespace, required_terms};
use crate::harness::{Decision, Env, notice, pool_labels, pool_node, suffix};

const DAEMON_SET_CONTROLLER: &str = "system:serviceaccount:kube-system:daemon-set-controller";

/// A tenant: a user of its own, allowed to create pods and DaemonSets in `namespace`
/// and to get, patch and update that namespace and its `status` and `finalize`
/// subresources (and to create namespaces).
struct Tenant {
    user: String,
    namespace: String,
    client: Client,
    cluster_role: String,
}

impl Tenant {
    async fn new(env: &Env, group: &str) -> Tenant {
        let namespace = env.namespace(Some(group)).await;
        let user = format!("tenant-{}", suffix());
        let cluster_role = format!("e2e-{user}");
        let subjects = json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]);
        env.apply_rbac(vec![
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "tenant", "namespace": namespace},
                "rules": [
                    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list", "watch"]},
                    {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["create", "get", "list", "update", "patch"]},
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
                "rules": [
                    {"apiGroups": [""], "resources": ["namespaces", "namespaces/status", "namespaces/finalize"], "resourceNames": [namespace], "verbs": ["get", "patch", "update"]},
                    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["create"]},
                ]
            }),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": cluster_role},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
                "subjects": subjects,
            }),
        ])
        .await;
        let client = impersonating(&user, &["system:authenticated"]).await;
        Tenant {
            user,
            namespace,
            client,
            cluster_role,
        }
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Creates a pod as the tenant: the stored pod, or the API server's error.
    async fn create_pod(&self, pod: &Pod) -> Result<Pod, kube::Error> {
        // RBAC is cached by the API server's authorizer for a moment: retry a fresh Forbidden.
        retry_forbidden(|| async { self.pods().create(&PostParams::default(), pod).await }).await
    }

    async fn patch_namespace(&self, labels: Value) -> Result<Namespace, kube::Error> {
        retry_forbidden(|| label_namespace(&self.client, &self.namespace, labels.clone())).await
    }

    /// Deletes the cluster-scoped RBAC objects (the namespace goes with the Env).
    async fn remove(&self, admin: &Client) {
        let dp = DeleteParams::default();
        let _ = Api::<ClusterRoleBinding>::all(admin.clone())
            .delete(&self.cluster_role, &dp)
            .await;
        let _ = Api::<ClusterRole>::all(admin.clone())
            .delete(&self.cluster_role, &dp)
            .await;
    }
}

/// Runs `call` until it is not a 403 from RBAC (just granted), for a few seconds at most.
async fn retry_forbidden<T, F, Fut>(mut call: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        match call().await {
            Err(kube::Error::Api(status))
                if status.code == 403
                    && !status.message.contains("pod-director")
                    && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            other => return other,
        }
    }
}

fn denial(result: &Result<impl std::fmt::Debug, kube::Error>) -> String {
    match result {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403, "{status:?}");
            status.message.clone()
        }
        other => panic!("expected a denial, got {other:?}"),
    }
}

fn owned_by_daemon_set(name: &str, controller: bool) -> Pod {
    let mut pod = workload(name);
    pod.metadata.owner_references = Some(vec![
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet", "name": "forged",
            "uid": "00000000-0000-4000-8000-000000000000", "controller": controller,
        }))
        .expect("an OwnerReference"),
    ]);
    pod
}

/// Creates Nodes `(name, labels)` for the scenario (deleted with the Env, also on panic).
async fn create_nodes(env: &Env, nodes: &[(&str, Value)]) {
    for (name, labels) in nodes {
        let node: Node = serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).expect("a Node");
        env.create_node(&node).await;
    }
}

/// The placement fields of a DaemonSet's pod template.
fn template_placement(ds: &DaemonSet) -> Placement {
    let template = ds.spec.clone().expect("a spec").template;
    Placement::of(&Pod {
        metadata: template.metadata.unwrap_or_default(),
        spec: template.spec,
        status: None,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_s_forged_daemonset_owner_does_not_exempt_its_pod() {
    let env = Env::start("forged-owner").await;
    // In an enforce group, and in one that allows DaemonSets: only the controller is exempt there.
    for group in ["e2e-enforce", "e2e-agents"] {
        let tenant = Tenant::new(&env, group).await;
        for (name, controller) in [("forged-controller", true), ("forged-owner", false)] {
            let stored = tenant
                .create_pod(&owned_by_daemon_set(name, controller))
                .await
                .unwrap_or_else(|e| panic!("{group}: {name} admitted: {e}"));
            // e2e-agents has the same placement as e2e-enforce (e2e/scenarios/values.yaml).
            assert_eq!(
                Placement::of(&stored),
                Placement::enforced(),
                "{group}/{name}: placed, not skipped"
            );
            for webhook in ["mutate", "validate"] {
                let line = env.decision(&tenant.namespace, name, webhook).await;
                assert_ne!(line.decision(), "skipped", "{group}/{name} at {webhook}: {line:?}");
                assert_eq!(line.text("admission.request.user"), tenant.user);
                assert_eq!(line.text("admission.object.owner.kind"), "DaemonSet");
            }
            assert_eq!(
                env.decision(&tenant.namespace, name, "mutate").await.decision(),
                "patched"
            );
        }
        tenant.remove(&env.client).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_s_daemonset_in_an_enforce_group_only_targets_the_group_s_nodes() {
    let env = Env::start("tenant-ds").await;
    let tenant = Tenant::new(&env, "e2e-enforce").await;
    let id = suffix();
    let blue = format!("e2e-blue-{id}");
    let red = format!("e2e-red-{id}");
    create_nodes(&env, &[(&blue, pool_labels("blue")), (&red, pool_labels("red"))]).await;
    let daemon_sets: Api<DaemonSet> = Api::namespaced(tenant.client.clone(), &tenant.namespace);
    let created = retry_forbidden(|| async {
        daemon_sets
            .create(
                &PostParams::default(),
                &controller::<DaemonSet>("agent", workload_spec()),
            )
            .await
    })
    .await
    .expect("the tenant's DaemonSet is admitted");
    assert_eq!(
        template_placement(&created),
        Placement::enforced(),
        "the stored DaemonSet carries the group's placement"
    );
    let mutate = env.decisions(&tenant.namespace, "agent", "mutate", 1).await;
    assert_eq!(mutate[0].decision(), "patched");
    let ops = mutate[0].patch().as_array().expect("a JSON Patch");
    let in_template = |op: &Value| {
        op["path"]
            .as_str()
            .is_some_and(|p| p.starts_with("/spec/template/spec/"))
    };
    assert!(ops.iter().all(in_template), "{:?}", mutate[0]);

    // The real DaemonSet controller creates pods only for the group's node.
    eventually("the DaemonSet controller's pod on the blue node", || async {
        (!env.list_pods(&tenant.namespace, "app=agent").await.is_empty()).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pods = env.list_pods(&tenant.namespace, "app=agent").await;
    let targets: Vec<String> = pods.iter().map(target_node).collect();
    assert!(targets.contains(&blue), "a pod for {blue}: {targets:?}");
    assert!(
        !targets.contains(&red),
        "no pod for {red}, outside the group: {targets:?}"
    );
    let first = env.list_pods(&tenant.namespace, "app=agent").await[0]
        .metadata
        .name
        .clone();
    let line = env
        .decision(&tenant.namespace, &first.expect("named"), "validate")
        .await;
    assert_eq!(line.text("admission.request.user"), DAEMON_SET_CONTROLLER);
    assert_eq!(
        line.decision(),
        "noop",
        "decided (the group does not allow DaemonSets), and compliant: {line:?}"
    );
    // The controller replaces the template's required node affinity with its node's name;
    // /mutate ANDs the group's term back in (the pod still targets its node).
    let mutated = controller_pod_mutations(&env, &tenant.namespace).await;
    assert!(!mutated.is_empty(), "the controller's pods were decided at /mutate");
    for line in &mutated {
        assert!(
            matches!(line.decision(), "noop" | "patched"),
            "decided, not skipped: {line:?}"
        );
    }

    // An update that drops the placement: put back by /mutate, whatever the tenant sends.
    let mut stripped = daemon_sets.get("agent").await.expect("the DaemonSet");
    let spec = stripped.spec.as_mut().expect("a spec");
    if let Some(pod_spec) = spec.template.spec.as_mut() {
        pod_spec.node_selector = None;
        pod_spec.tolerations = None;
        pod_spec.affinity = None;
    }
    let updated = retry_forbidden(|| async { daemon_sets.replace("agent", &PostParams::default(), &stripped).await })
        .await
        .expect("the update is admitted");
    // The group's placement is back (the tenant's own nodeSelector key, toleration and term are gone).
    let placed = template_placement(&updated);
    assert_eq!(
        placed.node_selector,
        labels(&[("e2e.pod-director.io/pool", "blue"), ("kubernetes.io/os", "linux")]),
        "{placed:?}"
    );
    assert_eq!(placed.tolerations, vec![group_toleration()]);
    let required = placed
        .affinity
        .and_then(|a| a.node_affinity)
        .and_then(|n| n.required_during_scheduling_ignored_during_execution)
        .map(|r| serde_json::to_value(r).unwrap_or_default());
    assert_eq!(
        required,
        Some(json!({"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a", "zone-b"]}]}]}))
    );
    tenant.remove(&env.client).await;
}

fn target_node(pod: &Pod) -> String {
    // The DaemonSet controller pins each pod with a metadata.name matchFields term.
    required_terms(pod)
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .flat_map(|f| f.values.iter().flatten())
        .next()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemonset_controller_s_pods_are_skipped_in_a_group_that_allows_daemonsets() {
    let env = Env::start("agents").await;
    let ns = env.namespace(Some("e2e-agents")).await;
    let id = suffix();
    let (a, b) = (format!("e2e-agent-a-{id}"), format!("e2e-agent-b-{id}"));
    create_nodes(
        &env,
        &[
            (&a, json!({"e2e.pod-director.io/pool": "red"})),
            (&b, json!({"e2e.pod-director.io/pool": "blue"})),
        ],
    )
    .await;
    let spec = json!({
        "containers": [{"name": "agent", "image": IMAGE}],
        "tolerations": [{"operator": "Exists"}],
    });
    let daemon_sets: Api<DaemonSet> = Api::namespaced(env.client.clone(), &ns);
    let created = daemon_sets
        .create(&PostParams::default(), &controller::<DaemonSet>("agent", spec))
        .await
        .expect("DaemonSet created");
    assert_eq!(
        template_placement(&created).node_selector,
        BTreeMap::new(),
        "the DaemonSet is left alone"
    );
    let line = env.decision(&ns, "agent", "mutate").await;
    assert_eq!(line.text("placement.skip_reason"), "daemonset_allowed");

    let found = eventually("the DaemonSet controller's pods on both nodes", || async {
        let list = env.list_pods(&ns, "app=agent").await;
        let targets: Vec<String> = list.iter().map(target_node).collect();
        (targets.contains(&a) && targets.contains(&b)).then_some(list)
    })
    .await;
    for pod in found.iter().filter(|p| [&a, &b].contains(&&target_node(p))) {
        let name = pod.metadata.name.clone().expect("named");
        assert_eq!(
            pod.spec.as_ref().and_then(|s| s.node_selector.clone()),
            None,
            "{name} untouched"
        );
        let line = env.decision(&ns, &name, "validate").await;
        assert_eq!(line.decision(), "skipped", "{line:?}");
        assert_eq!(line.text("placement.skip_reason"), "daemonset_pod");
        assert_eq!(line.text("admission.request.user"), DAEMON_SET_CONTROLLER);
    }
    // At /mutate the pods have no name yet (generateName): found by their owner.
    let mutated = controller_pod_mutations(&env, &ns).await;
    assert!(mutated.len() >= 2, "{mutated:?}");
    for line in &mutated {
        assert_eq!(line.text("placement.skip_reason"), "daemonset_pod", "{line:?}");
    }
}

/// The /mutate decisions of the DaemonSet controller's pods in `namespace`.
async fn controller_pod_mutations(env: &Env, namespace: &str) -> Vec<Decision> {
    env.decisions_with(&[
        ("webhook", "mutate"),
        ("admission.request.namespace", namespace),
        ("admission.object.owner.kind", "DaemonSet"),
        ("admission.request.user", DAEMON_SET_CONTROLLER),
    ])
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_s_forged_mirror_annotation_is_not_a_mirror_pod() {
    let env = Env::start("forged-mirror").await;
    let tenant = Tenant::new(&env, "e2e-enforce").await;
    let mut pod = workload("mirror");
    pod.metadata.annotations = Some(labels(&[("kubernetes.io/config.mirror", "f00d")]));
    // The API server requires spec.nodeName with the mirror annotation.
    pod.spec.as_mut().expect("a spec").node_name = Some("e2e-nowhere".to_owned());
    let result = tenant.create_pod(&pod).await;
    let line = env.decision(&tenant.namespace, "mirror", "mutate").await;
    assert_eq!(line.text("admission.request.user"), tenant.user);
    assert_ne!(
        line.get("placement.skip_reason"),
        &json!("mirror_pod"),
        "only a node's mirror pods are skipped: {line:?}"
    );
    // Decided like any pod of the enforce group: placed at /mutate, and refused at
    // /validate because the node it names does not exist.
    assert_eq!(line.decision(), "patched", "{line:?}");
    let error = result.expect_err("a pod naming a node that does not exist is denied in enforce");
    assert!(error.to_string().contains("does not exist"), "{error}");
    tenant.remove(&env.client).await;
}

/// A static pod's mirror as node `node` (uid `uid`) creates it: the annotation, its own node in
/// `spec.nodeName` and an owner reference to its Node, as the kubelet writes it (NodeRestriction
/// refuses any other).
fn mirror_of(name: &str, node: &str, uid: &str) -> Pod {
    let mut pod = workload(name);
    pod.metadata.annotations = Some(labels(&[("kubernetes.io/config.mirror", "c0ffee")]));
    pod.metadata.owner_references = Some(vec![
        serde_json::from_value(
            json!({"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid, "controller": true}),
        )
        .expect("an OwnerReference"),
    ]);
    pod.spec.as_mut().expect("a spec").node_name = Some(node.to_owned());
    pod
}

/// Creates `pod` in `ns` as `client`, retrying while the API server's authorizer or
/// NodeRestriction has not seen what the scenario just created (for a few seconds at most).
async fn create_as_node(client: &Client, ns: &str, pod: &Pod) -> Result<Pod, kube::Error> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        match Api::<Pod>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), pod)
            .await
        {
            Err(kube::Error::Api(status))
                if (status.code == 403 && status.message.contains("cannot create resource") || status.code == 404)
                    && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            other => return other,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_s_own_mirror_pod_is_skipped_and_a_node_cannot_mirror_another_s() {
    let env = Env::start("node-mirror").await;
    let ns = env.namespace(Some("e2e-enforce")).await;
    let node = format!("e2e-kubelet-{}", suffix());
    let other = format!("e2e-kubelet-b-{}", suffix());
    create_nodes(&env, &[(&node, json!({})), (&other, json!({}))]).await;
    let uid = |name: &str| {
        let nodes = Api::<Node>::all(env.client.clone());
        let name = name.to_owned();
        async move {
            let node = nodes.get(&name).await.expect("the node");
            node.metadata.uid.unwrap_or_default()
        }
    };
    let (uid_node, uid_other) = (uid(&node).await, uid(&other).await);
    // The API server runs the Node authorizer and NodeRestriction, as real control planes do.
    let kubelet = impersonating(
        &format!("system:node:{node}"),
        &["system:nodes", "system:authenticated"],
    )
    .await;
    let stored = create_as_node(&kubelet, &ns, &mirror_of("static-web", &node, &uid_node))
        .await
        .expect("the node's mirror pod is admitted");
    assert_eq!(Placement::of(&stored), Placement::submitted(), "left alone");
    for webhook in ["mutate", "validate"] {
        let line = env.decision(&ns, "static-web", webhook).await;
        assert_eq!(line.text("placement.skip_reason"), "mirror_pod", "{line:?}");
        assert_eq!(line.text("admission.request.user"), format!("system:node:{node}"));
    }
    // The mirror-pod exemption trusts a node for its own pods only: NodeRestriction refuses a
    // node's mirror pod of another node before any webhook is called.
    let refused = create_as_node(&kubelet, &ns, &mirror_of("static-other", &other, &uid_other))
        .await
        .expect_err("NodeRestriction refuses another node's mirror pod");
    let message = refused.to_string();
    assert!(
        message.contains("can only create pods with spec.nodeName set to itself"),
        "{message}"
    );
    assert!(
        env.decisions_with(&[
            ("admission.request.namespace", ns.as_str()),
            ("admission.request.name", "static-other")
        ])
        .await
        .is_empty(),
        "refused before pod-director was asked"
    );
}

/// A workload pod no scheduler picks up (a scheduler name nobody runs), for binding by hand.
fn unscheduled(name: &str) -> Pod {
    let mut pod = workload(name);
    if let Some(spec) = pod.spec.as_mut() {
        spec.scheduler_name = Some("e2e-binds-by-hand".to_owned());
    }
    pod
}

/// Binds pod `name` to `node` through the `pods/binding` subresource, as the scheduler does;
/// returns the stored pod, asserting it names the node.
async fn bind(env: &Env, ns: &str, name: &str, node: &str) -> Pod {
    let binding: Binding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }))
    .expect("a Binding");
    let request = kube::core::Request::new(format!("/api/v1/namespaces/{ns}/pods/{name}/binding"))
        .create(
            &PostParams::default(),
            serde_json::to_vec(&binding).expect("serializes"),
        )
        .expect("a request");
    let status: Value = env.client.request(request).await.expect("the binding is accepted");
    assert_eq!(status["status"], "Success", "{status}");
    let bound = env.get_pod(ns, name).await;
    assert_eq!(bound.spec.as_ref().and_then(|s| s.node_name.as_deref()), Some(node));
    bound
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_s_own_binding_path_is_unaffected() {
    let env = Env::start("binding").await;
    let ns = env.namespace(Some("e2e-enforce")).await;
    // A node of the group's pool: /validate decides a binding as a pod naming that node.
    let node = format!("e2e-bind-{}", suffix());
    env.create_ready_node(&pool_node(&node)).await;
    env.create_admitted_pod(&ns, &unscheduled("bound")).await;
    let bound = bind(&env, &ns, "bound", &node).await;
    assert_eq!(Placement::of(&bound), Placement::enforced());
    assert_eq!(
        env.decisions(&ns, "bound", "mutate", 1).await.len(),
        1,
        "the binding subresource is not sent to pod-director"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_widened_to_every_pod_subresource_does_not_break_binding() {
    let env = Env::start("widened").await;
    let ns = env.namespace(Some("e2e-enforce")).await;
    let node = format!("e2e-widened-{}", suffix());
    env.create_ready_node(&pool_node(&node)).await;
    // pod-director's own enforce entries, copied into configurations of the scenario's own whose
    // rules send every pod subresource (pods/binding, pods/status, …) too, failing closed.
    let (mutating, validating) = env.webhook_configurations().await;
    let widen = |rules: &mut Option<Vec<k8s_openapi::api::admissionregistration::v1::RuleWithOperations>>| {
        *rules = Some(vec![
            serde_json::from_value(
                json!({"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                "resources": ["pods", "pods/*"], "scope": "Namespaced"}),
            )
            .expect("a rule"),
        ]);
    };
    let only_ns = |selector: &mut Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>| {
        *selector = Some(
            serde_json::from_value(json!({"matchLabels": {"kubernetes.io/metadata.name": ns}})).expect("a selector"),
        );
    };
    let name = format!("zz-widened-{}", suffix());
    let mut hook = mutating
        .webhooks
        .unwrap_or_default()
        .into_iter()
        .find(|w| w.name == env.webhook_name("enforce", "mutate"))
        .expect("the enforce entry");
    hook.name = format!("{name}.mutate.e2e.pod-director.io");
    widen(&mut hook.rules);
    only_ns(&mut hook.namespace_selector);
    hook.failure_policy = Some("Fail".to_owned());
    let mut widened_mutating = k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration::default();
    widened_mutating.metadata.name = Some(name.clone());
    widened_mutating.webhooks = Some(vec![hook]);
    env.apply_mutating(&widened_mutating).await;
    let mut hook = validating
        .webhooks
        .unwrap_or_default()
        .into_iter()
        .find(|w| w.name == env.webhook_name("enforce", "validate"))
        .expect("the enforce entry");
    hook.name = format!("{name}.validate.e2e.pod-director.io");
    widen(&mut hook.rules);
    only_ns(&mut hook.namespace_selector);
    hook.failure_policy = Some("Fail".to_owned());
    let mut widened_validating = k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration::default();
    widened_validating.metadata.name = Some(name.clone());
    widened_validating.webhooks = Some(vec![hook]);
    env.apply_validating(&widened_validating).await;

    let created = env.create_admitted_pod(&ns, &unscheduled("bound")).await;
    assert!(created.error_message().is_none(), "{created:?}");
    // The binding is sent to pod-director (widened rules) and must be admitted untouched.
    bind(&env, &ns, "bound", &node).await;
    let binding_decision = eventually("pod-director's decision on the binding", || async {
        env.decisions_with(&[
            ("admission.request.namespace", ns.as_str()),
            ("admission.request.name", "bound"),
        ])
        .await
        .into_iter()
        .find(|d| d.text("placement.summary").contains("subresource pods/binding"))
    })
    .await;
    assert_eq!(binding_decision.decision(), "skipped", "{binding_decision:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_cannot_move_its_namespace_to_another_group_but_an_admin_can() {
    let Some(mut env) = Env::start_local(
        "guard",
        "switches the guard to dryRun by editing pod-director's config file",
    )
    .await
    else {
        return enforce_only().await;
    };
    let tenant = Tenant::new(&env, "e2e-enforce").await;
    assert_guard_enforced(&env, &tenant).await;

    // dryRun: the same attempts are admitted and reported as would_deny.
    let old_revision = guard_decisions(&env, &tenant.namespace).await;
    let old_revision = old_revision
        .last()
        .expect("guard decisions")
        .text("config.revision")
        .to_owned();
    env.edit_config(|c| c["namespaceGuard"]["mode"] = json!("dryRun"));
    env.reloaded_from(&old_revision).await;
    let moved = tenant
        .patch_namespace(json!({"pod-director/group": "e2e-agents"}))
        .await
        .expect("dryRun admits the relabel");
    assert_eq!(group_of(&moved), Some("e2e-agents"));
    // Log lines arrive asynchronously: wait for the tenant's dryRun decision.
    let line = eventually("the guard's would_deny for the tenant's relabel", || async {
        guard_decisions(&env, &tenant.namespace).await.into_iter().find(|d| {
            d.str("admission.request.user") == Some(tenant.user.as_str()) && d.str("placement.mode") == Some("dryRun")
        })
    })
    .await;
    assert_eq!(line.decision(), "would_deny", "{line:?}");
    assert_eq!(line.text("placement.group"), "e2e-agents");
    tenant.remove(&env.client).await;
}

/// Cluster mode: the guard is enforced by the suite's values; only the dryRun half is skipped.
async fn enforce_only() {
    let env = Env::start("guard").await;
    notice("NOTE guard in cluster mode: enforce checked; the dryRun half needs the config file");
    let tenant = Tenant::new(&env, "e2e-enforce").await;
    assert_guard_enforced(&env, &tenant).await;
    tenant.remove(&env.client).await;
}

fn group_of(namespace: &Namespace) -> Option<&str> {
    namespace
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("pod-director/group"))
        .map(String::as_str)
}

async fn guard_decisions(env: &Env, namespace: &str) -> Vec<Decision> {
    env.decisions_with(&[("webhook", "validate-namespace"), ("admission.request.name", namespace)])
        .await
}

async fn assert_guard_enforced(env: &Env, tenant: &Tenant) {
    assert_eq!(
        env.config.namespace_guard.mode.map(|m| m.as_str()),
        Some("enforce"),
        "the suite's values enforce the guard"
    );
    for (labels, what) in [
        (
            json!({"pod-director/group": "e2e-agents"}),
            "change label pod-director/group from \"e2e-enforce\" to \"e2e-agents\"",
        ),
        (json!({"pod-director/group": null}), "remove label pod-director/group"),
        (
            json!({"pod-director/group": "no-such-group"}),
            "a group pod-director's config does not define",
        ),
    ] {
        let message = denial(&tenant.patch_namespace(labels).await);
        assert!(message.contains(what), "{message}");
        let who = format!("\"{}\" (groups: system:authenticated) may not", tenant.user);
        assert!(message.contains(&who), "{message}");
        assert!(message.contains("members of system:masters may change it"), "{message}");
    }
    let stored = Api::<Namespace>::all(env.client.clone())
        .get(&tenant.namespace)
        .await
        .expect("the namespace");
    assert_eq!(group_of(&stored), Some("e2e-enforce"), "the label is unchanged");
    // A tenant creating a namespace in a group.
    let created: Namespace = serde_json::from_value(json!({"metadata": {
        "name": format!("e2e-guard-new-{}", suffix()), "labels": {"pod-director/group": "e2e-agents"}}}))
    .expect("a Namespace");
    let message = denial(
        &retry_forbidden(|| async {
            Api::<Namespace>::all(tenant.client.clone())
                .create(&PostParams::default(), &created)
                .await
        })
        .await,
    );
    assert!(message.contains("set label pod-director/group=e2e-agents"), "{message}");
    // Other labels are the tenant's business.
    let relabelled = tenant
        .patch_namespace(json!({"team": "web"}))
        .await
        .expect("a label other than the group's is admitted");
    assert_eq!(group_of(&relabelled), Some("e2e-enforce"));
    // The three relabels and the namespace create above were logged as denied (lines arrive asynchronously).
    let lines = eventually("the guard's denials in the log", || async {
        let lines = guard_decisions(env, &tenant.namespace).await;
        (lines.iter().filter(|l| l.decision() == "denied").count() >= 3).then_some(lines)
    })
    .await;
    assert!(lines.iter().all(|l| l.text("placement.mode") == "enforce"), "{lines:?}");
    // An allowed admin (system:masters) relabels freely.
    let moved = label_namespace(
        &env.client,
        &tenant.namespace,
        json!({"pod-director/group": "e2e-agents"}),
    )
    .await
    .expect("the admin relabels");
    assert_eq!(group_of(&moved), Some("e2e-agents"));
    label_namespace(
        &env.client,
        &tenant.namespace,
        json!({"pod-director/group": "e2e-enforce"}),
    )
    .await
    .expect("and back");
}

/// PATCH `…/namespaces/NS/status` with new labels, as `client`.
async fn patch_status_labels(client: &Client, namespace: &str, labels: Value) -> Result<Namespace, kube::Error> {
    let patch = json!({"metadata": {"labels": labels}});
    retry_forbidden(|| async {
        Api::<Namespace>::all(client.clone())
            .patch_status(
                namespace,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
    })
    .await
}

/// PUT `…/namespaces/NS/finalize` with the namespace as it is but `labels` merged in, as `client`.
async fn finalize_with_labels(
    client: &Client,
    admin: &Client,
    namespace: &str,
    labels: Value,
) -> Result<Value, kube::Error> {
    let mut object = serde_json::to_value(
        Api::<Namespace>::all(admin.clone())
            .get(namespace)
            .await
            .expect("the namespace"),
    )
    .expect("JSON");
    for (k, v) in labels.as_object().into_iter().flatten() {
        object["metadata"]["labels"][k] = v.clone();
    }
    retry_forbidden(|| async {
        let request = kube::core::Request::new("/api/v1/namespaces")
            .replace(
                &format!("{namespace}/finalize"),
                &PostParams::default(),
                serde_json::to_vec(&object).expect("serializes"),
            )
            .expect("a request");
        client.request::<Value>(request).await
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_cannot_relabel_its_namespace_through_the_status_or_finalize_subresource() {
    let env = Env::start("guard-subresources").await;
    let tenant = Tenant::new(&env, "e2e-enforce").await;
    let other = json!({"pod-director/group": "e2e-agents"});
    let message = denial(&patch_status_labels(&tenant.client, &tenant.namespace, other.clone()).await);
    assert!(
        message.contains("change label pod-director/group from \"e2e-enforce\" to \"e2e-agents\""),
        "{message}"
    );
    let message = denial(&finalize_with_labels(&tenant.client, &env.client, &tenant.namespace, other.clone()).await);
    assert!(message.contains("may not change label pod-director/group"), "{message}");
    let stored = Api::<Namespace>::all(env.client.clone())
        .get(&tenant.namespace)
        .await
        .expect("the namespace");
    assert_eq!(group_of(&stored), Some("e2e-enforce"), "the label is unchanged");
    // Both were decided and logged by the guard, naming the subresource's request.
    let lines = eventually("the guard's denials of both subresource writes", || async {
        let lines = guard_decisions(&env, &tenant.namespace).await;
        (lines.iter().filter(|l| l.decision() == "denied").count() >= 2).then_some(lines)
    })
    .await;
    assert!(
        lines
            .iter()
            .filter(|l| l.decision() == "denied")
            .all(|l| l.str("admission.request.user") == Some(tenant.user.as_str())),
        "{lines:?}"
    );
    // An allowed admin may relabel through the status subresource (decided, allowed), and back.
    let moved = patch_status_labels(&env.client, &tenant.namespace, other)
        .await
        .expect("the admin relabels through status");
    assert_eq!(group_of(&moved), Some("e2e-agents"));
    let back = patch_status_labels(
        &env.client,
        &tenant.namespace,
        json!({"pod-director/group": "e2e-enforce"}),
    )
    .await
    .expect("and back");
    assert_eq!(group_of(&back), Some("e2e-enforce"));
    tenant.remove(&env.client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_guard_mode_enforce_groups_are_guarded_and_the_others_observed() {
    let Some(mut env) = Env::start_local(
        "guard-default",
        "removes namespaceGuard.mode by editing pod-director's config file",
    )
    .await
    else {
        return;
    };
    let revision = env.loaded_revision().await;
    env.edit_config(|c| {
        if let Some(guard) = c["namespaceGuard"].as_object_mut() {
            guard.remove("mode");
        }
    });
    env.reloaded_from(&revision).await;
    // The reconciler splits the guard entries by the groups' modes.
    let guard_entry = |configuration: &k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
                       entry: &str| {
        let name = env.webhook_name(entry, "namespace-guard");
        configuration
            .webhooks
            .iter()
            .flatten()
            .find(|w| w.name == name)
            .map(|w| {
                (
                    w.failure_policy.clone(),
                    serde_json::to_value(&w.object_selector).unwrap_or_default(),
                )
            })
    };
    let (policy, selector) = eventually("the guard entries follow the groups", || async {
        let (_, validating) = env.webhook_configurations().await;
        let enforce = guard_entry(&validating, "enforce")?;
        let observe = guard_entry(&validating, "observe")?;
        (enforce.0.as_deref() == Some("Fail") && observe.0.as_deref() == Some("Ignore")).then_some(enforce)
    })
    .await;
    assert_eq!(policy.as_deref(), Some("Fail"));
    let values = &selector["matchExpressions"][0]["values"];
    assert!(
        values
            .as_array()
            .is_some_and(|v| v.contains(&json!("e2e-enforce")) && !v.contains(&json!("e2e-dryrun"))),
        "{selector}"
    );

    // Out of an enforce group: denied.
    let enforced = Tenant::new(&env, "e2e-enforce").await;
    let message = denial(
        &enforced
            .patch_namespace(json!({"pod-director/group": "e2e-dryrun"}))
            .await,
    );
    assert!(message.contains("may not change label pod-director/group"), "{message}");
    // Among dryRun/warn groups: admitted, reported as would_deny in dryRun.
    let observed = Tenant::new(&env, "e2e-dryrun").await;
    let moved = observed
        .patch_namespace(json!({"pod-director/group": "e2e-warn"}))
        .await
        .expect("a move among observed groups is admitted");
    assert_eq!(group_of(&moved), Some("e2e-warn"));
    let line = eventually("the would_deny of the observed move", || async {
        guard_decisions(&env, &observed.namespace)
            .await
            .into_iter()
            .find(|d| d.str("admission.request.user") == Some(observed.user.as_str()))
    })
    .await;
    assert_eq!(line.decision(), "would_deny", "{line:?}");
    assert_eq!(line.text("placement.mode"), "dryRun");
    // Into an enforce group: denied too.
    let message = denial(
        &observed
            .patch_namespace(json!({"pod-director/group": "e2e-enforce"}))
            .await,
    );
    assert!(message.contains("may not change label pod-director/group"), "{message}");
    enforced.remove(&env.client).await;
    observed.remove(&env.client).await;
}
