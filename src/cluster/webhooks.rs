//! The webhook entries pod-director owns as a function of the live
//! configuration, and the reconciler that keeps the chart's webhook
//! configurations equal to it.
//!
//! The chart renders, in its MutatingWebhookConfiguration and its
//! ValidatingWebhookConfiguration (both named after the release), four pod
//! entries, `<entry>.<mutate|validate>.<configuration>.pod-director.io`:
//!
//! | entry | selects namespaces | failurePolicy |
//! |---|---|---|
//! | `enforce` | label In [groups in enforce] | `webhook.failurePolicy.enforce` (Fail) |
//! | `observe` | label In [groups in dryRun/warn] | Ignore |
//! | `default-group` | label DoesNotExist (with `defaultGroup`) | the default group's entry's |
//! | `unknown-group` | label Exists, NotIn [every group] | `webhook.failurePolicy.unknownGroup` |
//!
//! and every entry also has `kubernetes.io/metadata.name NotIn [excluded]`. An
//! entry with nothing to serve (no group in that mode, no `defaultGroup`) is
//! still rendered, selecting [`NO_NAMESPACE`], so that a reload never needs an
//! entry that does not exist. The ValidatingWebhookConfiguration also has the
//! namespace label guard's two entries, `<enforce|observe>.namespace-guard.<configuration>.pod-director.io`
//! (namespaces, `namespaces/status`, `namespaces/finalize`), split by the groups'
//! modes with objectSelectors ([`guard_object_selectors`]) so that only namespaces
//! of enforce groups become unwritable while pod-director is down. While a group reserves
//! its nodes, it ends with the reservation entry (`reservation.<configuration>.pod-director.io`,
//! [`reservation`]): the only entry rendered only when needed, so the reconciler adds and
//! removes it as the live configuration starts or stops reserving.
//!
//! [`owned_entries`] is every field of those entries but `clientConfig`; the
//! chart's `templates/webhooks.yaml` renders the same, held equal by the goldens
//! in `tests/webhook_selectors/` (checked against `helm template` by
//! `scripts/chart-test.sh selectors` and against this code by
//! `tests/webhook_selectors.rs`).
//!
//! [`spawn`] patches every field that differs from them — a namespaceSelector
//! after a mode change, a failurePolicy or timeout edited by hand, a rule or
//! objectSelector narrowed — on start, after every successful reload and every
//! resync interval; failures are logged, counted and retried, and never touch
//! admission or readiness. `clientConfig` is not pod-director's: where it is
//! served and the CA bundle belong to the installation (Service or URL,
//! cert-manager's injection), and a wrong one shows at once as failed calls.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, RemoveOperation, TestOperation};
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, Resource};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::metrics::{ResultLabels, register};
use pod_director_engine::config::{Config, Loaded, Mode};
use pod_director_engine::placement::policy;

/// The label the API server sets on every namespace to the namespace's name.
pub(crate) const METADATA_NAME_LABEL: &str = "kubernetes.io/metadata.name";
/// Excluded by every entry in addition to `excludedNamespaces` (as the chart does).
pub(crate) const ALWAYS_EXCLUDED: &str = "kube-system";
/// What an entry with nothing to serve selects: `kubernetes.io/metadata.name In
/// [none.pod-director.io]`. A valid label value that no namespace carries there —
/// the API server sets that label to the namespace's name, and a namespace name has no dots.
pub(crate) const NO_NAMESPACE: &str = "none.pod-director.io";
/// Field manager of the reconciler's patches.
pub const FIELD_MANAGER: &str = "pod-director";
/// Longest time one reconciliation (reads and patches) may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// First and largest wait before retrying a failed reconciliation.
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(30);

named_enum! {
    /// One of the chart's pod webhook entries.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub enum Entry {
        Enforce => "enforce",
        Observe => "observe",
        DefaultGroup => "default-group",
        UnknownGroup => "unknown-group",
    }
}

impl Entry {
    /// The entry's name in `configuration`, as the chart writes it:
    /// `enforce.mutate.pod-director.pod-director.io`.
    pub fn name(self, webhook: &str, configuration: &str) -> String {
        format!("{}.{webhook}.{configuration}.pod-director.io", self.as_str())
    }
}

