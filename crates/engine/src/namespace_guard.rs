//! The namespace label guard (`/validate-namespace`): who may set, change or
//! remove a namespace's group label. Pure code, like the placement engine.
//!
//! The group label decides where a namespace's pods may run, so changing it is
//! a placement decision: a tenant who may patch their own namespace must not
//! move it to another group, out of its group, or to an undefined group. Only
//! the requesters `namespaceGuard` allows may (by username, group, or service
//! account, as `request.userInfo` names them). A namespace write that leaves
//! the label as it was is never denied. Its mode follows the groups unless
//! `namespaceGuard.mode` sets one: a change into or out of a group in enforce is
//! decided in enforce, a change among dryRun/warn groups in dryRun (`would_deny`
//! reported, the namespace admitted). Writes through the `status` and `finalize`
//! subresources are decided the same way: the API server persists their labels.
//!
//! While `inTreePlugins` is set, the in-tree plugins' three annotations ([`in_tree::ANNOTATIONS`])
//! are guarded the same way, by the same requesters: they choose the nodes and tolerations of the
//! namespace's pods as the label does. Adding, changing or removing one is decided in
//! `namespaceGuard.mode` when it is set, else in `inTreePlugins.mode`.

use std::collections::BTreeMap;

use crate::config::{Config, Mode, NamespaceGuard};
use crate::in_tree;
use crate::placement::{
    Context, Decision, MAX_SUMMARY_CHARS, Outcome, Requester, SkipReason, Violation, Webhook, truncate_chars,
};

/// The namespace being created or updated, as far as the guard cares.
#[derive(Debug, Clone, Copy)]
pub struct NamespaceWrite<'a> {
    pub name: &'a str,
    /// The labels before the write (UPDATE); `None` on CREATE.
    pub old_labels: Option<&'a BTreeMap<String, String>>,
    pub labels: &'a BTreeMap<String, String>,
    /// The annotations before the write (UPDATE); `None` on CREATE (only the in-tree plugins'
    /// are read).
    pub old_annotations: Option<&'a BTreeMap<String, String>>,
    pub annotations: &'a BTreeMap<String, String>,
}

/// How a write changes the group label.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelChange<'a> {
    Added(&'a str),
    Changed(&'a str, &'a str),
    Removed(&'a str),
}

impl LabelChange<'_> {
    fn describe(&self, label: &str) -> String {
        match self {
            LabelChange::Added(new) => format!("set label {label}={new}"),
            LabelChange::Changed(old, new) => format!("change label {label} from {old:?} to {new:?}"),
            LabelChange::Removed(old) => format!("remove label {label} (was {old:?})"),
        }
    }
}

/// The mode a write is decided in: `namespaceGuard.mode` when it is set; otherwise
/// the groups' — enforce when the write takes the namespace into or out of a group in
/// enforce, dryRun when it moves among groups in dryRun or warn (or none).
///
/// `old` is the label before an UPDATE (`Some(None)`: there was none), `None` on
/// CREATE; `new` the label after. Without a label a namespace is in `defaultGroup`.
pub(crate) fn mode_for(config: &Config, old: Option<Option<&str>>, new: Option<&str>) -> Mode {
    if let Some(mode) = config.namespace_guard.mode {
        return mode;
    }
    let enforced = |label: Option<&str>| {
        label
            .or(config.default_group.as_deref())
            .and_then(|name| config.groups.get(name))
            .is_some_and(|group| config.mode_of(group) == Mode::Enforce)
    };
    if old.is_some_and(enforced) || enforced(new) {
        Mode::Enforce
    } else {
        Mode::DryRun
    }
}

/// The mode a namespace of `group` (a label value; `None`: no label) is decided in when its
/// label changes to one outside enforce — for metrics and the audit, which look per group.
pub fn mode_of_group(config: &Config, group: Option<&str>) -> Mode {
    mode_for(config, Some(group), None)
}

