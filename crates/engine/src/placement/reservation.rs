//! Reservations: keeping everyone else's pods off a group's nodes (`groups.NAME.reserve`).
//!
//! A group's pool is tainted (`dedicated=ci:NoSchedule`) and the group's pods carry the
//! toleration. A pod of any *other* namespace is an **intruder** of the reservation when
//! - one of its tolerations tolerates a taint the group's tolerations exist for — a taint
//!   both tolerate, as the in-tree `ToleratesTaint` decides it: an `Exists` toleration of the
//!   group's key, the keyless `Exists` toleration (every taint), an empty effect (every
//!   effect), a copied toleration. Only `NoSchedule` and `NoExecute` taints keep pods off a
//!   node, so a `PreferNoSchedule` toleration reserves nothing; nor do the node lifecycle
//!   taints (`node.kubernetes.io/*`, `node.cloudprovider.kubernetes.io/*`), which any node may
//!   carry and for two of which the API server's `DefaultTolerationSeconds` gives every pod a
//!   toleration;
//! - or it names a node of the pool in `spec.nodeName` (bypassing the scheduler and taints):
//!   a node whose labels satisfy the group's nodeSelector and required node affinity — or,
//!   for a group that selects nodes by taints only, a node carrying a reserved taint.
//!
//! On UPDATE only what the update introduces intrudes (a pod admitted before the reservation
//! can still be updated). Exemptions are keyed on the requester, never on the pod's fields:
//! pods the DaemonSet controller creates for a DaemonSet (`allowDaemonSets`), mirror pods
//! created by a node, excluded namespaces, and the reservation's allow-list.
//!
//! A Binding (`pods/binding` CREATE) puts a pending pod on a node without the scheduler's
//! taint check ([`decide_binding`]): trusted when a scheduler that honours taints sends it
//! (`system:kube-scheduler`, `trustedSchedulers`), otherwise decided like an UPDATE that sets
//! the pod's `spec.nodeName` to the Binding's target: the node is all it introduces.

use std::fmt;

use k8s_openapi::api::core::v1::Toleration;

use super::decide::{
    Namespace, Selection, bound_node, has_daemon_set_controller_reference, has_mirror_annotation, select_group,
};
use super::feasible::{NodeInfo, NodeLookup, Placement, feasible, term_matches};
use super::tolerations::{NodeTaint, TaintEffect, describe, same, tolerates_taint};
use super::{Context, Decision, MAX_SUMMARY_CHARS, Outcome, Pod, SkipReason, Webhook, truncate_chars};
use crate::config::{Config, Group, Mode, Reserve};

/// Taint key prefixes of the node lifecycle (conditions, cordon, cloud-provider start-up): they
/// reserve nothing.
pub const LIFECYCLE_TAINT_PREFIXES: [&str; 2] = ["node.kubernetes.io/", "node.cloudprovider.kubernetes.io/"];

/// Why an intruder is let in anyway (`reservation.exempt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exemption {
    /// Created by the DaemonSet controller for a DaemonSet (`allowDaemonSets`).
    DaemonSetPod,
    /// The pod's namespace is in `allow.namespaces`.
    Namespace,
    /// The requester is in `allow.users`.
    User,
    /// The requester is in one of `allow.groups`.
    Group,
    /// The requester is one of `allow.serviceAccounts`.
    ServiceAccount,
    /// The pod's namespace is in a group of `allow.placementGroups`.
    PlacementGroup,
}

impl Exemption {
    pub fn as_str(self) -> &'static str {
        match self {
            Exemption::DaemonSetPod => "daemonset_pod",
            Exemption::Namespace => "allowed_namespace",
            Exemption::User => "allowed_user",
            Exemption::Group => "allowed_group",
            Exemption::ServiceAccount => "allowed_service_account",
            Exemption::PlacementGroup => "allowed_placement_group",
        }
    }
}

/// How a pod intrudes on a reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    /// One of its tolerations tolerates `taint`, which the group reserves.
    Toleration { toleration: String, taint: String },
    /// `spec.nodeName` names a node of the pool.
    NodeName(String),
    /// A Binding (`pods/binding`) targets a node of the pool.
    Binding(String),
}

