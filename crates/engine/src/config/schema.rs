//! The configuration's schema, derived once from the Rust types (`schemars`, serde): what
//! validation and environment overrides read the shape of `Config` from, and what
//! `check-config --print-schema` prints (`chart/values.schema.json` embeds it as `config`).

use std::sync::LazyLock;

use schemars::generate::SchemaSettings;
use schemars::{Schema, SchemaGenerator};
use serde::de::{Deserialize, Deserializer, Error, Visitor, value};
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

impl<'de> Deserializer<'de> for Names<'_> {
    type Error = value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, value::Error> {
        Err(value::Error::custom("names recorded"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, value::Error> {
        *self.0 = Some(fields);
        Err(value::Error::custom("names recorded"))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        variants: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, value::Error> {
        *self.0 = Some(variants);
        Err(value::Error::custom("names recorded"))
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

/// A node of the schema, `$ref`s resolved, with the name of the definition it is (if any).
#[derive(Clone, Copy)]
pub(super) struct Node(&'static Value, &'static str);

impl Node {
    pub(super) fn root() -> Self {
        Node(&SCHEMA, "config")
    }

    fn resolve(value: &'static Value) -> Self {
        let (mut value, mut name) = (value, "");
        // `$ref` (possibly under a one-element allOf, draft-07's way to keep siblings).
        loop {
            if let Some(Value::String(reference)) = value.get("$ref") {
                let target = reference.rsplit('/').next().unwrap_or_default();
                match SCHEMA.get("definitions").and_then(|d| d.get(target)) {
                    Some(definition) => (value, name) = (definition, target),
                    None => return Node(value, name),
                }
            } else if let Some(Value::Array(all)) = value.get("allOf")
                && let [only] = all.as_slice()
                && only.get("$ref").is_some()
            {
                value = only;
            } else {
                return Node(value, name);
            }
        }
    }

    /// The name of the definition this node is (`labelKey`, `toleration`), or "" for an inline one.
    pub(super) fn name(&self) -> &'static str {
        self.non_null().1
    }

    /// A keyword of this node (of its non-null branch).
    pub(super) fn get(&self, keyword: &str) -> Option<&'static Value> {
        self.non_null().0.get(keyword)
    }

    fn types(&self) -> Vec<&'static str> {
        match self.0.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => match self.0.get("anyOf") {
                Some(Value::Array(branches)) => branches.iter().flat_map(|b| Node::resolve(b).types()).collect(),
                _ => Vec::new(),
            },
        }
    }

    /// The non-null branch of a nullable schema (`anyOf: [T, null]`), or itself.
    fn non_null(self) -> Self {
        match self.0.get("anyOf") {
            Some(Value::Array(branches)) if self.is_nullable() => branches
                .iter()
                .map(Node::resolve)
                .find(|b| !b.types().contains(&"null"))
                .unwrap_or(self),
            _ => self,
        }
    }

    /// The keys of a mapping of fixed shape, in declaration order; empty for other nodes.
    pub(super) fn keys(&self) -> Vec<&'static str> {
        match (self.get(KEYS), self.get("properties")) {
            (Some(Value::Array(keys)), _) => keys.iter().filter_map(Value::as_str).collect(),
            (None, Some(Value::Object(properties))) => properties.keys().map(String::as_str).collect(),
            _ => Vec::new(),
        }
    }

    /// The node a key of this mapping holds: a fixed key, or any key of a free mapping.
    pub(super) fn child(&self, key: &str) -> Option<Node> {
        if let Some(Value::Object(properties)) = self.get("properties") {
            return properties.get(key).map(Node::resolve);
        }
        match self.get("additionalProperties") {
            Some(schema @ Value::Object(_)) => Some(Node::resolve(schema)),
            _ => None,
        }
    }

    /// The node of a free mapping's keys (`propertyNames`).
    pub(crate) fn property_names(&self) -> Option<Node> {
        self.get("propertyNames").map(Node::resolve)
    }

    /// The node an item of this list holds.
    pub(super) fn item(&self) -> Option<Node> {
        self.get("items").map(Node::resolve)
    }

    /// A mapping of fixed shape: its keys are the schema's, not the file's.
    pub(crate) fn is_fixed_mapping(&self) -> bool {
        !self.keys().is_empty()
    }

    pub(super) fn is(&self, kind: &str) -> bool {
        self.types().contains(&kind)
    }

    /// A list of strings.
    pub(crate) fn is_string_list(&self) -> bool {
        self.is("array") && self.item().is_some_and(|i| i.is("string"))
    }

    pub(crate) fn is_nullable(&self) -> bool {
        self.is("null")
    }

    /// The values of an enumeration (`enum`), in declaration order.
    pub(crate) fn variants(&self) -> Vec<&'static str> {
        match self.get("enum") {
            Some(Value::Array(values)) => values.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests;
