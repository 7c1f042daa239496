//! Who the audit decides a running pod or a template as.
//!
//! **Who is asking.** A running pod was admitted before its group was enforced;
//! what matters is what enforce will do when the pod is created *again* — by its
//! controller at the next rollout or eviction, by its node for a static pod, by a
//! user for a bare pod. So the audit decides each pod as enforce would decide that
//! re-creation, with the requester that would send it:
//!
//! | the pod | requester of its re-creation |
//! |---|---|
//! | controlled by a ReplicaSet (e.g. a Deployment's) | the ReplicaSet controller |
//! | controlled by a StatefulSet | the StatefulSet controller |
//! | controlled by a DaemonSet | the DaemonSet controller (`daemonSetController`) |
//! | controlled by a Job (e.g. a CronJob's) | the Job controller |
//! | a static pod's mirror (annotation `kubernetes.io/config.mirror`) | its node, `system:node:<spec.nodeName>` |
//! | anything else (a bare pod) | a user: no requester-keyed exemption |
//!
//! The pod's own fields are never trusted for this: an owner reference counts only
//! when it names (kind, name **and uid**) a workload the audit listed from the API
//! server in the pod's namespace, and a mirror annotation only when `spec.nodeName`
//! names a Node the API server has. A forged owner reference or annotation gets the
//! requester of a bare pod — a user — which is also who would re-create it.
//! Controllers run with their own service accounts
//! (`system:serviceaccount:kube-system:<controller>`, kube-controller-manager's
//! `--use-service-account-credentials`) when `daemonSetController` is one of them;
//! otherwise every controller is `daemonSetController` (shared credentials, e.g.
//! `system:kube-controller-manager`).
//!
//! The audit hands each pod (unbound: as it would be created again) and template, with that
//! requester, to the engine's [`crate::decision::fate`] (`super::tally`).

use std::collections::HashMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::config::Config;
use crate::placement::{self, NodeLookup, NodeView, Pod, Requester};

/// The username prefix of kube-controller-manager's per-controller service accounts.
const CONTROLLER_PREFIX: &str = "system:serviceaccount:kube-system:";
const NODES_GROUP: &str = placement::NODES_GROUP;

/// The owner reference of the controller `kind/name` (its uid unknown: the pod is not created yet).
fn controller(api_version: &str, kind: &str, name: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        name: name.to_owned(),
        controller: Some(true),
        ..OwnerReference::default()
    }
}

/// A workload template as the pod its controller creates: its metadata and spec,
/// with the controller owner reference those pods get.
pub fn template_pod(template: &PodTemplateSpec, owner: Option<(&str, &str, &str)>) -> Pod {
    let mut pod = placement::template_pod(template);
    if let Some((api_version, kind, name)) = owner {
        pod.metadata.owner_references = Some(vec![controller(api_version, kind, name)]);
    }
    pod
}

/// The controllers that create pods, by the kind of their object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ControllerKind {
    ReplicaSet,
    StatefulSet,
    DaemonSet,
    Job,
}

impl ControllerKind {
    pub fn of(api_version: &str, kind: &str) -> Option<Self> {
        match (api_version, kind) {
            ("apps/v1", "ReplicaSet") => Some(Self::ReplicaSet),
            ("apps/v1", "StatefulSet") => Some(Self::StatefulSet),
            ("apps/v1", "DaemonSet") => Some(Self::DaemonSet),
            ("batch/v1", "Job") => Some(Self::Job),
            _ => None,
        }
    }

    /// kube-controller-manager's controller name (and service account).
    fn controller(self) -> &'static str {
        match self {
            Self::ReplicaSet => "replicaset-controller",
            Self::StatefulSet => "statefulset-controller",
            Self::DaemonSet => "daemon-set-controller",
            Self::Job => "job-controller",
        }
    }

    pub fn kind(self) -> &'static str {
        match self {
            Self::ReplicaSet => "ReplicaSet",
            Self::StatefulSet => "StatefulSet",
            Self::DaemonSet => "DaemonSet",
            Self::Job => "Job",
        }
    }
}

/// The requester of the pods a controller of `kind` creates.
pub(crate) fn controller_requester(config: &Config, kind: ControllerKind) -> Requester {
    let username = if kind == ControllerKind::DaemonSet || !config.daemon_set_controller.starts_with(CONTROLLER_PREFIX)
    {
        config.daemon_set_controller.clone()
    } else {
        format!("{CONTROLLER_PREFIX}{}", kind.controller())
    };
    Requester {
        username,
        groups: vec!["system:serviceaccounts".to_owned(), "system:authenticated".to_owned()],
    }
}

/// A controller object the audit listed in a namespace.
#[derive(Debug, Clone)]
struct Controller {
    uid: String,
    /// The workload that owns it (a Deployment's ReplicaSet, a CronJob's Job), as `Kind/name`.
    owner: Option<String>,
}

/// The controllers of one namespace, as listed from the API server: what a pod's
/// owner reference is checked against.
#[derive(Debug, Default)]
pub struct Controllers {
    by_name: HashMap<(ControllerKind, String), Controller>,
}

impl Controllers {
    /// Records a listed controller object; `owner` is its own controlling owner (`Kind/name`).
    pub fn insert(&mut self, kind: ControllerKind, name: &str, uid: &str, owner: Option<String>) {
        self.by_name.insert(
            (kind, name.to_owned()),
            Controller {
                uid: uid.to_owned(),
                owner,
            },
        );
    }

    /// The verified controller of `pod`: its `controller: true` owner reference,
    /// when it names a listed object of that kind, name and uid.
    fn verified<'p>(&self, pod: &'p Pod) -> Option<(ControllerKind, &'p str, Option<&str>)> {
        let owner = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))?;
        let kind = ControllerKind::of(&owner.api_version, &owner.kind)?;
        let listed = self.by_name.get(&(kind, owner.name.clone()))?;
        (listed.uid == owner.uid).then_some((kind, owner.name.as_str(), listed.owner.as_deref()))
    }
}

/// Who would re-create a running pod, and the workload it belongs to (`Kind/name`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recreation {
    pub requester: Requester,
    pub workload: String,
}

/// The requester of `pod`'s re-creation and its workload (see the module's table).
pub(crate) fn recreation(
    config: &Config,
    pod: &Pod,
    controllers: &Controllers,
    nodes: Option<&dyn NodeView>,
) -> Recreation {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    if let Some((kind, owner, top)) = controllers.verified(pod) {
        return Recreation {
            requester: controller_requester(config, kind),
            workload: top.map_or_else(|| format!("{}/{owner}", kind.kind()), str::to_owned),
        };
    }
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty());
    if let (true, Some(node), Some(nodes)) = (placement::has_mirror_annotation(pod), node, nodes)
        && matches!(nodes.node(node), NodeLookup::Found(_))
    {
        return Recreation {
            requester: Requester {
                username: format!("{}{node}", placement::NODE_USER_PREFIX),
                groups: vec![NODES_GROUP.to_owned(), "system:authenticated".to_owned()],
            },
            workload: format!("Pod/{name}"),
        };
    }
    Recreation {
        requester: Requester::unknown(),
        workload: format!("Pod/{name}"),
    }
}

#[cfg(test)]
mod tests;
