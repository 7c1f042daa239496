//! In-memory namespace and node sources: what the tests and benchmarks give the
//! admission path instead of the Kubernetes API.

use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::BoxFuture;

use crate::namespaces::{Labels, LookupError, NamespaceSource};
use crate::nodes::{NodeLookupError, NodeSource, NodeStore};
use crate::placement::NodeInfo;

/// Namespaces held in memory.
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

/// Nodes held in memory.
#[derive(Debug)]
pub struct StaticNodes {
    store: NodeStore,
    /// Nodes that only a "live read" finds (to exercise the fallback).
    remote: RwLock<HashMap<String, NodeInfo>>,
    unreachable: AtomicBool,
    ready: AtomicBool,
}

impl Default for StaticNodes {
    fn default() -> Self {
        Self {
            store: NodeStore::new(),
            remote: RwLock::default(),
            unreachable: AtomicBool::new(false),
            ready: AtomicBool::new(true),
        }
    }
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
        if let Ok(mut map) = self.remote.write() {
            map.insert(node.name.to_string(), node);
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

impl NodeSource for StaticNodes {
    fn store(&self) -> &NodeStore {
        &self.store
    }

    fn fetch<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<NodeInfo>, NodeLookupError>> {
        let result = if self.unreachable.load(Ordering::SeqCst) {
            Err(NodeLookupError::Unavailable {
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
}
