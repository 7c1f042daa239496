//! The in-tree admission plugins PodNodeSelector and PodTolerationRestriction, as kube-apiserver
//! v1.37.2 runs them (`plugin/pkg/admission/podnodeselector`, `.../podtolerationrestriction`,
//! `pkg/util/tolerations`, `apimachinery/pkg/labels`): the same inputs (the namespace's three
//! annotations, the plugins' files: [`PluginFiles`]), the same pod out, the same refusals.
//!
//! | plugin | operations | mutating phase ([`admit`]) | validating phase ([`validate`]) |
//! |---|---|---|---|
//! | PodNodeSelector | CREATE | the namespace's selector (annotation present, even empty; else `clusterDefaultNodeSelector`) merged into `nodeSelector`; a conflicting key refused; then its validation | a conflict refused again; `nodeSelector` within the namespace's whitelist when the file gives one |
//! | PodTolerationRestriction | CREATE, UPDATE | CREATE: the namespace's `defaultTolerations` (annotation present, even empty; else the file's `default`) merged; every pod but BestEffort: `node.kubernetes.io/memory-pressure:NoSchedule` (Exists) merged too; then its validation | a pod with tolerations held to the namespace's `tolerationsWhitelist` (annotation present, even empty; else the file's `whitelist`; empty: no check) |
//!
//! A merge keeps one toleration of any two where one tolerates all the other does (Go's
//! `MergeTolerations`, which may drop the pod's own redundant tolerations). Tolerations are
//! compared exactly as the plugins compare them: an empty operator is *not* `Equal` there (unlike
//! the groups' placement, [`crate::placement`]). Annotation JSON is read as Go's `encoding/json`
//! reads it (keys in any case, unknown keys ignored, `null` leaves a field as it was, `null` or
//! `[]` for the whole list is an empty list).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ResourceRequirements, Toleration};
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::config::{Config, InTreePlugins, Mode};
use crate::placement::{
    Decision, MAX_SUMMARY_CHARS, Namespace, Outcome, Pod, Selection, Webhook, select_group, truncate_chars,
};
pub use crate::plugin_config::PluginFiles;
use crate::syntax;

/// The rule's name (the audit's `rule`, reports, Events): the in-tree plugins' semantics.
pub const RULE: &str = "in-tree";

/// PodNodeSelector's annotation: the namespace's node selector, `k1=v1,k2=v2`.
pub const NODE_SELECTOR_ANNOTATION: &str = "scheduler.alpha.kubernetes.io/node-selector";
/// PodTolerationRestriction's annotation: tolerations (JSON) merged into the namespace's pods.
pub const DEFAULT_TOLERATIONS_ANNOTATION: &str = "scheduler.alpha.kubernetes.io/defaultTolerations";
/// PodTolerationRestriction's annotation: the tolerations (JSON) the namespace's pods may have.
pub const TOLERATIONS_WHITELIST_ANNOTATION: &str = "scheduler.alpha.kubernetes.io/tolerationsWhitelist";
/// The three annotations the plugins read (the namespace cache keeps these, and only these).
pub const ANNOTATIONS: [&str; 3] = [
    NODE_SELECTOR_ANNOTATION,
    DEFAULT_TOLERATIONS_ANNOTATION,
    TOLERATIONS_WHITELIST_ANNOTATION,
];

/// PodNodeSelector's refusal of a pod whose nodeSelector contradicts its namespace's.
pub const CONFLICT_MESSAGE: &str = "pod node label selector conflicts with its namespace node label selector";
/// PodNodeSelector's refusal of a pod whose nodeSelector leaves its namespace's whitelist.
pub const WHITELIST_MESSAGE: &str = "pod node label selector labels conflict with its namespace whitelist";
/// The taint key of the toleration PodTolerationRestriction gives every pod but BestEffort ones.
pub const MEMORY_PRESSURE_TAINT: &str = "node.kubernetes.io/memory-pressure";

named_enum! {
    /// The in-tree plugin a decision is taken for.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Plugin {
        PodNodeSelector => "PodNodeSelector",
        PodTolerationRestriction => "PodTolerationRestriction",
    }
}

