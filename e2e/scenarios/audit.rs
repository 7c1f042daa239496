//! `pod-director audit` and the continuous audit of `serve` on a real API
//! server: pods running before their group is enforced, created by the
//! controller-manager (a Deployment's ReplicaSet) and by a user, decided as
//! enforce would decide their re-creation; a group whose pool has no node is not
//! ready until a matching Node object joins, which the continuous audit sees
//! within its interval.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

use crate::fixtures::deployment;
use crate::harness::k8s::{IMAGE, eventually, pod_from};
use crate::harness::process::binary;
use crate::harness::{Env, Options, Target, suffix};

/// The continuous audit's interval in these scenarios (cluster mode: e2e/scenarios/values.yaml).
const INTERVAL: Duration = Duration::from_secs(2);
/// The pool label of the audit groups, which only this scenario's nodes carry.
const POOL: &str = "e2e.pod-director.io/audit-pool";

/// The suite's configuration as a file `pod-director audit -c` reads.
pub(crate) fn config_file(env: &Env) -> tempfile::NamedTempFile {
    json_file(&serde_json::to_value(&env.config).expect("the config serializes"))
}

/// A temporary `.json` file holding `value`.
fn json_file(value: &Value) -> tempfile::NamedTempFile {
    let file = tempfile::Builder::new()
        .suffix(".json")
        .tempfile()
        .expect("a temp file");
    std::fs::write(file.path(), value.to_string()).expect("JSON written");
    file
}

/// Runs `pod-director audit -o json ARGS` (KUBECONFIG from the test's environment):
/// exit code and the report.
pub(crate) async fn audit(config: &Path, args: &[&str]) -> (i32, Value) {
    let (code, report, _) = audit_as(None, config, args).await;
    (code, report)
}

/// [`audit`] with another kubeconfig: exit code, the report (null when none) and standard error.
async fn audit_as(kubeconfig: Option<&Path>, config: &Path, args: &[&str]) -> (i32, Value, String) {
    let mut command = Command::new(binary());
    if let Some(kubeconfig) = kubeconfig {
        command.env("KUBECONFIG", kubeconfig);
    }
    command
        .arg("audit")
        .arg("--config")
        .arg(config)
        .args(["-o", "json", "--quiet", "--request-timeout", "10s"])
        .args(args);
    for (name, _) in std::env::vars() {
        if name.starts_with("POD_DIRECTOR_") {
            command.env_remove(name);
        }
    }
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("joined")
        .expect("pod-director audit runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let code = output.status.code().expect("exited");
    if code == 2 && kubeconfig.is_some() {
        return (code, Value::Null, stderr.into_owned());
    }
    let report = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("audit printed no JSON ({e}), exit {code}:\n{stdout}\n{stderr}"));
    (code, report, stderr.into_owned())
}

fn node(name: &str, pool: &str) -> Node {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {POOL: pool, "kubernetes.io/os": "linux"}},
        "spec": {"taints": [{"key": "e2e.pod-director.io/audit", "value": pool, "effect": "NoSchedule"}]},
    }))
    .expect("a Node")
}

/// A pod without placement of its own, named `plain`.
fn plain() -> Pod {
    pod_from(json!({"metadata": {"name": "plain"}, "spec": {"containers": [{"name": "app", "image": IMAGE}]}}))
}

