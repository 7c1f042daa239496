//! `pod-director check-config`: validate a file the way `serve` would, or print the
//! JSON Schema files are checked against (`--print-schema`).

use std::collections::BTreeMap;
use std::process::ExitCode;

use super::CheckConfigArgs;
use pod_director_engine::compile::admission_policies::{self, object_name};
use pod_director_engine::config::{Config, EnforceWith, schema};
use pod_director_engine::in_tree;
use pod_director_engine::placement::Namespace;

pub(super) fn run(args: &CheckConfigArgs) -> ExitCode {
    if args.print_schema {
        return match serde_json::to_string_pretty(&schema::schema_json()) {
            Ok(text) => super::stdout::emit(&format!("{text}\n"), ExitCode::SUCCESS, 1),
            Err(err) => {
                eprintln!("error: cannot render the schema: {err}");
                ExitCode::from(1)
            }
        };
    }
    let path = Config::resolve_path(args.config.as_deref());
    match Config::load(&path) {
        Ok(loaded) => {
            let reservations = pod_director_engine::placement::reservation::warnings(&loaded.config);
            let in_tree = in_tree_warnings(&loaded.config);
            for warning in loaded.warnings.iter().chain(&reservations).chain(&in_tree) {
                eprintln!("warning: {warning}");
            }
            let mut lines = vec![format!("ok: {} (revision {})", path.display(), loaded.revision)];
            lines.extend(
                loaded
                    .overrides
                    .iter()
                    .map(|(var, setting)| format!("override: {setting} from {var}")),
            );
            lines.extend(group_summaries(&loaded.config));
            lines.extend(policy_lines(&loaded.config));
            let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
            super::stdout::emit(&text, ExitCode::SUCCESS, 1)
        }
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(1)
        }
    }
}

/// The contradictions between `inTreePlugins`' files and the groups that `check-config` can see
/// without the namespaces: for a namespace of each group (the default group's too) without
/// annotations, and for each namespace a PodNodeSelector whitelist names, were it in the group.
fn in_tree_warnings(config: &Config) -> Vec<String> {
    let Some(section) = &config.in_tree_plugins else {
        return Vec::new();
    };
    let none = BTreeMap::new();
    let mut out = Vec::new();
    for name in config.groups.keys() {
        let labels = BTreeMap::from([(config.namespace_label.clone(), name.clone())]);
        let namespaces = std::iter::once("(without annotations)")
            .chain(section.files.node_selector_whitelists.keys().map(String::as_str));
        for namespace in namespaces {
            let found = in_tree::contradictions(config, &Namespace::new(namespace, &labels).with_annotations(&none));
            out.extend(
                found
                    .into_iter()
                    .map(|c| format!("inTreePlugins: a namespace of group {name}: {c}")),
            );
        }
    }
    out.sort();
    out.dedup();
    out
}

/// One line per group: its mode, conflict policy and placement.
fn group_summaries(config: &Config) -> Vec<String> {
    config
        .groups
        .iter()
        .map(|(name, g)| {
            let selector: Vec<String> = g.node_selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let affinity = g.affinity.as_ref().map(|a| {
                let kinds = [
                    (a.node_affinity.is_some(), "node"),
                    (a.pod_affinity.is_some(), "pod"),
                    (a.pod_anti_affinity.is_some(), "podAnti"),
                ];
                let kinds: Vec<&str> = kinds.into_iter().filter_map(|(on, kind)| on.then_some(kind)).collect();
                format!("affinity={}", kinds.join("+"))
            });
            let parts = [
                Some(format!("mode={}", config.mode_of(g))),
                Some(format!("onConflict={}", g.on_conflict)),
                (!selector.is_empty()).then(|| format!("nodeSelector={}", selector.join(","))),
                (!g.tolerations.is_empty()).then(|| format!("tolerations={}", g.tolerations.len())),
                affinity,
                (!g.alternatives.is_empty()).then(|| {
                    format!(
                        "alternatives={}",
                        g.placement_names().skip(1).collect::<Vec<_>>().join(",")
                    )
                }),
                g.allow_pod_exclusion.then(|| "allowPodExclusion".to_owned()),
                g.allow_daemon_sets.then(|| "allowDaemonSets".to_owned()),
                g.reserve.as_ref().map(|reserve| format!("reserve={}", reserve.mode)),
                (config.default_group.as_deref() == Some(name.as_str())).then(|| "default".to_owned()),
                (g.enforce_with != EnforceWith::Webhook).then(|| format!("enforceWith={}", g.enforce_with)),
            ];
            format!("{name}: {}", parts.into_iter().flatten().collect::<Vec<_>>().join(" "))
        })
        .collect()
}

/// Per group, whether admission policies enforce it or could (`enforceWith`). Whether `serve` applies them
/// (`--admission-policies`) is not in the file: the line for a group on policies says it depends on it.
fn policy_lines(config: &Config) -> Vec<String> {
    config
        .groups
        .iter()
        .map(|(name, group)| {
            let blockers = config.policy_blockers(name, group);
            let status = if config.on_policy(group) {
                format!(
                    "enforced by admission policies {} where serve runs with --admission-policies (chart: \
                     webhook.admissionPolicies), else by the webhook",
                    object_name(name)
                )
            } else if admission_policies::validated_by_policy(config, name, group) {
                format!(
                    "placed by the webhook, checked by ValidatingAdmissionPolicy {} (one webhook call per pod) where \
                     serve runs with --admission-policies (chart: webhook.admissionPolicies), else by /validate too",
                    object_name(name)
                )
            } else if group.enforce_with == EnforceWith::WebhookAndPolicy && blockers.is_empty() {
                format!(
                    "compiles; enforceWith: webhookAndPolicy takes effect in enforce (now {})",
                    config.mode_of(group)
                )
            } else if group.enforce_with == EnforceWith::WebhookAndPolicy {
                format!(
                    "enforceWith: webhookAndPolicy, but /validate checks it too (two webhook calls per pod): {}",
                    blockers.join("; ")
                )
            } else if group.enforce_with == EnforceWith::Policy {
                format!(
                    "compiles; enforceWith: policy takes effect in enforce (now {})",
                    config.mode_of(group)
                )
            } else if blockers.is_empty() {
                "compiles to admission policies (enforceWith: policy or webhookAndPolicy)".to_owned()
            } else {
                format!("webhook only: {}", blockers.join("; "))
            };
            format!("policy {name}: {status}")
        })
        .collect()
}

#[cfg(test)]
mod tests;