/// A pod the plugins refuse: which plugin, and its message (the API server's, but for the
/// `pods "NAME" is forbidden: ` prefix it puts before PodNodeSelector's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub plugin: Plugin,
    pub message: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.plugin, self.message)
    }
}

/// What the plugins' mutating phase sets on the pod: the whole `nodeSelector` and the whole
/// `tolerations` list, each only when it changes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Changes {
    pub node_selector: Option<BTreeMap<String, String>>,
    pub tolerations: Option<Vec<Toleration>>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.node_selector.is_none() && self.tolerations.is_none()
    }

    /// The JSON Patch that makes them (each field set whole, `add` replacing a present one).
    pub fn patch(&self) -> json_patch::Patch {
        let mut ops = Vec::new();
        let mut add = |field: &str, value: serde_json::Value| {
            ops.push(json_patch::PatchOperation::Add(json_patch::AddOperation {
                path: json_patch::jsonptr::PointerBuf::from_tokens(["spec", field]),
                value,
            }));
        };
        if let Some(selector) = &self.node_selector {
            add("nodeSelector", serde_json::json!(selector));
        }
        if let Some(tolerations) = &self.tolerations {
            add("tolerations", serde_json::to_value(tolerations).unwrap_or_default());
        }
        json_patch::Patch(ops)
    }

    /// The pod with the changes made (what the validating phase sees when nothing changes it after).
    pub fn applied(&self, pod: &Pod) -> Pod {
        let mut out = pod.clone();
        let spec = out.spec.get_or_insert_with(Default::default);
        if let Some(selector) = &self.node_selector {
            spec.node_selector = Some(selector.clone());
        }
        if let Some(tolerations) = &self.tolerations {
            spec.tolerations = Some(tolerations.clone());
        }
        out
    }
}

/// Both plugins' mutating phase (`Admit`, each ending with its own `Validate`) in the API server's
/// order, PodNodeSelector first: the changes, or the first refusal. `old` is the stored pod of an
/// UPDATE (`None`: a CREATE).
pub fn admit(files: &PluginFiles, ns: &Namespace<'_>, pod: &Pod, old: Option<&Pod>) -> Result<Changes, Refusal> {
    let create = old.is_none();
    let spec = pod.spec.clone().unwrap_or_default();
    let mut changes = Changes::default();
    let mut selector = spec.node_selector.clone().unwrap_or_default();
    if create {
        let namespace = namespace_node_selector(files, ns).map_err(node_selector_refusal)?;
        if conflicts(&namespace, &selector) {
            return Err(node_selector_refusal(CONFLICT_MESSAGE.to_owned()));
        }
        let merged: BTreeMap<String, String> = namespace.into_iter().chain(selector.clone()).collect();
        if merged != selector {
            changes.node_selector = Some(merged.clone());
        }
        selector = merged;
        validate_node_selector(files, ns, &selector)?;
    }
    let mut extra = Vec::new();
    if create {
        extra = namespace_tolerations(ns, DEFAULT_TOLERATIONS_ANNOTATION)
            .map_err(toleration_refusal)?
            .unwrap_or_else(|| files.default_tolerations.clone());
    }
    if !best_effort(pod) {
        extra.push(Toleration {
            key: Some(MEMORY_PRESSURE_TAINT.to_owned()),
            operator: Some("Exists".to_owned()),
            effect: Some("NoSchedule".to_owned()),
            ..Toleration::default()
        });
    }
    let own = spec.tolerations.clone().unwrap_or_default();
    let mut tolerations = own.clone();
    if !extra.is_empty() {
        tolerations = merge_tolerations(&own, &extra);
        if !same_list(&tolerations, &own) {
            changes.tolerations = Some(tolerations.clone());
        }
    }
    validate_tolerations(files, ns, &tolerations)?;
    Ok(changes)
}