/// One reservation a pod intrudes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intrusion {
    /// The reserving group.
    pub group: String,
    /// The reservation's mode.
    pub mode: Mode,
    pub via: Via,
    /// Set when the requester is exempt: the pod is admitted, the intrusion reported.
    pub exempt: Option<Exemption>,
    /// Of the pool's nodes, on how many the pod could land (its own placement; the feasibility
    /// engine), and how many the pool has; `None` without node data.
    pub pool_nodes: Option<(usize, usize)>,
}

impl fmt::Display for Intrusion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.via {
            Via::Toleration { toleration, taint } => write!(
                f,
                "group {:?} reserves taint {taint}: the pod's toleration {toleration:?} tolerates it",
                self.group
            )?,
            Via::NodeName(node) => write!(
                f,
                "group {:?} reserves node {node:?}: the pod names it in spec.nodeName",
                self.group
            )?,
            Via::Binding(node) => write!(
                f,
                "group {:?} reserves node {node:?}: the binding targets it",
                self.group
            )?,
        }
        match self.pool_nodes {
            Some((_, 0)) => f.write_str(" (the pool has no node now)")?,
            Some((fits, total)) => write!(f, " (it could land on {fits} of the pool's {total} nodes)")?,
            None => {}
        }
        if let Some(exempt) = self.exempt {
            write!(f, " [exempt: {}]", exempt.as_str())?;
        }
        Ok(())
    }
}

/// A group that reserves its nodes.
#[derive(Debug, Clone, Copy)]
pub struct Reservation<'c> {
    pub name: &'c str,
    pub group: &'c Group,
    pub reserve: &'c Reserve,
}

/// The groups that reserve their nodes, by name.
pub fn reservations(config: &Config) -> impl Iterator<Item = Reservation<'_>> {
    config.groups.iter().filter_map(|(name, group)| {
        group.reserve.as_ref().map(|reserve| Reservation {
            name: name.as_str(),
            group,
            reserve,
        })
    })
}

/// Whether any group reserves its nodes.
pub fn any_reservation(config: &Config) -> bool {
    reservations(config).next().is_some()
}

fn text(field: &Option<String>) -> &str {
    field.as_deref().unwrap_or("")
}

fn is_lifecycle(key: &str) -> bool {
    LIFECYCLE_TAINT_PREFIXES.iter().any(|p| key.starts_with(p))
}

/// The group's tolerations that reserve taints: effect NoSchedule, NoExecute or empty (every
/// effect), for a key that is not a node lifecycle taint's.
pub(crate) fn reserving_tolerations(group: &Group) -> impl Iterator<Item = &Toleration> {
    group.tolerations.iter().filter(|t| {
        let effect = text(&t.effect);
        (effect.is_empty() || TaintEffect::parse(effect).excludes()) && !is_lifecycle(text(&t.key))
    })
}

/// The toleration keys a reservation reserves (empty: the keyless toleration, which config
/// validation refuses), sorted and unique: what the webhook entry's matchCondition sends.
pub(crate) fn reserved_keys(config: &Config) -> Vec<String> {
    let mut keys: Vec<String> = reservations(config)
        .flat_map(|r| reserving_tolerations(r.group).map(|t| text(&t.key).to_owned()))
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// A taint that both `pod` and `reserving` tolerate and that keeps pods off a node
/// (NoSchedule/NoExecute, not a lifecycle taint); `None` when there is none. The witness
/// has `reserving`'s key (the pod's when `reserving` has none), and a value either tolerates.
pub(crate) fn shared_taint(pod: &Toleration, reserving: &Toleration) -> Option<NodeTaint> {
    let key = match (text(&reserving.key), text(&pod.key)) {
        ("", "") => "reserved.pod-director.io/any",
        ("", key) | (key, _) => key,
    };
    if is_lifecycle(key) {
        return None;
    }
    let exists = |t: &Toleration| text(&t.operator) == "Exists";
    let value = if !exists(reserving) {
        text(&reserving.value)
    } else if !exists(pod) {
        text(&pod.value)
    } else {
        ""
    };
    [TaintEffect::NoSchedule, TaintEffect::NoExecute]
        .into_iter()
        .map(|effect| NodeTaint::new(key, value, effect.as_str()))
        .find(|taint| tolerates_taint(pod, taint) && tolerates_taint(reserving, taint))
}

/// Whether `node` is in the group's pool: it satisfies the group's nodeSelector and required
/// node affinity; a group that selects by neither: the node carries a taint it reserves.
pub fn in_pool(group: &Group, node: &NodeInfo) -> bool {
    let placement = Placement::of_group(group);
    let labels = placement.node_selector.is_some() || placement.required.is_some();
    if labels {
        let selected = placement
            .node_selector
            .into_iter()
            .flatten()
            .all(|(k, v)| node.label(k) == Some(v.as_str()));
        selected
            && placement
                .required
                .is_none_or(|terms| terms.iter().any(|t| term_matches(t, node)))
    } else {
        node.taints
            .iter()
            .any(|taint| taint.effect.excludes() && reserving_tolerations(group).any(|t| tolerates_taint(t, taint)))
    }
}

/// The tolerations `pod` has that `old` did not (all of them at CREATE).
fn introduced<'p>(pod: &'p Pod, old: Option<&Pod>) -> impl Iterator<Item = &'p Toleration> {
    let before: &[Toleration] = old
        .and_then(|o| o.spec.as_ref())
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default()
        .iter()
        .filter(move |t| !before.iter().any(|b| same(b, t)))
}

