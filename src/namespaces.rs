//! Namespace labels: which group a pod's namespace selects.
//!
//! In a cluster, [`KubeNamespaces`] keeps a reflector of namespace *metadata*
//! (a metadata-only watch; managedFields and annotations stripped) and is
//! ready after the first full list. A cache miss — a namespace created a moment
//! before its first pod — falls back to a live metadata GET. When neither
//! answers, [`lookup`] fails and the webhook replies 503, so the API server
//! applies the webhook's failurePolicy.
//!
//! Tests and local runs use [`StaticNamespaces`] through the same
//! [`NamespaceSource`] trait.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use futures::StreamExt as _;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, ResourceExt as _};
use tracing::{debug, info, warn};

/// A namespace's labels.
pub type Labels = BTreeMap<String, String>;

/// Why a namespace's labels could not be determined.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    #[error("namespace {name} is not in the cache and the API server did not answer: {source}")]
    Api {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("namespace {name} is not in the cache and cannot be fetched: {reason}")]
    Unavailable { name: String, reason: String },
}

/// Where namespace labels come from.
pub trait NamespaceSource: Send + Sync + 'static {
    /// Labels from the local cache; `None` on a miss.
    fn cached(&self, name: &str) -> Option<Labels>;
    /// A live read for a namespace the cache has not seen; `Ok(None)` when it does not exist.
    fn fetch<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Labels>, LookupError>>;
    /// Whether the cache has completed its first full list.
    fn is_ready(&self) -> bool;
    /// How many namespaces the cache holds.
    fn cached_count(&self) -> usize;
    /// `(namespace, value)` of every cached namespace carrying label `key`.
    fn label_values(&self, key: &str) -> Vec<(String, String)> {
        let _ = key;
        Vec::new()
    }
}

/// The labels of namespace `name`: from the cache, else from a live read.
/// A namespace that does not exist has no labels.
pub async fn lookup(source: &dyn NamespaceSource, name: &str) -> Result<Labels, LookupError> {
    if let Some(labels) = source.cached(name) {
        return Ok(labels);
    }
    debug!(
        namespace = name,
        "namespace not cached yet, reading it from the API server"
    );
    match source.fetch(name).await? {
        Some(labels) => Ok(labels),
        None => {
            warn!(namespace = name, "namespace does not exist; treating it as unlabelled");
            Ok(Labels::new())
        }
    }
}

type NamespaceMeta = PartialObjectMeta<Namespace>;

/// Namespace labels from the Kubernetes API: a reflector plus live GETs.
pub struct KubeNamespaces {
    store: Store<NamespaceMeta>,
    api: Api<Namespace>,
    ready: Arc<AtomicBool>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl KubeNamespaces {
    /// Starts the metadata-only reflector (in a task, until dropped).
    pub fn start(client: Client) -> Self {
        let (store, writer) = reflector::store::<NamespaceMeta>();
        let ready = Arc::new(AtomicBool::new(false));
        let stream = watcher(Api::<NamespaceMeta>::all(client.clone()), watcher::Config::default())
            .default_backoff()
            .modify(|ns| {
                ns.managed_fields_mut().clear();
                ns.annotations_mut().clear();
            })
            .reflect(writer);
        let reader = store.clone();
        let synced = ready.clone();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::InitDone) => {
                        if !synced.swap(true, Ordering::SeqCst) {
                            info!(namespaces = reader.len(), "namespace cache synced");
                        }
                    }
                    Ok(_) => {}
                    Err(err) => {
                        warn!(error = %err, "namespace watch failed; retrying with backoff");
                    }
                }
            }
        });
        Self {
            store,
            api: Api::all(client),
            ready,
            task: Some(task),
        }
    }

    /// A source reading `store` (fed by someone else) and fetching misses through `client`.
    pub fn with_store(store: Store<NamespaceMeta>, client: Client) -> Self {
        Self {
            store,
            api: Api::all(client),
            ready: Arc::new(AtomicBool::new(true)),
            task: None,
        }
    }
}

impl Drop for KubeNamespaces {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

impl NamespaceSource for KubeNamespaces {
    fn cached(&self, name: &str) -> Option<Labels> {
        self.store
            .get(&ObjectRef::new(name))
            .map(|ns| ns.metadata.labels.clone().unwrap_or_default())
    }

    fn fetch<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Labels>, LookupError>> {
        Box::pin(async move {
            let found = self
                .api
                .get_metadata_opt(name)
                .await
                .map_err(|source| LookupError::Api {
                    name: name.to_owned(),
                    source,
                })?;
            Ok(found.map(|ns| ns.metadata.labels.unwrap_or_default()))
        })
    }

    fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    fn cached_count(&self) -> usize {
        self.store.len()
    }

