//! Nodes: labels, taints and cordons of the cluster's nodes, for feasibility
//! counts and the `spec.nodeName` check.
//!
//! In a cluster, [`KubeNodes`] watches Nodes and keeps, per node, only what
//! placement needs ([`NodeInfo`]: name, labels, `spec.taints`,
//! `spec.unschedulable`) — status, images, annotations and managed fields are
//! dropped as each object arrives, before anything is stored. It is ready after
//! the first full list (`/readyz` waits for it). A node that is not cached — one
//! created a moment ago — is read with a live GET, bounded by
//! [`FETCH_TIMEOUT`]: a 404 means the node does not exist, no answer makes the
//! lookup [`NodeLookup::Unavailable`].
//!
//! Every change of a node's placement-relevant data (not its heartbeats or
//! status) bumps a generation counter. [`Nodes`] memoises feasibility counts per
//! distinct placement (a hash of the placement-relevant parts of the pod) for
//! the current generation, so a review costs a hash and a map lookup however
//! many nodes there are; a new placement, or a change to the nodes, costs one
//! pass over them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use arc_swap::ArcSwap;
use futures::StreamExt as _;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::Api;
use kube::runtime::{WatchStreamExt as _, watcher};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio_util::task::AbortOnDropHandle;
use tracing::{debug, info, warn};

use crate::metrics::{GroupLabels, ResultLabels, gauge, register};
use pod_director_engine::config::Config;
use pod_director_engine::placement::PodSpec;
use pod_director_engine::placement::feasible::{self, NodeInfo, NodeLookup, NodeView, Placement};
use pod_director_engine::provision::{self, Provisioner};

/// Longest wait for the live GET of a node that is not cached.
pub(crate) const FETCH_TIMEOUT: Duration = Duration::from_secs(2);
/// Most distinct placements whose counts are memoised at once; the memo starts
/// over when it is full (or when the nodes change).
pub(crate) const MEMO_CAPACITY: usize = 4096;

/// Why a node could not be looked up.
#[derive(Debug, thiserror::Error)]
pub enum NodeLookupError {
    #[error("node {name} is not in the cache and the API server did not answer: {source}")]
    Api {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("node {name} is not in the cache and the API server did not answer within {timeout:?}")]
    Timeout { name: String, timeout: Duration },
    #[error("node {name} is not in the cache and cannot be fetched: {reason}")]
    Unavailable { name: String, reason: String },
}

/// The cached nodes and their generation.
#[derive(Debug, Default)]
pub struct NodeStore {
    nodes: RwLock<HashMap<Box<str>, Arc<NodeInfo>>>,
    generation: AtomicU64,
}

