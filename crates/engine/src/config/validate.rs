//! Strict, complete validation of a configuration document, walked as untyped JSON before it
//! is deserialized so that every problem is reported in one run, each with its path.
//!
//! The walk follows the schema of the Rust types (`schema.rs`, `kubernetes.rs`): keys, types,
//! enumerations, ranges, required and unique items, and the name syntax of each named string
//! type. What is written here are the rules beyond the schema: those between settings, and
//! those the API server applies to a toleration or a selector requirement.

use serde_json::{Map, Value};

use super::path::Path;
use super::schema::{Node, names};
use super::{FieldError, kubernetes};
use crate::syntax;

struct Checker {
    errors: Vec<FieldError>,
}

fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// The allowed values, as messages list them (the empty taint effect goes unnamed).
fn one_of(allowed: &[&str]) -> String {
    allowed
        .iter()
        .filter(|a| !a.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(", ")
}

/// The allowed key a misspelt `key` most likely meant: the nearest by edit distance (optimal
/// string alignment, ignoring case), when it is near enough (a third of its length, 1 to 3).
fn closest<'a>(key: &str, allowed: &[&'a str]) -> Option<&'a str> {
    let key = key.to_ascii_lowercase();
    allowed
        .iter()
        .map(|candidate| (strsim::osa_distance(&key, &candidate.to_ascii_lowercase()), *candidate))
        .filter(|(distance, candidate)| *distance <= (candidate.chars().count() / 3).clamp(1, 3))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// `s` is not a valid `what`, and why, when `reason` says it is not.
fn invalid(s: &str, what: &str, reason: Option<String>) -> Option<String> {
    reason.map(|reason| format!("{s:?} is not a valid {what}: {reason}"))
}

/// The rule of a named string type of the schema (`kubernetes.rs`): what is wrong with `s`.
fn string_rule(name: &str) -> Option<fn(&str) -> Option<String>> {
    let rule: fn(&str) -> Option<String> = match name {
        "labelKey" => |s| invalid(s, "label key", syntax::label_key(s)),
        "labelValue" => |s| invalid(s, "label value", syntax::label_value(s)),
        "namespaceName" => |s| invalid(s, "namespace name", syntax::dns1123_label(s)),
        "tolerationKey" => |s| invalid(s, "taint key", syntax::label_key(s).filter(|_| !s.is_empty())),
        "groupName" => |s| match syntax::label_value(s) {
            _ if s.is_empty() => Some("a group name must not be empty".to_owned()),
            reason => reason.map(|reason| format!("group name {s:?} cannot be a namespace label value: {reason}")),
        },
        // A Kubernetes username (`request.userInfo.username`) or group name: non-empty, no whitespace.
        "requesterName" => |s| match s {
            "" => Some("must not be empty".to_owned()),
            _ if s.chars().any(char::is_whitespace) => Some(format!(
                "{s:?} contains whitespace; Kubernetes user and group names have none"
            )),
            _ => None,
        },
        "serviceAccountName" => service_account,
        "alternativeName" => super::alternatives::name_rule,
        _ => return None,
    };
    Some(rule)
}

/// What is wrong with `s` as the `namespace/name` of a ServiceAccount.
fn service_account(s: &str) -> Option<String> {
    if let Some(rest) = s.strip_prefix("system:serviceaccount:") {
        let hint = rest.replacen(':', "/", 1);
        return Some(format!(
            "{s:?} is a username: write the service account as {hint:?} (namespace/name), or list the username in allowedUsers"
        ));
    }
    let Some((namespace, name)) = s.split_once('/') else {
        return Some(format!(
            "{s:?} is not namespace/name (e.g. argocd/argocd-application-controller); to allow every service \
             account of a namespace, list the group system:serviceaccounts:NAMESPACE in allowedGroups"
        ));
    };
    (syntax::dns1123_label(namespace).map(|reason| (namespace, "namespace name", reason)))
        .or_else(|| syntax::dns1123_subdomain(name).map(|reason| (name, "service account name", reason)))
        .map(|(part, what, reason)| format!("{part:?} (in {s:?}) is not a valid {what}: {reason}"))
}