/// Both plugins' validating phase (`Validate`) on the pod as it is admitted (after every mutating
/// webhook): the first refusal. `old` as for [`admit`].
pub fn validate(files: &PluginFiles, ns: &Namespace<'_>, pod: &Pod, old: Option<&Pod>) -> Result<(), Refusal> {
    let spec = pod.spec.clone().unwrap_or_default();
    if old.is_none() {
        let selector = spec.node_selector.unwrap_or_default();
        let namespace = namespace_node_selector(files, ns).map_err(node_selector_refusal)?;
        if conflicts(&namespace, &selector) {
            return Err(node_selector_refusal(CONFLICT_MESSAGE.to_owned()));
        }
        validate_node_selector(files, ns, &selector)?;
    }
    validate_tolerations(files, ns, &spec.tolerations.unwrap_or_default())
}

/// The node selector the namespace imposes: its annotation when present (even empty), else the
/// cluster default of PodNodeSelector's file. An annotation that does not parse refuses the pod.
pub fn namespace_node_selector(files: &PluginFiles, ns: &Namespace<'_>) -> Result<BTreeMap<String, String>, String> {
    match ns.annotations.get(NODE_SELECTOR_ANNOTATION) {
        Some(selector) => syntax::selector_labels(selector),
        None => Ok(files.cluster_default_node_selector.clone()),
    }
}

/// The tolerations of a namespace's `annotation` (JSON, read as Go's `encoding/json`): `None`
/// when the namespace does not have it (the file's list applies), an empty list when its value is
/// empty, `null` or `[]`.
pub fn namespace_tolerations(ns: &Namespace<'_>, annotation: &str) -> Result<Option<Vec<Toleration>>, String> {
    match ns.annotations.get(annotation).map(String::as_str) {
        None => Ok(None),
        Some("") => Ok(Some(Vec::new())),
        Some(json) => serde_json::from_str::<GoTolerations>(json)
            .map(|list| Some(list.0))
            .map_err(|e| format!("{annotation}: {e}")),
    }
}

fn node_selector_refusal(message: String) -> Refusal {
    Refusal {
        plugin: Plugin::PodNodeSelector,
        message,
    }
}

fn toleration_refusal(message: String) -> Refusal {
    Refusal {
        plugin: Plugin::PodTolerationRestriction,
        message,
    }
}

/// `labels.Conflicts`: a key both have, with different values.
fn conflicts(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> bool {
    a.iter().any(|(k, v)| b.get(k).is_some_and(|w| w != v))
}

/// PodNodeSelector's whitelist check: every key of the pod's selector in the namespace's whitelist
/// with the same value, when the file gives the namespace a non-empty whitelist.
fn validate_node_selector(
    files: &PluginFiles,
    ns: &Namespace<'_>,
    selector: &BTreeMap<String, String>,
) -> Result<(), Refusal> {
    let whitelist = files.node_selector_whitelists.get(ns.name);
    match whitelist {
        Some(whitelist) if !whitelist.is_empty() && selector.iter().any(|(k, v)| whitelist.get(k) != Some(v)) => {
            Err(node_selector_refusal(WHITELIST_MESSAGE.to_owned()))
        }
        _ => Ok(()),
    }
}

/// PodTolerationRestriction's whitelist check of a pod with tolerations: the namespace's
/// annotation when present (an empty one allows everything), else the file's whitelist.
fn validate_tolerations(files: &PluginFiles, ns: &Namespace<'_>, tolerations: &[Toleration]) -> Result<(), Refusal> {
    if tolerations.is_empty() {
        return Ok(());
    }
    let (whitelist, scope) =
        match namespace_tolerations(ns, TOLERATIONS_WHITELIST_ANNOTATION).map_err(toleration_refusal)? {
            Some(list) => (list, "namespace"),
            None => (files.tolerations_whitelist.clone(), "cluster"),
        };
    if verify_against_whitelist(tolerations, &whitelist) {
        return Ok(());
    }
    Err(toleration_refusal(format!(
        "pod tolerations (possibly merged with namespace default tolerations) conflict with its {scope} whitelist"
    )))
}

/// `tolerations.VerifyAgainstWhitelist`: every toleration within one of `whitelist`'s (always,
/// when either list is empty).
pub fn verify_against_whitelist(tolerations: &[Toleration], whitelist: &[Toleration]) -> bool {
    whitelist.is_empty() || tolerations.iter().all(|t| whitelist.iter().any(|w| is_superset(w, t)))
}

fn text(field: &Option<String>) -> &str {
    field.as_deref().unwrap_or("")
}

/// Go's `apiequality.Semantic.DeepEqual` of two tolerations (an absent string is the empty one).
fn deep_equal(a: &Toleration, b: &Toleration) -> bool {
    text(&a.key) == text(&b.key)
        && text(&a.operator) == text(&b.operator)
        && text(&a.value) == text(&b.value)
        && text(&a.effect) == text(&b.effect)
        && a.toleration_seconds == b.toleration_seconds
}

fn same_list(a: &[Toleration], b: &[Toleration]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| deep_equal(x, y) && x == y)
}