    fn label_values(&self, key: &str) -> Vec<(String, String)> {
        self.store
            .state()
            .iter()
            .filter_map(|ns| {
                let value = ns.metadata.labels.as_ref()?.get(key)?;
                Some((ns.name_any(), value.clone()))
            })
            .collect()
    }
}

/// Namespaces held in memory: for tests and for running without a cluster.
#[derive(Debug)]
pub struct StaticNamespaces {
    namespaces: RwLock<HashMap<String, Labels>>,
    /// Namespaces that only a "live read" finds (to exercise the fallback).
    remote: RwLock<HashMap<String, Labels>>,
    unreachable: AtomicBool,
    ready: AtomicBool,
}

impl Default for StaticNamespaces {
    fn default() -> Self {
        Self {
            namespaces: RwLock::default(),
            remote: RwLock::default(),
            unreachable: AtomicBool::new(false),
            ready: AtomicBool::new(true),
        }
    }
}

impl StaticNamespaces {
    pub fn new() -> Self {
        Self::default()
    }

    /// Puts a namespace in the cache.
    pub fn insert(&self, name: &str, labels: Labels) {
        if let Ok(mut map) = self.namespaces.write() {
            map.insert(name.to_owned(), labels);
        }
    }

    /// Puts a namespace where only the live read finds it.
    pub fn insert_remote(&self, name: &str, labels: Labels) {
        if let Ok(mut map) = self.remote.write() {
            map.insert(name.to_owned(), labels);
        }
    }

    /// Makes live reads fail, as if the API server were down.
    pub fn set_unreachable(&self, unreachable: bool) {
        self.unreachable.store(unreachable, Ordering::SeqCst);
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }
}

impl NamespaceSource for StaticNamespaces {
    fn cached(&self, name: &str) -> Option<Labels> {
        self.namespaces.read().ok()?.get(name).cloned()
    }

    fn fetch<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Labels>, LookupError>> {
        let result = if self.unreachable.load(Ordering::SeqCst) {
            Err(LookupError::Unavailable {
                name: name.to_owned(),
                reason: "the API server is unreachable".to_owned(),
            })
        } else {
            Ok(self.remote.read().ok().and_then(|m| m.get(name).cloned()))
        };
        Box::pin(std::future::ready(result))
    }

    fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    fn cached_count(&self) -> usize {
        self.namespaces.read().map(|m| m.len()).unwrap_or(0)
    }

    fn label_values(&self, key: &str) -> Vec<(String, String)> {
        let Ok(map) = self.namespaces.read() else {
            return Vec::new();
        };
        map.iter()
            .filter_map(|(name, labels)| Some((name.clone(), labels.get(key)?.clone())))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use http::{Request, Response, StatusCode};
    use kube::client::Body;
    use kube::runtime::watcher::Event;

    use super::*;

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
        let service = tower::service_fn(move |req: Request<Body>| {
            let seen = seen.clone();
            async move {
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

        assert_eq!(found, labels(&[("pod-director/group", "ci")]));
        assert!(seen.lock().map(|s| s.is_empty()).unwrap_or(false));
        assert_eq!(source.cached_count(), 1);
    }

    #[tokio::test]
    async fn a_namespace_missing_from_the_store_is_fetched_with_a_metadata_only_get() {
        let (store, _writer) = reflector::store::<NamespaceMeta>();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let source = KubeNamespaces::with_store(store, fake_client(&[("brand-new", "gpu")], seen.clone()));

        let found = lookup(&source, "brand-new").await.expect("fetched");

        assert_eq!(found, labels(&[("pod-director/group", "gpu")]));
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
            Labels::new()
        );
    }

    #[tokio::test]
    async fn an_api_server_error_on_a_cache_miss_is_a_lookup_error() {
        let (store, _writer) = reflector::store::<NamespaceMeta>();
        let source = KubeNamespaces::with_store(store, fake_client(&[], Arc::default()));
        let err = lookup(&source, "explode").await.expect_err("500 is an error");
        assert!(matches!(err, LookupError::Api { .. }), "{err}");
        assert!(err.to_string().contains("explode"));
    }

    #[tokio::test]
    async fn static_namespaces_fall_back_to_their_remote_table_and_can_be_made_unreachable() {
        let source = StaticNamespaces::new();
        source.insert("cached", labels(&[("g", "a")]));
        source.insert_remote("remote", labels(&[("g", "b")]));
        assert_eq!(lookup(&source, "cached").await.ok(), Some(labels(&[("g", "a")])));
        assert_eq!(lookup(&source, "remote").await.ok(), Some(labels(&[("g", "b")])));
        source.set_unreachable(true);
        assert_eq!(lookup(&source, "cached").await.ok(), Some(labels(&[("g", "a")])));
        assert!(lookup(&source, "remote").await.is_err());
    }
}
