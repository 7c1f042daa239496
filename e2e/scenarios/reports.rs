//! The continuous audit's OpenReports on a real API server, with the OpenReports CRDs of
//! github.com/openreports/reports-api (`e2e/tools.sh path openreports-crds`): pod-director runs
//! with `--reports true` and a 2 s audit.
//! - without the CRDs nothing is written and one info line says so; installed later, they are
//!   picked up without a restart;
//! - a dryRun namespace with a compliant Deployment, one enforce would patch, one it would
//!   refuse and an intruder on a reserved pool: `kubectl get reports -o yaml` shows each
//!   workload's result as the book documents it (pass / warn / fail, unscored in dryRun);
//! - a tenant (impersonated) granted `get` on reports in their namespace reads theirs and is
//!   refused another's;
//! - three scans with nothing changed leave the report's resourceVersion alone;
//! - the patched Deployment made compliant: its result follows; a namespace leaving its group:
//!   its report is deleted;
//! - Events (`--audit-events true`): one per verdict change of a workload, not one per pod, and
//!   none while nothing changes;
//! - the CRDs removed at runtime: one log line, pod-director still decides.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::fixtures::deployment;
use crate::harness::k8s::{IMAGE, eventually, impersonating, pod};
use k8s_openapi::api::core::v1::Node;
use pod_director::cluster::{REPORTS_NOT_SERVED, REPORTS_SERVED};

use crate::harness::{Env, Options, Target, notice, suffix, tool};

const GROUP: &str = "e2e-audit";
const POOL: &str = "e2e.pod-director.io/audit-pool";
const CRDS: [&str; 2] = ["reports.openreports.io", "clusterreports.openreports.io"];
const TENANT: &str = "e2e-reports-tenant";
/// The report's name (`--reports-name`'s default).
const NAME: &str = "pod-director";

fn reports(env: &Env, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("openreports.io", "v1alpha1", "Report");
    Api::namespaced_with(
        env.client.clone(),
        namespace,
        &ApiResource::from_gvk_with_plural(&gvk, "reports"),
    )
}

fn crd(file: &str) -> CustomResourceDefinition {
    let path = tool("E2E_OPENREPORTS_CRDS", "openreports-crds").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let value: Value = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_value(value).expect("a CustomResourceDefinition")
}

async fn delete_crds(env: &Env) {
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    for name in CRDS {
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

async fn install_crds(env: &Env) {
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    for file in ["openreports.io_reports.yaml", "openreports.io_clusterreports.yaml"] {
        crds.create(&PostParams::default(), &crd(file))
            .await
            .unwrap_or_else(|e| panic!("{file} created: {e}"));
    }
}

/// The group's placement, as a pod spec: compliant.
fn placed(extra_tolerations: Value) -> Value {
    let mut tolerations = vec![
        json!({"key": "e2e.pod-director.io/audit", "operator": "Equal", "value": "violet", "effect": "NoSchedule"}),
    ];
    tolerations.extend(extra_tolerations.as_array().cloned().unwrap_or_default());
    json!({"containers": [{"name": "app", "image": IMAGE}], "nodeSelector": {POOL: "violet"}, "tolerations": tolerations})
}

/// `kubectl get reports -n NS -o yaml`, parsed: the report named [`NAME`].
fn kubectl_report(namespace: &str) -> Option<Value> {
    let kubectl = tool("E2E_KUBECTL", "kubectl");
    let output = std::process::Command::new(kubectl)
        .args(["get", "reports", "-n", namespace, "-o", "yaml"])
        .output()
        .expect("kubectl runs");
    if !output.status.success() {
        return None;
    }
    let list: Value = serde_saphyr::from_str(&String::from_utf8_lossy(&output.stdout)).ok()?;
    list["items"]
        .as_array()?
        .iter()
        .find(|r| r["metadata"]["name"] == NAME)
        .cloned()
}

/// The result of `workload` (`Kind/name`) under `rule`.
fn result<'a>(report: &'a Value, workload: &str, rule: &str) -> Option<&'a Value> {
    let (kind, name) = workload.split_once('/')?;
    report["results"]
        .as_array()?
        .iter()
        .find(|r| r["rule"] == rule && r["resources"][0]["kind"] == kind && r["resources"][0]["name"] == name)
}

