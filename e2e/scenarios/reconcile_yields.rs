//! A second writer of pod-director's webhook configuration on the real API server: it marks the
//! configuration `admissions.enforcer/disabled: "true"` (as AKS users do) and keeps adding a
//! namespaceSelector term to the enforce entry (as AKS's Admissions Enforcer does), in a loop
//! bounded in count and time. pod-director re-asserts its selector a bounded number of times,
//! then settles: its patches stop, `pod_director_webhook_reconcile_yields_total` and
//! `pod_director_webhook_reconcile_yielded` move, one warning says which field another writer
//! keeps changing and what pod-director does, and the annotation is never stripped.

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use crate::harness::k8s::eventually;
use crate::harness::{Env, Options, notice};

/// What the reconciler re-asserts before it yields (`yields::BOUND` in the product).
const BOUND: u64 = 3;
/// The second writer's field manager.
const WRITER: &str = "e2e-second-writer";
const ANNOTATION: &str = "admissions.enforcer/disabled";

/// A counter or gauge sample of pod-director's /metrics, 0 when absent.
fn sample(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse::<f64>().ok()))
        .map_or(0, |v| v as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_writer_s_selector_term_is_re_asserted_a_bounded_number_of_times_and_its_annotation_kept() {
    let settings = crate::harness::Settings::from_env();
    if settings.target == crate::harness::Target::Cluster {
        notice("SKIPPED reconcile-yields in cluster mode: it sets pod-director's resync interval");
        return;
    }
    let env = Env::start_with(
        "reconcile-yields",
        Options {
            env: vec![("POD_DIRECTOR_WEBHOOK_RESYNC_INTERVAL".to_owned(), "1s".to_owned())],
            ..Options::default()
        },
    )
    .await;
    let name = env.settings.fullname.clone();
    let entry = format!("enforce.validate.{name}.pod-director.io");
    let api = Api::<ValidatingWebhookConfiguration>::all(env.client.clone());
    let params = PatchParams {
        field_manager: Some(WRITER.to_owned()),
        ..PatchParams::default()
    };
    api.patch(
        &name,
        &params,
        &Patch::Merge(json!({"metadata": {"annotations": {ANNOTATION: "true"}}})),
    )
    .await
    .expect("the annotation set");
    let term = json!({"key": "e2e.pod-director.io/second-writer", "operator": "DoesNotExist"});
    let metrics = || async { env.metrics().await.expect("GET /metrics") };
    let patched = r#"pod_director_webhook_reconciles_total{result="patched"}"#;
    let before = sample(&metrics().await, patched);

    // The second writer: puts its term back whenever it is gone; at most 200 writes, 60 s.
    let started = Instant::now();
    let (mut writes, mut quiet_since) = (0u64, Instant::now());
    while writes < 200 && started.elapsed() < Duration::from_secs(60) {
        let live = serde_json::to_value(api.get(&name).await.expect("GET")).expect("serializes");
        let webhooks = live["webhooks"].as_array().cloned().unwrap_or_default();
        let index = webhooks
            .iter()
            .position(|w| w["name"] == entry.as_str())
            .expect("the enforce entry");
        let terms = webhooks[index]["namespaceSelector"]["matchExpressions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if terms.contains(&term) {
            // Settled when the term stayed for 5 s (five resyncs).
            if quiet_since.elapsed() > Duration::from_secs(5) {
                break;
            }
        } else {
            let patch = json!([
                {"op": "test", "path": format!("/webhooks/{index}/name"), "value": entry},
                {"op": "add", "path": format!("/webhooks/{index}/namespaceSelector/matchExpressions/-"), "value": term},
            ]);
            let patch: json_patch::Patch = serde_json::from_value(patch).expect("a JSON patch");
            if api.patch(&name, &params, &Patch::Json::<()>(patch)).await.is_ok() {
                writes += 1;
            }
            quiet_since = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        quiet_since.elapsed() > Duration::from_secs(5),
        "pod-director did not settle: the second writer wrote {writes} times in {:?}",
        started.elapsed()
    );
    assert!(
        writes > BOUND,
        "another writer kept writing: pod-director removed the term {writes} - 1 times"
    );

    let text = metrics().await;
    let patches = sample(&text, patched) - before;
    assert!(patches <= BOUND, "bounded: {patches} patches\n{text}");
    assert_eq!(
        sample(
            &text,
            &format!(r#"pod_director_webhook_reconcile_yields_total{{entry="{entry}",field="namespaceSelector"}}"#)
        ),
        1,
        "{text}"
    );
    assert_eq!(sample(&text, "pod_director_webhook_reconcile_yielded"), 1, "{text}");
    let said: Vec<Value> = env
        .logs
        .lines()
        .await
        .into_iter()
        .filter(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.contains("another writer keeps changing back a webhook entry field"))
        })
        .collect();
    assert_eq!(said.len(), 1, "one warning: {said:?}");
    assert_eq!(said[0]["level"], "WARN", "{said:?}");
    assert_eq!(said[0]["entry"], entry.as_str(), "{said:?}");
    assert_eq!(said[0]["field"], "namespaceSelector", "{said:?}");
    assert_eq!(
        said[0]["writers"], WRITER,
        "the managedFields name the writer: {said:?}"
    );

    // The annotation another writer set is still there: pod-director never touches metadata.
    let live = api.get(&name).await.expect("GET");
    assert_eq!(
        live.metadata
            .annotations
            .unwrap_or_default()
            .get(ANNOTATION)
            .map(String::as_str),
        Some("true")
    );

    // The second writer goes away and takes its term with it: the yield ends, nothing is patched.
    let live = serde_json::to_value(api.get(&name).await.expect("GET")).expect("serializes");
    let webhooks = live["webhooks"].as_array().cloned().unwrap_or_default();
    let index = webhooks
        .iter()
        .position(|w| w["name"] == entry.as_str())
        .expect("the enforce entry");
    let terms = webhooks[index]["namespaceSelector"]["matchExpressions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let kept: Vec<Value> = terms.into_iter().filter(|t| *t != term).collect();
    let patch = json!([
        {"op": "test", "path": format!("/webhooks/{index}/name"), "value": entry},
        {"op": "replace", "path": format!("/webhooks/{index}/namespaceSelector/matchExpressions"), "value": kept},
        {"op": "remove", "path": format!("/metadata/annotations/{}", ANNOTATION.replace('/', "~1"))},
    ]);
    let patch: json_patch::Patch = serde_json::from_value(patch).expect("a JSON patch");
    api.patch(&name, &params, &Patch::Json::<()>(patch))
        .await
        .expect("the writer's term removed");
    eventually("no field left to another writer", || async {
        (sample(&metrics().await, "pod_director_webhook_reconcile_yielded") == 0).then_some(())
    })
    .await;
    assert_eq!(
        sample(&metrics().await, patched) - before,
        patches,
        "nothing more patched"
    );
}