fn requirement(key: &str, operator: &str, values: Option<Vec<String>>) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.to_owned(),
        operator: operator.to_owned(),
        values,
    }
}

fn selector(requirements: Vec<LabelSelectorRequirement>) -> LabelSelector {
    LabelSelector {
        match_expressions: Some(requirements),
        match_labels: None,
    }
}

/// The namespaces no entry selects: `excludedNamespaces` (with pod-director's own
/// namespace, added at load time) and kube-system, sorted, without duplicates.
pub fn excluded(config: &Config) -> Vec<String> {
    let mut names: Vec<String> = config.excluded_namespaces.clone();
    names.push(ALWAYS_EXCLUDED.to_owned());
    names.sort();
    names.dedup();
    names
}

/// The entry whose failurePolicy `default-group` takes: the default group's mode's
/// (`observe` also when there is no default group: its entry then selects nothing).
pub fn default_group_follows(config: &Config) -> Entry {
    let enforced = config
        .default_group
        .as_ref()
        .and_then(|name| config.groups.get(name))
        .is_some_and(|group| config.mode_of(group) == Mode::Enforce);
    if enforced { Entry::Enforce } else { Entry::Observe }
}

/// Each entry's namespaceSelector for `config` — the chart's `pod-director.webhookEntries` —
/// once the groups of `on_policy` are enforced by their admission policies: those leave the
/// `enforce` entry (for [`PolicyEntry`]'s). The chart renders them before any hand-over (empty).
pub fn namespace_selectors(config: &Config, on_policy: &BTreeSet<String>) -> BTreeMap<Entry, LabelSelector> {
    let label = config.namespace_label.as_str();
    let excluded = requirement(METADATA_NAME_LABEL, "NotIn", Some(excluded(config)));
    let nothing = || {
        selector(vec![
            requirement(METADATA_NAME_LABEL, "In", Some(vec![NO_NAMESPACE.to_owned()])),
            excluded.clone(),
        ])
    };
    let mut enforce = Vec::new();
    let mut observe = Vec::new();
    for (name, group) in &config.groups {
        match config.mode_of(group) {
            Mode::Enforce if on_policy.contains(name) => {}
            Mode::Enforce => enforce.push(name.clone()),
            Mode::DryRun | Mode::Warn => observe.push(name.clone()),
        }
    }
    let labelled = |groups: Vec<String>| {
        if groups.is_empty() {
            nothing()
        } else {
            selector(vec![requirement(label, "In", Some(groups)), excluded.clone()])
        }
    };
    let default_group = if config.default_group.is_some() {
        selector(vec![requirement(label, "DoesNotExist", None), excluded.clone()])
    } else {
        nothing()
    };
    let mut unknown = vec![requirement(label, "Exists", None)];
    if !config.groups.is_empty() {
        unknown.push(requirement(
            label,
            "NotIn",
            Some(config.groups.keys().cloned().collect()),
        ));
    }
    unknown.push(excluded.clone());
    BTreeMap::from([
        (Entry::Enforce, labelled(enforce)),
        (Entry::Observe, labelled(observe)),
        (Entry::DefaultGroup, default_group),
        (Entry::UnknownGroup, selector(unknown)),
    ])
}

named_enum! {
    /// The pod entries for groups enforced by admission policies, rendered only while some are
    /// (the reconciler adds them with the `enforce` entry's clientConfig, and removes them).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub enum PolicyEntry {
        /// failurePolicy as `enforce`: what the policies leave to the webhook ([`policy::WEBHOOK_ONLY`]).
        Fallback => "policy",
        /// failurePolicy Ignore, mutating only: the sampled pods the webhook logs (`policyObservation`).
        Observe => "policy-observe",
    }
}

impl PolicyEntry {
    /// `policy.mutate.pod-director.pod-director.io`.
    pub fn name(self, webhook: &str, configuration: &str) -> String {
        format!("{}.{webhook}.{configuration}.pod-director.io", self.as_str())
    }

    fn condition_name(self) -> &'static str {
        match self {
            PolicyEntry::Fallback => "left-to-the-webhook",
            PolicyEntry::Observe => "sampled-for-the-log",
        }
    }
}

