//! The reconciler's bound on re-asserting a field another writer keeps changing back.

use std::time::{Duration, Instant};

use json_patch::{AddOperation, PatchOperation, TestOperation};
use serde_json::{Value, json};

use super::{BOUND, WINDOW, Yield, Yields};
use pod_director_engine::compile::webhook_entries::pointer;

const WANT: &str = "want";

/// A live configuration with one entry `e` whose namespaceSelector is `selector`.
fn live(selector: &Value) -> Value {
    json!({
        "metadata": {"name": "pd", "managedFields": [
            {"manager": "pod-director", "fieldsV1": {"f:webhooks": {"k:{\"name\":\"e\"}": {"f:namespaceSelector": {}}}}},
            {"manager": "aks-enforcer", "fieldsV1": {"f:webhooks": {"k:{\"name\":\"e\"}": {"f:namespaceSelector": {}}}}},
            {"manager": "helm", "fieldsV1": {"f:webhooks": {"k:{\"name\":\"e\"}": {"f:rules": {}}}}}
        ]},
        "webhooks": [{"name": "e", "namespaceSelector": selector}],
    })
}

/// The plan that puts the wanted selector back: a guard, then the field.
fn plan(want: &str) -> Vec<PatchOperation> {
    vec![
        PatchOperation::Test(TestOperation {
            path: pointer(&["webhooks", "0", "name"]),
            value: json!("e"),
        }),
        PatchOperation::Add(AddOperation {
            path: pointer(&["webhooks", "0", "namespaceSelector"]),
            value: json!({"matchLabels": {WANT: want}}),
        }),
    ]
}

fn added() -> Value {
    json!({"matchLabels": {WANT: "a"}, "matchExpressions": [{"key": "other", "operator": "DoesNotExist"}]})
}

#[test]
fn a_field_changed_back_again_and_again_is_re_asserted_a_bounded_number_of_times_then_left() {
    let mut tracker = Yields::default();
    let start = Instant::now();
    let mut patches = 0;
    let mut yields = Vec::new();
    for round in 0..20u64 {
        let settled = tracker.settle(
            "pd",
            &live(&added()),
            plan("a"),
            vec!["e".to_owned()],
            start + Duration::from_secs(round * 60),
        );
        patches += settled.operations.len() / 2;
        if !settled.operations.is_empty() {
            assert_eq!(settled.changed, ["e"]);
        } else {
            assert!(settled.changed.is_empty(), "{:?}", settled.changed);
        }
        yields.extend(settled.yielded);
    }
    assert_eq!(patches, BOUND, "bounded re-asserts");
    assert_eq!(
        yields,
        [Yield {
            entry: "e".to_owned(),
            field: "namespaceSelector".to_owned(),
            writers: vec!["aks-enforcer".to_owned()],
        }],
        "one yield, naming the other writer"
    );
    assert_eq!(tracker.yielded(), 1);
}

#[test]
fn a_yield_ends_when_the_field_is_back_and_a_new_wanted_value_is_re_asserted() {
    let mut tracker = Yields::default();
    let now = Instant::now();
    for _ in 0..=BOUND {
        tracker.settle("pd", &live(&added()), plan("a"), vec!["e".to_owned()], now);
    }
    assert_eq!(tracker.yielded(), 1);
    // Someone put it back: nothing drifts, the yield ends.
    let settled = tracker.settle(
        "pd",
        &live(&json!({"matchLabels": {WANT: "a"}})),
        Vec::new(),
        Vec::new(),
        now,
    );
    assert!(settled.operations.is_empty());
    assert_eq!(tracker.yielded(), 0);
    // The configuration wants another value: patched, counted afresh.
    let settled = tracker.settle("pd", &live(&added()), plan("b"), vec!["e".to_owned()], now);
    assert_eq!(settled.operations.len(), 2, "{:?}", settled.operations);
    // The other writer writes yet another value after the bound: yielded again at once, said again.
    for _ in 1..BOUND {
        tracker.settle("pd", &live(&added()), plan("b"), vec!["e".to_owned()], now);
    }
    let settled = tracker.settle("pd", &live(&json!({})), plan("b"), vec!["e".to_owned()], now);
    assert!(settled.operations.is_empty());
    assert_eq!(settled.yielded.len(), 1);
}

#[test]
fn re_asserts_older_than_the_window_do_not_count() {
    let mut tracker = Yields::default();
    let start = Instant::now();
    let step = WINDOW / BOUND as u32 + Duration::from_secs(1);
    for round in 0..10u32 {
        let settled = tracker.settle(
            "pd",
            &live(&added()),
            plan("a"),
            vec!["e".to_owned()],
            start + step * round,
        );
        assert_eq!(
            settled.operations.len(),
            2,
            "round {round}: a slow drift is re-asserted"
        );
    }
    assert_eq!(tracker.yielded(), 0);
}

#[test]
fn other_operations_pass_untouched() {
    let mut tracker = Yields::default();
    let plan = vec![
        PatchOperation::Test(TestOperation {
            path: pointer(&["webhooks", "0", "name"]),
            value: json!("e"),
        }),
        PatchOperation::Add(AddOperation {
            path: pointer(&["webhooks", "-"]),
            value: json!({"name": "reservation"}),
        }),
    ];
    for _ in 0..10 {
        let settled = tracker.settle(
            "pd",
            &live(&added()),
            plan.clone(),
            vec!["reservation".to_owned()],
            Instant::now(),
        );
        assert_eq!(settled.operations, plan);
        assert_eq!(settled.changed, ["reservation"]);
    }
}

#[test]
fn a_configuration_of_the_other_kind_and_the_same_name_does_not_end_a_yield() {
    let mut tracker = Yields::default();
    let now = Instant::now();
    let mutating = json!({"metadata": {"name": "pd"}, "webhooks": [{"name": "m"}]});
    let mut yields = 0;
    for _ in 0..10 {
        yields += tracker
            .settle("pd", &live(&added()), plan("a"), vec!["e".to_owned()], now)
            .yielded
            .len();
        tracker.settle("pd", &mutating, Vec::new(), Vec::new(), now);
    }
    assert_eq!((yields, tracker.yielded()), (1, 1));
}
