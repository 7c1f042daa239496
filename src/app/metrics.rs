//! Every metric family pod-director exports, each registered by its owner, composed in the
//! exposition's order ([`Metrics::register`]), and what a `/metrics` scrape refreshes first.

use std::sync::Arc;

use crate::admission::{Admission, AdmissionMetrics};
use crate::cluster::audit::continuous::AuditMetrics;
use crate::cluster::namespaces::NamespaceMetrics;
use crate::cluster::nodes::NodeMetrics;
use crate::cluster::orphans::OrphanMetrics;
use crate::cluster::pods::PodMetrics;
use crate::cluster::webhooks::ReconcileMetrics;
use crate::metrics::Exposition;
use crate::server::{ConnectionMetrics, ReloadMetrics, Scrape};
use crate::telemetry::LogMetrics;
use pod_director_engine::config::Config;

/// The owners' metric handles (cheap to clone: each is a handle to the same series) and the
/// exposition they are registered in.
#[derive(Debug, Clone)]
pub struct Metrics {
    pub admission: AdmissionMetrics,
    pub reloads: ReloadMetrics,
    pub namespaces: NamespaceMetrics,
    pub orphans: OrphanMetrics,
    pub reconciles: ReconcileMetrics,
    pub nodes: NodeMetrics,
    pub pods: PodMetrics,
    pub connections: ConnectionMetrics,
    pub audit: AuditMetrics,
    pub log: LogMetrics,
    exposition: Arc<Exposition>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::register()
    }
}

impl Metrics {
    /// Every owner registers its families, in this order, which is the exposition's.
    pub fn register() -> Self {
        let mut registry = crate::metrics::registry();
        let r = &mut registry;
        Self {
            admission: AdmissionMetrics::register(r),
            reloads: ReloadMetrics::register(r),
            namespaces: NamespaceMetrics::register(r),
            orphans: OrphanMetrics::register(r),
            reconciles: ReconcileMetrics::register(r),
            nodes: NodeMetrics::register(r),
            pods: PodMetrics::register(r),
            connections: ConnectionMetrics::register(r),
            audit: AuditMetrics::register(r),
            log: LogMetrics::register(r),
            exposition: Arc::new(Exposition::new(registry)),
        }
    }

    /// Exports at 0 every series that `config` can produce and that no event has created
    /// yet ([`AdmissionMetrics::initialise`]), and the reload, reconcile and binding-lookup results.
    /// Called at start; each reload initialises the admission series again.
    pub fn initialise(&self, config: &Config) {
        self.admission.initialise(config);
        self.reloads.initialise();
        self.reconciles.initialise();
        self.pods.initialise();
    }

    /// Every family as OpenMetrics text (see [`crate::metrics::CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        self.exposition.encode()
    }

    /// What `/metrics` answers: the cache sizes and orphaned groups read from `admission`'s
    /// caches at scrape time, then every family.
    pub(crate) fn scrape(&self, admission: Arc<Admission>) -> Scrape {
        let metrics = self.clone();
        let cache = admission;
        Arc::new(move || {
            metrics.namespaces.set_namespace_cache_size(cache.cached_namespaces());
            let orphaned = cache.orphaned_groups();
            metrics
                .admission
                .initialise_unknown_groups(orphaned.keys().map(String::as_str));
            metrics.orphans.set_orphaned_groups(&orphaned);
            if let Some(nodes) = cache.cached_nodes() {
                metrics.nodes.set_node_cache_size(nodes);
            }
            metrics.encode()
        })
    }
}

#[cfg(test)]
mod tests;
