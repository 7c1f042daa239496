use http::{Request, Response, StatusCode};
use kube::client::Body;
use kube::runtime::watcher::Event;

use super::*;
use crate::testing::StaticNamespaces;
use pod_director_engine::testing::assert_contains;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn namespace_meta(name: &str, group: &str) -> NamespaceMeta {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadata",
        "metadata": {"name": name, "labels": {"pod-director/group": group}}
    }))
    .expect("valid PartialObjectMetadata")
}

/// A kube client whose "API server" answers GET /api/v1/namespaces/{name} from a table.
fn fake_client(known: &'static [(&'static str, &'static str)], seen: Arc<Mutex<Vec<String>>>) -> Client {
    slow_fake_client(known, seen, Duration::ZERO)
}

/// [`fake_client`] taking `delay` to answer each request.
fn slow_fake_client(
    known: &'static [(&'static str, &'static str)],
    seen: Arc<Mutex<Vec<String>>>,
    delay: Duration,
) -> Client {
    let service = tower::service_fn(move |req: Request<Body>| {
        let seen = seen.clone();
        async move {
            tokio::time::sleep(delay).await;
            let path = req.uri().path().to_owned();
            let accept = req
                .headers()
                .get(http::header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            if let Ok(mut seen) = seen.lock() {
                seen.push(format!("{} {path} accept={accept}", req.method()));
            }
            let name = path.trim_start_matches("/api/v1/namespaces/");
            let (status, body) = match known.iter().find(|(n, _)| *n == name) {
                _ if name == "explode" => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    serde_json::json!({
                        "kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "message": "etcd is on fire", "reason": "InternalError", "code": 500
                    }),
                ),
                Some((n, group)) => (
                    StatusCode::OK,
                    serde_json::to_value(namespace_meta(n, group)).unwrap_or_default(),
                ),
                None => (
                    StatusCode::NOT_FOUND,
                    serde_json::json!({
                        "kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "message": format!("namespaces \"{name}\" not found"), "reason": "NotFound", "code": 404
                    }),
                ),
            };
            let body = serde_json::to_vec(&body).unwrap_or_default();
            Response::builder()
                .status(status)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Body::from(body))
        }
    });
    Client::new(service, "default")
}

#[tokio::test]
async fn a_namespace_in_the_reflector_store_is_answered_without_an_api_call() {
    let (store, mut writer) = reflector::store::<NamespaceMeta>();
    writer.apply_watcher_event(&Event::Apply(namespace_meta("team-ci", "ci")));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let source = KubeNamespaces::with_store(store, fake_client(&[], seen.clone()));

    let found = lookup(&source, "team-ci").await.expect("cached");

    assert_eq!(found.labels, labels(&[("pod-director/group", "ci")]));
    assert!(seen.lock().map(|s| s.is_empty()).unwrap_or(false));
    assert_eq!(source.cached_count(), 1);
}

#[tokio::test]
async fn a_namespace_missing_from_the_store_is_fetched_with_a_metadata_only_get() {
    let (store, _writer) = reflector::store::<NamespaceMeta>();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let source = KubeNamespaces::with_store(store, fake_client(&[("brand-new", "gpu")], seen.clone()));

    let found = lookup(&source, "brand-new").await.expect("fetched");

    assert_eq!(found.labels, labels(&[("pod-director/group", "gpu")]));
    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].starts_with("GET /api/v1/namespaces/brand-new"), "{seen:?}");
    assert!(seen[0].contains("as=PartialObjectMetadata"), "{seen:?}");
}

#[tokio::test]
async fn a_namespace_that_does_not_exist_has_no_labels() {
    let (store, _writer) = reflector::store::<NamespaceMeta>();
    let source = KubeNamespaces::with_store(store, fake_client(&[], Arc::default()));
    assert_eq!(
        lookup(&source, "ghost").await.expect("not found is not an error"),
        NamespaceData::default()
    );
}

#[tokio::test]
async fn an_api_server_error_on_a_cache_miss_is_a_lookup_error() {
    let (store, _writer) = reflector::store::<NamespaceMeta>();
    let source = KubeNamespaces::with_store(store, fake_client(&[], Arc::default()));
    let err = lookup(&source, "explode").await.expect_err("500 is an error");
    assert!(matches!(err, LookupError::Api { .. }), "{err}");
    assert_contains(&err.to_string(), "explode");
}

fn gets(seen: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
    seen.lock().map(|s| s.clone()).unwrap_or_default()
}

