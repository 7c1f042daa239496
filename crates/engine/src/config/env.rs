//! Environment overrides (`POD_DIRECTOR__GROUPS__CI__MODE=enforce`): any scalar setting of the file
//! can be replaced by a variable, which wins over the file. The naming rule is the user's
//! reference's (docs/src/configuration.md): segments joined by `__`, each matching a key when both
//! are equal after lower-casing and dropping `_` and `-`; a variable cannot invent a group.

use serde_json::{Map, Value};

use super::FieldError;
use super::schema::Node;

pub const ENV_PREFIX: &str = "POD_DIRECTOR__";

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

/// The key of `map` (at `path`, canonical keys so far) that `segment` names: one the file has, or
/// one of a mapping of fixed shape (a group's settings, not its nodeSelector's labels).
fn resolve_key(map: &Map<String, Value>, path: &[String], segment: &str) -> Result<String, String> {
    let mut names: Vec<&str> = map.keys().map(String::as_str).collect();
    for known in schema_at(path).map(|node| node.keys()).unwrap_or_default() {
        if !names.contains(&known) {
            names.push(known);
        }
    }
    let wanted = normalize(segment);
    let candidates: Vec<&str> = names.iter().copied().filter(|k| normalize(k) == wanted).collect();
    match candidates[..] {
        [one] => Ok(one.to_owned()),
        [] if names.is_empty() => Err(format!("{segment:?} matches no key here (keys: none)")),
        [] => Err(format!("{segment:?} matches no key here (keys: {})", names.join(", "))),
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
        let parsed = raw.to_ascii_lowercase().parse::<bool>();
        return parsed
            .map(Value::Bool)
            .map_err(|_| format!("{raw:?} is not true or false"));
    }
    if is_int {
        return raw
            .trim()
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| format!("{raw:?} is not an integer"));
    }
    if is_list {
        return Ok(raw
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .into());
    }
    if schema.is_some_and(|s| s.is_nullable()) && (raw.is_empty() || raw == "null") {
        return Ok(Value::Null);
    }
    Ok(Value::String(raw.to_owned()))
}

fn apply_one(document: &mut Value, name: &str, raw: &str) -> Result<String, String> {
    let segments: Vec<&str> = name[ENV_PREFIX.len()..].split("__").collect();
    if segments.iter().any(|s| s.is_empty()) {
        return Err("has an empty path segment; join segments with exactly two underscores".to_owned());
    }
    let mut canonical: Vec<String> = Vec::new();
    let mut node = document;
    for (i, segment) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        node = match node {
            Value::Object(map) => {
                let key = resolve_key(map, &canonical, segment)?;
                // A top-level mapping of fixed shape (namespaceGuard) may be set key by key
                // even when the file leaves it out; groups and lists cannot be invented.
                let fixed =
                    canonical.is_empty() && schema_at(std::slice::from_ref(&key)).is_some_and(|n| n.is_fixed_mapping());
                if last || fixed {
                    map.entry(key.clone())
                        .or_insert_with(|| if last { Value::Null } else { Value::Object(Map::new()) });
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
    let key = canonical.last().cloned().unwrap_or_default();
    *node = typed_value(&key, schema_at(&canonical), Some(&*node).filter(|v| !v.is_null()), raw)?;
    Ok(canonical.join("."))
}

/// Applies every `POD_DIRECTOR__*` variable of `vars` to `document`, in name order.
/// Returns the overridden settings as `VARIABLE -> path`, or every error.
pub fn apply(
    document: &mut Value,
    vars: impl IntoIterator<Item = (String, String)>,
) -> Result<Vec<(String, String)>, Vec<FieldError>> {
    let mut vars: Vec<(String, String)> = vars.into_iter().filter(|(k, _)| k.starts_with(ENV_PREFIX)).collect();
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
