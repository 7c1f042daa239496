//! The reconciler against a fake API server.

use std::sync::Mutex;

use http::{Request, Response, StatusCode};
use kube::client::Body;
use serde_json::json;

use super::*;
use crate::app::Metrics;
use pod_director_engine::compile::webhook_entries::{PodEntry, namespace_selectors};
use pod_director_engine::testing::{ENTRY_GROUPS, assert_contains, config, loaded, rendered_entries};
use pod_director_testkit::until;

// ---- the reconciler against a fake API server ----------------------------------

/// An "API server" holding webhook configurations by path; PATCH applies JSON patches.
#[derive(Clone, Default)]
struct FakeApi {
    objects: Arc<Mutex<BTreeMap<String, Value>>>,
    requests: Arc<Mutex<Vec<String>>>,
    broken: Arc<std::sync::atomic::AtomicBool>,
}

const MUTATING_PATH: &str = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/pd";
const VALIDATING_PATH: &str = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/pd";

impl FakeApi {
    fn with(yaml: &str) -> Self {
        let api = Self::default();
        for (path, kind, k) in [
            (MUTATING_PATH, "MutatingWebhookConfiguration", Kind::Mutating),
            (VALIDATING_PATH, "ValidatingWebhookConfiguration", Kind::Validating),
        ] {
            let webhooks = rendered_entries(k, "pd", yaml);
            api.objects.lock().unwrap().insert(
                path.to_owned(),
                json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": "pd"}, "webhooks": webhooks}),
            );
        }
        api
    }

