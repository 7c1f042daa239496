//! The Kubernetes shapes a group embeds (core/v1 `Toleration` and `Affinity`, label keys and
//! values, namespace and user names) as types the schema is derived from: the server reads a
//! group into `k8s_openapi`'s types; these mirror types exist for their shape only.

#![allow(dead_code)] // Fields are read through serde and schemars, never in code.

use std::borrow::Cow;
use std::marker::PhantomData;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;

/// A string type whose JSON Schema (with its description) is registered once under `name`.
macro_rules! string_schema {
    ($type:ident, $name:literal, $schema:tt) => {
        #[derive(Default, Deserialize)]
        pub(crate) struct $type(String);
        impl JsonSchema for $type {
            fn schema_name() -> Cow<'static, str> {
                $name.into()
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!($schema)
            }
        }
    };
}

string_schema!(LabelKey, "labelKey", {
    "type": "string",
    "description": "A Kubernetes label key: optional DNS-subdomain prefix and '/', then a name of at most 63 characters of [A-Za-z0-9-_.] starting and ending with an alphanumeric character",
    "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$",
    "maxLength": 317
});

string_schema!(LabelValue, "labelValue", {
    "type": "string",
    "description": "A Kubernetes label value: empty, or at most 63 characters of [A-Za-z0-9-_.] starting and ending with an alphanumeric character",
    "pattern": "^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$",
    "maxLength": 63
});

string_schema!(GroupName, "groupName", {
    "type": "string",
    "description": "A group name: the value of the namespace label (a label value, not empty)",
    "minLength": 1,
    "maxLength": 63,
    "pattern": "^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$"
});

string_schema!(AlternativeName, "alternativeName", {
    "type": "string",
    "description": "An alternative's name: a DNS-1123 label other than 'default'",
    "pattern": "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
    "not": {"const": "default"}
});

string_schema!(NamespaceName, "namespaceName", {
    "type": "string",
    "description": "A namespace name (DNS-1123 label)",
    "pattern": "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
    "maxLength": 63
});

string_schema!(RequesterName, "requesterName", {
    "type": "string",
    "description": "A Kubernetes user or group name, as request.userInfo carries it",
    "minLength": 1,
    "pattern": "^\\S+$"
});

string_schema!(ServiceAccountName, "serviceAccountName", {
    "type": "string",
    "description": "namespace/name of a ServiceAccount",
    "pattern": "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"
});

/// A toleration key: a label key, or empty (with operator Exists: every taint).
#[derive(Default, Deserialize)]
pub(crate) struct TolerationKey(String);
impl JsonSchema for TolerationKey {
    fn schema_name() -> Cow<'static, str> {
        "tolerationKey".into()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        json_schema!({"anyOf": [generator.subschema_for::<LabelKey>(), {"const": ""}]})
    }
}

/// A toleration operator.
#[derive(Default, Deserialize, JsonSchema)]
#[schemars(rename = "tolerationOperator")]
pub(crate) enum TolerationOperator {
    #[default]
    Equal,
    Exists,
}

