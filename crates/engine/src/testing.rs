//! Test support of the engine: what its unit tests build their inputs with, shared with the
//! product's tests, benches and e2e suite (re-exported by its test kit, crates/testkit); never used
//! by the engine itself, and not part of its API (the `testing` feature, hidden from the docs).
//! `testing.rs`: a test config, a node, a toleration, `assert_contains`, a review's JSON edited
//! ([`with`], [`without`]); `scheduler.rs`: the scheduler's reading of required node affinity, an
//! oracle for the engine.

pub mod scheduler;

use k8s_openapi::api::core::v1::Toleration;
use serde_json::Value;

use crate::compile::webhook_entries::{EntrySettings, Kind};
use crate::config::{Config, ConfigError, FieldError, Loaded};
use crate::decision::{Subject, View, Write};
use crate::placement::{
    Context, Namespace, NodeInfo, NodeLookup, NodeTaint, NodeView, Outcome, Placement, Pod, Webhook,
};

/// `webhook`'s decision of `pod`'s creation in `namespace`, as `context` asks: the engine's one
/// entry ([`crate::decision::decide`]) for one pod, as the benches and property tests call it.
pub fn decide_pod(
    webhook: Webhook,
    config: &Config,
    namespace: &Namespace<'_>,
    pod: &Pod,
    context: &Context<'_>,
) -> Outcome {
    let view = View {
        config,
        namespace,
        context,
    };
    crate::decision::decide(webhook, &Subject::Pod(Write::Create(pod)), &view)
}
/// A test's configuration file `yaml`, loaded without environment overrides; it must be valid.
pub fn loaded(yaml: &str) -> Loaded {
    Config::from_yaml(yaml, "test", Vec::new()).unwrap_or_else(|e| panic!("test config: {e}"))
}

/// The field errors of a configuration that does not validate (none for another error).
pub fn field_errors(error: &ConfigError) -> &[FieldError] {
    match error {
        ConfigError::Invalid { errors, .. } => errors,
        _ => &[],
    }
}

/// The [`Config`] of [`loaded`].
pub fn config(yaml: &str) -> Config {
    loaded(yaml).config
}

/// A node named `name` with `labels`, `taints` (`(key, value, effect)`), cordoned or not.
pub fn node(name: &str, labels: &[(&str, &str)], taints: &[(&str, &str, &str)], cordoned: bool) -> NodeInfo {
    NodeInfo::new(
        name,
        labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        taints.iter().map(|(k, v, e)| NodeTaint::new(k, v, e)).collect(),
        cordoned,
    )
}

/// A toleration; an empty `key`, `operator`, `value` or `effect` is left out.
pub fn toleration(key: &str, operator: &str, value: &str, effect: &str, seconds: Option<i64>) -> Toleration {
    let given = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    Toleration {
        key: given(key),
        operator: given(operator),
        value: given(value),
        effect: given(effect),
        toleration_seconds: seconds,
    }
}

/// Asserts that `text` contains `needle`, showing both when it does not.
#[track_caller]
pub fn assert_contains(text: &str, needle: &str) {
    assert!(text.contains(needle), "expected {needle:?} in:\n{text}");
}

/// `value` with the value at `pointer` replaced by `new`. Panics when nothing is there:
/// an edit that silently does nothing would leave its test testing the unedited review.
pub fn with(mut value: Value, pointer: &str, new: Value) -> Value {
    let slot = value
        .pointer_mut(pointer)
        .unwrap_or_else(|| panic!("fixture edit: nothing at {pointer}"));
    *slot = new;
    value
}

/// `value` without `parent`'s `key`. Panics when there is no such key (see [`with`]).
pub fn without(mut value: Value, parent: &str, key: &str) -> Value {
    let removed = match value.pointer_mut(parent) {
        Some(Value::Object(map)) => map.remove(key),
        _ => None,
    };
    assert!(removed.is_some(), "fixture edit: no {key:?} in {parent:?}");
    value
}

/// Nodes that cannot be looked up: the API server does not answer (no counts, every node
/// `Unavailable`).
#[derive(Debug)]
pub struct DownNodes;

impl NodeView for DownNodes {
    fn feasible_keyed(&self, _: &Placement<'_>, _: u64) -> Option<usize> {
        None
    }
    fn total(&self) -> Option<usize> {
        None
    }
    fn node(&self, _: &str) -> NodeLookup {
        NodeLookup::Unavailable("the API server did not answer".to_owned())
    }
    fn count_where(&self, _: &dyn Fn(&NodeInfo) -> bool) -> Option<usize> {
        None
    }
}

/// Three groups, one per mode, as the entries tests use them.
pub const ENTRY_GROUPS: &str = "
groups:
  ci: {mode: enforce}
  gpu: {mode: warn}
  batch: {}
";

/// The `webhooks` list of a configuration as the chart renders it for `yaml` and the
/// API server stores it (clientConfig set, objectSelector defaulted to `{}`), with a
/// foreign entry (another feature's) at index 2, and `settings`.
pub fn rendered_entries_with(kind: Kind, name: &str, yaml: &str, settings: &EntrySettings) -> Vec<Value> {
    let mut out: Vec<Value> = crate::compile::webhook_entries::owned_entries(
        kind,
        name,
        &config(yaml),
        settings,
        &std::collections::BTreeSet::new(),
    )
    .into_iter()
    .map(|mut w| {
        w["clientConfig"] =
            serde_json::json!({"url": format!("https://127.0.0.1:8443/{}", kind.webhook()), "caBundle": "Q0E="});
        if w.get("objectSelector").is_none() {
            w["objectSelector"] = serde_json::json!({});
        }
        w
    })
    .collect();
    out.insert(
        2,
        serde_json::json!({"name": format!("other.{}.{name}.example.com", kind.webhook()), "failurePolicy": "Fail", "namespaceSelector": {}}),
    );
    out
}

/// [`rendered_entries_with`] the default settings.
pub fn rendered_entries(kind: Kind, name: &str, yaml: &str) -> Vec<Value> {
    rendered_entries_with(kind, name, yaml, &EntrySettings::default())
}
