//! The whole server in-process over real TLS: every mode × endpoint × conflict
//! policy, warnings, audit annotations, patches applied to the original pod,
//! HTTP/1.1 and HTTP/2, probes, 503 when namespaces cannot be read, and a
//! graceful shutdown that finishes in-flight requests.

use std::sync::Arc;
use std::time::Duration;

use pod_director::testing::StaticNamespaces;
use pod_director::testing::harness::{Harness, Options, Slow};
use pod_director_testkit::fixtures::{decoded_patch, labels, patched, pod, pod_create, review};
use pod_director_testkit::wire::{self, ClientKind};
use pod_director_testkit::{assert_contains, eventually};
use reqwest::StatusCode;
use serde_json::{Value, json};

const MODES: [&str; 3] = ["dryRun", "warn", "enforce"];
const POLICIES: [&str; 3] = ["reject", "override", "ignore"];

/// One group per mode × conflict policy, all requiring the CI pool.
fn matrix_config() -> String {
    let mut yaml = String::from("namespaceLabel: pod-director/group\nunknownGroup: allow\ngroups:\n");
    for mode in MODES {
        for policy in POLICIES {
            yaml.push_str(&format!(
                "  {mode}-{policy}:\n    mode: {mode}\n    onConflict: {policy}\n    nodeSelector: {{node-pool: ci}}\n    \
                 tolerations:\n      - {{key: dedicated, operator: Equal, value: ci, effect: NoSchedule}}\n"
            ));
        }
    }
    yaml
}