/// A taint effect; empty in a toleration matches every effect.
#[derive(Default, Deserialize, JsonSchema)]
#[schemars(rename = "taintEffect")]
pub(super) enum TaintEffectName {
    #[default]
    #[serde(rename = "")]
    Any,
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

/// core/v1 Toleration.
#[derive(Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[schemars(rename = "toleration", transform = toleration_rules, transform = super::schema::ordered::<Toleration>)]
pub(super) struct Toleration {
    key: TolerationKey,
    operator: TolerationOperator,
    value: LabelValue,
    effect: TaintEffectName,
    toleration_seconds: i64,
}

/// What the schema can say of a toleration beyond its fields: `Exists` takes no value,
/// and an empty key needs `Exists`.
fn toleration_rules(schema: &mut Schema) {
    schema.insert(
        "allOf".to_owned(),
        serde_json::json!([
            {
                "if": {"required": ["operator"], "properties": {"operator": {"const": "Exists"}}},
                "then": {"properties": {"value": {"const": ""}}}
            },
            {
                "if": {"anyOf": [{"not": {"required": ["key"]}}, {"properties": {"key": {"const": ""}}}]},
                "then": {"required": ["operator"], "properties": {"operator": {"const": "Exists"}}}
            }
        ]),
    );
}

/// A node selector operator.
#[derive(Default, Deserialize, JsonSchema)]
#[schemars(rename = "nodeSelectorOperator")]
pub(crate) enum NodeSelectorOperator {
    #[default]
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

/// A label selector operator.
#[derive(Default, Deserialize, JsonSchema)]
#[schemars(rename = "labelSelectorOperator")]
pub(crate) enum LabelSelectorOperator {
    #[default]
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// core/v1 NodeSelectorRequirement (in matchExpressions: a label key; in matchFields: a field).
#[derive(Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "nodeSelectorRequirement", transform = super::schema::ordered::<NodeSelectorRequirement>)]
pub(super) struct NodeSelectorRequirement {
    #[schemars(length(min = 1))]
    key: String,
    operator: NodeSelectorOperator,
    #[serde(default)]
    values: Vec<String>,
}

/// core/v1 NodeSelectorTerm: its requirements are ANDed.
#[derive(Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[schemars(rename = "nodeSelectorTerm", transform = super::schema::ordered::<NodeSelectorTerm>)]
pub(super) struct NodeSelectorTerm {
    match_expressions: Vec<NodeSelectorRequirement>,
    match_fields: Vec<NodeSelectorRequirement>,
}

/// core/v1 NodeSelector: its terms are ORed.
#[derive(Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(rename = "nodeSelector", transform = super::schema::ordered::<NodeSelector>)]
pub(super) struct NodeSelector {
    #[schemars(length(min = 1))]
    node_selector_terms: Vec<NodeSelectorTerm>,
}

/// core/v1 PreferredSchedulingTerm.
#[derive(Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "preferredSchedulingTerm", transform = super::schema::ordered::<PreferredSchedulingTerm>)]
pub(super) struct PreferredSchedulingTerm {
    #[schemars(range(min = 1, max = 100))]
    weight: i32,
    preference: NodeSelectorTerm,
}

/// core/v1 NodeAffinity.
#[derive(Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[schemars(rename = "nodeAffinity", transform = super::schema::ordered::<NodeAffinity>)]
pub(super) struct NodeAffinity {
    required_during_scheduling_ignored_during_execution: NodeSelector,
    preferred_during_scheduling_ignored_during_execution: Vec<PreferredSchedulingTerm>,
}

/// metav1 LabelSelectorRequirement.
#[derive(Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "labelSelectorRequirement", transform = super::schema::ordered::<LabelSelectorRequirement>)]
pub(crate) struct LabelSelectorRequirement {
    key: LabelKey,
    operator: LabelSelectorOperator,
    #[serde(default)]
    values: Vec<String>,
}

/// metav1 LabelSelector.
#[derive(Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[schemars(rename = "labelSelector", transform = super::schema::ordered::<LabelSelector>)]
pub(super) struct LabelSelector {
    #[schemars(with = "Labels")]
    match_labels: (),
    match_expressions: Vec<LabelSelectorRequirement>,
}

/// A mapping whose keys are of the string type `K` and values of type `V` (labels, groups).
pub(crate) struct MapOf<K, V>(PhantomData<(K, V)>);
impl<K: JsonSchema, V: JsonSchema> JsonSchema for MapOf<K, V> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        format!("{}To{}", K::schema_name(), V::schema_name()).into()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "propertyNames": generator.subschema_for::<K>(),
            "additionalProperties": generator.subschema_for::<V>()
        })
    }
}

/// A label map: label keys to label values.
pub(crate) type Labels = MapOf<LabelKey, LabelValue>;

/// core/v1 PodAffinityTerm.
#[derive(Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(rename = "podAffinityTerm", transform = super::schema::ordered::<PodAffinityTerm>)]
pub(super) struct PodAffinityTerm {
    #[serde(default)]
    label_selector: LabelSelector,
    #[serde(default)]
    namespace_selector: LabelSelector,
    #[serde(default)]
    namespaces: Vec<NamespaceName>,
    topology_key: LabelKey,
    #[serde(default)]
    match_label_keys: Vec<LabelKey>,
    #[serde(default)]
    mismatch_label_keys: Vec<LabelKey>,
}

/// core/v1 WeightedPodAffinityTerm.
#[derive(Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(rename = "weightedPodAffinityTerm", transform = super::schema::ordered::<WeightedPodAffinityTerm>)]
pub(super) struct WeightedPodAffinityTerm {
    #[schemars(range(min = 1, max = 100))]
    weight: i32,
    pod_affinity_term: PodAffinityTerm,
}

/// core/v1 PodAffinity and PodAntiAffinity (the same shape).
#[derive(Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[schemars(rename = "podAffinity", transform = super::schema::ordered::<PodAffinity>)]
pub(crate) struct PodAffinity {
    required_during_scheduling_ignored_during_execution: Vec<PodAffinityTerm>,
    preferred_during_scheduling_ignored_during_execution: Vec<WeightedPodAffinityTerm>,
}

/// core/v1 Affinity.
#[derive(Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[schemars(rename = "affinity", transform = super::schema::ordered::<Affinity>)]
pub(super) struct Affinity {
    node_affinity: NodeAffinity,
    pod_affinity: PodAffinity,
    pod_anti_affinity: PodAffinity,
}