/// `isSuperset` of `pkg/util/tolerations`: whether `ss` tolerates everything `t` does, the
/// operators compared as written (an empty `t` operator is not `Equal`).
fn is_superset(ss: &Toleration, t: &Toleration) -> bool {
    if deep_equal(ss, t) {
        return true;
    }
    if text(&t.key) != text(&ss.key) && (!text(&ss.key).is_empty() || text(&ss.operator) != "Exists") {
        return false;
    }
    if text(&t.effect) != text(&ss.effect) && !text(&ss.effect).is_empty() {
        return false;
    }
    if text(&ss.effect) == "NoExecute"
        && let Some(limit) = ss.toleration_seconds
        && t.toleration_seconds.is_none_or(|seconds| seconds > limit)
    {
        return false;
    }
    match text(&ss.operator) {
        "Equal" | "" => text(&t.operator) == "Equal" && text(&t.value) == text(&ss.value),
        "Exists" => true,
        _ => false,
    }
}

/// `MergeTolerations` of `pkg/util/tolerations`: `first` then `second`, each toleration dropped
/// when one kept before it, or a different one after it, tolerates all it does.
fn merge_tolerations(first: &[Toleration], second: &[Toleration]) -> Vec<Toleration> {
    let all: Vec<&Toleration> = first.iter().chain(second).collect();
    let mut merged: Vec<Toleration> = Vec::new();
    for (i, t) in all.iter().enumerate() {
        if merged.iter().any(|kept| is_superset(kept, t)) {
            continue;
        }
        if all[i + 1..]
            .iter()
            .any(|later| !deep_equal(t, later) && is_superset(later, t))
        {
            continue;
        }
        merged.push((*t).clone());
    }
    merged
}

/// Whether the pod is BestEffort, as `qos.GetPodQOS` says: `status.qosClass` when set, else no
/// container (init or app) asks for or limits cpu or memory (the pod's own `resources` instead,
/// when they name cpu, memory or hugepages).
pub fn best_effort(pod: &Pod) -> bool {
    if let Some(class) = pod.status_qos_class.as_deref().filter(|c| !c.is_empty()) {
        return class == "BestEffort";
    }
    let Some(spec) = &pod.spec else { return true };
    if let Some(resources) = &spec.resources
        && pod_level_resources_set(resources)
    {
        return requirements_best_effort(resources);
    }
    // Every container (init and app) BestEffort; no container at all is BestEffort too.
    let default = ResourceRequirements::default();
    let mut containers = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter().flatten());
    containers.all(|c| requirements_best_effort(c.resources.as_ref().unwrap_or(&default)))
}

/// `IsPodLevelResourcesSet`: the pod's own requests or limits name cpu, memory or hugepages.
fn pod_level_resources_set(resources: &ResourceRequirements) -> bool {
    let names = resources
        .requests
        .iter()
        .flatten()
        .chain(resources.limits.iter().flatten());
    names
        .map(|(name, _)| name)
        .any(|name| name == "cpu" || name == "memory" || name.starts_with("hugepages-"))
}

/// Whether `requirementsQOS` says BestEffort: no requests and no limits, or cpu and memory each
/// with a zero request equal to its (zero) limit.
fn requirements_best_effort(resources: &ResourceRequirements) -> bool {
    let empty = |m: &Option<BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>| {
        m.as_ref().is_none_or(BTreeMap::is_empty)
    };
    if empty(&resources.requests) && empty(&resources.limits) {
        return true;
    }
    ["cpu", "memory"].iter().all(|name| {
        let amount = |m: &Option<BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>| {
            m.as_ref()
                .and_then(|m| m.get(*name))
                .map_or(Some(0.0), |q| quantity(&q.0))
        };
        // A quantity that does not parse is not BestEffort's zero (the API server refuses it later).
        amount(&resources.requests) == Some(0.0) && amount(&resources.limits) == Some(0.0)
    })
}

