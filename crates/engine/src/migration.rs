//! From the in-tree plugins to groups: the namespaces' annotations (and the plugins' files) turned
//! into groups, `defaultGroup` and the namespace labels that select them ([`migrate`]), with what
//! has no group equivalent said, never dropped silently; and the proof, pod by pod, of where the
//! two decide differently ([`compare`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Toleration;

use crate::config::{Config, Group, Mode, OnConflict};
use crate::decision::{self, Subject, View, Write};
use crate::in_tree::{
    DEFAULT_TOLERATIONS_ANNOTATION, NODE_SELECTOR_ANNOTATION, PluginFiles, TOLERATIONS_WHITELIST_ANNOTATION, admit,
    namespace_node_selector, namespace_tolerations,
};
use crate::placement::{Context, Decision, Namespace, Pod, Webhook};

/// The group of namespaces whose in-tree rules are the cluster's defaults (no annotation).
pub const DEFAULT_GROUP: &str = "in-tree-default";

/// What the in-tree plugins do that no group does: said with every migration.
pub const NO_GROUP_EQUIVALENT: [&str; 4] = [
    "PodTolerationRestriction adds node.kubernetes.io/memory-pressure:NoSchedule (Exists) to every pod but \
     BestEffort ones, in every namespace: no group does",
    "PodNodeSelector decides pod CREATEs only; a group's /validate also judges UPDATEs (only what an update \
     introduces can deny)",
    "PodTolerationRestriction merges tolerations and drops a pod's toleration that another one covers; a group \
     adds the tolerations a pod lacks and keeps the pod's",
    "the plugins also run in kube-system and every excluded namespace; groups never place pods there",
];

/// The groups equivalent to the namespaces' in-tree rules, as far as groups can express them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Migration {
    /// `in-tree-default` (the files' defaults, for namespaces without annotations) and
    /// `in-tree-N`, one per distinct selector and default tolerations.
    pub groups: BTreeMap<String, Group>,
    /// `in-tree-default`, when the files give a default selector or default tolerations.
    pub default_group: Option<String>,
    /// The group label each annotated namespace gets (`namespaceLabel`).
    pub labels: BTreeMap<String, String>,
    /// What was not migrated, each with where and why.
    pub not_migrated: Vec<String>,
}

/// The groups that place the pods of `namespaces` (name → annotations) as the in-tree plugins
/// with `files` would, in `mode`: one group per distinct node selector and default tolerations
/// (`onConflict: reject`, as PodNodeSelector refuses a conflict), the files' defaults as
/// `defaultGroup`; whitelists have no group equivalent and are listed in `not_migrated`.
pub fn migrate(files: &PluginFiles, namespaces: &BTreeMap<String, BTreeMap<String, String>>, mode: Mode) -> Migration {
    let group = |selector: BTreeMap<String, String>, tolerations: Vec<Toleration>| Group {
        mode: Some(mode),
        on_conflict: OnConflict::Reject,
        node_selector: selector,
        tolerations,
        ..Group::default()
    };
    let mut out = Migration::default();
    let defaults = group(
        files.cluster_default_node_selector.clone(),
        files.default_tolerations.clone(),
    );
    if !defaults.node_selector.is_empty() || !defaults.tolerations.is_empty() {
        out.groups.insert(DEFAULT_GROUP.to_owned(), defaults.clone());
        out.default_group = Some(DEFAULT_GROUP.to_owned());
    }
    let empty = BTreeMap::new();
    for (name, annotations) in namespaces {
        let ns = Namespace::new(name, &empty).with_annotations(annotations);
        let annotated = [NODE_SELECTOR_ANNOTATION, DEFAULT_TOLERATIONS_ANNOTATION]
            .iter()
            .any(|a| annotations.contains_key(*a));
        let rules = namespace_node_selector(files, &ns).and_then(|selector| {
            let tolerations = namespace_tolerations(&ns, DEFAULT_TOLERATIONS_ANNOTATION)?;
            Ok((
                selector,
                tolerations.unwrap_or_else(|| files.default_tolerations.clone()),
            ))
        });
        match rules {
            Err(reason) => out.not_migrated.push(format!(
                "namespace {name}: not migrated, its annotation does not parse ({reason}); the plugins refuse its pods"
            )),
            Ok(_) if !annotated => {}
            Ok((selector, tolerations)) => {
                let wanted = group(selector, tolerations);
                let existing = out.groups.iter().find(|(_, g)| **g == wanted).map(|(n, _)| n.clone());
                let group_name = existing.unwrap_or_else(|| {
                    let fresh = format!(
                        "in-tree-{}",
                        out.groups.len() + usize::from(out.default_group.is_none())
                    );
                    out.groups.insert(fresh.clone(), wanted);
                    fresh
                });
                out.labels.insert(name.clone(), group_name);
            }
        }
        if let Some(whitelist) = annotations.get(TOLERATIONS_WHITELIST_ANNOTATION) {
            out.not_migrated.push(format!(
                "namespace {name}: {TOLERATIONS_WHITELIST_ANNOTATION}={whitelist:?} has no group equivalent (a group \
                 adds tolerations, it does not limit them): keep inTreePlugins on for it"
            ));
        }
        if let Some(whitelist) = files.node_selector_whitelists.get(name).filter(|w| !w.is_empty()) {
            let pairs: Vec<String> = whitelist.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.not_migrated.push(format!(
                "namespace {name}: PodNodeSelector's whitelist {} has no group equivalent: keep inTreePlugins on for it",
                pairs.join(",")
            ));
        }
    }
    if !files.tolerations_whitelist.is_empty() {
        out.not_migrated.push(format!(
            "PodTolerationRestriction's cluster whitelist ({} tolerations) has no group equivalent: keep inTreePlugins \
             on for it",
            files.tolerations_whitelist.len()
        ));
    }
    out.not_migrated
        .extend(NO_GROUP_EQUIVALENT.iter().map(|s| (*s).to_owned()));
    out
}

