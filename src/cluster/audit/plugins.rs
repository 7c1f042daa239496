//! Whether the API server runs the in-tree plugins PodNodeSelector and PodTolerationRestriction,
//! for the audit's holes: asked once per scan, after the namespaces are listed, for the plugins
//! the annotated namespaces ask for (none when pod-director's compatibility enforces them).
//!
//! `--in-tree-plugins probe` (the default) sends each plugin's probe pod as a server-side
//! dry-run CREATE (`dryRun=All`: nothing is stored; admission runs, webhooks included) and reads
//! the plugin's fingerprint in the answer (see `pod_director_engine::audit::in_tree::probe`): it
//! needs `create` on pods in the probed namespace, which the chart grants only with
//! `audit.inTreePluginProbe`. Without it the plugin is "not known to run" and its namespaces are
//! reported as holes with that reason. `--in-tree-plugins none`, or a list of the plugins the API
//! server runs (`PodNodeSelector,PodTolerationRestriction`), says so instead of asking.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, PostParams};

use pod_director_engine::audit::in_tree::probe::{Probe, interpret};
use pod_director_engine::audit::in_tree::{PluginState, plugin_named};
use pod_director_engine::audit::tally::Scan;
use pod_director_engine::in_tree::Plugin;

/// The field manager of the probes (dry runs: nothing is stored under it).
const FIELD_MANAGER: &str = "pod-director-audit";

/// How the audit knows whether the API server runs the in-tree plugins (`--in-tree-plugins`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum InTreePlugins {
    /// A dry-run probe per plugin.
    #[default]
    Probe,
    /// The admin's word: these run, the others do not.
    Declared(Vec<Plugin>),
}

/// `probe`, `none`, or a comma-separated list of plugins (`--in-tree-plugins`).
pub(crate) fn parse(text: &str) -> Result<InTreePlugins, String> {
    match text.trim() {
        "probe" => return Ok(InTreePlugins::Probe),
        "none" => return Ok(InTreePlugins::Declared(Vec::new())),
        _ => {}
    }
    let names = || Plugin::ALL.map(Plugin::as_str).join(", ");
    (text.split(','))
        .map(|name| {
            plugin_named(name.trim()).ok_or_else(|| {
                format!(
                    "{name:?} is not an in-tree plugin pod-director knows ({}); or probe, or none",
                    names()
                )
            })
        })
        .collect::<Result<_, _>>()
        .map(InTreePlugins::Declared)
}

/// Tells the scan whether each plugin it asks about runs: probed, or as declared.
pub(crate) async fn detect(client: &Client, scan: &mut Scan<'_>, known: &InTreePlugins, timeout: Duration) {
    for probe in scan.plugin_probes() {
        let state = match known {
            InTreePlugins::Declared(running) if running.contains(&probe.plugin) => {
                PluginState::Running("declared: --in-tree-plugins".to_owned())
            }
            InTreePlugins::Declared(_) => PluginState::Absent("declared: --in-tree-plugins".to_owned()),
            InTreePlugins::Probe => send(client, &probe, timeout).await,
        };
        scan.plugin(probe.plugin, state);
    }
}

/// Sends one probe as a dry-run CREATE and interprets the answer.
async fn send(client: &Client, probe: &Probe, timeout: Duration) -> PluginState {
    let pod: Pod = match serde_json::from_value(probe.pod.clone()) {
        Ok(pod) => pod,
        Err(err) => return PluginState::Unknown(format!("the probe pod does not decode: {err}")),
    };
    let api: Api<Pod> = Api::namespaced(client.clone(), &probe.namespace);
    let params = PostParams {
        dry_run: true,
        field_manager: Some(FIELD_MANAGER.to_owned()),
    };
    match tokio::time::timeout(timeout, api.create(&params, &pod)).await {
        Err(_) => PluginState::Unknown(format!(
            "the dry-run probe in namespace {} got no answer within {timeout:?}",
            probe.namespace
        )),
        Ok(Ok(created)) => match serde_json::to_value(&created) {
            Ok(created) => interpret(probe, Ok(&created)),
            Err(err) => PluginState::Unknown(format!("the probe's answer does not encode: {err}")),
        },
        Ok(Err(kube::Error::Api(status))) => interpret(probe, Err(&status.message)),
        Ok(Err(err)) => PluginState::Unknown(format!(
            "the dry-run probe in namespace {} failed: {err}",
            probe.namespace
        )),
    }
}

#[cfg(test)]
mod tests;
