//! What pod-director reads from the cluster and keeps in step with it, each behind
//! a bounded, cached client: the namespaces' group labels ([`namespaces`]), the
//! Nodes ([`nodes`]) and what creates them on demand (`provisioners`), the
//! namespaces that select an undefined group (`orphans`), the webhook entries
//! and admission policies it owns ([`webhooks`]), and the audit of the running
//! cluster with the Lease of its continuous run ([`audit`]), whose findings are also written as
//! OpenReports per namespace ([`reports`]).
//!
//! Nothing here decides a placement: the engine (`crate::placement`) does, on
//! what these modules read.

pub mod audit;
pub mod namespaces;
pub mod nodes;
pub(crate) mod orphans;
pub(crate) mod provisioners;
pub mod reports;
pub mod webhooks;
