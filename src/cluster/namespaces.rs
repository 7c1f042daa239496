//! Namespace labels: which group a pod's namespace selects.
//!
//! In a cluster, [`KubeNamespaces`] keeps a reflector of namespace *metadata*
//! (a metadata-only watch; managedFields stripped, and every annotation but the in-tree plugins'
//! three, [`in_tree::ANNOTATIONS`]) and is
//! ready after the first full list. A cache miss — a namespace created a moment
//! before its first pod — falls back to a live metadata GET. When neither
//! answers, [`lookup`] fails and the webhook replies 503, so the API server
//! applies the webhook's failurePolicy.
//!
//! Live GETs are bounded so that a burst of reviews naming a namespace the
//! cache has not seen costs the API server one request, not one per review:
//! concurrent lookups of the same name share one GET in flight, and a "not
//! found" answer is remembered for [`ABSENT_TTL`] (forgotten as soon as the
//! reflector sees the namespace; the cache is always read first). Each GET is
//! bounded by [`LIVE_GET_TIMEOUT`].

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use futures::future::{BoxFuture, FutureExt as _, Shared};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, ResourceExt as _};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio_util::task::AbortOnDropHandle;
use tracing::{debug, info, warn};

use crate::metrics::{gauge, register};
use pod_director_engine::in_tree;

/// A namespace's labels.
pub type Labels = BTreeMap<String, String>;

/// What admission reads of a namespace: its labels, and the in-tree plugins' annotations
/// ([`in_tree::ANNOTATIONS`], the others left out).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceData {
    pub labels: Labels,
    pub annotations: Labels,
}

impl From<Labels> for NamespaceData {
    fn from(labels: Labels) -> Self {
        Self {
            labels,
            annotations: Labels::new(),
        }
    }
}

impl NamespaceData {
    /// A namespace's metadata as admission keeps it: the in-tree plugins' annotations only.
    pub(crate) fn of(labels: Option<Labels>, annotations: Option<&Labels>) -> Self {
        let annotations = annotations
            .into_iter()
            .flatten()
            .filter(|(key, _)| in_tree::ANNOTATIONS.contains(&key.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Self {
            labels: labels.unwrap_or_default(),
            annotations,
        }
    }
}

/// Why a namespace's labels could not be determined.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    #[error("namespace {name} is not in the cache and the API server did not answer: {source}")]
    Api {
        name: String,
        /// Shared by every review that waited on the same GET.
        #[source]
        source: Arc<kube::Error>,
    },
    #[error("namespace {name} is not in the cache and the API server did not answer within {timeout:?}")]
    Timeout { name: String, timeout: Duration },
    #[error("namespace {name} is not in the cache and cannot be fetched: {reason}")]
    Unavailable { name: String, reason: String },
}

/// Where namespace labels (and the in-tree plugins' annotations) come from.
pub trait NamespaceSource: Send + Sync + 'static {
    /// The namespace from the local cache; `None` on a miss.
    fn cached(&self, name: &str) -> Option<NamespaceData>;
    /// A live read for a namespace the cache has not seen; `Ok(None)` when it does not exist.
    fn fetch<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<NamespaceData>, LookupError>>;
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

/// Namespace `name`: from the cache, else from a live read.
/// A namespace that does not exist has no labels and no annotations.
pub(crate) async fn lookup(source: &dyn NamespaceSource, name: &str) -> Result<NamespaceData, LookupError> {
    if let Some(found) = source.cached(name) {
        return Ok(found);
    }
    debug!(
        namespace = name,
        "namespace not cached yet, reading it from the API server"
    );
    match source.fetch(name).await? {
        Some(found) => Ok(found),
        None => {
            warn!(namespace = name, "namespace does not exist; treating it as unlabelled");
            Ok(NamespaceData::default())
        }
    }
}

type NamespaceMeta = PartialObjectMeta<Namespace>;

/// How long a live GET's "not found" is remembered (unless the reflector sees the namespace first).
pub(crate) const ABSENT_TTL: Duration = Duration::from_secs(5);
/// Longest wait for one live GET.
pub(crate) const LIVE_GET_TIMEOUT: Duration = Duration::from_secs(5);
/// Most "not found" answers remembered at once (reviews can name any namespace).
const ABSENT_MAX: usize = 4096;

/// What a live GET answers: the namespace, `None` when it does not exist.
type Fetched = Result<Option<NamespaceData>, Arc<FetchError>>;

/// A failed live GET, shared by its waiters.
#[derive(Debug)]
enum FetchError {
    Api(Arc<kube::Error>),
    Timeout,
}

/// Live GETs: one in flight per name, "not found" remembered briefly.
#[derive(Default)]
struct LiveLookups {
    in_flight: Mutex<HashMap<String, Shared<BoxFuture<'static, Fetched>>>>,
    /// Names the API server said do not exist, until when.
    absent: Mutex<HashMap<String, Instant>>,
}

impl LiveLookups {
    /// Whether `name` was found absent less than [`ABSENT_TTL`] ago.
    fn known_absent(&self, name: &str) -> bool {
        let Ok(mut absent) = self.absent.lock() else {
            return false;
        };
        match absent.get(name) {
            Some(until) if *until > Instant::now() => true,
            Some(_) => {
                absent.remove(name);
                false
            }
            None => false,
        }
    }

