//! Another writer that keeps changing back a field of an entry pod-director owns — AKS's
//! Admissions Enforcer adding a namespaceSelector term, a GitOps tool re-applying an old
//! manifest, a second controller — must not have the reconciler patch forever.
//!
//! Only the `webhooks` fields pod-director owns are ever patched ([`super::plan_patch`]): the
//! configuration's metadata (annotations such as `admissions.enforcer/disabled`, labels) and
//! entries it does not own are another writer's, kept as they are. A field pod-director owns
//! that drifted is re-asserted — a namespaceSelector term added by someone else narrows which
//! namespaces are decided, so it is not merged in — but at most [`BOUND`] times per
//! [`WINDOW`] for the same wanted value. Past that the reconciler yields: it stops patching
//! that field while it holds the value the other writer keeps writing, counts it in
//! `pod_director_webhook_reconcile_yields_total{entry,field}` and
//! `pod_director_webhook_reconcile_yielded`, and logs one warning naming the entry, the field,
//! the writers the managedFields name, and what pod-director does. It re-asserts again when the
//! configuration wants another value, when the other writer writes yet another value (counted
//! in the same window: bounded again), or after a restart; a field back at the wanted value ends
//! the yield.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use json_patch::PatchOperation;
use serde_json::Value;

/// Re-asserts of one field to one wanted value before the reconciler yields.
pub(crate) const BOUND: usize = 3;
/// The window the re-asserts are counted in.
pub(crate) const WINDOW: Duration = Duration::from_secs(30 * 60);

/// A field of an entry of a configuration.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct FieldKey {
    configuration: String,
    entry: String,
    field: String,
}

#[derive(Debug, Default)]
struct Field {
    /// The value pod-director wants (`Null`: the field removed).
    want: Value,
    /// When pod-director patched the field to `want`, within [`WINDOW`].
    patched: VecDeque<Instant>,
    /// The other writer's value pod-director leaves in place.
    yielded_to: Option<Value>,
}

/// A field the reconciler stopped re-asserting.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Yield {
    pub entry: String,
    pub field: String,
    /// Field managers other than pod-director's that the managedFields name for it.
    pub writers: Vec<String>,
}

/// What [`Yields::settle`] leaves of a plan.
#[derive(Debug, Default)]
pub(crate) struct Settled {
    pub operations: Vec<PatchOperation>,
    pub changed: Vec<String>,
    pub yielded: Vec<Yield>,
}

/// The reconciler's memory of the fields it re-asserted (per process).
#[derive(Debug, Default)]
pub(crate) struct Yields {
    fields: BTreeMap<FieldKey, Field>,
}

/// `["webhooks", index, field]` of an operation on a field of an existing entry.
fn field_of(operation: &PatchOperation) -> Option<(usize, String)> {
    let path = match operation {
        PatchOperation::Add(op) => &op.path,
        PatchOperation::Remove(op) => &op.path,
        _ => return None,
    };
    let tokens: Vec<String> = path.tokens().map(|t| t.decoded().into_owned()).collect();
    match tokens.as_slice() {
        [webhooks, index, field] if webhooks == "webhooks" => Some((index.parse().ok()?, field.clone())),
        _ => None,
    }
}

/// The operations of `plan` in groups, each starting at its `test` guard.
fn groups(plan: Vec<PatchOperation>) -> Vec<Vec<PatchOperation>> {
    let mut out: Vec<Vec<PatchOperation>> = Vec::new();
    for op in plan {
        match (&op, out.last_mut()) {
            (PatchOperation::Test(_), _) | (_, None) => out.push(vec![op]),
            (_, Some(group)) => group.push(op),
        }
    }
    out
}

/// Field managers but pod-director's whose managedFields own `field` of entry `entry`.
fn writers(metadata: &Value, entry: &str, field: &str) -> Vec<String> {
    let key = format!("k:{}", serde_json::json!({ "name": entry }));
    let mut names: Vec<String> = metadata["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["manager"] != super::FIELD_MANAGER)
        .filter(|m| m["fieldsV1"]["f:webhooks"][&key].get(format!("f:{field}")).is_some())
        .filter_map(|m| m["manager"].as_str().map(str::to_owned))
        .collect();
    names.sort();
    names.dedup();
    names
}

impl Yields {
    /// `plan` (with its `changed` entries) for configuration `configuration`, whose live
    /// object is `live`, less the field patches pod-director yields ([`BOUND`], [`WINDOW`]).
    pub(crate) fn settle(
        &mut self,
        configuration: &str,
        live: &Value,
        plan: Vec<PatchOperation>,
        changed: Vec<String>,
        now: Instant,
    ) -> Settled {
        let webhooks = live["webhooks"].as_array().map(Vec::as_slice).unwrap_or_default();
        let mut settled = Settled::default();
        let mut drifted = Vec::new();
        let mut dropped_entries = Vec::new();
        for group in groups(plan) {
            let mut kept = Vec::new();
            let mut entry_name = None;
            let mut any_field = false;
            for op in group {
                let Some((index, field)) = field_of(&op) else {
                    kept.push(op);
                    continue;
                };
                let Some(name) = webhooks.get(index).and_then(|w| w["name"].as_str()) else {
                    kept.push(op);
                    continue;
                };
                entry_name = Some(name.to_owned());
                any_field = true;
                let key = FieldKey {
                    configuration: configuration.to_owned(),
                    entry: name.to_owned(),
                    field: field.clone(),
                };
                let live_value = webhooks[index].get(&field).cloned().unwrap_or(Value::Null);
                let want = match &op {
                    PatchOperation::Add(add) => add.value.clone(),
                    _ => Value::Null,
                };
                drifted.push(key.clone());
                let state = self.fields.entry(key.clone()).or_default();
                if state.want != want {
                    *state = Field {
                        want,
                        ..Field::default()
                    };
                }
                if state.yielded_to.as_ref() == Some(&live_value) {
                    continue;
                }
                state.yielded_to = None;
                while state.patched.front().is_some_and(|t| now.duration_since(*t) > WINDOW) {
                    state.patched.pop_front();
                }
                if state.patched.len() >= BOUND {
                    state.yielded_to = Some(live_value);
                    settled.yielded.push(Yield {
                        writers: writers(&live["metadata"], &key.entry, &key.field),
                        entry: key.entry,
                        field: key.field,
                    });
                    continue;
                }
                state.patched.push_back(now);
                kept.push(op);
            }
            // A guard alone, its entry's field patches all yielded: the entry is left as it is.
            if any_field && kept.iter().all(|op| matches!(op, PatchOperation::Test(_))) {
                dropped_entries.extend(entry_name);
                continue;
            }
            settled.operations.extend(kept);
        }
        // Fields of this configuration's entries that no longer drift: back at the wanted value.
        // (A Mutating and a Validating configuration share a name; their entries' names differ.)
        let entries: Vec<&str> = webhooks.iter().filter_map(|w| w["name"].as_str()).collect();
        for (key, state) in &mut self.fields {
            if key.configuration == configuration && entries.contains(&key.entry.as_str()) && !drifted.contains(key) {
                state.yielded_to = None;
            }
        }
        settled.changed = changed.into_iter().filter(|e| !dropped_entries.contains(e)).collect();
        settled
    }

    /// How many fields the reconciler leaves to another writer now.
    pub(crate) fn yielded(&self) -> usize {
        self.fields.values().filter(|f| f.yielded_to.is_some()).count()
    }
}

#[cfg(test)]
mod tests;
