//! The webhook entries' namespaceSelectors as a function of the live
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
//! entry that does not exist. [`namespace_selectors`] is that function; the
//! chart's `pod-director.webhookEntries` is the same one, held equal by the
//! goldens in `tests/webhook_selectors/` (checked against `helm template` by
//! `scripts/chart-test.sh selectors` and against this code by
//! `tests/webhook_selectors.rs`).
//!
//! [`spawn`] patches the entries whose namespaceSelector (and, for
//! `default-group`, failurePolicy) differs from the live configuration's, on
//! start, after every successful reload and every resync interval; failures are
//! logged, counted and retried, and never touch admission or readiness.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use json_patch::jsonptr::PointerBuf;
use json_patch::{PatchOperation, ReplaceOperation, TestOperation};
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, Resource};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::config::{Config, Loaded, Mode};
use crate::metrics::{ResultLabels, register};

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

/// Each entry's namespaceSelector for `config` — the chart's `pod-director.webhookEntries`.
pub fn namespace_selectors(config: &Config) -> BTreeMap<Entry, LabelSelector> {
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
    #[error("cannot patch {kind} {name}: {source}")]
    Patch {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("reconciling the webhook configurations took longer than {0:?}")]
    Timeout(Duration),
}

fn pointer(tokens: &[&str]) -> PointerBuf {
    PointerBuf::from_tokens(tokens.iter().copied())
}

/// The JSON Patch that makes the live `webhooks` list of configuration `name`
/// (of `kind`) agree with `config`: for each drifted entry, a `test` of its name at
/// its index (so a concurrent reorder fails the patch instead of hitting another
/// entry) and a `replace` of its namespaceSelector (and failurePolicy for
/// `default-group`, and for the namespace label guard's entry). Entries
/// pod-director does not own are never touched.
/// Returns the operations and the names of the entries they change.
pub(crate) fn plan_patch(
    kind: Kind,
    name: &str,
    webhooks: &[Value],
    config: &Config,
) -> Result<(Vec<PatchOperation>, Vec<String>), ReconcileError> {
    let selectors = namespace_selectors(config);
    let index_of = |entry_name: &str| webhooks.iter().position(|w| w["name"] == entry_name);
    let mut operations = Vec::new();
    let mut changed = Vec::new();
    for entry in Entry::ALL {
        let entry_name = entry.name(kind.webhook(), name);
        let Some(index) = index_of(&entry_name) else {
            return Err(ReconcileError::MissingEntry {
                kind: kind.as_str(),
                name: name.to_owned(),
                entry: entry_name,
            });
        };
        let live = &webhooks[index];
        let i = index.to_string();
        let want = serde_json::to_value(&selectors[&entry]).unwrap_or(Value::Null);
        let mut ops = Vec::new();
        if live["namespaceSelector"] != want {
            ops.push(PatchOperation::Replace(ReplaceOperation {
                path: pointer(&["webhooks", &i, "namespaceSelector"]),
                value: want,
            }));
        }
        if entry == Entry::DefaultGroup {
            let follows = default_group_follows(config).name(kind.webhook(), name);
            let policy = index_of(&follows)
                .map(|j| webhooks[j]["failurePolicy"].clone())
                .ok_or_else(|| ReconcileError::MissingEntry {
                    kind: kind.as_str(),
                    name: name.to_owned(),
                    entry: follows,
                })?;
            if live["failurePolicy"] != policy {
                ops.push(PatchOperation::Replace(ReplaceOperation {
                    path: pointer(&["webhooks", &i, "failurePolicy"]),
                    value: policy,
                }));
            }
        }
        if !ops.is_empty() {
            operations.push(PatchOperation::Test(TestOperation {
                path: pointer(&["webhooks", &i, "name"]),
                value: Value::String(entry_name.clone()),
            }));
            operations.extend(ops);
            changed.push(entry_name);
        }
    }
    if kind == Kind::Validating {
        // The namespace label guard's entry, when the chart rendered it: only its
        // failurePolicy follows the live guard mode (the enforce entry's policy in
        // enforce, Ignore otherwise), so a guard switched to enforce in the ConfigMap
        // does not fail open while pod-director is down.
        let guard = guard_entry_name(name);
        if let Some(index) = index_of(&guard) {
            let policy = if config.namespace_guard.mode == Mode::Enforce {
                index_of(&Entry::Enforce.name(kind.webhook(), name))
                    .map(|j| webhooks[j]["failurePolicy"].clone())
                    .unwrap_or_else(|| Value::String("Fail".to_owned()))
            } else {
                Value::String("Ignore".to_owned())
            };
            if webhooks[index]["failurePolicy"] != policy {
                let i = index.to_string();
                operations.push(PatchOperation::Test(TestOperation {
                    path: pointer(&["webhooks", &i, "name"]),
                    value: Value::String(guard.clone()),
                }));
                operations.push(PatchOperation::Replace(ReplaceOperation {
                    path: pointer(&["webhooks", &i, "failurePolicy"]),
                    value: policy,
                }));
                changed.push(guard);
            }
        }
    }
    Ok((operations, changed))
}

/// The name of the chart's namespace label guard entry in configuration `name`.
pub(crate) fn guard_entry_name(name: &str) -> String {
    format!("namespace-guard.{name}.pod-director.io")
}

/// Keeps the named webhook configurations in step with the live configuration.
pub struct Reconciler {
    pub client: Client,
    pub targets: Vec<(Kind, String)>,
    pub live: Arc<ArcSwap<Loaded>>,
    pub metrics: ReconcileMetrics,
}

async fn reconcile_one<K>(api: Api<K>, kind: Kind, name: &str, config: &Config) -> Result<Vec<String>, ReconcileError>
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
    let (operations, changed) = plan_patch(kind, name, webhooks, config)?;
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
            let mut errors = Vec::new();
            let mut patched = false;
            for (kind, name) in &self.targets {
                let result = match kind {
                    Kind::Mutating => {
                        let api: Api<MutatingWebhookConfiguration> = Api::all(self.client.clone());
                        reconcile_one(api, *kind, name, &loaded.config).await
                    }
                    Kind::Validating => {
                        let api: Api<ValidatingWebhookConfiguration> = Api::all(self.client.clone());
                        reconcile_one(api, *kind, name, &loaded.config).await
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
                            "webhook configuration reconciled: namespaceSelectors follow the configuration"
                        );
                    }
                    Err(err) => errors.push(err),
                }
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
                resync
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
}

impl ReconcileMetrics {
    pub fn register(r: &mut Registry) -> Self {
        let webhook_reconciles = register(
            r,
            "webhook_reconciles",
            "Reconciliations of the webhook configurations' namespaceSelectors with the live configuration, by result",
            Family::default(),
        );
        Self { webhook_reconciles }
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

#[cfg(test)]
mod tests;
