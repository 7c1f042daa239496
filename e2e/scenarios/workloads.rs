//! The workload path: a Deployment's ReplicaSet creates the pods (kube-controller-manager).

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, PostParams};

use crate::fixtures::{Placement, deployment, labels, workload_spec};
use crate::harness::Env;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_s_pods_are_placed_by_their_namespace_s_group() {
    let env = Env::start("deployment").await;
    let ns = env.namespace(Some("e2e-enforce")).await;
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), &ns);
    deployments
        .create(&PostParams::default(), &deployment("web", workload_spec()))
        .await
        .expect("Deployment created");

    let pods = env.wait_for_pods(&ns, "app=web", 2).await;
    for pod in &pods {
        let owner = pod
            .metadata
            .owner_references
            .as_ref()
            .and_then(|o| o.first())
            .expect("an owner");
        assert_eq!(owner.kind, "ReplicaSet", "created by the controller-manager");
        assert_eq!(Placement::of(pod), Placement::enforced(), "{:?}", pod.metadata.name);
    }

    let decisions = env
        .decisions_with(&[
            ("admission.request.namespace", &ns),
            ("webhook", "mutate"),
            ("admission.object.owner.kind", "ReplicaSet"),
        ])
        .await;
    assert_eq!(decisions.len(), 2, "one mutate decision per pod: {decisions:?}");
    for decision in &decisions {
        assert_eq!(decision.decision(), "patched");
        assert!(
            decision.text("admission.object.generate_name").starts_with("web-"),
            "{decision:?}"
        );
    }

    let template = deployments
        .get("web")
        .await
        .expect("the Deployment")
        .spec
        .expect("a spec")
        .template;
    assert_eq!(
        template.spec.and_then(|s| s.node_selector),
        Some(labels(&[("e2e.pod-director.io/team", "web")])),
        "pod-director changes pods, not their templates"
    );
}
