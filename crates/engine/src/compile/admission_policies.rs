//! The policy compiler: a group compiled into native admission policies that the API server
//! runs itself, so that the group is enforced while pod-director is down and its pods cost no
//! webhook call.
//!
//! For a group `NAME` it renders four objects, all named [`object_name`]`(NAME)`:
//! - a **MutatingAdmissionPolicy** (+ binding) whose CEL JSON Patch is the engine's plan
//!   ([`crate::placement::plan`]): the group's nodeSelector keys a pod lacks are added (a conflicting key
//!   replaced under `onConflict: override`, kept otherwise); each group toleration that no toleration
//!   of the pod tolerates already (a superset, `is_superset` of the in-tree code) is appended,
//!   spelled as the engine spells it ([`crate::placement::tolerations::normalized`]);
//! - a **ValidatingAdmissionPolicy** (+ binding, `validationActions: [Deny]`) that refuses what the
//!   webhook refuses in enforce, with its messages: a conflict under `onConflict: reject` (the
//!   `/mutate` denial), and the final pod not satisfying the group ([`crate::placement::verify`], the
//!   `/validate` denial) — e.g. a later webhook took the placement off again.
//!
//! Both bind the group's namespaces by the group label (and never the excluded ones), and match
//! pod CREATEs only. What a policy cannot decide stays on the webhook, whose failurePolicy-Fail
//! entries keep receiving it by [`WEBHOOK_ONLY`]: pods naming `spec.nodeName` (the Node object is
//! checked), pod UPDATEs (only the violations an update introduces deny), and DaemonSets. Groups
//! whose rules exceed what is compiled ([`Config::policy_blockers`]: affinity, `onNoFeasibleNode:
//! deny`, the default group) are refused by the configuration's validation.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Toleration;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{MANAGED_BY, MANAGED_BY_LABEL};
use crate::config::{Config, EnforceWith, Group, Mode, Observation, OnConflict};
use crate::placement::tolerations::{describe, normalized, same};

/// API version of the four objects (GA MutatingAdmissionPolicy: Kubernetes 1.36).
pub const API_VERSION: &str = "admissionregistration.k8s.io/v1";
/// Label naming the group an object was compiled from.
pub const GROUP_LABEL: &str = "pod-director.io/group";

/// Pods of a policy group that the webhook still decides (CEL over the admission request):
/// anything but a pod CREATE, and a pod naming `spec.nodeName`. Only pods and DaemonSets
/// reach these expressions.
pub const WEBHOOK_ONLY: &str = r#"request.resource.resource != "pods" || request.operation != "CREATE" || (has(object.spec.nodeName) && object.spec.nodeName != "")"#;

/// The policies' first match condition: the pod names no node. The rest of [`WEBHOOK_ONLY`] (anything
/// but a pod CREATE) the policies' matchConstraints already leave out.
const NAMES_NO_NODE: &str = r#"!has(object.spec.nodeName) || object.spec.nodeName == """#;

/// The four objects compiled from one group, in the order they are applied (each policy
/// before its binding).
#[derive(Debug, Clone, PartialEq)]
pub struct Policies {
    pub group: String,
    /// The name of all four objects.
    pub name: String,
    /// Only the ValidatingAdmissionPolicy and its binding (`enforceWith: webhookAndPolicy`): the
    /// webhook's mutating call places the pods, the policy checks them in place of `/validate`.
    pub validation_only: bool,
    pub objects: Vec<Value>,
}

/// The objects' name for group `group`: `pod-director-<group>` when the group name is a valid
/// object name, else its lowercase form with `_` and `.` as `-` and a hash of the name.
pub fn object_name(group: &str) -> String {
    let plain = group
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !group.starts_with('-')
        && !group.ends_with('-');
    if plain {
        return format!("pod-director-{group}");
    }
    let cleaned: String = group
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let digest = Sha256::digest(group.as_bytes());
    let hash: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    format!("pod-director-{}-{hash}", cleaned.trim_matches('-'))
}

