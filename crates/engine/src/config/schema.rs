//! The configuration's schema, derived once from the Rust types (`schemars`, serde).
//!
//! Everything that needs the shape of `Config` reads it from here: validation takes the
//! keys each mapping allows (in declaration order, as its messages list them) and the
//! values of each enumeration; environment overrides take the keys a path may name and
//! the type of each setting; `pod-director config-schema` prints the JSON Schema that
//! `chart/values.schema.json` embeds as `config` (a drift check in the tests and the
//! chart tests keeps the two equal).

use std::fmt;
use std::sync::LazyLock;

use schemars::generate::SchemaSettings;
use schemars::{Schema, SchemaGenerator};
use serde::de::{self, Deserialize, Deserializer, Visitor};
use serde_json::Value;

use super::Config;

/// The extension keyword listing an object's keys in declaration order (a JSON object's
/// `properties` are sorted); left out of the schema `schema_json` prints.
const KEYS: &str = "x-keys";

/// The names serde knows for a type: a struct's fields or an enum's variants, in
/// declaration order, as they are written in the file (after `rename_all`).
pub fn names<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut names = None;
    // The deserializer only records what `deserialize_struct`/`deserialize_enum` are given.
    let _ = T::deserialize(Names(&mut names));
    names.unwrap_or(&[])
}

struct Names<'a>(&'a mut Option<&'static [&'static str]>);

#[derive(Debug)]
struct Recorded;

impl fmt::Display for Recorded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("names recorded")
    }
}
impl std::error::Error for Recorded {}
impl de::Error for Recorded {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Recorded
    }
}

