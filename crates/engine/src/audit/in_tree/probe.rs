//! Whether the API server runs an in-tree plugin: a server-side dry-run CREATE (`dryRun=All`:
//! nothing is stored, no controller sees it) of a probe pod in an annotated namespace, built so
//! that the plugin's answer is its fingerprint. The product sends it ([`Probe::pod`]) and hands
//! the answer back ([`interpret`]).
//!
//! | plugin | the probe pod | running | not running |
//! |---|---|---|---|
//! | PodNodeSelector | a `nodeSelector` that conflicts with the namespace's annotation (same key, another value) | refused with the plugin's message (`pod node label selector conflicts with its namespace node label selector`) | admitted, or refused by a step that runs after the plugin's (a webhook, an admission policy, Pod Security) |
//! | PodTolerationRestriction | no toleration, a CPU request (Burstable) | admitted with the toleration `node.kubernetes.io/memory-pressure:NoSchedule` (`Exists`), which the plugin adds to every pod that is not BestEffort, or refused with its whitelist message | admitted without it |
//!
//! Anything else (refused by RBAC, by a step before the plugin, no answer) leaves the plugin
//! [`PluginState::Unknown`], and its annotations are counted as not enforced: the hole is
//! reported with the reason it could not be verified.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::PluginState;
use crate::in_tree::{CONFLICT_MESSAGE, MEMORY_PRESSURE_TAINT, Plugin};

/// The probe pod's name (a dry run: never stored).
pub const NAME: &str = "pod-director-in-tree-probe";
/// The probe pod's image (never pulled: the pod is not stored).
const IMAGE: &str = "registry.k8s.io/pause:3.10";
/// What PodTolerationRestriction says when a pod's tolerations are outside the whitelist.
const WHITELIST_REFUSAL: &str = "conflict with its namespace whitelist";

/// One dry-run CREATE to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    pub plugin: Plugin,
    pub namespace: String,
    /// The Pod to create with `dryRun=All`.
    pub pod: Value,
}

/// The probe of `plugin` in namespace `namespace`, whose node selector (as PodNodeSelector reads
/// it) is `selector`, if one tells.
pub(crate) fn probe(plugin: Plugin, namespace: &str, selector: &BTreeMap<String, String>) -> Option<Probe> {
    let mut spec = json!({
        "automountServiceAccountToken": false,
        "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": "probe",
            "image": IMAGE,
            "resources": {"requests": {"cpu": "1m"}},
            "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
        }],
    });
    if plugin == Plugin::PodNodeSelector {
        let (key, value) = selector.iter().next()?;
        let other = if value == "pod-director-probe" {
            "pod-director-probe-2"
        } else {
            "pod-director-probe"
        };
        spec["nodeSelector"] = json!({key: other});
    }
    Some(Probe {
        plugin,
        namespace: namespace.to_owned(),
        pod: json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": NAME,
                "namespace": namespace,
                "labels": {crate::compile::MANAGED_BY_LABEL: crate::compile::MANAGED_BY},
            },
            "spec": spec,
        }),
    })
}

/// Whether a refusal came from a step the API server runs after the mutating plugins: a webhook,
/// an admission policy or Pod Security (validation).
fn refused_after_the_plugins(message: &str) -> bool {
    message.contains("admission webhook")
        || message.contains("ValidatingAdmissionPolicy")
        || message.contains("violates PodSecurity")
}

/// What the answer to `probe` says about its plugin: the pod as the API server would have stored
/// it, or the refusal's message.
pub fn interpret(probe: &Probe, answer: Result<&Value, &str>) -> PluginState {
    let ns = &probe.namespace;
    match (probe.plugin, answer) {
        (Plugin::PodNodeSelector, Err(message)) if message.contains(CONFLICT_MESSAGE) => PluginState::Running(format!(
            "a dry-run pod conflicting with the node selector of namespace {ns} was refused by it"
        )),
        (Plugin::PodNodeSelector, Err(message)) if refused_after_the_plugins(message) => PluginState::Absent(format!(
            "a dry-run pod conflicting with the node selector of namespace {ns} passed the plugins' step; refused \
             later: {message}"
        )),
        (Plugin::PodNodeSelector, Ok(_)) => PluginState::Absent(format!(
            "a dry-run pod conflicting with the node selector of namespace {ns} was admitted"
        )),
        (Plugin::PodTolerationRestriction, Err(message)) if message.contains(WHITELIST_REFUSAL) => {
            PluginState::Running(format!(
                "a dry-run pod in namespace {ns} was refused by its tolerations whitelist"
            ))
        }
        (Plugin::PodTolerationRestriction, Ok(pod)) => {
            let added = (pod
                .pointer("/spec/tolerations")
                .and_then(Value::as_array)
                .into_iter()
                .flatten())
            .any(|t| t["key"] == MEMORY_PRESSURE_TAINT && t["operator"] == "Exists" && t["effect"] == "NoSchedule");
            if added {
                PluginState::Running(format!(
                    "a dry-run Burstable pod in namespace {ns} got the {MEMORY_PRESSURE_TAINT} toleration it adds"
                ))
            } else {
                PluginState::Absent(format!(
                    "a dry-run Burstable pod in namespace {ns} was admitted without the {MEMORY_PRESSURE_TAINT} toleration it adds"
                ))
            }
        }
        (_, Err(message)) => {
            PluginState::Unknown(format!("the dry-run probe in namespace {ns} was refused: {message}"))
        }
    }
}
