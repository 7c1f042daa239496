//! The admission policies of the groups enforced by policies ([`pod_director_engine::compile::admission_policies`]),
//! kept in step with the live configuration by the webhook reconciler, in one pass with the
//! webhook entries so that a group is never enforced by neither:
//!
//! 1. the compiled objects are applied (server-side apply, field manager `pod-director`,
//!    each policy before its binding);
//! 2. a group is *handed over* once its objects have been in place for [`HANDOVER_DELAY`]
//!    (time for the API server's policy plugin to load them) and applied again unchanged:
//!    its namespaces then leave the webhook's `enforce` entry for the `policy` entries;
//! 3. only after the webhook entries took a group back (it left `enforceWith: policy` or
//!    enforce) are its objects deleted — found by the `app.kubernetes.io/managed-by` label.
//!
//! Groups with `enforceWith: webhookAndPolicy` get only the ValidatingAdmissionPolicy and its
//! binding: once handed over they leave the `enforce` entry of the ValidatingWebhookConfiguration
//! alone, and keep the mutating one (one webhook call per pod).
//!
//! Only on API servers that serve `admissionregistration.k8s.io/v1` MutatingAdmissionPolicy
//! (Kubernetes 1.36+) for `enforceWith: policy`, ValidatingAdmissionPolicy (1.30+) for
//! `webhookAndPolicy`: elsewhere those groups stay on the webhook, with one warning.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use serde_json::Value;
use tracing::{info, warn};

use pod_director_engine::compile::admission_policies::{self, API_VERSION, GROUP_LABEL, Policies};
use pod_director_engine::compile::webhook_entries::FIELD_MANAGER;
use pod_director_engine::compile::{MANAGED_BY, MANAGED_BY_LABEL};

/// How long a group's policies are in place before its pods leave the webhook.
pub(crate) const HANDOVER_DELAY: Duration = Duration::from_secs(2);

/// The four kinds, in apply order (each policy before its binding), with their resources.
const KINDS: [(&str, &str); 4] = [
    ("MutatingAdmissionPolicy", "mutatingadmissionpolicies"),
    ("MutatingAdmissionPolicyBinding", "mutatingadmissionpolicybindings"),
    ("ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
    ("ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings"),
];

fn api(client: &Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
    Api::all_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, plural))
}