fn group_toleration() -> Value {
    json!({"key": "dedicated", "operator": "Equal", "value": "ci", "effect": "NoSchedule"})
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PodKind {
    /// No placement at all: needs the nodeSelector and the toleration.
    Plain,
    /// Asks for another pool (`node-pool: gpu`) but has the group's toleration.
    Conflicting,
    /// Already carries the group's placement.
    Compliant,
}

fn test_pod(namespace: &str, kind: PodKind) -> Value {
    match kind {
        PodKind::Plain => pod(namespace, json!({})),
        PodKind::Conflicting => pod(
            namespace,
            json!({"nodeSelector": {"node-pool": "gpu"}, "tolerations": [group_toleration()]}),
        ),
        PodKind::Compliant => pod(
            namespace,
            json!({"nodeSelector": {"node-pool": "ci"}, "tolerations": [group_toleration()]}),
        ),
    }
}

#[derive(Debug)]
struct Expected {
    decision: &'static str,
    allowed: bool,
    /// Some(value) when the response must carry a patch leading to this nodeSelector["node-pool"].
    patched_pool: Option<&'static str>,
    warning: bool,
}

/// What DESIGN.md ("Modes", "The decision") says each case must give.
fn expected(mode: &str, policy: &str, endpoint: &str, kind: PodKind) -> Expected {
    let enforce = mode == "enforce";
    let warn = mode == "warn";
    let allow = |decision, warning| Expected {
        decision,
        allowed: true,
        patched_pool: None,
        warning,
    };
    let deny_or_would = || {
        if enforce {
            Expected {
                decision: "denied",
                allowed: false,
                patched_pool: None,
                warning: false,
            }
        } else {
            allow("would_deny", warn)
        }
    };
    let patch_or_would = |pool, conflict: bool| {
        if enforce {
            Expected {
                decision: "patched",
                allowed: true,
                patched_pool: Some(pool),
                // enforce warns only about conflicts
                warning: conflict,
            }
        } else {
            allow("would_patch", warn)
        }
    };
    match (endpoint, kind, policy) {
        (_, PodKind::Compliant, _) => allow("noop", false),
        ("/mutate", PodKind::Plain, _) => patch_or_would("ci", false),
        ("/mutate", PodKind::Conflicting, "reject") => deny_or_would(),
        ("/mutate", PodKind::Conflicting, "override") => patch_or_would("ci", true),
        // ignore: the pod keeps its pool, the toleration is already there; the conflict is recorded.
        ("/mutate", PodKind::Conflicting, _) => allow("noop", enforce),
        ("/validate", PodKind::Conflicting, "ignore") => allow("noop", false),
        // enforce judges the pod as it arrives (here: not mutated first); dryRun/warn judge it
        // as enforce would have left it after /mutate, so only a rejected conflict remains.
        ("/validate", PodKind::Conflicting, "reject") => deny_or_would(),
        ("/validate", _, _) if enforce => deny_or_would(),
        ("/validate", _, _) => allow("noop", false),
        _ => unreachable!("only /mutate and /validate are tested"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mode_endpoint_and_conflict_policy_answers_as_designed() {
    let harness = Harness::start(&matrix_config()).await;
    let mut enforce_patches = std::collections::HashMap::new();
    let mut dry_run_patches = std::collections::HashMap::new();
    let mut n = 0;
    for mode in MODES {
        for policy in POLICIES {
            let group = format!("{mode}-{policy}");
            // Namespace names are DNS-1123 labels: lower case.
            let namespace = format!("ns-{}", group.to_lowercase());
            harness.label(&namespace, &group);
            for endpoint in ["/mutate", "/validate"] {
                for kind in [PodKind::Plain, PodKind::Conflicting, PodKind::Compliant] {
                    n += 1;
                    let case = format!("{group} {endpoint} {kind:?}");
                    let want = expected(mode, policy, endpoint, kind);
                    let object = test_pod(&namespace, kind);
                    let uid = format!("00000000-0000-4000-8000-{n:012}");
                    let (status, body) = harness.post(endpoint, &review(&uid, "CREATE", &object, None)).await;
                    assert_eq!(status, StatusCode::OK, "{case}: {body}");
                    assert_eq!(body["kind"], "AdmissionReview", "{case}");
                    assert_eq!(body["apiVersion"], "admission.k8s.io/v1", "{case}");
                    let response = &body["response"];
                    assert_eq!(response["uid"], uid.as_str(), "{case}");
                    assert_eq!(response["allowed"], want.allowed, "{case}: {response}");

                    let annotations = &response["auditAnnotations"];
                    assert_eq!(annotations["decision"], want.decision, "{case}: {response}");
                    assert_eq!(annotations["group"], group.as_str(), "{case}");
                    assert_eq!(annotations["mode"], mode, "{case}");
                    assert!(annotations["config-revision"].is_string(), "{case}");

                    let warnings = response["warnings"].as_array().cloned().unwrap_or_default();
                    assert_eq!(!warnings.is_empty(), want.warning, "{case}: warnings {warnings:?}");
                    for warning in &warnings {
                        let text = warning.as_str().unwrap_or_default();
                        assert!(text.chars().count() <= 120, "{case}: warning too long: {text}");
                        assert!(text.contains(&group), "{case}: warning names the group: {text}");
                    }

                    match want.patched_pool {
                        Some(pool) => {
                            assert_eq!(response["patchType"], "JSONPatch", "{case}");
                            let patch = decoded_patch(response).expect("enforce carries a patch");
                            let result = patched(&object, &patch);
                            assert_eq!(result["spec"]["nodeSelector"]["node-pool"], pool, "{case}");
                            let tolerations = result["spec"]["tolerations"].as_array().cloned().unwrap_or_default();
                            assert!(tolerations.contains(&group_toleration()), "{case}: {tolerations:?}");
                            // The API server's own tolerations are kept.
                            assert_eq!(tolerations.len(), 3, "{case}: {tolerations:?}");
                            if kind == PodKind::Plain && endpoint == "/mutate" {
                                enforce_patches.insert(policy, serde_json::to_value(&patch).unwrap_or_default());
                            }
                        }
                        None => {
                            assert!(
                                response.get("patch").is_none(),
                                "{case}: no patch outside enforce: {response}"
                            );
                            assert!(response.get("patchType").is_none(), "{case}");
                        }
                    }
                    if want.decision == "would_patch" || want.decision == "patched" {
                        let annotated: Value = serde_json::from_str(annotations["patch"].as_str().unwrap_or_default())
                            .unwrap_or_else(|e| panic!("{case}: patch annotation is JSON: {e}"));
                        if mode == "dryRun" && kind == PodKind::Plain {
                            dry_run_patches.insert(policy, annotated);
                        }
                    }
                    if !want.allowed {
                        assert_eq!(response["status"]["code"], 403, "{case}");
                        let message = response["status"]["message"].as_str().unwrap_or_default();
                        assert!(
                            message.contains("node-pool"),
                            "{case}: message names the field: {message}"
                        );
                        if endpoint == "/validate" && kind == PodKind::Plain {
                            assert!(
                                message.contains("toleration"),
                                "{case}: every violation listed: {message}"
                            );
                        }
                    }
                }
            }
        }
    }
    // The would-be patch of dryRun is exactly the patch enforce applies.
    for policy in POLICIES {
        assert_eq!(dry_run_patches.get(policy), enforce_patches.get(policy), "{policy}");
        assert!(enforce_patches.contains_key(policy));
    }
    harness.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_is_validated_against_the_old_pod_and_never_mutated() {
    let harness = Harness::start(&matrix_config()).await;
    harness.label("ns", "enforce-reject");
    let compliant = test_pod("ns", PodKind::Compliant);
    let drifted = test_pod("ns", PodKind::Conflicting);

    let (status, body) = harness
        .post("/mutate", &review("u-1", "UPDATE", &drifted, Some(&compliant)))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["response"]["allowed"], true);
    assert!(body["response"].get("patch").is_none());

    let (_, body) = harness
        .post("/validate", &review("u-2", "UPDATE", &drifted, Some(&compliant)))
        .await;
    assert_eq!(
        body["response"]["allowed"], false,
        "an update introducing a violation is denied: {body}"
    );

    let (_, body) = harness
        .post("/validate", &review("u-3", "UPDATE", &drifted, Some(&drifted)))
        .await;
    assert_eq!(
        body["response"]["allowed"], true,
        "pre-existing violations do not block updates: {body}"
    );
    harness.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_dry_run_requests_get_the_same_answer() {
    let harness = Harness::start(&matrix_config()).await;
    harness.label("ns", "enforce-reject");
    let object = test_pod("ns", PodKind::Plain);
    let mut dry = review("u-dry", "CREATE", &object, None);
    dry["request"]["dryRun"] = json!(true);
    let (_, dry_body) = harness.post("/mutate", &dry).await;
    let (_, wet_body) = harness.post("/mutate", &review("u-dry", "CREATE", &object, None)).await;
    assert_eq!(dry_body, wet_body);
    assert!(decoded_patch(&dry_body["response"]).is_some());
    harness.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_of_pod_directors_own_namespace_and_excluded_namespaces_are_skipped() {
    let harness = Harness::start(&matrix_config()).await;
    for namespace in ["pod-director", "kube-system"] {
        harness.label(namespace, "enforce-reject");
        let (_, body) = harness.post("/mutate", &pod_create("u", namespace)).await;
        assert_eq!(body["response"]["allowed"], true, "{namespace}");
        assert!(body["response"].get("patch").is_none(), "{namespace}");
    }
    harness.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_group_is_admitted_with_a_warning() {
    let harness = Harness::start(&matrix_config()).await;
    harness.label("ns", "no-such-group");
    let (_, body) = harness.post("/mutate", &pod_create("u", "ns")).await;
    let response = &body["response"];
    assert_eq!(response["allowed"], true);
    assert_eq!(response["auditAnnotations"]["decision"], "unknown_group");
    assert_contains(response["warnings"][0].as_str().unwrap_or_default(), "no-such-group");
    harness.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_created_a_moment_ago_is_found_by_the_live_lookup() {
    let harness = Harness::start(&matrix_config()).await;
    harness
        .namespaces
        .insert_remote("brand-new", labels(&[("pod-director/group", "enforce-reject")]));
    let (status, body) = harness.post("/mutate", &pod_create("u", "brand-new")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["response"]["auditAnnotations"]["group"], "enforce-reject");
    assert!(decoded_patch(&body["response"]).is_some());
    harness.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_api_server_gives_503_so_the_failure_policy_applies() {
    let harness = Harness::start(&matrix_config()).await;
    harness.namespaces.set_unreachable(true);
    let (status, body) = harness.post("/mutate", &pod_create("u-503", "not-cached")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["response"]["uid"], "u-503");
    assert_contains(
        body["response"]["status"]["message"].as_str().unwrap_or_default(),
        "not-cached",
    );
    harness.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_and_http1_clients_are_both_served() {
    let harness = Harness::start(&matrix_config()).await;
    harness.label("ns", "dryRun-reject");
    let body = pod_create("u", "ns");
    for (kind, version) in [
        (ClientKind::Pooled, reqwest::Version::HTTP_2),
        (ClientKind::Http1, reqwest::Version::HTTP_11),
    ] {
        let client = wire::client(&harness.pki, kind);
        let response = client
            .post(format!("{}/mutate", harness.base))
            .json(&body)
            .send()
            .await
            .expect("sent");
        assert_eq!(response.version(), version);
        assert_eq!(response.status(), StatusCode::OK);
    }
    harness.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_report_health_readiness_and_metrics() {
    let harness = Harness::start(&matrix_config()).await;
    let http = reqwest::Client::new();
    let get = |path: &'static str| {
        let url = format!("{}{path}", harness.probe);
        let http = http.clone();
        async move {
            let response = http.get(url).send().await.expect("probe answers");
            (response.status(), response.text().await.unwrap_or_default())
        }
    };
    assert_eq!(get("/healthz").await.0, StatusCode::OK);
    harness.namespaces.set_ready(false);
    assert_eq!(get("/readyz").await.0, StatusCode::SERVICE_UNAVAILABLE);
    harness.namespaces.set_ready(true);
    assert_eq!(get("/readyz").await.0, StatusCode::OK);

    harness.label("ns", "dryRun-reject");
    harness.post("/mutate", &pod_create("u", "ns")).await;
    let (status, metrics) = get("/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        metrics.contains(
            r#"pod_director_decisions_total{group="dryRun-reject",mode="dryRun",decision="would_patch",webhook="mutate"} 1"#
        ),
        "{metrics}"
    );
    assert_contains(
        &metrics,
        r#"pod_director_admission_duration_seconds_count{webhook="mutate"} 1"#,
    );
    assert_contains(&metrics, "pod_director_namespace_cache_size 1");
    assert_contains(&metrics, "pod_director_build_info");
    harness.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_in_flight_requests_and_stops_accepting() {
    let slow = Slow {
        inner: StaticNamespaces::new(),
        delay: Duration::from_millis(700),
    };
    slow.inner
        .insert_remote("ns", labels(&[("pod-director/group", "enforce-reject")]));
    let harness = Harness::start_with(&matrix_config(), Options::default(), Some(Arc::new(slow))).await;
    let client = harness.client.clone();
    let url = format!("{}/mutate", harness.base);
    let body = pod_create("u-inflight", "ns");
    let in_flight = tokio::spawn(async move { client.post(url).json(&body).send().await });
    tokio::time::sleep(Duration::from_millis(200)).await;

    let addr = harness.server.addr;
    let Harness { server, .. } = harness;
    let started = std::time::Instant::now();
    server.shutdown().await;

    let response = in_flight.await.expect("task").expect("the in-flight request completes");
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.expect("JSON");
    assert_eq!(body["response"]["uid"], "u-inflight");
    assert!(started.elapsed() < Duration::from_secs(5), "drained promptly");
    assert!(
        eventually(Duration::from_secs(2), || async {
            tokio::net::TcpStream::connect(addr).await.is_err()
        })
        .await,
        "no longer accepting"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_slower_than_the_request_timeout_answers_503() {
    let slow = Slow {
        inner: StaticNamespaces::new(),
        delay: Duration::from_secs(3),
    };
    let options = Options {
        request_timeout: Duration::from_millis(300),
        ..Options::default()
    };
    let harness = Harness::start_with(&matrix_config(), options, Some(Arc::new(slow))).await;
    let started = std::time::Instant::now();
    let (status, body) = harness.post("/mutate", &pod_create("u-slow", "ns")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["response"]["uid"], "u-slow");
    assert!(started.elapsed() < Duration::from_secs(2));
    harness.server.shutdown().await;
}
