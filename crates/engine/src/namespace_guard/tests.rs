use std::collections::BTreeMap;

use super::*;
use crate::config::Config;
use crate::testing::assert_contains;

fn config(guard: &str) -> Config {
    crate::testing::config(&format!("{guard}\ngroups: {{ci: {{}}, gpu: {{}}}}"))
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

/// No annotation.
const NONE: &BTreeMap<String, String> = &BTreeMap::new();

fn decide_change(config: &Config, old: Option<Option<&str>>, new: Option<&str>, ctx: &Context) -> Outcome {
    let old = old.map(labels);
    let new = labels(new);
    decide(
        config,
        &NamespaceWrite {
            name: "team-a",
            old_labels: old.as_ref(),
            labels: &new,
            old_annotations: old.as_ref().map(|_| NONE),
            annotations: NONE,
        },
        ctx,
    )
}

#[test]
fn the_default_guard_follows_dry_run_groups_in_dry_run_and_allows_system_masters() {
    let c = config("");
    assert_eq!(c.namespace_guard.mode, None);
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
            old_annotations: None,
            annotations: NONE,
        },
        &as_user("alice", &[]),
    );
    assert_eq!(out.skip_reason, Some(SkipReason::ExcludedNamespace));
    assert!(out.allowed());
}

#[test]
fn the_denial_names_the_change_the_label_and_who_may_make_it_as_the_docs_show() {
    let c = config("namespaceGuard: {mode: enforce}");
    let old = labels(Some("ci"));
    let new = labels(Some("gpu"));
    let out = decide(
        &c,
        &NamespaceWrite {
            name: "team-a",
            old_labels: Some(&old),
            labels: &new,
            old_annotations: Some(NONE),
            annotations: NONE,
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
    let page = "docs/src/namespace-guard.md";
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."); // crates/engine
    let docs = std::fs::read_to_string(repo.join(page)).unwrap();
    let message = out.message.unwrap_or_default();
    assert!(
        docs.lines().any(|line| line == message),
        "{page} shows the denial as the guard writes it:\n{message}"
    );
}

/// ci in enforce, gpu and web in dryRun / warn; `default` names the defaultGroup, if any.
fn mixed(guard: &str, default: Option<&str>) -> Config {
    let default = default.map(|d| format!("defaultGroup: {d}\n")).unwrap_or_default();
    crate::testing::config(&format!(
        "{guard}\n{default}groups: {{ci: {{mode: enforce}}, gpu: {{mode: dryRun}}, web: {{mode: warn}}}}"
    ))
}

#[test]
fn without_a_mode_the_guard_enforces_every_change_into_or_out_of_an_enforce_group() {
    let alice = as_user("alice", &["system:authenticated"]);
    let c = mixed("", None);
    for (old, new) in [
        (None, Some("ci")),
        (Some(None), Some("ci")),
        (Some(Some("ci")), Some("gpu")),
        (Some(Some("gpu")), Some("ci")),
        (Some(Some("ci")), None),
        (Some(Some("ci")), Some("undefined")),
    ] {
        let out = decide_change(&c, old, new, &alice);
        assert_eq!(
            (out.decision, out.mode, out.allowed()),
            (Decision::Denied, Some(Mode::Enforce), false),
            "{old:?} -> {new:?}"
        );
    }
    // Among groups that are not enforced (and no group), the guard observes.
    for (old, new) in [
        (Some(Some("gpu")), Some("web")),
        (Some(Some("gpu")), None),
        (Some(None), Some("web")),
        (None, Some("gpu")),
        (Some(Some("web")), Some("undefined")),
    ] {
        let out = decide_change(&c, old, new, &alice);
        assert_eq!(
            (out.decision, out.mode, out.allowed()),
            (Decision::WouldDeny, Some(Mode::DryRun), true),
            "{old:?} -> {new:?}"
        );
    }
}

#[test]
fn without_a_label_a_namespace_is_in_the_default_group_and_leaving_it_is_decided_by_its_mode() {
    let alice = as_user("alice", &["system:authenticated"]);
    let c = mixed("", Some("ci"));
    // Unlabelled = ci (enforce): labelling it for gpu leaves ci.
    let out = decide_change(&c, Some(None), Some("gpu"), &alice);
    assert_eq!((out.decision, out.mode), (Decision::Denied, Some(Mode::Enforce)));
    // Creating a namespace with a gpu label never was in ci.
    let out = decide_change(&c, None, Some("gpu"), &alice);
    assert_eq!((out.decision, out.mode), (Decision::WouldDeny, Some(Mode::DryRun)));
    // Removing gpu's label puts the namespace in ci.
    let out = decide_change(&c, Some(Some("gpu")), None, &alice);
    assert_eq!((out.decision, out.mode), (Decision::Denied, Some(Mode::Enforce)));
    let c = mixed("", Some("gpu"));
    let out = decide_change(&c, Some(Some("web")), None, &alice);
    assert_eq!((out.decision, out.mode), (Decision::WouldDeny, Some(Mode::DryRun)));
}

#[test]
fn an_explicit_guard_mode_overrides_the_groups() {
    let alice = as_user("alice", &["system:authenticated"]);
    let c = mixed("namespaceGuard: {mode: dryRun}", None);
    let out = decide_change(&c, Some(Some("ci")), Some("gpu"), &alice);
    assert_eq!(
        (out.decision, out.mode, out.allowed()),
        (Decision::WouldDeny, Some(Mode::DryRun), true)
    );
    let c = mixed("namespaceGuard: {mode: enforce}", None);
    let out = decide_change(&c, Some(Some("gpu")), Some("web"), &alice);
    assert_eq!((out.decision, out.mode), (Decision::Denied, Some(Mode::Enforce)));
    assert_eq!(mode_of_group(&c, Some("gpu")), Mode::Enforce);
    assert_eq!(mode_of_group(&mixed("", None), Some("gpu")), Mode::DryRun);
    assert_eq!(mode_of_group(&mixed("", None), Some("ci")), Mode::Enforce);
}

fn annotated(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

/// A tenant's UPDATE of namespace team-a from `old` to `new` annotations (the group label unchanged).
fn annotation_write(
    config: &Config,
    old: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
    ctx: &Context,
) -> Outcome {
    let labels = labels(Some("ci"));
    decide(
        config,
        &NamespaceWrite {
            name: "team-a",
            old_labels: Some(&labels),
            labels: &labels,
            old_annotations: Some(old),
            annotations: new,
        },
        ctx,
    )
}

#[test]
fn a_tenant_cannot_add_change_or_remove_an_in_tree_annotation_in_enforce() {
    let c = config("inTreePlugins: {mode: enforce}");
    let tenant = as_user("alice", &["system:authenticated"]);
    let key = pod_director_engine_key();
    let selector = annotated(&[(key, "pool=team")]);
    let other = annotated(&[(key, "pool=other")]);
    let empty = BTreeMap::new();
    for (old, new, what) in [
        (&empty, &selector, "set annotation"),
        (&selector, &other, "change annotation"),
        (&selector, &empty, "remove annotation"),
    ] {
        let out = annotation_write(&c, old, new, &tenant);
        assert_eq!(out.decision, Decision::Denied, "{what}");
        assert_contains(out.message.as_deref().unwrap_or_default(), what);
        assert_contains(out.message.as_deref().unwrap_or_default(), key);
    }
    let unrelated = annotated(&[(key, "pool=team"), ("example.com/note", "x")]);
    assert_eq!(
        annotation_write(&c, &selector, &unrelated, &tenant).decision,
        Decision::Noop,
        "other annotations are free"
    );
    let admin = as_user("root", &["system:masters"]);
    assert_eq!(annotation_write(&c, &selector, &other, &admin).decision, Decision::Noop);
}

#[test]
fn in_tree_annotations_are_guarded_in_the_section_s_mode_and_not_without_it() {
    let tenant = as_user("alice", &[]);
    let key = pod_director_engine_key();
    let (old, new) = (BTreeMap::new(), annotated(&[(key, "")]));
    let dry = config("inTreePlugins: {mode: dryRun}");
    let out = annotation_write(&dry, &old, &new, &tenant);
    assert_eq!(out.decision, Decision::WouldDeny);
    assert!(out.allowed());
    let off = config("");
    assert_eq!(annotation_write(&off, &old, &new, &tenant).decision, Decision::Noop);
    let guard_mode = config("inTreePlugins: {mode: dryRun}\nnamespaceGuard: {mode: enforce}");
    assert_eq!(
        annotation_write(&guard_mode, &old, &new, &tenant).decision,
        Decision::Denied,
        "namespaceGuard.mode wins"
    );
}

fn pod_director_engine_key() -> &'static str {
    crate::in_tree::NODE_SELECTOR_ANNOTATION
}
