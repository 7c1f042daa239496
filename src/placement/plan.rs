//! Plan computation (stub, being written).
use k8s_openapi::api::core::v1::Pod;

use super::Conflict;
use crate::config::Group;

/// One placement change.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub reason: String,
}

/// The placement changes a pod needs to satisfy its group.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    pub changes: Vec<Change>,
    pub conflicts: Vec<Conflict>,
}

pub fn plan(_pod: &Pod, _group: &Group) -> Plan {
    Plan::default()
}
