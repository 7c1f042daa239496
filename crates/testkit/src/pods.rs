//! AdmissionReview bodies shaped like the API server's, shared by the benches:
//! a small pod (1 container), a typical one (3 containers, 5 tolerations, an
//! affinity with 2 terms) and a large one (50 containers, 50 tolerations, 10
//! affinity terms, ~100 KB of JSON); the configuration and namespaces they are reviewed in.

use serde_json::{Value, json};

/// The pod sizes measured, by name.
pub const SIZES: [&str; 3] = ["small", "typical", "large"];

/// The groups the benches select: `ci` (enforce) and `shadow` (dryRun).
pub const CONFIG: &str = r#"
groups:
  ci:
    mode: enforce
    nodeSelector: {node-pool: ci, kubernetes.io/os: linux}
    tolerations:
      - {key: dedicated, operator: Equal, value: ci, effect: NoSchedule}
      - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
    affinity:
      nodeAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
            - matchExpressions:
                - {key: topology.kubernetes.io/zone, operator: In, values: [eu-west-1a, eu-west-1b]}
        preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 10
            preference: {matchExpressions: [{key: disk, operator: In, values: [ssd]}]}
  shadow:
    mode: dryRun
    nodeSelector: {node-pool: ci}
    tolerations: [{key: dedicated, operator: Equal, value: ci, effect: NoSchedule}]
"#;

/// The namespaces of [`CONFIG`]'s benches: `team-a` in the dryRun group `shadow`
/// (`pod_director::testing::admission(CONFIG, NAMESPACES)`).
pub const NAMESPACES: &[(&str, &str)] = &[("team-a", "shadow")];

fn container(i: usize, env: usize) -> Value {
    json!({
        "name": format!("container-{i}"),
        "image": format!("registry.example.com/team/app-{i}:1.2.3"),
        "args": ["--port=8080", "--verbose"],
        "env": (0..env).map(|e| json!({"name": format!("VAR_{e}"), "value": format!("value-of-variable-{e}-for-container-{i}")})).collect::<Vec<_>>(),
        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    })
}

fn toleration(i: usize) -> Value {
    json!({"key": format!("example.com/taint-{i}"), "operator": "Equal", "value": format!("v{i}"), "effect": "NoSchedule"})
}

fn term(i: usize) -> Value {
    json!({"matchExpressions": [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [format!("eu-west-1{}", ["a", "b", "c"][i % 3])]},
        {"key": format!("example.com/feature-{i}"), "operator": "Exists"},
    ]})
}

/// A pod with `containers` containers (each with `env` variables), `tolerations`
/// tolerations and `terms` required node-affinity terms.
pub fn pod(namespace: &str, containers: usize, env: usize, tolerations: usize, terms: usize) -> Value {
    let mut spec = json!({
        "containers": (0..containers).map(|i| container(i, env)).collect::<Vec<_>>(),
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "tolerations": (0..tolerations).map(toleration).collect::<Vec<_>>(),
        "volumes": [{"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}],
    });
    if terms > 0 {
        spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": (0..terms).map(term).collect::<Vec<_>>()}}});
    }
    json!({
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"generateName": "web-7d4b9c-", "namespace": namespace, "labels": {"app": "web", "pod-template-hash": "7d4b9c"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4b9c", "uid": "2c6b0c5e-4a39-4a4e-8a62-3f1b7cbd0c11", "controller": true, "blockOwnerDeletion": true}]},
        "spec": spec,
        "status": {},
    })
}

/// The pod of one of [`SIZES`].
pub fn sized(size: &str, namespace: &str) -> Value {
    match size {
        "small" => pod(namespace, 1, 2, 0, 0),
        "typical" => pod(namespace, 3, 5, 5, 2),
        "large" => pod(namespace, 50, 20, 50, 10),
        other => panic!("unknown pod size {other:?}; expected one of {SIZES:?}"),
    }
}

/// An AdmissionReview (pod CREATE) as the API server sends it, fields in its order.
pub fn review(uid: &str, pod: &Value) -> Vec<u8> {
    crate::fixtures::Review::pod("CREATE", pod.clone()).uid(uid).bytes()
}