impl<'de> Deserializer<'de> for Names<'_> {
    type Error = Recorded;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Recorded> {
        Err(Recorded)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Recorded> {
        *self.0 = Some(fields);
        Err(Recorded)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        variants: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Recorded> {
        *self.0 = Some(variants);
        Err(Recorded)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map identifier ignored_any
    }
}

/// Transform for a struct: records its keys in declaration order.
pub(super) fn ordered<T: for<'de> Deserialize<'de>>(schema: &mut Schema) {
    schema.insert(KEYS.to_owned(), names::<T>().into());
}

/// Transform for a unit-only enum: a plain `enum` of its serde names, so that a validator
/// says "value must be one of …" (schemars writes documented variants as `oneOf` consts).
pub(super) fn variants_as_enum(schema: &mut Schema) {
    let Some(Value::Array(variants)) = schema.remove("oneOf") else {
        return;
    };
    let values: Vec<Value> = variants
        .iter()
        .filter_map(|v| v.get("const").or_else(|| v.get("enum").and_then(|e| e.get(0))).cloned())
        .collect();
    schema.insert("type".to_owned(), "string".into());
    schema.insert("enum".to_owned(), values.into());
}

/// The schema with its definitions, draft-07 (what Helm validates values with).
static SCHEMA: LazyLock<Value> = LazyLock::new(|| {
    let generator = SchemaGenerator::new(SchemaSettings::draft07());
    generator.into_root_schema_for::<Config>().to_value()
});

/// The JSON Schema of the configuration file (draft-07), as `config-schema` prints it and
/// the chart embeds it.
pub fn schema_json() -> Value {
    let mut schema = SCHEMA.clone();
    strip(&mut schema, KEYS);
    schema
}

fn strip(value: &mut Value, keyword: &str) {
    match value {
        Value::Object(map) => {
            map.remove(keyword);
            map.values_mut().for_each(|v| strip(v, keyword));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| strip(v, keyword)),
        _ => {}
    }
}

/// A node of the schema, `$ref`s resolved.
#[derive(Clone, Copy)]
pub(super) struct Node(&'static Value);

impl Node {
    pub fn root() -> Self {
        Node(&SCHEMA)
    }

    fn resolve(value: &'static Value) -> Self {
        let mut value = value;
        // `$ref` (possibly under a one-element allOf, draft-07's way to keep siblings).
        loop {
            if let Some(Value::String(reference)) = value.get("$ref") {
                let name = reference.rsplit('/').next().unwrap_or_default();
                match SCHEMA.get("definitions").and_then(|d| d.get(name)) {
                    Some(target) => value = target,
                    None => return Node(value),
                }
            } else if let Some(Value::Array(all)) = value.get("allOf")
                && let [only] = all.as_slice()
                && only.get("$ref").is_some()
            {
                value = only;
            } else {
                return Node(value);
            }
        }
    }

    fn get(&self, keyword: &str) -> Option<&'static Value> {
        self.0.get(keyword)
    }

    fn types(&self) -> Vec<&'static str> {
        match self.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => match self.get("anyOf") {
                Some(Value::Array(branches)) => branches.iter().flat_map(|b| Node::resolve(b).types()).collect(),
                _ => Vec::new(),
            },
        }
    }

    /// The non-null branch of a nullable schema (`anyOf: [T, null]`), or itself.
    fn non_null(self) -> Self {
        match self.get("anyOf") {
            Some(Value::Array(branches)) => branches
                .iter()
                .map(Node::resolve)
                .find(|b| !b.types().contains(&"null"))
                .unwrap_or(self),
            _ => self,
        }
    }

    /// The keys of a mapping of fixed shape, in declaration order; empty for other nodes.
    pub fn keys(&self) -> Vec<&'static str> {
        let node = self.non_null();
        match (node.get(KEYS), node.get("properties")) {
            (Some(Value::Array(keys)), _) => keys.iter().filter_map(Value::as_str).collect(),
            (None, Some(Value::Object(properties))) => properties.keys().map(String::as_str).collect(),
            _ => Vec::new(),
        }
    }

    /// The node a key of this mapping holds: a fixed key, or any key of a free mapping.
    pub fn child(&self, key: &str) -> Option<Node> {
        let node = self.non_null();
        if let Some(Value::Object(properties)) = node.get("properties") {
            return properties.get(key).map(Node::resolve);
        }
        match node.get("additionalProperties") {
            Some(schema @ Value::Object(_)) => Some(Node::resolve(schema)),
            _ => None,
        }
    }

    /// The node an item of this list holds.
    pub fn item(&self) -> Option<Node> {
        self.non_null().get("items").map(Node::resolve)
    }

    /// A mapping of fixed shape: its keys are the schema's, not the file's.
    pub(crate) fn is_fixed_mapping(&self) -> bool {
        !self.keys().is_empty()
    }

    pub fn is(&self, kind: &str) -> bool {
        self.types().contains(&kind)
    }

    /// A list of strings.
    pub(crate) fn is_string_list(&self) -> bool {
        self.is("array") && self.item().is_some_and(|i| i.is("string"))
    }

    pub fn is_nullable(&self) -> bool {
        self.is("null")
    }

    /// The values of an enumeration (`enum`), in declaration order.
    pub(crate) fn variants(&self) -> Vec<&'static str> {
        match self.non_null().get("enum") {
            Some(Value::Array(values)) => values.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Group;
    use crate::config::{Mode, NamespaceGuard};

    #[test]
    fn serde_names_come_in_declaration_order_as_written_in_the_file() {
        assert_eq!(names::<Mode>(), ["dryRun", "warn", "enforce"]);
        assert_eq!(
            names::<NamespaceGuard>(),
            ["mode", "allowedUsers", "allowedGroups", "allowedServiceAccounts"]
        );
        assert_eq!(names::<Group>()[..3], ["mode", "onConflict", "allowPodExclusion"]);
    }

    #[test]
    fn the_schema_knows_each_setting_s_type_and_values() {
        let root = Node::root();
        assert_eq!(root.keys().first(), Some(&"namespaceLabel"));
        let group = root.child("groups").and_then(|g| g.child("any-name")).unwrap();
        assert_eq!(group.keys(), names::<Group>());
        assert_eq!(group.child("mode").unwrap().variants(), ["dryRun", "warn", "enforce"]);
        assert!(group.child("allowDaemonSets").unwrap().is("boolean"));
        let toleration = group.child("tolerations").and_then(|t| t.item()).unwrap();
        assert!(toleration.child("tolerationSeconds").unwrap().is("integer"));
        assert!(root.child("excludedNamespaces").unwrap().is_string_list());
        assert!(root.child("defaultGroup").unwrap().is_nullable());
        assert!(!root.child("defaultMode").unwrap().is_nullable());
        assert!(root.child("namespaceGuard").unwrap().is_fixed_mapping());
        assert!(!root.child("groups").unwrap().is_fixed_mapping());
    }

    #[test]
    fn the_printed_schema_has_no_internal_keywords() {
        assert!(!schema_json().to_string().contains(KEYS));
    }
}
