//! The tally of one scan, one object the product feeds as it lists the cluster ([`Scan`]): every
//! namespace, then namespace by namespace its workloads and its running pods, each decided as
//! enforce would decide its re-creation and counted into its group's audit and the reservations'
//! ([`Scanned`]); [`Scan::finish`] counts the nodes each group can use and gives the verdicts
//! ([`GroupAudit::conclude`], [`ReservationAudit::conclude`]) and the warnings about namespaces.
//! Pure: the product's scan (`src/cluster/audit/scan.rs`) lists and hands the objects here.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::in_tree::probe::Probe;
use super::in_tree::{self, InTreeAudit, PluginState};
use super::requester::{self, ControllerKind, Controllers};
use super::reservation::{self, ReservationAudit};
use super::{Audit, GroupAudit, Source, verdict};
use crate::config::{Config, UnknownGroup};
use crate::decision::{self, Subject, View, Write};
use crate::in_tree::Plugin;
use crate::placement::{Context, Namespace, NodeView, Placement, Pod, PodSpec, Requester, Selection, select_group};

/// A namespace the scan decides: its name, labels, the audited group it selects (`None`: listed
/// for the reservations or the in-tree rule only) and whether it carries in-tree annotations.
type Selected = (String, BTreeMap<String, String>, Option<String>, bool);

/// One scan of the cluster, fed by the product as it lists: [`Scan::namespace`] for every
/// namespace, then for each of [`Scan::namespaces`] in turn [`Scan::enter`], its workloads
/// ([`Scan::workload`]) and its pods ([`Scan::pod`]); [`Scan::finish`] gives the [`Audit`].
pub struct Scan<'a> {
    config: &'a Config,
    nodes: Option<&'a dyn NodeView>,
    groups: BTreeMap<String, GroupAudit>,
    reservations: Vec<ReservationAudit>,
    in_tree: InTreeAudit,
    selected: Vec<Selected>,
    undefined: BTreeMap<String, Vec<String>>,
    warnings: Vec<String>,
    /// Auditing one group only (`--group`): namespaces of undefined groups are not warned about.
    only: bool,
    /// The namespace being scanned (an index into `selected`) and its listed controllers.
    current: Option<usize>,
    controllers: Controllers,
    namespaces_scanned: usize,
    pods_scanned: u64,
    templates_scanned: u64,
}

impl<'a> Scan<'a> {
    /// A scan of every group of `config`, or of `only` (a group the configuration has), with the
    /// nodes of the feasibility counts (`None`: none).
    pub fn new(config: &'a Config, nodes: Option<&'a dyn NodeView>, only: Option<&str>) -> Self {
        let audited = |name: &str| only.is_none_or(|g| g == name);
        Self {
            config,
            nodes,
            groups: config
                .groups
                .iter()
                .filter(|(name, _)| audited(name))
                .map(|(name, group)| (name.clone(), GroupAudit::new(name.clone(), config.mode_of(group))))
                .collect(),
            reservations: crate::placement::reservation::reservations(config)
                .filter(|r| audited(r.name))
                .map(|r| ReservationAudit::new(r.name.to_owned(), r.reserve.mode))
                .collect(),
            // One group audited (`--group`): not the in-tree rule, which is no group's.
            in_tree: if only.is_some() {
                InTreeAudit::default()
            } else {
                InTreeAudit::of(config)
            },
            selected: Vec::new(),
            undefined: BTreeMap::new(),
            warnings: Vec::new(),
            only: only.is_some(),
            current: None,
            controllers: Controllers::default(),
            namespaces_scanned: 0,
            pods_scanned: 0,
            templates_scanned: 0,
        }
    }