/// Why the admission policies could not be reconciled.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PolicyError {
    #[error("cannot read the API server's discovery of {API_VERSION}: {0}")]
    Discovery(#[source] kube::Error),
    #[error("cannot apply {kind} {name}: {source}")]
    Apply {
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot list the {0} pod-director owns: {1}")]
    List(&'static str, #[source] kube::Error),
    #[error("cannot delete {kind} {name}: {source}")]
    Delete {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// The state across passes: when each group's objects were first in place, and what was applied.
#[derive(Debug, Default)]
pub(crate) struct PolicySync {
    applied: Mutex<BTreeMap<String, (Instant, Vec<Value>)>>,
    unserved_warned: Mutex<[bool; 2]>,
    pending: AtomicBool,
}

impl PolicySync {
    /// The compiled policies of `config` that the API server can run: MutatingAdmissionPolicy
    /// (`enforceWith: policy`) and ValidatingAdmissionPolicy (`webhookAndPolicy`) at
    /// `admissionregistration.k8s.io/v1`. A kind it does not serve is warned about once.
    pub(crate) async fn servable(
        &self,
        client: &Client,
        config: &pod_director_engine::config::Config,
    ) -> Result<BTreeMap<String, Policies>, PolicyError> {
        let resources = match client.list_api_group_resources(API_VERSION).await {
            Ok(list) => list.resources.into_iter().map(|r| r.name).collect(),
            Err(kube::Error::Api(status)) if status.code == 404 => Vec::new(),
            Err(err) => return Err(PolicyError::Discovery(err)),
        };
        let serves = |plural: &str| resources.iter().any(|r| r == plural);
        let unserved = [
            (!serves("mutatingadmissionpolicies")).then_some(
                "MutatingAdmissionPolicy (Kubernetes 1.36+): groups with enforceWith: policy stay on the webhook",
            ),
            (!serves("validatingadmissionpolicies")).then_some(
                "ValidatingAdmissionPolicy (Kubernetes 1.30+): groups with enforceWith: webhookAndPolicy stay on \
                 /validate",
            ),
        ];
        let mut warned = self
            .unserved_warned
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (i, missing) in unserved.iter().enumerate() {
            if let Some(missing) = missing
                && !warned[i]
            {
                warn!("the API server does not serve {API_VERSION} {missing}");
            }
            warned[i] = missing.is_some();
        }
        let mut wanted =
            admission_policies::compile_all(config, &pod_director_engine::compile::webhook_entries::excluded(config));
        wanted.retain(|_, p| {
            serves(if p.validation_only {
                "validatingadmissionpolicies"
            } else {
                "mutatingadmissionpolicies"
            })
        });
        Ok(wanted)
    }

    /// Applies every group's objects; returns the groups handed over (in place long enough and
    /// unchanged) and the first error, if any (the other groups are still applied).
    pub(crate) async fn apply(
        &self,
        client: &Client,
        wanted: &BTreeMap<String, Policies>,
    ) -> (BTreeSet<String>, Option<PolicyError>) {
        let mut handed = BTreeSet::new();
        let mut first_error = None;
        for (group, policies) in wanted {
            match apply_group(client, policies).await {
                Ok(()) => {
                    let mut applied = self.applied.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    let now = Instant::now();
                    let entry = applied.entry(group.clone()).or_insert_with(|| {
                        info!(
                            group = group.as_str(),
                            policy = policies.name.as_str(),
                            "admission policies applied; the group's pods leave the webhook once the API server has \
                             loaded them"
                        );
                        (now, policies.objects.clone())
                    });
                    if entry.1 != policies.objects {
                        // Changed: the API server has the previous version until it loads this one;
                        // either enforces the group, so the hand-over holds.
                        entry.1 = policies.objects.clone();
                    }
                    if now.duration_since(entry.0) >= HANDOVER_DELAY {
                        handed.insert(group.clone());
                    }
                }
                Err(err) => {
                    first_error.get_or_insert(err);
                }
            }
        }
        (handed, first_error)
    }

    pub(crate) fn set_pending(&self, pending: bool) {
        self.pending.store(pending, Ordering::Relaxed);
    }

    /// Whether the last pass left a group waiting for its hand-over (the next pass comes soon).
    pub(crate) fn is_pending(&self) -> bool {
        self.pending.load(Ordering::Relaxed)
    }

    /// Whether some wanted group waits for its hand-over (the reconciler passes again soon).
    pub(crate) fn pending(&self, wanted: &BTreeMap<String, Policies>, handed: &BTreeSet<String>) -> bool {
        wanted.keys().any(|g| !handed.contains(g))
    }

    /// Deletes the objects pod-director owns for groups not in `keep` (and the mutating ones of
    /// groups kept for their validating policy alone): the validating ones first, and the
    /// mutating ones [`HANDOVER_DELAY`] later. The API server's caches drop them independently;
    /// a ValidatingAdmissionPolicy that outlived its MutatingAdmissionPolicy would refuse the
    /// pods of a group just moved to dryRun, one outliving the other way only places them as
    /// enforce did. Bindings go before their policies.
    pub(crate) async fn prune(&self, client: &Client, keep: &BTreeMap<String, Policies>) -> Result<(), PolicyError> {
        let names: BTreeSet<&str> = keep.values().map(|p| p.name.as_str()).collect();
        if delete_all_but(client, &names, [KINDS[3], KINDS[2]]).await? {
            tokio::time::sleep(HANDOVER_DELAY).await;
        }
        let mutating: BTreeSet<&str> = keep
            .values()
            .filter(|p| !p.validation_only)
            .map(|p| p.name.as_str())
            .collect();
        delete_all_but(client, &mutating, [KINDS[1], KINDS[0]]).await?;
        let mut applied = self.applied.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        applied.retain(|group, _| keep.contains_key(group));
        Ok(())
    }
}

/// Deletes the objects of `kinds` (in order) pod-director owns whose name is not in `keep`;
/// whether it deleted any.
async fn delete_all_but(
    client: &Client,
    keep: &BTreeSet<&str>,
    kinds: [(&'static str, &'static str); 2],
) -> Result<bool, PolicyError> {
    let selector = format!("{MANAGED_BY_LABEL}={MANAGED_BY}");
    let mut deleted = false;
    for (kind, plural) in kinds {
        let api = api(client, kind, plural);
        let list = match api.list(&ListParams::default().labels(&selector)).await {
            Ok(list) => list,
            // Not served (MutatingAdmissionPolicy before 1.36): nothing of that kind to delete.
            Err(kube::Error::Api(status)) if status.code == 404 => continue,
            Err(e) => return Err(PolicyError::List(plural, e)),
        };
        for object in list.items {
            let Some(name) = object.metadata.name.clone() else {
                continue;
            };
            if keep.contains(name.as_str()) || !name.starts_with("pod-director-") {
                continue;
            }
            let group = object
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(GROUP_LABEL))
                .cloned()
                .unwrap_or_default();
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {
                    deleted = true;
                    info!(
                        kind,
                        name = name.as_str(),
                        group = group.as_str(),
                        "admission policy deleted: its group is enforced by the webhook again, or no longer enforced"
                    );
                }
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(source) => return Err(PolicyError::Delete { kind, name, source }),
            }
        }
    }
    Ok(deleted)
}

async fn apply_group(client: &Client, policies: &Policies) -> Result<(), PolicyError> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    for object in &policies.objects {
        let kind = object["kind"].as_str().unwrap_or_default();
        let Some((kind, plural)) = KINDS.iter().find(|(k, _)| *k == kind) else {
            continue;
        };
        api(client, kind, plural)
            .patch(&policies.name, &params, &Patch::Apply(object))
            .await
            .map_err(|source| PolicyError::Apply {
                kind: (*kind).to_owned(),
                name: policies.name.clone(),
                source,
            })?;
    }
    Ok(())
}