/// Whether deciding `pod` at `/validate-reservation` needs the node it names (so the caller
/// can look it up first): some group reserves, and the request sets `spec.nodeName`.
pub(crate) fn needs_named_node<'p>(config: &Config, pod: &'p Pod, old: Option<&Pod>) -> Option<&'p str> {
    if any_reservation(config) {
        bound_node(pod, old)
    } else {
        None
    }
}

/// Why the requester may land on the pool anyway (keyed on the requester and the request's
/// namespace, never on the pod's fields beyond narrowing the DaemonSet exemption down).
fn exemption(config: &Config, reserve: &Reserve, ns: &Namespace<'_>, pod: &Pod, ctx: &Context) -> Option<Exemption> {
    let requester = &ctx.requester;
    let allow = &reserve.allow;
    if reserve.allow_daemon_sets
        && requester.username == config.daemon_set_controller
        && has_daemon_set_controller_reference(pod)
    {
        return Some(Exemption::DaemonSetPod);
    }
    if allow.namespaces.iter().any(|n| n == ns.name) {
        return Some(Exemption::Namespace);
    }
    if let Selection::Group { name, .. } = select_group(config, ns)
        && allow.placement_groups.iter().any(|g| g == name)
    {
        return Some(Exemption::PlacementGroup);
    }
    if requester.is_known() && allow.users.contains(&requester.username) {
        return Some(Exemption::User);
    }
    if allow.groups.iter().any(|g| requester.in_group(g)) {
        return Some(Exemption::Group);
    }
    if allow.has_service_account(&requester.username) {
        return Some(Exemption::ServiceAccount);
    }
    None
}

/// How `pod` intrudes on one reservation (at most one intrusion by toleration: the first;
/// and one by node name), with the pool counts.
fn intrusions(
    reservation: Reservation<'_>,
    pod: &Pod,
    old: Option<&Pod>,
    ctx: &Context,
    binding: bool,
) -> Result<Vec<Intrusion>, String> {
    let mut found = Vec::new();
    let by_toleration = introduced(pod, old).find_map(|t| {
        reserving_tolerations(reservation.group)
            .find_map(|g| shared_taint(t, g))
            .map(|taint| Via::Toleration {
                toleration: describe(t),
                taint: taint.describe(),
            })
    });
    found.extend(by_toleration);
    if let Some(name) = bound_node(pod, old) {
        match ctx.nodes.map(|n| n.node(name)) {
            Some(NodeLookup::Found(node)) if in_pool(reservation.group, &node) => found.push(match binding {
                true => Via::Binding(name.to_owned()),
                false => Via::NodeName(name.to_owned()),
            }),
            Some(NodeLookup::Unavailable(reason)) => {
                let field = if binding {
                    "the binding's target"
                } else {
                    "spec.nodeName"
                };
                return Err(format!("cannot check {field} {name:?}: {reason}"));
            }
            // Not a pool node, a node that does not exist (nothing to land on), or no node data (explain).
            _ => {}
        }
    }
    let spec = super::spec_of(pod);
    let placement = Placement::of_spec(&spec);
    let pool_nodes = ctx.nodes.and_then(|nodes| {
        let total = nodes.count_where(&|n| in_pool(reservation.group, n))?;
        let fits = nodes.count_where(&|n| in_pool(reservation.group, n) && feasible(&placement, n))?;
        Some((fits, total))
    });
    Ok(found
        .into_iter()
        .map(|via| Intrusion {
            group: reservation.name.to_owned(),
            mode: reservation.reserve.mode,
            pool_nodes: match via {
                // A pod naming a pool node lands on it whatever its placement.
                Via::NodeName(_) | Via::Binding(_) => pool_nodes.map(|(_, total)| (1, total)),
                Via::Toleration { .. } => pool_nodes,
            },
            via,
            exempt: None,
        })
        .collect())
}