    /// A listed namespace: scanned when it selects an audited group, when it carries in-tree
    /// annotations (the whole cluster audited), or, with a reservation audited, whatever it
    /// selects (its pods may intrude); warned about when it selects an undefined group or its
    /// group label came through a subresource, or its group and in-tree rules contradict.
    pub fn namespace(&mut self, meta: ObjectMeta) {
        let name = meta.name.clone().unwrap_or_default();
        self.warnings.extend(side_door(self.config, &meta));
        let labels = meta.labels.unwrap_or_default();
        let annotations = meta.annotations.unwrap_or_default();
        let namespace = Namespace::new(&name, &labels).with_annotations(&annotations);
        let selection = select_group(self.config, &namespace);
        if let Selection::Group { name: group, .. } = selection
            && self.groups.contains_key(group)
        {
            self.warnings
                .extend(crate::in_tree::contradictions(self.config, &namespace));
        }
        let excluded = selection == Selection::Excluded;
        // A namespace being deleted takes no new pod: no hole there, and no probe sent into it.
        let deleting = meta.deletion_timestamp.is_some();
        let in_tree = !self.only && !deleting && self.in_tree.namespace(&name, Some(&annotations), excluded);
        let reserving = !self.reservations.is_empty() || in_tree;
        match selection {
            Selection::Group { name: group, .. } if self.groups.contains_key(group) => {
                let group = Some(group.to_owned());
                self.selected.push((name, labels, group, in_tree));
            }
            Selection::Excluded if in_tree => self.selected.push((name, labels, None, in_tree)),
            Selection::Excluded => {}
            Selection::Unknown { name: group } => {
                if !self.only {
                    self.undefined.entry(group).or_default().push(name.clone());
                }
                if reserving {
                    self.selected.push((name, labels, None, in_tree));
                }
            }
            _ if reserving => self.selected.push((name, labels, None, in_tree)),
            _ => {}
        }
    }

    /// The namespaces to scan, in name order, once every namespace was listed.
    pub fn namespaces(&mut self) -> Vec<String> {
        self.selected.sort_by(|a, b| a.0.cmp(&b.0));
        self.selected.iter().map(|(name, ..)| name.clone()).collect()
    }

    /// Starts scanning namespace `name` (one of [`Scan::namespaces`]): its workloads, then its pods.
    pub fn enter(&mut self, name: &str) {
        self.namespaces_scanned += usize::from(self.current.is_some());
        self.current = self.selected.iter().position(|(n, ..)| n == name);
        self.controllers = Controllers::default();
        let Some((name, _, Some(group), _)) = self.current.map(|i| &self.selected[i]) else {
            return;
        };
        if let Some(group) = self.groups.get_mut(group) {
            group.namespaces += 1;
            group.workloads.namespace(name, &group.group);
        }
    }

    /// A workload of the namespace (`apiVersion`, `kind`, its metadata and pod template): noted
    /// among the namespace's controllers (its pods' owners), and its template decided as the pods
    /// its controller creates — unless another workload manages it (a Deployment's ReplicaSet, a
    /// CronJob's Job): then that one's template is.
    pub fn workload(&mut self, api_version: &str, kind: &str, meta: &ObjectMeta, template: Option<&PodTemplateSpec>) {
        let Some((controller, controlled_by, pod_owner)) = workload_kind(api_version, kind) else {
            return;
        };
        let name = meta.name.as_deref().unwrap_or_default();
        let manager = controlled_by
            .and_then(|by| {
                meta.owner_references
                    .iter()
                    .flatten()
                    .find(|o| o.controller == Some(true) && o.kind == by)
            })
            .map(|o| format!("{}/{}", o.kind, o.name));
        if let Some(controller) = controller {
            let uid = meta.uid.as_deref().unwrap_or_default();
            self.controllers.insert(controller, name, uid, manager.clone());
        }
        let (None, Some(template)) = (manager, template) else {
            return;
        };
        // A DaemonSet's pods are created by the DaemonSet controller, whoever writes the object.
        let creator = pod_owner
            .and_then(|(api_version, owner)| ControllerKind::of(api_version, owner))
            .unwrap_or(ControllerKind::DaemonSet);
        let creator = requester::controller_requester(self.config, creator);
        let pod = requester::template_pod(
            template,
            pod_owner.map(|(api_version, owner)| (api_version, owner, name)),
        );
        let workload = format!("{kind}/{name}");
        self.templates_scanned += 1;
        if let Some(mut scanned) = self.scanned() {
            scanned.template(&workload, &pod, creator, pod_owner.is_none());
        }
    }