impl NodeStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Inserts or replaces a node; the generation changes only when its placement data does.
    pub fn apply(&self, node: NodeInfo) {
        let Ok(mut nodes) = self.nodes.write() else { return };
        if nodes.get(&node.name).is_some_and(|have| **have == node) {
            return;
        }
        nodes.insert(node.name.clone(), Arc::new(node));
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    pub fn delete(&self, name: &str) {
        let Ok(mut nodes) = self.nodes.write() else { return };
        if nodes.remove(name).is_some() {
            self.generation.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Replaces every node (a full list, after a watch restart).
    pub fn replace(&self, all: HashMap<Box<str>, Arc<NodeInfo>>) {
        let Ok(mut nodes) = self.nodes.write() else { return };
        *nodes = all;
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    pub fn get(&self, name: &str) -> Option<Arc<NodeInfo>> {
        self.nodes.read().ok()?.get(name).cloned()
    }

    pub fn len(&self) -> usize {
        self.nodes.read().map(|n| n.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Changes whenever a node's name, labels, taints or cordon change.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// How many nodes `keep` accepts, read under one lock.
    fn count_where(&self, keep: &dyn Fn(&NodeInfo) -> bool) -> Option<usize> {
        let nodes = self.nodes.read().ok()?;
        Some(nodes.values().filter(|n| keep(n)).count())
    }

    /// The generation and how many nodes are feasible for `placement`, read under one lock.
    fn count(&self, placement: &Placement<'_>) -> Option<(u64, usize)> {
        let nodes = self.nodes.read().ok()?;
        let generation = self.generation();
        Some((generation, feasible::count(placement, nodes.values().map(|n| &**n))))
    }
}

/// The provisioners read (Karpenter NodePools, Cluster API node groups), and a generation
/// that changes with them.
#[derive(Debug)]
pub struct ProvisionerStore {
    pools: ArcSwap<Vec<Arc<Provisioner>>>,
    generation: AtomicU64,
    /// Sources (resources watched) whose provisioners are not known yet.
    pending: AtomicUsize,
}

impl Default for ProvisionerStore {
    fn default() -> Self {
        Self::new()
    }
}

impl ProvisionerStore {
    /// No provisioners, ready: what a cluster without Karpenter or Cluster API has.
    pub fn new() -> Self {
        Self {
            pools: ArcSwap::from_pointee(Vec::new()),
            generation: AtomicU64::new(0),
            pending: AtomicUsize::new(0),
        }
    }

    /// A store filled once (`audit`, `explain`, tests).
    pub fn of(pools: Vec<Provisioner>) -> Self {
        let store = Self::new();
        store.replace_where(|_| true, pools);
        store
    }

    /// The provisioners now, sorted by name (a snapshot; cheap).
    pub fn pools(&self) -> Arc<Vec<Arc<Provisioner>>> {
        self.pools.load_full()
    }

    pub fn is_empty(&self) -> bool {
        self.pools.load().is_empty()
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Whether every source is known (listed, not served, or not readable).
    pub fn is_ready(&self) -> bool {
        self.pending.load(Ordering::SeqCst) == 0
    }

    /// `sources` more sources must become known before the store is ready.
    pub(crate) fn expect(&self, sources: usize) {
        self.pending.fetch_add(sources, Ordering::SeqCst);
    }

    /// One expected source is known (its watcher calls this once).
    pub(crate) fn known(&self) {
        let _ = self
            .pending
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    }

    /// Replaces the provisioners `mine` accepts (one source's) with `pools`.
    pub(crate) fn replace_where(&self, mine: impl Fn(&Provisioner) -> bool, pools: Vec<Provisioner>) {
        let mut all: Vec<Provisioner> = self
            .pools()
            .iter()
            .filter(|p| !mine(p))
            .map(|p| (**p).clone())
            .collect();
        all.extend(pools);
        all.sort_by(|a, b| a.name.cmp(&b.name));
        let current = self.pools.load();
        if current.len() == all.len() && current.iter().zip(&all).all(|(have, new)| **have == *new) {
            return;
        }
        self.pools.store(Arc::new(all.into_iter().map(Arc::new).collect()));
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Inserts or replaces one provisioner.
    pub(crate) fn apply(&self, pool: Provisioner) {
        let name = pool.name.clone();
        self.replace_where(|p| p.name == name, vec![pool]);
    }

    pub(crate) fn delete(&self, name: &str) {
        self.replace_where(|p| &*p.name == name, Vec::new());
    }
}

/// Where node data comes from.
pub trait NodeSource: Send + Sync + 'static {
    /// The cached nodes.
    fn store(&self) -> &NodeStore;
    /// A live read for a node the cache has not seen; `Ok(None)` when it does not exist.
    fn fetch<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<NodeInfo>, NodeLookupError>>;
    /// Whether the cache has completed its first full list.
    fn is_ready(&self) -> bool;
}

/// Memoised feasibility counts for one node generation.
#[derive(Debug, Default)]
struct Memo {
    generation: u64,
    counts: HashMap<u64, usize>,
}

/// Memoised provisioners for one NodePool generation.
#[derive(Debug, Default)]
struct ProvisionerMemo {
    generation: u64,
    found: HashMap<u64, Arc<[Box<str>]>>,
}

/// Node data for decisions: a [`NodeSource`] plus memoised feasibility counts, and the
/// NodePools that can create nodes on demand plus their memoised answers.
pub struct Nodes {
    source: Arc<dyn NodeSource>,
    memo: Mutex<Memo>,
    pools: Arc<ProvisionerStore>,
    provisioners: Mutex<ProvisionerMemo>,
    fetch_timeout: Duration,
}

impl std::fmt::Debug for Nodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nodes")
            .field("cached", &self.cached_count())
            .field("generation", &self.generation())
            .finish_non_exhaustive()
    }
}

impl Nodes {
    pub fn new(source: Arc<dyn NodeSource>) -> Self {
        Self {
            source,
            memo: Mutex::new(Memo::default()),
            pools: Arc::new(ProvisionerStore::new()),
            provisioners: Mutex::new(ProvisionerMemo::default()),
            fetch_timeout: FETCH_TIMEOUT,
        }
    }

    /// Counts these NodePools as provisioners.
    pub fn with_provisioners(mut self, pools: Arc<ProvisionerStore>) -> Self {
        self.pools = pools;
        self
    }

    /// The NodePools now.
    pub fn provisioners_read(&self) -> Arc<Vec<Arc<Provisioner>>> {
        self.pools.pools()
    }

    /// The provisioners remembered under `key` for the current NodePools, else those
    /// found for `spec()` (remembered when the NodePools did not change meanwhile).
    /// Without NodePools: empty, and `spec` is not called.
    pub fn provisioners(&self, key: u64, spec: &mut dyn FnMut() -> Option<PodSpec>) -> Arc<[Box<str>]> {
        if self.pools.is_empty() {
            return Arc::from([]);
        }
        let generation = self.pools.generation();
        if let Ok(mut memo) = self.provisioners.lock() {
            if memo.generation != generation {
                memo.generation = generation;
                memo.found.clear();
            }
            if let Some(found) = memo.found.get(&key) {
                return found.clone();
            }
        }
        let Some(spec) = spec() else {
            return Arc::from([]);
        };
        let pools = self.pools.pools();
        let found: Arc<[Box<str>]> =
            provision::provisioners(pools.iter().map(|p| &**p), &Placement::of_spec(&spec)).into();
        if let Ok(mut memo) = self.provisioners.lock()
            && memo.generation == generation
            && self.pools.generation() == generation
        {
            if memo.found.len() >= MEMO_CAPACITY {
                memo.found.clear();
            }
            memo.found.insert(key, found.clone());
        }
        found
    }

    /// Bounds live GETs by `timeout` instead of [`FETCH_TIMEOUT`].
    #[cfg(test)]
    pub(crate) fn with_fetch_timeout(mut self, timeout: Duration) -> Self {
        self.fetch_timeout = timeout;
        self
    }

    /// Whether decisions can be made: the Node cache has synced, and the NodePools are known
    /// (listed, not served, or not readable).
    pub fn is_ready(&self) -> bool {
        self.source.is_ready() && self.pools.is_ready()
    }

    pub fn cached_count(&self) -> usize {
        self.source.store().len()
    }

    pub fn generation(&self) -> u64 {
        self.source.store().generation()
    }

    /// How many cached nodes are feasible for `placement`; `None` until the cache has synced.
    pub fn feasible(&self, placement: &Placement<'_>) -> Option<usize> {
        self.feasible_keyed(placement, placement.fingerprint())
    }

    /// [`Nodes::feasible`], given the placement's fingerprint.
    pub fn feasible_keyed(&self, placement: &Placement<'_>, key: u64) -> Option<usize> {
        if !self.source.is_ready() {
            return None;
        }
        if let Some(count) = self.recall(key) {
            return Some(count);
        }
        // Counted outside the memo's lock: other reviews are not held up by one pass over the nodes.
        let (generation, count) = self.source.store().count(placement)?;
        self.remember(generation, key, count);
        Some(count)
    }

    /// The count remembered under `key` for the current nodes, else `count()`'s
    /// (remembered when the nodes did not change meanwhile).
    pub fn remembered(&self, key: u64, count: &mut dyn FnMut() -> Option<usize>) -> Option<usize> {
        if !self.source.is_ready() {
            return None;
        }
        let generation = self.generation();
        if let Some(known) = self.recall(key) {
            return Some(known);
        }
        let counted = count()?;
        self.remember(generation, key, counted);
        Some(counted)
    }

    fn recall(&self, key: u64) -> Option<usize> {
        let generation = self.generation();
        let mut memo = self.memo.lock().ok()?;
        if memo.generation != generation {
            memo.generation = generation;
            memo.counts.clear();
        }
        memo.counts.get(&key).copied()
    }

    /// Remembers a count made when the nodes were at `generation` (dropped if they changed since).
    fn remember(&self, generation: u64, key: u64, count: usize) {
        if let Ok(mut memo) = self.memo.lock()
            && memo.generation == generation
            && self.generation() == generation
        {
            if memo.counts.len() >= MEMO_CAPACITY {
                memo.counts.clear();
            }
            memo.counts.insert(key, count);
        }
    }

    /// The node `name`: from the cache, else from a live GET bounded by the fetch timeout.
    pub async fn lookup(&self, name: &str, metrics: &NodeMetrics) -> NodeLookup {
        if let Some(node) = self.source.store().get(name) {
            metrics.node_looked_up(NodeLookupResult::Cached);
            return NodeLookup::Found(node);
        }
        debug!(node = name, "node not cached, reading it from the API server");
        let answer = tokio::time::timeout(self.fetch_timeout, self.source.fetch(name))
            .await
            .unwrap_or_else(|_| {
                Err(NodeLookupError::Timeout {
                    name: name.to_owned(),
                    timeout: self.fetch_timeout,
                })
            });
        match answer {
            Ok(Some(node)) => {
                metrics.node_looked_up(NodeLookupResult::Fetched);
                NodeLookup::Found(Arc::new(node))
            }
            Ok(None) => {
                metrics.node_looked_up(NodeLookupResult::NotFound);
                NodeLookup::Unknown
            }
            Err(err) => {
                metrics.node_looked_up(NodeLookupResult::Error);
                warn!(node = name, error = %err, "node lookup failed");
                NodeLookup::Unavailable(err.to_string())
            }
        }
    }

    /// Per group: how many nodes satisfy the group's own placement (`None` until synced).
    pub(crate) fn group_counts(&self, config: &Config) -> Option<Vec<(String, usize)>> {
        config
            .groups
            .iter()
            .map(|(name, group)| Some((name.clone(), self.feasible(&Placement::of_group(group))?)))
            .collect()
    }

    /// Per group: the provisioners that could create a node for the group's own placement
    /// (compatible NodePools, and the group's declaration).
    pub(crate) fn group_provisioners(&self, config: &Config) -> Vec<(String, Vec<String>)> {
        let pools = self.pools.pools();
        config
            .groups
            .iter()
            .map(|(name, group)| (name.clone(), provision::of_group(group, pools.iter().map(|p| &**p))))
            .collect()
    }

    /// The view one decision gets: these nodes, and the node the pod names (looked up beforehand).
    pub fn view<'a>(&'a self, bound: Option<(&'a str, NodeLookup)>) -> RequestNodes<'a> {
        RequestNodes { nodes: self, bound }
    }
}

/// The nodes as one decision sees them.
#[derive(Debug)]
pub struct RequestNodes<'a> {
    nodes: &'a Nodes,
    bound: Option<(&'a str, NodeLookup)>,
}

impl NodeView for RequestNodes<'_> {
    fn feasible_keyed(&self, placement: &Placement<'_>, key: u64) -> Option<usize> {
        self.nodes.feasible_keyed(placement, key)
    }

    fn remembered(&self, key: u64, count: &mut dyn FnMut() -> Option<usize>) -> Option<usize> {
        self.nodes.remembered(key, count)
    }

    fn total(&self) -> Option<usize> {
        self.nodes.source.is_ready().then(|| self.nodes.cached_count())
    }

    fn count_where(&self, keep: &dyn Fn(&NodeInfo) -> bool) -> Option<usize> {
        if !self.nodes.source.is_ready() {
            return None;
        }
        self.nodes.source.store().count_where(keep)
    }

    fn provisioners(&self, key: u64, spec: &mut dyn FnMut() -> Option<PodSpec>) -> Arc<[Box<str>]> {
        self.nodes.provisioners(key, spec)
    }

    fn node_pools_for(&self, spec: &PodSpec) -> Vec<Result<String, (String, String)>> {
        provision::assess(
            self.nodes.provisioners_read().iter().map(|p| &**p),
            &Placement::of_spec(spec),
        )
    }

    fn node(&self, name: &str) -> NodeLookup {
        match &self.bound {
            Some((bound, lookup)) if *bound == name => lookup.clone(),
            _ => match self.nodes.source.store().get(name) {
                Some(node) => NodeLookup::Found(node),
                None => NodeLookup::Unavailable(format!("node {name} was not looked up")),
            },
        }
    }
}

/// Keeps `pod_director_group_nodes{group}` current: recomputed when the nodes
/// or the configuration change (checked every `every`), until `shutdown`.
pub(crate) async fn keep_group_gauge(
    nodes: Arc<Nodes>,
    config: Arc<arc_swap::ArcSwap<pod_director_engine::config::Loaded>>,
    metrics: NodeMetrics,
    every: Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut last: Option<(u64, u64, String)> = None;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        let loaded = config.load_full();
        let now = (nodes.generation(), nodes.pools.generation(), loaded.revision.clone());
        if last.as_ref() == Some(&now) {
            continue;
        }
        if let Some(counts) = nodes.group_counts(&loaded.config) {
            metrics.set_group_nodes(&counts);
            metrics.set_group_provisioners(&nodes.group_provisioners(&loaded.config));
            metrics.set_provisioners_read(&nodes.provisioners_read());
            last = Some(now);
        }
    }
}

/// A fixed set of nodes (`pod-director audit` lists them once): always ready, and a node
/// not in it does not exist.
impl NodeSource for NodeStore {
    fn store(&self) -> &NodeStore {
        self
    }

    fn fetch<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Option<NodeInfo>, NodeLookupError>> {
        Box::pin(std::future::ready(Ok(None)))
    }

    fn is_ready(&self) -> bool {
        true
    }
}

/// Node data from the Kubernetes API: a watch into a [`NodeStore`] plus live GETs.
pub struct KubeNodes {
    store: Arc<NodeStore>,
    api: Api<Node>,
    ready: Arc<AtomicBool>,
    /// The watch, stopped when the source is dropped.
    _task: Option<AbortOnDropHandle<()>>,
}

impl KubeNodes {
    /// Starts the watch (in a task, until dropped).
    pub fn start(client: Client) -> Self {
        let store = Arc::new(NodeStore::new());
        let ready = Arc::new(AtomicBool::new(false));
        let stream = watcher(Api::<Node>::all(client.clone()), watcher::Config::default()).default_backoff();
        let writer = store.clone();
        let synced = ready.clone();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            let mut listing: Option<HashMap<Box<str>, Arc<NodeInfo>>> = None;
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Init) => listing = Some(HashMap::new()),
                    Ok(watcher::Event::InitApply(node)) => {
                        let info = NodeInfo::from_node(&node);
                        listing
                            .get_or_insert_with(HashMap::new)
                            .insert(info.name.clone(), Arc::new(info));
                    }
                    Ok(watcher::Event::InitDone) => {
                        writer.replace(listing.take().unwrap_or_default());
                        if !synced.swap(true, Ordering::SeqCst) {
                            info!(nodes = writer.len(), "node cache synced");
                        }
                    }
                    Ok(watcher::Event::Apply(node)) => writer.apply(NodeInfo::from_node(&node)),
                    Ok(watcher::Event::Delete(node)) => {
                        writer.delete(node.metadata.name.as_deref().unwrap_or_default())
                    }
                    Err(err) => warn!(error = %err, "node watch failed; retrying with backoff"),
                }
            }
        });
        Self {
            store,
            api: Api::all(client),
            ready,
            _task: Some(AbortOnDropHandle::new(task)),
        }
    }

    /// A source reading `store` (fed by someone else) and fetching misses through `client`.
    #[cfg(test)]
    pub(crate) fn with_store(store: Arc<NodeStore>, client: Client) -> Self {
        Self {
            store,
            api: Api::all(client),
            ready: Arc::new(AtomicBool::new(true)),
            _task: None,
        }
    }
}