/// A CEL string literal (JSON's escapes are CEL's).
fn lit(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

/// A JSON Pointer token (RFC 6901).
fn token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn text(field: &Option<String>) -> &str {
    field.as_deref().unwrap_or("")
}

/// The toleration as a typed CEL object of the pod's schema.
fn toleration_object(t: &Toleration) -> String {
    let mut fields = Vec::new();
    for (name, value) in [
        ("key", &t.key),
        ("operator", &t.operator),
        ("value", &t.value),
        ("effect", &t.effect),
    ] {
        if let Some(v) = value {
            fields.push(format!("{name}: {}", lit(v)));
        }
    }
    if let Some(seconds) = t.toleration_seconds {
        fields.push(format!("tolerationSeconds: {seconds}"));
    }
    format!("Object.spec.tolerations{{{}}}", fields.join(", "))
}

/// CEL: toleration `e` (a variable) is `w` spelled as the engine spells it
/// ([`crate::placement::tolerations::normalized`]): the toleration the webhook and the mutating policy add,
/// so the one a placed pod usually has. A sufficient test of [`superset`] that compares each field
/// once, the key first (where the pod's other tolerations differ).
fn spelled_as(e: &str, w: &Toleration) -> String {
    let w = normalized(w);
    let mut out: Vec<String> = [
        ("key", &w.key),
        ("effect", &w.effect),
        ("operator", &w.operator),
        ("value", &w.value),
    ]
    .into_iter()
    .map(|(field, value)| match value {
        Some(v) => format!("has({e}.{field}) && {e}.{field} == {}", lit(v)),
        None => format!("!has({e}.{field})"),
    })
    .collect();
    out.push(match w.toleration_seconds {
        Some(n) => format!("has({e}.tolerationSeconds) && {e}.tolerationSeconds == {n}"),
        None => format!("!has({e}.tolerationSeconds)"),
    });
    out.join(" && ")
}

/// CEL: toleration `e` (a variable) tolerates every taint `w` tolerates: `is_superset(e, w)`
/// with `w` known ([`crate::placement::tolerations::is_superset`], the in-tree `isSuperset`), each clause
/// reduced by what `w` is: an empty field of the pod's toleration is an absent one (the API
/// server drops empty strings), an empty operator is `Equal`, and the `NoExecute` seconds only
/// matter when `w`'s effect is `NoExecute` (any other effect of `w` admits no `NoExecute` one).
fn superset(e: &str, w: &Toleration) -> String {
    let w = normalized(w);
    let (wk, wv, we) = (text(&w.key), text(&w.value), text(&w.effect));
    let exists = format!(r#"(has({e}.operator) && {e}.operator == "Exists")"#);
    let empty = |field: &str| format!(r#"(!has({e}.{field}) || {e}.{field} == "")"#);
    let mut clauses = Vec::new();
    // An empty key with Exists matches every key.
    clauses.push(if wk.is_empty() {
        empty("key")
    } else {
        format!(r#"(has({e}.key) && {e}.key != "" ? {e}.key == {} : {exists})"#, lit(wk))
    });
    // An empty effect matches every effect.
    clauses.push(if we.is_empty() {
        empty("effect")
    } else {
        format!(r#"(!has({e}.effect) || {e}.effect == "" || {e}.effect == {})"#, lit(we))
    });
    if we == "NoExecute" {
        // A NoExecute toleration with seconds tolerates only what leaves as soon (or sooner).
        let limit = match w.toleration_seconds {
            Some(n) => format!(" || {n} <= {e}.tolerationSeconds"),
            None => String::new(),
        };
        clauses.push(format!(
            r#"(!has({e}.effect) || {e}.effect != "NoExecute" || !has({e}.tolerationSeconds){limit})"#
        ));
    }
    // Operators are Equal (also when empty) or Exists: the API server refuses any other.
    clauses.push(if text(&w.operator) == "Equal" {
        let value = if wv.is_empty() {
            empty("value")
        } else {
            format!("(has({e}.value) && {e}.value == {})", lit(wv))
        };
        format!("({exists} || {value})")
    } else {
        exists
    });
    clauses.join(" && ")
}

/// CEL: the pod has a toleration that tolerates everything `w` does — the engine's spelling of
/// `w` looked for first, the whole superset rule only when no toleration is spelled so.
fn tolerated(w: &Toleration) -> String {
    format!(
        "has(object.spec.tolerations) && (object.spec.tolerations.exists(t, {}) || object.spec.tolerations.exists(t, {}))",
        spelled_as("t", w),
        superset("t", w)
    )
}

fn match_condition(name: &str, expression: String) -> Value {
    json!({ "name": name, "expression": expression })
}

/// The conditions both policies share: the pod is on the policy path and not skipped by a rule.
fn match_conditions(config: &Config, group: &Group) -> Vec<Value> {
    // The rest of WEBHOOK_ONLY (anything but a pod CREATE) the policies' matchConstraints leave out.
    let mut out = vec![match_condition(
        "not-left-to-the-webhook",
        format!("// Pods naming spec.nodeName are decided by the webhook (it checks the Node).\n{NAMES_NO_NODE}"),
    )];
    if group.allow_pod_exclusion {
        let label = lit(&config.pod_exclusion_label);
        out.push(match_condition(
            "not-excluded-by-label",
            format!(
                "// allowPodExclusion: a pod labelled {}=true is skipped.\n!(has(object.metadata.labels) && {label} in \
                 object.metadata.labels && object.metadata.labels[{label}] == \"true\")",
                config.pod_exclusion_label
            ),
        ));
    }
    if group.allow_daemon_sets {
        out.push(match_condition(
            "not-a-daemon-set-pod",
            format!(
                "// allowDaemonSets: pods the DaemonSet controller creates for a DaemonSet are skipped.\n\
                 !(request.userInfo.username == {} && has(object.metadata.ownerReferences) && \
                 object.metadata.ownerReferences.exists(o, o.kind == \"DaemonSet\" && o.apiVersion == \"apps/v1\" && \
                 has(o.controller) && o.controller))",
                lit(&config.daemon_set_controller)
            ),
        ));
    }
    out
}

fn patch_op(op: &str, path: &str, value: &str) -> String {
    format!("JSONPatch{{op: {}, path: {}, value: {value}}}", lit(op), lit(path))
}

/// The nodeSelector mutation: the engine's `node_selector` step.
fn node_selector_mutation(name: &str, group: &Group) -> Option<String> {
    let wanted = &group.node_selector;
    if wanted.is_empty() {
        return None;
    }
    let pairs: Vec<String> = wanted.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let whole: Vec<String> = wanted.iter().map(|(k, v)| format!("{}: {}", lit(k), lit(v))).collect();
    let mut out = format!(
        "// groups.{name}.nodeSelector: {} (onConflict: {}).\n// No nodeSelector: the group's. Otherwise each key the pod lacks is added{}.\n\
         !has(object.spec.nodeSelector) ?\n  [{}] :\n  []",
        pairs.join(", "),
        group.on_conflict.as_str(),
        match group.on_conflict {
            OnConflict::Override => "; a key set to another value is replaced",
            OnConflict::Reject => "; a key set to another value is refused by the ValidatingAdmissionPolicy",
            OnConflict::Ignore => "; a key set to another value is kept",
        },
        patch_op("add", "/spec/nodeSelector", &format!("{{{}}}", whole.join(", ")))
    );
    for (key, value) in wanted {
        let path = format!("/spec/nodeSelector/{}", token(key));
        let add = patch_op("add", &path, &lit(value));
        let present = format!("{} in object.spec.nodeSelector", lit(key));
        let term = match group.on_conflict {
            OnConflict::Override => format!(
                "(!({present}) ? [{add}] : object.spec.nodeSelector[{}] != {} ? [{}] : [])",
                lit(key),
                lit(value),
                patch_op("replace", &path, &lit(value))
            ),
            OnConflict::Reject | OnConflict::Ignore => format!("(!({present}) ? [{add}] : [])"),
        };
        out.push_str(&format!("\n  // {key}={value}\n  + {term}"));
    }
    Some(out)
}

/// The group's tolerations without those spelled the same as an earlier one (the engine adds those once).
fn distinct_tolerations(group: &Group) -> Vec<&Toleration> {
    let mut out: Vec<&Toleration> = Vec::new();
    for t in &group.tolerations {
        if !out.iter().any(|o| same(o, t)) {
            out.push(t);
        }
    }
    out
}

/// The tolerations mutation: the engine's `tolerations` step, with variables `tolerated<i>`.
fn tolerations_mutation(name: &str, group: &Group) -> Option<String> {
    let wanted = distinct_tolerations(group);
    if wanted.is_empty() {
        return None;
    }
    let objects: Vec<String> = wanted.iter().map(|t| toleration_object(&normalized(t))).collect();
    let names: Vec<String> = wanted.iter().map(|t| describe(t)).collect();
    let mut out = format!(
        "// groups.{name}.tolerations: {}.\n// No tolerations: the group's. Otherwise each one no toleration of the pod already \
         tolerates (a superset) is appended.\n!has(object.spec.tolerations) ?\n  [{}] :\n  []",
        names.join(", "),
        patch_op("add", "/spec/tolerations", &format!("[{}]", objects.join(", ")))
    );
    for (i, object) in objects.iter().enumerate() {
        out.push_str(&format!(
            "\n  // {}\n  + (variables.tolerated{i} ? [] : [{}])",
            names[i],
            patch_op("add", "/spec/tolerations/-", object)
        ));
    }
    Some(out)
}

/// The MutatingAdmissionPolicy's variables: `tolerated<i>` per distinct group toleration.
fn mutation_variables(group: &Group) -> Vec<Value> {
    distinct_tolerations(group)
        .iter()
        .enumerate()
        .map(|(i, t)| {
            json!({
                "name": format!("tolerated{i}"),
                "expression": format!("// The pod tolerates everything {} does.\n{}", describe(t), tolerated(t)),
            })
        })
        .collect()
}

/// The ValidatingAdmissionPolicy's variables and validations. Each validation's expression is a
/// boolean that short-circuits on a placed pod (the group's keys and values, each toleration's
/// engine spelling before the superset rule); its message lists what is wrong with the webhook's
/// own phrases (`nodeSelector["k"]: pod has "a", group requires "b" (rejected)`) from the
/// variables `conflicts` and `violations`, each used once. The API server evaluates every
/// `messageExpression` of a policy for every request, each in a context of its own (variables
/// included), so each message first asks its validation's boolean again: the lists are built
/// only for a pod that is refused. No conflict is refused but under `onConflict: reject`.
fn validation(config: &Config, name: &str, group: &Group) -> (Vec<Value>, Vec<Value>) {
    let selector = "object.spec.nodeSelector";
    let reject = group.on_conflict == OnConflict::Reject;
    let (mut agrees, mut conflicts) = (Vec::new(), Vec::new());
    let (mut satisfied, mut violations) = (Vec::new(), Vec::new());
    if reject {
        // A compiled group offers no alternative: a pod naming one conflicts ([`crate::placement::choice`]).
        let (labels, key) = ("object.metadata.labels", lit(&config.pod_placement_label));
        let chosen = format!("has({labels}) && {key} in {labels} && {labels}[{key}] != \"default\"");
        agrees.push(format!("!({chosen})"));
        conflicts.push(format!(
            "  // {label}: a choice of placement the group does not offer\n  ({chosen} ? [{} + {labels}[{key}] + {}] : [])",
            lit(&format!("metadata.labels[{key}]: pod has \"")),
            lit("\", group requires one of default (rejected)"),
            label = config.pod_placement_label,
        ));
    }
    let mut keys = Vec::new();
    for (key, value) in &group.node_selector {
        let (k, v) = (lit(key), lit(value));
        let field = format!("nodeSelector[{k}]");
        keys.push(match group.on_conflict {
            OnConflict::Override => format!("{k} in {selector} && {selector}[{k}] == {v}"),
            // A value that differs is a conflict (reject) or the pod's to keep (ignore).
            OnConflict::Reject | OnConflict::Ignore => format!("{k} in {selector}"),
        });
        violations.push(format!(
            "  // {key}={value}\n  (!has({selector}) || !({k} in {selector}) ? [{}] : [])",
            lit(&format!("{field}: missing; the group requires {key}={value}"))
        ));
        let differs = format!("has({selector}) && {k} in {selector} && {selector}[{k}] != {v}");
        match group.on_conflict {
            OnConflict::Reject => {
                agrees.push(format!("(!has({selector}) || !({k} in {selector}) || {selector}[{k}] == {v})"));
                conflicts.push(format!(
                    "  // {key}={value}\n  ({differs} ? [{} + {selector}[{k}] + {}] : [])",
                    lit(&format!("{field}: pod has \"")),
                    lit(&format!("\", group requires {value:?} (rejected)"))
                ));
            }
            OnConflict::Override => violations.push(format!(
                "  // {key}={value} (overridden, then undone by someone else)\n  ({differs} ? [{} + {selector}[{k}] + {}] : [])",
                lit(&format!("{field}: is \"")),
                lit(&format!("\"; the group requires {value:?}"))
            )),
            OnConflict::Ignore => {}
        }
    }
    if !keys.is_empty() {
        satisfied.push(format!("has({selector}) && {}", keys.join(" && ")));
    }
    for t in &group.tolerations {
        violations.push(format!(
            "  // {}\n  ({} ? [] : [{}])",
            describe(t),
            tolerated(t),
            lit(&format!("tolerations: missing a toleration of {}", describe(t)))
        ));
    }
    // Tolerations spelled alike are one check.
    for t in distinct_tolerations(group) {
        satisfied.push(format!("// {}\n({})", describe(t), tolerated(t)));
    }
    let list = |items: Vec<String>| format!("[] +\n{}", items.join(" +\n"));
    let all = |terms: Vec<String>| {
        if terms.is_empty() {
            "true".to_owned()
        } else {
            terms.join(" &&\n")
        }
    };
    let mut variables = Vec::new();
    let mut validations = Vec::new();
    if reject {
        variables.push(json!({
            "name": "conflicts",
            "expression": format!(
                "// groups.{name}: the pod's own placement the group contradicts (onConflict: reject).\n{}",
                list(conflicts)
            ),
        }));
        let agrees = all(agrees);
        let message = format!(
            "{} + variables.conflicts.join(\"; \") + {}",
            lit(&format!(
                "pod-director: the pod conflicts with placement group {name:?}: "
            )),
            lit("; remove or change the pod's own placement (the group's onConflict is reject)")
        );
        validations.push(json!({
            "expression": format!("// groups.{name}: nothing of the pod's own placement contradicts the group.\n{agrees}"),
            "messageExpression": format!("({agrees}) ? \"\" :\n{message}"),
            "reason": "Forbidden",
        }));
    }
    variables.push(json!({
        "name": "violations",
        "expression": format!(
            "// groups.{name}: what the final pod lacks of the group's placement.\n{}",
            if violations.is_empty() { "[]".to_owned() } else { list(violations) }
        ),
    }));
    let satisfied = all(satisfied);
    let message = format!(
        "{} + variables.violations.join(\"; \")",
        lit(&format!(
            "pod-director: the pod does not satisfy placement group {name:?}: "
        ))
    );
    validations.push(json!({
        "expression": format!("// groups.{name}: the final pod has the group's placement.\n{satisfied}"),
        "messageExpression": format!("({satisfied}) ? \"\" :\n{message}"),
        "reason": "Forbidden",
    }));
    (variables, validations)
}

fn metadata(name: &str, object: &str) -> Value {
    json!({
        "name": object,
        "labels": { MANAGED_BY_LABEL: MANAGED_BY, GROUP_LABEL: name },
        "annotations": { "pod-director.io/compiled-from": format!("groups.{name}") },
    })
}

fn namespace_selector(config: &Config, name: &str, excluded: &[String]) -> Value {
    json!({
        "matchExpressions": [
            { "key": config.namespace_label, "operator": "In", "values": [name] },
            { "key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": excluded },
        ]
    })
}

fn pod_creates() -> Value {
    json!({
        "resourceRules": [{
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["pods"],
        }]
    })
}

/// Compiles group `name` into its admission policies; `excluded` are the namespaces no
/// binding may select (`excludedNamespaces`, pod-director's own, kube-system). `Err` holds
/// why the group cannot be compiled ([`Config::policy_blockers`]).
pub fn compile(config: &Config, name: &str, group: &Group, excluded: &[String]) -> Result<Policies, Vec<String>> {
    let blockers = config.policy_blockers(name, group);
    if !blockers.is_empty() {
        return Err(blockers);
    }
    let object = object_name(name);
    let conditions = match_conditions(config, group);
    // One mutation: the API server converts and patches the pod once per mutation.
    let parts: Vec<String> = [node_selector_mutation(name, group), tolerations_mutation(name, group)]
        .into_iter()
        .flatten()
        .collect();
    let expression = match parts.as_slice() {
        // A group with no placement: nothing to add (a MutatingAdmissionPolicy needs one mutation).
        [] => "[]".to_owned(),
        [one] => one.clone(),
        _ => format!("(\n{}\n)", parts.join("\n) + (\n")),
    };
    let mutations = json!([{ "patchType": "JSONPatch", "jsonPatch": { "expression": expression } }]);
    let selector = namespace_selector(config, name, excluded);
    let mutating = json!({
        "apiVersion": API_VERSION,
        "kind": "MutatingAdmissionPolicy",
        "metadata": metadata(name, &object),
        "spec": {
            "failurePolicy": "Fail",
            // IfNeeded would have the API server run the policy twice for every pod (its own
            // patch asks for the reinvocation); a later mutator that takes the placement off
            // again gets the pod refused by the ValidatingAdmissionPolicy instead.
            "reinvocationPolicy": "Never",
            "matchConstraints": pod_creates(),
            "matchConditions": conditions.clone(),
            "variables": mutation_variables(group),
            "mutations": mutations,
        }
    });
    let mutating_binding = json!({
        "apiVersion": API_VERSION,
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": metadata(name, &object),
        "spec": { "policyName": object, "matchResources": { "namespaceSelector": selector } },
    });
    let (variables, validations) = validation(config, name, group);
    let validating = json!({
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": metadata(name, &object),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": pod_creates(),
            "matchConditions": conditions,
            "variables": variables,
            "validations": validations,
        }
    });
    let validating_binding = json!({
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": metadata(name, &object),
        "spec": {
            "policyName": object,
            "validationActions": ["Deny"],
            "matchResources": { "namespaceSelector": selector },
        },
    });
    Ok(Policies {
        group: name.to_owned(),
        name: object,
        validation_only: false,
        objects: vec![mutating, mutating_binding, validating, validating_binding],
    })
}

/// Whether the final pods of `group` are checked by its ValidatingAdmissionPolicy alone, the webhook
/// placing them: in enforce, `enforceWith: webhookAndPolicy`, and a policy expresses the group.
pub fn validated_by_policy(config: &Config, name: &str, group: &Group) -> bool {
    group.enforce_with == EnforceWith::WebhookAndPolicy
        && config.mode_of(group) == Mode::Enforce
        && config.policy_blockers(name, group).is_empty()
}

/// Every group of `config` that is enforced by policies ([`Config::on_policy`]), compiled, and
/// every group whose final pods its ValidatingAdmissionPolicy checks ([`validated_by_policy`]):
/// of those, only that policy and its binding. Groups whose compilation fails are left out (the
/// configuration's validation refuses them on policies; `webhookAndPolicy` ones stay on `/validate`).
pub fn compile_all(config: &Config, excluded: &[String]) -> BTreeMap<String, Policies> {
    config
        .groups
        .iter()
        .filter_map(|(name, group)| {
            let validation_only = validated_by_policy(config, name, group);
            if !validation_only && !config.on_policy(group) {
                return None;
            }
            let mut policies = compile(config, name, group, excluded).ok()?;
            if validation_only {
                policies.validation_only = true;
                policies.objects.drain(..2);
            }
            Some((name.clone(), policies))
        })
        .collect()
}

/// The CEL condition of the observing webhook entry: which policy-path pods the webhook
/// still sees (failurePolicy Ignore). `None`: none is sent.
pub(crate) fn observation_condition(observation: Observation) -> Option<String> {
    match owner_sample(observation) {
        _ if observation == Observation::None => None,
        None => Some(format!("!({WEBHOOK_ONLY})")),
        Some(sample) => Some(format!("!({WEBHOOK_ONLY}) && {sample}")),
    }
}

/// CEL: the pod is in the sample of `observation` (`None`: every pod is).
///
/// A webhook's `matchConditions` see no request UID, and a pod created from `generateName`
/// (every controller's pod) has no name yet, so the sample is drawn from the owner's UID (a
/// random UUID): the pods of one controller in 16 (or 256) are observed, each with all its
/// pods. Pods without an owner, created one at a time by people, are always observed.
pub(crate) fn owner_sample(observation: Observation) -> Option<String> {
    let suffix = match observation {
        Observation::Every => return None,
        Observation::None => return Some("false".to_owned()),
        Observation::OneIn16 => "0",
        Observation::OneIn256 => "00",
    };
    Some(format!(
        r#"(!has(object.metadata.ownerReferences) || size(object.metadata.ownerReferences) == 0 || object.metadata.ownerReferences[0].uid.endsWith("{suffix}"))"#
    ))
}

#[cfg(test)]
mod tests;
