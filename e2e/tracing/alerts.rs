//! The chart's alert rules (`alerts.enabled`) evaluated by a real Prometheus that scrapes
//! pod-director (with the `namespace` target label a ServiceMonitor adds) and the real
//! kube-apiserver (its `/metrics`, with the suite's admin certificate): every alert's
//! expression is a valid query over real series, every pod-director metric it names exists,
//! and the failure alerts fire on failures made for real — a configuration refused at reload,
//! then pod-director stopped: an enforce namespace's pod refused by the API server
//! (`PodDirectorWebhookFailing`) and a dryRun namespace's pod admitted undecided
//! (`PodDirectorWebhookFailOpen`), each naming this release's webhook.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::chart::render_template_with;
use crate::harness::k8s::{eventually, pod};
use crate::harness::prometheus::Prometheus;
use crate::harness::{Env, Options, notice};

const SCRAPE: Duration = Duration::from_secs(1);

/// The rendered rules: (alert, expr).
fn rules(env: &Env) -> Vec<(String, String)> {
    let sets = [
        "alerts.enabled=true".to_owned(),
        // So that the intruder alert is rendered too (the running config is not changed).
        "config.groups.e2e-reserved.reserve.mode=enforce".to_owned(),
    ];
    let rendered = render_template_with(&env.settings, "templates/prometheusrule.yaml", &sets);
    let rule = rendered.first().expect("a PrometheusRule");
    rule["spec"]["groups"][0]["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .map(|r| {
            (
                r["alert"].as_str().unwrap_or_default().to_owned(),
                r["expr"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// The `pod_director_*` metric names of an expression.
fn pod_director_metrics(expr: &str) -> BTreeSet<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("pod_director_"))
        .map(str::to_owned)
        .collect()
}

/// Polls `expr` until it returns a sample; returns the samples' label sets.
async fn fires(prometheus: &Prometheus, alert: &str, expr: &str) -> Vec<Value> {
    eventually(&format!("{alert} to fire: {expr}"), || async {
        let result = prometheus.query(expr, None).await.ok()?;
        let samples = result["result"].as_array()?.clone();
        (!samples.is_empty()).then(|| samples.iter().map(|s| s["metric"].clone()).collect())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_alert_expression_is_evaluated_by_prometheus_and_the_failure_alerts_fire_on_real_failures() {
    let options = Options {
        audit_interval: Some(Duration::from_secs(3600)),
        ..Options::default()
    };
    let mut env = Env::start_with("alerts", options).await;
    let rules = rules(&env);
    assert!(rules.len() >= 6, "{rules:?}");
    let enforce = env.namespace(Some("e2e-enforce")).await;
    let dryrun = env.namespace(Some("e2e-dryrun")).await;
    env.wait_for_metric(r#"pod_director_audit_scans_total{result="success"}"#, "above 0", |v| {
        v > 0.0
    })
    .await;

    let probe = env.pod_director().probe_addr;
    let state = env.settings.state_dir.clone().expect("local mode has a state dir");
    let pki = state.join("pki");
    let api = kube::Config::infer().await.expect("KUBECONFIG").cluster_url;
    let api_host = api
        .authority()
        .map(|a| a.to_string())
        .expect("the API server's address");
    let jobs = format!(
        "  - job_name: pod-director\n    scrape_timeout: 1s\n    static_configs:\n      \
         - targets: ['{probe}']\n        labels: {{namespace: {ns}, pod: pod-director-e2e}}\n  \
         - job_name: apiserver\n    scrape_timeout: 1s\n    scheme: https\n    tls_config:\n      \
         ca_file: {ca}\n      cert_file: {crt}\n      key_file: {key}\n    static_configs:\n      \
         - targets: ['{api_host}']\n",
        ns = env.settings.namespace,
        ca = pki.join("ca.crt").display(),
        crt = pki.join("admin.crt").display(),
        key = pki.join("admin.key").display(),
    );
    let prometheus = Prometheus::start(&jobs, 2, SCRAPE, "pod-director and the API server").await;

    // Every expression is a valid query over these series; every pod-director metric it names exists.
    for (alert, expr) in &rules {
        if let Err(e) = prometheus.query(expr, None).await {
            panic!("{alert}: Prometheus refuses {expr}: {e}");
        }
        for metric in pod_director_metrics(expr) {
            let present = prometheus
                .query(&format!("count({metric})"), None)
                .await
                .map(|r| r["result"].as_array().is_some_and(|a| !a.is_empty()))
                .unwrap_or(false);
            assert!(present, "{alert} names {metric}, which pod-director does not export");
        }
    }
    let expr = |alert: &str| {
        rules
            .iter()
            .find(|(a, _)| a == alert)
            .map(|(_, e)| e.clone())
            .unwrap_or_else(|| panic!("{alert} rendered"))
    };

    // A configuration refused at reload.
    env.edit_config(|c| c["groups"]["e2e-dryrun"]["mode"] = json!("Enforce"));
    env.wait_for_metric(r#"pod_director_config_reloads_total{result="error"}"#, "above 0", |v| {
        v > 0.0
    })
    .await;
    fires(
        &prometheus,
        "PodDirectorConfigRefused",
        &expr("PodDirectorConfigRefused"),
    )
    .await;

    // pod-director down: the API server refuses the enforce namespace's pods and admits the
    // dryRun namespace's undecided, a few times so that rate() and increase() see the counters move.
    env.pod_director().stop();
    let failing = expr("PodDirectorWebhookFailing");
    let fail_open = expr("PodDirectorWebhookFailOpen");
    let mut refused = Vec::new();
    let mut open = Vec::new();
    for i in 0..30 {
        let created = env.create_pod(&enforce, &pod(&format!("down-{i}"))).await;
        assert!(
            !created.status.is_success(),
            "an enforce pod admitted while pod-director is down: {created:?}"
        );
        let admitted = env.create_pod(&dryrun, &pod(&format!("down-{i}"))).await;
        assert!(
            admitted.status.is_success(),
            "a dryRun pod refused while pod-director is down: {admitted:?}"
        );
        tokio::time::sleep(SCRAPE).await;
        if refused.is_empty() {
            refused = prometheus
                .query(&failing, None)
                .await
                .map(|r| r["result"].clone())
                .ok()
                .and_then(|r| r.as_array().cloned())
                .unwrap_or_default();
        }
        if open.is_empty() {
            open = prometheus
                .query(&fail_open, None)
                .await
                .map(|r| r["result"].clone())
                .ok()
                .and_then(|r| r.as_array().cloned())
                .unwrap_or_default();
        }
        if !refused.is_empty() && !open.is_empty() {
            break;
        }
    }
    let suffix = format!(".{}.pod-director.io", env.settings.fullname);
    let names = |samples: &[Value]| -> Vec<String> {
        samples
            .iter()
            .map(|s| s["metric"]["name"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let refused_names = names(&refused);
    assert!(
        !refused_names.is_empty()
            && refused_names
                .iter()
                .all(|n| n.ends_with(&suffix) && n.starts_with("enforce.")),
        "PodDirectorWebhookFailing names the release's enforce entry: {refused:?}"
    );
    let open_names = names(&open);
    assert!(
        !open_names.is_empty() && open_names.iter().all(|n| n.ends_with(&suffix)),
        "PodDirectorWebhookFailOpen names the release's observing entry: {open:?}"
    );
    notice(&format!(
        "alerts: {} expressions evaluated; fired on real failures: PodDirectorConfigRefused, \
         PodDirectorWebhookFailing {refused_names:?}, PodDirectorWebhookFailOpen {open_names:?}",
        rules.len()
    ));
}
