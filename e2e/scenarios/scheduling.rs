//! Where pods really run: kube-scheduler binds them and kwok runs them on the
//! scenario's Nodes, so every check reads the stored results — `spec.nodeName`
//! after binding, phase `Running`, the scheduler's `FailedScheduling` events,
//! `DaemonSet.status` — never the suite's own idea of placement.
//!
//! Pools (e2e/scenarios/values.yaml): blue nodes carry the groups' labels and their
//! `e2e.pod-director.io/dedicated=blue:NoSchedule` taint; red nodes the same labels
//! with `pool: red` and no taint, so an unplaced pod fits there and only there.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::fixtures::{Placement, controller, patched, workload, workload_spec};
use crate::harness::k8s::{IMAGE, eventually, pod_from};
use crate::harness::scheduling::{node_of, phase, wait_failed_scheduling};
use crate::harness::{Env, pool_labels, pool_node, suffix};

const POOL: &str = "e2e.pod-director.io/pool";

/// A red node: the blue nodes' labels with `pool: red`, no taint (room for anyone).
fn red_node(name: &str) -> Node {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": pool_labels("red")},
    }))
    .expect("a Node")
}

/// Creates `blue` blue and `red` red nodes (besides the Env's own blue one), waits until every
/// node of the cluster is Ready; returns the names of the blue and the red nodes.
async fn pools(env: &Env, blue: usize, red: usize) -> (BTreeSet<String>, BTreeSet<String>) {
    let sfx = suffix();
    for i in 0..blue {
        env.create_node(&pool_node(&format!("e2e-blue-{}-{sfx}-{i}", env.scenario)))
            .await;
    }
    for i in 0..red {
        env.create_node(&red_node(&format!("e2e-red-{}-{sfx}-{i}", env.scenario)))
            .await;
    }
    let nodes = all_nodes(env).await;
    let names: Vec<String> = nodes.iter().filter_map(|n| n.metadata.name.clone()).collect();
    env.wait_nodes_ready(&names).await;
    let in_pool = |pool: &str| -> BTreeSet<String> {
        nodes
            .iter()
            .filter(|n| n.metadata.labels.as_ref().and_then(|l| l.get(POOL)).map(String::as_str) == Some(pool))
            .filter_map(|n| n.metadata.name.clone())
            .collect()
    };
    let (blue_nodes, red_nodes) = (in_pool("blue"), in_pool("red"));
    assert_eq!(
        blue_nodes.len(),
        blue + 1,
        "the Env's blue node and ours: {blue_nodes:?}"
    );
    assert_eq!(red_nodes.len(), red, "{red_nodes:?}");
    (blue_nodes, red_nodes)
}

async fn all_nodes(env: &Env) -> Vec<Node> {
    Api::<Node>::all(env.client.clone())
        .list(&ListParams::default())
        .await
        .expect("nodes listed")
        .items
}

/// A Deployment of `replicas` [`workload`] pods labelled `app: <name>`.
fn deployment(name: &str, replicas: i32, spec: Value) -> Deployment {
    let mut deployment: Deployment = controller(name, spec);
    deployment.spec.as_mut().expect("a spec").replicas = Some(replicas);
    deployment
}