    fn remember_absent(&self, name: &str) {
        if let Ok(mut absent) = self.absent.lock() {
            if absent.len() >= ABSENT_MAX {
                let now = Instant::now();
                absent.retain(|_, until| *until > now);
                if absent.len() >= ABSENT_MAX {
                    absent.clear();
                }
            }
            absent.insert(name.to_owned(), Instant::now() + ABSENT_TTL);
        }
    }

    /// Forgets that `name` was absent (the reflector has seen it).
    fn forget_absent(&self, name: &str) {
        if let Ok(mut absent) = self.absent.lock() {
            absent.remove(name);
        }
    }

    /// The GET of `name` in flight, or a new one started with `get`.
    fn join_or_start(
        self: &Arc<Self>,
        name: &str,
        get: impl FnOnce() -> BoxFuture<'static, Result<Option<NamespaceData>, kube::Error>>,
    ) -> Shared<BoxFuture<'static, Fetched>> {
        let Ok(mut in_flight) = self.in_flight.lock() else {
            return futures::future::ready(Err(Arc::new(FetchError::Timeout)))
                .boxed()
                .shared();
        };
        if let Some(shared) = in_flight.get(name) {
            return shared.clone();
        }
        let lookups = self.clone();
        let owned = name.to_owned();
        let request = get();
        // A task of its own: the GET finishes (bounded) even when every review waiting on it gave up.
        let task = tokio::spawn(async move {
            let fetched = match tokio::time::timeout(LIVE_GET_TIMEOUT, request).await {
                Ok(Ok(found)) => Ok(found),
                Ok(Err(err)) => Err(Arc::new(FetchError::Api(Arc::new(err)))),
                Err(_) => Err(Arc::new(FetchError::Timeout)),
            };
            if matches!(fetched, Ok(None)) {
                lookups.remember_absent(&owned);
            }
            if let Ok(mut in_flight) = lookups.in_flight.lock() {
                in_flight.remove(&owned);
            }
            fetched
        });
        let shared = task
            .map(|joined| joined.unwrap_or_else(|_| Err(Arc::new(FetchError::Timeout))))
            .boxed()
            .shared();
        in_flight.insert(name.to_owned(), shared.clone());
        shared
    }
}

/// Namespace labels from the Kubernetes API: a reflector plus live GETs.
pub(crate) struct KubeNamespaces {
    store: Store<NamespaceMeta>,
    api: Api<Namespace>,
    ready: Arc<AtomicBool>,
    lookups: Arc<LiveLookups>,
    /// The watch, stopped when the source is dropped.
    _task: Option<AbortOnDropHandle<()>>,
}

