//! The entries pod-director owns, as a function of the configuration: their namespaceSelectors
//! ([`namespace_selectors`]), the guard's objectSelectors, every field but `clientConfig`
//! ([`owned_entries`]), and the JSON Patch that makes a live configuration equal to them
//! ([`plan_patch`]). Pure: the product's reconciler (`cluster/webhooks.rs`) reads and patches.
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
//! and every entry also has `kubernetes.io/metadata.name NotIn [excluded]`. The validating
//! `observe` entry (and `default-group` while it follows `observe`) sends `/validate` only the
//! pod CREATEs of the `shadowValidation` sample ([`SHADOW_SAMPLE_CONDITION`]): `/mutate` predicts
//! the others' fate. An
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
//! While `inTreePlugins` is set, each configuration starts with the in-tree plugins' entry
//! ([`in_tree`], `in-tree.<mutate|validate>.<configuration>.pod-director.io`), rendered only then.
//!
//! [`owned_entries`] is every field of those entries but `clientConfig`; the
//! chart's `templates/webhooks.yaml` renders the same, held equal by the goldens
//! in `tests/webhook_selectors/` (checked against `helm template` by
//! `scripts/chart-test.sh selectors` and against this code by
//! `tests/webhook_selectors.rs`).

use std::collections::{BTreeMap, BTreeSet};

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, RemoveOperation, TestOperation};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use serde_json::Value;

use crate::compile::admission_policies;
use crate::config::{Config, Mode};

/// The label the API server sets on every namespace to the namespace's name.
pub const METADATA_NAME_LABEL: &str = "kubernetes.io/metadata.name";
/// Excluded by every entry in addition to `excludedNamespaces` (as the chart does).
pub const ALWAYS_EXCLUDED: &str = "kube-system";
/// What an entry with nothing to serve selects: `kubernetes.io/metadata.name In
/// [none.pod-director.io]`. A valid label value that no namespace carries there —
/// the API server sets that label to the namespace's name, and a namespace name has no dots.
pub const NO_NAMESPACE: &str = "none.pod-director.io";
/// Field manager of the reconciler's patches.
pub const FIELD_MANAGER: &str = "pod-director";

named_enum! {
    /// One of the chart's pod webhook entries.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub enum PodEntry {
        Enforce => "enforce",
        Observe => "observe",
        DefaultGroup => "default-group",
        UnknownGroup => "unknown-group",
    }
}

impl PodEntry {
    /// The entry's name in `configuration`, as the chart writes it:
    /// `enforce.mutate.pod-director.pod-director.io`.
    pub fn name(self, webhook: &str, configuration: &str) -> String {
        format!("{}.{webhook}.{configuration}.pod-director.io", self.as_str())
    }
}

pub fn requirement(key: &str, operator: &str, values: Option<Vec<String>>) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.to_owned(),
        operator: operator.to_owned(),
        values,
    }
}

pub fn selector(requirements: Vec<LabelSelectorRequirement>) -> LabelSelector {
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
pub(crate) fn default_group_follows(config: &Config) -> PodEntry {
    let enforced = config
        .default_group
        .as_ref()
        .and_then(|name| config.groups.get(name))
        .is_some_and(|group| config.mode_of(group) == Mode::Enforce);
    if enforced { PodEntry::Enforce } else { PodEntry::Observe }
}

/// Each entry's namespaceSelector for `config` — the chart's `pod-director.webhookEntries` —
/// once the groups of `on_policy` are enforced by their admission policies: those leave the
/// `enforce` entry (for [`PolicyEntry`]'s). The chart renders them before any hand-over (empty).
pub fn namespace_selectors(config: &Config, on_policy: &BTreeSet<String>) -> BTreeMap<PodEntry, LabelSelector> {
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
        (PodEntry::Enforce, labelled(enforce)),
        (PodEntry::Observe, labelled(observe)),
        (PodEntry::DefaultGroup, default_group),
        (PodEntry::UnknownGroup, selector(unknown)),
    ])
}