fn finding<'a>(group: &'a Value, workload: &str, source: &str) -> Option<&'a Value> {
    group["would_deny"]
        .as_array()?
        .iter()
        .find(|f| f["workload"] == workload && f["source"] == source)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_names_the_workloads_whose_running_pods_enforce_would_refuse() {
    let env = Env::start("audit").await;
    let ns = env.namespace(Some("e2e-audit")).await;
    // Created before enforce (the group is in dryRun): admitted as they are.
    let conflicting = json!({"containers": [{"name": "app", "image": IMAGE}], "nodeSelector": {POOL: "green"}});
    Api::<Deployment>::namespaced(env.client.clone(), &ns)
        .create(&PostParams::default(), &deployment("web", conflicting.clone()))
        .await
        .expect("Deployment created");
    env.create_admitted_pod(
        &ns,
        &pod_from(json!({"metadata": {"name": "debug"}, "spec": conflicting})),
    )
    .await;
    env.create_admitted_pod(&ns, &plain()).await;
    env.wait_for_pods(&ns, "app=web", 2).await;

    let config = config_file(&env);
    // One object per page: every list goes through `continue`.
    let (code, report) = audit(
        config.path(),
        &["--group", "e2e-audit", "--page-size", "1", "--fail-on", "not-ready"],
    )
    .await;
    assert_eq!(code, 1, "--fail-on not-ready: {report:#}");
    assert_eq!(report["ready"], false);
    let groups = report["groups"].as_array().expect("groups");
    assert_eq!(groups.len(), 1, "--group audits that group only: {report:#}");
    let group = &groups[0];
    assert_eq!(group["group"], "e2e-audit");
    assert_eq!(group["mode"], "dryRun");
    assert_eq!(group["ready"], false);
    assert_eq!(
        group["pods"],
        json!({"compliant": 0, "would_patch": 1, "would_deny": 3, "skipped": 0}),
        "2 of the Deployment, debug, plain — every page read: {report:#}"
    );
    assert_eq!(
        group["templates"]["would_deny"], 1,
        "the Deployment's template: {report:#}"
    );

    let pods = finding(group, "Deployment/web", "pods").unwrap_or_else(|| panic!("Deployment/web listed: {report:#}"));
    assert_eq!(pods["namespace"], ns.as_str());
    assert_eq!(pods["pods"], 2, "both ReplicaSet pods, under their Deployment");
    let reason = pods["reason"].as_str().expect("a reason");
    assert!(
        reason.contains(r#"nodeSelector["e2e.pod-director.io/audit-pool"]: pod has "green", group requires "violet""#),
        "{reason}"
    );
    assert!(finding(group, "Deployment/web", "template").is_some(), "{report:#}");
    assert!(
        finding(group, "Pod/debug", "pods").is_some(),
        "a bare pod is its own workload: {report:#}"
    );

    let blockers: Vec<&str> = group["blockers"]
        .as_array()
        .expect("blockers")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        blockers.iter().any(|b| b.starts_with("no node for the group: 0 of")),
        "{blockers:?}"
    );
    assert!(
        blockers.iter().any(
            |b| b.starts_with("3 running pods and 1 workload template would be denied by enforce:")
                && b.contains(&format!("{ns}/Deployment/web (2 pods)"))
        ),
        "{blockers:?}"
    );
}

