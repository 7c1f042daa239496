//! The reconciler that keeps the chart's webhook configurations equal to the entries
//! pod-director owns as a function of the live configuration (the engine's
//! [`pod_director_engine::compile::webhook_entries`] compiles them and plans the patch).
//!
//! [`spawn`] patches every field that differs from them — a namespaceSelector
//! after a mode change, a failurePolicy or timeout edited by hand, a rule or
//! objectSelector narrowed — on start, after every successful reload and every
//! resync interval; failures are logged, counted and retried, and never touch
//! admission or readiness. `clientConfig` is not pod-director's: where it is
//! served and the CA bundle belong to the installation (Service or URL,
//! cert-manager's injection), and a wrong one shows at once as failed calls.
//! Another writer that keeps changing a field back is yielded to, not patched forever ([`yields`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
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
use pod_director_engine::config::{Config, Loaded};

use pod_director_engine::compile::webhook_entries::{EntrySettings, FIELD_MANAGER, Kind, PlanError, plan_patch};

/// Longest time one reconciliation (reads and patches) may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// First and largest wait before retrying a failed reconciliation.
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(30);

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
    #[error(transparent)]
    Plan(#[from] PlanError),
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

/// Keeps the named webhook configurations in step with the live configuration.
pub(crate) struct Reconciler {
    pub client: Client,
    pub targets: Vec<(Kind, String)>,
    pub entries: EntrySettings,
    pub live: Arc<ArcSwap<Loaded>>,
    pub metrics: ReconcileMetrics,
    /// The admission policies of groups on `enforceWith: policy` (`--admission-policies`);
    /// `None`: not reconciled, every group stays on the webhook.
    pub policies: Option<Arc<admission_policies::PolicySync>>,
    /// The fields re-asserted so far, to yield to a writer that keeps changing one back.
    pub yields: std::sync::Mutex<yields::Yields>,
}

/// What one configuration's reconciliation changed: the entries patched, the fields yielded.
type Reconciled = (Vec<String>, Vec<yields::Yield>);

async fn reconcile_one<K>(
    api: Api<K>,
    kind: Kind,
    name: &str,
    loaded: (&Config, &EntrySettings, &BTreeSet<String>),
    yields: &std::sync::Mutex<yields::Yields>,
) -> Result<Reconciled, ReconcileError>
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
    let (config, entries, on_policy) = loaded;
    let (operations, changed) = plan_patch(kind, name, webhooks, config, entries, on_policy)?;
    let settled = yields.lock().unwrap_or_else(std::sync::PoisonError::into_inner).settle(
        name,
        &json,
        operations,
        changed,
        std::time::Instant::now(),
    );
    let (operations, changed) = (settled.operations, settled.changed);
    if operations.is_empty() {
        return Ok((changed, settled.yielded));
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
    Ok((changed, settled.yielded))
}

impl Reconciler {
    /// One pass over every target: patches what drifted. Counts and logs the result;
    /// `false` when some target could not be reconciled.
    pub(crate) async fn reconcile(&self) -> bool {
        let loaded = self.live.load_full();
        let attempt = async {
            let mut errors: Vec<ReconcileError> = Vec::new();
            let mut patched = false;
            // The policies first: a group leaves the webhook only once they are in place.
            let mut wanted = BTreeMap::new();
            let mut on_policy = BTreeSet::new();
            let mut served = false;
            if let Some(sync) = &self.policies {
                match sync.servable(&self.client, &loaded.config).await {
                    Ok(servable) => {
                        served = true;
                        wanted = servable;
                        let (handed, error) = sync.apply(&self.client, &wanted).await;
                        on_policy = handed;
                        errors.extend(error.map(ReconcileError::from));
                    }
                    Err(err) => errors.push(err.into()),
                }
                sync.set_pending(sync.pending(&wanted, &on_policy));
            }
            self.metrics.policy_groups.set(crate::metrics::gauge(on_policy.len()));
            let yielded = || {
                self.yields
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .yielded()
            };
            for (kind, name) in &self.targets {
                let wants = (&loaded.config, &self.entries, &on_policy);
                let result = match kind {
                    Kind::Mutating => {
                        let api: Api<MutatingWebhookConfiguration> = Api::all(self.client.clone());
                        reconcile_one(api, *kind, name, wants, &self.yields).await
                    }
                    Kind::Validating => {
                        let api: Api<ValidatingWebhookConfiguration> = Api::all(self.client.clone());
                        reconcile_one(api, *kind, name, wants, &self.yields).await
                    }
                };
                let result = result.map(|(changed, yielded)| {
                    for y in &yielded {
                        self.metrics.yielded_field(&y.entry, &y.field);
                        warn!(
                            configuration = name.as_str(),
                            kind = kind.as_str(),
                            entry = y.entry.as_str(),
                            field = y.field.as_str(),
                            writers = y.writers.join(",").as_str(),
                            patches = yields::BOUND,
                            window_seconds = yields::WINDOW.as_secs(),
                            "another writer keeps changing back a webhook entry field pod-director owns: pod-director \
                             stops re-asserting it and leaves the other writer's value until the configuration wants \
                             another one, the value changes again, or pod-director restarts; a namespaceSelector or \
                             matchCondition narrowed by the other writer leaves pods undecided — stop that writer (on \
                             AKS, keep the annotation admissions.enforcer/disabled: \"true\")"
                        );
                    }
                    changed
                });
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
            self.metrics.yielded.set(crate::metrics::gauge(yielded()));
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
pub(crate) fn spawn(
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

crate::metrics::label_set! {
    /// `entry`, `field`: a field of a webhook entry pod-director owns.
    FieldLabels { entry: String, field: String }
}

/// `pod_director_webhook_reconciles_total`, the fields yielded to another writer, the policy groups.
#[derive(Debug, Clone)]
pub struct ReconcileMetrics {
    webhook_reconciles: Family<ResultLabels, Counter>,
    yields: Family<FieldLabels, Counter>,
    /// `pod_director_webhook_reconcile_yielded`: fields left to another writer now.
    pub yielded: Gauge,
    /// `pod_director_policy_groups`: groups whose pods are handed over to their admission policies (in part).
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
            "Groups in enforce whose pods their admission policies enforce (enforceWith: policy) or check \
             (webhookAndPolicy), handed over from the webhook",
            Gauge::default(),
        );
        let yields = register(
            r,
            "webhook_reconcile_yields",
            "Times the reconciler stopped re-asserting a field of a webhook entry pod-director owns because another \
             writer kept changing it back (bounded re-asserts per window), by entry and field",
            Family::default(),
        );
        let yielded = register(
            r,
            "webhook_reconcile_yielded",
            "Fields of the webhook entries pod-director owns that the reconciler leaves to another writer now (it \
             stopped re-asserting them)",
            Gauge::default(),
        );
        Self {
            webhook_reconciles,
            yields,
            yielded,
            policy_groups,
        }
    }

    /// Counts a field yielded to another writer.
    pub fn yielded_field(&self, entry: &str, field: &str) {
        self.yields
            .get_or_create(&FieldLabels {
                entry: entry.to_owned(),
                field: field.to_owned(),
            })
            .inc();
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
pub(crate) mod yields;

#[cfg(test)]
mod tests;
