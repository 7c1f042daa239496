//! Toleration superset semantics, as the in-tree `MergeTolerations`
//! (`k8s.io/kubernetes/pkg/util/tolerations`) decides them, and the node taints
//! tolerations are held to ([`NodeTaint`]).

use std::borrow::Cow;

use k8s_openapi::api::core::v1::Toleration;

/// The taint effects that exclude a node from scheduling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
    /// An effect this version does not know; it is compared by name and never excludes a node.
    Other,
}

impl TaintEffect {
    pub fn parse(effect: &str) -> Self {
        match effect {
            "NoSchedule" => TaintEffect::NoSchedule,
            "PreferNoSchedule" => TaintEffect::PreferNoSchedule,
            "NoExecute" => TaintEffect::NoExecute,
            _ => TaintEffect::Other,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
            TaintEffect::Other => "",
        }
    }

    /// Whether an untolerated taint with this effect keeps pods off the node.
    pub fn excludes(self) -> bool {
        matches!(self, TaintEffect::NoSchedule | TaintEffect::NoExecute)
    }
}

/// A node taint, as far as placement cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeTaint {
    pub key: Box<str>,
    pub value: Box<str>,
    pub effect: TaintEffect,
}

impl NodeTaint {
    pub fn new(key: &str, value: &str, effect: &str) -> Self {
        Self {
            key: key.into(),
            value: value.into(),
            effect: TaintEffect::parse(effect),
        }
    }

    /// `key=value:Effect` (`key:Effect` without a value).
    pub(crate) fn describe(&self) -> String {
        if self.value.is_empty() {
            format!("{}:{}", self.key, self.effect.as_str())
        } else {
            format!("{}={}:{}", self.key, self.value, self.effect.as_str())
        }
    }
}

fn text(field: &Option<String>) -> &str {
    field.as_deref().unwrap_or("")
}

/// The operator, with the API's default: empty means `Equal`.
fn operator(t: &Toleration) -> &str {
    match text(&t.operator) {
        "" => "Equal",
        op => op,
    }
}

/// Same toleration, spelled the same way: empty operator becomes `Equal`,
/// empty strings become absent. Borrowed when `t` is spelled so already (a
/// group's tolerations usually are).
pub(crate) fn normalized(t: &Toleration) -> Cow<'_, Toleration> {
    let set_or_absent = |s: &Option<String>| s.as_deref() != Some("");
    let normal = set_or_absent(&t.key)
        && set_or_absent(&t.value)
        && set_or_absent(&t.effect)
        && t.operator.as_deref().is_some_and(|op| !op.is_empty());
    if normal {
        return Cow::Borrowed(t);
    }
    let keep = |s: &Option<String>| s.as_ref().filter(|s| !s.is_empty()).cloned();
    Cow::Owned(Toleration {
        key: keep(&t.key),
        operator: Some(operator(t).to_owned()),
        value: keep(&t.value),
        effect: keep(&t.effect),
        toleration_seconds: t.toleration_seconds,
    })
}

/// Whether `a` and `b` are the same toleration spelled alike: `normalized(a) ==
/// normalized(b)`, without building either.
pub(crate) fn same(a: &Toleration, b: &Toleration) -> bool {
    fn set(s: &Option<String>) -> Option<&str> {
        s.as_deref().filter(|s| !s.is_empty())
    }
    set(&a.key) == set(&b.key)
        && operator(a) == operator(b)
        && set(&a.value) == set(&b.value)
        && set(&a.effect) == set(&b.effect)
        && a.toleration_seconds == b.toleration_seconds
}

/// Whether `ss` tolerates every taint `t` tolerates (`isSuperset` of the in-tree code).
pub(crate) fn is_superset(ss: &Toleration, t: &Toleration) -> bool {
    if same(ss, t) {
        return true;
    }
    // An empty key with Exists matches every key.
    if text(&t.key) != text(&ss.key) && (!text(&ss.key).is_empty() || operator(ss) != "Exists") {
        return false;
    }
    // An empty effect matches every effect.
    if text(&t.effect) != text(&ss.effect) && !text(&ss.effect).is_empty() {
        return false;
    }
    if text(&ss.effect) == "NoExecute"
        && let Some(limit) = ss.toleration_seconds
    {
        match t.toleration_seconds {
            Some(seconds) if seconds <= limit => {}
            _ => return false,
        }
    }
    match operator(ss) {
        "Equal" => operator(t) == "Equal" && text(&t.value) == text(&ss.value),
        "Exists" => true,
        _ => false,
    }
}

/// Whether any of `existing` already tolerates everything `wanted` does.
pub(crate) fn is_tolerated(existing: &[Toleration], wanted: &Toleration) -> bool {
    existing.iter().any(|e| is_superset(e, wanted))
}

/// Whether toleration `t` tolerates `taint` (the in-tree `ToleratesTaint`):
/// an empty effect matches every effect, an empty key every key, an omitted
/// operator is `Equal` (same value), `Exists` matches any value.
pub(crate) fn tolerates_taint(t: &Toleration, taint: &NodeTaint) -> bool {
    let effect = text(&t.effect);
    if !effect.is_empty() && effect != taint.effect.as_str() {
        return false;
    }
    let key = text(&t.key);
    if !key.is_empty() && key != &*taint.key {
        return false;
    }
    match operator(t) {
        "Equal" => text(&t.value) == &*taint.value,
        "Exists" => true,
        _ => false,
    }
}

/// Short human form: `dedicated=ci:NoSchedule`, `nvidia.com/gpu:NoSchedule (Exists)`.
pub(crate) fn describe(t: &Toleration) -> String {
    let key = if text(&t.key).is_empty() { "*" } else { text(&t.key) };
    let mut out = String::from(key);
    match operator(t) {
        "Exists" => out.push_str(" exists"),
        _ => out.extend(["=", text(&t.value)]),
    }
    if !text(&t.effect).is_empty() {
        out.extend([":", text(&t.effect)]);
    }
    if let Some(s) = t.toleration_seconds {
        out.push_str(&format!(" for {s}s"));
    }
    out
}

#[cfg(test)]
mod tests;
