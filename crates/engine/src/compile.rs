//! The cluster objects pod-director owns, compiled from the configuration, side by side: the
//! admission policies of the groups enforced by in-process policies ([`admission_policies`]) and
//! the webhook entries ([`webhook_entries`]), each with the JSON the product applies. Pure: the
//! product's reconcilers (`src/cluster/webhooks.rs`, `webhooks/admission_policies.rs`) read the
//! cluster and apply them.

pub mod admission_policies;
pub mod webhook_entries;
