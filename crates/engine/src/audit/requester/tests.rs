use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::decision::{Subject, View, Write, fate};
use crate::placement::{Context, Decision, Namespace, NodeInfo, Outcome, SkipReason};

/// The placement the audit records for `pod` re-created by `requester` in namespace `ns`.
fn decide(config: &Config, ns: &Namespace<'_>, pod: &Pod, requester: Requester) -> Outcome {
    let context = Context { requester, nodes: None };
    let view = View {
        config,
        namespace: ns,
        context: &context,
    };
    fate(&Subject::Pod(Write::Create(pod)), &view).placement().clone()
}

fn config() -> Config {
    crate::testing::config(
        r#"
groups:
  agents:
    mode: enforce
    allowDaemonSets: true
    nodeSelector: {pool: agents}
  ci:
    mode: dryRun
    nodeSelector: {pool: ci}
"#,
    )
}

fn pod(value: serde_json::Value) -> Pod {
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(value).expect("a pod");
    Pod::from(&pod)
}

fn owned_by(kind: &str, name: &str, uid: &str) -> Pod {
    pod(json!({
        "metadata": {"name": "p", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid, "controller": true}
        ]},
        "spec": {"containers": [{"name": "c", "image": "i"}]}
    }))
}

fn labels(group: &str) -> std::collections::BTreeMap<String, String> {
    [("pod-director/group".to_owned(), group.to_owned())].into()
}

#[test]
fn a_deployment_s_pod_is_recreated_by_the_replicaset_controller_and_belongs_to_the_deployment() {
    let config = config();
    let mut controllers = Controllers::default();
    controllers.insert(
        ControllerKind::ReplicaSet,
        "web-7c9f",
        "u1",
        Some("Deployment/web".to_owned()),
    );
    let found = recreation(&config, &owned_by("ReplicaSet", "web-7c9f", "u1"), &controllers, None);
    assert_eq!(
        found.requester.username,
        "system:serviceaccount:kube-system:replicaset-controller"
    );
    assert_eq!(found.workload, "Deployment/web");
}

#[test]
fn an_owner_reference_with_another_uid_is_a_user_s_pod() {
    let config = config();
    let mut controllers = Controllers::default();
    controllers.insert(ControllerKind::DaemonSet, "agent", "real-uid", None);
    let forged = owned_by("DaemonSet", "agent", "forged-uid");
    let found = recreation(&config, &forged, &controllers, None);
    assert_eq!(found.requester, Requester::unknown());
    assert_eq!(found.workload, "Pod/p");
    let agents = labels("agents");
    let ns = Namespace::new("team", &agents);
    let outcome = decide(&config, &ns, &forged, found.requester);
    assert_eq!(
        outcome.decision,
        Decision::Patched,
        "a forged DaemonSet owner does not exempt: {outcome:?}"
    );
}

#[test]
fn a_real_daemonset_s_pod_is_skipped_in_a_group_that_allows_daemonsets() {
    let config = config();
    let mut controllers = Controllers::default();
    controllers.insert(ControllerKind::DaemonSet, "agent", "u2", None);
    let real = owned_by("DaemonSet", "agent", "u2");
    let found = recreation(&config, &real, &controllers, None);
    assert_eq!(found.requester.username, config.daemon_set_controller);
    assert_eq!(found.workload, "DaemonSet/agent");
    let agents = labels("agents");
    let ns = Namespace::new("team", &agents);
    let outcome = decide(&config, &ns, &real, found.requester);
    assert_eq!(outcome.skip_reason, Some(SkipReason::DaemonSetPod));
}

#[test]
fn shared_controller_credentials_make_every_controller_the_configured_user() {
    let mut config = config();
    config.daemon_set_controller = "system:kube-controller-manager".to_owned();
    assert_eq!(
        controller_requester(&config, ControllerKind::Job).username,
        "system:kube-controller-manager"
    );
}

#[test]
fn a_mirror_pod_is_its_node_s_only_when_the_node_exists() {
    let config = config();
    let mirror = pod(json!({
        "metadata": {"name": "etcd-n1", "annotations": {"kubernetes.io/config.mirror": "x"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}
    }));
    let nodes: Vec<Arc<NodeInfo>> = vec![Arc::new(NodeInfo::new("n1", Vec::new(), Vec::new(), false))];
    let found = recreation(&config, &mirror, &Controllers::default(), Some(&nodes as &dyn NodeView));
    assert_eq!(found.requester.node_name(), Some("n1"));
    let none: Vec<Arc<NodeInfo>> = Vec::new();
    let found = recreation(&config, &mirror, &Controllers::default(), Some(&none as &dyn NodeView));
    assert_eq!(
        found.requester,
        Requester::unknown(),
        "a node that does not exist mirrors nothing"
    );
}

#[test]
fn a_template_gets_the_owner_its_pods_will_have() {
    let template: PodTemplateSpec = serde_json::from_value(json!({
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]}
    }))
    .expect("a template");
    let made = template_pod(&template, Some(("batch/v1", "Job", "nightly")));
    let owner = &made.metadata.owner_references.as_ref().expect("owned")[0];
    assert_eq!((owner.kind.as_str(), owner.controller), ("Job", Some(true)));
    assert!(made.spec.is_some());
}