/// The `/validate-reservation` decision for a pod being created or updated: is it an intruder
/// of some group's reservation? enforce reservations deny it; dryRun and warn report
/// `would_deny` (warn also warns the client). Exempt intruders are admitted and reported.
pub(crate) fn decide(config: &Config, ns: &Namespace<'_>, pod: &Pod, old: Option<&Pod>, ctx: &Context) -> Outcome {
    decide_write(config, ns, pod, old, ctx, false)
}

/// The `/validate-reservation` decision for a Binding of `pod` (as stored, pending) to node
/// `target` (`pods/binding` CREATE, its requester in `ctx`), once `decision::binding_skipped` let
/// it through (a trusted scheduler honours the pool's taints): decided as [`decide`] decides an
/// UPDATE that sets `spec.nodeName` to `target` — the node is all a binding introduces — with the
/// requester as the one who asks. Look the node up first ([`needs_named_node`] of the bound pod).
pub(crate) fn decide_binding(config: &Config, ns: &Namespace<'_>, pod: &Pod, target: &str, ctx: &Context) -> Outcome {
    decide_write(config, ns, &pod.bound_to(target), Some(pod), ctx, true)
}

/// [`decide`]; `binding`: the request is a Binding ([`decide_binding`]).
fn decide_write(
    config: &Config,
    ns: &Namespace<'_>,
    pod: &Pod,
    old: Option<&Pod>,
    ctx: &Context,
    binding: bool,
) -> Outcome {
    let mut out = Outcome::new(Webhook::ValidateReservation, Decision::Noop);
    let skip = |mut out: Outcome, reason: SkipReason| {
        out.decision = Decision::Skipped;
        out.summary = format!("skipped: {reason}");
        out.skip_reason = Some(reason);
        out
    };
    if !any_reservation(config) {
        return skip(out, SkipReason::NotApplicable("no group reserves its nodes".to_owned()));
    }
    let own = match select_group(config, ns) {
        Selection::Excluded => return skip(out, SkipReason::ExcludedNamespace),
        Selection::Group { name, .. } => Some(name),
        _ => None,
    };
    if has_mirror_annotation(pod) && ctx.requester.node_name().is_some() {
        return skip(out, SkipReason::MirrorPod);
    }
    if pod.spec.is_none() {
        return skip(out, SkipReason::NotApplicable("the pod has no spec".to_owned()));
    }
    let mut found = Vec::new();
    for reservation in reservations(config).filter(|r| Some(r.name) != own) {
        let mut intrusions = match intrusions(reservation, pod, old, ctx, binding) {
            Ok(found) => found,
            Err(reason) if reservation.reserve.mode == Mode::Enforce => {
                let mut error = Outcome::undecidable(Webhook::ValidateReservation, reason);
                error.group = Some(reservation.name.to_owned());
                error.mode = Some(Mode::Enforce);
                return error;
            }
            Err(reason) => {
                out.summary = truncate_chars(format!("{reason} (not checked)"), MAX_SUMMARY_CHARS);
                Vec::new()
            }
        };
        let exempt = exemption(config, reservation.reserve, ns, pod, ctx);
        for intrusion in &mut intrusions {
            intrusion.exempt = exempt;
        }
        found.extend(intrusions);
    }
    decide_found(out, found, binding)
}