/// The nodes the pods run on.
fn nodes_of(pods: &[Pod]) -> BTreeSet<String> {
    pods.iter().filter_map(|p| node_of(p).map(str::to_owned)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enforce_deployment_runs_every_replica_on_the_group_s_nodes_though_other_pools_have_room() {
    let Some(env) = Env::start_scheduling("sched-enforce").await else {
        return;
    };
    let (blue, red) = pools(&env, 2, 2).await;
    let ns = env.namespace(Some("e2e-enforce")).await;
    Api::<Deployment>::namespaced(env.client.clone(), &ns)
        .create(&PostParams::default(), &deployment("web", 4, workload_spec()))
        .await
        .expect("Deployment created");
    let pods = env.wait_running_pods(&ns, "app=web", 4).await;
    for pod in &pods {
        let node = node_of(pod).expect("bound");
        assert!(
            blue.contains(node),
            "{:?} runs on {node}, not a blue node {blue:?}",
            pod.metadata.name
        );
        assert_eq!(Placement::of(pod), Placement::enforced());
    }
    assert!(nodes_of(&pods).is_disjoint(&red), "none on red: {:?}", nodes_of(&pods));

    // The red pool had room all along: the same pod without a group runs there.
    let free = env.namespace(None).await;
    env.create_admitted_pod(&free, &workload("free")).await;
    let running = env.wait_running(&free, "free").await;
    assert!(red.contains(node_of(&running).expect("bound")), "{:?}", running.spec);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_deployment_runs_where_the_scheduler_puts_it_and_its_would_be_patch_lands_on_the_group() {
    let Some(env) = Env::start_scheduling("sched-dryrun").await else {
        return;
    };
    let (blue, red) = pools(&env, 1, 2).await;
    let ns = env.namespace(Some("e2e-dryrun")).await;
    let twin = env.namespace(Some("e2e-enforce")).await;
    Api::<Deployment>::namespaced(env.client.clone(), &ns)
        .create(&PostParams::default(), &deployment("web", 3, workload_spec()))
        .await
        .expect("Deployment created");
    let pods = env.wait_running_pods(&ns, "app=web", 3).await;
    for pod in &pods {
        assert_eq!(
            Placement::of(pod),
            Placement::submitted(),
            "dryRun stores the pod untouched"
        );
        // Untouched, it does not tolerate the blue taint: the scheduler put it on red.
        let node = node_of(pod).expect("bound");
        assert!(red.contains(node), "{:?} on {node}", pod.metadata.name);
    }

    // Each would-be patch, applied to the pod as submitted, lands it on the group's nodes.
    let decisions: Vec<_> = env
        .logs
        .decisions()
        .await
        .into_iter()
        .filter(|d| d.str("admission.request.namespace") == Some(ns.as_str()) && d.str("webhook") == Some("mutate"))
        .filter(|d| {
            d.str("admission.object.generate_name")
                .is_some_and(|g| g.starts_with("web-"))
        })
        .collect();
    assert!(decisions.len() >= 3, "a decision per replica: {decisions:?}");
    for (i, decision) in decisions.iter().take(3).enumerate() {
        assert_eq!(decision.decision(), "would_patch", "{decision:?}");
        let name = format!("twin-{i}");
        let replayed = patched(&workload(&name), decision.patch());
        env.create_admitted_pod(&twin, &replayed).await;
        let running = env.wait_running(&twin, &name).await;
        let node = node_of(&running).expect("bound");
        assert!(
            blue.contains(node),
            "{name} (the would-be patch) runs on {node}, not on {blue:?}"
        );
        assert_eq!(
            env.decision(&twin, &name, "mutate").await.decision(),
            "noop",
            "the would-be patch is all enforce does"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_of_a_group_no_node_satisfies_stay_pending_with_the_scheduler_s_failed_scheduling() {
    let Some(env) = Env::start_scheduling("sched-nowhere").await else {
        return;
    };
    pools(&env, 0, 1).await;
    // e2e-nodes-enforce wants the teal pool, which has no node in this scenario.
    let ns = env.namespace(Some("e2e-nodes-enforce")).await;
    env.create_admitted_pod(&ns, &workload("stuck")).await;
    let line = env.decision(&ns, "stuck", "mutate").await;
    assert_eq!(line.decision(), "patched", "{line:?}");
    assert_eq!(line.get("placement.feasible_nodes"), &json!(0), "{line:?}");
    assert_eq!(line.get("placement.no_feasible_node"), &json!(true), "{line:?}");

    let verdict = wait_failed_scheduling(&env.client, &ns, "stuck").await;
    let total = all_nodes(&env).await.len();
    assert_eq!(
        verdict.nodes, total,
        "0/{total} nodes are available: {}",
        verdict.message
    );
    assert!(
        verdict.message.starts_with(&format!("0/{total} nodes are available: ")),
        "{}",
        verdict.message
    );
    assert!(
        verdict.count("node(s) didn't match Pod's node affinity/selector") >= 1,
        "{}",
        verdict.message
    );
    env.assert_stays_pending(&ns, "stuck", Duration::from_secs(2)).await;
}

/// The DaemonSet's pods, once `status.desiredNumberScheduled` is `want` and they all run.
async fn daemon_set_running(env: &Env, ns: &str, name: &str, want: usize) -> Vec<Pod> {
    let api: Api<DaemonSet> = Api::namespaced(env.client.clone(), ns);
    eventually(
        &format!("DaemonSet {ns}/{name}: {want} pods desired and Running"),
        || async {
            let ds = api.get(name).await.ok()?;
            let status = ds.status?;
            let pods = env.list_pods(ns, &format!("app={name}")).await;
            let running = pods.iter().filter(|p| phase(p) == "Running").count();
            (status.desired_number_scheduled == want as i32 && pods.len() == want && running == want).then_some(pods)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemonset_runs_only_on_its_group_s_nodes_and_an_agent_daemonset_on_every_node() {
    let Some(env) = Env::start_scheduling("sched-ds").await else {
        return;
    };
    let (blue, red) = pools(&env, 1, 2).await;
    let group = env.namespace(Some("e2e-enforce")).await;
    let agents = env.namespace(Some("e2e-agents")).await;
    let daemon_sets = |ns: &str| Api::<DaemonSet>::namespaced(env.client.clone(), ns);

    // Without allowDaemonSets the group's placement goes into the DaemonSet's template.
    daemon_sets(&group)
        .create(&PostParams::default(), &controller::<DaemonSet>("ds", workload_spec()))
        .await
        .expect("DaemonSet created");
    let pods = daemon_set_running(&env, &group, "ds", blue.len()).await;
    assert_eq!(nodes_of(&pods), blue, "one pod per blue node, none elsewhere");

    // An agent (tolerates everything) in a group that allows DaemonSets: left alone, on every node.
    let spec = json!({"containers": [{"name": "agent", "image": IMAGE}], "tolerations": [{"operator": "Exists"}]});
    daemon_sets(&agents)
        .create(&PostParams::default(), &controller::<DaemonSet>("agent", spec))
        .await
        .expect("DaemonSet created");
    let every: BTreeSet<String> = all_nodes(&env)
        .await
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    assert!(every.is_superset(&red) && every.is_superset(&blue));
    let pods = daemon_set_running(&env, &agents, "agent", every.len()).await;
    assert_eq!(nodes_of(&pods), every, "one agent pod per node");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_terminating_pod_s_finalizer_and_relabelling_a_non_compliant_running_pod_are_admitted_in_enforce() {
    let Some(env) = Env::start_scheduling("sched-updates").await else {
        return;
    };
    let (blue, red) = pools(&env, 0, 1).await;
    let ns = env.namespace(Some("e2e-enforce")).await;
    let pods = env.pods(&ns);

    // A finalizer of someone else's (kwok finishes the deletion but leaves custom finalizers).
    let finalizer = "e2e.pod-director.io/hold";
    let mut held = workload("held");
    held.metadata.finalizers = Some(vec![finalizer.to_owned()]);
    env.create_admitted_pod(&ns, &held).await;
    let running = env.wait_running(&ns, "held").await;
    assert!(blue.contains(node_of(&running).expect("bound")));
    pods.delete("held", &DeleteParams::default()).await.expect("deleted");
    let terminating = eventually("held to be terminating", || async {
        let pod = pods.get("held").await.ok()?;
        pod.metadata.deletion_timestamp.is_some().then_some(pod)
    })
    .await;
    assert_eq!(
        terminating.metadata.finalizers.as_deref(),
        Some(&[finalizer.to_owned()][..])
    );
    let unhold = json!([{"op": "remove", "path": "/metadata/finalizers"}]);
    let unhold: json_patch::Patch = serde_json::from_value(unhold).expect("a JSON Patch");
    pods.patch("held", &PatchParams::default(), &Patch::<()>::Json(unhold))
        .await
        .expect("the finalizer's owner removes it: admitted");
    let line = update_decision(&env, &ns, "held").await;
    assert_eq!(line.decision(), "noop", "{line:?}");
    assert_eq!(line.text("placement.mode"), "enforce");
    eventually("held to be gone", || async {
        pods.get_opt("held").await.ok().and_then(|p| p.is_none().then_some(()))
    })
    .await;

    // A pod running off the group's nodes: created before its namespace joined the group.
    let late = env.namespace(None).await;
    env.create_admitted_pod(
        &late,
        &pod_from(json!({
            "metadata": {"name": "old"},
            "spec": {"containers": [{"name": "app", "image": IMAGE}]},
        })),
    )
    .await;
    let running = env.wait_running(&late, "old").await;
    assert!(red.contains(node_of(&running).expect("bound")), "{:?}", running.spec);
    crate::harness::k8s::label_namespace(
        &env.client,
        &late,
        json!({env.config.namespace_label.as_str(): "e2e-enforce"}),
    )
    .await
    .expect("the admin relabels the namespace");
    // Once pod-director knows the namespace's group (its cache follows a watch)... The API
    // server's namespace cache follows one too: until it has the new label, the webhooks'
    // namespaceSelectors do not select the namespace and a canary is not sent at all. So any
    // canary's mutate decision in e2e-enforce will do, and a canary nobody decided is retried.
    let mut attempt = 0;
    eventually("pod-director to see the namespace in e2e-enforce", || {
        attempt += 1;
        let name = format!("canary-{attempt}");
        let (env, late) = (&env, &late);
        async move {
            env.create_pod_dry_run(late, &workload(&name)).await;
            let decided = env
                .decisions_with(&[
                    ("admission.request.namespace", late.as_str()),
                    ("webhook", "mutate"),
                    ("placement.group", "e2e-enforce"),
                ])
                .await;
            decided
                .iter()
                .any(|d| {
                    d.str("admission.request.name")
                        .is_some_and(|n| n.starts_with("canary-"))
                })
                .then_some(())
        }
    })
    .await;
    // ... a label-only UPDATE of the non-compliant pod is admitted: its violations predate it.
    let relabel = json!({"metadata": {"labels": {"e2e.pod-director.io/touched": "yes"}}});
    let updated = Api::<Pod>::namespaced(env.client.clone(), &late)
        .patch("old", &PatchParams::default(), &Patch::Merge(&relabel))
        .await
        .expect("the label-only update is admitted in enforce");
    assert_eq!(
        updated
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("e2e.pod-director.io/touched"))
            .map(String::as_str),
        Some("yes")
    );
    let line = update_decision(&env, &late, "old").await;
    assert_eq!(line.text("placement.mode"), "enforce", "{line:?}");
    assert_eq!(line.decision(), "noop", "{line:?}");
    assert!(
        line.text("placement.summary").contains("predate this update"),
        "{line:?}"
    );
    assert_eq!(phase(&env.get_pod(&late, "old").await), "Running");
}

/// pod-director's /validate decision on an UPDATE of pod `namespace/name`.
async fn update_decision(env: &Env, namespace: &str, name: &str) -> crate::harness::Decision {
    eventually(
        &format!("a validate decision on an UPDATE of {namespace}/{name}"),
        || async {
            env.decisions_with(&[
                ("admission.request.namespace", namespace),
                ("admission.request.name", name),
                ("webhook", "validate"),
                ("admission.request.operation", "UPDATE"),
            ])
            .await
            .pop()
        },
    )
    .await
}

/// `pod-director audit -o json --group GROUP` with `config` (the KUBECONFIG of the test).
async fn audit_group(config: &Value, group: &str) -> Value {
    let file = tempfile::Builder::new()
        .suffix(".json")
        .tempfile()
        .expect("a temp file");
    std::fs::write(file.path(), config.to_string()).expect("config written");
    let (_, report) = crate::audit::audit(file.path(), &["--group", group]).await;
    report["groups"][0].clone()
}

/// Merge-patches labels into the Nodes `names`.
async fn label_nodes(env: &Env, names: &BTreeSet<String>, labels: Value) {
    let api: Api<Node> = Api::all(env.client.clone());
    for name in names {
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"labels": labels}})),
        )
        .await
        .unwrap_or_else(|e| panic!("node {name} labelled: {e}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_lists_running_pods_enforce_would_change_with_their_nodes_until_a_rollout_restart_places_them() {
    let Some(mut env) = Env::start_local_scheduling(
        "sched-audit",
        "flips a group to enforce by editing pod-director's config file (on a cluster: a ConfigMap edit)",
    )
    .await
    else {
        return;
    };
    let (blue, red) = pools(&env, 1, 2).await;
    let disk = json!({"e2e.pod-director.io/disk": "ssd"});
    label_nodes(&env, &red, disk.clone()).await;
    // A group of this scenario's own (e2e-dryrun's placement, in dryRun): the audit of it sees
    // no namespace of an earlier scenario still being deleted.
    let group_name = format!("e2e-sched-audit-{}", suffix());
    let revision = env.loaded_revision().await;
    let mut config = env.edit_config(|c| {
        let mut group = c["groups"]["e2e-dryrun"].clone();
        group["mode"] = json!("dryRun");
        c["groups"][group_name.as_str()] = group;
    });
    let revision = env.reloaded_from(&revision).await;
    let ns = env.namespace(Some(&group_name)).await;
    // The pods ask for an ssd disk of their own: only red nodes have one, so far.
    let mut spec = workload_spec();
    spec["nodeSelector"]["e2e.pod-director.io/disk"] = json!("ssd");
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), &ns);
    deployments
        .create(&PostParams::default(), &deployment("web", 2, spec))
        .await
        .expect("Deployment created");
    let pods = env.wait_running_pods(&ns, "app=web", 2).await;
    let running_on = nodes_of(&pods);
    assert!(
        running_on.is_subset(&red),
        "dryRun: where the scheduler put them: {running_on:?}"
    );

    // The group goes to enforce.
    config["groups"][group_name.as_str()]["mode"] = json!("enforce");
    let written = config.clone();
    env.edit_config(move |c| *c = written);
    env.reloaded_from(&revision).await;
    let group = audit_group(&config, &group_name).await;
    assert_eq!(group["mode"], "enforce", "{group:#}");
    assert_eq!(group["pods"]["would_patch"], 2, "{group:#}");
    let listed = group["would_patch"]
        .as_array()
        .and_then(|f| {
            f.iter()
                .find(|f| f["workload"] == "Deployment/web" && f["source"] == "pods")
        })
        .unwrap_or_else(|| panic!("Deployment/web's running pods are listed: {group:#}"));
    assert_eq!(listed["pods"], 2);
    let nodes: BTreeSet<String> = serde_json::from_value(listed["nodes"].clone()).expect("node names");
    assert_eq!(nodes, running_on, "the nodes they run on: {listed:#}");
    // Placed, they would fit no node: the blue nodes have no ssd.
    assert_eq!(group["ready"], false, "{group:#}");
    let blocked = group["no_feasible_node"]
        .as_array()
        .is_some_and(|f| f.iter().any(|f| f["workload"] == "Deployment/web"));
    assert!(blocked, "{group:#}");

    // The pool gets its disks; a rollout restart re-creates the pods through enforce.
    label_nodes(&env, &blue, disk).await;
    let restart = json!({"spec": {"template": {"metadata": {"annotations": {
        "kubectl.kubernetes.io/restartedAt": format!("e2e-{}", suffix())}}}}});
    deployments
        .patch("web", &PatchParams::default(), &Patch::Merge(&restart))
        .await
        .expect("rollout restart");
    let pods = eventually(
        "the restarted replicas running on blue nodes, the old ones gone",
        || async {
            let pods = env.list_pods(&ns, "app=web").await;
            let placed = pods.len() == 2
                && pods.iter().all(|p| {
                    p.metadata.deletion_timestamp.is_none()
                        && phase(p) == "Running"
                        && node_of(p).is_some_and(|n| blue.contains(n))
                });
            placed.then_some(pods)
        },
    )
    .await;
    for pod in &pods {
        assert_eq!(
            Placement::of(pod).node_selector.get(POOL).map(String::as_str),
            Some("blue")
        );
    }
    let group = audit_group(&config, &group_name).await;
    assert_eq!(group["pods"]["compliant"], 2, "{group:#}");
    assert_eq!(group["pods"]["would_patch"], 0, "{group:#}");
    assert_eq!(group["ready"], true, "{group:#}");
}
