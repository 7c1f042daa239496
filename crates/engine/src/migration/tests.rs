use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::testing::{assert_contains, toleration};

fn pairs(list: &[(&str, &str)]) -> BTreeMap<String, String> {
    list.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn pod(spec: serde_json::Value) -> Pod {
    let full: k8s_openapi::api::core::v1::Pod =
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).expect("a pod");
    Pod::from(&full)
}

fn namespaces() -> BTreeMap<String, BTreeMap<String, String>> {
    BTreeMap::from([
        ("a".to_owned(), pairs(&[(NODE_SELECTOR_ANNOTATION, "pool=team")])),
        ("b".to_owned(), pairs(&[(NODE_SELECTOR_ANNOTATION, "pool=team")])),
        (
            "c".to_owned(),
            pairs(&[
                (NODE_SELECTOR_ANNOTATION, "pool=gpu"),
                (
                    DEFAULT_TOLERATIONS_ANNOTATION,
                    r#"[{"key":"gpu","operator":"Exists","effect":"NoSchedule"}]"#,
                ),
                (TOLERATIONS_WHITELIST_ANNOTATION, "[]"),
            ]),
        ),
        ("plain".to_owned(), BTreeMap::new()),
        ("broken".to_owned(), pairs(&[(NODE_SELECTOR_ANNOTATION, "pool")])),
    ])
}

#[test]
fn one_group_per_distinct_selector_and_tolerations_and_the_rest_said() {
    let m = migrate(&PluginFiles::default(), &namespaces(), Mode::DryRun);
    assert_eq!(m.default_group, None);
    assert_eq!(
        m.labels,
        pairs(&[("a", "in-tree-1"), ("b", "in-tree-1"), ("c", "in-tree-2")])
    );
    assert_eq!(m.groups["in-tree-1"].node_selector, pairs(&[("pool", "team")]));
    assert_eq!(
        m.groups["in-tree-2"].tolerations,
        vec![toleration("gpu", "Exists", "", "NoSchedule", None)]
    );
    assert_eq!(m.groups["in-tree-2"].mode, Some(Mode::DryRun));
    let said = m.not_migrated.join("\n");
    assert_contains(&said, "namespace broken: not migrated, its annotation does not parse");
    assert_contains(
        &said,
        "namespace c: scheduler.alpha.kubernetes.io/tolerationsWhitelist=\"[]\" has no group equivalent",
    );
    assert_contains(&said, "memory-pressure");
}

#[test]
fn the_files_defaults_become_the_default_group() {
    let files = PluginFiles {
        cluster_default_node_selector: pairs(&[("pool", "shared")]),
        ..PluginFiles::default()
    };
    let m = migrate(&files, &namespaces(), Mode::Enforce);
    assert_eq!(m.default_group.as_deref(), Some(DEFAULT_GROUP));
    assert_eq!(m.groups[DEFAULT_GROUP].node_selector, pairs(&[("pool", "shared")]));
    assert!(
        !m.labels.contains_key("plain"),
        "an unannotated namespace takes the default group"
    );
    assert_eq!(m.labels["a"], "in-tree-1");
}

#[test]
fn compare_lists_what_the_groups_decide_differently() {
    let files = PluginFiles::default();
    let ns = namespaces();
    let m = migrate(&files, &ns, Mode::DryRun);
    let config = m.config(&crate::testing::config("groups: {}"));
    let best_effort = pod(json!({"containers": [{"name": "c"}]}));
    assert!(compare(&files, &m, &config, ("a", &ns["a"]), &best_effort).is_empty());
    let conflicting = pod(json!({"containers": [{"name": "c"}], "nodeSelector": {"pool": "other"}}));
    assert!(
        compare(&files, &m, &config, ("a", &ns["a"]), &conflicting).is_empty(),
        "both refuse"
    );
    let burstable = pod(json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}));
    let differences = compare(&files, &m, &config, ("a", &ns["a"]), &burstable);
    assert_eq!(differences.len(), 1, "{differences:?}");
    assert_eq!(differences[0].field, "tolerations");
    assert_contains(&differences[0].in_tree, "memory-pressure");
}
