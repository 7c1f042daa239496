//! The in-tree plugins' entries (`inTreePlugins`), `in-tree.<mutate|validate>.<configuration>.pod-director.io`
//! (`/mutate-in-tree`, `/validate-in-tree`): pod CREATE and UPDATE of every namespace but the
//! excluded ones (the namespaces' annotations cannot be selected by a namespaceSelector), first in
//! each configuration, as the plugins run before every mutating and validating webhook. They exist
//! only while `inTreePlugins` is set: the reconciler inserts them first and removes them. The
//! validating entry also sees every namespace write (CREATE, UPDATE, also through `status` and
//! `finalize`): the guard of the three annotations, for namespaces with no group label too.
//! failurePolicy: the enforce entries' (Fail) in enforce, Ignore in dryRun and warn. The mutating
//! entry is not reinvoked (`Never`): the plugins run once, before the webhooks.

use serde_json::{Value, json};

use super::{EntrySettings, Kind, METADATA_NAME_LABEL, excluded, requirement, rule, selector};
use crate::config::{Config, Mode};

/// The path `kind`'s entry calls.
pub fn path(kind: Kind) -> &'static str {
    match kind {
        Kind::Mutating => "/mutate-in-tree",
        Kind::Validating => "/validate-in-tree",
    }
}

/// `in-tree.mutate.pod-director.pod-director.io`.
pub fn entry_name(kind: Kind, configuration: &str) -> String {
    format!("in-tree.{}.{configuration}.pod-director.io", kind.webhook())
}

/// The entry of `kind` in configuration `name` (but its clientConfig), while `inTreePlugins` is set.
pub(crate) fn entry(kind: Kind, name: &str, config: &Config, settings: &EntrySettings) -> Option<Value> {
    let section = config.in_tree_plugins.as_ref()?;
    let policy = match section.mode {
        Mode::Enforce => settings.webhook_failure_policy_enforce.as_str(),
        Mode::DryRun | Mode::Warn => "Ignore",
    };
    let not_excluded = selector(vec![requirement(METADATA_NAME_LABEL, "NotIn", Some(excluded(config)))]);
    let mut value = json!({
        "name": entry_name(kind, name),
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "timeoutSeconds": settings.webhook_timeout_seconds,
        "failurePolicy": policy,
        "matchPolicy": "Equivalent",
    });
    if kind == Kind::Mutating {
        value["reinvocationPolicy"] = Value::String("Never".to_owned());
    }
    value["namespaceSelector"] = serde_json::to_value(&not_excluded).unwrap_or(Value::Null);
    let mut rules = vec![rule("", &["pods"], &["CREATE", "UPDATE"], "Namespaced")];
    if kind == Kind::Validating {
        let namespaces = ["namespaces", "namespaces/status", "namespaces/finalize"];
        rules.push(rule("", &namespaces, &["CREATE", "UPDATE"], "Cluster"));
    }
    value["rules"] = Value::Array(rules);
    Some(value)
}

/// The clientConfig of `kind`'s entry: the `enforce` entry's, its path `/mutate-in-tree` or
/// `/validate-in-tree` (a URL's `/mutate` or `/validate` suffix replaced).
pub(crate) fn client_config_from(kind: Kind, enforce: &Value) -> Option<Value> {
    let mut client = enforce.get("clientConfig")?.clone();
    if let Some(service) = client.get_mut("service").and_then(Value::as_object_mut) {
        service.insert("path".to_owned(), Value::String(path(kind).to_owned()));
        return Some(client);
    }
    let url = client.get("url")?.as_str()?;
    let base = url.strip_suffix(&format!("/{}", kind.webhook()))?.to_owned();
    client["url"] = Value::String(format!("{base}{}", path(kind)));
    Some(client)
}
