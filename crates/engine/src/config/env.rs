//! Environment overrides: any scalar setting of the file can be replaced by an
//! environment variable, which wins over the file.
//!
//! Naming rule: `POD_DIRECTOR__` followed by the path of the setting, its
//! segments joined by `__`. A segment matches a key when both are equal after
//! lower-casing and dropping `_` and `-`, so camelCase keys can be written in
//! the usual upper snake case:
//!
//! | setting | variable |
//! |---|---|
//! | `defaultMode` | `POD_DIRECTOR__DEFAULT_MODE` |
//! | `groups.ci.mode` | `POD_DIRECTOR__GROUPS__CI__MODE` |
//! | `groups.gpu-a100.onConflict` | `POD_DIRECTOR__GROUPS__GPU_A100__ON_CONFLICT` |
//! | `groups.ci.tolerations[0].value` | `POD_DIRECTOR__GROUPS__CI__TOLERATIONS__0__VALUE` |
//! | `excludedNamespaces` | `POD_DIRECTOR__EXCLUDED_NAMESPACES=kube-system,monitoring` |
//!
//! Group names and map keys (nodeSelector) are matched against the ones the
//! file defines; a variable cannot invent a group. `POD_DIRECTOR_CONFIG`
//! (single underscore) names the file and is not an override.

use serde_json::{Map, Value};

use super::FieldError;
use super::schema::Node;

pub const PREFIX: &str = "POD_DIRECTOR__";

fn normalize(s: &str) -> String {
    s.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

/// The schema of the setting at `path` (canonical keys and list indexes), when it has one.
fn schema_at(path: &[String]) -> Option<Node> {
    path.iter().try_fold(Node::root(), |node, segment| {
        if node.is("array") {
            node.item()
        } else {
            node.child(segment)
        }
    })
}

/// The keys a mapping may have at `path` (canonical keys so far), beyond those present:
/// those of a mapping of fixed shape (a group's settings, not its nodeSelector's labels).
fn known_keys(path: &[String]) -> Vec<&'static str> {
    schema_at(path).map(|node| node.keys()).unwrap_or_default()
}

fn resolve_key(map: &Map<String, Value>, path: &[String], segment: &str) -> Result<String, String> {
    let wanted = normalize(segment);
    let mut candidates: Vec<String> = map.keys().filter(|k| normalize(k) == wanted).cloned().collect();
    for known in &known_keys(path) {
        if normalize(known) == wanted && !candidates.iter().any(|c| c == known) {
            candidates.push((*known).to_owned());
        }
    }
    match candidates.len() {
        1 => Ok(candidates.remove(0)),
        0 => {
            let mut names: Vec<&str> = map.keys().map(String::as_str).collect();
            for known in known_keys(path) {
                if !names.contains(&known) {
                    names.push(known);
                }
            }
            Err(format!(
                "{segment:?} matches no key here (keys: {})",
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            ))
        }
        _ => Err(format!(
            "{segment:?} is ambiguous: it matches {}",
            candidates.join(", ")
        )),
    }
}

/// `raw` as the type of the setting: what the file has there, else what the schema says.
fn typed_value(key: &str, schema: Option<Node>, existing: Option<&Value>, raw: &str) -> Result<Value, String> {
    match existing {
        Some(Value::Object(_)) => return Err(format!("{key} is a mapping, not a scalar setting")),
        Some(Value::Array(items)) if items.iter().any(|i| !i.is_string()) => {
            return Err(format!("{key} is a list of mappings, not a scalar setting"));
        }
        _ => {}
    }
    let is = |kind: &str| schema.is_some_and(|s| s.is(kind));
    let is_bool = matches!(existing, Some(Value::Bool(_))) || is("boolean");
    let is_int = matches!(existing, Some(Value::Number(_))) || is("integer");
    let is_list = matches!(existing, Some(Value::Array(_))) || schema.is_some_and(|s| s.is_string_list());
    if is_bool {
        return match raw.to_ascii_lowercase().as_str() {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err(format!("{raw:?} is not true or false")),
        };
    }
    if is_int {
        return raw
            .trim()
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| format!("{raw:?} is not an integer"));
    }
    if is_list {
        return Ok(Value::Array(
            raw.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| Value::String(s.to_owned()))
                .collect(),
        ));
    }
    if schema.is_some_and(|s| s.is_nullable()) && (raw.is_empty() || raw == "null") {
        return Ok(Value::Null);
    }
    Ok(Value::String(raw.to_owned()))
}