impl NodeSource for KubeNodes {
    fn store(&self) -> &NodeStore {
        &self.store
    }

    fn fetch<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<NodeInfo>, NodeLookupError>> {
        Box::pin(async move {
            let found = self.api.get_opt(name).await.map_err(|source| NodeLookupError::Api {
                name: name.to_owned(),
                source,
            })?;
            Ok(found.map(|node| NodeInfo::from_node(&node)))
        })
    }

    fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }
}

named_enum! {
    /// How a node lookup (`spec.nodeName`) was answered (`result` label).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum NodeLookupResult {
        /// From the Node cache.
        Cached => "cached",
        /// Not cached; the live GET found it.
        Fetched => "fetched",
        /// Not cached; the live GET says it does not exist.
        NotFound => "not_found",
        /// Not cached; the live GET failed or timed out.
        Error => "error",
    }
}

/// `pod_director_node_cache_size`, `pod_director_node_lookups_total`, `pod_director_group_nodes`,
/// `pod_director_group_provisioners`, `pod_director_provisioners`, `pod_director_provisioners_usable`.
#[derive(Debug, Clone)]
pub struct NodeMetrics {
    node_cache_size: Gauge,
    node_lookups: Family<ResultLabels, Counter>,
    group_nodes: Family<GroupLabels, Gauge>,
    group_provisioners: Family<GroupLabels, Gauge>,
    provisioners: Gauge,
    usable_provisioners: Gauge,
}