    /// A running pod of the namespace, decided as its re-creation would be.
    pub fn pod(&mut self, pod: Pod) {
        self.pods_scanned += 1;
        let controllers = std::mem::take(&mut self.controllers);
        if let Some(mut scanned) = self.scanned() {
            scanned.pod(pod, &controllers);
        }
        self.controllers = controllers;
    }

    /// The dry-run probes that tell whether the API server runs the in-tree plugins the annotated
    /// namespaces ask for (none when pod-director's compatibility enforces them).
    pub fn plugin_probes(&self) -> Vec<Probe> {
        (self.in_tree.plugins_to_ask().into_iter())
            .filter_map(|(plugin, namespace, selector)| in_tree::probe::probe(plugin, namespace, selector))
            .collect()
    }

    /// Whether the API server runs `plugin` (a probe's answer, or the admin's word).
    pub fn plugin(&mut self, plugin: Plugin, state: PluginState) {
        self.in_tree.plugin(plugin, state);
    }

    /// Namespaces, pods and templates scanned so far (for progress lines).
    pub fn counts(&self) -> (usize, u64, u64) {
        (self.namespaces_scanned, self.pods_scanned, self.templates_scanned)
    }

    /// The audit: every group's and reservation's nodes and verdict concluded.
    pub fn finish(mut self, elapsed: Duration) -> Audit {
        let (config, nodes) = (self.config, self.nodes);
        self.namespaces_scanned += usize::from(self.current.is_some());
        let total = nodes.and_then(NodeView::total);
        let mut warnings: Vec<String> = (self.undefined.iter())
            .map(|(group, namespaces)| undefined_group(config, group, namespaces))
            .collect();
        warnings.append(&mut self.warnings);
        self.in_tree.conclude();
        Audit {
            groups: (self.groups.into_values())
                .map(|mut group| {
                    group.conclude(config, nodes, total);
                    group
                })
                .collect(),
            nodes: total,
            namespaces_scanned: self.namespaces_scanned,
            pods_scanned: self.pods_scanned,
            templates_scanned: self.templates_scanned,
            elapsed,
            warnings,
            reservations: (self.reservations.into_iter())
                .map(|mut reservation| {
                    reservation.conclude(config, nodes);
                    reservation
                })
                .collect(),
            in_tree: self.in_tree,
        }
    }

    /// What the namespace being scanned decides into.
    fn scanned(&mut self) -> Option<Scanned<'_>> {
        let (name, labels, group, in_tree) = self.selected.get(self.current?)?;
        Some(Scanned {
            config: self.config,
            namespace: Namespace::new(name, labels),
            nodes: self.nodes,
            group: group.as_ref().and_then(|g| self.groups.get_mut(g)),
            own: group.as_deref(),
            reservations: &mut self.reservations,
            in_tree: in_tree.then_some(&mut self.in_tree),
        })
    }
}

/// What a workload kind is among the namespace's controllers (the owners its pods name), the kind
/// of workload that manages it (then its template is that one's), and the `(apiVersion, kind)` of
/// its pods' owner (`None`: a DaemonSet, decided as the object is at `/mutate`).
type WorkloadKind = (
    Option<ControllerKind>,
    Option<&'static str>,
    Option<(&'static str, &'static str)>,
);

/// The workload kinds whose pod templates the audit decides.
fn workload_kind(api_version: &str, kind: &str) -> Option<WorkloadKind> {
    Some(match (api_version, kind) {
        ("apps/v1", "Deployment") => (None, None, Some(("apps/v1", "ReplicaSet"))),
        ("apps/v1", "ReplicaSet") => (
            Some(ControllerKind::ReplicaSet),
            Some("Deployment"),
            Some(("apps/v1", "ReplicaSet")),
        ),
        ("apps/v1", "StatefulSet") => (
            Some(ControllerKind::StatefulSet),
            None,
            Some(("apps/v1", "StatefulSet")),
        ),
        ("apps/v1", "DaemonSet") => (Some(ControllerKind::DaemonSet), None, None),
        ("batch/v1", "CronJob") => (None, None, Some(("batch/v1", "Job"))),
        ("batch/v1", "Job") => (Some(ControllerKind::Job), Some("CronJob"), Some(("batch/v1", "Job"))),
        _ => return None,
    })
}