named_enum! {
    /// The pod entries for groups enforced by admission policies, rendered only while some are
    /// (the reconciler adds them with the `enforce` entry's clientConfig, and removes them).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub enum PolicyEntry {
        /// failurePolicy as `enforce`: what the policies leave to the webhook ([`admission_policies::WEBHOOK_ONLY`]).
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

pub fn pointer(tokens: &[&str]) -> PointerBuf {
    PointerBuf::from_tokens(tokens.iter().copied())
}

/// The chart values that shape the entries besides the configuration: the serve flags the
/// chart passes (`webhook.timeoutSeconds`, `webhook.failurePolicy.*`), defaulting to the chart's defaults.
/// (The product's `serve` flags fill it: `cli/serve.rs`.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntrySettings {
    /// timeoutSeconds of every entry pod-director owns (the chart's `webhook.timeoutSeconds`).
    pub webhook_timeout_seconds: u8,
    /// failurePolicy of the entries for groups in enforce (`webhook.failurePolicy.enforce`).
    pub webhook_failure_policy_enforce: String,
    /// failurePolicy of the entry for labels naming no group (`webhook.failurePolicy.unknownGroup`).
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
pub(crate) fn guard_object_selectors(config: &Config) -> BTreeMap<GuardEntry, LabelSelector> {
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
    let default_enforced = default_group_follows(config) == PodEntry::Enforce;
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
pub(crate) fn guard_failure_policy<'s>(config: &Config, entry: GuardEntry, settings: &'s EntrySettings) -> &'s str {
    let enforce = settings.webhook_failure_policy_enforce.as_str();
    match (entry, config.namespace_guard.mode) {
        (GuardEntry::Enforce, None | Some(Mode::Enforce)) | (GuardEntry::Observe, Some(Mode::Enforce)) => enforce,
        _ => "Ignore",
    }
}

pub fn rule(group: &str, resources: &[&str], operations: &[&str], scope: &str) -> Value {
    serde_json::json!({
        "apiGroups": [group],
        "apiVersions": ["v1"],
        "operations": operations,
        "resources": resources,
        "scope": scope,
    })
}

/// The rules of a pod entry: pods (`operations`), DaemonSets, and at `/validate` (`Validating`)
/// the bindings of pods to nodes (`pods/binding` CREATE), which set a pending pod's node without
/// a pod write (the group's nodes are decided like a `spec.nodeName` at CREATE).
fn pod_rules(kind: Kind, operations: &[&str]) -> Vec<Value> {
    let mut rules = vec![
        rule("", &["pods"], operations, "Namespaced"),
        rule("apps", &["daemonsets"], &["CREATE", "UPDATE"], "Namespaced"),
    ];
    if kind == Kind::Validating {
        rules.push(rule("", &["pods/binding"], &["CREATE"], "Namespaced"));
    }
    rules
}

/// The matchCondition of the `observe` validating entry (and of `default-group` when it follows
/// `observe`): `/mutate` predicts the fate of a dryRun or warn group's pod CREATE, so `/validate`
/// judges only the sample `shadowValidation` draws from them (one controller's pods in 16 and
/// every pod without an owner by default); every other request it is sent as before — pods naming
/// `spec.nodeName` (the Node is checked at `/validate`), UPDATEs, DaemonSets and bindings (a
/// Binding has no spec: asked first). `None` with `shadowValidation: every`.
fn shadow_validation_condition(config: &Config) -> Option<Value> {
    let sample = admission_policies::owner_sample(config.shadow_validation)?;
    Some(serde_json::json!({
        "name": SHADOW_SAMPLE_CONDITION,
        "expression": format!(
            "({}) || ({}) || {sample}",
            reservation::IS_BINDING,
            admission_policies::WEBHOOK_ONLY
        ),
    }))
}

/// The name of [`shadow_validation_condition`].
pub const SHADOW_SAMPLE_CONDITION: &str = "predicted-at-mutate-or-sampled";

