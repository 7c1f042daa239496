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
mod tests {
    use super::*;
    use serde_json::json;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn camel_case_group_mode_is_flipped_by_one_variable() {
        let mut doc = json!({"groups": {"ci": {"mode": "dryRun"}}});
        let applied = apply(&mut doc, vars(&[("POD_DIRECTOR__GROUPS__CI__MODE", "enforce")])).unwrap();
        assert_eq!(doc["groups"]["ci"]["mode"], "enforce");
        assert_eq!(applied[0].1, "groups.ci.mode");
    }

    #[test]
    fn unset_known_scalars_can_be_set_and_typed() {
        let mut doc = json!({"groups": {"gpu-a100": {}}});
        apply(
            &mut doc,
            vars(&[
                ("POD_DIRECTOR__DEFAULT_MODE", "warn"),
                ("POD_DIRECTOR__GROUPS__GPU_A100__ALLOW_DAEMON_SETS", "TRUE"),
                ("POD_DIRECTOR__GROUPS__GPU_A100__ALLOW_POD_EXCLUSION", "true"),
                ("POD_DIRECTOR__GROUPS__GPU_A100__ON_CONFLICT", "override"),
                ("POD_DIRECTOR__EXCLUDED_NAMESPACES", "kube-system, monitoring"),
                ("POD_DIRECTOR_CONFIG", "/not/an/override"),
            ]),
        )
        .unwrap();
        assert_eq!(doc["defaultMode"], "warn");
        assert_eq!(
            doc["groups"]["gpu-a100"]["allowDaemonSets"], true,
            "booleans in any case"
        );
        assert_eq!(doc["groups"]["gpu-a100"]["allowPodExclusion"], true);
        assert_eq!(doc["groups"]["gpu-a100"]["onConflict"], "override");
        assert_eq!(doc["excludedNamespaces"], json!(["kube-system", "monitoring"]));
    }

    #[test]
    fn list_items_and_existing_map_keys_are_reachable() {
        let mut doc = json!({"groups": {"ci": {
            "nodeSelector": {"node-pool": "ci"},
            "tolerations": [{"key": "dedicated", "value": "ci"}]}}});
        apply(
            &mut doc,
            vars(&[
                ("POD_DIRECTOR__GROUPS__CI__TOLERATIONS__0__VALUE", "ci2"),
                ("POD_DIRECTOR__GROUPS__CI__NODE_SELECTOR__NODE_POOL", "ci2"),
            ]),
        )
        .unwrap();
        assert_eq!(doc["groups"]["ci"]["tolerations"][0]["value"], "ci2");
        assert_eq!(doc["groups"]["ci"]["nodeSelector"]["node-pool"], "ci2");
    }

    #[test]
    fn errors_name_the_variable_and_what_is_wrong() {
        let mut doc = json!({"groups": {"ci": {"tolerations": []}}});
        let errors = apply(
            &mut doc,
            vars(&[
                ("POD_DIRECTOR__GROUPS__NOPE__MODE", "enforce"),
                ("POD_DIRECTOR__GROUPS__CI__ALLOW_POD_EXCLUSION", "yes"),
                ("POD_DIRECTOR__GROUPS__CI__TOLERATIONS__3__KEY", "x"),
                ("POD_DIRECTOR__GROUPS__CI", "x"),
                ("POD_DIRECTOR__BOGUS", "x"),
            ]),
        )
        .unwrap_err();
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(errors.len(), 5, "{text:#?}");
        assert!(
            text.iter()
                .any(|t| t.contains("POD_DIRECTOR__GROUPS__NOPE__MODE") && t.contains("\"NOPE\" matches no key"))
        );
        assert!(text.iter().any(|t| t.contains("\"yes\" is not true or false")));
        assert!(text.iter().any(|t| t.contains("index 3 is out of range")));
        assert!(text.iter().any(|t| t.contains("is a mapping, not a scalar")));
        assert!(text.iter().any(|t| t.contains("\"BOGUS\" matches no key")));
    }

    #[test]
    fn settings_are_typed_by_the_schema_wherever_they_are() {
        let mut doc = json!({"groups": {"ci": {"affinity": {"nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "preference": {}}]}}}}});
        apply(
            &mut doc,
            vars(&[
                (
                    "POD_DIRECTOR__GROUPS__CI__AFFINITY__NODE_AFFINITY__PREFERRED_DURING_SCHEDULING_IGNORED_DURING_EXECUTION__0__WEIGHT",
                    "20",
                ),
                ("POD_DIRECTOR__GROUPS__CI__ALLOW_DAEMON_SETS", "true"),
                ("POD_DIRECTOR__NAMESPACE_GUARD__ALLOWED_GROUPS", "system:masters, platform"),
            ]),
        )
        .unwrap();
        let preferred =
            &doc["groups"]["ci"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"];
        assert_eq!(preferred[0]["weight"], 20, "an integer, not the string \"20\"");
        assert_eq!(doc["groups"]["ci"]["allowDaemonSets"], true);
        assert_eq!(
            doc["namespaceGuard"]["allowedGroups"],
            json!(["system:masters", "platform"])
        );
    }

    #[test]
    fn a_variable_cannot_invent_a_group_or_a_key_the_schema_does_not_have() {
        let mut doc = json!({"groups": {"ci": {}}});
        let errors = apply(
            &mut doc,
            vars(&[
                ("POD_DIRECTOR__GROUPS__GPU__MODE", "enforce"),
                ("POD_DIRECTOR__GROUPS__CI__NODE_SELECTR", "x"),
            ]),
        )
        .unwrap_err();
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "environment variable POD_DIRECTOR__GROUPS__CI__NODE_SELECTR: \"NODE_SELECTR\" matches no key here \
                 (keys: mode, onConflict, allowPodExclusion, onNoFeasibleNode, allowDaemonSets, nodeSelector, tolerations, affinity, alternatives, reserve, nodes, enforceWith)",
                "environment variable POD_DIRECTOR__GROUPS__GPU__MODE: \"GPU\" matches no key here (keys: ci)",
            ]
        );
    }

    #[test]
    fn default_group_can_be_cleared() {
        let mut doc = json!({"defaultGroup": "ci"});
        apply(&mut doc, vars(&[("POD_DIRECTOR__DEFAULT_GROUP", "")])).unwrap();
        assert!(doc["defaultGroup"].is_null());
    }
}
