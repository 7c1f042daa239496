//! Pools an autoscaler creates on demand, on a real API server with Karpenter's own NodePool
//! CRD (sigs.k8s.io/karpenter, `e2e/tools.sh path karpenter-crds`; no Karpenter controller:
//! the scenario writes the NodePool's status itself). The group `e2e-provisioned` (enforce,
//! `onNoFeasibleNode: deny`) selects a pool no Node object ever joins:
//! - without the CRD, its pods are denied "no node could take this pod", and nothing about
//!   NodePools is logged above info;
//! - with a compatible, Ready NodePool, its pods are admitted and placed, the decision names
//!   the NodePool (`placement.provisionable_by`), and the audit's verdict is ready;
//! - the NodePool edited to an incompatible requirement, to a taint the group does not
//!   tolerate, to exhausted limits, or to `Ready=False`: denied again, and the audit's blocker
//!   says why;
//! - a Cluster API MachineDeployment the cluster-autoscaler scales (min/max-size and capacity
//!   annotations, the MachineDeployment/MachineSet CRDs of sigs.k8s.io/cluster-api) provisions
//!   the pool likewise until it is at its max size.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::audit::{audit, config_file};
use crate::harness::k8s::eventually;
use crate::harness::{Env, Options, Target, notice, pod, suffix, tool};

const GROUP: &str = "e2e-provisioned";
const CRD: &str = "nodepools.karpenter.sh";

fn node_pools(env: &Env) -> Api<DynamicObject> {
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("karpenter.sh", "v1", "NodePool"), "nodepools");
    Api::all_with(env.client.clone(), &resource)
}

/// A CRD as its module ships it (`e2e/tools.sh path TOOL`, or `$VARIABLE`).
fn crd(variable: &str, tool_name: &str, file: &str) -> CustomResourceDefinition {
    let path = tool(variable, tool_name).join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let value: Value = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_value(value).expect("a CustomResourceDefinition")
}

/// Karpenter's NodePool CRD.
fn karpenter_crd() -> CustomResourceDefinition {
    crd("E2E_KARPENTER_CRDS", "karpenter-crds", "karpenter.sh_nodepools.yaml")
}

async fn delete_crd(env: &Env) {
    delete_crds(env, &[CRD]).await;
}

/// Deletes these CRDs (when present) and waits until they are gone.
async fn delete_crds(env: &Env, names: &[&str]) {
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    for name in names {
        if crds.get_opt(name).await.expect("GET the CRD").is_none() {
            continue;
        }
        let _ = crds.delete(name, &DeleteParams::default()).await;
        eventually(&format!("the CRD {name} to be gone"), || async {
            crds.get_opt(name).await.expect("GET the CRD").is_none().then_some(())
        })
        .await;
    }
}

/// A NodePool that can create nodes of the group's pool: its label, its taint.
fn spark_pool(name: &str) -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": {"e2e.pod-director.io/provisioned-pool": "spark"}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                    "requirements": [
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
                    ],
                    "taints": [{"key": "e2e.pod-director.io/provisioned", "value": "spark", "effect": "NoSchedule"}]
                }
            },
            "limits": {"cpu": "100"}
        }
    })
}

fn ready(status: &str) -> Value {
    json!({"status": {
        "conditions": [{"type": "Ready", "status": status, "reason": if status == "True" { "Ready" } else { "NodeClassNotReady" },
                        "message": "", "lastTransitionTime": "2026-12-01T00:00:00Z", "observedGeneration": 1}],
        "resources": {"cpu": "4", "nodes": "1"}
    }})
}

/// Creates dry-run pods in `ns` until the mutate decision satisfies `holds`; returns it and the response.
async fn decided(env: &Env, ns: &str, prefix: &str, holds: impl Fn(&Value, bool) -> bool) -> Value {
    let mut attempt = 0;
    eventually(&format!("a {prefix} decision"), || {
        attempt += 1;
        let name = format!("{prefix}-{attempt}");
        let holds = &holds;
        async move {
            let created = env.create_pod_dry_run(ns, &pod(&name)).await;
            let line = env.decision(ns, &name, "mutate").await;
            holds(&line.0, created.status.is_success()).then_some(line.0)
        }
    })
    .await
}

/// A local pod-director that looks for provisioner CRDs every second, in a cluster without
/// them (left over by an earlier run); `None` in cluster mode (skipped: the scenario installs
/// CRDs, and the chart's pod-director looks for them every 5 minutes).
async fn start(scenario: &str) -> Option<Env> {
    if Target::Cluster == crate::harness::Settings::from_env().target {
        notice(&format!(
            "SKIPPED {scenario} in cluster mode: it installs CRDs and needs a short discovery interval"
        ));
        return None;
    }
    let options = Options {
        env: vec![("POD_DIRECTOR_NODEPOOL_DISCOVERY_INTERVAL".into(), "1s".into())],
        ..Options::default()
    };
    let env = Env::start_with(scenario, options).await;
    delete_crd(&env).await;
    delete_crds(&env, &CAPI_CRDS).await;
    Some(env)
}

