//! pod-director: a Kubernetes admission webhook that places the pods of chosen
//! namespaces on chosen nodes, log-first.
//!
//! - [`config`]: the one typed configuration, strictly validated.
//! - [`placement`]: the pure engine (plan, verify, decide).
//! - [`server`]: HTTPS serving, admission reviews, namespace cache, reloads.
//! - [`cli`]: the command line.
pub mod cli;
pub mod config;
pub mod placement;
pub mod server;