/// A Kubernetes quantity's value (`100m`, `1Gi`, `1e3`, `0.5`), `None` when it does not parse.
fn quantity(text: &str) -> Option<f64> {
    const BINARY: [(&str, i32); 6] = [("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40), ("Pi", 50), ("Ei", 60)];
    const DECIMAL: [(&str, i32); 9] = [
        ("n", -9),
        ("u", -6),
        ("m", -3),
        ("k", 3),
        ("M", 6),
        ("G", 9),
        ("T", 12),
        ("P", 15),
        ("E", 18),
    ];
    let number_ok = |n: &str| {
        let digits = n.strip_prefix(['+', '-']).unwrap_or(n);
        !digits.is_empty()
            && digits != "."
            && digits.chars().all(|c| c.is_ascii_digit() || c == '.')
            && digits.matches('.').count() <= 1
    };
    if let Some((number, power)) = BINARY.iter().find_map(|(s, p)| text.strip_suffix(s).map(|n| (n, *p))) {
        return number_ok(number)
            .then(|| number.parse::<f64>().ok())
            .flatten()
            .map(|n| n * f64::powi(2.0, power));
    }
    let (number, exponent) = match DECIMAL.iter().find_map(|(s, p)| text.strip_suffix(s).map(|n| (n, *p))) {
        Some(found) => found,
        None => match text.split_once(['e', 'E']) {
            Some((number, exponent)) => (number, exponent.parse::<i32>().ok()?),
            None => (text, 0),
        },
    };
    if !number_ok(number) {
        return None;
    }
    format!("{number}e{exponent}")
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite())
}

/// A toleration list decoded as Go's `encoding/json` decodes `[]v1.Toleration`.
struct GoTolerations(Vec<Toleration>);

impl<'de> Deserialize<'de> for GoTolerations {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct List;
        impl<'de> Visitor<'de> for List {
            type Value = GoTolerations;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of tolerations")
            }
            fn visit_unit<E: de::Error>(self) -> Result<GoTolerations, E> {
                Ok(GoTolerations(Vec::new()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<GoTolerations, A::Error> {
                let mut out = Vec::new();
                while let Some(item) = seq.next_element::<Option<GoToleration>>()? {
                    out.push(item.map(|t| t.0).unwrap_or_default());
                }
                Ok(GoTolerations(out))
            }
        }
        deserializer.deserialize_any(List)
    }
}

/// One toleration decoded as Go's `encoding/json` decodes `v1.Toleration`.
struct GoToleration(Toleration);

/// A JSON member's name as Go matches it to a field: case folded (`K` and `ſ` too).
fn go_fold(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            '\u{212A}' => 'k',
            '\u{017F}' => 's',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

impl<'de> Deserialize<'de> for GoToleration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct One;
        impl<'de> Visitor<'de> for One {
            type Value = GoToleration;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a toleration (an object)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<GoToleration, A::Error> {
                let mut t = Toleration::default();
                while let Some(name) = map.next_key::<String>()? {
                    let field = match go_fold(&name).as_str() {
                        "key" => &mut t.key,
                        "operator" => &mut t.operator,
                        "value" => &mut t.value,
                        "effect" => &mut t.effect,
                        "tolerationseconds" => {
                            t.toleration_seconds = map.next_value::<Option<i64>>()?;
                            continue;
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                            continue;
                        }
                    };
                    // `null` leaves a Go string as it was.
                    if let Some(value) = map.next_value::<Option<String>>()? {
                        *field = (!value.is_empty()).then_some(value);
                    }
                }
                Ok(GoToleration(t))
            }
        }
        deserializer.deserialize_any(One)
    }
}

/// A decision of `webhook` in `mode`, nothing decided yet, and whether it enforces.
fn started(webhook: Webhook, mode: Mode) -> (Outcome, bool) {
    let mut out = Outcome::new(webhook, Decision::Noop);
    out.mode = Some(mode);
    (out, mode == Mode::Enforce)
}

/// `/mutate-in-tree`'s decision: the plugins' mutating phase ([`admit`]) in `mode`: the patch
/// (applied in enforce, reported in dryRun and warn: the same bytes), or the refusal.
pub(crate) fn decide_mutate(
    mode: Mode,
    files: &PluginFiles,
    ns: &Namespace<'_>,
    pod: &Pod,
    old: Option<&Pod>,
) -> Outcome {
    let (mut out, enforce) = started(Webhook::MutateInTree, mode);
    match admit(files, ns, pod, old) {
        Err(refusal) => refuse(&mut out, enforce, &refusal),
        Ok(changes) if changes.is_empty() => out.summary = "compliant: nothing to change".to_owned(),
        Ok(changes) => {
            out.patch_with(enforce, changes.patch());
            let verb = if enforce { "" } else { "would " };
            out.summary = truncate_chars(format!("{verb}{}", describe(&changes)), MAX_SUMMARY_CHARS);
        }
    }
    out.warning = warning(mode, &out);
    out
}

/// `/validate-in-tree`'s decision: the plugins' validating phase ([`validate`]) on the pod as
/// admitted, in `mode`. In dryRun and warn the pod is judged as enforce would have it: with the
/// changes `/mutate-in-tree` would have made (a refusal of those is this decision's refusal too).
pub(crate) fn decide_validate(
    mode: Mode,
    files: &PluginFiles,
    ns: &Namespace<'_>,
    pod: &Pod,
    old: Option<&Pod>,
) -> Outcome {
    let (mut out, enforce) = started(Webhook::ValidateInTree, mode);
    let judged = match admit(files, ns, pod, old) {
        _ if enforce => validate(files, ns, pod, old),
        Ok(changes) => validate(files, ns, &changes.applied(pod), old),
        Err(refusal) => Err(refusal),
    };
    match judged {
        Err(refusal) => refuse(&mut out, enforce, &refusal),
        Ok(()) => out.summary = "compliant".to_owned(),
    }
    out.warning = warning(mode, &out);
    out
}

/// The pod's in-tree decision across both phases, with nothing else mutating the pod:
/// `/mutate-in-tree`'s, unless `/validate-in-tree` refuses the pod it makes. In `section`'s mode;
/// without the section (compatibility off), in dryRun with the annotations alone (what the plugins
/// would do were they running).
pub fn decide(section: Option<&InTreePlugins>, ns: &Namespace<'_>, pod: &Pod, old: Option<&Pod>) -> Outcome {
    let default = PluginFiles::default();
    let (mode, files) = section.map_or((Mode::DryRun, &default), |s| (s.mode, &s.files));
    let mutation = decide_mutate(mode, files, ns, pod, old);
    let admitted = match admit(files, ns, pod, old) {
        Ok(changes) => changes.applied(pod),
        Err(_) => return mutation,
    };
    let validation = decide_validate(mode, files, ns, &admitted, old);
    if refuses(&validation) { validation } else { mutation }
}

/// What contradicts between the namespace's in-tree rules (its annotations, the files of
/// `inTreePlugins` when on) and the group it selects, each in one line: where the API server, in
/// enforce, refuses every pod the group places there (`check-config`, the audit).
pub fn contradictions(config: &Config, ns: &Namespace<'_>) -> Vec<String> {
    let Selection::Group { name, group } = select_group(config, ns) else {
        return Vec::new();
    };
    let default = PluginFiles::default();
    let files = config.in_tree_plugins.as_ref().map_or(&default, |s| &s.files);
    let mut out = Vec::new();
    match namespace_node_selector(files, ns) {
        Ok(selector) => {
            for (key, value) in &group.node_selector {
                if let Some(theirs) = selector.get(key).filter(|theirs| *theirs != value) {
                    out.push(format!(
                        "nodeSelector {key}: the in-tree selector of namespace {} sets {theirs}, group {name} sets {value}: \
                         the group's onConflict ({}) decides at /mutate and the in-tree validation refuses {key}={value}",
                        ns.name, group.on_conflict
                    ));
                }
            }
        }
        Err(reason) => out.push(format!(
            "namespace {}: {NODE_SELECTOR_ANNOTATION} does not parse: {reason}",
            ns.name
        )),
    }
    if let Some(whitelist) = files.node_selector_whitelists.get(ns.name).filter(|w| !w.is_empty())
        && let Some((key, value)) = group.node_selector.iter().find(|(k, v)| whitelist.get(*k) != Some(*v))
    {
        out.push(format!(
            "nodeSelector {key}={value} of group {name} is outside PodNodeSelector's whitelist of namespace {}: \
             the in-tree validation refuses the group's pods",
            ns.name
        ));
    }
    let whitelist = match namespace_tolerations(ns, TOLERATIONS_WHITELIST_ANNOTATION) {
        Ok(listed) => listed.unwrap_or_else(|| files.tolerations_whitelist.clone()),
        Err(reason) => {
            out.push(format!("namespace {}: {reason}", ns.name));
            Vec::new()
        }
    };
    if !verify_against_whitelist(&group.tolerations, &whitelist) {
        out.push(format!(
            "tolerations of group {name} are outside the tolerations whitelist of namespace {}: the in-tree \
             validation refuses the group's pods",
            ns.name
        ));
    }
    out
}

fn refuses(outcome: &Outcome) -> bool {
    matches!(outcome.decision, Decision::Denied | Decision::WouldDeny)
}

/// Whether the plugins have anything of the namespace's to apply besides the memory-pressure
/// toleration every pod but BestEffort ones gets (any plugin with rules there).
pub fn has_rules(files: &PluginFiles, ns: &Namespace<'_>) -> bool {
    !plugins_with_rules(files, ns).is_empty()
}

/// The plugins that have something of the namespace's to apply besides the memory-pressure
/// toleration: PodNodeSelector with its annotation, the files' default selector or a whitelist of
/// its name; PodTolerationRestriction with one of its annotations, or the files' default
/// tolerations or whitelist of tolerations.
pub(crate) fn plugins_with_rules(files: &PluginFiles, ns: &Namespace<'_>) -> Vec<Plugin> {
    let has = |a: &str| ns.annotations.contains_key(a);
    let node_selector = has(NODE_SELECTOR_ANNOTATION)
        || !files.cluster_default_node_selector.is_empty()
        || (files.node_selector_whitelists.get(ns.name)).is_some_and(|w| !w.is_empty());
    let tolerations = has(DEFAULT_TOLERATIONS_ANNOTATION)
        || has(TOLERATIONS_WHITELIST_ANNOTATION)
        || !files.default_tolerations.is_empty()
        || !files.tolerations_whitelist.is_empty();
    [
        (node_selector, Plugin::PodNodeSelector),
        (tolerations, Plugin::PodTolerationRestriction),
    ]
    .into_iter()
    .filter_map(|(has, plugin)| has.then_some(plugin))
    .collect()
}

fn refuse(out: &mut Outcome, enforce: bool, refusal: &Refusal) {
    out.deny(
        enforce,
        format!("pod-director (in-tree {}): {}", refusal.plugin, refusal.message),
    );
    let verb = if enforce { "denied" } else { "would deny" };
    out.summary = truncate_chars(format!("{verb}: {refusal}"), MAX_SUMMARY_CHARS);
}

fn warning(mode: Mode, out: &Outcome) -> Option<String> {
    (mode == Mode::Warn && out.decision != Decision::Noop)
        .then(|| truncate_chars(format!("pod-director in-tree: {}", out.summary), MAX_SUMMARY_CHARS))
}

/// `set nodeSelector a=b,c=d; set tolerations (3)`.
fn describe(changes: &Changes) -> String {
    let mut parts = Vec::new();
    if let Some(selector) = &changes.node_selector {
        let pairs: Vec<String> = selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
        parts.push(format!("set nodeSelector {}", pairs.join(",")));
    }
    if let Some(tolerations) = &changes.tolerations {
        parts.push(format!("set tolerations ({})", tolerations.len()));
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests;