impl NodeMetrics {
    pub fn register(r: &mut Registry) -> Self {
        let node_cache_size = register(r, "node_cache_size", "Nodes held in the Node cache", Gauge::default());
        let node_lookups = register(
            r,
            "node_lookups",
            "Lookups of the node a pod names in spec.nodeName, by result",
            Family::default(),
        );
        let group_nodes = register(
            r,
            "group_nodes",
            "Nodes that satisfy each group's own placement (nodeSelector, required node affinity, tolerated taints, not cordoned)",
            Family::default(),
        );
        let group_provisioners = register(
            r,
            "group_provisioners",
            "Provisioners that could create a node for each group's own placement on demand (compatible Karpenter \
             NodePools and Cluster API node groups, plus 1 when the group declares nodes.provisionedOnDemand)",
            Family::default(),
        );
        let provisioners = register(
            r,
            "provisioners",
            "Provisioners read: Karpenter NodePools and Cluster API node groups (MachineDeployments, MachineSets the cluster-autoscaler scales)",
            Gauge::default(),
        );
        let usable_provisioners = register(
            r,
            "provisioners_usable",
            "Provisioners read that can create a node now (a NodePool Ready, not static or being deleted, limits not used up; a node group below its max size, able to scale from zero)",
            Gauge::default(),
        );
        Self {
            node_cache_size,
            node_lookups,
            group_nodes,
            group_provisioners,
            provisioners,
            usable_provisioners,
        }
    }

