//! The tally of one scan: each running pod and workload template the product lists, decided as
//! enforce would decide its re-creation and counted into its group's audit and the reservations'
//! ([`Scanned`]); once every namespace is done, the nodes each group can use and the verdicts
//! ([`GroupAudit::conclude`], [`ReservationAudit::conclude`]); and the warnings about namespaces.
//! Pure: the product's scan (`src/cluster/audit/scan.rs`) lists and hands the objects here.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::requester::{self, Controllers};
use super::reservation::{self, ReservationAudit};
use super::{GroupAudit, Source, verdict};
use crate::config::{Config, UnknownGroup};
use crate::decision::{self, Subject, View, Write};
use crate::placement::{Context, Namespace, NodeView, Placement, Pod, PodSpec, Requester};

/// What one namespace's decisions go into: its audited group (if it selects one) and the
/// reservations (of the other groups) its pods may intrude on.
pub struct Scanned<'a> {
    pub config: &'a Config,
    pub namespace: &'a Namespace<'a>,
    /// The nodes (for the feasibility counts and the intruders running on a pool); `None`: none.
    pub nodes: Option<&'a dyn NodeView>,
    pub group: Option<&'a mut GroupAudit>,
    /// The group the namespace selects, if audited.
    pub own: Option<&'a str>,
    pub reservations: &'a mut [ReservationAudit],
}

impl Scanned<'_> {
    /// Whether another group's reservation is audited: then every object is decided for it too.
    fn reserving(&self) -> bool {
        self.reservations.iter().any(|r| Some(r.group.as_str()) != self.own)
    }

    /// Decides the template of `workload` (`Kind/name`), made into `pod`, as `creator` would create
    /// its pods (a DaemonSet's: decided as the object is at `/mutate`, its pods as the DaemonSet
    /// controller creates them).
    pub fn template(&mut self, workload: &str, pod: &Pod, creator: Requester, daemon_set: bool) {
        let subject = match daemon_set {
            true => Subject::DaemonSet(Write::Create(pod)),
            false => Subject::Template(pod),
        };
        self.decide(workload, (Source::Template, workload, None), &subject, creator, true);
    }

    /// Decides running `pod` as its re-creation would be (`controllers`: the namespace's, listed):
    /// by its controller, node or user, without the node the scheduler bound it to.
    pub fn pod(&mut self, mut pod: Pod, controllers: &Controllers) {
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
        let (config, ns, nodes) = (self.config, self.namespace, self.nodes);
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
    }
}

impl GroupAudit {
    /// Counts the nodes that satisfy the group's own placement (with none: who could create one
    /// on demand, and the NodePools that could not), then gives its verdict; `total`: all nodes.
    pub fn conclude(&mut self, config: &Config, nodes: Option<&dyn NodeView>, total: Option<usize>) {
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
    pub fn conclude(&mut self, config: &Config, nodes: Option<&dyn NodeView>) {
        if let (Some(nodes), Some(definition)) = (nodes, config.groups.get(&self.group)) {
            self.pool_nodes = nodes.count_where(&|n| crate::placement::reservation::in_pool(definition, n));
        }
        self.verdict = reservation::verdict(self);
    }
}

/// The warning about namespaces that select `group`, which the configuration does not define.
pub fn undefined_group(config: &Config, group: &str, namespaces: &[String]) -> String {
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
pub fn side_door(config: &Config, meta: &ObjectMeta) -> Option<String> {
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