/// What one namespace's decisions go into: its audited group (if it selects one) and the
/// reservations (of the other groups) its pods may intrude on.
struct Scanned<'a> {
    config: &'a Config,
    namespace: Namespace<'a>,
    /// The nodes (for the feasibility counts and the intruders running on a pool); `None`: none.
    nodes: Option<&'a dyn NodeView>,
    group: Option<&'a mut GroupAudit>,
    /// The group the namespace selects, if audited.
    own: Option<&'a str>,
    reservations: &'a mut [ReservationAudit],
    /// The in-tree rule's audit, when the namespace carries in-tree annotations.
    in_tree: Option<&'a mut InTreeAudit>,
}

impl Scanned<'_> {
    /// Whether another group's reservation is audited: then every object is decided for it too.
    fn reserving(&self) -> bool {
        self.reservations.iter().any(|r| Some(r.group.as_str()) != self.own)
    }

    /// Decides the template of `workload` (`Kind/name`), made into `pod`, as `creator` would create
    /// its pods (a DaemonSet's: decided as the object is at `/mutate`, its pods as the DaemonSet
    /// controller creates them).
    fn template(&mut self, workload: &str, pod: &Pod, creator: Requester, daemon_set: bool) {
        let subject = match daemon_set {
            true => Subject::DaemonSet(Write::Create(pod)),
            false => Subject::Template(pod),
        };
        self.decide(workload, (Source::Template, workload, None), &subject, creator, true);
    }

    /// Decides running `pod` as its re-creation would be (`controllers`: the namespace's, listed):
    /// by its controller, node or user, without the node the scheduler bound it to.
    fn pod(&mut self, mut pod: Pod, controllers: &Controllers) {
        let found = requester::recreation(self.config, &pod, controllers, self.nodes);
        let node = pod
            .spec
            .as_mut()
            .and_then(|s| s.node_name.take())
            .filter(|n| !n.is_empty());
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let known = found.requester.is_known();
        let what = (Source::Pods, name, node.as_deref());
        self.decide(
            &found.workload,
            what,
            &Subject::Pod(Write::Create(&pod)),
            found.requester,
            known,
        );
    }

    /// Decides `subject` of `workload` (`what`: pods or template, an example's name, the node it
    /// runs on) into the reservations (`known`: whether its requester is) and into the group.
    fn decide(
        &mut self,
        workload: &str,
        (source, example, node): (Source, &str, Option<&str>),
        subject: &Subject<'_>,
        requester: Requester,
        known: bool,
    ) {
        let (config, ns, nodes) = (self.config, &self.namespace, self.nodes);
        let context = Context { requester, nodes };
        let view = View {
            config,
            namespace: ns,
            context: &context,
        };
        let fate = decision::fate(subject, &view);
        if self.reserving() {
            let on = node.zip(nodes);
            let (reservations, own) = (&mut *self.reservations, self.own);
            reservation::record(
                reservations,
                own,
                config,
                ns.name,
                workload,
                (source, known),
                example,
                on,
                &fate.reservation,
            );
        }
        if let Some(group) = self.group.as_mut() {
            group.record(ns.name, workload, source, example, node, fate.placement());
        }
        if let Some(in_tree) = self.in_tree.as_mut() {
            in_tree.decide(config, ns, workload, (source, example), subject);
        }
    }
}