    pub fn set_node_cache_size(&self, size: usize) {
        self.node_cache_size.set(gauge(size));
    }

    pub fn node_looked_up(&self, result: NodeLookupResult) {
        self.node_lookups
            .get_or_create(&ResultLabels {
                result: result.as_str(),
            })
            .inc();
    }

    /// Sets `pod_director_group_nodes` to exactly these groups (removed groups disappear).
    pub fn set_group_nodes(&self, counts: &[(String, usize)]) {
        self.group_nodes.clear();
        for (group, count) in counts {
            self.group_nodes
                .get_or_create(&GroupLabels { group: group.clone() })
                .set(gauge(*count));
        }
    }

    /// Sets `pod_director_group_provisioners` to exactly these groups.
    pub fn set_group_provisioners(&self, found: &[(String, Vec<String>)]) {
        self.group_provisioners.clear();
        for (group, by) in found {
            self.group_provisioners
                .get_or_create(&GroupLabels { group: group.clone() })
                .set(gauge(by.len()));
        }
    }

    /// Sets `pod_director_provisioners` and `pod_director_provisioners_usable` from the provisioners read.
    pub fn set_provisioners_read(&self, pools: &[Arc<Provisioner>]) {
        self.provisioners.set(gauge(pools.len()));
        self.usable_provisioners
            .set(gauge(pools.iter().filter(|p| p.unusable.is_none()).count()));
    }
}

#[cfg(test)]
mod tests;
