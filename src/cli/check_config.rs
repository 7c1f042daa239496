//! `pod-director check-config`: validate a file the way `serve` would, or print the
//! JSON Schema files are checked against (`--print-schema`).

use std::process::ExitCode;

use super::CheckConfigArgs;
use pod_director_engine::compile::admission_policies::{self, object_name};
use pod_director_engine::config::{Config, EnforceWith, schema};

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
            for warning in loaded.warnings.iter().chain(&reservations) {
                eprintln!("warning: {warning}");
            }
            let mut lines = vec![format!("ok: {} (revision {})", path.display(), loaded.revision)];
            lines.extend(
                loaded
                    .overrides
                    .iter()
                    .map(|(var, setting)| format!("override: {setting} from {var}")),
            );
            lines.extend(loaded.config.group_summaries());
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
