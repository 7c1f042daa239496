//! Hot reload with kubelet-style mounts (`..data` symlink swaps): the serving
//! certificate rotates under load with zero failed requests, and the
//! configuration changes without a restart while invalid versions are refused.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use pod_director::testing::harness::{Harness, metric};
use pod_director_testkit::eventually;
use pod_director_testkit::fixtures::{decoded_patch, pod_create};
use pod_director_testkit::wire::{self, ClientKind};
use reqwest::StatusCode;
use serde_json::Value;

const CONFIG: &str = "groups:\n  ci:\n    mode: dryRun\n    nodeSelector: {node-pool: ci}\n";

/// The DER certificate a fresh connection is served.
async fn served_certificate(harness: &Harness) -> Vec<u8> {
    let client = wire::client(&harness.pki, ClientKind::FreshConnections);
    let response = client
        .get(format!("{}/healthz-not-here", harness.base))
        .send()
        .await
        .expect("TLS handshake succeeds");
    response
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|info| info.peer_certificate())
        .map(<[u8]>::to_vec)
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_certificate_rotates_under_load_without_a_failed_request() {
    let mut harness = Harness::start(CONFIG).await;
    harness.label("ns", "ci");
    let first = served_certificate(&harness).await;
    assert!(!first.is_empty());

    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let body = pod_create("u-load", "ns");
    let mut loaders = Vec::new();
    for kind in [ClientKind::Pooled, ClientKind::FreshConnections, ClientKind::Http1] {
        let client = wire::client(&harness.pki, kind);
        let url = format!("{}/mutate", harness.base);
        let (stop, sent, failed, body) = (stop.clone(), sent.clone(), failed.clone(), body.clone());
        loaders.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let ok = match client.post(&url).json(&body).send().await {
                    Ok(response) => response.status() == StatusCode::OK,
                    Err(_) => false,
                };
                sent.fetch_add(1, Ordering::SeqCst);
                if !ok {
                    failed.fetch_add(1, Ordering::SeqCst);
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;

    // A half-done rotation (new certificate, old key) is refused; the old certificate stays.
    let old_key = std::fs::read(harness.tls.path("tls.key")).expect("key");
    let second = harness.pki.leaf("pod-director generation 2");
    harness
        .tls
        .update(&[("tls.crt", second.cert_pem.as_bytes()), ("tls.key", &old_key)]);
    assert!(
        counted(&harness, "pod_director_tls_reloads_total", "error", 1.0).await,
        "the mismatched pair is counted as a failed reload"
    );
    assert_eq!(
        served_certificate(&harness).await,
        first,
        "the previous certificate stays in use"
    );

    // The completed rotation is picked up by new connections.
    harness.tls.update(&[
        ("tls.crt", second.cert_pem.as_bytes()),
        ("tls.key", second.key_pem.as_bytes()),
    ]);
    assert!(
        eventually(Duration::from_secs(5), || async {
            served_certificate(&harness).await == second.der
        })
        .await,
        "new connections present the new certificate"
    );
    assert_eq!(
        metric(&harness, r#"pod_director_tls_reloads_total{result="success"}"#).await,
        Some(1.0)
    );
    tokio::time::sleep(Duration::from_millis(300)).await;

    stop.store(true, Ordering::SeqCst);
    for loader in loaders {
        loader.await.expect("loader");
    }
    let sent = sent.load(Ordering::SeqCst);
    assert!(sent > 20, "the load kept going ({sent} requests)");
    assert_eq!(failed.load(Ordering::SeqCst), 0, "no request failed out of {sent}");
    harness.server.shutdown().await;
}

/// Whether `series{result="<result>"}` comes to read `value` within 5 s.
async fn counted(harness: &Harness, series: &str, result: &str, value: f64) -> bool {
    eventually(Duration::from_secs(5), || async {
        metric(harness, &format!(r#"{series}{{result="{result}"}}"#)).await == Some(value)
    })
    .await
}

async fn decide(harness: &Harness, uid: &str) -> Value {
    let (status, body) = harness.post("/mutate", &pod_create(uid, "ns")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["response"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_config_change_takes_effect_without_a_restart_and_an_invalid_one_is_refused() {
    let mut harness = Harness::start(CONFIG).await;
    harness.label("ns", "ci");
    let before = decide(&harness, "u-0").await;
    assert_eq!(before["auditAnnotations"]["decision"], "would_patch");
    assert!(before.get("patch").is_none());
    let first_revision = before["auditAnnotations"]["config-revision"].clone();

    // Flip the group to enforce, the way a ConfigMap update arrives.
    harness
        .config
        .update(&[("config.yaml", CONFIG.replace("dryRun", "enforce").as_bytes())]);
    assert!(
        eventually(Duration::from_secs(5), || async {
            decide(&harness, "u-1").await["auditAnnotations"]["decision"] == "patched"
        })
        .await,
        "the group is enforced after the reload"
    );
    let after = decide(&harness, "u-1").await;
    assert!(decoded_patch(&after).is_some());
    let enforced_revision = after["auditAnnotations"]["config-revision"].clone();
    assert_ne!(enforced_revision, first_revision);

    // An invalid configuration is refused and counted; enforcement continues.
    let invalid = "groups:\n  ci:\n    mode: dryRun\n    tolerations:\n      - {key: a, operator: Equals}\n";
    harness.config.update(&[("config.yaml", invalid.as_bytes())]);
    assert!(
        counted(&harness, "pod_director_config_reloads_total", "error", 1.0).await,
        "the refused reload is counted"
    );
    let still = decide(&harness, "u-2").await;
    assert_eq!(still["auditAnnotations"]["decision"], "patched");
    assert_eq!(still["auditAnnotations"]["config-revision"], enforced_revision);

    // Editing the file in place (no symlink swap) is noticed as well.
    std::fs::write(harness.config.path("config.yaml"), CONFIG).expect("rewrite in place");
    assert!(
        eventually(Duration::from_secs(5), || async {
            decide(&harness, "u-3").await["auditAnnotations"]["decision"] == "would_patch"
        })
        .await,
        "back to dryRun"
    );
    assert_eq!(
        metric(&harness, r#"pod_director_config_reloads_total{result="success"}"#).await,
        Some(2.0)
    );
    harness.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_that_means_nothing_is_refused_and_the_old_revision_keeps_deciding() {
    let mut harness = Harness::start(&CONFIG.replace("dryRun", "enforce")).await;
    harness.label("ns", "ci");
    let before = decide(&harness, "u-0").await;
    assert_eq!(before["auditAnnotations"]["decision"], "patched");
    let revision = before["auditAnnotations"]["config-revision"].clone();

    for (refused, text) in [
        (1.0, ""),
        (2.0, "# groups:\n#   ci: {mode: enforce}\n"),
        (3.0, "null\n"),
        (4.0, "---\n"),
    ] {
        harness.config.update(&[("config.yaml", text.as_bytes())]);
        assert!(
            counted(&harness, "pod_director_config_reloads_total", "error", refused).await,
            "{text:?} is refused and counted"
        );
        let still = decide(&harness, "u-1").await;
        assert_eq!(still["auditAnnotations"]["decision"], "patched", "after {text:?}");
        assert_eq!(still["auditAnnotations"]["config-revision"], revision, "after {text:?}");
    }
    assert_eq!(
        metric(&harness, r#"pod_director_config_reloads_total{result="success"}"#).await,
        Some(0.0),
        "no reload succeeded (the series is exported at 0 from the start)"
    );
    harness.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_config_written_in_place_is_not_reported_as_refused() {
    use std::io::Write as _;
    let harness = Harness::start(CONFIG).await;
    harness.label("ns", "ci");
    let path = harness.config.path("config.yaml");
    // `cat > config.yaml`: the file is truncated (empty for a moment), then written in two parts.
    let enforced = CONFIG.replace("dryRun", "enforce");
    // Cut inside a value, so that the first part alone is refused (`mode: enf`).
    let (head, tail) = enforced.split_at(enforced.find("enforce").map_or(0, |i| i + 3));
    let mut file = std::fs::File::create(&path).expect("truncate in place");
    tokio::time::sleep(Duration::from_millis(150)).await;
    file.write_all(head.as_bytes()).expect("first part");
    file.flush().expect("flush");
    tokio::time::sleep(Duration::from_millis(150)).await;
    file.write_all(tail.as_bytes()).expect("second part");
    drop(file);
    assert!(
        eventually(Duration::from_secs(5), || async {
            decide(&harness, "u-1").await["auditAnnotations"]["decision"] == "patched"
        })
        .await,
        "the complete file is loaded"
    );
    // Past the quiet period, nothing was refused along the way.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let count = |result: &'static str| {
        let harness = &harness;
        async move {
            metric(
                harness,
                &format!(r#"pod_director_config_reloads_total{{result="{result}"}}"#),
            )
            .await
        }
    };
    assert_eq!(count("error").await, Some(0.0), "an edit in progress is not a refusal");
    assert_eq!(count("success").await, Some(1.0));

    // A file that stays empty is still refused, once.
    std::fs::write(&path, "").expect("empty in place");
    assert!(
        eventually(Duration::from_secs(5), || async { count("error").await == Some(1.0) }).await,
        "an empty file that stays empty is refused"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(count("error").await, Some(1.0), "and counted once");
    assert_eq!(decide(&harness, "u-2").await["auditAnnotations"]["decision"], "patched");
    harness.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_left_selecting_a_removed_group_are_exported_per_group() {
    let two = format!("{CONFIG}  batch:\n    nodeSelector: {{node-pool: batch}}\n");
    let mut harness = Harness::start(&two).await;
    harness.label("a", "batch");
    harness.label("b", "batch");
    harness.label("c", "ci");
    let gauge = r#"pod_director_orphaned_group_namespaces{group="batch"}"#;
    assert_eq!(metric(&harness, gauge).await, None, "batch is defined");

    harness.config.update(&[("config.yaml", CONFIG.as_bytes())]);
    assert!(
        eventually(Duration::from_secs(5), || async {
            metric(&harness, gauge).await == Some(2.0)
        })
        .await,
        "two namespaces still select the removed group"
    );
    assert_eq!(
        metric(&harness, r#"pod_director_orphaned_group_namespaces{group="ci"}"#).await,
        None
    );

    // The gauge follows the namespaces, not only reloads.
    harness.label("a", "ci");
    assert_eq!(metric(&harness, gauge).await, Some(1.0));
    harness.config.update(&[("config.yaml", two.as_bytes())]);
    assert!(
        eventually(Duration::from_secs(5), || async {
            metric(&harness, gauge).await.is_none()
        })
        .await,
        "batch is defined again"
    );
    harness.server.shutdown().await;
}

/// PodNodeSelector's own file: `clusterDefaultNodeSelector: pool=<pool>`.
fn node_selector_file(pool: &str) -> String {
    format!("podNodeSelectorPluginConfig:\n  clusterDefaultNodeSelector: pool={pool}\n")
}

/// The nodeSelector of a plain pod of `ns` after `/mutate-in-tree`'s patch.
async fn in_tree_selector(harness: &Harness, uid: &str) -> Value {
    let review = pod_create(uid, "ns");
    let (status, body) = harness.post("/mutate-in-tree", &review).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let mut pod = review["request"]["object"].clone();
    if let Some(patch) = decoded_patch(&body["response"]) {
        json_patch::patch(&mut pod, &patch).expect("the patch applies");
    }
    pod["spec"]["nodeSelector"].clone()
}

/// Whether `/mutate-in-tree` comes to place a plain pod on `pool=<pool>` within 5 s.
async fn selector_becomes(harness: &Harness, pool: &str) -> bool {
    eventually(Duration::from_secs(5), || async {
        in_tree_selector(harness, "u-in-tree").await == serde_json::json!({"pool": pool})
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_in_tree_plugin_file_is_reloaded_alone_and_a_broken_one_is_refused() {
    let mut harness = Harness::start(CONFIG).await;
    harness.label("ns", "ci");
    let config = format!("inTreePlugins:\n  mode: enforce\n  podNodeSelectorConfigFile: pns.yaml\n{CONFIG}");
    let config = config.as_bytes();
    harness.config.update(&[
        ("config.yaml", config),
        ("pns.yaml", node_selector_file("a").as_bytes()),
    ]);
    // A key added to the ConfigMap: the kubelet links it beside the others.
    std::os::unix::fs::symlink("..data/pns.yaml", harness.config.path("pns.yaml")).expect("the new key's link");
    assert!(
        selector_becomes(&harness, "a").await,
        "the plugin's file is read with the configuration"
    );

    // Only the plugin's file changes: the configuration file's content stays the same.
    harness.config.update(&[
        ("config.yaml", config),
        ("pns.yaml", node_selector_file("b").as_bytes()),
    ]);
    assert!(
        selector_becomes(&harness, "b").await,
        "the edited plugin file is live without a restart"
    );

    // A broken plugin file is refused and counted; the previous one keeps deciding.
    harness.config.update(&[
        ("config.yaml", config),
        ("pns.yaml", b"podNodeSelectorPluginConfig: [\n"),
    ]);
    assert!(
        counted(&harness, "pod_director_config_reloads_total", "error", 1.0).await,
        "the broken plugin file is a refused reload"
    );
    assert_eq!(
        in_tree_selector(&harness, "u-kept").await,
        serde_json::json!({"pool": "b"})
    );

    // Fixed in place, the plugin file alone: loaded.
    std::fs::write(harness.config.path("pns.yaml"), node_selector_file("c")).expect("rewrite in place");
    assert!(selector_becomes(&harness, "c").await, "the fixed plugin file is loaded");
    assert_eq!(
        metric(&harness, r#"pod_director_config_reloads_total{result="success"}"#).await,
        Some(3.0)
    );
    harness.server.shutdown().await;
}
