//! The plan: what a pod lacks to satisfy its group, as JSON Patch operations
//! with reasons, and the conflicts found on the way.
//!
//! Rules (DESIGN.md, "The decision"):
//! - nodeSelector: missing key → add; same value → nothing; other value → conflict.
//! - tolerations: add a group toleration unless an existing one is a superset.
//! - required node affinity: the result means *pod's terms AND group's terms*:
//!   every pod term that does not already imply a group term is replaced by
//!   its AND with each group term (a cross product when the group has several);
//!   no pod terms → the group's. AND-ed terms no node can satisfy are dropped;
//!   when all are, the pod term conflicts with the group. A pod term that
//!   matches no node by itself (`{}`, `{matchExpressions: []}`, contradictory
//!   requirements) is kept as it is: AND anything, it still matches no node.
//! - preferred node affinity and pod (anti-)affinity terms: appended when absent.

use std::borrow::Cow;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, ReplaceOperation};
use k8s_openapi::api::core::v1::{Affinity, NodeAffinity, NodeSelector, NodeSelectorTerm, Toleration};
use serde::Serialize;
use serde_json::Value;

use super::affinity::{PodKind, and_terms, describe_term, matches_no_node, overridden, term_implies};
use super::tolerations::{describe, is_tolerated, normalized, same};
use super::{Conflict, Pod, PodSpec, Resolution};
use crate::config::{Group, OnConflict};

/// One placement change: the patch operation and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub operation: PatchOperation,
    pub reason: String,
}

/// The placement changes a pod needs to satisfy its group.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    pub changes: Vec<Change>,
    pub conflicts: Vec<Conflict>,
}

impl Plan {
    /// The RFC 6902 patch, operations in plan order.
    pub fn patch(&self) -> Patch {
        Patch(self.changes.iter().map(|c| c.operation.clone()).collect())
    }

    /// [`Plan::patch`], taking the operations rather than copying them.
    pub(crate) fn into_patch(self) -> Patch {
        Patch(self.changes.into_iter().map(|c| c.operation).collect())
    }

    /// Whether a conflict was resolved by rejecting the pod.
    pub fn rejected(&self) -> bool {
        self.conflicts.iter().any(|c| c.resolution == Resolution::Rejected)
    }

    /// Short human summary of the changes, e.g.
    /// `set nodeSelector node-pool=ci, add toleration dedicated=ci:NoSchedule`.
    pub(crate) fn describe_changes(&self) -> String {
        self.changes
            .iter()
            .map(|c| c.reason.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn pointer(tokens: &[&str]) -> PointerBuf {
    PointerBuf::from_tokens(tokens.iter().copied())
}

fn json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn add(tokens: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation {
        path: pointer(tokens),
        value,
    })
}

fn replace(tokens: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Replace(ReplaceOperation {
        path: pointer(tokens),
        value,
    })
}

struct Planner<'a> {
    spec: &'a PodSpec,
    group: &'a Group,
    plan: Plan,
}

const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";
const PREFERRED: &str = "preferredDuringSchedulingIgnoredDuringExecution";

/// Computes the plan for a pod and its group. A pod without a spec is planned
/// as if its spec were empty (its patch then needs a spec to apply to).
pub fn plan(pod: &Pod, group: &Group) -> Plan {
    let spec = super::spec_of(pod);
    let spec = spec.as_ref();
    let mut planner = Planner {
        spec,
        group,
        plan: Plan::default(),
    };
    planner.node_selector();
    planner.tolerations();
    planner.affinity();
    planner.plan
}

impl Planner<'_> {
    fn change(&mut self, operation: PatchOperation, reason: String) {
        self.plan.changes.push(Change { operation, reason });
    }

    fn conflict(&mut self, field: String, pod: String, group: String) -> Resolution {
        let resolution = match self.group.on_conflict {
            OnConflict::Reject => Resolution::Rejected,
            OnConflict::Override => Resolution::Overridden,
            OnConflict::Ignore => Resolution::Ignored,
        };
        self.plan.conflicts.push(Conflict {
            field,
            pod,
            group,
            resolution,
        });
        resolution
    }

