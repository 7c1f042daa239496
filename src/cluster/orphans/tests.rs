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
