//! `pod-director migrate-in-tree`: the in-tree plugins' namespace annotations (and the files of
//! `inTreePlugins`) turned into groups and namespace labels, printed as YAML, with what has no
//! group equivalent said on standard error and in the YAML; and `explain --compare-in-tree`: the
//! pods the in-tree plugins and the migrated groups decide differently.

use std::collections::BTreeMap;
use std::process::ExitCode;

use serde_json::{Value, json};

use super::InputError;
use super::manifests::{Candidate, Manifested, collect, read_path};
use crate::cli::MigrateInTreeArgs;
use pod_director_engine::config::{Config, Mode};
use pod_director_engine::migration::{self, Migration};

pub(crate) fn migrate_in_tree(args: &MigrateInTreeArgs) -> ExitCode {
    match migrate(args) {
        Ok((migration, config)) => {
            for line in &migration.not_migrated {
                eprintln!("warning: not migrated: {line}");
            }
            match render(&migration, &config) {
                Ok(text) => crate::cli::stdout::emit(&text, ExitCode::SUCCESS, 2),
                Err(err) => {
                    eprintln!("error: cannot render YAML: {err}");
                    ExitCode::from(2)
                }
            }
        }
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(2)
        }
    }
}

/// The configuration `-c` names (else none: no plugin files, the default namespace label).
fn config_of(path: Option<&std::path::Path>) -> Result<Config, InputError> {
    match path {
        Some(path) => Ok(pod_director_engine::config::load_config(path, None)?.config),
        None => Ok(Config::default()),
    }
}

fn migrate(args: &MigrateInTreeArgs) -> Result<(Migration, Config), InputError> {
    let config = config_of(args.config.as_deref())?;
    let namespaces = read_namespaces(&args.files)?;
    let (files, mode) = match &config.in_tree_plugins {
        Some(section) => (section.files.clone(), section.mode),
        None => (Default::default(), Mode::DryRun),
    };
    let annotations = namespaces.into_iter().map(|(name, (_, a))| (name, a)).collect();
    Ok((migration::migrate(&files, &annotations, mode), config))
}

/// The Namespaces (and the pods) of the manifests.
fn read_namespaces(paths: &[std::path::PathBuf]) -> Result<BTreeMap<String, Manifested>, InputError> {
    let mut sources = Vec::new();
    for path in paths {
        read_path(path, &mut sources)?;
    }
    let (mut namespaces, mut candidates) = (BTreeMap::new(), Vec::new());
    for source in &sources {
        collect(source, "default", &mut namespaces, &mut candidates)?;
    }
    Ok(namespaces)
}

/// The groups (with `defaultGroup`) as a configuration fragment, then one Namespace per label to set.
fn render(migration: &Migration, config: &Config) -> Result<String, String> {
    let mut out = String::from(
        "# pod-director migrate-in-tree: groups equivalent to the in-tree plugins' rules, as far as groups go.\n\
         # Not migrated (no group equivalent; keep inTreePlugins on where it matters):\n",
    );
    for line in &migration.not_migrated {
        out.push_str(&format!("#   - {line}\n"));
    }
    let mut fragment = serde_json::Map::new();
    if let Some(default) = &migration.default_group {
        fragment.insert("defaultGroup".to_owned(), Value::String(default.clone()));
    }
    let groups = serde_json::to_value(&migration.groups).map_err(|e| e.to_string())?;
    fragment.insert("groups".to_owned(), groups);
    out.push_str(&serde_saphyr::to_string(&Value::Object(fragment)).map_err(|e| e.to_string())?);
    for (namespace, group) in &migration.labels {
        let object = json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace, "labels": {config.namespace_label.as_str(): group}},
        });
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&object).map_err(|e| e.to_string())?);
    }
    Ok(out)
}

/// `explain --compare-in-tree`: for every pod of the manifests, where the in-tree plugins (the
/// annotations of its Namespace manifest, the files of `inTreePlugins`) and the groups
/// `migrate-in-tree` makes of them decide its creation differently, both in enforce. The text, and
/// whether any pod differs.
pub(super) fn compare(
    config: &Config,
    namespaces: &BTreeMap<String, Manifested>,
    candidates: &[Candidate],
) -> (String, bool) {
    let files = config
        .in_tree_plugins
        .as_ref()
        .map(|s| s.files.clone())
        .unwrap_or_default();
    let annotations = namespaces.iter().map(|(n, (_, a))| (n.clone(), a.clone())).collect();
    let migration = migration::migrate(&files, &annotations, Mode::Enforce);
    let migrated = migration.config(config);
    let empty = BTreeMap::new();
    let mut lines = Vec::new();
    let pods: Vec<&Candidate> = candidates.iter().filter(|c| c.kind != "DaemonSet").collect();
    for c in &pods {
        let annotations = annotations_of(&annotations, &c.namespace).unwrap_or(&empty);
        let differences = migration::compare(&files, &migration, &migrated, (&c.namespace, annotations), &c.pod);
        for d in differences {
            lines.push(format!(
                "{}/{} ({}): {}: in-tree {}; groups {}",
                c.namespace, c.name, c.kind, d.field, d.in_tree, d.groups
            ));
        }
    }
    let differing = lines
        .iter()
        .map(|l| l.split(": ").next().unwrap_or_default())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    let mut text = format!(
        "in-tree plugins vs migrated groups (both enforce): {} pods, {differing} decided differently\n",
        pods.len()
    );
    for line in &lines {
        text.push_str(&format!("{line}\n"));
    }
    (text, differing > 0)
}

fn annotations_of<'a>(
    annotations: &'a BTreeMap<String, BTreeMap<String, String>>,
    namespace: &str,
) -> Option<&'a BTreeMap<String, String>> {
    annotations.get(namespace)
}
