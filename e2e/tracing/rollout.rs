//! A small rollout through the real API server, scraped by a real Prometheus; then
//! every dashboard panel's PromQL evaluated against it (`dashboard.rs`), and the
//! latency panel's exemplars looked up in Jaeger.

use std::time::Duration;

use serde_json::{Value, json};

use crate::dashboard::{self, Observed, Selection, parse_exposition};
use crate::fixtures::{asking_for_pool, with_labels};
use crate::harness::prometheus::{Prometheus, unix_now};
use crate::harness::{Env, Options, k8s::eventually, notice, pod};
use crate::{KEPT, SERVICE, jaeger, otel_env, placed_pod, post_mutate, random_hex, sampled, undecidable_review};

/// Prometheus' scrape interval here (and the Grafana datasource's "Scrape interval").
const SCRAPE: Duration = Duration::from_millis(200);
/// The shortest time range evaluated: 100 scrape intervals. `increase()` extrapolates
/// by up to 1.1 intervals at each end of the range; over 100 that is at most ±2.2%,
/// which the panels' 0 decimals round away for the rollout's counts (all below 20),
/// as they do on a real dashboard (30 s scrapes, a range of hours).
const MIN_RANGE: Duration = Duration::from_secs(20);

/// What the rollout meant each of its pods' mutate decisions to be.
pub(crate) struct Rollout {
    pub intended: Vec<(String, String, &'static str)>,
    /// Trace ids of the `error` reviews sent directly.
    pub error_traces: Vec<String>,
}

/// pod-director's `/metrics`, parsed.
async fn scrape(env: &Env) -> Vec<dashboard::Sample> {
    parse_exposition(&env.metrics().await.expect("pod-director's /metrics answers"))
}

/// Creates pods in namespaces of the suite's groups, each meant to be one decision;
/// sends undecidable reviews; reloads the config once and has one reload refused.
pub(crate) async fn run(env: &mut Env, prometheus: &Prometheus) -> Rollout {
    let dry = env.namespace(Some("e2e-dryrun")).await;
    let enforce = env.namespace(Some("e2e-enforce")).await;
    let excluded = env.namespace(Some("e2e-exclusion")).await;
    let unknown = env.namespace(Some("e2e-undefined")).await;
    // A namespace selecting an undefined group is exported before its first pod (orphaned
    // groups, and their unknown_group series at 0): wait for Prometheus to have seen it.
    eventually("Prometheus to scrape the unknown group's series", || async {
        let result = prometheus
            .query(
                r#"pod_director_decisions_total{group="e2e-undefined",decision="unknown_group",webhook="mutate"}"#,
                None,
            )
            .await
            .ok()?;
        (result["result"].as_array()?.len() == 1).then_some(())
    })
    .await;

    let mut intended = Vec::new();
    let mut expect =
        |ns: &str, name: &str, decision: &'static str| intended.push((ns.to_owned(), name.to_owned(), decision));
    for i in 0..3 {
        let name = format!("would-patch-{i}");
        env.create_admitted_pod(&dry, &pod(&name)).await;
        expect(&dry, &name, "would_patch");
    }
    for i in 0..2 {
        let name = format!("would-deny-{i}");
        env.create_admitted_pod(&dry, &asking_for_pool(&name, "red")).await;
        expect(&dry, &name, "would_deny");
    }
    // A pod already placed as the group wants: the would-be patch of another, applied.
    let would_be = env.decision(&dry, "would-patch-0", "mutate").await;
    env.create_admitted_pod(&dry, &placed_pod("noop-0", would_be.patch()))
        .await;
    expect(&dry, "noop-0", "noop");
    for i in 0..2 {
        let name = format!("patched-{i}");
        env.create_admitted_pod(&enforce, &pod(&name)).await;
        expect(&enforce, &name, "patched");
    }
    let denied = env.create_pod(&enforce, &asking_for_pool("denied-0", "red")).await;
    assert!(
        !denied.status.is_success(),
        "a conflicting pod is denied in enforce: {}",
        denied.body
    );
    expect(&enforce, "denied-0", "denied");
    env.create_admitted_pod(
        &excluded,
        &with_labels(pod("skipped-0"), &[("pod-director/exclude", "true")]),
    )
    .await;
    expect(&excluded, "skipped-0", "skipped");
    env.create_admitted_pod(&unknown, &pod("unknown-0")).await;
    expect(&unknown, "unknown-0", "unknown_group");

    // An intruder of the suite's reservation (e2e-reserved, dryRun): a pod of a namespace with
    // no group and the wildcard toleration, decided at /validate-reservation.
    let outsiders = env.namespace(None).await;
    let intruder = serde_json::from_value(json!({
        "metadata": {"name": "intruder-0"},
        "spec": {"containers": [{"name": "app", "image": "registry.invalid/pause:3"}], "tolerations": [{"operator": "Exists"}]}
    }))
    .expect("a pod");
    env.create_admitted_pod(&outsiders, &intruder).await;
    let reserved = env.decision(&outsiders, "intruder-0", "validate-reservation").await;
    assert_eq!(reserved.decision(), "would_deny", "{}", reserved.0);

    // Reviews pod-director cannot decide (as a broken client would send them).
    let mut error_traces = Vec::new();
    for _ in 0..2 {
        let trace_id = random_hex(32);
        let (status, body) = post_mutate(env, &undecidable_review(), &sampled(&trace_id)).await;
        assert!(
            status.is_client_error(),
            "an undecidable review is refused: {status} {body}"
        );
        error_traces.push(trace_id);
    }

    // One config reload (a group added), one refused (a config that means nothing).
    let success = r#"pod_director_config_reloads_total{result="success"}"#;
    let before = env.metric(success).await.unwrap_or_default();
    env.edit_config(|c| {
        c["groups"]["e2e-rollout-added"] =
            json!({"mode": "dryRun", "nodeSelector": {"e2e.pod-director.io/pool": "blue"}})
    });
    env.wait_for_metric(success, "above its value before", |v| v > before)
        .await;
    let error = r#"pod_director_config_reloads_total{result="error"}"#;
    let before = env.metric(error).await.unwrap_or_default();
    env.pod_director().write_config("");
    env.wait_for_metric(error, "above its value before", |v| v > before)
        .await;

    // The log agrees with what the rollout meant.
    for (ns, name, decision) in &intended {
        let logged = env.decision(ns, name, "mutate").await;
        assert_eq!(logged.decision(), *decision, "pod {ns}/{name}: {}", logged.0);
    }
    Rollout { intended, error_traces }
}

/// The rollout dashboard after a real rollout: every panel's query is valid PromQL
/// for Prometheus, returns the series it is meant to show, with values that match
/// what the rollout did (e.g. *Would patch* = the pods that were would_patch), for
/// `$group` = All, one group and two groups; the latency panel's exemplars carry
/// trace ids that Jaeger has.
#[tokio::test]
async fn every_dashboard_panel_shows_what_a_real_rollout_did() {
    let problems = dashboard::coverage();
    assert!(
        problems.is_empty(),
        "the expectation table and the dashboards disagree:\n{}",
        problems.join("\n")
    );
    let jaeger = jaeger().await;
    // The continuous audit scans once at start (its interval outlasts the test), so its
    // gauges hold still while the panels are compared with pod-director's /metrics.
    let options = Options {
        env: otel_env(),
        audit_interval: Some(Duration::from_secs(3600)),
        ..Options::default()
    };
    let mut env = Env::start_with("dashboards", options).await;
    let scans = r#"pod_director_audit_scans_total{result="success"}"#;
    env.wait_for_metric(scans, "above 0", |v| v > 0.0).await;
    let probe = env.pod_director().probe_addr;
    let prometheus = Prometheus::scrape(probe, SCRAPE).await;
    // The time range starts at a scrape that saw everything before the rollout.
    prometheus.wait_for_next_scrape().await;
    let baseline = env.logs.decisions().await.len();
    let before = scrape(&env).await;
    let start_at = prometheus.last_scrape().await.expect("a scrape timestamp") - SCRAPE.as_secs_f64() / 2.0;

    let rollout = run(&mut env, &prometheus).await;

    // Settled: no decision in flight, and a range of at least MIN_RANGE; then one more scrape.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let elapsed = unix_now() - start_at;
    if elapsed < MIN_RANGE.as_secs_f64() {
        tokio::time::sleep(Duration::from_secs_f64(MIN_RANGE.as_secs_f64() - elapsed)).await;
    }
    let after = scrape(&env).await;
    prometheus.wait_for_next_scrape().await;
    let end = unix_now();
    // A whole number of seconds, as Grafana's $__range: the range may start up to 1 s
    // earlier, where Prometheus holds the same idle samples as at the baseline.
    let start_at = end - (end - start_at).ceil();
    let decisions: Vec<Value> = env
        .logs
        .decisions()
        .await
        .into_iter()
        .skip(baseline)
        .map(|d| d.0)
        .collect();
    let observed = Observed {
        decisions,
        before,
        after,
    };
    assert_eq!(
        observed.decisions(&[], |l| l["webhook"] == "mutate"
            && l["placement.decision"] == "would_patch")[&vec![]],
        3.0,
        "the would_patch pods of the rollout, and no other"
    );
    let selections = [
        Selection::all(),
        Selection::of(&["e2e-dryrun"]),
        Selection::of(&["e2e-dryrun", "e2e-enforce"]),
    ];
    let (report, problems) = dashboard::evaluate(&prometheus, &observed, &selections, start_at, end).await;
    let mut text = format!("{} queries evaluated over {:.0} s:\n", report.len(), end - start_at);
    for e in &report {
        text.push_str(&format!(
            "  {} / {} [{}]: {}\n      {}\n",
            e.panel, e.ref_id, e.selection, e.shown, e.expr
        ));
    }
    notice(&text);
    assert!(
        problems.is_empty(),
        "{} dashboard problem(s):\n{}\n(pod-director's log: {})",
        problems.len(),
        problems.join("\n"),
        env.log_hint()
    );

    // The latency panel's exemplars: trace ids of decisions, the kept ones in Jaeger.
    let dashboards = dashboard::dashboards();
    let (_, rollout_dashboard) = dashboards
        .iter()
        .find(|(uid, _)| uid == "pod-director-rollout")
        .expect("the rollout dashboard");
    let vars = dashboard::Variables::new(start_at, end, SCRAPE, Selection::all());
    // An exemplar is a bucket's latest traced observation: it may predate the range.
    let every_decision: Vec<Value> = env.logs.decisions().await.into_iter().map(|d| d.0).collect();
    let mut checked = 0;
    for panel in dashboard::panels(rollout_dashboard) {
        for target in panel["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| t["exemplar"] == true)
        {
            let expr = vars
                .interpolate(target["expr"].as_str().unwrap_or_default(), rollout_dashboard)
                .expect("the latency query interpolates");
            let data = prometheus
                .query_exemplars(&expr, start_at, end)
                .await
                .unwrap_or_else(|e| panic!("query_exemplars {expr:?}: {e}"));
            let traces: Vec<String> = data
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|s| s["exemplars"].as_array().cloned().unwrap_or_default())
                .filter_map(|e| e["labels"]["trace_id"].as_str().map(str::to_owned))
                .collect();
            assert!(
                !traces.is_empty(),
                "panel {:?}: no exemplar for {expr:?}",
                panel["title"]
            );
            for trace_id in traces {
                let Some(line) = every_decision.iter().find(|l| l["trace_id"] == trace_id.as_str()) else {
                    panic!("exemplar trace_id {trace_id} is the trace of no decision pod-director logged");
                };
                let decision = line["placement.decision"].as_str().unwrap_or_default();
                if !KEPT.contains(&decision) || checked >= 5 {
                    continue;
                }
                jaeger
                    .wait_for_trace(&trace_id, &format!("the {decision} decision of an exemplar"), |t| {
                        crate::harness::jaeger::spans(t).iter().any(|(s, _)| s == SERVICE)
                    })
                    .await;
                checked += 1;
            }
        }
    }
    assert!(checked > 0, "no exemplar of a kept decision to look up in Jaeger");
    notice(&format!(
        "{checked} exemplar trace ids of the latency panel found in Jaeger; the rollout: {} pods, {} undecidable reviews",
        rollout.intended.len(),
        rollout.error_traces.len()
    ));
}
