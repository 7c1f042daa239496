//! The in-tree admission plugins' own configuration files, read as kube-apiserver reads them
//! (`--admission-control-config-file`): PodNodeSelector's (`podNodeSelectorPluginConfig`) and
//! PodTolerationRestriction's (`podtolerationrestriction.admission.k8s.io/v1alpha1`
//! `Configuration`), alone or as entries of an `AdmissionConfiguration`. What `inTreePlugins`
//! honours besides the namespaces' annotations ([`crate::in_tree`] decides with it).
//!
//! Stricter than the API server, each time with an error that names the file and the key:
//! PodNodeSelector's reader skips a document it cannot decode and parses its selectors only when a
//! pod needs them (a bad one refuses that namespace's pods); here a file that is not one mapping
//! with `podNodeSelectorPluginConfig` of strings, or a selector that does not parse, refuses the
//! configuration (the previous one stays).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Toleration;
use serde::Serialize;
use serde_json::Value;

use crate::syntax;

/// The plugins' configuration, as read from the files (all empty without files: what the plugins
/// do without `--admission-control-config-file`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginFiles {
    /// PodNodeSelector's `clusterDefaultNodeSelector`: the selector of a namespace without the
    /// annotation.
    pub cluster_default_node_selector: BTreeMap<String, String>,
    /// PodNodeSelector's per-namespace whitelists: a pod's nodeSelector must be within it (when not
    /// empty).
    pub node_selector_whitelists: BTreeMap<String, BTreeMap<String, String>>,
    /// PodTolerationRestriction's `default`: merged into pods of namespaces without the
    /// `defaultTolerations` annotation.
    pub default_tolerations: Vec<Toleration>,
    /// PodTolerationRestriction's `whitelist`: for namespaces without the `tolerationsWhitelist`
    /// annotation.
    pub tolerations_whitelist: Vec<Toleration>,
}

/// One problem, with the configuration key it is under (`inTreePlugins.admissionConfigFile`).
pub type FileError = (String, String);

const ADMISSION_KEY: &str = "inTreePlugins.admissionConfigFile";
const NODE_SELECTOR_KEY: &str = "inTreePlugins.podNodeSelectorConfigFile";
const TOLERATION_KEY: &str = "inTreePlugins.podTolerationRestrictionConfigFile";

/// The plugin names of an `AdmissionConfiguration`.
const POD_NODE_SELECTOR: &str = "PodNodeSelector";
const POD_TOLERATION_RESTRICTION: &str = "PodTolerationRestriction";
/// The `apiVersion`s kube-apiserver reads an `AdmissionConfiguration` in.
const ADMISSION_API_VERSIONS: [&str; 2] = ["apiserver.config.k8s.io/v1", "apiserver.k8s.io/v1alpha1"];
const TOLERATION_API_VERSION: &str = "podtolerationrestriction.admission.k8s.io/v1alpha1";
/// Largest plugin configuration file read.
const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// A plugin's configuration: the document, and the file it is in (for messages).
struct PluginSource {
    document: Value,
    origin: String,
}

/// Reads the files `inTreePlugins` names (`admissionConfigFile`, `podNodeSelectorConfigFile`,
/// `podTolerationRestrictionConfigFile`), relative to `base`: every problem, each under its key.
pub fn read(names: [Option<&str>; 3], base: &Path) -> Result<PluginFiles, Vec<FileError>> {
    let [admission, pns, ptr] = names;
    let mut errors: Vec<(&str, String)> = Vec::new();
    let mut node_selector = None;
    let mut tolerations = None;
    if let Some(name) = admission {
        match admission_entries(&base.join(name)) {
            Ok((pns, ptr)) => (node_selector, tolerations) = (pns, ptr),
            Err(message) => errors.push((ADMISSION_KEY, message)),
        }
    }
    for (own, from_admission, key, plugin) in [
        (pns, &mut node_selector, NODE_SELECTOR_KEY, POD_NODE_SELECTOR),
        (ptr, &mut tolerations, TOLERATION_KEY, POD_TOLERATION_RESTRICTION),
    ] {
        let Some(name) = own else { continue };
        if from_admission.is_some() {
            errors.push((
                key,
                format!(
                    "the admissionConfigFile configures {plugin} too: drop {} or the {plugin} entry of the \
                     admission configuration",
                    key.trim_start_matches("inTreePlugins.")
                ),
            ));
            continue;
        }
        let path = base.join(name);
        match read_document(&path) {
            Ok(document) => {
                *from_admission = Some(PluginSource {
                    document,
                    origin: path.display().to_string(),
                })
            }
            Err(message) => errors.push((key, message)),
        }
    }
    let mut files = PluginFiles::default();
    if let Some(source) = node_selector
        && let Err(message) = node_selector_config(&source.document, &mut files)
    {
        let key = if pns.is_some() {
            NODE_SELECTOR_KEY
        } else {
            ADMISSION_KEY
        };
        errors.push((key, format!("{}: {message}", source.origin)));
    }
    if let Some(source) = tolerations
        && let Err(message) = toleration_config(&source.document, &mut files)
    {
        let key = if ptr.is_some() { TOLERATION_KEY } else { ADMISSION_KEY };
        errors.push((key, format!("{}: {message}", source.origin)));
    }
    if errors.is_empty() {
        Ok(files)
    } else {
        Err(errors
            .into_iter()
            .map(|(key, message)| (key.to_owned(), message))
            .collect())
    }
}