#[tokio::test]
async fn a_hundred_reviews_of_one_unknown_namespace_cost_one_get() {
    let (store, _writer) = reflector::store::<NamespaceMeta>();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let client = slow_fake_client(&[], seen.clone(), Duration::from_millis(100));
    let source = KubeNamespaces::with_store(store, client);

    let concurrent = futures::future::join_all((0..100).map(|_| lookup(&source, "ghost"))).await;
    assert!(
        concurrent
            .iter()
            .all(|found| found.as_ref().is_ok_and(|found| found.labels.is_empty()))
    );
    assert_eq!(
        gets(&seen).len(),
        1,
        "one GET shared by 100 concurrent lookups: {:?}",
        gets(&seen)
    );

    for _ in 0..100 {
        assert_eq!(lookup(&source, "ghost").await.ok(), Some(NamespaceData::default()));
    }
    assert_eq!(gets(&seen).len(), 1, "\"not found\" is remembered: {:?}", gets(&seen));
}

#[tokio::test]
async fn concurrent_lookups_of_a_new_namespace_share_one_get_and_all_get_its_labels() {
    let (store, _writer) = reflector::store::<NamespaceMeta>();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let client = slow_fake_client(&[("brand-new", "gpu")], seen.clone(), Duration::from_millis(100));
    let source = KubeNamespaces::with_store(store, client);
    let found = futures::future::join_all((0..50).map(|_| lookup(&source, "brand-new"))).await;
    for labels in found {
        assert_eq!(labels.ok().map(|found| found.labels), Some(labels_of("gpu")));
    }
    assert_eq!(gets(&seen).len(), 1);
}

fn labels_of(group: &str) -> Labels {
    labels(&[("pod-director/group", group)])
}

#[tokio::test]
async fn a_namespace_found_absent_is_answered_from_the_cache_once_the_reflector_sees_it() {
    let (store, mut writer) = reflector::store::<NamespaceMeta>();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let source = KubeNamespaces::with_store(store, fake_client(&[], seen.clone()));
    assert_eq!(lookup(&source, "late").await.ok(), Some(NamespaceData::default()));
    writer.apply_watcher_event(&Event::Apply(namespace_meta("late", "ci")));
    assert_eq!(lookup(&source, "late").await.ok(), Some(labels_of("ci").into()));
    assert_eq!(gets(&seen).len(), 1, "the cache answers, not the remembered absence");

    let lookups = LiveLookups::default();
    lookups.remember_absent("late");
    assert!(lookups.known_absent("late"));
    lookups.forget_absent("late");
    assert!(!lookups.known_absent("late"), "forgotten when the reflector sees it");
}

#[tokio::test]
async fn failed_gets_are_not_remembered() {
    let (store, _writer) = reflector::store::<NamespaceMeta>();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let source = KubeNamespaces::with_store(store, fake_client(&[], seen.clone()));
    assert!(lookup(&source, "explode").await.is_err());
    assert!(lookup(&source, "explode").await.is_err());
    assert_eq!(gets(&seen).len(), 2, "an error is retried by the next review");
}

#[tokio::test]
async fn a_name_that_is_not_a_namespace_name_never_reaches_the_api_url() {
    let (store, _writer) = reflector::store::<NamespaceMeta>();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let source = KubeNamespaces::with_store(store, fake_client(&[], seen.clone()));
    for name in ["ns/status", "ns#x", "..", "ns?watch=true"] {
        let err = lookup(&source, name).await.expect_err("refused");
        assert!(err.to_string().contains("not a namespace name"), "{err}");
    }
    assert!(gets(&seen).is_empty(), "{:?}", gets(&seen));
}

#[tokio::test]
async fn static_namespaces_fall_back_to_their_remote_table_and_can_be_made_unreachable() {
    let source = StaticNamespaces::new();
    source.insert("cached", labels(&[("g", "a")]));
    source.insert_remote("remote", labels(&[("g", "b")]));
    assert_eq!(lookup(&source, "cached").await.ok(), Some(labels(&[("g", "a")]).into()));
    assert_eq!(lookup(&source, "remote").await.ok(), Some(labels(&[("g", "b")]).into()));
    source.set_unreachable(true);
    assert_eq!(lookup(&source, "cached").await.ok(), Some(labels(&[("g", "a")]).into()));
    assert!(lookup(&source, "remote").await.is_err());
}

#[test]
fn the_in_tree_plugins_annotations_are_kept_and_no_other() {
    let annotations = labels(&[
        (in_tree::NODE_SELECTOR_ANNOTATION, "pool=team"),
        (in_tree::TOLERATIONS_WHITELIST_ANNOTATION, "[]"),
        ("kubectl.kubernetes.io/last-applied-configuration", "{}"),
    ]);
    let kept = NamespaceData::of(Some(labels(&[("g", "a")])), Some(&annotations));
    assert_eq!(
        kept.annotations,
        labels(&[
            (in_tree::NODE_SELECTOR_ANNOTATION, "pool=team"),
            (in_tree::TOLERATIONS_WHITELIST_ANNOTATION, "[]"),
        ])
    );
    assert_eq!(kept.labels, labels(&[("g", "a")]));
}
