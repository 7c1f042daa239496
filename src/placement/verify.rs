//! Verification (stub, being written).
use k8s_openapi::api::core::v1::Pod;

use super::Violation;
use crate::config::Group;

pub fn verify(_pod: &Pod, _group: &Group) -> Vec<Violation> {
    Vec::new()
}