named_enum! {
    /// Which webhook configuration object.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Kind {
        Mutating => "MutatingWebhookConfiguration",
        Validating => "ValidatingWebhookConfiguration",
    }
}

impl Kind {
    /// The middle part of its entries' names.
    pub fn webhook(self) -> &'static str {
        match self {
            Kind::Mutating => "mutate",
            Kind::Validating => "validate",
        }
    }
}

/// Why a webhook configuration could not be reconciled.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReconcileError {
    #[error("cannot read {kind} {name}: {source}")]
    Read {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "{kind} {name} has no webhook entry {entry:?}; pod-director only patches the entries the chart renders \
         (upgrade the chart, or turn webhook.reconcile off)"
    )]
    MissingEntry {
        kind: &'static str,
        name: String,
        entry: String,
    },
    #[error(
        "cannot add entry {entry:?} to ValidatingWebhookConfiguration {name}: its clientConfig is copied from entry \
         {from:?}, which has neither a Service nor a URL ending in /validate (install the chart's webhook \
         configuration, or turn webhook.reconcile off and add the entry by hand)"
    )]
    NoClientConfig { name: String, entry: String, from: String },
    #[error("cannot patch {kind} {name}: {source}")]
    Patch {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("reconciling the webhook configurations took longer than {0:?}")]
    Timeout(Duration),
    #[error("{0}")]
    Policy(#[from] admission_policies::PolicyError),
}

fn pointer(tokens: &[&str]) -> PointerBuf {
    PointerBuf::from_tokens(tokens.iter().copied())
}

/// The chart values that shape the entries besides the configuration: the serve flags the
/// chart passes (`webhook.timeoutSeconds`, `webhook.failurePolicy.*`), defaulting to the chart's defaults.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct EntrySettings {
    /// timeoutSeconds of every entry pod-director owns (the chart's `webhook.timeoutSeconds`).
    #[arg(long, env = "POD_DIRECTOR_WEBHOOK_TIMEOUT_SECONDS", default_value_t = 5,
          value_parser = clap::value_parser!(u8).range(1..=30))]
    pub webhook_timeout_seconds: u8,
    /// failurePolicy of the entries for groups in enforce (`webhook.failurePolicy.enforce`).
    #[arg(long, env = "POD_DIRECTOR_WEBHOOK_FAILURE_POLICY_ENFORCE", default_value = "Fail",
          value_parser = ["Fail", "Ignore"])]
    pub webhook_failure_policy_enforce: String,
    /// failurePolicy of the entry for labels naming no group (`webhook.failurePolicy.unknownGroup`).
    #[arg(long, env = "POD_DIRECTOR_WEBHOOK_FAILURE_POLICY_UNKNOWN_GROUP", default_value = "Ignore",
          value_parser = ["Fail", "Ignore"])]
    pub webhook_failure_policy_unknown_group: String,
}

impl Default for EntrySettings {
    fn default() -> Self {
        Self {
            webhook_timeout_seconds: 5,
            webhook_failure_policy_enforce: "Fail".to_owned(),
            webhook_failure_policy_unknown_group: "Ignore".to_owned(),
        }
    }
}

named_enum! {
    /// One of the namespace label guard's entries (ValidatingWebhookConfiguration only):
    /// namespaces in a group in enforce, and the others.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub enum GuardEntry {
        Enforce => "enforce",
        Observe => "observe",
    }
}

impl GuardEntry {
    /// `enforce.namespace-guard.pod-director.pod-director.io`.
    pub fn name(self, configuration: &str) -> String {
        format!("{}.namespace-guard.{configuration}.pod-director.io", self.as_str())
    }
}

