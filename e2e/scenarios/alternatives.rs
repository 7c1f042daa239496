//! A group offers more than one pool (`groups.NAME.alternatives`): a data team's namespace runs on
//! the general pool by default, and a pod chooses the GPU or the spot pool with the label
//! `pod-director/placement`. kube-scheduler and kwok run the pods, so every check reads where they
//! really run. The groups are added to the live config of this scenario's own pod-director (local
//! mode): the GPU pool is reserved by another group, `e2e-alt-ml`, whose reservation admits the data
//! team's GPU pods only once it lists the group in `reserve.allow.placementGroups`.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use crate::fixtures::{Placement, controller};
use crate::harness::k8s::{IMAGE, eventually, pod_from};
use crate::harness::scheduling::node_of;
use crate::harness::{Env, suffix};

const GROUP: &str = "e2e-alt-data";
const DRY_GROUP: &str = "e2e-alt-data-dryrun";
const ML: &str = "e2e-alt-ml";
const POOL: &str = "e2e.pod-director.io/alt-pool";
const GPU_TAINT: &str = "e2e.pod-director.io/alt-gpu";
const CHOICE: &str = "pod-director/placement";

fn gpu_toleration() -> Value {
    json!({"key": GPU_TAINT, "operator": "Equal", "value": "true", "effect": "NoSchedule"})
}

/// The data team's group (`mode`): general by default, gpu (tainted) and spot to choose from.
fn data_group(mode: &str) -> Value {
    json!({
        "mode": mode,
        "onConflict": "reject",
        "nodeSelector": {POOL: "general"},
        "alternatives": {
            "gpu": {"nodeSelector": {POOL: "gpu"}, "tolerations": [gpu_toleration()]},
            "spot": {"nodeSelector": {POOL: "spot"}},
        },
    })
}

/// The suite's config with the data groups and the ML team's reserved GPU pool, whose reservation
/// allows `allowed` pod-director groups.
fn with_groups(config: &mut Value, allowed: &[&str]) {
    let groups = &mut config["groups"];
    groups[GROUP] = data_group("enforce");
    groups[DRY_GROUP] = data_group("dryRun");
    groups[ML] = json!({
        "mode": "enforce",
        "nodeSelector": {POOL: "gpu"},
        "tolerations": [gpu_toleration()],
        "reserve": {"mode": "enforce", "allow": {"placementGroups": allowed}},
    });
}

fn node(name: &str, pool: &str) -> Node {
    let taints = if pool == "gpu" {
        json!([{"key": GPU_TAINT, "value": "true", "effect": "NoSchedule"}])
    } else {
        json!([])
    };
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {POOL: pool, "kubernetes.io/os": "linux"}},
        "spec": {"taints": taints},
    }))
    .expect("a Node")
}

/// A pod named `name` choosing `choice` (none: no label), with these spec fields.
fn pod(name: &str, choice: Option<&str>, spec: Value) -> Pod {
    let labels = choice.map_or(json!({"app": name}), |c| json!({"app": name, CHOICE: c}));
    let mut value = json!({"metadata": {"name": name, "labels": labels}, "spec": spec});
    value["spec"]["containers"] = json!([{"name": "app", "image": IMAGE}]);
    pod_from(value)
}

/// Switches the live config to [`with_groups`] and waits until pod-director loaded it (away from
/// `revision`); returns the config written and its revision.
async fn configure(env: &mut Env, revision: &str, allowed: &[&str]) -> (Value, String) {
    let config = env.edit_config(|c| with_groups(c, allowed));
    let revision = env.reloaded_from(revision).await;
    (config, revision)
}