/// A JSON merge patch of object `name` (of its status subresource, when `status`).
async fn merge_patch(api: &Api<DynamicObject>, name: &str, patch: Value, status: bool) {
    let params = PatchParams::default();
    let patched = if status {
        api.patch_status(name, &params, &Patch::Merge(patch)).await
    } else {
        api.patch(name, &params, &Patch::Merge(patch)).await
    };
    if let Err(e) = patched {
        panic!("{name} patched (status: {status}): {e}");
    }
}

/// The audit of the group (`pod-director audit --group`).
async fn audited(env: &Env) -> Value {
    let config = config_file(env);
    let (_, report) = audit(config.path(), &["--group", GROUP]).await;
    report["groups"][0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_a_nodepool_can_provision_is_not_a_false_alarm() {
    let Some(env) = start("provisioning").await else { return };
    let ns = env.namespace(Some(GROUP)).await;

    // No CRD: 0 nodes and nothing can provision → denied; nothing about NodePools above info.
    let line = decided(&env, &ns, "nocrd", |line, admitted| {
        !admitted && line["placement.decision"] == "denied"
    })
    .await;
    assert_eq!(line["placement.no_feasible_node"], json!(true), "{line}");
    assert!(line["placement.provisionable_by"].is_null(), "{line}");
    assert!(
        line["placement.message"]
            .as_str()
            .unwrap_or_default()
            .contains("no node could take this pod"),
        "{line}"
    );
    let group = audited(&env).await;
    assert_eq!(group["ready"], json!(false), "{group}");
    assert!(group["nodes"]["provisionable_by"].is_null(), "{group}");

    // The CRD and a compatible, Ready NodePool → admitted, provisionable by it; the audit is ready.
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    crds.create(&PostParams::default(), &karpenter_crd())
        .await
        .expect("the NodePool CRD created");
    let pools = node_pools(&env);
    let name = format!("e2e-spark-{}", suffix());
    let object: DynamicObject = serde_json::from_value(spark_pool(&name)).expect("a NodePool");
    eventually("the NodePool to be created", || async {
        pools.create(&PostParams::default(), &object).await.ok().map(|_| ())
    })
    .await;
    let status = |value: Value| merge_patch(&pools, &name, value, true);
    status(ready("True")).await;
    let by = json!([format!("nodepool/{name}")]);
    let line = decided(&env, &ns, "spark", |line, admitted| {
        admitted && line["placement.provisionable_by"] == by
    })
    .await;
    assert_eq!(line["placement.decision"], json!("patched"), "{line}");
    assert_eq!(line["placement.feasible_nodes"], json!(0), "{line}");
    assert_eq!(line["placement.no_feasible_node"], json!(false), "{line}");
    let group = audited(&env).await;
    assert_eq!(group["ready"], json!(true), "{group}");
    assert_eq!(group["nodes"]["provisionable_by"], by, "{group}");
    let warnings = group["warnings"].to_string();
    assert!(warnings.contains("provisioned on demand by nodepool/"), "{warnings}");

    // Each way the NodePool stops serving the group: denied again, the audit names why.
    let spec_patch = |patch: Value| merge_patch(&pools, &name, patch, false);
    let original = spark_pool(&name);
    let cases: [(&str, Value, Option<Value>, &str); 4] = [
        (
            "requirement",
            json!({"spec": {"template": {"metadata": {"labels": {"e2e.pod-director.io/provisioned-pool": "ember"}}}}}),
            None,
            "the pod requires label e2e.pod-director.io/provisioned-pool In [spark]; the NodePool offers In [ember]",
        ),
        (
            "taint",
            json!({"spec": {"template": {"spec": {"taints": [{"key": "e2e.pod-director.io/gpu", "effect": "NoSchedule"}]}}}}),
            None,
            "taint e2e.pod-director.io/gpu:NoSchedule is not tolerated",
        ),
        (
            "limits",
            json!({"spec": {"limits": {"cpu": "4"}}}),
            None,
            "limits exhausted: cpu 4 used of 4 (spec.limits)",
        ),
        (
            "notready",
            json!({}),
            Some(ready("False")),
            "not Ready (Ready=False: NodeClassNotReady)",
        ),
    ];
    for (case, patch, new_status, why) in cases {
        if patch != json!({}) {
            spec_patch(patch).await;
        }
        if let Some(s) = new_status {
            status(s).await;
        }
        let line = decided(&env, &ns, case, |line, admitted| {
            !admitted && line["placement.decision"] == "denied"
        })
        .await;
        assert!(line["placement.provisionable_by"].is_null(), "{case}: {line}");
        let group = audited(&env).await;
        assert_eq!(group["ready"], json!(false), "{case}: {group}");
        let blockers = group["blockers"].to_string();
        assert!(
            blockers.contains(&format!("nodepool/{name}: {why}")),
            "{case}: {blockers}"
        );
        assert_eq!(
            group["nodes"]["not_provisionable_by"][0]["reason"],
            json!(why),
            "{case}: {group}"
        );
        // Back to the compatible NodePool (the whole spec replaced), Ready again.
        // (A merge patch replaces lists whole: the template's taints too.)
        spec_patch(json!({"spec": original["spec"]})).await;
        status(ready("True")).await;
        decided(&env, &ns, &format!("{case}-back"), |line, admitted| {
            admitted && line["placement.provisionable_by"] == by
        })
        .await;
    }

    // NodePool logs never rose above info while the CRD was absent, nor after.
    let lines = env.logs.lines().await;
    let loud: Vec<&Value> = lines
        .iter()
        .filter(|l| l["level"] != "INFO" && l["level"] != "DEBUG")
        .filter(|l| l.to_string().to_lowercase().contains("nodepool"))
        .collect();
    assert!(loud.is_empty(), "{loud:?}");
    assert!(
        lines.iter().any(|l| l["message"]
            .as_str()
            .is_some_and(|m| m.contains("NodePools are not served"))),
        "the absence was noted once, at info"
    );

    delete_crd(&env).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
}

const CAPI_CRDS: [&str; 2] = ["machinedeployments.cluster.x-k8s.io", "machinesets.cluster.x-k8s.io"];

/// A MachineDeployment of the group's pool the cluster-autoscaler scales, at `replicas`.
fn machine_deployment(name: &str, replicas: u64) -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "MachineDeployment",
        "metadata": {"name": name, "annotations": {
            "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "0",
            "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "3",
            "capacity.cluster-autoscaler.kubernetes.io/cpu": "4",
            "capacity.cluster-autoscaler.kubernetes.io/memory": "16Gi",
            "capacity.cluster-autoscaler.kubernetes.io/labels": "e2e.pod-director.io/provisioned-pool=spark",
            "capacity.cluster-autoscaler.kubernetes.io/taints": "e2e.pod-director.io/provisioned=spark:NoSchedule"
        }},
        "spec": {
            "clusterName": "e2e",
            "replicas": replicas,
            "selector": {"matchLabels": {"e2e.pod-director.io/md": name}},
            "template": {
                "metadata": {"labels": {"e2e.pod-director.io/md": name}},
                "spec": {
                    "clusterName": "e2e",
                    "bootstrap": {"dataSecretName": "e2e-bootstrap"},
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachineTemplate", "name": "e2e"}
                }
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_api_node_group_the_autoscaler_scales_provisions_the_pool_until_its_max_size() {
    let Some(env) = start("provisioning-capi").await else {
        return;
    };
    let ns = env.namespace(Some(GROUP)).await;
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    for file in [
        "cluster.x-k8s.io_machinedeployments.yaml",
        "cluster.x-k8s.io_machinesets.yaml",
    ] {
        crds.create(
            &PostParams::default(),
            &crd("E2E_CLUSTER_API_CRDS", "cluster-api-crds", file),
        )
        .await
        .expect("a Cluster API CRD created");
    }
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta2", "MachineDeployment"),
        "machinedeployments",
    );
    // In the group's namespace: deleted with it.
    let deployments: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), &ns, &resource);
    let name = format!("e2e-spark-md-{}", suffix());
    let object: DynamicObject = serde_json::from_value(machine_deployment(&name, 0)).expect("a MachineDeployment");
    eventually("the MachineDeployment to be created", || async {
        deployments
            .create(&PostParams::default(), &object)
            .await
            .ok()
            .map(|_| ())
    })
    .await;
    let by = json!([format!("machinedeployment/{ns}/{name}")]);
    let line = decided(&env, &ns, "md", |line, admitted| {
        admitted && line["placement.provisionable_by"] == by
    })
    .await;
    assert_eq!(line["placement.no_feasible_node"], json!(false), "{line}");
    let group = audited(&env).await;
    assert_eq!(group["ready"], json!(true), "{group}");
    assert_eq!(group["nodes"]["provisionable_by"], by, "{group}");

    // At its max size the autoscaler cannot add a node: denied, and the audit says why.
    merge_patch(&deployments, &name, json!({"spec": {"replicas": 3}}), false).await;
    let line = decided(&env, &ns, "md-max", |line, admitted| {
        !admitted && line["placement.decision"] == "denied"
    })
    .await;
    assert!(line["placement.provisionable_by"].is_null(), "{line}");
    let group = audited(&env).await;
    assert_eq!(group["ready"], json!(false), "{group}");
    let blockers = group["blockers"].to_string();
    assert!(
        blockers.contains(&format!(
            "machinedeployment/{ns}/{name}: at its max size (3 of 3 replicas)"
        )),
        "{blockers}"
    );
    delete_crds(&env, &CAPI_CRDS).await;
}
