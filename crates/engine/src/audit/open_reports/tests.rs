use serde_json::json;

use super::*;
use crate::audit::workloads::{Entry, PatchSummary};

fn config(guard: Option<&str>) -> Config {
    let mut c = json!({
        "groups": {"web": {"mode": "dryRun", "nodeSelector": {"pool": "web"}},
                   "ci": {"mode": "enforce", "nodeSelector": {"pool": "ci"}}}
    });
    if let Some(mode) = guard {
        c["namespaceGuard"] = json!({"mode": mode});
    }
    serde_json::from_value(c).expect("config")
}

fn entry<'a>(workload: &'a str, policy: &'a str, rule: Rule, mode: Mode) -> Entry<'a> {
    Entry {
        namespace: "team-a",
        workload,
        policy,
        rule,
        mode,
        pod: false,
    }
}

/// The acceptance scenario's namespace: a compliant, a patched and a denied Deployment, and an intruder.
fn ledger() -> Ledger {
    let mut l = Ledger::default();
    l.namespace("team-a", "web");
    l.namespace("team-b", "web");
    let dry = Mode::DryRun;
    l.record(
        &entry("Deployment/ok", "web", Rule::Placement, dry),
        WorkloadVerdict::Compliant,
        "no change",
        None,
    );
    let patch = PatchSummary {
        ops: 2,
        paths: vec!["/spec/nodeSelector".to_owned(), "/spec/tolerations".to_owned()],
    };
    l.record(
        &entry("Deployment/patched", "web", Rule::Placement, dry),
        WorkloadVerdict::WouldPatch,
        "would set nodeSelector pool=web",
        Some(patch),
    );
    l.record(
        &entry("Deployment/denied", "web", Rule::Placement, dry),
        WorkloadVerdict::WouldDeny,
        "nodeSelector pool=red conflicts with pool=web",
        None,
    );
    l.record(
        &entry("Pod/intruder", "ci", Rule::Reservation, Mode::Enforce),
        WorkloadVerdict::WouldDeny,
        "tolerates reserved taint dedicated=ci:NoSchedule",
        None,
    );
    l
}

fn results(report: &Report) -> Vec<(String, String, String, String, bool)> {
    report.object["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                format!(
                    "{}/{}",
                    r["resources"][0]["kind"].as_str().unwrap_or(""),
                    r["resources"][0]["name"].as_str().unwrap_or("")
                ),
                r["policy"].as_str().unwrap_or("").to_owned(),
                r["rule"].as_str().unwrap_or("").to_owned(),
                r["result"].as_str().unwrap_or("").to_owned(),
                r["scored"].as_bool().unwrap_or(true),
            )
        })
        .collect()
}

fn row(w: &str, p: &str, rule: &str, result: &str, scored: bool) -> (String, String, String, String, bool) {
    (w.to_owned(), p.to_owned(), rule.to_owned(), result.to_owned(), scored)
}

#[test]
fn each_workload_s_verdict_is_a_result_as_the_docs_map_it_unscored_outside_enforce() {
    let reports = desired(&ledger(), &config(None), &Settings::default());
    let a = &reports["team-a"];
    assert_eq!(
        results(a),
        [
            row("Deployment/denied", "web", "placement", "fail", false),
            row("Deployment/ok", "web", "placement", "pass", false),
            row("Deployment/patched", "web", "placement", "warn", false),
            row("Namespace/team-a", "web", "namespace-guard", "warn", false),
            row("Pod/intruder", "ci", "reservation", "fail", true),
        ]
    );
    assert_eq!(
        a.summary,
        Summary {
            pass: 1,
            fail: 2,
            warn: 2,
            error: 0,
            skip: 0
        }
    );
    let patched = &a.object["results"][2];
    assert_eq!(patched["message"], "would set nodeSelector pool=web");
    assert_eq!(patched["source"], "pod-director");
    assert_eq!(
        patched["properties"],
        json!({"decision": "would_patch", "mode": "dryRun", "template": "true", "patch.ops": "2",
               "patch.paths": "/spec/nodeSelector,/spec/tolerations"})
    );
    assert_eq!(
        patched["resources"],
        json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "patched", "namespace": "team-a"}])
    );
    assert_eq!(a.object["results"][4]["resources"][0]["apiVersion"], "v1");
    assert_eq!(
        a.object["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "pod-director"
    );
    assert_eq!(a.object["metadata"]["name"], "pod-director");
    assert_eq!(
        a.object["scope"],
        json!({"apiVersion": "v1", "kind": "Namespace", "name": "team-a"})
    );
    assert_eq!(a.object["summary"]["fail"], 2);
    // A namespace of the group without workloads still has its report: the guard's result only.
    assert_eq!(
        results(&reports["team-b"]),
        [row("Namespace/team-b", "web", "namespace-guard", "warn", false)]
    );
}