/// The namespace label guard entries' objectSelectors: which namespace writes each one is
/// sent (the API server matches the old object or the new one). `enforce` gets the writes
/// of namespaces in a group in enforce before or after (unlabelled ones too when
/// `defaultGroup` is enforced), so only those namespaces become unwritable while
/// pod-director is down; `observe` the other writes where the label is set before or after.
/// A namespace leaving an enforce group for another group matches both: both decide it alike.
pub fn guard_object_selectors(config: &Config) -> BTreeMap<GuardEntry, LabelSelector> {
    let label = config.namespace_label.as_str();
    let (mut enforce, mut observe) = (Vec::new(), Vec::new());
    for (name, group) in &config.groups {
        match config.mode_of(group) {
            Mode::Enforce => enforce.push(name.clone()),
            Mode::DryRun | Mode::Warn => observe.push(name.clone()),
        }
    }
    let nothing = || {
        selector(vec![requirement(
            METADATA_NAME_LABEL,
            "In",
            Some(vec![NO_NAMESPACE.to_owned()]),
        )])
    };
    let default_enforced = default_group_follows(config) == Entry::Enforce;
    let enforced = if default_enforced {
        // Unlabelled (the default group), enforce groups, and labels naming no group.
        let others = if observe.is_empty() {
            vec![NO_NAMESPACE.to_owned()]
        } else {
            observe.clone()
        };
        selector(vec![requirement(label, "NotIn", Some(others))])
    } else if enforce.is_empty() {
        nothing()
    } else {
        selector(vec![requirement(label, "In", Some(enforce.clone()))])
    };
    let observed = if default_enforced {
        if observe.is_empty() {
            nothing()
        } else {
            selector(vec![requirement(label, "In", Some(observe))])
        }
    } else {
        let mut labelled = vec![requirement(label, "Exists", None)];
        if !enforce.is_empty() {
            labelled.push(requirement(label, "NotIn", Some(enforce)));
        }
        selector(labelled)
    };
    BTreeMap::from([(GuardEntry::Enforce, enforced), (GuardEntry::Observe, observed)])
}

/// The failurePolicy of a guard entry: `enforce`'s is the enforce policy unless
/// `namespaceGuard.mode` is set to observe; `observe`'s is Ignore unless it is set to enforce.
fn guard_failure_policy<'s>(config: &Config, entry: GuardEntry, settings: &'s EntrySettings) -> &'s str {
    let enforce = settings.webhook_failure_policy_enforce.as_str();
    match (entry, config.namespace_guard.mode) {
        (GuardEntry::Enforce, None | Some(Mode::Enforce)) | (GuardEntry::Observe, Some(Mode::Enforce)) => enforce,
        _ => "Ignore",
    }
}

fn rule(group: &str, resources: &[&str], operations: &[&str], scope: &str) -> Value {
    serde_json::json!({
        "apiGroups": [group],
        "apiVersions": ["v1"],
        "operations": operations,
        "resources": resources,
        "scope": scope,
    })
}