/// The files [`read`] reads for the `inTreePlugins` section `section` of a configuration in
/// directory `base`: the ones it names, and the `AdmissionConfiguration`'s plugin files (its
/// PodNodeSelector and PodTolerationRestriction entries' `path`) as far as it reads now. Read
/// leniently, what does not read still named: `serve` watches these with the configuration, and
/// the load says what is wrong with any of them.
pub fn paths(section: &Value, base: &Path) -> Vec<PathBuf> {
    let names = [ADMISSION_KEY, NODE_SELECTOR_KEY, TOLERATION_KEY].map(|key| {
        section
            .get(key.trim_start_matches("inTreePlugins."))
            .and_then(Value::as_str)
    });
    let mut out: Vec<PathBuf> = names.iter().flatten().map(|name| base.join(name)).collect();
    if let Some(admission) = names[0].map(|name| base.join(name))
        && let Ok(document) = read_document(&admission)
    {
        let dir = admission.parent().unwrap_or(Path::new("."));
        let entries = document.get("plugins").and_then(Value::as_array).into_iter().flatten();
        out.extend(
            entries
                .filter(|e| {
                    let name = e.get("name").and_then(Value::as_str);
                    name == Some(POD_NODE_SELECTOR) || name == Some(POD_TOLERATION_RESTRICTION)
                })
                .filter_map(|e| e.get("path").and_then(Value::as_str))
                .filter(|name| !name.is_empty())
                .map(|name| dir.join(name)),
        );
    }
    out
}