/// The decision from the intrusions found: the first enforce one (else the first) names the
/// group and mode; enforce denies, dryRun and warn would deny.
fn decide_found(mut out: Outcome, found: Vec<Intrusion>, binding: bool) -> Outcome {
    let refused: Vec<&Intrusion> = found.iter().filter(|i| i.exempt.is_none()).collect();
    let lead = refused
        .iter()
        .find(|i| i.mode == Mode::Enforce)
        .or(refused.first())
        .copied()
        .or(found.first());
    if let Some(lead) = lead {
        out.group = Some(lead.group.clone());
        out.mode = Some(lead.mode);
    }
    if refused.is_empty() {
        if !found.is_empty() {
            out.summary = truncate_chars(
                format!(
                    "exempt: {}",
                    found.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
                ),
                MAX_SUMMARY_CHARS,
            );
        } else if out.summary.is_empty() {
            out.summary = "no reservation intruded".to_owned();
        }
        out.reservation = found;
        return out;
    }
    let enforce = refused.iter().any(|i| i.mode == Mode::Enforce);
    let denying: Vec<String> = refused
        .iter()
        .filter(|i| !enforce || i.mode == Mode::Enforce)
        .map(ToString::to_string)
        .collect();
    let message = if binding {
        format!(
            "pod-director: the pod may not be bound to another group's reserved nodes: {}; only a scheduler that \
             honours the pool's taints (system:kube-scheduler, or one in trustedSchedulers) binds pods there; \
             leave the pod to the scheduler, or ask the cluster admin to add your namespace or service account to \
             the group's reserve.allow",
            denying.join("; ")
        )
    } else {
        format!(
            "pod-director: the pod may not run on another group's reserved nodes: {}; remove the toleration or \
             spec.nodeName, or ask the cluster admin to add your namespace or service account to the group's \
             reserve.allow",
            denying.join("; ")
        )
    };
    out.deny(enforce, message);
    out.summary = truncate_chars(
        format!(
            "{}{}",
            if enforce {
                "reserved: "
            } else {
                "would deny, reserved: "
            },
            denying.join("; ")
        ),
        MAX_SUMMARY_CHARS,
    );
    let warn = refused.iter().any(|i| i.mode == Mode::Warn);
    if warn && !enforce {
        out.warning = Some(truncate_chars(
            format!("pod-director: {}", out.summary),
            MAX_SUMMARY_CHARS,
        ));
    }
    out.reservation = found;
    out
}

/// Valid settings that probably do not do what was meant, for `check-config` and start-up
/// logs: a reservation with no taint to reserve, another group whose own tolerations intrude.
pub fn warnings(config: &Config) -> Vec<String> {
    let mut out = Vec::new();
    for reservation in reservations(config) {
        if reserving_tolerations(reservation.group).next().is_none() {
            out.push(format!(
                "groups.{}.reserve: the group has no NoSchedule/NoExecute toleration, so no taint is reserved and only \
                 pods naming a pool node in spec.nodeName are decided; taint the pool (e.g. dedicated={}:NoSchedule) \
                 and add the toleration to the group",
                reservation.name, reservation.name
            ));
        }
        let allowed = &reservation.reserve.allow.placement_groups;
        let others = config
            .groups
            .iter()
            .filter(|(n, _)| n.as_str() != reservation.name && !allowed.contains(n));
        for (other, group) in others {
            let placements = std::iter::once((format!("groups.{other}"), &group.tolerations)).chain(
                group
                    .alternatives
                    .iter()
                    .map(|(name, alt)| (format!("groups.{other}.alternatives.{name}"), &alt.tolerations)),
            );
            for (at, tolerations) in placements {
                let overlap = tolerations.iter().find_map(|t| {
                    reserving_tolerations(reservation.group)
                        .find_map(|g| shared_taint(t, g))
                        .map(|taint| (describe(t), taint.describe()))
                });
                if let Some((toleration, taint)) = overlap {
                    out.push(format!(
                        "{at}.tolerations: {toleration:?} tolerates {taint}, which group {:?} reserves: the pods of \
                         group {other:?} placed so are intruders there (denied once that reservation is in enforce); \
                         narrow the toleration, or add {other:?} to groups.{}.reserve.allow.placementGroups",
                        reservation.name, reservation.name
                    ));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