fn outcome(report: &Value, workload: &str, rule: &str) -> String {
    result(report, workload, rule)
        .and_then(|r| r["result"].as_str())
        .unwrap_or("absent")
        .to_owned()
}

async fn create_deployment(env: &Env, ns: &str, name: &str, spec: Value) {
    Api::<Deployment>::namespaced(env.client.clone(), ns)
        .create(&PostParams::default(), &deployment(name, spec))
        .await
        .unwrap_or_else(|e| panic!("Deployment {name} created: {e}"));
}

/// pod-director's Events (events.k8s.io/v1) about Deployment `name`, oldest first: reason,
/// series count, note.
async fn workload_events(env: &Env, ns: &str, name: &str) -> Vec<(String, Option<i32>, String)> {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(env.client.clone(), ns);
    let mut list: Vec<_> = events
        .list(&Default::default())
        .await
        .expect("events listed")
        .items
        .into_iter()
        .filter(|e| {
            e.reporting_controller.as_deref() == Some(NAME)
                && e.regarding
                    .as_ref()
                    .is_some_and(|r| r.kind.as_deref() == Some("Deployment") && r.name.as_deref() == Some(name))
        })
        .collect();
    list.sort_by(|a, b| {
        a.event_time
            .as_ref()
            .map(|t| t.0)
            .cmp(&b.event_time.as_ref().map(|t| t.0))
    });
    list.into_iter()
        .map(|e| {
            (
                e.reason.unwrap_or_default(),
                e.series.map(|s| s.count),
                e.note.unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_writes_a_report_per_grouped_namespace_only_when_it_changes() {
    if Target::Cluster == crate::harness::Settings::from_env().target {
        notice("SKIPPED reports in cluster mode: it installs and removes the OpenReports CRDs and needs --reports");
        return;
    }
    let options = Options {
        audit_interval: Some(Duration::from_secs(2)),
        env: vec![
            ("POD_DIRECTOR_REPORTS".into(), "true".into()),
            ("POD_DIRECTOR_AUDIT_EVENTS".into(), "true".into()),
        ],
        ..Options::default()
    };
    let env = Env::start_with("reports", options).await;
    delete_crds(&env).await;
    env.logged(REPORTS_NOT_SERVED, |_| true).await;
    // A node of the group's pool: no feasibility finding.
    let violet: Node = serde_json::from_value(json!({
        "metadata": {"name": format!("e2e-violet-{}", suffix()), "labels": {POOL: "violet", "kubernetes.io/os": "linux"}},
        "spec": {"taints": [{"key": "e2e.pod-director.io/audit", "value": "violet", "effect": "NoSchedule"}]},
    }))
    .expect("a Node");
    env.create_node(&violet).await;

    let ns = env.namespace(Some(GROUP)).await;
    let other = env.namespace(Some(GROUP)).await;
    create_deployment(&env, &ns, "compliant", placed(json!([]))).await;
    create_deployment(
        &env,
        &ns,
        "patched",
        json!({"containers": [{"name": "app", "image": IMAGE}]}),
    )
    .await;
    create_deployment(
        &env,
        &ns,
        "denied",
        json!({"containers": [{"name": "app", "image": IMAGE}], "nodeSelector": {POOL: "green"}}),
    )
    .await;
    // Tolerates the gold pool's reserved taint: an intruder on e2e-reserved's reservation.
    let gold =
        json!([{"key": "e2e.pod-director.io/reserved", "operator": "Equal", "value": "gold", "effect": "NoSchedule"}]);
    create_deployment(&env, &ns, "intruder", placed(gold)).await;
    env.wait_for_pods(&ns, "app=compliant", 2).await;
    env.wait_for_pods(&ns, "app=patched", 2).await;
    env.wait_for_pods(&ns, "app=denied", 2).await;
    env.wait_for_pods(&ns, "app=intruder", 2).await;

    // Installed while pod-director runs: picked up at a next audit, no restart.
    install_crds(&env).await;
    env.logged(REPORTS_SERVED, |_| true).await;
    let report = eventually("the namespace's report with its four workloads", || async {
        let report = kubectl_report(&ns)?;
        (outcome(&report, "Deployment/patched", "placement") == "warn"
            && outcome(&report, "Deployment/intruder", "reservation") == "fail")
            .then_some(report)
    })
    .await;
    let expect = [
        ("Deployment/compliant", "placement", GROUP, "pass", "compliant"),
        ("Deployment/patched", "placement", GROUP, "warn", "would_patch"),
        ("Deployment/denied", "placement", GROUP, "fail", "would_deny"),
        (
            "Deployment/intruder",
            "reservation",
            "e2e-reserved",
            "fail",
            "would_deny",
        ),
        ("Deployment/intruder", "placement", GROUP, "pass", "compliant"),
    ];
    for (workload, rule, policy, outcome, decision) in expect {
        let r = result(&report, workload, rule).unwrap_or_else(|| panic!("{workload} {rule} in {report:#}"));
        assert_eq!(r["result"], outcome, "{workload} {rule}: {r:#}");
        assert_eq!(r["policy"], policy, "{workload} {rule}: {r:#}");
        assert_eq!(r["scored"], false, "dryRun results are unscored: {r:#}");
        assert_eq!(r["properties"]["mode"], "dryRun", "{r:#}");
        assert_eq!(r["properties"]["decision"], decision, "{r:#}");
        assert_eq!(r["source"], "pod-director", "{r:#}");
        assert_eq!(r["resources"][0]["apiVersion"], "apps/v1", "{r:#}");
        assert_eq!(r["resources"][0]["namespace"], ns.as_str(), "{r:#}");
    }
    let patched = result(&report, "Deployment/patched", "placement").expect("patched");
    assert!(
        patched["message"].as_str().unwrap_or_default().starts_with("would "),
        "{patched:#}"
    );
    assert!(
        patched["properties"]["patch.paths"]
            .as_str()
            .unwrap_or_default()
            .contains("/spec/nodeSelector"),
        "{patched:#}"
    );
    let denied = result(&report, "Deployment/denied", "placement").expect("denied");
    assert!(
        denied["message"].as_str().unwrap_or_default().contains("green"),
        "the denial names the conflict: {denied:#}"
    );
    // The suite's guard enforces: its result passes (and is scored).
    let guard = result(&report, &format!("Namespace/{ns}"), "namespace-guard").expect("the guard's result");
    assert_eq!(
        (guard["result"].as_str(), guard["scored"].as_bool()),
        (Some("pass"), Some(true)),
        "{guard:#}"
    );
    assert_eq!(report["source"], "pod-director");
    assert_eq!(
        report["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "pod-director"
    );
    assert_eq!(report["scope"]["name"], ns.as_str());
    let results = report["results"].as_array().map_or(0, Vec::len) as u64;
    let summary = &report["summary"];
    let counted: u64 = ["pass", "fail", "warn", "error", "skip"]
        .iter()
        .map(|k| summary[k].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(counted, results, "the summary counts the results: {summary}");
    assert_eq!(
        (summary["fail"].as_u64(), summary["warn"].as_u64()),
        (Some(2), Some(1)),
        "{summary}"
    );

    // A tenant granted get on reports in their namespace reads theirs, not another's.
    env.apply_rbac(vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "read-reports", "namespace": ns},
               "rules": [{"apiGroups": ["openreports.io"], "resources": ["reports"], "verbs": ["get", "list"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "tenant-reads-reports", "namespace": ns},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-reports"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": TENANT}]}),
    ])
    .await;
    eventually("the other namespace's report", || async {
        reports(&env, &other).get_opt(NAME).await.ok().flatten()
    })
    .await;
    let tenant = impersonating(TENANT, &[]).await;
    let gvk = GroupVersionKind::gvk("openreports.io", "v1alpha1", "Report");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "reports");
    let theirs: Api<DynamicObject> = Api::namespaced_with(tenant.clone(), &ns, &resource);
    let read = eventually("the tenant to read its report (RBAC propagated)", || async {
        theirs.get(NAME).await.ok()
    })
    .await;
    assert_eq!(read.data["summary"], report["summary"]);
    let another: Api<DynamicObject> = Api::namespaced_with(tenant, &other, &resource);
    match another.get(NAME).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{status:?}"),
        other => panic!("the tenant read another namespace's report: {other:?}"),
    }

    // Three scans with nothing changed: the same resourceVersion.
    let version = |r: &DynamicObject| r.metadata.resource_version.clone().unwrap_or_default();
    let before = version(&reports(&env, &ns).get(NAME).await.expect("the report"));
    let scans = "pod_director_audit_scans_total{result=\"success\"}";
    let start = env.metric(scans).await.unwrap_or(0.0);
    env.wait_for_metric(scans, "3 scans later", |n| n >= start + 3.0).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = version(&reports(&env, &ns).get(NAME).await.expect("the report"));
    assert_eq!(before, after, "three scans with nothing changed wrote the report again");

    // Events: one per verdict change of each workload — the denied Deployment has 2 pods and a
    // template, decided at every scan since it was created: one WouldBeDenied, no series.
    let denied_events = workload_events(&env, &ns, "denied").await;
    assert_eq!(
        denied_events.iter().map(|e| e.0.as_str()).collect::<Vec<_>>(),
        ["WouldBeDenied"],
        "{denied_events:?}"
    );
    assert_eq!(
        denied_events[0].1, None,
        "published once, not repeated: {denied_events:?}"
    );
    assert!(
        denied_events[0].2.contains("would") || denied_events[0].2.contains("green"),
        "{denied_events:?}"
    );
    assert!(
        workload_events(&env, &ns, "compliant").await.is_empty(),
        "a new compliant workload is no news"
    );

    // The patched Deployment made compliant: its result follows.
    let template = json!({"spec": {"template": {"spec": placed(json!([]))}}});
    Api::<Deployment>::namespaced(env.client.clone(), &ns)
        .patch("patched", &PatchParams::default(), &Patch::Strategic(template))
        .await
        .expect("Deployment patched");
    eventually("the patched Deployment's result to pass", || async {
        let r = reports(&env, &ns).get(NAME).await.ok()?;
        let v = serde_json::to_value(&r).ok()?;
        (outcome(&v, "Deployment/patched", "placement") == "pass").then_some(())
    })
    .await;

    let patched_events = eventually("a Compliant Event on the patched Deployment", || async {
        let events = workload_events(&env, &ns, "patched").await;
        events.iter().any(|e| e.0 == "Compliant").then_some(events)
    })
    .await;
    assert_eq!(
        patched_events.iter().map(|e| e.0.as_str()).collect::<Vec<_>>(),
        ["WouldBePatched", "Compliant"],
        "one Event per verdict change: {patched_events:?}"
    );

    // A namespace that leaves every group: its report goes.
    let unlabel = json!({"metadata": {"labels": {env.config.namespace_label.clone(): null}}});
    Api::<Namespace>::all(env.client.clone())
        .patch(&other, &PatchParams::default(), &Patch::Merge(unlabel))
        .await
        .expect("namespace unlabelled (the suite's admin may)");
    eventually(
        "the report of the namespace that left its group to be deleted",
        || async { reports(&env, &other).get_opt(NAME).await.ok()?.is_none().then_some(()) },
    )
    .await;

    // The CRDs removed at runtime: one log line, and pod-director still decides.
    let before = env.logs.messages(REPORTS_NOT_SERVED).await.len();
    delete_crds(&env).await;
    let gone = eventually("the removal logged", || async {
        env.logs.messages(REPORTS_NOT_SERVED).await.get(before).cloned()
    })
    .await;
    assert_eq!(gone["level"], "INFO", "{gone}");
    let created = env.create_pod_dry_run(&ns, &pod("after-crd")).await;
    assert!(created.status.is_success(), "pod-director still admits: {created:?}");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let lines = env.logs.messages(REPORTS_NOT_SERVED).await;
    assert_eq!(
        lines.len(),
        before + 1,
        "one line per change of state, not per scan: {lines:?}"
    );
    let refused = env
        .logs
        .lines()
        .await
        .into_iter()
        .filter(|l| l["level"] == "WARN" && l["target"] == "pod_director::cluster::reports")
        .collect::<Vec<_>>();
    assert!(
        refused.is_empty(),
        "nothing above info from the reports with the admin's rights: {refused:?}"
    );
    // The intruder tolerates the suite's shared reserved pool: gone before the next scenario
    // audits that reservation (a namespace's deletion takes its pods only eventually).
    Api::<Deployment>::namespaced(env.client.clone(), &ns)
        .delete("intruder", &kube::api::DeleteParams::foreground())
        .await
        .expect("the intruder Deployment deleted");
    env.wait_for_pods(&ns, "app=intruder", 0).await;
}

