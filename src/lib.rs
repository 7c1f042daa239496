//! pod-director: a Kubernetes admission webhook that places the pods of chosen
//! namespaces on chosen nodes, log-first.
//!
//! - [`app`]: the composition root of `serve`: client, caches, server, audit, reconciler, drain.
//! - [`config`]: the one typed configuration, strictly validated (the engine crate, `crates/engine`).
//! - [`placement`]: the pure engine (plan, verify, decide; `crates/engine`).
//! - [`admission`]: AdmissionReview in → AdmissionReview out.
//! - [`namespace_guard`]: who may change a namespace's group label (`/validate-namespace`; `crates/engine`).
//! - [`cluster`]: what is read from the cluster and kept in step with it: namespace labels
//!   (reflector cache + live GET), Nodes (watch cache + live GET, feasibility counts) and what
//!   creates them on demand, namespaces selecting an undefined group, the webhook entries and
//!   admission policies reconciled with the live configuration, and the audit (is it safe to
//!   enforce a group? `pod-director audit`, and continuously in `serve` under a Lease).
//! - [`server`]: HTTPS serving, probes, hot reload of config and certificate.
//! - [`metrics`], [`telemetry`]: Prometheus metrics; logs and traces.
//! - [`cli`]: the command line.
//! - `testing` (hidden, the `testing` feature and unit tests only): in-memory namespaces and nodes and
//!   the admission path on them, for the test kit (`crates/testkit`, which has the rest); not an API.

// `named_enum!`: the engine's macro for fieldless enums with fixed names, for the product's own.
#[macro_use]
extern crate pod_director_engine;

pub mod admission;
pub mod app;
pub mod cli;
pub mod cluster;
pub mod metrics;
pub mod server;
pub mod telemetry;
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod testing;

/// The engine (crates/engine), under the paths the product has always used.
pub use pod_director_engine::{config, namespace_guard, placement};
