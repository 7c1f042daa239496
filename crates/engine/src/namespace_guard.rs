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

use std::collections::BTreeMap;

use crate::config::{Config, Mode, NamespaceGuard};
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

/// The guard's decision for one namespace CREATE or UPDATE.
pub fn decide(config: &Config, write: &NamespaceWrite<'_>, ctx: &Context) -> Outcome {
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
