use std::collections::BTreeMap;

use super::*;
use crate::config::Config;

fn config(guard: &str) -> Config {
    crate::support::config(&format!("{guard}\ngroups: {{ci: {{}}, gpu: {{}}}}"))
}

fn labels(group: Option<&str>) -> BTreeMap<String, String> {
    group
        .map(|g| BTreeMap::from([("pod-director/group".to_owned(), g.to_owned())]))
        .unwrap_or_default()
}

fn as_user(username: &str, groups: &[&str]) -> Context<'static> {
    Context {
        requester: Requester::new(username, groups),
        nodes: None,
    }
}

fn decide_change(config: &Config, old: Option<Option<&str>>, new: Option<&str>, ctx: &Context) -> Outcome {
    let old = old.map(labels);
    let new = labels(new);
    decide(
        config,
        &NamespaceWrite {
            name: "team-a",
            old_labels: old.as_ref(),
            labels: &new,
        },
        ctx,
    )
}

#[test]
fn the_default_guard_is_dry_run_and_allows_system_masters() {
    let c = config("");
    assert_eq!(c.namespace_guard.mode, Mode::DryRun);
    let admin = as_user("kubernetes-admin", &["system:masters", "system:authenticated"]);
    let out = decide_change(&c, Some(Some("ci")), Some("gpu"), &admin);
    assert_eq!((out.decision, out.allowed()), (Decision::Noop, true));
    let out = decide_change(&c, Some(Some("ci")), Some("gpu"), &as_user("alice", &[]));
    assert_eq!((out.decision, out.allowed()), (Decision::WouldDeny, true));
    assert_eq!(out.warning, None, "dryRun does not warn the client");
    assert_eq!(out.group.as_deref(), Some("gpu"));
    assert_eq!(out.mode, Some(Mode::DryRun));
}

#[test]
fn every_change_of_the_label_by_a_tenant_is_denied_in_enforce() {
    let c = config("namespaceGuard: {mode: enforce}");
    let alice = as_user("alice", &["system:authenticated"]);
    for (old, new) in [
        (None, Some("ci")),
        (Some(None), Some("ci")),
        (Some(Some("ci")), Some("gpu")),
        (Some(Some("ci")), None),
        (Some(Some("ci")), Some("undefined")),
    ] {
        let out = decide_change(&c, old, new, &alice);
        assert_eq!(
            (out.decision, out.allowed()),
            (Decision::Denied, false),
            "{old:?} -> {new:?}"
        );
        let message = out.message.unwrap_or_default();
        assert!(
            message.contains("pod-director/group") && message.contains("system:masters"),
            "{message}"
        );
        assert_eq!(out.violations.len(), 1);
        assert!(out.summary.chars().count() <= MAX_SUMMARY_CHARS);
    }
}

#[test]
fn a_write_that_keeps_the_label_is_never_denied() {
    let c = config("namespaceGuard: {mode: enforce}");
    let alice = as_user("alice", &[]);
    for (old, new) in [(Some(Some("ci")), Some("ci")), (Some(None), None), (None, None)] {
        let out = decide_change(&c, old, new, &alice);
        assert_eq!(
            (out.decision, out.allowed()),
            (Decision::Noop, true),
            "{old:?} -> {new:?}"
        );
    }
}

#[test]
fn allowed_users_groups_and_service_accounts_may_change_it() {
    let c = config(
        "namespaceGuard: {mode: enforce, allowedUsers: [bob], allowedGroups: [platform], \
         allowedServiceAccounts: [argocd/argocd-application-controller]}",
    );
    for ctx in [
        as_user("bob", &[]),
        as_user("carol", &["platform"]),
        as_user("system:serviceaccount:argocd:argocd-application-controller", &[]),
    ] {
        assert!(
            decide_change(&c, Some(Some("ci")), Some("gpu"), &ctx).allowed(),
            "{:?}",
            ctx.requester
        );
    }
    for ctx in [
        as_user("kubernetes-admin", &["system:masters"]),
        as_user("system:serviceaccount:argocd:other", &["system:serviceaccounts:argocd"]),
        as_user("bobby", &["platform-team"]),
        Context::offline(),
    ] {
        assert!(
            !decide_change(&c, Some(Some("ci")), Some("gpu"), &ctx).allowed(),
            "{:?}",
            ctx.requester
        );
    }
}

#[test]
fn warn_mode_admits_with_a_warning() {
    let c = config("namespaceGuard: {mode: warn}");
    let out = decide_change(&c, Some(Some("ci")), None, &as_user("alice", &[]));
    assert_eq!((out.decision, out.allowed()), (Decision::WouldDeny, true));
    let warning = out.warning.unwrap_or_default();
    assert!(
        warning.starts_with("pod-director namespaceGuard: would deny: remove label"),
        "{warning}"
    );
    assert!(warning.chars().count() <= MAX_SUMMARY_CHARS);
}

#[test]
fn excluded_namespaces_are_not_guarded() {
    let c = config("namespaceGuard: {mode: enforce}");
    let new = labels(Some("ci"));
    let out = decide(
        &c,
        &NamespaceWrite {
            name: "kube-system",
            old_labels: None,
            labels: &new,
        },
        &as_user("alice", &[]),
    );
    assert_eq!(out.skip_reason, Some(SkipReason::ExcludedNamespace));
    assert!(out.allowed());
}

#[test]
fn the_denial_names_the_change_the_label_and_who_may_make_it_as_the_readme_shows() {
    let c = config("namespaceGuard: {mode: enforce}");
    let old = labels(Some("ci"));
    let new = labels(Some("gpu"));
    let out = decide(
        &c,
        &NamespaceWrite {
            name: "team-a",
            old_labels: Some(&old),
            labels: &new,
        },
        &as_user("alice", &["system:authenticated"]),
    );
    assert_eq!(
        out.message.as_deref(),
        Some(
            "pod-director: \"alice\" (groups: system:authenticated) may not change label pod-director/group from \"ci\" \
             to \"gpu\" of namespace \"team-a\": the label chooses the placement group of the namespace's pods. Only \
             members of system:masters may change it (namespaceGuard); leave the label as it is, or ask one of them to \
             change it"
        )
    );
}