/// Whether the guard lets this requester change group labels.
pub(crate) fn is_allowed(guard: &NamespaceGuard, requester: &Requester) -> bool {
    if !requester.is_known() {
        return false;
    }
    guard.allowed_users.contains(&requester.username)
        || guard.allowed_groups.iter().any(|g| requester.in_group(g))
        || guard.service_account_usernames().any(|u| u == requester.username)
}

/// Who may change the label, for denial messages.
fn who_may(guard: &NamespaceGuard) -> String {
    let mut parts = Vec::new();
    if !guard.allowed_users.is_empty() {
        parts.push(format!("users {}", guard.allowed_users.join(", ")));
    }
    if !guard.allowed_groups.is_empty() {
        parts.push(format!("members of {}", guard.allowed_groups.join(", ")));
    }
    if !guard.allowed_service_accounts.is_empty() {
        parts.push(format!(
            "service accounts {}",
            guard.allowed_service_accounts.join(", ")
        ));
    }
    if parts.is_empty() {
        "nobody".to_owned()
    } else {
        parts.join("; ")
    }
}

/// How strongly an outcome refuses: denied, would deny, or not.
fn refusal_rank(out: &Outcome) -> u8 {
    match out.decision {
        Decision::Denied => 2,
        Decision::WouldDeny => 1,
        _ => 0,
    }
}

/// The guard's decision for one namespace CREATE or UPDATE: the group label's, unless the change
/// of an in-tree annotation is refused more strongly.
pub fn decide(config: &Config, write: &NamespaceWrite<'_>, ctx: &Context) -> Outcome {
    let label = decide_label(config, write, ctx);
    match decide_annotations(config, write, ctx) {
        Some(annotations) if refusal_rank(&annotations) > refusal_rank(&label) => annotations,
        _ => label,
    }
}

/// `/validate-in-tree`'s decision of a namespace write: the guard of the in-tree plugins'
/// annotations alone (its entry sees every namespace, labelled or not, while `inTreePlugins` is set).
pub(crate) fn decide_in_tree(config: &Config, write: &NamespaceWrite<'_>, ctx: &Context) -> Outcome {
    let mut out = decide_annotations(config, write, ctx).unwrap_or_else(|| {
        let mut out = Outcome::new(Webhook::ValidateInTree, Decision::Noop);
        out.summary = "no in-tree annotation changed".to_owned();
        out
    });
    out.webhook = Webhook::ValidateInTree;
    out
}

/// The in-tree plugins' annotations a write adds, changes or removes, each described.
fn annotation_changes(write: &NamespaceWrite<'_>) -> Vec<String> {
    in_tree::ANNOTATIONS
        .iter()
        .filter_map(|key| {
            let old = write.old_annotations.and_then(|a| a.get(*key));
            match (old, write.annotations.get(*key)) {
                (None, Some(new)) => Some(format!("set annotation {key}={new:?}")),
                (Some(old), Some(new)) if old != new => {
                    Some(format!("change annotation {key} from {old:?} to {new:?}"))
                }
                (Some(old), None) => Some(format!("remove annotation {key} (was {old:?})")),
                _ => None,
            }
        })
        .collect()
}

/// The guard's decision of the in-tree annotations a write changes, while `inTreePlugins` is
/// set: `None` when it changes none (or is not guarded).
fn decide_annotations(config: &Config, write: &NamespaceWrite<'_>, ctx: &Context) -> Option<Outcome> {
    let section = config.in_tree_plugins.as_ref()?;
    if config.excluded_namespaces.iter().any(|n| n == write.name) {
        return None;
    }
    let changes = annotation_changes(write);
    if changes.is_empty() {
        return None;
    }
    let guard = &config.namespace_guard;
    let mode = guard.mode.unwrap_or(section.mode);
    let mut out = Outcome::new(Webhook::ValidateNamespace, Decision::Noop);
    out.mode = Some(mode);
    let requester = &ctx.requester;
    let what = changes.join(", ");
    if is_allowed(guard, requester) {
        out.summary = truncate_chars(
            format!("{what}: allowed for {}", requester.describe()),
            MAX_SUMMARY_CHARS,
        );
        return Some(out);
    }
    let enforce = mode == Mode::Enforce;
    out.violations = changes
        .iter()
        .map(|change| Violation {
            field: "metadata.annotations".to_owned(),
            message: format!("{change}: not allowed for {}", requester.describe()),
        })
        .collect();
    out.deny(
        enforce,
        format!(
            "pod-director: {} may not {what} of namespace {:?}: the in-tree plugins' annotations choose the nodes \
             and tolerations of the namespace's pods. Only {} may change them (namespaceGuard)",
            requester.describe(),
            write.name,
            who_may(guard)
        ),
    );
    let verb = if enforce { "denied: " } else { "would deny: " };
    out.summary = truncate_chars(
        format!("{verb}{what}: not allowed for {}", requester.describe()),
        MAX_SUMMARY_CHARS,
    );
    if mode == Mode::Warn {
        out.warning = Some(truncate_chars(
            format!("pod-director namespaceGuard: {}", out.summary),
            MAX_SUMMARY_CHARS,
        ));
    }
    Some(out)
}