/// Every entry pod-director owns in configuration `name` of `kind`, each with every field
/// the chart renders for it except `clientConfig` (where the webhook is served and the CA
/// bundle are the installation's: a Service or URL, cert-manager's injection), in the
/// chart's order. The chart's `templates/webhooks.yaml` renders the same; the goldens in
/// `tests/webhook_selectors/` hold the two equal.
///
/// `on_policy`: the groups whose pods are handed over to their admission policies
/// ([`pod_director_engine::placement::policy`]); while there are any, the [`PolicyEntry`] entries follow.
pub fn owned_entries(
    kind: Kind,
    name: &str,
    config: &Config,
    settings: &EntrySettings,
    on_policy: &BTreeSet<String>,
) -> Vec<Value> {
    let selectors = namespace_selectors(config, on_policy);
    let enforce_policy = settings.webhook_failure_policy_enforce.as_str();
    let pod_operations: &[&str] = match kind {
        Kind::Mutating => &["CREATE"],
        Kind::Validating => &["CREATE", "UPDATE"],
    };
    let common = |entry_name: String, policy: &str| {
        let mut entry = serde_json::json!({
            "name": entry_name,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "timeoutSeconds": settings.webhook_timeout_seconds,
            "failurePolicy": policy,
            "matchPolicy": "Equivalent",
        });
        if kind == Kind::Mutating {
            entry["reinvocationPolicy"] = Value::String("IfNeeded".to_owned());
        }
        entry
    };
    let mut out: Vec<Value> = Entry::ALL
        .into_iter()
        .map(|entry| {
            let policy = match entry {
                Entry::Enforce => enforce_policy,
                Entry::Observe => "Ignore",
                Entry::DefaultGroup if default_group_follows(config) == Entry::Enforce => enforce_policy,
                Entry::DefaultGroup => "Ignore",
                Entry::UnknownGroup => settings.webhook_failure_policy_unknown_group.as_str(),
            };
            let mut value = common(entry.name(kind.webhook(), name), policy);
            value["namespaceSelector"] = serde_json::to_value(&selectors[&entry]).unwrap_or(Value::Null);
            value["rules"] = Value::Array(vec![
                rule("", &["pods"], pod_operations, "Namespaced"),
                rule("apps", &["daemonsets"], &["CREATE", "UPDATE"], "Namespaced"),
            ]);
            value
        })
        .collect();
    let policy_groups: Vec<String> = on_policy.iter().cloned().collect();
    let excluded_names = requirement(METADATA_NAME_LABEL, "NotIn", Some(excluded(config)));
    for entry in PolicyEntry::ALL {
        if policy_groups.is_empty() || (entry == PolicyEntry::Observe && kind == Kind::Validating) {
            continue;
        }
        let (policy, condition) = match entry {
            PolicyEntry::Fallback => (enforce_policy, Some(policy::WEBHOOK_ONLY.to_owned())),
            PolicyEntry::Observe => ("Ignore", policy::observation_condition(config.policy_observation)),
        };
        let Some(condition) = condition else {
            continue;
        };
        let mut value = common(entry.name(kind.webhook(), name), policy);
        value["namespaceSelector"] = serde_json::to_value(selector(vec![
            requirement(&config.namespace_label, "In", Some(policy_groups.clone())),
            excluded_names.clone(),
        ]))
        .unwrap_or(Value::Null);
        value["matchConditions"] = serde_json::json!([{ "name": entry.condition_name(), "expression": condition }]);
        value["rules"] = Value::Array(vec![
            rule("", &["pods"], pod_operations, "Namespaced"),
            rule("apps", &["daemonsets"], &["CREATE", "UPDATE"], "Namespaced"),
        ]);
        out.push(value);
    }
    if kind == Kind::Validating {
        let objects = guard_object_selectors(config);
        let not_excluded = selector(vec![requirement(METADATA_NAME_LABEL, "NotIn", Some(excluded(config)))]);
        for entry in GuardEntry::ALL {
            let mut value = common(entry.name(name), guard_failure_policy(config, entry, settings));
            value["namespaceSelector"] = serde_json::to_value(&not_excluded).unwrap_or(Value::Null);
            value["objectSelector"] = serde_json::to_value(&objects[&entry]).unwrap_or(Value::Null);
            value["rules"] = Value::Array(vec![rule(
                "",
                &["namespaces", "namespaces/status", "namespaces/finalize"],
                &["CREATE", "UPDATE"],
                "Cluster",
            )]);
            out.push(value);
        }
        let policy = reservation::failure_policy(config, enforce_policy);
        let not_excluded = serde_json::to_value(&not_excluded).unwrap_or(Value::Null);
        if let Some(fields) = reservation::fields(config, not_excluded) {
            let mut value = common(reservation::entry_name(name), policy);
            for (field, v) in fields {
                value[field] = v;
            }
            out.push(value);
        }
    }
    out
}