/// The pods' nodes.
fn nodes_of(pods: &[Pod]) -> BTreeSet<String> {
    pods.iter().filter_map(|p| node_of(p).map(str::to_owned)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_chooses_one_of_its_group_s_pools_with_a_label_and_runs_there() {
    let Some(mut env) = Env::start_local_scheduling(
        "alternatives",
        "adds its groups to the live config of its own pod-director",
    )
    .await
    else {
        return;
    };
    let sfx = suffix();
    let pools: Vec<(&str, String)> = ["general", "gpu", "spot"]
        .into_iter()
        .map(|pool| (pool, format!("e2e-alt-{pool}-{sfx}")))
        .collect();
    for (pool, name) in &pools {
        env.create_node(&node(name, pool)).await;
    }
    let names: Vec<String> = pools.iter().map(|(_, n)| n.clone()).collect();
    env.wait_nodes_ready(&names).await;
    let node_named = |pool: &str| {
        pools
            .iter()
            .find(|(p, _)| *p == pool)
            .map(|(_, n)| n.clone())
            .expect("a pool")
    };
    let loaded = env.loaded_revision().await;
    let (_, revision) = configure(&mut env, &loaded, &[]).await;
    let ns = env.namespace(Some(GROUP)).await;
    let dry = env.namespace(Some(DRY_GROUP)).await;

    // No label: the default pool.
    env.create_admitted_pod(&ns, &pod("plain", None, json!({}))).await;
    let running = env.wait_running(&ns, "plain").await;
    assert_eq!(node_of(&running), Some(node_named("general").as_str()));
    let line = env.decision(&ns, "plain", "mutate").await;
    assert_eq!(
        (line.decision(), line.text("placement.alternative")),
        ("patched", "default")
    );

    // gpu, on the ML team's reserved GPU pool: its reservation refuses the data team's GPU pods...
    eventually("the reservation entry sends the GPU pool's tolerations", || async {
        let entry = crate::reservation::reservation_entry(&env).await?;
        let condition = entry["matchConditions"][0]["expression"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        (entry["failurePolicy"] == "Fail" && condition.contains(GPU_TAINT)).then_some(())
    })
    .await;
    let created = env.create_pod(&ns, &pod("train-refused", Some("gpu"), json!({}))).await;
    assert_eq!(created.status.as_u16(), 403, "{:?}", created.body);
    let message = created.error_message().unwrap_or_default();
    assert!(message.contains(ML) && message.contains("reserve.allow"), "{message}");
    // ... until it allows the group: then its selector and its toleration are added, and it runs on
    // the tainted GPU node.
    let (config, _) = configure(&mut env, &revision, &[GROUP]).await;
    eventually("the reservation admits the data team's GPU pod", || async {
        let created = env.create_pod(&ns, &pod("train", Some("gpu"), json!({}))).await;
        created.status.is_success().then_some(())
    })
    .await;
    let line = env.decision(&ns, "train", "validate-reservation").await;
    assert_eq!(line.text("reservation.exempt"), "allowed_placement_group", "{line:?}");
    let running = env.wait_running(&ns, "train").await;
    assert_eq!(node_of(&running), Some(node_named("gpu").as_str()));
    let placement = Placement::of(&running);
    assert_eq!(placement.node_selector.get(POOL).map(String::as_str), Some("gpu"));
    assert_eq!(
        serde_json::to_value(&placement.tolerations).expect("tolerations"),
        json!([gpu_toleration()])
    );
    let line = env.decision(&ns, "train", "mutate").await;
    assert_eq!(line.text("placement.alternative"), "gpu");
    assert!(
        line.get("placement.feasible_nodes") == &json!(1),
        "the GPU node only: {line:?}"
    );

    // A choice the group does not offer: denied in enforce, naming the allowed ones; would_deny in dryRun.
    let created = env.create_pod(&ns, &pod("tpu", Some("tpu"), json!({}))).await;
    assert_eq!(created.status.as_u16(), 403, "{:?}", created.body);
    let message = created.error_message().unwrap_or_default();
    assert!(message.contains("one of default, gpu, spot"), "{message}");
    env.create_admitted_pod(&dry, &pod("tpu", Some("tpu"), json!({}))).await;
    let line = env.decision(&dry, "tpu", "mutate").await;
    assert_eq!(line.decision(), "would_deny", "{line:?}");
    assert_eq!(line.text("placement.alternative"), "default");
    assert_eq!(env.decision(&dry, "tpu", "validate").await.decision(), "would_deny");

    // Another tenant's pool by the pod's own selector, without choosing: a conflict, as without alternatives.
    let created = env
        .create_pod(&ns, &pod("sneak", None, json!({"nodeSelector": {POOL: "gpu"}})))
        .await;
    assert_eq!(created.status.as_u16(), 403, "{:?}", created.body);
    let message = created.error_message().unwrap_or_default();
    assert!(
        message.contains(r#"pod has "gpu", group requires "general""#),
        "{message}"
    );

    // A Deployment choosing spot: every replica on the spot pool; the audit counts it under spot.
    let mut spot: Deployment = controller("batch", json!({"containers": [{"name": "app", "image": IMAGE}]}));
    if let Some(spec) = spot.spec.as_mut() {
        spec.replicas = Some(3);
        if let Some(labels) = spec.template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
            labels.insert(CHOICE.to_owned(), "spot".to_owned());
        }
    }
    Api::<Deployment>::namespaced(env.client.clone(), &ns)
        .create(&PostParams::default(), &spot)
        .await
        .expect("Deployment created");
    let pods = env.wait_running_pods(&ns, "app=batch", 3).await;
    assert_eq!(nodes_of(&pods), BTreeSet::from([node_named("spot")]));
    let file = tempfile::Builder::new()
        .suffix(".json")
        .tempfile()
        .expect("a temp file");
    std::fs::write(file.path(), config.to_string()).expect("config written");
    let (_, report) = crate::audit::audit(file.path(), &["--group", GROUP]).await;
    let counted = &report["groups"][0]["alternatives"];
    assert_eq!(counted["spot"]["pods"]["compliant"], 3, "{report}");
    // The Deployment's template itself is not patched (its pods are): enforce would patch it.
    assert_eq!(
        counted["spot"]["templates"]["would_patch"], 1,
        "the Deployment: {report}"
    );
    assert_eq!(counted["gpu"]["pods"]["compliant"], 1, "{report}");
    assert_eq!(counted["default"]["pods"]["compliant"], 1, "{report}");
}