#[test]
fn the_guard_result_passes_when_the_guard_enforces_the_namespace_s_group() {
    let reports = desired(&ledger(), &config(Some("enforce")), &Settings::default());
    let guard = &reports["team-b"].object["results"][0];
    assert_eq!(
        (guard["result"].as_str(), guard["scored"].as_bool()),
        (Some("pass"), Some(true))
    );
}

#[test]
fn a_namespace_with_only_intruders_and_no_group_gets_no_report() {
    let mut l = ledger();
    let mut other = Ledger::default();
    other.record(
        &Entry {
            namespace: "loose",
            ..entry("Pod/x", "ci", Rule::Reservation, Mode::Enforce)
        },
        WorkloadVerdict::WouldDeny,
        "intrudes",
        None,
    );
    l.merge(other);
    let reports = desired(&l, &config(None), &Settings::default());
    assert_eq!(reports.keys().collect::<Vec<_>>(), ["team-a", "team-b"]);
}

#[test]
fn max_results_keeps_the_worst_and_the_summary_still_counts_every_result() {
    let mut l = ledger();
    for i in 0..5 {
        l.record(
            &entry(&format!("Pod/a{i}"), "web", Rule::Placement, Mode::DryRun),
            WorkloadVerdict::Compliant,
            "",
            None,
        );
    }
    let settings = Settings {
        max_results: 3,
        ..Settings::default()
    };
    let a = &desired(&l, &config(None), &settings)["team-a"];
    let kept: Vec<String> = results(a).into_iter().map(|r| r.3).collect();
    assert_eq!(
        kept,
        ["fail", "warn", "fail"],
        "the two fails and a warn, in workload order"
    );
    assert_eq!(a.summary.pass, 6);
    assert_eq!(a.omitted, 7);
    assert_eq!(a.object["metadata"]["annotations"][OMITTED_ANNOTATION], "7");
    assert_eq!(a.object["configuration"]["limits"]["maxResults"], 3);
    // A result without a message says its decision.
    let all = desired(&l, &config(None), &Settings::default());
    let a0 = all["team-a"].object["results"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["resources"][0]["name"] == "a0"))
        .expect("Pod/a0 kept");
    assert_eq!(a0["message"], "compliant");
}

#[test]
fn the_digest_changes_with_the_content_and_only_with_it() {
    let settings = Settings::default();
    let before = desired(&ledger(), &config(None), &settings);
    let again = desired(&ledger(), &config(None), &settings);
    assert_eq!(before, again, "the same audit gives byte-identical reports");
    let mut l = ledger();
    l.record(
        &entry("Deployment/ok", "web", Rule::Placement, Mode::DryRun),
        WorkloadVerdict::WouldPatch,
        "would add toleration",
        None,
    );
    let after = desired(&l, &config(None), &settings);
    assert_ne!(before["team-a"].digest, after["team-a"].digest);
    assert_eq!(before["team-b"].digest, after["team-b"].digest);
    assert_eq!(
        after["team-a"].object["metadata"]["annotations"][DIGEST_ANNOTATION],
        after["team-a"].digest.as_str()
    );
    assert_eq!(after["team-a"].digest.len(), 64);
}