impl GroupAudit {
    /// Counts the nodes that satisfy the group's own placement (with none: who could create one
    /// on demand, and the NodePools that could not), then gives its verdict; `total`: all nodes.
    pub(crate) fn conclude(&mut self, config: &Config, nodes: Option<&dyn NodeView>, total: Option<usize>) {
        if let (Some(nodes), Some(definition)) = (nodes, config.groups.get(&self.group)) {
            self.feasible_nodes = nodes.feasible(&Placement::of_group(definition));
            if self.feasible_nodes == Some(0) {
                let spec = PodSpec {
                    node_selector: (!definition.node_selector.is_empty()).then(|| definition.node_selector.clone()),
                    tolerations: Some(definition.tolerations.clone()),
                    affinity: definition.affinity.clone(),
                    ..Default::default()
                };
                for pool in nodes.node_pools_for(&spec) {
                    match pool {
                        Ok(by) => self.provisionable_by.push(by),
                        Err(not) => self.not_provisionable_by.push(not),
                    }
                }
                if definition.nodes.provisioned_on_demand {
                    self.provisionable_by
                        .push(crate::placement::feasible::DECLARED_PROVISIONER.to_owned());
                }
            }
        }
        self.verdict = verdict::verdict(config, self, total);
    }
}

impl ReservationAudit {
    /// Counts the nodes of the pool, then gives the reservation's verdict.
    pub(crate) fn conclude(&mut self, config: &Config, nodes: Option<&dyn NodeView>) {
        if let (Some(nodes), Some(definition)) = (nodes, config.groups.get(&self.group)) {
            self.pool_nodes = nodes.count_where(&|n| crate::placement::reservation::in_pool(definition, n));
        }
        self.verdict = reservation::verdict(self);
    }
}

/// The warning about namespaces that select `group`, which the configuration does not define.
pub(crate) fn undefined_group(config: &Config, group: &str, namespaces: &[String]) -> String {
    format!(
        "{} namespace(s) select group {group:?}, which the configuration does not define ({}): their pods are \
         decided by unknownGroup ({}): {}",
        namespaces.len(),
        config.namespace_label,
        match config.unknown_group {
            UnknownGroup::Allow => "allow: admitted unplaced",
            UnknownGroup::Deny => "deny: refused",
        },
        namespaces.join(", ")
    )
}

/// The warning about namespace `meta` when its group label was last written through a
/// subresource ([`label_written_through_subresource`]).
pub(crate) fn side_door(config: &Config, meta: &ObjectMeta) -> Option<String> {
    let write = label_written_through_subresource(meta, &config.namespace_label)?;
    Some(format!(
        "namespace {:?}: its group label {} was last written through the {} subresource ({}): a path the \
         namespace label guard did not decide before its entries matched namespaces/status and \
         namespaces/finalize; check that a guard decision was logged for it, or have an allowed requester set \
         the label again",
        meta.name.as_deref().unwrap_or_default(),
        config.namespace_label,
        write.subresource,
        write.by
    ))
}

/// A write of a namespace's group label through a subresource, as its managed fields record it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubresourceWrite {
    pub subresource: String,
    /// `field manager M at T`.
    pub by: String,
}

/// Whether the namespace's `label` is owned (server-side apply's managed fields) by a write
/// through its `status` or `finalize` subresource: the API server persists the labels such a
/// write carries, and the label guard only decides those paths since its entries list them.
pub(crate) fn label_written_through_subresource(meta: &ObjectMeta, label: &str) -> Option<SubresourceWrite> {
    let key = format!("f:{label}");
    meta.managed_fields.iter().flatten().find_map(|entry| {
        let sub = entry
            .subresource
            .as_deref()
            .filter(|s| matches!(*s, "status" | "finalize"))?;
        let owns = entry
            .fields_v1
            .as_ref()
            .and_then(|f| f.0.pointer("/f:metadata/f:labels"))
            .and_then(|labels| labels.get(&key))
            .is_some();
        owns.then(|| SubresourceWrite {
            subresource: sub.to_owned(),
            by: match (&entry.manager, &entry.time) {
                (Some(manager), Some(time)) => format!("field manager {manager:?} at {}", time.0),
                (Some(manager), None) => format!("field manager {manager:?}"),
                _ => "an unnamed field manager".to_owned(),
            },
        })
    })
}

#[cfg(test)]
mod tests;
