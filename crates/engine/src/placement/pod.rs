//! The pod as the engine reads it: its metadata (name, generateName,
//! namespace, labels, annotations, ownerReferences) and the placement part of
//! its spec (nodeName, nodeSelector, tolerations, affinity) — nothing else.
//!
//! Pure types: the admission path decodes them from a review with its own serde seeds
//! (`admission/wire/seeds.rs`: every other field skipped unbuilt, a refused value named by its
//! path); `Deserialize` is derived for everything else. A full
//! [`k8s_openapi::api::core::v1::Pod`] converts with `Pod::from(&pod)`, a pod
//! template (DaemonSets, workloads) with [`Pod::from_template`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, PodTemplateSpec, ResourceRequirements, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde::{Deserialize, Serialize};

/// A pod, as far as placement cares.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Pod {
    pub metadata: PodMetadata,
    /// `None` when the object has no spec (the admission layer refuses such pods).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec: Option<PodSpec>,
    /// `status.qosClass` as the request carries it (the in-tree plugins' QoS class reads it first).
    #[serde(skip)]
    pub status_qos_class: Option<String>,
}

/// A container, as far as the pod's QoS class cares: its resources.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ContainerResources {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

/// The pod's metadata the engine and the decision log read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodMetadata {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generate_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner_references: Option<Vec<OwnerReference>>,
}

/// The placement fields of a pod's spec.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// The containers' and the pod's own resources: the pod's QoS class (the in-tree plugins).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub containers: Option<Vec<ContainerResources>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init_containers: Option<Vec<ContainerResources>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

impl From<&ObjectMeta> for PodMetadata {
    fn from(meta: &ObjectMeta) -> Self {
        Self {
            name: meta.name.clone(),
            generate_name: meta.generate_name.clone(),
            namespace: meta.namespace.clone(),
            labels: meta.labels.clone(),
            annotations: meta.annotations.clone(),
            owner_references: meta.owner_references.clone(),
        }
    }
}

impl From<&k8s_openapi::api::core::v1::PodSpec> for PodSpec {
    fn from(spec: &k8s_openapi::api::core::v1::PodSpec) -> Self {
        Self {
            node_name: spec.node_name.clone(),
            node_selector: spec.node_selector.clone(),
            tolerations: spec.tolerations.clone(),
            affinity: spec.affinity.clone(),
            containers: Some(spec.containers.iter().map(ContainerResources::of).collect()),
            init_containers: spec
                .init_containers
                .as_ref()
                .map(|list| list.iter().map(ContainerResources::of).collect()),
            resources: spec.resources.clone(),
        }
    }
}

/// Copies the placement fields of a full pod (listed pods, `explain` manifests).
impl From<&k8s_openapi::api::core::v1::Pod> for Pod {
    fn from(pod: &k8s_openapi::api::core::v1::Pod) -> Self {
        Self {
            metadata: PodMetadata::from(&pod.metadata),
            spec: pod.spec.as_ref().map(PodSpec::from),
            status_qos_class: pod.status.as_ref().and_then(|s| s.qos_class.clone()),
        }
    }
}

impl ContainerResources {
    fn of(container: &k8s_openapi::api::core::v1::Container) -> Self {
        Self {
            resources: container.resources.clone(),
        }
    }
}

impl Pod {
    /// This pod with `spec.nodeName` set to `target`: the pod a Binding (`pods/binding`) makes.
    pub fn bound_to(&self, target: &str) -> Pod {
        let mut bound = self.clone();
        bound.spec.get_or_insert_with(Default::default).node_name = Some(target.to_owned());
        bound
    }

    /// A pod template (a DaemonSet's, a workload's) as the pod the engine
    /// decides: the template's metadata and spec (the pods created from it carry both).
    pub(crate) fn from_template(template: &PodTemplateSpec) -> Self {
        Self {
            metadata: template.metadata.as_ref().map(PodMetadata::from).unwrap_or_default(),
            spec: template.spec.as_ref().map(PodSpec::from),
            status_qos_class: None,
        }
    }
}

#[cfg(test)]
mod tests;