#[test]
fn every_verdict_maps_to_the_documented_result() {
    use ResultStatus::*;
    let table = [
        (Rule::Placement, WorkloadVerdict::Compliant, Pass),
        (Rule::Placement, WorkloadVerdict::WouldPatch, Warn),
        (Rule::Placement, WorkloadVerdict::WouldDeny, Fail),
        (Rule::Placement, WorkloadVerdict::Skipped, Skip),
        (Rule::Feasibility, WorkloadVerdict::NoFeasibleNode, Fail),
        (Rule::Reservation, WorkloadVerdict::WouldDeny, Fail),
        (Rule::Reservation, WorkloadVerdict::RunsOnPool, Warn),
    ];
    for (rule, verdict, expected) in table {
        assert_eq!(outcome(rule, verdict), expected, "{rule:?} {verdict:?}");
    }
}

#[test]
fn an_annotated_namespace_of_no_group_gets_a_report_of_its_hole_and_its_workloads_under_the_in_tree_rule() {
    use crate::audit::in_tree::{InTreeAudit, POLICY, PluginState};
    use crate::in_tree::Plugin;
    use crate::placement::{Decision, Outcome, Webhook};
    let mut in_tree = InTreeAudit::new(None);
    let annotations = std::collections::BTreeMap::from([(
        "scheduler.alpha.kubernetes.io/node-selector".to_owned(),
        "pool=a".to_owned(),
    )]);
    in_tree.namespace("tenant-a", Some(&annotations), false);
    in_tree.plugin(Plugin::PodNodeSelector, PluginState::Absent("declared".to_owned()));
    let pod: crate::placement::Pod = serde_json::from_value(json!({"spec": {}})).expect("a pod");
    let mut patch = Outcome::new(Webhook::Mutate, Decision::WouldPatch);
    patch.summary = "would set nodeSelector pool=a".to_owned();
    patch.patch = serde_json::from_value(json!([{"op": "add", "path": "/spec/nodeSelector", "value": {"pool": "a"}}]))
        .expect("a patch");
    in_tree.record(
        "tenant-a",
        "Deployment/web",
        (crate::audit::Source::Pods, "web-1"),
        &pod,
        &patch,
    );
    in_tree.conclude();
    let mut l = ledger();
    l.merge(in_tree.workloads);
    let reports = desired(&l, &config(None), &Settings::default());
    assert_eq!(reports.keys().collect::<Vec<_>>(), ["team-a", "team-b", "tenant-a"]);
    let report = &reports["tenant-a"];
    assert_eq!(
        (report.summary.fail, report.summary.warn, report.summary.pass),
        (1, 1, 0)
    );
    let results = report.object["results"].as_array().expect("results");
    assert_eq!(
        results.len(),
        2,
        "no namespace-guard result without a group: {results:?}"
    );
    let hole = results
        .iter()
        .find(|r| r["resources"][0]["kind"] == "Namespace")
        .expect("the namespace's result");
    assert_eq!(hole["policy"], POLICY);
    assert_eq!(hole["rule"], "in-tree");
    assert_eq!(hole["result"], "fail");
    assert_eq!(hole["scored"], false);
    assert_eq!(hole["properties"]["decision"], "unenforced");
    assert_eq!(
        hole["resources"][0],
        json!({"apiVersion": "v1", "kind": "Namespace", "name": "tenant-a", "namespace": ""})
    );
    assert!(
        hole["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("no admission plugin enforces")),
        "{hole}"
    );
    let web = results
        .iter()
        .find(|r| r["resources"][0]["kind"] == "Deployment")
        .expect("the workload's result");
    assert_eq!(
        (web["rule"].as_str(), web["result"].as_str()),
        (Some("in-tree"), Some("warn"))
    );
    assert_eq!(web["properties"]["patch.paths"], "/spec/nodeSelector");
}
