//! What pod-director reads from the cluster and keeps in step with it, each behind
//! a bounded, cached client: the namespaces' group labels (`namespaces`), the
//! Nodes (`nodes`) and what creates them on demand (`provisioners`), the pods of
//! `pods/binding` requests (`pods`), the
//! namespaces that select an undefined group (`orphans`), the webhook entries
//! and admission policies it owns (`webhooks`), and the audit of the running
//! cluster with the Lease of its continuous run (`audit`), whose findings are also written as
//! OpenReports per namespace (`reports`).
//!
//! Nothing here decides a placement: the engine (`pod_director_engine::placement`) does, on
//! what these modules read.

/// The audit of the running cluster, its I/O: the scan (`audit/scan.rs`), whether the API server
/// runs the in-tree plugins (`audit/plugins.rs`) and its continuous run on the replica holding a
/// Lease (`audit/continuous.rs`). What it decides, tallies and reports
/// is the engine's (`pod_director_engine::audit`).
pub(crate) mod audit {
    pub(crate) mod continuous;
    pub(crate) mod plugins;
    pub(crate) mod scan;
}
pub(crate) mod namespaces;
pub(crate) mod nodes;
pub(crate) mod orphans;
pub(crate) mod pods;
pub(crate) mod provisioners;
pub(crate) mod reports;
pub(crate) mod webhooks;

// What tests/, the benches and e2e use: the sources they fake or drive, the audit they read.
pub use self::audit::continuous::{Continuous, LeaseTarget, ScanResult, spawn_audit};
pub use self::audit::scan::ScanOptions;
pub use self::namespaces::{Labels, LookupError, NamespaceData, NamespaceSource};
pub use self::nodes::{KubeNodes, NodeLookupResult, NodeStore, Nodes, ProvisionerStore};
pub use self::reports::{REPORTS_NOT_SERVED, REPORTS_SERVED, ReportsOptions, spawn_reports};
pub use self::webhooks::ReconcileResult;