impl KubeNamespaces {
    /// Starts the metadata-only reflector (in a task, until dropped).
    pub(crate) fn start(client: Client) -> Self {
        let (store, writer) = reflector::store::<NamespaceMeta>();
        let ready = Arc::new(AtomicBool::new(false));
        let stream = watcher(Api::<NamespaceMeta>::all(client.clone()), watcher::Config::default())
            .default_backoff()
            .modify(|ns| {
                ns.managed_fields_mut().clear();
                ns.annotations_mut()
                    .retain(|key, _| in_tree::ANNOTATIONS.contains(&key.as_str()));
            })
            .reflect(writer);
        let reader = store.clone();
        let synced = ready.clone();
        let lookups = Arc::new(LiveLookups::default());
        let seen = lookups.clone();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::InitDone) => {
                        if !synced.swap(true, Ordering::SeqCst) {
                            info!(namespaces = reader.len(), "namespace cache synced");
                        }
                    }
                    Ok(watcher::Event::Apply(ns) | watcher::Event::InitApply(ns)) => {
                        seen.forget_absent(&ns.name_any());
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
            lookups,
            _task: Some(AbortOnDropHandle::new(task)),
        }
    }

    /// A source reading `store` (fed by someone else) and fetching misses through `client`.
    #[cfg(test)]
    pub(crate) fn with_store(store: Store<NamespaceMeta>, client: Client) -> Self {
        Self {
            store,
            api: Api::all(client),
            ready: Arc::new(AtomicBool::new(true)),
            lookups: Arc::default(),
            _task: None,
        }
    }
}

impl NamespaceSource for KubeNamespaces {
    fn cached(&self, name: &str) -> Option<NamespaceData> {
        self.store
            .get(&ObjectRef::new(name))
            .map(|ns| NamespaceData::of(ns.metadata.labels.clone(), ns.metadata.annotations.as_ref()))
    }

    fn fetch<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<NamespaceData>, LookupError>> {
        Box::pin(async move {
            if let Some(reason) = pod_director_engine::syntax::dns1123_label(name) {
                // Never put into a URL; admission refuses such names before looking them up.
                return Err(LookupError::Unavailable {
                    name: name.to_owned(),
                    reason: format!("not a namespace name: it {reason}"),
                });
            }
            if self.lookups.known_absent(name) {
                debug!(
                    namespace = name,
                    "namespace was not found a moment ago; not asking again"
                );
                return Ok(None);
            }
            let api = self.api.clone();
            let owned = name.to_owned();
            let get = move || {
                async move {
                    let found = api.get_metadata_opt(&owned).await?;
                    Ok(found.map(|ns| NamespaceData::of(ns.metadata.labels, ns.metadata.annotations.as_ref())))
                }
                .boxed()
            };
            self.lookups
                .join_or_start(name, get)
                .await
                .map_err(|err| match err.as_ref() {
                    FetchError::Api(source) => LookupError::Api {
                        name: name.to_owned(),
                        source: source.clone(),
                    },
                    FetchError::Timeout => LookupError::Timeout {
                        name: name.to_owned(),
                        timeout: LIVE_GET_TIMEOUT,
                    },
                })
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

/// `pod_director_namespace_cache_size`.
#[derive(Debug, Clone)]
pub struct NamespaceMetrics {
    cache_size: Gauge,
}

impl NamespaceMetrics {
    pub fn register(r: &mut Registry) -> Self {
        let cache_size = register(
            r,
            "namespace_cache_size",
            "Namespaces held in the namespace cache",
            Gauge::default(),
        );
        Self { cache_size }
    }

    pub fn set_namespace_cache_size(&self, size: usize) {
        self.cache_size.set(gauge(size));
    }
}

#[cfg(test)]
mod tests;