    fn client(&self) -> Client {
        let api = self.clone();
        let service = tower::service_fn(move |req: Request<Body>| {
            let api = api.clone();
            async move {
                let method = req.method().clone();
                let path = req.uri().path().to_owned();
                let query = req.uri().query().unwrap_or_default().to_owned();
                let content_type = req
                    .headers()
                    .get(http::header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                let body = http_body_util::BodyExt::collect(req.into_body())
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                api.requests
                    .lock()
                    .unwrap()
                    .push(format!("{method} {path}?{query} {content_type}"));
                let status_body = |code: u16, message: &str| json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "code": code});
                let (status, body) = if api.broken.load(std::sync::atomic::Ordering::SeqCst) {
                    (StatusCode::INTERNAL_SERVER_ERROR, status_body(500, "etcd is on fire"))
                } else {
                    let mut objects = api.objects.lock().unwrap();
                    match (objects.get_mut(&path), method.as_str()) {
                        (None, _) => (StatusCode::NOT_FOUND, status_body(404, "not found")),
                        (Some(object), "GET") => (StatusCode::OK, object.clone()),
                        (Some(object), "PATCH") => {
                            let patch: json_patch::Patch = serde_json::from_slice(&body).expect("a JSON patch");
                            match json_patch::patch(object, &patch.0) {
                                Ok(()) => (StatusCode::OK, object.clone()),
                                Err(e) => (StatusCode::UNPROCESSABLE_ENTITY, status_body(422, &e.to_string())),
                            }
                        }
                        _ => (StatusCode::METHOD_NOT_ALLOWED, status_body(405, "no")),
                    }
                };
                Response::builder()
                    .status(status)
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(Body::from(serde_json::to_vec(&body).unwrap_or_default()))
            }
        });
        Client::new(service, "default")
    }

    fn webhooks(&self, path: &str) -> Vec<Value> {
        self.objects.lock().unwrap()[path]["webhooks"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

fn reconciler(api: &FakeApi, yaml: &str) -> (Reconciler, Arc<ArcSwap<Loaded>>, Metrics) {
    let live = Arc::new(ArcSwap::from_pointee(loaded(yaml)));
    let metrics = Metrics::register();
    let reconciler = Reconciler {
        client: api.client(),
        targets: vec![(Kind::Mutating, "pd".to_owned()), (Kind::Validating, "pd".to_owned())],
        entries: EntrySettings::default(),
        live: live.clone(),
        metrics: metrics.reconciles.clone(),
        policies: None,
        yields: Default::default(),
    };
    (reconciler, live, metrics)
}

#[tokio::test]
async fn the_reconciler_patches_both_configurations_once_and_then_finds_them_in_step() {
    let api = FakeApi::with(ENTRY_GROUPS);
    let flipped = ENTRY_GROUPS.replace("batch: {}", "batch: {mode: enforce}");
    let (reconciler, _, metrics) = reconciler(&api, &flipped);

    assert!(reconciler.reconcile().await);
    for path in [MUTATING_PATH, VALIDATING_PATH] {
        assert_eq!(
            api.webhooks(path)[0]["namespaceSelector"]["matchExpressions"][0]["values"],
            json!(["batch", "ci"]),
            "{path}"
        );
    }
    let patches: Vec<String> = api.requests().into_iter().filter(|r| r.starts_with("PATCH")).collect();
    assert_eq!(patches.len(), 2, "{patches:?}");
    for patch in &patches {
        assert!(patch.ends_with("application/json-patch+json"), "{patch}");
        assert_contains(patch, "fieldManager=pod-director");
    }

    assert!(reconciler.reconcile().await);
    let patches = api.requests().into_iter().filter(|r| r.starts_with("PATCH")).count();
    assert_eq!(patches, 2, "the second pass finds nothing to patch");
    let text = metrics.encode();
    assert_contains(&text, r#"pod_director_webhook_reconciles_total{result="patched"} 1"#);
    assert_contains(&text, r#"pod_director_webhook_reconciles_total{result="unchanged"} 1"#);
}

#[tokio::test]
async fn a_failing_api_server_is_counted_as_an_error_and_patches_nothing() {
    let api = FakeApi::with(ENTRY_GROUPS);
    api.broken.store(true, std::sync::atomic::Ordering::SeqCst);
    let (reconciler, _, metrics) = reconciler(&api, "groups: {ci: {}}");
    assert!(!reconciler.reconcile().await);
    assert_contains(
        &metrics.encode(),
        r#"pod_director_webhook_reconciles_total{result="error"} 1"#,
    );
    assert!(api.requests().iter().all(|r| r.starts_with("GET")));
}

#[tokio::test]
async fn a_configuration_that_does_not_exist_is_an_error() {
    let api = FakeApi::with(ENTRY_GROUPS);
    api.objects.lock().unwrap().remove(VALIDATING_PATH);
    let (reconciler, _, metrics) = reconciler(&api, "groups: {ci: {}}");
    assert!(!reconciler.reconcile().await, "the validating one is missing");
    assert_eq!(
        api.webhooks(MUTATING_PATH)[1]["namespaceSelector"]["matchExpressions"][0]["values"],
        json!(["ci"]),
        "the mutating one is still reconciled"
    );
    assert_contains(
        &metrics.encode(),
        r#"pod_director_webhook_reconciles_total{result="error"} 1"#,
    );
}

#[tokio::test]
async fn the_reconciler_task_follows_reloads_and_retries_failures() {
    let api = FakeApi::with(ENTRY_GROUPS);
    let (reconciler, live, metrics) = reconciler(&api, ENTRY_GROUPS);
    let (changed_tx, changed_rx) = watch::channel(String::new());
    let (stop_tx, stop_rx) = watch::channel(false);
    api.broken.store(true, std::sync::atomic::Ordering::SeqCst);
    let task = spawn(reconciler, changed_rx, Duration::from_secs(3600), stop_rx);

    until("a failure is counted", || {
        metrics.encode().contains(r#"result="error"} 1"#)
    })
    .await;
    api.broken.store(false, std::sync::atomic::Ordering::SeqCst);
    until("the retry (after 1 s, long before the resync) succeeds", || {
        metrics.encode().contains(r#"result="unchanged"} 1"#)
    })
    .await;

    live.store(Arc::new(loaded(&format!("defaultGroup: gpu\n{ENTRY_GROUPS}"))));
    changed_tx.send_replace("new".to_owned());
    until("the reload is reconciled at once", || {
        api.webhooks(MUTATING_PATH)[3]["namespaceSelector"]["matchExpressions"][0]["operator"] == "DoesNotExist"
    })
    .await;
    stop_tx.send_replace(true);
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the task stops on shutdown")
        .expect("the task did not panic");
}

#[tokio::test]
async fn several_replicas_reconcile_to_the_same_state_and_then_patch_nothing() {
    let api = FakeApi::with(ENTRY_GROUPS);
    let flipped = format!(
        "defaultGroup: gpu\n{}",
        ENTRY_GROUPS.replace("gpu: {mode: warn}", "gpu: {mode: enforce}")
    );
    let replicas: Vec<(Reconciler, Arc<ArcSwap<Loaded>>, Metrics)> =
        (0..3).map(|_| reconciler(&api, &flipped)).collect();
    let passes = futures::future::join_all(replicas.iter().map(|(r, _, _)| r.reconcile())).await;
    // A replica whose patch raced another's may fail its `test` guard; it retries.
    for ((r, _, _), ok) in replicas.iter().zip(passes) {
        if !ok {
            assert!(r.reconcile().await);
        }
    }
    let desired = namespace_selectors(&config(&flipped), &BTreeSet::new());
    for path in [MUTATING_PATH, VALIDATING_PATH] {
        let webhooks = api.webhooks(path);
        assert_eq!(
            webhooks[0]["namespaceSelector"],
            serde_json::to_value(&desired[&PodEntry::Enforce]).unwrap()
        );
        assert_eq!(
            webhooks[3]["namespaceSelector"],
            serde_json::to_value(&desired[&PodEntry::DefaultGroup]).unwrap()
        );
        assert_eq!(webhooks[3]["failurePolicy"], "Fail");
    }
    let patches = api.requests().into_iter().filter(|r| r.starts_with("PATCH")).count();
    for (r, _, _) in &replicas {
        assert!(r.reconcile().await);
    }
    assert_eq!(
        api.requests().into_iter().filter(|r| r.starts_with("PATCH")).count(),
        patches,
        "in step: no replica patches again"
    );
}

#[tokio::test]
async fn a_second_writer_s_selector_term_is_re_asserted_a_bounded_number_of_times_and_its_annotation_kept() {
    let api = FakeApi::with(ENTRY_GROUPS);
    let (reconciler, _, metrics) = reconciler(&api, ENTRY_GROUPS);
    assert!(reconciler.reconcile().await);
    let patches = || api.requests().into_iter().filter(|r| r.starts_with("PATCH")).count();
    assert_eq!(patches(), 0, "in step");
    // A second writer (AKS's Admissions Enforcer, say) marks the configuration and adds a term to
    // the enforce entry's namespaceSelector before every pass.
    let term = json!({"key": "control-plane", "operator": "DoesNotExist"});
    for _ in 0..12 {
        {
            let mut objects = api.objects.lock().unwrap();
            let object = objects.get_mut(VALIDATING_PATH).expect("stored");
            object["metadata"]["annotations"] = json!({"admissions.enforcer/disabled": "true"});
            let terms = object["webhooks"][0]["namespaceSelector"]["matchExpressions"]
                .as_array_mut()
                .expect("terms");
            if !terms.contains(&term) {
                terms.push(term.clone());
            }
        }
        assert!(reconciler.reconcile().await);
    }
    assert_eq!(patches(), yields::BOUND, "bounded: then the reconciler settles");
    let object = api.objects.lock().unwrap()[VALIDATING_PATH].clone();
    assert_eq!(
        object["metadata"]["annotations"]["admissions.enforcer/disabled"], "true",
        "not stripped"
    );
    let text = metrics.encode();
    assert_contains(
        &text,
        r#"pod_director_webhook_reconcile_yields_total{entry="enforce.validate.pd.pod-director.io",field="namespaceSelector"} 1"#,
    );
    assert_contains(&text, "pod_director_webhook_reconcile_yielded 1");
    // The other writer is gone and the term removed by hand: in step, nothing left to another writer.
    let want = namespace_selectors(&config(ENTRY_GROUPS), &BTreeSet::new());
    api.objects.lock().unwrap().get_mut(VALIDATING_PATH).expect("stored")["webhooks"][0]["namespaceSelector"] =
        serde_json::to_value(&want[&PodEntry::Enforce]).unwrap();
    assert!(reconciler.reconcile().await);
    assert_contains(&metrics.encode(), "pod_director_webhook_reconcile_yielded 0");
}