/// A YAML (or JSON) file of one document.
fn read_document(path: &Path) -> Result<Value, String> {
    let shown = path.display();
    let size = std::fs::metadata(path)
        .map_err(|e| format!("cannot read {shown}: {e}"))?
        .len();
    if size > MAX_FILE_BYTES {
        return Err(format!("{shown} is {size} bytes; the limit is {MAX_FILE_BYTES}"));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    serde_saphyr::from_str::<Value>(&text).map_err(|e| format!("{shown} is not valid YAML: {e}"))
}

/// The PodNodeSelector and PodTolerationRestriction entries of an `AdmissionConfiguration` (or of
/// a legacy PodNodeSelector file given as the whole admission configuration, as the API server
/// accepts one).
fn admission_entries(path: &Path) -> Result<(Option<PluginSource>, Option<PluginSource>), String> {
    let document = read_document(path)?;
    let shown = path.display().to_string();
    let Value::Object(map) = &document else {
        return Err(format!("{shown}: not a mapping"));
    };
    if !map.contains_key("apiVersion") && !map.contains_key("kind") && map.contains_key("podNodeSelectorPluginConfig") {
        return Ok((
            Some(PluginSource {
                document,
                origin: shown,
            }),
            None,
        ));
    }
    let api_version = map.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    if !ADMISSION_API_VERSIONS.contains(&api_version)
        || map.get("kind").and_then(Value::as_str) != Some("AdmissionConfiguration")
    {
        return Err(format!(
            "{shown}: not an AdmissionConfiguration (apiVersion {}, kind AdmissionConfiguration)",
            ADMISSION_API_VERSIONS.join(" or ")
        ));
    }
    if let Some(key) = map
        .keys()
        .find(|k| !["apiVersion", "kind", "plugins"].contains(&k.as_str()))
    {
        return Err(format!(
            "{shown}: unknown field {key:?} (the API server decodes this file strictly)"
        ));
    }
    let plugins = match map.get("plugins") {
        None | Some(Value::Null) => return Ok((None, None)),
        Some(Value::Array(plugins)) => plugins,
        Some(_) => return Err(format!("{shown}: plugins must be a list")),
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let (mut node_selector, mut tolerations) = (None, None);
    for (i, plugin) in plugins.iter().enumerate() {
        let at = format!("{shown}: plugins[{i}]");
        let Value::Object(entry) = plugin else {
            return Err(format!("{at}: not a mapping"));
        };
        if let Some(key) = entry
            .keys()
            .find(|k| !["name", "path", "configuration"].contains(&k.as_str()))
        {
            return Err(format!("{at}: unknown field {key:?}"));
        }
        let slot = match entry.get("name").and_then(Value::as_str) {
            Some(POD_NODE_SELECTOR) => &mut node_selector,
            Some(POD_TOLERATION_RESTRICTION) => &mut tolerations,
            _ => continue,
        };
        // The API server takes a plugin's first entry.
        if slot.is_some() {
            continue;
        }
        *slot = match (entry.get("configuration"), entry.get("path").and_then(Value::as_str)) {
            (Some(configuration), _) if !configuration.is_null() => Some(PluginSource {
                document: configuration.clone(),
                origin: format!("{at}.configuration"),
            }),
            (_, Some(name)) if !name.is_empty() => {
                let file: PathBuf = dir.join(name);
                Some(PluginSource {
                    document: read_document(&file)?,
                    origin: file.display().to_string(),
                })
            }
            _ => None,
        };
    }
    Ok((node_selector, tolerations))
}

/// PodNodeSelector's `podNodeSelectorPluginConfig`: `clusterDefaultNodeSelector` and the
/// namespaces' whitelists, every selector parsed.
fn node_selector_config(document: &Value, files: &mut PluginFiles) -> Result<(), String> {
    let Value::Object(map) = document else {
        return Err("not a mapping with podNodeSelectorPluginConfig".to_owned());
    };
    // The plugin decodes with Go's encoding/json, which matches the key in any case.
    let mut config = None;
    for (key, value) in map {
        if key.eq_ignore_ascii_case("podNodeSelectorPluginConfig") {
            config = Some(value);
        } else {
            return Err(format!(
                "unknown field {key:?} (podNodeSelectorPluginConfig is the only one)"
            ));
        }
    }
    let entries = match config {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(entries)) => entries,
        Some(_) => return Err("podNodeSelectorPluginConfig must be a mapping of strings".to_owned()),
    };
    for (name, selector) in entries {
        let Value::String(selector) = selector else {
            return Err(format!(
                "podNodeSelectorPluginConfig.{name} must be a string (a selector k1=v1,k2=v2)"
            ));
        };
        let labels = syntax::selector_labels(selector)
            .map_err(|reason| format!("podNodeSelectorPluginConfig.{name}: {reason}"))?;
        if name == "clusterDefaultNodeSelector" {
            files.cluster_default_node_selector = labels;
        } else {
            files.node_selector_whitelists.insert(name.clone(), labels);
        }
    }
    Ok(())
}

/// PodTolerationRestriction's `Configuration`: `default` and `whitelist`, validated as the plugin
/// validates them (the API server's toleration rules).
fn toleration_config(document: &Value, files: &mut PluginFiles) -> Result<(), String> {
    let Value::Object(map) = document else {
        return Err("not a mapping".to_owned());
    };
    let api_version = map.get("apiVersion").and_then(Value::as_str);
    if api_version != Some(TOLERATION_API_VERSION) || map.get("kind").and_then(Value::as_str) != Some("Configuration") {
        return Err(format!("not apiVersion {TOLERATION_API_VERSION}, kind Configuration"));
    }
    let mut errors = Vec::new();
    for (key, list) in [
        ("default", &mut files.default_tolerations),
        ("whitelist", &mut files.tolerations_whitelist),
    ] {
        let value = match map.get(key) {
            None | Some(Value::Null) => continue,
            Some(value) => value.clone(),
        };
        match serde_json::from_value::<Vec<Toleration>>(value) {
            Ok(tolerations) => {
                for (i, t) in tolerations.iter().enumerate() {
                    errors.extend(toleration_errors(t).into_iter().map(|e| format!("{key}[{i}]: {e}")));
                }
                *list = tolerations;
            }
            Err(e) => errors.push(format!("{key}: not a list of tolerations: {e}")),
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!("invalid config: {}", errors.join("; ")))
    }
}

/// What the API server's `ValidateTolerations` refuses in a toleration (no comparison operators).
fn toleration_errors(t: &Toleration) -> Vec<String> {
    let text = |s: &Option<String>| s.clone().unwrap_or_default();
    let (key, operator, value, effect) = (text(&t.key), text(&t.operator), text(&t.value), text(&t.effect));
    let mut errors = Vec::new();
    if !key.is_empty()
        && let Some(reason) = syntax::label_key(&key)
    {
        errors.push(format!("key {key:?}: {reason}"));
    }
    if key.is_empty() && operator != "Exists" {
        errors.push(
            "operator must be Exists when `key` is empty, which means \"match all values and all keys\"".to_owned(),
        );
    }
    if t.toleration_seconds.is_some() && effect != "NoExecute" {
        errors.push("effect must be 'NoExecute' when `tolerationSeconds` is set".to_owned());
    }
    match operator.as_str() {
        "Equal" | "" => errors.extend(syntax::label_value(&value).map(|reason| format!("value {value:?}: {reason}"))),
        "Exists" if !value.is_empty() => errors.push("value must be empty when `operator` is 'Exists'".to_owned()),
        "Exists" => {}
        other => errors.push(format!("operator {other:?}: supported values: \"Equal\", \"Exists\"")),
    }
    if !["", "NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect.as_str()) {
        errors.push(format!(
            "effect {effect:?}: supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\""
        ));
    }
    errors
}

#[cfg(test)]
mod tests;
