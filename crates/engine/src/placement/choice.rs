//! Which of its group's placements a pod chose (`groups.NAME.alternatives`).
//!
//! The rule, the only one: the pod's placement label (`podPlacementLabel`, default
//! `pod-director/placement`) names the placement — an alternative of the group, or `default`;
//! a pod without the label gets the group's own placement. A label naming a placement the group
//! does not offer is a conflict under the group's `onConflict`: `reject` denies the pod (the
//! message lists the names it may choose), `override` and `ignore` apply the group's own
//! placement and record the conflict. The chosen placement is then planned, patched, verified
//! and counted exactly as a group whose only placement it is ([`Group::with_alternative`]).
//!
//! A label, not an annotation: a workload's pod template carries it to every pod, label
//! selectors (kubectl, audits, dashboards) find the pods of one alternative, and the API
//! server's CEL reads it in an admission policy's match condition.

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::plan::{Plan, plan};
use super::verify::verify;
use super::{Conflict, Pod, Resolution, Violation};
use crate::config::{Config, DEFAULT_ALTERNATIVE, Group, OnConflict};

impl Group {
    /// The group as planned for a pod that chose alternative `name`: the alternative's placement in
    /// place of the group's own, every other setting the group's. `None`: the group offers no such name.
    pub(crate) fn with_alternative(&self, name: &str) -> Option<Cow<'_, Group>> {
        if name == DEFAULT_ALTERNATIVE {
            return Some(Cow::Borrowed(self));
        }
        let alt = self.alternatives.get(name)?;
        // Field by field (no `..self.clone()`): on the admission path, the group's own placement and
        // its alternatives are not copied only to be dropped.
        Some(Cow::Owned(Group {
            mode: self.mode,
            on_conflict: self.on_conflict,
            allow_pod_exclusion: self.allow_pod_exclusion,
            on_no_feasible_node: self.on_no_feasible_node,
            allow_daemon_sets: self.allow_daemon_sets,
            node_selector: alt.node_selector.clone(),
            tolerations: alt.tolerations.clone(),
            affinity: alt.affinity.clone(),
            alternatives: BTreeMap::new(),
            reserve: self.reserve.clone(),
            nodes: self.nodes.clone(),
            enforce_with: self.enforce_with,
        }))
    }

    /// Every name a pod may choose: `default`, then the alternatives.
    pub fn placement_names(&self) -> impl Iterator<Item = &str> {
        std::iter::once(DEFAULT_ALTERNATIVE).chain(self.alternatives.keys().map(String::as_str))
    }
}

/// The placement a pod is decided with.
#[derive(Debug, Clone)]
pub struct Chosen<'c> {
    /// The group as planned for the pod: its own placement or the chosen alternative's.
    pub group: Cow<'c, Group>,
    /// The placement's name, for the reports (`placement.alternative`): `None` for a pod without the
    /// label in a group that offers no alternative (nothing to report); `default` for the group's own.
    pub name: Option<&'c str>,
    /// The pod named a placement the group does not offer.
    pub conflict: Option<Conflict>,
}

/// The value of the pod's placement label, if any.
pub(crate) fn chosen_label<'p>(config: &Config, pod: &'p Pod) -> Option<&'p str> {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(&config.pod_placement_label))
        .map(String::as_str)
}

/// The placement `pod` chose among `group`'s (the module's rule).
pub fn choose<'c>(config: &Config, group: &'c Group, pod: &Pod) -> Chosen<'c> {
    let Some(label) = chosen_label(config, pod) else {
        let name = (!group.alternatives.is_empty()).then_some(DEFAULT_ALTERNATIVE);
        return Chosen {
            group: Cow::Borrowed(group),
            name,
            conflict: None,
        };
    };
    if let Some((name, _)) = group.alternatives.get_key_value(label)
        && let Some(placed) = group.with_alternative(name)
    {
        return Chosen {
            group: placed,
            name: Some(name.as_str()),
            conflict: None,
        };
    }
    let names: Vec<&str> = group.placement_names().collect();
    let conflict = (label != DEFAULT_ALTERNATIVE).then(|| Conflict {
        field: format!("metadata.labels[{:?}]", config.pod_placement_label),
        pod: format!("{label:?}"),
        group: format!("one of {}", names.join(", ")),
        resolution: match group.on_conflict {
            OnConflict::Reject => Resolution::Rejected,
            OnConflict::Override => Resolution::Overridden,
            OnConflict::Ignore => Resolution::Ignored,
        },
    });
    Chosen {
        group: Cow::Borrowed(group),
        name: Some(DEFAULT_ALTERNATIVE),
        conflict,
    }
}

impl Chosen<'_> {
    /// The plan of the chosen placement, the conflict of an unknown choice first.
    pub fn plan(&self, pod: &Pod) -> Plan {
        let mut planned = plan(pod, &self.group);
        if let Some(conflict) = &self.conflict {
            planned.conflicts.insert(0, conflict.clone());
        }
        planned
    }

    /// The violations of the chosen placement; an unknown choice under `reject` is one, first.
    pub fn verify(&self, pod: &Pod) -> Vec<Violation> {
        let mut violations = verify(pod, &self.group);
        if let Some(conflict) = self.conflict.as_ref().filter(|c| c.resolution == Resolution::Rejected) {
            violations.insert(
                0,
                Violation {
                    field: conflict.field.clone(),
                    message: format!(
                        "is {}, which the group does not offer; choose {}",
                        conflict.pod, conflict.group
                    ),
                },
            );
        }
        violations
    }
}

#[cfg(test)]
mod tests;