    fn node_selector(&mut self) {
        let wanted = &self.group.node_selector;
        if wanted.is_empty() {
            return;
        }
        let Some(existing) = &self.spec.node_selector else {
            let mut reason = String::from("set nodeSelector ");
            for (i, (key, value)) in wanted.iter().enumerate() {
                if i > 0 {
                    reason.push(',');
                }
                reason.extend([key.as_str(), "=", value.as_str()]);
            }
            self.change(add(&["spec", "nodeSelector"], json(wanted)), reason);
            return;
        };
        for (key, value) in wanted {
            match existing.get(key) {
                None => self.change(
                    add(&["spec", "nodeSelector", key], Value::String(value.clone())),
                    format!("set nodeSelector {key}={value}"),
                ),
                Some(have) if have == value => {}
                Some(have) => {
                    let resolution = self.conflict(
                        format!("nodeSelector[{key:?}]"),
                        format!("{have:?}"),
                        format!("{value:?}"),
                    );
                    if resolution == Resolution::Overridden {
                        self.change(
                            replace(&["spec", "nodeSelector", key], Value::String(value.clone())),
                            format!("override nodeSelector {key}={have} with {value}"),
                        );
                    }
                }
            }
        }
    }

    fn tolerations(&mut self) {
        let existing = self.spec.tolerations.as_deref().unwrap_or_default();
        let mut missing: Vec<Cow<'_, Toleration>> = Vec::new();
        for wanted in &self.group.tolerations {
            let already = is_tolerated(existing, wanted) || missing.iter().any(|m| same(m, wanted));
            if !already {
                missing.push(normalized(wanted));
            }
        }
        if missing.is_empty() {
            return;
        }
        if self.spec.tolerations.is_none() {
            let names: Vec<String> = missing.iter().map(|t| describe(t)).collect();
            self.change(
                add(&["spec", "tolerations"], json(&missing)),
                format!("add toleration {}", names.join(", ")),
            );
            return;
        }
        for t in missing {
            self.change(
                add(&["spec", "tolerations", "-"], json(&t)),
                format!("add toleration {}", describe(&t)),
            );
        }
    }

    fn affinity(&mut self) {
        let Some(wanted) = &self.group.affinity else {
            return;
        };
        let Some(existing) = &self.spec.affinity else {
            let mut reasons = Vec::new();
            if wanted.node_affinity.is_some() {
                reasons.push("node affinity");
            }
            if wanted.pod_affinity.is_some() {
                reasons.push("pod affinity");
            }
            if wanted.pod_anti_affinity.is_some() {
                reasons.push("pod anti-affinity");
            }
            if !reasons.is_empty() {
                self.change(
                    add(&["spec", "affinity"], json(wanted)),
                    format!("set {}", reasons.join(" and ")),
                );
            }
            return;
        };
        if let Some(node) = &wanted.node_affinity {
            self.node_affinity(existing, node);
        }
        self.pod_affinity(existing, wanted);
    }

    fn node_affinity(&mut self, existing: &Affinity, wanted: &NodeAffinity) {
        let Some(have) = &existing.node_affinity else {
            self.change(
                add(&["spec", "affinity", "nodeAffinity"], json(wanted)),
                "set node affinity".to_owned(),
            );
            return;
        };
        if let Some(required) = &wanted.required_during_scheduling_ignored_during_execution {
            self.required_node_affinity(have, required);
        }
        if let Some(preferred) = &wanted.preferred_during_scheduling_ignored_during_execution {
            let present = have
                .preferred_during_scheduling_ignored_during_execution
                .as_deref()
                .unwrap_or_default();
            let missing: Vec<_> = preferred
                .iter()
                .filter(|w| !present.iter().any(|p| p.preference == w.preference))
                .collect();
            let base = ["spec", "affinity", "nodeAffinity", PREFERRED];
            self.append(
                &base,
                have.preferred_during_scheduling_ignored_during_execution.is_some(),
                &missing,
                |w| format!("prefer nodes {}", describe_term(&w.preference)),
            );
        }
    }

