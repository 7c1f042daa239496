//! The pods the scenarios create and the placement they must end up with,
//! written out by hand from e2e/scenarios/values.yaml (not computed by the engine).

pub mod in_tree;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Affinity, Pod, Toleration};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::harness::k8s::{IMAGE, own_tolerations, pod_from};

/// A pod that already asks for some placement of its own: a nodeSelector key the
/// group does not set, a toleration, and a required node-affinity term (so the
/// group's term must be AND-ed into it, not appended).
pub fn workload(name: &str) -> Pod {
    pod_from(json!({
        "metadata": {"name": name, "labels": {"app": "e2e"}},
        "spec": workload_spec(),
    }))
}

/// The pod spec of [`workload`] (also a Deployment's template).
pub fn workload_spec() -> Value {
    json!({
        "containers": [{"name": "app", "image": IMAGE}],
        "nodeSelector": {"e2e.pod-director.io/team": "web"},
        "tolerations": [{"key": "e2e.pod-director.io/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "e2e.pod-director.io/arch", "operator": "In", "values": ["amd64", "arm64"]}]}
        ]}}},
    })
}

/// A controller object (a DaemonSet, a Deployment…) named `name` whose pods,
/// labelled `app: <name>`, have `spec`.
pub fn controller<K: DeserializeOwned>(name: &str, spec: Value) -> K {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    }))
    .expect("a controller object")
}

/// A Deployment of 2 pods with `spec`, labelled `app: <name>`.
pub fn deployment(name: &str, spec: Value) -> Deployment {
    let mut deployment: Deployment = controller(name, spec);
    deployment.spec.as_mut().expect("a spec").replicas = Some(2);
    deployment
}

/// The placement fields of a pod (tolerations without the API server's own).
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    pub node_selector: BTreeMap<String, String>,
    pub tolerations: Vec<Toleration>,
    pub affinity: Option<Affinity>,
}

impl Placement {
    pub fn of(pod: &Pod) -> Self {
        let spec = pod.spec.clone().unwrap_or_default();
        Self {
            node_selector: spec.node_selector.unwrap_or_default(),
            tolerations: own_tolerations(pod),
            affinity: spec.affinity,
        }
    }

    /// [`workload`]'s own placement: what a pod that was not patched carries.
    pub fn submitted() -> Self {
        Self::of(&workload("x"))
    }

    /// [`workload`] after the dryrun/warn/enforce groups' placement: the pod's
    /// nodeSelector plus the group's keys, the pod's toleration plus the group's,
    /// the required term AND-ed (pod's expression, then the group's), the group's
    /// preferred term and pod anti-affinity added.
    pub fn enforced() -> Self {
        Self {
            node_selector: labels(&[
                ("e2e.pod-director.io/team", "web"),
                ("e2e.pod-director.io/pool", "blue"),
                ("kubernetes.io/os", "linux"),
            ]),
            tolerations: vec![gpu_toleration(), group_toleration()],
            affinity: Some(
                serde_json::from_value(json!({
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
                            {"key": "e2e.pod-director.io/arch", "operator": "In", "values": ["amd64", "arm64"]},
                            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a", "zone-b"]},
                        ]}]},
                        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "preference": {
                            "matchExpressions": [{"key": "e2e.pod-director.io/disk", "operator": "In", "values": ["ssd"]}]
                        }}],
                    },
                    "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app": "e2e"}},
                    }}]},
                }))
                .expect("an Affinity"),
            ),
        }
    }
}

/// The toleration of [`workload`].
pub fn gpu_toleration() -> Toleration {
    serde_json::from_value(json!({"key": "e2e.pod-director.io/gpu", "operator": "Exists", "effect": "NoSchedule"}))
        .expect("a Toleration")
}

/// The toleration every e2e group requires.
pub fn group_toleration() -> Toleration {
    serde_json::from_value(json!({
        "key": "e2e.pod-director.io/dedicated", "operator": "Equal", "value": "blue", "effect": "NoSchedule"
    }))
    .expect("a Toleration")
}

/// `pod` with a JSON Patch (as pod-director logged it) applied.
pub fn patched(pod: &Pod, patch: &Value) -> Pod {
    let mut document = serde_json::to_value(pod).expect("a pod serializes");
    let patch: json_patch::Patch = serde_json::from_value(patch.clone()).expect("the logged patch is a JSON Patch");
    json_patch::patch(&mut document, &patch).expect("the logged patch applies to the pod");
    serde_json::from_value(document).expect("still a Pod")
}

/// A label (or annotation, or nodeSelector) map.
pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

/// A pod whose labels include `pairs`.
pub fn with_labels(mut pod: Pod, pairs: &[(&str, &str)]) -> Pod {
    pod.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .extend(labels(pairs));
    pod
}

/// A pod asking for `e2e.pod-director.io/pool: <pool>` (the conflict groups require blue).
pub fn asking_for_pool(name: &str, pool: &str) -> Pod {
    pod_from(json!({
        "metadata": {"name": name, "labels": {"app": "e2e"}},
        "spec": {
            "containers": [{"name": "app", "image": IMAGE}],
            "nodeSelector": {"e2e.pod-director.io/pool": pool},
        },
    }))
}