/// The JSON Patch that makes the live `webhooks` list of configuration `name`
/// (of `kind`) agree with what pod-director owns there ([`owned_entries`]): for each
/// drifted entry, a `test` of its name at its index (so a concurrent reorder fails the
/// patch instead of hitting another entry), then an `add` (a replace, or a restore of a
/// field someone removed) of each field that differs — also an `objectSelector` the
/// chart does not render must be `{}` (the API server's default) — and a `remove` of
/// `matchConditions` it does not render, which would narrow what the entry sees.
/// `clientConfig` and entries pod-director does not own are never touched.
/// Returns the operations and the names of the entries they change.
pub(crate) fn plan_patch(
    kind: Kind,
    name: &str,
    webhooks: &[Value],
    config: &Config,
    settings: &EntrySettings,
    on_policy: &BTreeSet<String>,
) -> Result<(Vec<PatchOperation>, Vec<String>), ReconcileError> {
    let mut operations = Vec::new();
    let mut changed = Vec::new();
    let reservation_name = reservation::entry_name(name);
    // Rendered only when needed: added when missing, removed when no longer wanted.
    let mut optional: BTreeMap<String, bool> = PolicyEntry::ALL
        .into_iter()
        .map(|e| (e.name(kind.webhook(), name), false))
        .collect();
    optional.insert(reservation_name.clone(), false);
    for want in owned_entries(kind, name, config, settings, on_policy) {
        let entry_name = want["name"].as_str().unwrap_or_default().to_owned();
        let index = webhooks.iter().position(|w| w["name"] == entry_name.as_str());
        if let Some(wanted) = optional.get_mut(&entry_name) {
            *wanted = true;
            if index.is_none() {
                // Added with the enforce entry's clientConfig (the reservation entry: its /validate-reservation).
                let enforce = webhooks
                    .iter()
                    .find(|w| w["name"] == Entry::Enforce.name(kind.webhook(), name).as_str());
                let client = if entry_name == reservation_name {
                    enforce.and_then(reservation::client_config_from)
                } else {
                    enforce.and_then(|w| w.get("clientConfig")).cloned()
                };
                let client = client.ok_or_else(|| ReconcileError::NoClientConfig {
                    name: name.to_owned(),
                    entry: entry_name.clone(),
                    from: Entry::Enforce.name(kind.webhook(), name),
                })?;
                let mut entry = want;
                entry["clientConfig"] = client;
                if let Some(last) = webhooks.len().checked_sub(1) {
                    operations.push(PatchOperation::Test(TestOperation {
                        path: pointer(&["webhooks", &last.to_string(), "name"]),
                        value: webhooks[last]["name"].clone(),
                    }));
                }
                operations.push(PatchOperation::Add(AddOperation {
                    path: pointer(&["webhooks", "-"]),
                    value: entry,
                }));
                changed.push(entry_name);
                continue;
            }
        }
        let Some(index) = index else {
            return Err(ReconcileError::MissingEntry {
                kind: kind.as_str(),
                name: name.to_owned(),
                entry: entry_name,
            });
        };
        let ops = entry_operations(index, &webhooks[index], &want);
        if !ops.is_empty() {
            operations.push(PatchOperation::Test(TestOperation {
                path: pointer(&["webhooks", &index.to_string(), "name"]),
                value: Value::String(entry_name.clone()),
            }));
            operations.extend(ops);
            changed.push(entry_name);
        }
    }
    // No group reserves (or is on policies) any more: the entry goes, so no pod is sent for
    // nothing. Removed from the last index down, so that each index still holds.
    let mut unwanted: Vec<(usize, String)> = optional
        .into_iter()
        .filter(|(_, wanted)| !wanted)
        .filter_map(|(entry, _)| {
            webhooks
                .iter()
                .position(|w| w["name"] == entry.as_str())
                .map(|i| (i, entry))
        })
        .collect();
    unwanted.sort_by_key(|(index, _)| std::cmp::Reverse(*index));
    for (index, entry) in unwanted {
        let i = index.to_string();
        operations.push(PatchOperation::Test(TestOperation {
            path: pointer(&["webhooks", &i, "name"]),
            value: Value::String(entry.clone()),
        }));
        operations.push(PatchOperation::Remove(RemoveOperation {
            path: pointer(&["webhooks", &i]),
        }));
        changed.push(entry);
    }
    Ok((operations, changed))
}

/// The operations that make the live entry at `index` equal to `want` (but its clientConfig).
fn entry_operations(index: usize, live: &Value, want: &Value) -> Vec<PatchOperation> {
    let i = index.to_string();
    let mut ops = Vec::new();
    let mut fields: Vec<(String, Value)> = want
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(field, _)| field.as_str() != "name")
        .map(|(field, value)| (field.clone(), value.clone()))
        .collect();
    if want.get("objectSelector").is_none() {
        fields.push(("objectSelector".to_owned(), serde_json::json!({})));
    }
    for (field, value) in fields {
        let is_default_empty = field == "objectSelector" && value == serde_json::json!({});
        let same = live.get(&field) == Some(&value) || (is_default_empty && live.get(&field).is_none());
        if !same {
            ops.push(PatchOperation::Add(AddOperation {
                path: pointer(&["webhooks", &i, &field]),
                value,
            }));
        }
    }
    if live.get("matchConditions").is_some() && want.get("matchConditions").is_none() {
        ops.push(PatchOperation::Remove(RemoveOperation {
            path: pointer(&["webhooks", &i, "matchConditions"]),
        }));
    }
    ops
}

