//! `pod-director explain --policies`: the admission policies the server would apply for the
//! groups enforced or checked by policies (`enforceWith: policy` or `webhookAndPolicy` in enforce), or for one `--group`
//! whatever its mode — readable YAML to review before they are applied.

use std::process::ExitCode;

use serde_json::{Value, json};

use super::{ExplainArgs, OutputFormat};
use pod_director_engine::compile::admission_policies::{self, Policies};
use pod_director_engine::config::{Config, load_config};

/// Why no policy could be printed: exit code 2.
#[derive(Debug, thiserror::Error)]
enum PrintError {
    #[error("{0}")]
    Config(#[from] pod_director_engine::config::ConfigError),
    #[error("{0}")]
    UnknownGroup(#[from] super::UnknownGroup),
    #[error("group {0:?} cannot be enforced by admission policies: {1}")]
    NotCompilable(String, String),
    #[error("cannot render: {0}")]
    Render(String),
}

fn compiled(args: &ExplainArgs) -> Result<Vec<Policies>, PrintError> {
    // As `serve` loads it: its own namespace excluded, so the bindings are the applied ones.
    let config = load_config(
        &Config::resolve_path(args.config.as_deref()),
        args.pod_director_namespace.as_deref(),
    )?
    .config;
    let excluded = pod_director_engine::compile::webhook_entries::excluded(&config);
    let named = super::named_group(&config, args.group.as_deref())?;
    let mut applied = admission_policies::compile_all(&config, &excluded);
    match named {
        // What serve applies for it (a webhookAndPolicy group's validating policy), else all four.
        Some((name, group)) => match applied.remove(name) {
            Some(p) => Ok(vec![p]),
            None => admission_policies::compile(&config, name, group, &excluded)
                .map(|p| vec![p])
                .map_err(|reasons| PrintError::NotCompilable(name.to_owned(), reasons.join("; "))),
        },
        None => Ok(applied.into_values().collect()),
    }
}

/// YAML documents, a header comment naming each group's objects.
fn yaml(policies: &[Policies]) -> Result<String, PrintError> {
    let mut out = String::new();
    for p in policies {
        let kinds = if p.validation_only {
            "ValidatingAdmissionPolicy and its binding (enforceWith: webhookAndPolicy), both"
        } else {
            "MutatingAdmissionPolicy, ValidatingAdmissionPolicy and their bindings, all"
        };
        out.push_str(&format!("# groups.{}: {kinds} named {}\n", p.group, p.name));
        for object in &p.objects {
            let text = serde_saphyr::to_string(object).map_err(|e| PrintError::Render(e.to_string()))?;
            out.push_str("---\n");
            out.push_str(&text);
            if !text.ends_with('\n') {
                out.push('\n');
            }
        }
    }
    Ok(out)
}

pub(super) fn run(args: &ExplainArgs) -> ExitCode {
    let rendered = compiled(args).and_then(|policies| {
        if policies.is_empty() {
            eprintln!(
                "no group is enforced or checked by admission policies (enforceWith: policy or webhookAndPolicy in \
                 enforce); name one with --group to see what it would compile to"
            );
        }
        match args.output {
            OutputFormat::Json => {
                let items: Vec<&Value> = policies.iter().flat_map(|p| &p.objects).collect();
                serde_json::to_string_pretty(&json!({ "apiVersion": "v1", "kind": "List", "items": items }))
                    .map(|text| format!("{text}\n"))
                    .map_err(|e| PrintError::Render(e.to_string()))
            }
            OutputFormat::Text | OutputFormat::Yaml => yaml(&policies),
        }
    });
    match rendered {
        Ok(text) => super::stdout::emit(&text, ExitCode::SUCCESS, 2),
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests;
