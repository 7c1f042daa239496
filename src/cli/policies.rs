//! `pod-director explain --policies`: the admission policies the server would apply for the
//! groups enforced by policies (`enforceWith: policy` in enforce), or for one `--group`
//! whatever its mode — readable YAML to review before they are applied.

use std::process::ExitCode;

use serde_json::{Value, json};

use super::{ExplainArgs, OutputFormat};
use crate::cluster::webhooks;
use crate::config::Config;
use crate::placement::policy::{self, Policies};

/// Why no policy could be printed: exit code 2.
#[derive(Debug, thiserror::Error)]
enum PolicyError {
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("group {0:?} is not defined in the configuration (groups: {1})")]
    UnknownGroup(String, String),
    #[error("group {0:?} cannot be enforced by admission policies: {1}")]
    NotCompilable(String, String),
    #[error("cannot render: {0}")]
    Render(String),
}

fn compiled(args: &ExplainArgs) -> Result<Vec<Policies>, PolicyError> {
    let config = Config::load(&Config::resolve_path(args.config.as_deref()))?.config;
    let excluded = webhooks::excluded(&config);
    match &args.group {
        Some(name) => {
            let Some(group) = config.groups.get(name) else {
                let names: Vec<&str> = config.groups.keys().map(String::as_str).collect();
                return Err(PolicyError::UnknownGroup(name.clone(), names.join(", ")));
            };
            policy::compile(&config, name, group, &excluded)
                .map(|p| vec![p])
                .map_err(|reasons| PolicyError::NotCompilable(name.clone(), reasons.join("; ")))
        }
        None => Ok(policy::compile_all(&config, &excluded).into_values().collect()),
    }
}

/// YAML documents, a header comment naming each group's objects.
fn yaml(policies: &[Policies]) -> Result<String, PolicyError> {
    let mut out = String::new();
    for p in policies {
        out.push_str(&format!(
            "# groups.{}: MutatingAdmissionPolicy, ValidatingAdmissionPolicy and their bindings, all named {}\n",
            p.group, p.name
        ));
        for object in &p.objects {
            let text = serde_saphyr::to_string(object).map_err(|e| PolicyError::Render(e.to_string()))?;
            out.push_str("---\n");
            out.push_str(&text);
            if !text.ends_with('\n') {
                out.push('\n');
            }
        }
    }
    Ok(out)
}

pub fn run(args: &ExplainArgs) -> ExitCode {
    let rendered = compiled(args).and_then(|policies| {
        if policies.is_empty() {
            eprintln!(
                "no group is enforced by admission policies (enforceWith: policy in enforce); name one with --group \
                 to see what it would compile to"
            );
        }
        match args.output {
            OutputFormat::Json => {
                let items: Vec<&Value> = policies.iter().flat_map(|p| &p.objects).collect();
                serde_json::to_string_pretty(&json!({ "apiVersion": "v1", "kind": "List", "items": items }))
                    .map(|text| format!("{text}\n"))
                    .map_err(|e| PolicyError::Render(e.to_string()))
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