/// Keeps the named webhook configurations in step with the live configuration.
pub struct Reconciler {
    pub client: Client,
    pub targets: Vec<(Kind, String)>,
    pub entries: EntrySettings,
    pub live: Arc<ArcSwap<Loaded>>,
    pub metrics: ReconcileMetrics,
    /// The admission policies of groups on `enforceWith: policy` (`--admission-policies`);
    /// `None`: not reconciled, every group stays on the webhook.
    pub policies: Option<Arc<admission_policies::PolicySync>>,
}

async fn reconcile_one<K>(
    api: Api<K>,
    kind: Kind,
    name: &str,
    config: &Config,
    entries: &EntrySettings,
    on_policy: &BTreeSet<String>,
) -> Result<Vec<String>, ReconcileError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + fmt::Debug,
{
    let object = api.get(name).await.map_err(|source| ReconcileError::Read {
        kind: kind.as_str(),
        name: name.to_owned(),
        source,
    })?;
    let json = serde_json::to_value(&object).unwrap_or(Value::Null);
    let webhooks = json["webhooks"].as_array().map(Vec::as_slice).unwrap_or_default();
    let (operations, changed) = plan_patch(kind, name, webhooks, config, entries, on_policy)?;
    if operations.is_empty() {
        return Ok(changed);
    }
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    api.patch(name, &params, &Patch::Json::<()>(json_patch::Patch(operations)))
        .await
        .map_err(|source| ReconcileError::Patch {
            kind: kind.as_str(),
            name: name.to_owned(),
            source,
        })?;
    Ok(changed)
}

impl Reconciler {
    /// One pass over every target: patches what drifted. Counts and logs the result;
    /// `false` when some target could not be reconciled.
    pub async fn reconcile(&self) -> bool {
        let loaded = self.live.load_full();
        let attempt = async {
            let mut errors: Vec<ReconcileError> = Vec::new();
            let mut patched = false;
            // The policies first: a group leaves the webhook only once they are in place.
            let mut wanted = BTreeMap::new();
            let mut on_policy = BTreeSet::new();
            let mut served = false;
            if let Some(sync) = &self.policies {
                match sync.served(&self.client).await {
                    Ok(true) => {
                        served = true;
                        wanted = admission_policies::wanted(&loaded.config);
                        let (handed, error) = sync.apply(&self.client, &wanted).await;
                        on_policy = handed;
                        errors.extend(error.map(ReconcileError::from));
                    }
                    Ok(false) => {}
                    Err(err) => errors.push(err.into()),
                }
                sync.set_pending(sync.pending(&wanted, &on_policy));
            }
            self.metrics.policy_groups.set(crate::metrics::gauge(on_policy.len()));
            for (kind, name) in &self.targets {
                let result = match kind {
                    Kind::Mutating => {
                        let api: Api<MutatingWebhookConfiguration> = Api::all(self.client.clone());
                        reconcile_one(api, *kind, name, &loaded.config, &self.entries, &on_policy).await
                    }
                    Kind::Validating => {
                        let api: Api<ValidatingWebhookConfiguration> = Api::all(self.client.clone());
                        reconcile_one(api, *kind, name, &loaded.config, &self.entries, &on_policy).await
                    }
                };
                match result {
                    Ok(changed) if changed.is_empty() => debug!(
                        configuration = name.as_str(),
                        kind = kind.as_str(),
                        config.revision = loaded.revision.as_str(),
                        "webhook configuration already matches the configuration"
                    ),
                    Ok(changed) => {
                        patched = true;
                        info!(
                            configuration = name.as_str(),
                            kind = kind.as_str(),
                            entries = changed.join(",").as_str(),
                            config.revision = loaded.revision.as_str(),
                            "webhook configuration reconciled: the entries pod-director owns follow the configuration"
                        );
                    }
                    Err(err) => errors.push(err),
                }
            }
            // Deleted only once the webhook entries enforce every group that left the policies.
            if let Some(sync) = &self.policies
                && served
                && errors.is_empty()
                && let Err(err) = sync.prune(&self.client, &wanted).await
            {
                errors.push(err.into());
            }
            (patched, errors)
        };
        let (patched, errors) = match tokio::time::timeout(ATTEMPT_TIMEOUT, attempt).await {
            Ok(done) => done,
            Err(_) => (false, vec![ReconcileError::Timeout(ATTEMPT_TIMEOUT)]),
        };
        for err in &errors {
            warn!(
                error = %err,
                config.revision = loaded.revision.as_str(),
                "webhook configuration not reconciled; retrying (admission is not affected, but the \
                 webhook entries may not match the configuration's modes until it succeeds)"
            );
        }
        let result = if !errors.is_empty() {
            ReconcileResult::Error
        } else if patched {
            ReconcileResult::Patched
        } else {
            ReconcileResult::Unchanged
        };
        self.metrics.webhook_reconciled(result);
        errors.is_empty()
    }
}

