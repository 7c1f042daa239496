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
pub fn count(config: &Config, namespaces: &dyn NamespaceSource) -> BTreeMap<String, usize> {
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
pub fn bounded(orphaned: &BTreeMap<String, usize>) -> BTreeMap<String, usize> {
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
pub fn report(loaded: &Loaded, namespaces: &dyn NamespaceSource) {
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
mod tests {
    use super::*;
    use crate::cluster::namespaces::Labels;
    use crate::testing::StaticNamespaces;
    use pod_director_engine::testing::{config, loaded};
    use pod_director_testkit::{LogCapture, until};

    fn labelled(group: &str) -> Labels {
        Labels::from([("pod-director/group".to_owned(), group.to_owned())])
    }

    #[test]
    fn namespaces_selecting_an_undefined_group_are_counted_by_group() {
        let namespaces = StaticNamespaces::new();
        namespaces.insert("team-a", labelled("ci"));
        namespaces.insert("team-b", labelled("gpu"));
        namespaces.insert("team-c", labelled("gpu"));
        namespaces.insert("team-d", labelled("old"));
        namespaces.insert("plain", Labels::new());
        namespaces.insert("kube-public", labelled("gpu"));
        let c = config("groups: {ci: {}}");
        assert_eq!(
            count(&c, &namespaces),
            BTreeMap::from([("gpu".to_owned(), 2), ("old".to_owned(), 1)]),
            "kube-public is excluded, plain has no label, ci is defined"
        );
        let c = config("groups: {ci: {}, gpu: {}, old: {}}");
        assert!(count(&c, &namespaces).is_empty());
    }

    #[test]
    fn the_configured_label_key_is_the_one_counted() {
        let namespaces = StaticNamespaces::new();
        namespaces.insert("team-a", labelled("gone"));
        namespaces.insert(
            "team-b",
            Labels::from([("infra.example.com/pool".to_owned(), "gone".to_owned())]),
        );
        let c = config("namespaceLabel: infra.example.com/pool\ngroups: {ci: {}}");
        assert_eq!(count(&c, &namespaces), BTreeMap::from([("gone".to_owned(), 1)]));
    }

    /// The JSON log lines with `message`.
    fn lines(capture: &LogCapture, message: &str) -> Vec<serde_json::Value> {
        capture
            .json_lines()
            .into_iter()
            .filter(|l| l["fields"]["message"] == message)
            .collect()
    }

    const WARNED: &str = "namespaces select a group that is not defined; their pods are decided by unknownGroup";

    #[tokio::test(flavor = "current_thread")]
    async fn the_reporter_warns_once_the_cache_has_synced_and_after_each_reload() {
        let captured = LogCapture::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_writer(move || writer.clone())
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);

        let namespaces = Arc::new(StaticNamespaces::new());
        namespaces.set_ready(false);
        namespaces.insert("team-a", labelled("old"));
        namespaces.insert("team-b", labelled("old"));
        let live = Arc::new(ArcSwap::from_pointee(loaded("groups: {ci: {}}")));
        let (changed, changes) = watch::channel(String::new());
        let (stop, stopped) = watch::channel(false);
        let task = spawn_reporter(live.clone(), namespaces.clone(), changes, stopped);

        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            lines(&captured, WARNED).is_empty(),
            "nothing before the cache has synced"
        );
        namespaces.set_ready(true);
        until("the WARN at start", || !lines(&captured, WARNED).is_empty()).await;
        let line = &lines(&captured, WARNED)[0];
        assert_eq!(line["level"], "WARN");
        assert_eq!(line["fields"]["group"], "old");
        assert_eq!(line["fields"]["namespaces"], 2);

        // A reload that defines the group: no new WARN; one that removes it again: a WARN.
        live.store(Arc::new(loaded("groups: {ci: {}, old: {}}")));
        changed.send_replace("2".to_owned());
        let settled = "every labelled namespace selects a defined group";
        until("the reload is reported", || !lines(&captured, settled).is_empty()).await;
        assert_eq!(lines(&captured, WARNED).len(), 1);
        live.store(Arc::new(loaded("groups: {ci: {}}")));
        changed.send_replace("3".to_owned());
        until("the WARN after the reload", || lines(&captured, WARNED).len() == 2).await;

        stop.send_replace(true);
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("stops on shutdown")
            .expect("no panic");
    }

    #[test]
    fn at_most_max_series_groups_get_their_own_series() {
        let many: BTreeMap<String, usize> = (0..MAX_SERIES + 10).map(|i| (format!("g{i:03}"), i + 1)).collect();
        let out = bounded(&many);
        assert_eq!(out.len(), MAX_SERIES + 1);
        assert_eq!(
            out[OTHER_GROUPS],
            (1..=10).sum::<usize>(),
            "the ten smallest are summed"
        );
        assert_eq!(out.values().sum::<usize>(), many.values().sum::<usize>());
        assert!(!out.contains_key("g000"));
        assert_eq!(bounded(&BTreeMap::from([("a".to_owned(), 1)])).len(), 1);
        assert!(
            pod_director_engine::syntax::label_value(OTHER_GROUPS).is_some(),
            "no group can be named so"
        );
    }
}
