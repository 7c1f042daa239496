//! pod-director: a Kubernetes admission webhook that places the pods of chosen
//! namespaces on chosen nodes, log-first.
//!
//! - [`app`]: the composition root of `serve`: client, caches, server, audit, reconciler, drain.
//! - The engine (`pod_director_engine`, `crates/engine`): the configuration, the placement,
//!   the namespace guard, and their one entry `decision` (a webhook's decision, a pod's fate); pure.
//! - [`admission`]: AdmissionReview in → AdmissionReview out.
//! - [`cluster`]: what is read from the cluster and kept in step with it: namespace labels
//!   (reflector cache + live GET), Nodes (watch cache + live GET, feasibility counts) and what
//!   creates them on demand, namespaces selecting an undefined group, the webhook entries and
//!   admission policies reconciled with the live configuration, and the audit (is it safe to
//!   enforce a group? `pod-director audit`, and continuously in `serve` under a Lease).
//! - [`server`]: HTTPS serving, probes, hot reload of config and certificate.
//! - [`metrics`], [`telemetry`]: Prometheus metrics; logs and traces.
//! - [`cli`]: the command line.
//! - `testing` (hidden, the `testing` feature and unit tests only): in-memory namespaces and nodes,
//!   the admission path on them and the load harness's floor server, for `tests/`, the benches and
//!   e2e; not an API.
//!
//! These eight modules are the crate's public surface (the binary, `tests/`, the benches and e2e
//! use it); everything below them is private or re-exported by them.

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
