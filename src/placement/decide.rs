//! Group selection and the per-webhook decision (stub, being written).
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use super::{Decision, Outcome, Webhook};
use crate::config::{Config, Group};

/// The namespace of the pod, as far as placement cares.
#[derive(Debug, Clone, Copy)]
pub struct Namespace<'a> {
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
}

/// Which group a namespace selects.
#[derive(Debug, Clone, PartialEq)]
pub enum Selection<'c> {
    Excluded,
    NoGroup,
    Group { name: &'c str, group: &'c Group },
    Unknown { name: String },
}

pub fn select_group<'c>(_config: &'c Config, _ns: &Namespace<'_>, _own_namespace: Option<&str>) -> Selection<'c> {
    Selection::NoGroup
}

fn noop(webhook: Webhook) -> Outcome {
    Outcome {
        webhook,
        group: None,
        mode: None,
        decision: Decision::Noop,
        skip_reason: None,
        patch: json_patch::Patch(Vec::new()),
        apply_patch: false,
        allowed: true,
        message: None,
        warning: None,
        conflicts: Vec::new(),
        violations: Vec::new(),
        summary: String::new(),
    }
}

/// The /mutate decision for a pod being created.
pub fn mutate(_config: &Config, _ns: &Namespace<'_>, _pod: &Pod) -> Outcome {
    noop(Webhook::Mutate)
}

/// The /validate decision for a final pod (CREATE, or UPDATE with the old pod).
pub fn validate(_config: &Config, _ns: &Namespace<'_>, _pod: &Pod, _old: Option<&Pod>) -> Outcome {
    noop(Webhook::Validate)
}
