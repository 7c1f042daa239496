//! pod-director's engine: the pure part of the webhook, no I/O, no clock, no async runtime.
//! The product (the root package) imports it as `pod_director_engine`.
//!
//! - [`config`]: the one typed configuration, strictly validated.
//! - [`decision`]: the one entry: an object decided as a webhook would (`Decidable`, `decide`), and a
//!   pod's fate across the webhooks (`fate`), which the audit and `explain` consume.
//! - [`placement`]: the pure engine (plan, verify, decide).
//! - [`in_tree`]: the in-tree admission plugins PodNodeSelector and PodTolerationRestriction, decided
//!   as kube-apiserver decides them (`inTreePlugins`); [`plugin_config`]: their own files, read;
//!   [`migration`]: their annotations turned into groups, and the pods the two decide differently.
//! - [`namespace_guard`]: who may change a namespace's group label (`/validate-namespace`).
//! - [`audit`]: the audit's pure half: a running pod or template decided as its re-creation
//!   would be, the tallies, findings and verdicts per group and reservation, the workload
//!   ledger the reports consume, and the report as text or JSON (the product lists the cluster).
//! - [`compile`]: the cluster objects pod-director owns, compiled from the configuration: the
//!   admission policies and the webhook entries (with the JSON Patch that brings a live webhook
//!   configuration to them); the product applies them.
//! - [`provision`]: who could create a node on demand (Karpenter NodePools, Cluster API node
//!   groups, a group's declaration), read from their objects.
//! - [`syntax`]: Kubernetes name syntax (label keys and values, DNS names), for the configuration and
//!   the admission requests alike.
//! - `testing` (hidden; the `testing` feature, and the engine's unit tests): what the tests build their
//!   inputs with (a test config, a node, a toleration, a JSON edit, `assert_contains`, the scheduler
//!   oracle); not an API.

/// A fieldless enum whose variants have fixed names (label values, log fields, config values):
/// `as_str` (and `Display`) gives a variant's name and `ALL` lists the variants in declaration order.
/// Exported for the product's own enums (`#[macro_use] extern crate pod_director_engine`).
#[doc(hidden)]
#[macro_export]
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

pub mod audit;
pub mod compile;
pub mod config;
pub mod decision;
pub mod in_tree;
pub mod migration;
pub mod namespace_guard;
pub mod placement;
pub mod plugin_config;
pub mod provision;
pub mod syntax;
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod testing;
