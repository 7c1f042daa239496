//! pod-director: a Kubernetes admission webhook that places the pods of chosen
//! namespaces on chosen nodes, log-first.
//!
//! - [`app`]: the composition root of `serve`: client, caches, server, audit, reconciler, drain.
//! - [`config`]: the one typed configuration, strictly validated.
//! - [`placement`]: the pure engine (plan, verify, decide).
//! - [`admission`]: AdmissionReview in → AdmissionReview out.
//! - [`namespaces`]: namespace labels (reflector cache + live GET).
//! - [`orphans`]: namespaces selecting a group the configuration does not define.
//! - [`nodes`]: node labels, taints and cordons (watch cache + live GET), feasibility counts.
//! - [`namespace_guard`]: who may change a namespace's group label (`/validate-namespace`).
//! - [`server`]: HTTPS serving, probes, hot reload of config and certificate.
//! - [`metrics`], [`telemetry`]: Prometheus metrics; logs and traces.
//! - [`webhooks`]: the webhook entries' namespaceSelectors, reconciled with the live configuration.
//! - [`audit`]: is it safe to enforce a group? Running pods and workload templates decided as enforce
//!   would, a readiness verdict per group (`pod-director audit`, and continuously in `serve`).
//! - [`cli`]: the command line.
//! - `support` (hidden): what tests and benchmarks share (log capture, the load floor server, in-memory
//!   namespaces and nodes); not an API.
//! - `fixtures` (hidden): the AdmissionReview builder of the tests and benches.

/// A fieldless enum whose variants have fixed names (label values, log fields, config values):
/// `as_str` (and `Display`) gives a variant's name and `ALL` lists the variants in declaration order.
macro_rules! named_enum {
    ($(#[$attr:meta])* $vis:vis enum $type:ident {
        $($(#[$variant_attr:meta])* $variant:ident => $name:literal,)*
    }) => {
        $(#[$attr])*
        $vis enum $type {
            $($(#[$variant_attr])* $variant,)*
        }

        impl $type {
            #[allow(dead_code)] // Not every enum's variants are listed.
            pub const ALL: [$type; [$($name),*].len()] = [$($type::$variant),*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($type::$variant => $name,)*
                }
            }
        }

        impl std::fmt::Display for $type {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub mod admission;
pub mod app;
pub mod audit;
pub mod cli;
pub mod config;
#[doc(hidden)]
pub mod fixtures;
pub mod metrics;
pub mod namespace_guard;
pub mod namespaces;
pub mod nodes;
pub mod orphans;
pub mod placement;
pub mod provisioners;
pub mod server;
#[doc(hidden)]
pub mod support;
pub mod telemetry;
pub mod webhooks;