/// Reconciles now, after every change announced on `changed`, every `resync`, and
/// after a failure with a growing delay (1 s doubling to 30 s), until `shutdown`.
pub fn spawn(
    reconciler: Reconciler,
    mut changed: watch::Receiver<String>,
    resync: Duration,
    mut shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let resync = resync.max(Duration::from_secs(1));
        let mut retry = RETRY_FIRST;
        loop {
            changed.mark_unchanged();
            let wait = if reconciler.reconcile().await {
                retry = RETRY_FIRST;
                if reconciler.policies.as_ref().is_some_and(|p| p.is_pending()) {
                    admission_policies::HANDOVER_DELAY
                } else {
                    resync
                }
            } else {
                let wait = retry.min(resync);
                retry = (retry * 2).min(RETRY_MAX);
                wait
            };
            tokio::select! {
                _ = shutdown.changed() => return,
                result = changed.changed() => {
                    if result.is_err() {
                        return;
                    }
                }
                () = tokio::time::sleep(wait) => {}
            }
        }
    })
}

named_enum! {
    /// What one reconciliation of the webhook configurations ended with (`result` label).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ReconcileResult {
        /// Some namespaceSelector differed from the live configuration's and was patched.
        Patched => "patched",
        /// Every namespaceSelector already matched.
        Unchanged => "unchanged",
        /// The configurations could not be read or patched (retried).
        Error => "error",
    }
}

/// `pod_director_webhook_reconciles_total`.
#[derive(Debug, Clone)]
pub struct ReconcileMetrics {
    webhook_reconciles: Family<ResultLabels, Counter>,
    /// `pod_director_policy_groups`: groups whose pods are handed over to their admission policies.
    pub policy_groups: Gauge,
}

impl ReconcileMetrics {
    pub fn register(r: &mut Registry) -> Self {
        let webhook_reconciles = register(
            r,
            "webhook_reconciles",
            "Reconciliations of the webhook configurations' namespaceSelectors with the live configuration, by result",
            Family::default(),
        );
        let policy_groups = register(
            r,
            "policy_groups",
            "Groups in enforce whose pods are enforced by their admission policies (enforceWith: policy, handed over \
             from the webhook)",
            Gauge::default(),
        );
        Self {
            webhook_reconciles,
            policy_groups,
        }
    }

    /// Exports every result at 0 before the first reconciliation.
    pub fn initialise(&self) {
        for result in ReconcileResult::ALL {
            let _ = self.webhook_reconciles.get_or_create(&ResultLabels {
                result: result.as_str(),
            });
        }
    }

    pub fn webhook_reconciled(&self, result: ReconcileResult) {
        self.webhook_reconciles
            .get_or_create(&ResultLabels {
                result: result.as_str(),
            })
            .inc();
    }
}

pub(crate) mod admission_policies;
pub(crate) mod reservation;

#[cfg(test)]
mod tests;
