//! The cluster objects pod-director owns, compiled from the configuration, side by side: the
//! admission policies of the groups enforced by in-process policies ([`admission_policies`]) and
//! the webhook entries ([`webhook_entries`]), each with the JSON the product applies. Pure: the
//! product's reconcilers (`src/cluster/webhooks.rs`, `webhooks/admission_policies.rs`) read the
//! cluster and apply them.

pub mod admission_policies;
pub mod webhook_entries;

/// The label every object pod-director writes carries (its admission policies, its reports), and
/// its value: what pod-director lists to find, update and prune its own.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "pod-director";