    /// Appends `missing` to a list at `base`: item by item when the list exists, whole otherwise.
    fn append<T: Serialize>(&mut self, base: &[&str], exists: bool, missing: &[T], describe: impl Fn(&T) -> String) {
        if missing.is_empty() {
            return;
        }
        if exists {
            let mut path = base.to_vec();
            path.push("-");
            for item in missing {
                self.change(add(&path, json(item)), format!("add {}", describe(item)));
            }
        } else {
            let names: Vec<String> = missing.iter().map(describe).collect();
            self.change(add(base, json(&missing)), format!("add {}", names.join(", ")));
        }
    }

    fn required_node_affinity(&mut self, have: &NodeAffinity, wanted: &NodeSelector) {
        let group_terms = &wanted.node_selector_terms;
        if group_terms.is_empty() {
            return;
        }
        let base = ["spec", "affinity", "nodeAffinity", REQUIRED];
        let pod_terms = have
            .required_during_scheduling_ignored_during_execution
            .as_ref()
            .map(|r| r.node_selector_terms.as_slice())
            .unwrap_or_default();
        if pod_terms.is_empty() {
            let operation = match &have.required_during_scheduling_ignored_during_execution {
                None => add(&base, json(wanted)),
                Some(_) => replace(&[&base[..], &["nodeSelectorTerms"]].concat(), json(group_terms)),
            };
            let names: Vec<String> = group_terms.iter().map(describe_term).collect();
            self.change(operation, format!("require nodes {}", names.join(" or ")));
            return;
        }
        let mut result: Vec<NodeSelectorTerm> = Vec::new();
        let mut changed = false;
        for (i, term) in pod_terms.iter().enumerate() {
            // Kept as it is: a term that already means "and the group's", and a
            // term that matches no node (empty, or contradicting itself), which
            // AND anything still matches no node. Dropping the latter could leave
            // the pod without terms; replacing it would make a pod that cannot be
            // scheduled schedulable (that pod's problem is its own, not a conflict).
            if group_terms.iter().any(|g| term_implies(term, g)) {
                result.push(term.clone());
                continue;
            }
            let merged: Vec<NodeSelectorTerm> = group_terms
                .iter()
                .map(|g| and_terms(term, g))
                .filter(|t| !matches_no_node(t))
                .collect();
            if !merged.is_empty() {
                result.extend(merged);
                changed = true;
                continue;
            }
            let group_desc: Vec<String> = group_terms.iter().map(describe_term).collect();
            let resolution = self.conflict(
                format!("affinity.nodeAffinity.required.nodeSelectorTerms[{i}]"),
                describe_term(term),
                group_desc.join(" or "),
            );
            match resolution {
                Resolution::Overridden => {
                    let replaced: Vec<NodeSelectorTerm> = group_terms
                        .iter()
                        .map(|g| overridden(term, g))
                        .filter(|t| !matches_no_node(t))
                        .collect();
                    if replaced.is_empty() {
                        result.extend(group_terms.iter().cloned());
                    } else {
                        result.extend(replaced);
                    }
                    changed = true;
                }
                Resolution::Ignored | Resolution::Rejected => result.push(term.clone()),
            }
        }
        if changed {
            let names: Vec<String> = group_terms.iter().map(describe_term).collect();
            self.change(
                replace(&[&base[..], &["nodeSelectorTerms"]].concat(), json(&result)),
                format!("require nodes {} in every term", names.join(" or ")),
            );
        }
    }

    fn pod_affinity(&mut self, existing: &Affinity, wanted: &Affinity) {
        for kind in PodKind::ALL {
            let (key, name) = (kind.key(), kind.name());
            let Some(want) = kind.terms(wanted) else {
                continue;
            };
            let Some(have) = kind.terms(existing) else {
                self.change(
                    add(&["spec", "affinity", key], kind.json(wanted)),
                    format!("set {name}"),
                );
                continue;
            };
            if want.required.is_some() {
                self.append(
                    &["spec", "affinity", key, REQUIRED],
                    have.required.is_some(),
                    &have.missing_required(&want),
                    |t| format!("required {name} on {}", t.topology_key),
                );
            }
            if want.preferred.is_some() {
                self.append(
                    &["spec", "affinity", key, PREFERRED],
                    have.preferred.is_some(),
                    &have.missing_preferred(&want),
                    |w| format!("preferred {name} on {}", w.pod_affinity_term.topology_key),
                );
            }
        }
    }
}