/// The guard's decision of the group label a write sets, changes or removes.
fn decide_label(config: &Config, write: &NamespaceWrite<'_>, ctx: &Context) -> Outcome {
    let mut out = Outcome::new(Webhook::ValidateNamespace, Decision::Noop);
    if config.excluded_namespaces.iter().any(|n| n == write.name) {
        out.decision = Decision::Skipped;
        out.summary = format!("skipped: {}", SkipReason::ExcludedNamespace);
        out.skip_reason = Some(SkipReason::ExcludedNamespace);
        return out;
    }
    let label = config.namespace_label.as_str();
    let old = write.old_labels.and_then(|l| l.get(label)).map(String::as_str);
    let new = write.labels.get(label).map(String::as_str);
    let guard = &config.namespace_guard;
    let mode = mode_for(config, write.old_labels.map(|_| old), new);
    out.group = new.or(old).map(str::to_owned);
    out.mode = Some(mode);
    let change = match (old, new) {
        (None, Some(new)) => LabelChange::Added(new),
        (Some(old), Some(new)) if old != new => LabelChange::Changed(old, new),
        (Some(old), None) => LabelChange::Removed(old),
        _ => {
            out.summary = match new {
                Some(value) => format!("group label {label}={value} unchanged"),
                None => format!("no group label {label}"),
            };
            return out;
        }
    };
    let undefined = new.filter(|g| !config.groups.contains_key(*g));
    let what = change.describe(label);
    let requester = &ctx.requester;
    if is_allowed(guard, requester) {
        out.summary = truncate_chars(
            format!("{what}: allowed for {}", requester.describe()),
            MAX_SUMMARY_CHARS,
        );
        if let Some(group) = undefined {
            out.warning = Some(truncate_chars(
                format!("pod-director: group {group:?} is not defined in pod-director's config (unknownGroup applies)"),
                MAX_SUMMARY_CHARS,
            ));
        }
        return out;
    }
    let enforce = mode == Mode::Enforce;
    let undefined_note = undefined
        .map(|g| format!(", a group pod-director's config does not define ({g:?})"))
        .unwrap_or_default();
    out.violations = vec![Violation {
        field: format!("metadata.labels[{label:?}]"),
        message: format!("{what}{undefined_note}: not allowed for {}", requester.describe()),
    }];
    out.deny(
        enforce,
        format!(
            "pod-director: {} may not {what} of namespace {:?}{undefined_note}: the label chooses the placement \
             group of the namespace's pods. Only {} may change it (namespaceGuard); leave the label as it is, \
             or ask one of them to change it",
            requester.describe(),
            write.name,
            who_may(guard)
        ),
    );
    out.summary = truncate_chars(
        format!(
            "{}{what}: not allowed for {}",
            if enforce { "denied: " } else { "would deny: " },
            requester.describe()
        ),
        MAX_SUMMARY_CHARS,
    );
    if mode == Mode::Warn {
        out.warning = Some(truncate_chars(
            format!("pod-director namespaceGuard: {}", out.summary),
            MAX_SUMMARY_CHARS,
        ));
    }
    out
}

#[cfg(test)]
mod tests;