fn apply_one(document: &mut Value, name: &str, raw: &str) -> Result<String, String> {
    let rest = &name[PREFIX.len()..];
    let segments: Vec<&str> = rest.split("__").collect();
    if segments.iter().any(|s| s.is_empty()) {
        return Err("has an empty path segment; join segments with exactly two underscores".to_owned());
    }
    let mut canonical: Vec<String> = Vec::new();
    let mut node = document;
    let (last, parents) = segments.split_last().ok_or("names no setting")?;
    for segment in parents {
        node = match node {
            Value::Object(map) => {
                let key = resolve_key(map, &canonical, segment)?;
                // A top-level mapping of fixed shape (namespaceGuard) may be set key by key
                // even when the file leaves it out; groups and lists cannot be invented.
                if canonical.is_empty() && schema_at(std::slice::from_ref(&key)).is_some_and(|n| n.is_fixed_mapping()) {
                    map.entry(key.clone()).or_insert_with(|| Value::Object(Map::new()));
                }
                canonical.push(key.clone());
                map.get_mut(&key).ok_or_else(|| {
                    format!(
                        "{} is not set in the file, so it has nothing to override",
                        canonical.join(".")
                    )
                })?
            }
            Value::Array(items) => {
                let index: usize = segment
                    .parse()
                    .map_err(|_| format!("{segment:?} is not a list index"))?;
                let len = items.len();
                canonical.push(index.to_string());
                items
                    .get_mut(index)
                    .ok_or_else(|| format!("index {index} is out of range (the list has {len} items)"))?
            }
            _ => return Err(format!("{} is a scalar, it has no {segment:?}", canonical.join("."))),
        };
    }
    match node {
        Value::Object(map) => {
            let key = resolve_key(map, &canonical, last)?;
            canonical.push(key.clone());
            let value = typed_value(&key, schema_at(&canonical), map.get(&key), raw)?;
            map.insert(key, value);
        }
        Value::Array(items) => {
            let index: usize = last.parse().map_err(|_| format!("{last:?} is not a list index"))?;
            let len = items.len();
            let slot = items
                .get_mut(index)
                .ok_or_else(|| format!("index {index} is out of range (the list has {len} items)"))?;
            canonical.push(index.to_string());
            *slot = typed_value("", schema_at(&canonical), Some(slot), raw)?;
        }
        _ => return Err(format!("{} is a scalar, it has no {last:?}", canonical.join("."))),
    }
    Ok(canonical.join("."))
}

/// Applies every `POD_DIRECTOR__*` variable of `vars` to `document`, in name order.
/// Returns the overridden settings as `VARIABLE -> path`, or every error.
pub fn apply(
    document: &mut Value,
    vars: impl IntoIterator<Item = (String, String)>,
) -> Result<Vec<(String, String)>, Vec<FieldError>> {
    let mut vars: Vec<(String, String)> = vars.into_iter().filter(|(k, _)| k.starts_with(PREFIX)).collect();
    vars.sort();
    if !document.is_object() && !vars.is_empty() {
        *document = Value::Object(Map::new());
    }
    let mut applied = Vec::new();
    let mut errors = Vec::new();
    for (name, raw) in vars {
        match apply_one(document, &name, &raw) {
            Ok(path) => applied.push((name, path)),
            Err(message) => errors.push(FieldError {
                path: format!("environment variable {name}"),
                message,
            }),
        }
    }
    if errors.is_empty() { Ok(applied) } else { Err(errors) }
}

#[cfg(test)]
mod tests;
