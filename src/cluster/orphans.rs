//! Orphaned groups: namespaces whose group label names a group the live
//! configuration does not define — typically because a reload removed (or
//! renamed) the group while namespaces still select it. Their pods then fall
//! under `unknownGroup` (admitted unplaced, or all denied), which is rarely
//! what the admin meant, so it is made loud:
//!
//! - a WARN line per orphaned group, naming it and how many namespaces select
//!   it, once the namespace cache has synced at start and after every reload
//!   ([`spawn_reporter`]);
//! - the gauge `pod_director_orphaned_group_namespaces{group}`, computed from
//!   the namespace cache on every scrape ([`count`]), so it follows namespaces
//!   being relabelled or deleted without a reload.
//!
//! Excluded namespaces are not counted: pod-director never decides their pods.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::cluster::namespaces::NamespaceSource;
use crate::metrics::{GroupLabels, gauge, register};
use pod_director_engine::config::{Config, Loaded};

/// How many groups get a series of their own; the rest are summed into [`OTHER_GROUPS`].
/// Label values are written by whoever may label namespaces: the gauge's size must not be theirs to choose.
pub(crate) const MAX_SERIES: usize = 50;
/// The `group` of the series summing the orphaned groups beyond [`MAX_SERIES`]
/// (not a valid label value, so no real group can be named so).
pub(crate) const OTHER_GROUPS: &str = "(other)";

/// How often the reporter checks whether the namespace cache has synced.
const READY_POLL: Duration = Duration::from_millis(200);

/// Orphaned groups → how many (non-excluded) cached namespaces select each.
pub(crate) fn count(config: &Config, namespaces: &dyn NamespaceSource) -> BTreeMap<String, usize> {
    let mut orphaned: BTreeMap<String, usize> = BTreeMap::new();
    for (namespace, group) in namespaces.label_values(&config.namespace_label) {
        if config.groups.contains_key(&group) || config.excluded_namespaces.contains(&namespace) {
            continue;
        }
        *orphaned.entry(group).or_default() += 1;
    }
    orphaned
}

/// At most [`MAX_SERIES`] groups, the largest first kept by name; the rest summed into [`OTHER_GROUPS`].
pub(crate) fn bounded(orphaned: &BTreeMap<String, usize>) -> BTreeMap<String, usize> {
    if orphaned.len() <= MAX_SERIES {
        return orphaned.clone();
    }
    let mut by_size: Vec<(&String, &usize)> = orphaned.iter().collect();
    by_size.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    let mut out: BTreeMap<String, usize> = by_size[..MAX_SERIES].iter().map(|(g, n)| ((*g).clone(), **n)).collect();
    out.insert(
        OTHER_GROUPS.to_owned(),
        by_size[MAX_SERIES..].iter().map(|(_, n)| **n).sum(),
    );
    out
}

/// Logs one WARN per orphaned group of `loaded` (nothing when there is none).
pub(crate) fn report(loaded: &Loaded, namespaces: &dyn NamespaceSource) {
    let orphaned = count(&loaded.config, namespaces);
    for (group, selecting) in &orphaned {
        warn!(
            config.revision = loaded.revision.as_str(),
            group = group.as_str(),
            namespaces = *selecting,
            label = loaded.config.namespace_label.as_str(),
            "namespaces select a group that is not defined; their pods are decided by unknownGroup"
        );
    }
    if orphaned.is_empty() {
        info!(
            config.revision = loaded.revision.as_str(),
            "every labelled namespace selects a defined group"
        );
    }
}

/// Reports orphaned groups once the namespace cache has synced, then after every
/// configuration change announced on `changed`, until `shutdown`.
pub(crate) fn spawn_reporter(
    live: Arc<ArcSwap<Loaded>>,
    namespaces: Arc<dyn NamespaceSource>,
    mut changed: watch::Receiver<String>,
    mut shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while !namespaces.is_ready() {
            tokio::select! {
                _ = shutdown.changed() => return,
                () = tokio::time::sleep(READY_POLL) => {}
            }
        }
        changed.mark_unchanged();
        report(&live.load(), namespaces.as_ref());
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                result = changed.changed() => {
                    if result.is_err() {
                        return;
                    }
                }
            }
            report(&live.load(), namespaces.as_ref());
        }
    })
}

/// `pod_director_orphaned_group_namespaces`.
#[derive(Debug, Clone)]
pub struct OrphanMetrics {
    orphaned_group_namespaces: Family<GroupLabels, Gauge>,
}

impl OrphanMetrics {
    pub fn register(r: &mut Registry) -> Self {
        let orphaned_group_namespaces = register(
            r,
            "orphaned_group_namespaces",
            "Namespaces whose group label names a group the configuration does not define, by group",
            Family::default(),
        );
        Self {
            orphaned_group_namespaces,
        }
    }

    /// Replaces the orphaned-group gauge with `orphaned` (group → namespaces), at most
    /// [`MAX_SERIES`] series: groups no namespace selects any more disappear.
    pub fn set_orphaned_groups(&self, orphaned: &std::collections::BTreeMap<String, usize>) {
        self.orphaned_group_namespaces.clear();
        for (group, count) in bounded(orphaned) {
            self.orphaned_group_namespaces
                .get_or_create(&GroupLabels { group })
                .set(gauge(count));
        }
    }
}

#[cfg(test)]
mod tests;
