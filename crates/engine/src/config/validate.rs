//! Strict, complete validation of a configuration document.
//!
//! The document is walked as untyped JSON *before* it is deserialized, so that
//! every problem is reported in one run, each with its path and what to write
//! instead. The shape — which keys each mapping allows, which settings are
//! enumerations or booleans and their values — comes from the schema of the Rust
//! types (`schema.rs`, `kubernetes.rs`); what is written here are the rules beyond
//! the shape: everything the API server itself would refuse in a label, a
//! nodeSelector, a toleration or an affinity, and the rules between settings.

use serde_json::{Map, Value};

use super::path::Path;
use super::schema::{self, Node};
use super::{FieldError, kubernetes as k8s, syntax};

/// The names Kubernetes allows for an enumeration of `kubernetes.rs` (operators, effects).
fn allowed<'de, T: serde::Deserialize<'de>>() -> &'static [&'static str] {
    schema::names::<T>()
}

pub(super) struct Checker {
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

fn one_of(allowed: &[&str]) -> String {
    allowed.join(", ")
}

/// Edit distance between `a` and `b` (optimal string alignment: insertions,
/// deletions, substitutions and swaps of adjacent characters each cost 1),
/// ignoring ASCII case.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().map(|c| c.to_ascii_lowercase()).collect();
    let b: Vec<char> = b.chars().map(|c| c.to_ascii_lowercase()).collect();
    // rows[i][j]: distance between a[..i] and b[..j]; three rows are enough.
    let mut before: Vec<usize> = Vec::new();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut current = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (previous[j] + 1).min(current[j - 1] + 1).min(previous[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(before[j - 2] + 1);
            }
            current[j] = best;
        }
        before = std::mem::replace(&mut previous, current);
    }
    previous[b.len()]
}

/// The allowed key a misspelt `key` most likely meant: the nearest by edit
/// distance, when it is near enough (a third of its length, at least 1, at most 3).
pub(crate) fn closest<'a>(key: &str, allowed: &[&'a str]) -> Option<&'a str> {
    allowed
        .iter()
        .map(|candidate| (edit_distance(key, candidate), *candidate))
        .filter(|(distance, candidate)| *distance <= (candidate.chars().count() / 3).clamp(1, 3))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

impl Checker {
    pub(super) fn err(&mut self, path: &Path, message: impl Into<String>) {
        self.errors.push(FieldError {
            path: path.to_string(),
            message: message.into(),
        });
    }

