//! pod-director: a Kubernetes admission webhook that places the pods of chosen
//! namespaces on chosen nodes, log-first.
//!
//! - [`config`]: the one typed configuration, strictly validated.
//! - [`placement`]: the pure engine (plan, verify, decide).
//! - [`admission`]: AdmissionReview in → AdmissionReview out.
//! - [`namespaces`]: namespace labels (reflector cache + live GET).
//! - [`namespace_guard`]: who may change a namespace's group label (`/validate-namespace`).
//! - [`server`]: HTTPS serving, probes, hot reload of config and certificate.
//! - [`metrics`], [`telemetry`]: Prometheus metrics; logs and traces.
//! - [`cli`]: the command line.
pub mod admission;
pub mod cli;
pub mod config;
pub mod metrics;
pub mod namespace_guard;
pub mod namespaces;
pub mod placement;
pub mod server;
pub mod telemetry;