impl Migration {
    /// `config` with the migrated groups instead of its own (and their `defaultGroup`), the
    /// in-tree plugins off: what the migration would run.
    pub fn config(&self, config: &Config) -> Config {
        let mut migrated = config.clone();
        migrated.groups = self.groups.clone();
        migrated.default_group = self.default_group.clone();
        migrated.in_tree_plugins = None;
        migrated
    }
}

/// Where the in-tree plugins and the migrated groups decide one pod differently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub field: &'static str,
    pub in_tree: String,
    pub groups: String,
}

/// How the in-tree plugins (with `files`, in enforce) and the migrated groups (in enforce) decide
/// the creation of `pod` in namespace `name` with `annotations`: every field where the pods they
/// admit differ, or where one refuses and the other does not. Empty: the same pod.
pub fn compare(
    files: &PluginFiles,
    migration: &Migration,
    migrated: &Config,
    (name, annotations): (&str, &BTreeMap<String, String>),
    pod: &Pod,
) -> Vec<Difference> {
    let empty = BTreeMap::new();
    let in_tree = admit(
        files,
        &Namespace::new(name, &empty).with_annotations(annotations),
        pod,
        None,
    )
    .map(|changes| changes.applied(pod));
    let mut enforced = migrated.clone();
    for group in enforced.groups.values_mut() {
        group.mode = Some(Mode::Enforce);
    }
    let labels: BTreeMap<String, String> = migration
        .labels
        .get(name)
        .map(|group| BTreeMap::from([(enforced.namespace_label.clone(), group.clone())]))
        .unwrap_or_default();
    let ns = Namespace::new(name, &labels);
    let context = Context::offline();
    let view = View {
        config: &enforced,
        namespace: &ns,
        context: &context,
    };
    let outcome = decision::decide(Webhook::Mutate, &Subject::Pod(Write::Create(pod)), &view);
    let groups = match outcome.decision {
        Decision::Denied => Err(outcome.message.unwrap_or_default()),
        Decision::Patched => Ok(decision::patched_pod(pod, &outcome.patch)),
        _ => Ok(pod.clone()),
    };
    match (in_tree, groups) {
        (Err(refusal), Ok(_)) => vec![Difference {
            field: "admission",
            in_tree: format!("refused: {refusal}"),
            groups: "admitted".to_owned(),
        }],
        (Ok(_), Err(message)) => vec![Difference {
            field: "admission",
            in_tree: "admitted".to_owned(),
            groups: format!("refused: {message}"),
        }],
        (Err(_), Err(_)) => Vec::new(),
        (Ok(a), Ok(b)) => {
            let spec = |p: &Pod| p.spec.clone().unwrap_or_default();
            let (a, b) = (spec(&a), spec(&b));
            let mut out = Vec::new();
            let selector = |s: &Option<BTreeMap<String, String>>| s.clone().unwrap_or_default();
            if selector(&a.node_selector) != selector(&b.node_selector) {
                out.push(Difference {
                    field: "nodeSelector",
                    in_tree: format!("{:?}", selector(&a.node_selector)),
                    groups: format!("{:?}", selector(&b.node_selector)),
                });
            }
            let sorted = |t: &Option<Vec<Toleration>>| {
                let mut list: Vec<String> = t
                    .iter()
                    .flatten()
                    .map(|t| serde_json::to_string(t).unwrap_or_default())
                    .collect();
                list.sort();
                list
            };
            if sorted(&a.tolerations) != sorted(&b.tolerations) {
                out.push(Difference {
                    field: "tolerations",
                    in_tree: sorted(&a.tolerations).join(", "),
                    groups: sorted(&b.tolerations).join(", "),
                });
            }
            out
        }
    }
}

#[cfg(test)]
mod tests;