    /// A mapping whose keys must all be in `fields`.
    pub(super) fn object<'v>(&mut self, v: &'v Value, path: &Path, fields: &[&str]) -> Option<&'v Map<String, Value>> {
        let Value::Object(map) = v else {
            self.err(path, format!("expected a mapping, got {}", describe(v)));
            return None;
        };
        for key in map.keys() {
            if !fields.contains(&key.as_str()) {
                let hint = closest(key, fields)
                    .map(|f| format!(" (did you mean {f}?)"))
                    .unwrap_or_default();
                self.err(
                    &path.key(key),
                    format!("unknown key{hint}; allowed keys are {}", one_of(fields)),
                );
            }
        }
        Some(map)
    }

    /// The settings of one of pod-director's own mappings that the schema types
    /// completely: enumerations and booleans.
    fn settings(&mut self, map: &Map<String, Value>, path: &Path, node: Node) {
        for key in node.keys() {
            let (Some(v), Some(setting)) = (map.get(key), node.child(key)) else {
                continue;
            };
            let variants = setting.variants();
            if !variants.is_empty() {
                self.enumerated(v, &path.key(key), &variants);
            } else if setting.is("boolean") {
                self.boolean(v, &path.key(key));
            }
        }
    }

    /// A mapping with free keys.
    pub(super) fn map<'v>(&mut self, v: &'v Value, path: &Path) -> Option<&'v Map<String, Value>> {
        match v {
            Value::Object(map) => Some(map),
            Value::Null => None,
            other => {
                self.err(path, format!("expected a mapping, got {}", describe(other)));
                None
            }
        }
    }

    fn list<'v>(&mut self, v: &'v Value, path: &Path) -> Option<&'v [Value]> {
        match v {
            Value::Array(items) => Some(items),
            Value::Null => None,
            other => {
                self.err(path, format!("expected a list, got {}", describe(other)));
                None
            }
        }
    }

    fn string<'v>(&mut self, v: &'v Value, path: &Path) -> Option<&'v str> {
        match v {
            Value::String(s) => Some(s),
            Value::Number(_) | Value::Bool(_) => {
                self.err(
                    path,
                    format!(
                        "expected a string, got {} ({v}); quote it in YAML so it stays text",
                        describe(v)
                    ),
                );
                None
            }
            other => {
                self.err(path, format!("expected a string, got {}", describe(other)));
                None
            }
        }
    }

    fn boolean(&mut self, v: &Value, path: &Path) {
        if !v.is_boolean() {
            self.err(path, format!("expected true or false, got {}", describe(v)));
        }
    }

    fn integer(&mut self, v: &Value, path: &Path) -> Option<i64> {
        match v.as_i64() {
            Some(n) => Some(n),
            None => {
                self.err(path, format!("expected an integer, got {}", describe(v)));
                None
            }
        }
    }

    fn enumerated(&mut self, v: &Value, path: &Path, allowed: &[&str]) -> Option<String> {
        let s = self.string(v, path)?;
        if allowed.contains(&s) {
            Some(s.to_owned())
        } else {
            self.err(path, format!("{s:?} is not one of {}", one_of(allowed)));
            None
        }
    }

    /// Whether `s` passes the `syntax` rule `rule`; if not, an error at `path` says it is
    /// not a valid `what`, and why.
    fn valid(&mut self, path: &Path, s: &str, what: &str, rule: fn(&str) -> Option<String>) -> bool {
        let reason = rule(s);
        if let Some(reason) = &reason {
            self.err(path, format!("{s:?} is not a valid {what}: {reason}"));
        }
        reason.is_none()
    }

    fn label_key(&mut self, v: &Value, path: &Path) -> Option<String> {
        let s = self.string(v, path)?;
        self.valid(path, s, "label key", syntax::label_key)
            .then(|| s.to_owned())
    }

    fn label_value(&mut self, v: &Value, path: &Path) {
        if let Some(s) = self.string(v, path) {
            self.valid(path, s, "label value", syntax::label_value);
        }
    }

    fn namespace_name(&mut self, v: &Value, path: &Path) -> Option<String> {
        let s = self.string(v, path)?;
        self.valid(path, s, "namespace name", syntax::dns1123_label)
            .then(|| s.to_owned())
    }

    fn label_map(&mut self, v: &Value, path: &Path) {
        if let Some(map) = self.map(v, path) {
            for (k, val) in map {
                let p = path.key(k);
                self.valid(&p, k, "label key", syntax::label_key);
                self.label_value(val, &p);
            }
        }
    }

    /// Checks each item of the list under `key`, when there is one; returns how many items it has.
    fn each(
        &mut self,
        map: &Map<String, Value>,
        key: &str,
        path: &Path,
        mut check: impl FnMut(&mut Self, &Value, &Path),
    ) -> usize {
        let Some(v) = map.get(key) else { return 0 };
        let p = path.key(key);
        let Some(items) = self.list(v, &p) else { return 0 };
        for (i, item) in items.iter().enumerate() {
            check(self, item, &p.index(i));
        }
        items.len()
    }

    /// [`Checker::each`] for a list of names, each listed once (`check` gives a valid item's name).
    fn each_once(
        &mut self,
        map: &Map<String, Value>,
        key: &str,
        path: &Path,
        check: fn(&mut Self, &Value, &Path) -> Option<String>,
    ) -> usize {
        let mut seen = Vec::new();
        self.each(map, key, path, |checker, item, p| {
            if let Some(name) = check(checker, item, p) {
                if seen.contains(&name) {
                    checker.err(p, format!("{name:?} is listed twice"));
                }
                seen.push(name);
            }
        })
    }

    /// A weighted term: `weight`, from 1 to 100, and the term under `term`.
    fn weighted(&mut self, v: &Value, path: &Path, fields: &[&str], term: &str, check: fn(&mut Self, &Value, &Path)) {
        let Some(map) = self.object(v, path, fields) else {
            return;
        };
        let p = path.key("weight");
        match map.get("weight") {
            None => self.err(&p, "is required: an integer from 1 to 100"),
            Some(w) => {
                if let Some(n) = self.integer(w, &p)
                    && !(1..=100).contains(&n)
                {
                    self.err(&p, format!("{n} is not in the range 1 to 100"));
                }
            }
        }
        match map.get(term) {
            Some(t) => check(self, t, &path.key(term)),
            None => self.err(&path.key(term), "is required"),
        }
    }

    /// The `operator` of a requirement, which must be there.
    fn operator(&mut self, map: &Map<String, Value>, path: &Path, allowed: &[&str]) -> Option<String> {
        let p = path.key("operator");
        match map.get("operator") {
            None => {
                self.err(&p, format!("is required: one of {}", one_of(allowed)));
                None
            }
            Some(op) => self.enumerated(op, &p, allowed),
        }
    }

    fn root(&mut self, v: &Value) {
        let root = Path::root();
        let node = Node::root();
        let Some(map) = self.object(v, &root, &node.keys()) else {
            return;
        };
        self.settings(map, &root, node);
        if let Some(v) = map.get("namespaceLabel") {
            self.label_key(v, &root.key("namespaceLabel"));
        }
        for key in ["podExclusionLabel", "podPlacementLabel"] {
            if let Some(v) = map.get(key) {
                self.label_key(v, &root.key(key));
            }
        }
        if let Some(v) = map.get("daemonSetController") {
            self.username(v, &root.key("daemonSetController"));
        }
        if let (Some(v), Some(node)) = (map.get("namespaceGuard"), node.child("namespaceGuard")) {
            self.namespace_guard(v, &root.key("namespaceGuard"), node);
        }
        if let (Some(v), Some(node)) = (map.get("trustedSchedulers"), node.child("trustedSchedulers")) {
            let path = root.key("trustedSchedulers");
            if let Some(map) = self.object(v, &path, &node.keys()) {
                self.each_once(map, "users", &path, Self::username);
                self.each_once(map, "serviceAccounts", &path, Self::service_account);
            }
        }
        self.each_once(map, "excludedNamespaces", &root, Self::namespace_name);
        let groups = map.get("groups").and_then(|g| {
            let p = root.key("groups");
            let groups = self.map(g, &p)?;
            for (name, group) in groups {
                let gp = p.key(name);
                if name.is_empty() {
                    self.err(&gp, "a group name must not be empty");
                } else if let Some(reason) = syntax::label_value(name) {
                    self.err(
                        &gp,
                        format!("group name {name:?} cannot be a namespace label value: {reason}"),
                    );
                }
                if let Some(node) = node.child("groups").and_then(|groups| groups.child(name)) {
                    self.group(group, &gp, node);
                }
            }
            Some(groups)
        });
        if let Some(v) = map.get("defaultGroup") {
            let p = root.key("defaultGroup");
            if !v.is_null()
                && let Some(name) = self.string(v, &p)
            {
                let defined = groups.is_some_and(|g| g.contains_key(name));
                if !defined {
                    let names: Vec<&str> = groups
                        .map(|g| g.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    self.err(
                        &p,
                        format!(
                            "{name:?} is not a defined group (defined: {})",
                            if names.is_empty() {
                                "none".to_owned()
                            } else {
                                names.join(", ")
                            }
                        ),
                    );
                }
            }
        }
    }

    fn group(&mut self, v: &Value, path: &Path, node: Node) {
        let Some(map) = self.object(v, path, &node.keys()) else {
            return;
        };
        self.settings(map, path, node);
        self.placement(map, path);
        if let (Some(v), Some(node)) = (map.get("alternatives"), node.child("alternatives")) {
            self.alternatives(v, &path.key("alternatives"), node);
        }
        if let (Some(v), Some(node)) = (map.get("reserve"), node.child("reserve")) {
            self.reserve(v, map, &path.key("reserve"), node);
        }
        if let (Some(v), Some(node)) = (map.get("nodes"), node.child("nodes")) {
            let path = path.key("nodes");
            if let Some(nodes) = self.object(v, &path, &node.keys()) {
                self.settings(nodes, &path, node);
            }
        }
    }

    /// A placement: nodeSelector, tolerations, affinity (a group's own, or an alternative).
    pub(super) fn placement(&mut self, map: &Map<String, Value>, path: &Path) {
        if let Some(v) = map.get("nodeSelector") {
            self.label_map(v, &path.key("nodeSelector"));
        }
        self.each(map, "tolerations", path, Self::toleration);
        if let Some(v) = map.get("affinity") {
            self.affinity(v, &path.key("affinity"));
        }
    }

    /// `reserve`: its settings and allow-list, and a group whose tolerations can name the
    /// taints it reserves (a toleration of every taint reserves every node of the cluster).
    fn reserve(&mut self, v: &Value, group: &Map<String, Value>, path: &Path, node: Node) {
        if v.is_null() {
            return;
        }
        let Some(map) = self.object(v, path, &node.keys()) else {
            return;
        };
        self.settings(map, path, node);
        if let (Some(v), Some(allow)) = (map.get("allow"), node.child("allow")) {
            let ap = path.key("allow");
            if let Some(allow_map) = self.object(v, &ap, &allow.keys()) {
                self.each_once(allow_map, "namespaces", &ap, Self::namespace_name);
                self.each_once(allow_map, "users", &ap, Self::username);
                self.each_once(allow_map, "groups", &ap, Self::username);
                self.each_once(allow_map, "placementGroups", &ap, |c, v, p| {
                    c.string(v, p).map(str::to_owned)
                });
                self.each_once(allow_map, "serviceAccounts", &ap, Self::service_account);
            }
        }
        let tolerations = group.get("tolerations").and_then(Value::as_array);
        for (i, t) in tolerations.into_iter().flatten().enumerate() {
            let key = t.get("key").and_then(Value::as_str).unwrap_or_default();
            if key.is_empty() && t.get("operator").and_then(Value::as_str) == Some("Exists") {
                self.err(
                    path,
                    format!(
                        "cannot reserve: tolerations[{i}] (empty key, operator Exists) tolerates every taint, so the \
                         group's pool is every tainted node of the cluster; give the toleration the key of the pool's \
                         taint (e.g. key: dedicated), or remove reserve"
                    ),
                );
            }
        }
    }

    /// A Kubernetes username (`request.userInfo.username`) or group name: non-empty, no whitespace.
    fn username(&mut self, v: &Value, path: &Path) -> Option<String> {
        let s = self.string(v, path)?;
        if s.is_empty() {
            self.err(path, "must not be empty");
            return None;
        }
        if s.chars().any(char::is_whitespace) {
            self.err(
                path,
                format!("{s:?} contains whitespace; Kubernetes user and group names have none"),
            );
            return None;
        }
        Some(s.to_owned())
    }

    fn namespace_guard(&mut self, v: &Value, path: &Path, node: Node) {
        let Some(map) = self.object(v, path, &node.keys()) else {
            return;
        };
        self.settings(map, path, node);
        // allowedGroups defaults to [system:masters].
        let mut allowed = usize::from(!map.contains_key("allowedGroups"));
        allowed += self.each_once(map, "allowedUsers", path, Self::username);
        allowed += self.each_once(map, "allowedGroups", path, Self::username);
        allowed += self.each_once(map, "allowedServiceAccounts", path, Self::service_account);
        if allowed == 0 {
            self.err(
                path,
                "allows nobody to change namespace group labels (allowedUsers, allowedGroups and \
                 allowedServiceAccounts are all empty): list at least one, e.g. allowedGroups: [system:masters]",
            );
        }
    }

    /// `namespace/name` of a ServiceAccount.
    fn service_account(&mut self, v: &Value, path: &Path) -> Option<String> {
        let s = self.string(v, path)?;
        if let Some(rest) = s.strip_prefix("system:serviceaccount:") {
            let hint = rest.replacen(':', "/", 1);
            self.err(
                path,
                format!("{s:?} is a username: write the service account as {hint:?} (namespace/name), or list the username in allowedUsers"),
            );
            return None;
        }
        let Some((namespace, name)) = s.split_once('/') else {
            self.err(
                path,
                format!(
                    "{s:?} is not namespace/name (e.g. argocd/argocd-application-controller); \
                     to allow every service account of a namespace, list the group \
                     system:serviceaccounts:NAMESPACE in allowedGroups"
                ),
            );
            return None;
        };
        if let Some(reason) = syntax::dns1123_label(namespace) {
            self.err(
                path,
                format!("{namespace:?} (in {s:?}) is not a valid namespace name: {reason}"),
            );
            return None;
        }
        if let Some(reason) = syntax::dns1123_subdomain(name) {
            self.err(
                path,
                format!("{name:?} (in {s:?}) is not a valid service account name: {reason}"),
            );
            return None;
        }
        Some(s.to_owned())
    }

    fn optional_string(&mut self, map: &Map<String, Value>, key: &str, path: &Path) -> Option<String> {
        match map.get(key) {
            None | Some(Value::Null) => Some(String::new()),
            Some(v) => self.string(v, &path.key(key)).map(str::to_owned),
        }
    }

    fn toleration(&mut self, v: &Value, path: &Path) {
        let Some(map) = self.object(v, path, allowed::<k8s::Toleration>()) else {
            return;
        };
        let key = self.optional_string(map, "key", path);
        let value = self.optional_string(map, "value", path);
        let operator = match map.get("operator") {
            None | Some(Value::Null) => Some("Equal".to_owned()),
            Some(v) => self.enumerated(v, &path.key("operator"), allowed::<k8s::TolerationOperator>()),
        };
        let effect = match map.get("effect") {
            None | Some(Value::Null) => Some(String::new()),
            Some(Value::String(s)) if s.is_empty() => Some(String::new()),
            Some(v) => {
                // The empty effect (every effect) is taken above; the message lists the named ones.
                let effects: Vec<&str> = allowed::<k8s::TaintEffect>()
                    .iter()
                    .copied()
                    .filter(|e| !e.is_empty())
                    .collect();
                self.enumerated(v, &path.key("effect"), &effects)
            }
        };
        if let Some(key) = &key {
            if key.is_empty() {
                if operator.as_deref() == Some("Equal") {
                    self.err(
                        &path.key("operator"),
                        "must be Exists when key is empty (an empty key with Exists tolerates every taint)",
                    );
                }
            } else {
                self.valid(&path.key("key"), key, "taint key", syntax::label_key);
            }
        }
        if let (Some(op), Some(value)) = (&operator, &value) {
            match op.as_str() {
                "Exists" if !value.is_empty() => self.err(
                    &path.key("value"),
                    format!("must be empty when operator is Exists (got {value:?})"),
                ),
                "Equal" => {
                    self.valid(&path.key("value"), value, "taint value", syntax::label_value);
                }
                _ => {}
            }
        }
        if let Some(seconds) = map.get("tolerationSeconds").filter(|v| !v.is_null()) {
            let p = path.key("tolerationSeconds");
            if self.integer(seconds, &p).is_some()
                && let Some(effect) = &effect
                && effect != "NoExecute"
            {
                self.err(
                    &p,
                    format!(
                        "only allowed with effect NoExecute (effect is {})",
                        if effect.is_empty() { "empty" } else { effect.as_str() }
                    ),
                );
            }
        }
    }

    fn affinity(&mut self, v: &Value, path: &Path) {
        let Some(map) = self.object(v, path, allowed::<k8s::Affinity>()) else {
            return;
        };
        if let Some(v) = map.get("nodeAffinity") {
            self.node_affinity(v, &path.key("nodeAffinity"));
        }
        for key in ["podAffinity", "podAntiAffinity"] {
            if let Some(v) = map.get(key) {
                self.pod_affinity(v, &path.key(key));
            }
        }
    }

    fn node_affinity(&mut self, v: &Value, path: &Path) {
        const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";
        const PREFERRED: &str = "preferredDuringSchedulingIgnoredDuringExecution";
        let Some(map) = self.object(v, path, allowed::<k8s::NodeAffinity>()) else {
            return;
        };
        if let Some(v) = map.get(REQUIRED) {
            let p = path.key(REQUIRED);
            if let Some(selector) = self.object(v, &p, allowed::<k8s::NodeSelector>()) {
                let tp = p.key("nodeSelectorTerms");
                match selector.get("nodeSelectorTerms") {
                    None => self.err(&tp, "is required: list at least one term"),
                    Some(terms) => {
                        if let Some(terms) = self.list(terms, &tp) {
                            if terms.is_empty() {
                                self.err(&tp, "must list at least one term");
                            }
                            for (i, term) in terms.iter().enumerate() {
                                self.node_selector_term(term, &tp.index(i));
                            }
                        }
                    }
                }
            }
        }
        self.each(map, PREFERRED, path, |checker, item, p| {
            let fields = allowed::<k8s::PreferredSchedulingTerm>();
            checker.weighted(item, p, fields, "preference", Self::node_selector_term);
        });
    }

    fn node_selector_term(&mut self, v: &Value, path: &Path) {
        let Some(map) = self.object(v, path, allowed::<k8s::NodeSelectorTerm>()) else {
            return;
        };
        let count = self.each(map, "matchExpressions", path, |checker, item, p| {
            checker.node_selector_requirement(item, p, false)
        }) + self.each(map, "matchFields", path, |checker, item, p| {
            checker.node_selector_requirement(item, p, true)
        });
        if count == 0 {
            self.err(
                path,
                "a term without requirements matches no node: add matchExpressions or matchFields",
            );
        }
    }

    fn node_selector_requirement(&mut self, v: &Value, path: &Path, field: bool) {
        let Some(map) = self.object(v, path, allowed::<k8s::NodeSelectorRequirement>()) else {
            return;
        };
        let kp = path.key("key");
        match map.get("key") {
            None => self.err(&kp, "is required"),
            Some(k) if field => {
                if let Some(k) = self.string(k, &kp)
                    && k != "metadata.name"
                {
                    self.err(
                        &kp,
                        format!("{k:?} is not a supported field selector; only metadata.name is"),
                    );
                }
            }
            Some(k) => {
                self.label_key(k, &kp);
            }
        }
        let allowed: &[&str] = if field {
            &["In", "NotIn"]
        } else {
            allowed::<k8s::NodeSelectorOperator>()
        };
        let operator = self.operator(map, path, allowed);
        let mut values = Vec::new();
        self.each(map, "values", path, |checker, item, p| {
            values.extend(checker.string(item, p).map(str::to_owned));
        });
        let vp = path.key("values");
        let Some(operator) = operator else { return };
        match operator.as_str() {
            "In" | "NotIn" if field && values.len() != 1 => {
                self.err(
                    &vp,
                    format!(
                        "must have exactly one value for a field selector (got {})",
                        values.len()
                    ),
                );
            }
            "In" | "NotIn" if values.is_empty() => {
                self.err(&vp, format!("must be non-empty when operator is {operator}"));
            }
            "In" | "NotIn" => {
                for (i, value) in values.iter().enumerate() {
                    self.valid(&vp.index(i), value, "label value", syntax::label_value);
                }
            }
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                self.err(&vp, format!("must be empty when operator is {operator}"));
            }
            "Gt" | "Lt" => {
                if values.len() != 1 {
                    self.err(&vp, format!("must have exactly one value when operator is {operator}"));
                } else if values[0].parse::<i64>().is_err() {
                    self.err(
                        &vp.index(0),
                        format!("{:?} is not an integer, as {operator} requires", values[0]),
                    );
                }
            }
            _ => {}
        }
    }

    fn pod_affinity(&mut self, v: &Value, path: &Path) {
        const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";
        const PREFERRED: &str = "preferredDuringSchedulingIgnoredDuringExecution";
        let Some(map) = self.object(v, path, allowed::<k8s::PodAffinity>()) else {
            return;
        };
        self.each(map, REQUIRED, path, Self::pod_affinity_term);
        self.each(map, PREFERRED, path, |checker, item, p| {
            let fields = allowed::<k8s::WeightedPodAffinityTerm>();
            checker.weighted(item, p, fields, "podAffinityTerm", Self::pod_affinity_term);
        });
    }

    fn pod_affinity_term(&mut self, v: &Value, path: &Path) {
        let Some(map) = self.object(v, path, allowed::<k8s::PodAffinityTerm>()) else {
            return;
        };
        match map.get("topologyKey") {
            None => self.err(&path.key("topologyKey"), "is required (e.g. kubernetes.io/hostname)"),
            Some(k) => {
                self.label_key(k, &path.key("topologyKey"));
            }
        }
        for key in ["labelSelector", "namespaceSelector"] {
            if let Some(v) = map.get(key) {
                self.label_selector(v, &path.key(key));
            }
        }
        self.each(map, "namespaces", path, |checker, item, p| {
            checker.namespace_name(item, p);
        });
        for key in ["matchLabelKeys", "mismatchLabelKeys"] {
            self.each(map, key, path, |checker, item, p| {
                checker.label_key(item, p);
            });
        }
    }

    fn label_selector(&mut self, v: &Value, path: &Path) {
        let Some(map) = self.object(v, path, allowed::<k8s::LabelSelector>()) else {
            return;
        };
        if let Some(v) = map.get("matchLabels") {
            self.label_map(v, &path.key("matchLabels"));
        }
        self.each(map, "matchExpressions", path, Self::label_selector_requirement);
    }

    fn label_selector_requirement(&mut self, v: &Value, path: &Path) {
        let Some(map) = self.object(v, path, allowed::<k8s::LabelSelectorRequirement>()) else {
            return;
        };
        match map.get("key") {
            None => self.err(&path.key("key"), "is required"),
            Some(k) => {
                self.label_key(k, &path.key("key"));
            }
        }
        let op = self.operator(map, path, allowed::<k8s::LabelSelectorOperator>());
        let count = self.each(map, "values", path, Self::label_value);
        let vp = path.key("values");
        match op.as_deref() {
            Some(op @ ("In" | "NotIn")) if count == 0 => {
                self.err(&vp, format!("must be non-empty when operator is {op}"));
            }
            Some(op @ ("Exists" | "DoesNotExist")) if count > 0 => {
                self.err(&vp, format!("must be empty when operator is {op}"));
            }
            _ => {}
        }
    }
}

/// Every problem in the document, in document order. Empty means valid.
pub fn check(document: &Value) -> Vec<FieldError> {
    let mut checker = Checker { errors: Vec::new() };
    checker.root(document);
    checker.errors
}
