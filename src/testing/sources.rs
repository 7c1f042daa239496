//! In-memory namespace and node sources: what the tests and benchmarks give the
//! admission path instead of the Kubernetes API.

use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::BoxFuture;

use crate::cluster::namespaces::{Labels, LookupError, NamespaceData, NamespaceSource};
use crate::cluster::nodes::{NodeLookupError, NodeSource, NodeStore};
use pod_director_engine::placement::NodeInfo;

/// The "API server" of an in-memory source: what only a live read finds (to exercise the
/// fallback), whether it answers, and whether the cache has synced.
#[derive(Debug)]
struct Remote<T> {
    found: RwLock<HashMap<String, T>>,
    unreachable: AtomicBool,
    ready: AtomicBool,
}

impl<T> Default for Remote<T> {
    fn default() -> Self {
        Self {
            found: RwLock::default(),
            unreachable: AtomicBool::new(false),
            ready: AtomicBool::new(true),
        }
    }
}

impl<T: Clone + Send + 'static> Remote<T> {
    fn insert(&self, name: String, value: T) {
        if let Ok(mut map) = self.found.write() {
            map.insert(name, value);
        }
    }

    /// The live read of `name`; `unavailable(name, reason)` when the API server is "down".
    fn fetch<E: Send + 'static>(
        &self,
        name: &str,
        unavailable: fn(String, String) -> E,
    ) -> BoxFuture<'static, Result<Option<T>, E>> {
        let result = if self.unreachable.load(Ordering::SeqCst) {
            Err(unavailable(name.to_owned(), "the API server is unreachable".to_owned()))
        } else {
            Ok(self.found.read().ok().and_then(|m| m.get(name).cloned()))
        };
        Box::pin(std::future::ready(result))
    }
}

/// Namespaces held in memory.
#[derive(Debug, Default)]
pub struct StaticNamespaces {
    namespaces: RwLock<HashMap<String, NamespaceData>>,
    remote: Remote<NamespaceData>,
}

impl StaticNamespaces {
    pub fn new() -> Self {
        Self::default()
    }

    /// Puts a namespace in the cache.
    pub fn insert(&self, name: &str, labels: Labels) {
        self.insert_annotated(name, labels, Labels::new());
    }

    /// Puts a namespace with annotations in the cache (those admission keeps: the in-tree plugins').
    pub fn insert_annotated(&self, name: &str, labels: Labels, annotations: Labels) {
        if let Ok(mut map) = self.namespaces.write() {
            map.insert(name.to_owned(), NamespaceData::of(Some(labels), Some(&annotations)));
        }
    }

    /// Puts a namespace where only the live read finds it.
    pub fn insert_remote(&self, name: &str, labels: Labels) {
        self.remote.insert(name.to_owned(), NamespaceData::from(labels));
    }

    /// Makes live reads fail, as if the API server were down.
    pub fn set_unreachable(&self, unreachable: bool) {
        self.remote.unreachable.store(unreachable, Ordering::SeqCst);
    }

    pub fn set_ready(&self, ready: bool) {
        self.remote.ready.store(ready, Ordering::SeqCst);
    }
}

impl NamespaceSource for StaticNamespaces {
    fn cached(&self, name: &str) -> Option<NamespaceData> {
        self.namespaces.read().ok()?.get(name).cloned()
    }

    fn fetch<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<NamespaceData>, LookupError>> {
        self.remote
            .fetch(name, |name, reason| LookupError::Unavailable { name, reason })
    }

    fn is_ready(&self) -> bool {
        self.remote.ready.load(Ordering::SeqCst)
    }

    fn cached_count(&self) -> usize {
        self.namespaces.read().map(|m| m.len()).unwrap_or(0)
    }

    fn label_values(&self, key: &str) -> Vec<(String, String)> {
        let Ok(map) = self.namespaces.read() else {
            return Vec::new();
        };
        map.iter()
            .filter_map(|(name, found)| Some((name.clone(), found.labels.get(key)?.clone())))
            .collect()
    }
}

/// Nodes held in memory.
#[derive(Debug, Default)]
pub struct StaticNodes {
    store: NodeStore,
    remote: Remote<NodeInfo>,
}

impl StaticNodes {
    pub fn new() -> Self {
        Self::default()
    }

    /// Puts a node in the cache.
    pub fn insert(&self, node: NodeInfo) {
        self.store.apply(node);
    }

    pub fn remove(&self, name: &str) {
        self.store.delete(name);
    }

    /// Puts a node where only the live read finds it.
    pub fn insert_remote(&self, node: NodeInfo) {
        self.remote.insert(node.name.to_string(), node);
    }

    /// Makes live reads fail, as if the API server were down.
    pub fn set_unreachable(&self, unreachable: bool) {
        self.remote.unreachable.store(unreachable, Ordering::SeqCst);
    }

    pub fn set_ready(&self, ready: bool) {
        self.remote.ready.store(ready, Ordering::SeqCst);
    }
}

impl NodeSource for StaticNodes {
    fn store(&self) -> &NodeStore {
        &self.store
    }

    fn fetch<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<NodeInfo>, NodeLookupError>> {
        self.remote
            .fetch(name, |name, reason| NodeLookupError::Unavailable { name, reason })
    }

    fn is_ready(&self) -> bool {
        self.remote.ready.load(Ordering::SeqCst)
    }
}
