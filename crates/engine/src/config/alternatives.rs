//! A group's alternatives (`groups.NAME.alternatives`): named placements beside the default that
//! a pod chooses with one label (`podPlacementLabel`, value the alternative's name). The choice
//! is the engine's (`placement/choice.rs`); this is its configuration and its rules.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, Toleration};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Config, FieldError, kubernetes, path::Path, schema};

/// The name of a group's own placement: a pod without the label, or labelled so, gets it.
pub const DEFAULT_ALTERNATIVE: &str = "default";
/// The most alternatives a group may offer (each is a metric label value).
pub const MAX_ALTERNATIVES: usize = 8;
/// The pod label naming the chosen alternative, unless `podPlacementLabel` says otherwise.
pub const DEFAULT_PLACEMENT_LABEL: &str = "pod-director/placement";

pub(super) fn is_default_placement_label(label: &str) -> bool {
    label == DEFAULT_PLACEMENT_LABEL
}

/// A placement a group's pods may choose instead of the group's own, applied exactly like it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(rename = "alternative", transform = schema::ordered::<Alternative>)]
pub struct Alternative {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "kubernetes::Labels")]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<kubernetes::Toleration>")]
    pub tolerations: Vec<Toleration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "kubernetes::Affinity")]
    pub affinity: Option<Affinity>,
}

/// The `alternatives` mapping: names (DNS labels, not `default`) to placements.
pub(super) struct Alternatives;

impl JsonSchema for Alternatives {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "alternatives".into()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "description": "Placements a pod of the group may choose with the placement label, by name (a DNS label, not 'default')",
            "maxProperties": MAX_ALTERNATIVES,
            "propertyNames": generator.subschema_for::<kubernetes::AlternativeName>(),
            "additionalProperties": generator.subschema_for::<Alternative>()
        })
    }
}

/// What is wrong with `s` as an alternative's name (`alternativeName`): a DNS label, not `default`.
pub(super) fn name_rule(s: &str) -> Option<String> {
    match crate::syntax::dns1123_label(s) {
        _ if s == DEFAULT_ALTERNATIVE => {
            Some("\"default\" names the group's own placement; name the alternative otherwise".to_owned())
        }
        reason => reason.map(|reason| format!("alternative name {s:?} {reason}")),
    }
}

/// A group offering more than [`MAX_ALTERNATIVES`] alternatives: why that is refused.
pub(super) fn too_many(group: &serde_json::Map<String, Value>) -> Option<String> {
    let count = group
        .get("alternatives")
        .and_then(Value::as_object)
        .map_or(0, |a| a.len());
    (count > MAX_ALTERNATIVES).then(|| format!("{count} alternatives; at most {MAX_ALTERNATIVES}"))
}

impl Config {
    /// Alternatives a pod's choice could not tell apart: placed like the group's own or another one.
    pub(super) fn alternative_errors(&self) -> Vec<FieldError> {
        let mut out = Vec::new();
        for (group_name, group) in &self.groups {
            let mut seen = vec![(
                DEFAULT_ALTERNATIVE,
                (&group.node_selector, &group.tolerations, &group.affinity),
            )];
            for (name, alt) in &group.alternatives {
                let placed = (&alt.node_selector, &alt.tolerations, &alt.affinity);
                if let Some((twin, _)) = seen.iter().find(|(_, other)| *other == placed) {
                    let path = Path::root().key("groups").key(group_name).key("alternatives").key(name);
                    out.push(FieldError {
                        path: path.to_string(),
                        message: format!(
                            "places pods exactly as {twin:?} does, so choosing it changes nothing; give it its own \
                             nodeSelector, tolerations or affinity, or remove it"
                        ),
                    });
                }
                seen.push((name, placed));
            }
        }
        out
    }
}