/// A writer whose client RBAC refuses reports (a user granted nothing, impersonated): it keeps
/// running, writes nothing, and pod-director's admission is untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_writer_refused_by_rbac_keeps_running_and_writes_nothing() {
    use pod_director::cluster::{ReportsOptions, spawn_reports};
    use pod_director_engine::audit::open_reports::Settings;
    use pod_director_engine::audit::workloads::{Entry, Rule, WorkloadVerdict};
    use pod_director_engine::audit::{Audit, GroupAudit};

    if Target::Cluster == crate::harness::Settings::from_env().target {
        notice("SKIPPED reports RBAC in cluster mode: it installs and removes the OpenReports CRDs");
        return;
    }
    let env = Env::start("reports-rbac").await;
    delete_crds(&env).await;
    install_crds(&env).await;
    let ns = env.namespace(Some(GROUP)).await;

    let mut group = GroupAudit {
        group: GROUP.to_owned(),
        ..GroupAudit::default()
    };
    group.workloads.namespace(&ns, GROUP);
    let entry = Entry {
        namespace: &ns,
        workload: "Deployment/web",
        policy: GROUP,
        rule: Rule::Placement,
        mode: pod_director_engine::config::Mode::DryRun,
        pod: false,
    };
    group
        .workloads
        .record(&entry, WorkloadVerdict::WouldPatch, "would set nodeSelector", None);
    let mut audit = Audit::of(vec![group], Vec::new());
    audit.namespaces_scanned = 1;
    audit.templates_scanned = 1;
    let denied = impersonating("e2e-reports-nobody", &[]).await;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let options = ReportsOptions {
        settings: Settings {
            name: "e2e-refused".to_owned(),
            max_results: 10,
        },
        reports: true,
        events: None,
    };
    let (publisher, task) = spawn_reports(denied, options, stopped);
    // The CRD is served; a few scans, each refused.
    for _ in 0..3 {
        publisher.publish(&mut audit.clone(), &env.config);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(!task.is_finished(), "the writer stopped after RBAC refused it");
    assert!(
        reports(&env, &ns).get_opt("e2e-refused").await.expect("GET").is_none(),
        "a refused writer wrote a report"
    );
    // The same writer as the admin: the report is written (the refusal was RBAC's).
    let (admin_publisher, admin_task) = spawn_reports(
        env.client.clone(),
        ReportsOptions {
            settings: Settings {
                name: "e2e-refused".to_owned(),
                max_results: 10,
            },
            reports: true,
            events: None,
        },
        stop.subscribe(),
    );
    admin_publisher.publish(&mut audit.clone(), &env.config);
    let written = eventually("the admin's writer to write the report", || async {
        reports(&env, &ns).get_opt("e2e-refused").await.ok().flatten()
    })
    .await;
    assert_eq!(written.data["results"][0]["result"], "warn", "{:?}", written.data);
    let created = env.create_pod_dry_run(&ns, &pod("still-decided")).await;
    assert!(created.status.is_success(), "{created:?}");
    let _ = stop.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), admin_task).await;
    delete_crds(&env).await;
}