/// A string setting of `map` as the rules between settings read it: `absent` when it is not
/// there (or null), `None` when it is not a string (an error already).
fn text<'v>(map: &'v Map<String, Value>, key: &str, absent: &'v str) -> Option<&'v str> {
    match map.get(key) {
        None | Some(Value::Null) => Some(absent),
        Some(v) => v.as_str(),
    }
}

impl Checker {
    fn err(&mut self, path: &Path, message: impl Into<String>) {
        self.errors.push(FieldError {
            path: path.to_string(),
            message: message.into(),
        });
    }

    fn string<'v>(&mut self, v: &'v Value, path: &Path) -> Option<&'v str> {
        let got = describe(v);
        match v {
            Value::String(s) => return Some(s),
            Value::Number(_) | Value::Bool(_) => {
                self.err(
                    path,
                    format!("expected a string, got {got} ({v}); quote it in YAML so it stays text"),
                );
            }
            _ => self.err(path, format!("expected a string, got {got}")),
        }
        None
    }

    /// Checks `v` against the schema `node` at `path`; returns whether it is valid.
    fn value(&mut self, v: &Value, path: &Path, node: Node) -> bool {
        if v.is_null() && node.is_nullable() {
            return true;
        }
        let before = self.errors.len();
        let variants = node.variants();
        let int = |keyword| node.get(keyword).and_then(Value::as_i64);
        let expected = |what: &str| format!("expected {what}, got {}", describe(v));
        if !variants.is_empty() {
            if let Some(s) = self.string(v, path)
                && !variants.contains(&s)
            {
                self.err(path, format!("{s:?} is not one of {}", one_of(&variants)));
            }
        } else if let Some(rule) = string_rule(node.name()) {
            if let Some(message) = self.string(v, path).and_then(rule) {
                self.err(path, message);
            }
        } else if node.is("object") {
            match v {
                Value::Object(map) => self.mapping(map, path, node),
                _ => self.err(path, expected("a mapping")),
            }
        } else if node.is("array") {
            match (v, node.item()) {
                (Value::Array(items), Some(item)) => self.list(items, path, node, item),
                _ => self.err(path, expected("a list")),
            }
        } else if node.is("boolean") && !v.is_boolean() {
            self.err(path, expected("true or false"));
        } else if node.is("integer") {
            match (v.as_i64(), int("minimum"), int("maximum")) {
                (None, ..) => self.err(path, expected("an integer")),
                (Some(n), Some(min), Some(max)) if !(min..=max).contains(&n) => {
                    self.err(path, format!("{n} is not in the range {min} to {max}"));
                }
                _ => {}
            }
        } else if node.is("string") {
            self.string(v, path);
        }
        self.errors.len() == before
    }

    /// A mapping: of fixed keys (with their hint when one is misspelt), or free keys of a type.
    fn mapping(&mut self, map: &Map<String, Value>, path: &Path, node: Node) {
        let fields = node.keys();
        if fields.is_empty() {
            let names = node.property_names().and_then(|n| string_rule(n.name()));
            for (key, v) in map {
                let p = path.key(key);
                if let Some(message) = names.and_then(|rule| rule(key)) {
                    self.err(&p, message);
                }
                if let Some(child) = node.child(key) {
                    self.value(v, &p, child);
                }
            }
            return;
        }
        for key in map.keys().filter(|key| !fields.contains(&key.as_str())) {
            let hint = closest(key, &fields)
                .map(|f| format!(" (did you mean {f}?)"))
                .unwrap_or_default();
            let message = format!("unknown key{hint}; allowed keys are {}", fields.join(", "));
            self.err(&path.key(key), message);
        }
        let required = node.get("required").and_then(Value::as_array).into_iter().flatten();
        for key in required.filter_map(Value::as_str).filter(|key| !map.contains_key(*key)) {
            let child = node.child(key);
            let variants = child.map(|c| c.variants()).unwrap_or_default();
            let range = child.and_then(|c| c.get("minimum").zip(c.get("maximum")));
            let hint = match (variants.is_empty(), range, child.and_then(|c| c.item())) {
                (false, ..) => format!(": one of {}", one_of(&variants)),
                (_, Some((min, max)), _) => format!(": an integer from {min} to {max}"),
                (_, _, Some(item)) => format!(": list at least one {}", item.name()),
                _ => String::new(),
            };
            self.err(&path.key(key), format!("is required{hint}"));
        }
        for key in fields {
            if let (Some(v), Some(child)) = (map.get(key), node.child(key)) {
                self.value(v, &path.key(key), child);
            }
        }
        self.rules(node.name(), map, path);
    }

    /// A list: each item, each once when the schema says so, at least `minItems` of them.
    fn list(&mut self, items: &[Value], path: &Path, node: Node, item: Node) {
        let unique = node.get("uniqueItems") == Some(&Value::Bool(true));
        let mut seen = Vec::new();
        for (i, v) in items.iter().enumerate() {
            let p = path.index(i);
            if self.value(v, &p, item) && unique {
                if seen.contains(&v) {
                    self.err(&p, format!("{v} is listed twice"));
                }
                seen.push(v);
            }
        }
        if let Some(min) = node.get("minItems").and_then(Value::as_u64)
            && (items.len() as u64) < min
        {
            self.err(path, format!("must list at least {min} {}", item.name()));
        }
    }

    /// The rules beyond the schema of the mapping `map` of the definition `name`.
    fn rules(&mut self, name: &str, map: &Map<String, Value>, path: &Path) {
        let count = |key: &str| map.get(key).and_then(Value::as_array).map_or(0, Vec::len);
        match name {
            "config" => self.default_group(map, path),
            // allowedGroups left out allows system:masters.
            "namespaceGuard"
                if map.contains_key("allowedGroups")
                    && count("allowedUsers") + count("allowedGroups") + count("allowedServiceAccounts") == 0 =>
            {
                self.err(
                    path,
                    "allows nobody to change namespace group labels (allowedUsers, allowedGroups and \
                     allowedServiceAccounts are all empty): list at least one, e.g. allowedGroups: [system:masters]",
                );
            }
            "group" => {
                self.reserve(map, path);
                if let Some(message) = super::alternatives::too_many(map) {
                    self.err(&path.key("alternatives"), message);
                }
            }
            "toleration" => self.toleration(map, path),
            "nodeSelectorTerm" => {
                if count("matchExpressions") + count("matchFields") == 0 {
                    self.err(
                        path,
                        "a term without requirements matches no node: add matchExpressions or matchFields",
                    );
                }
                for (key, field) in [("matchExpressions", false), ("matchFields", true)] {
                    for (i, item) in map.get(key).and_then(Value::as_array).into_iter().flatten().enumerate() {
                        if let Some(requirement) = item.as_object() {
                            self.requirement(requirement, &path.key(key).index(i), Some(field));
                        }
                    }
                }
            }
            "labelSelectorRequirement" => self.requirement(map, path, None),
            _ => {}
        }
    }

    /// `defaultGroup` names a defined group.
    fn default_group(&mut self, map: &Map<String, Value>, path: &Path) {
        let Some(Value::String(name)) = map.get("defaultGroup") else {
            return;
        };
        let groups = map.get("groups").and_then(Value::as_object);
        if !groups.is_some_and(|g| g.contains_key(name)) {
            let names: Vec<&str> = groups.into_iter().flat_map(|g| g.keys()).map(String::as_str).collect();
            let defined = if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            };
            let message = format!("{name:?} is not a defined group (defined: {defined})");
            self.err(&path.key("defaultGroup"), message);
        }
    }

    /// A group with `reserve` whose tolerations can name the taints it reserves (a toleration of
    /// every taint reserves every node of the cluster).
    fn reserve(&mut self, group: &Map<String, Value>, path: &Path) {
        if group.get("reserve").is_none_or(Value::is_null) {
            return;
        }
        let tolerations = group.get("tolerations").and_then(Value::as_array);
        for (i, t) in tolerations.into_iter().flatten().enumerate() {
            let key = t.get("key").and_then(Value::as_str).unwrap_or_default();
            if key.is_empty() && t.get("operator").and_then(Value::as_str) == Some("Exists") {
                self.err(
                    &path.key("reserve"),
                    format!(
                        "cannot reserve: tolerations[{i}] (empty key, operator Exists) tolerates every taint, so the \
                         group's pool is every tainted node of the cluster; give the toleration the key of the pool's \
                         taint (e.g. key: dedicated), or remove reserve"
                    ),
                );
            }
        }
    }

    /// A toleration's key, operator, value and effect together, as the API server checks them.
    fn toleration(&mut self, map: &Map<String, Value>, path: &Path) {
        let operator = text(map, "operator", "Equal");
        if text(map, "key", "") == Some("") && operator == Some("Equal") {
            let message = "must be Exists when key is empty (an empty key with Exists tolerates every taint)";
            self.err(&path.key("operator"), message);
        }
        if let Some(value) = text(map, "value", "").filter(|v| !v.is_empty())
            && operator == Some("Exists")
        {
            let message = format!("must be empty when operator is Exists (got {value:?})");
            self.err(&path.key("value"), message);
        }
        if let Some(effect) = text(map, "effect", "")
            && names::<kubernetes::TaintEffectName>().contains(&effect)
            && effect != "NoExecute"
            && map.get("tolerationSeconds").is_some_and(Value::is_i64)
        {
            let effect = if effect.is_empty() { "empty" } else { effect };
            let message = format!("only allowed with effect NoExecute (effect is {effect})");
            self.err(&path.key("tolerationSeconds"), message);
        }
    }

    /// A requirement of a node selector term (`matchFields`: `Some(true)`) or of a label selector
    /// (`None`): its values as its operator wants them; a node one's key a label key, or a field's
    /// `metadata.name`.
    fn requirement(&mut self, map: &Map<String, Value>, path: &Path, node: Option<bool>) {
        let field = node == Some(true);
        if let (Some(_), Some(Value::String(key))) = (node, map.get("key")) {
            let p = path.key("key");
            if !field && let Some(message) = invalid(key, "label key", syntax::label_key(key)) {
                self.err(&p, message);
            } else if field && key != "metadata.name" {
                self.err(
                    &p,
                    format!("{key:?} is not a supported field selector; only metadata.name is"),
                );
            }
        }
        let Some(operator) = map.get("operator").and_then(Value::as_str) else {
            return;
        };
        let values: Vec<&str> = map
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let vp = path.key("values");
        match operator {
            "Exists" | "DoesNotExist" | "Gt" | "Lt" if field => {
                self.err(&path.key("operator"), format!("{operator:?} is not one of In, NotIn"));
            }
            "In" | "NotIn" if field && values.len() != 1 => {
                let got = values.len();
                self.err(
                    &vp,
                    format!("must have exactly one value for a field selector (got {got})"),
                );
            }
            "In" | "NotIn" if values.is_empty() => {
                self.err(&vp, format!("must be non-empty when operator is {operator}"));
            }
            "In" | "NotIn" if !field => {
                for (i, value) in values.iter().enumerate() {
                    if let Some(message) = invalid(value, "label value", syntax::label_value(value)) {
                        self.err(&vp.index(i), message);
                    }
                }
            }
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                self.err(&vp, format!("must be empty when operator is {operator}"));
            }
            "Gt" | "Lt" if node.is_some() && values.len() != 1 => {
                self.err(&vp, format!("must have exactly one value when operator is {operator}"));
            }
            "Gt" | "Lt" if node.is_some() && values[0].parse::<i64>().is_err() => {
                let message = format!("{:?} is not an integer, as {operator} requires", values[0]);
                self.err(&vp.index(0), message);
            }
            _ => {}
        }
    }
}

/// Every problem in the document, in document order. Empty means valid.
pub(super) fn check(document: &Value) -> Vec<FieldError> {
    let mut checker = Checker { errors: Vec::new() };
    checker.value(document, &Path::root(), Node::root());
    checker.errors
}