/// The latest `audit: group verdict` line for `group`.
async fn verdict_line(env: &Env, group: &str) -> Option<Value> {
    env.logs
        .messages("audit: group verdict")
        .await
        .into_iter()
        .rfind(|l| l["placement.group"] == group)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_without_a_node_is_not_ready_until_a_matching_node_joins() {
    let local = crate::harness::Settings::from_env().target == Target::Local;
    let env = Env::start_with(
        "audit-pool",
        Options {
            audit_interval: Some(INTERVAL),
            ..Options::default()
        },
    )
    .await;
    let ns = env.namespace(Some("e2e-audit-pool")).await;
    env.create_admitted_pod(&ns, &plain()).await;
    let config = config_file(&env);

    let (code, report) = audit(config.path(), &["--group", "e2e-audit-pool"]).await;
    assert_eq!(code, 0, "without --fail-on a verdict is not a failure: {report:#}");
    let group = &report["groups"][0];
    assert_eq!(group["ready"], false, "{report:#}");
    assert_eq!(group["nodes"]["feasible"], 0);
    let blockers = group["blockers"].as_array().expect("blockers");
    assert_eq!(blockers.len(), 1, "{report:#}");
    assert!(
        blockers[0]
            .as_str()
            .is_some_and(|b| b.starts_with("no node for the group: 0 of")),
        "{blockers:?}"
    );
    assert_eq!(group["pods"]["would_patch"], 1, "{report:#}");

    // The continuous audit says the same, in its log line (and gauge, locally).
    let line = eventually("a not-ready verdict line of a scan that saw the namespace", || async {
        verdict_line(&env, "e2e-audit-pool")
            .await
            .filter(|l| l["audit.ready"] == false && l["audit.namespaces"] == 1)
    })
    .await;
    assert!(
        line["audit.blockers"]
            .as_str()
            .is_some_and(|b| b.starts_with("no node for the group")),
        "{line}"
    );
    assert_eq!(line["audit.pods.would_patch"], 1, "{line}");
    if local {
        assert_eq!(
            env.metric(r#"pod_director_group_ready{group="e2e-audit-pool"}"#).await,
            Some(0.0)
        );
        assert_eq!(
            env.metric(r#"pod_director_group_blockers{group="e2e-audit-pool"}"#)
                .await,
            Some(1.0)
        );
        // One replica audits: this one holds the Lease.
        let lease = Api::<Lease>::namespaced(env.client.clone(), &env.settings.namespace)
            .get("pod-director-audit")
            .await
            .expect("the audit Lease exists");
        let holder = lease.spec.and_then(|s| s.holder_identity).unwrap_or_default();
        assert!(!holder.is_empty(), "someone holds the audit Lease");
    }

    env.create_node(&node(&format!("e2e-indigo-{}", suffix()), "indigo"))
        .await;
    let joined = tokio::time::Instant::now();
    let line = eventually("a ready verdict line", || async {
        verdict_line(&env, "e2e-audit-pool")
            .await
            .filter(|l| l["audit.ready"] == true)
    })
    .await;
    let seen_after = joined.elapsed();
    assert!(
        seen_after < INTERVAL * 3 + Duration::from_secs(2),
        "the continuous audit saw the node {seen_after:?} after it joined (interval {INTERVAL:?})"
    );
    assert_eq!(line["audit.feasible_nodes"], 1, "{line}");
    assert_eq!(line["audit.blockers"], "", "{line}");
    if local {
        assert_eq!(
            env.metric(r#"pod_director_group_ready{group="e2e-audit-pool"}"#).await,
            Some(1.0)
        );
    }
    let (code, report) = audit(config.path(), &["--group", "e2e-audit-pool", "--fail-on", "not-ready"]).await;
    assert_eq!(code, 0, "ready: {report:#}");
    assert_eq!(report["groups"][0]["ready"], true, "{report:#}");
}

/// Two continuous audits as two replicas (in this process, with identities of their own).
struct Replica {
    metrics: pod_director::app::Metrics,
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Replica {
    fn exports(&self) -> bool {
        self.metrics
            .encode()
            .contains(r#"pod_director_group_ready{group="e2e-audit-pool"}"#)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_replicas_only_the_lease_holder_audits_and_the_other_takes_over_when_it_stops() {
    use std::sync::Arc;

    use pod_director::cluster::ScanOptions;
    use pod_director::cluster::{Continuous, LeaseTarget, spawn_audit};
    use pod_director::cluster::{KubeNodes, Nodes};

    let env = Env::start("audit-lease").await;
    let lease_ns = env.namespace(None).await;
    env.namespace(Some("e2e-audit-pool")).await;
    let config = config_file(&env);
    let text = std::fs::read_to_string(config.path()).expect("config");
    let loaded = pod_director_engine::config::Config::from_yaml(&text, "values.yaml", Vec::new()).expect("valid");
    let live = Arc::new(arc_swap::ArcSwap::from_pointee(loaded));
    let nodes = Arc::new(Nodes::new(Arc::new(KubeNodes::start(env.client.clone()))));
    let replica = |identity: &str| {
        let metrics = pod_director::app::Metrics::register();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let task = spawn_audit(
            Continuous {
                client: env.client.clone(),
                config: live.clone(),
                nodes: nodes.clone(),
                metrics: metrics.audit.clone(),
                interval: Duration::from_secs(1),
                lease: Some(LeaseTarget {
                    namespace: lease_ns.clone(),
                    name: "e2e-audit".to_owned(),
                    identity: identity.to_owned(),
                }),
                options: ScanOptions {
                    group: Some("e2e-audit-pool".to_owned()),
                    ..ScanOptions::default()
                },
                reports: None,
            },
            stopped,
        );
        Replica { metrics, stop, task }
    };
    let mut replicas = vec![replica("replica-a"), replica("replica-b")];

    let leader = eventually("one replica exporting the audit", || async {
        replicas.iter().position(Replica::exports)
    })
    .await;
    // Several intervals later, still only one.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let exporting: Vec<bool> = replicas.iter().map(Replica::exports).collect();
    assert_eq!(
        exporting.iter().filter(|e| **e).count(),
        1,
        "exactly one replica audits: {exporting:?}"
    );
    assert!(exporting[leader], "the same one: {exporting:?}");
    let lease = Api::<Lease>::namespaced(env.client.clone(), &lease_ns)
        .get("e2e-audit")
        .await
        .expect("the Lease exists");
    let managers: Vec<String> = lease
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect();
    let holder = lease.spec.and_then(|s| s.holder_identity).unwrap_or_default();
    assert_eq!(
        holder,
        ["replica-a", "replica-b"][leader],
        "the exporter holds the Lease"
    );
    // The API server refuses a second taker only if the takers are different field managers.
    assert!(
        managers.contains(&format!("pod-director-audit-{holder}")),
        "the holder writes the Lease under a field manager of its own: {managers:?}"
    );

    // The holder shuts down: it releases the Lease, the other one takes over.
    let stopped = replicas.remove(leader);
    let _ = stopped.stop.send(true);
    tokio::time::timeout(Duration::from_secs(10), stopped.task)
        .await
        .expect("the holder stops within 10 s")
        .expect("its task ends cleanly");
    let other = &replicas[0];
    // The other notices the released Lease when its term (15 s) ends.
    let released = tokio::time::Instant::now();
    let deadline = released + Duration::from_secs(60);
    while !other.exports() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the other replica did not take over within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    println!(
        "the other replica audited {:?} after the holder stopped",
        released.elapsed()
    );
    let _ = other.stop.send(true);
}

/// The chart's RBAC (its ClusterRole and the audit's) is all the audit needs, and
/// it reads only: run as the chart's ServiceAccount (impersonated), the audit
/// completes; the same account may not change pods or workloads, nor touch any
/// Lease but the audit's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_s_audit_rbac_lets_the_service_account_audit_and_only_read() {
    let env = Env::start("audit-rbac").await;
    let (release_ns, fullname) = (env.settings.namespace.clone(), env.settings.fullname.clone());
    if env.settings.target == Target::Local {
        // In cluster mode the chart installed them.
        crate::harness::ensure_namespace(&env.client, &release_ns).await;
        let mut objects = crate::harness::chart::render_rbac(&env.settings);
        objects.extend(crate::harness::chart::render_template(
            &env.settings,
            "templates/audit-rbac.yaml",
        ));
        env.apply_rbac(objects).await;
    }
    let ns = env.namespace(Some("e2e-audit-pool")).await;
    env.create_admitted_pod(&ns, &plain()).await;

    // A kubeconfig acting as the chart's ServiceAccount.
    let (account, groups) = env.service_account();
    let admin = std::env::var("KUBECONFIG").expect("KUBECONFIG");
    let mut kubeconfig: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(&admin).expect("kubeconfig")).expect("kubeconfig YAML");
    for user in kubeconfig["users"].as_array_mut().expect("users") {
        user["user"]["as"] = json!(account);
        user["user"]["as-groups"] = json!(groups);
    }
    let impersonating = json_file(&kubeconfig);

    // The kubeconfig really acts as the account: what the chart does not grant is refused.
    let as_account = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(impersonating.path()).expect("kubeconfig read"),
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .expect("a config"),
    )
    .expect("a client");
    let secrets = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(as_account, &ns)
        .list(&ListParams::default())
        .await;
    assert!(
        matches!(&secrets, Err(kube::Error::Api(status)) if status.is_forbidden()),
        "the impersonated account may not list secrets: {secrets:?}"
    );

    let config = config_file(&env);
    // The authorizer sees new roles through its informers: retry a refusal for a while.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let report = loop {
        let (code, report, stderr) = audit_as(
            Some(impersonating.path()),
            config.path(),
            &["--group", "e2e-audit-pool"],
        )
        .await;
        if code == 0 {
            break report;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the chart's ServiceAccount cannot audit (exit {code}): {stderr}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(report["groups"][0]["pods"]["would_patch"], 1, "{report:#}");

    let lease = format!("{fullname}-audit");
    let may = |group, resource, verb, namespace, name| env.service_account_may(group, resource, verb, namespace, name);
    assert!(
        may(
            "coordination.k8s.io",
            "leases",
            "patch",
            Some(&release_ns),
            Some(&lease)
        )
        .await
    );
    let (leases, pods) = ("coordination.k8s.io", Some(ns.as_str()));
    for (group, resource, verb, namespace, name) in [
        ("", "pods", "delete", pods, Some("plain")),
        ("", "pods", "create", pods, None),
        ("apps", "deployments", "patch", pods, Some("web")),
        ("batch", "jobs", "create", pods, None),
        (
            leases,
            "leases",
            "patch",
            Some(release_ns.as_str()),
            Some("kube-scheduler"),
        ),
        (leases, "leases", "patch", Some("kube-system"), Some(lease.as_str())),
        (
            leases,
            "leases",
            "delete",
            Some(release_ns.as_str()),
            Some(lease.as_str()),
        ),
    ] {
        assert!(
            !may(group, resource, verb, namespace, name).await,
            "the chart's ServiceAccount may not {verb} {resource} {name:?} in {namespace:?}"
        );
    }
}