/// The matchCondition that keeps a trusted scheduler's bindings (`trustedSchedulers`) away
/// from an entry: they never reach pod-director ([`reservation::binding_expression`]).
fn binding_condition(config: &Config) -> Value {
    serde_json::json!({
        "name": reservation::BINDING_CONDITION,
        "expression": reservation::binding_expression(config),
    })
}

/// Every entry pod-director owns in configuration `name` of `kind`, each with every field
/// the chart renders for it except `clientConfig` (where the webhook is served and the CA
/// bundle are the installation's: a Service or URL, cert-manager's injection), in the
/// chart's order. The chart's `templates/webhooks.yaml` renders the same; the goldens in
/// `tests/webhook_selectors/` hold the two equal.
///
/// `handed`: the groups whose pods are handed over to their admission policies
/// ([`crate::compile::admission_policies`]); while any leaves this configuration's `enforce` entry
/// ([`leaving`]), the [`PolicyEntry`] entries follow.
pub fn owned_entries(
    kind: Kind,
    name: &str,
    config: &Config,
    settings: &EntrySettings,
    handed: &BTreeSet<String>,
) -> Vec<Value> {
    let on_policy = &leaving(kind, config, handed);
    let selectors = namespace_selectors(config, on_policy);
    let enforce_policy = settings.webhook_failure_policy_enforce.as_str();
    let pod_operations: &[&str] = match kind {
        Kind::Mutating => &["CREATE"],
        Kind::Validating => &["CREATE", "UPDATE"],
    };
    let rules = Value::Array(pod_rules(kind, pod_operations));
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
    let mut out: Vec<Value> = in_tree::entry(kind, name, config, settings).into_iter().collect();
    out.extend(PodEntry::ALL.into_iter().map(|entry| {
        let policy = match entry {
            PodEntry::Enforce => enforce_policy,
            PodEntry::Observe => "Ignore",
            PodEntry::DefaultGroup if default_group_follows(config) == PodEntry::Enforce => enforce_policy,
            PodEntry::DefaultGroup => "Ignore",
            PodEntry::UnknownGroup => settings.webhook_failure_policy_unknown_group.as_str(),
        };
        let mut value = common(entry.name(kind.webhook(), name), policy);
        value["namespaceSelector"] = serde_json::to_value(&selectors[&entry]).unwrap_or(Value::Null);
        value["rules"] = rules.clone();
        if kind == Kind::Validating {
            let mut conditions = vec![binding_condition(config)];
            let observed = entry == PodEntry::Observe
                || (entry == PodEntry::DefaultGroup && default_group_follows(config) == PodEntry::Observe);
            if let Some(condition) = shadow_validation_condition(config).filter(|_| observed) {
                conditions.push(condition);
            }
            value["matchConditions"] = Value::Array(conditions);
        }
        value
    }));
    let policy_groups: Vec<String> = on_policy.iter().cloned().collect();
    let excluded_names = requirement(METADATA_NAME_LABEL, "NotIn", Some(excluded(config)));
    for entry in PolicyEntry::ALL {
        if policy_groups.is_empty() || (entry == PolicyEntry::Observe && kind == Kind::Validating) {
            continue;
        }
        let (policy, condition) = match entry {
            PolicyEntry::Fallback => (enforce_policy, Some(admission_policies::WEBHOOK_ONLY.to_owned())),
            PolicyEntry::Observe => (
                "Ignore",
                admission_policies::observation_condition(config.policy_observation),
            ),
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
        value["rules"] = rules.clone();
        value["matchConditions"] = if kind == Kind::Validating {
            // The policies decide no binding: the webhook does (the object of a Binding has no spec).
            serde_json::json!([
                { "name": entry.condition_name(), "expression": format!("({}) || ({condition})", reservation::IS_BINDING) },
                binding_condition(config),
            ])
        } else {
            serde_json::json!([{ "name": entry.condition_name(), "expression": condition }])
        };
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

/// The groups of `handed` that leave the `enforce` entry of configuration `kind` for its
/// [`PolicyEntry`] entries: at `/validate` every one (a policy checks their final pods), at
/// `/mutate` those the policies also place (`enforceWith: policy`), not those the webhook
/// still places (`webhookAndPolicy`: one webhook call per pod).
pub fn leaving(kind: Kind, config: &Config, handed: &BTreeSet<String>) -> BTreeSet<String> {
    handed
        .iter()
        .filter(|name| {
            kind == Kind::Validating || config.groups.get(name.as_str()).is_some_and(|g| config.on_policy(g))
        })
        .cloned()
        .collect()
}

/// Why the entries of a live configuration cannot be made equal to the owned ones.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
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
pub fn plan_patch(
    kind: Kind,
    name: &str,
    webhooks: &[Value],
    config: &Config,
    settings: &EntrySettings,
    handed: &BTreeSet<String>,
) -> Result<(Vec<PatchOperation>, Vec<String>), PlanError> {
    let mut operations = Vec::new();
    let mut changed = Vec::new();
    let reservation_name = reservation::entry_name(name);
    let in_tree_name = in_tree::entry_name(kind, name);
    // The in-tree entry goes first, once every other operation is done (their indices hold).
    let mut in_tree_entry = None;
    // Rendered only when needed: added when missing, removed when no longer wanted.
    let mut optional: BTreeMap<String, bool> = PolicyEntry::ALL
        .into_iter()
        .map(|e| (e.name(kind.webhook(), name), false))
        .collect();
    optional.insert(reservation_name.clone(), false);
    optional.insert(in_tree_name.clone(), false);
    for want in owned_entries(kind, name, config, settings, handed) {
        let entry_name = want["name"].as_str().unwrap_or_default().to_owned();
        let index = webhooks.iter().position(|w| w["name"] == entry_name.as_str());
        if let Some(wanted) = optional.get_mut(&entry_name) {
            *wanted = true;
            if index.is_none() {
                // Added with the enforce entry's clientConfig (the reservation entry: its /validate-reservation).
                let enforce = webhooks
                    .iter()
                    .find(|w| w["name"] == PodEntry::Enforce.name(kind.webhook(), name).as_str());
                let client = if entry_name == reservation_name {
                    enforce.and_then(reservation::client_config_from)
                } else if entry_name == in_tree_name {
                    enforce.and_then(|w| in_tree::client_config_from(kind, w))
                } else {
                    enforce.and_then(|w| w.get("clientConfig")).cloned()
                };
                let client = client.ok_or_else(|| PlanError::NoClientConfig {
                    name: name.to_owned(),
                    entry: entry_name.clone(),
                    from: PodEntry::Enforce.name(kind.webhook(), name),
                })?;
                let mut entry = want;
                entry["clientConfig"] = client;
                if entry_name == in_tree_name {
                    in_tree_entry = Some(entry);
                    changed.push(entry_name);
                    continue;
                }
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
            return Err(PlanError::MissingEntry {
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
    let removed: BTreeSet<usize> = unwanted.iter().map(|(index, _)| *index).collect();
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
    if let Some(entry) = in_tree_entry {
        let first = (0..webhooks.len()).find(|i| !removed.contains(i));
        if let Some(first) = first {
            operations.push(PatchOperation::Test(TestOperation {
                path: pointer(&["webhooks", "0", "name"]),
                value: webhooks[first]["name"].clone(),
            }));
        }
        operations.push(PatchOperation::Add(AddOperation {
            path: pointer(&["webhooks", "0"]),
            value: entry,
        }));
    }
    Ok((operations, changed))
}

/// The operations that make the live entry at `index` equal to `want` (but its clientConfig).
pub(crate) fn entry_operations(index: usize, live: &Value, want: &Value) -> Vec<PatchOperation> {
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

pub mod in_tree;
pub mod reservation;

#[cfg(test)]
mod tests;
