//! pod-director's end-to-end scenarios against a real Kubernetes API server.
//!
//! ```sh
//! e2e/run                                   # everything: tools, cluster, this suite, teardown
//! # or, with a cluster already started (e2e/cluster.sh start; eval "$(e2e/cluster.sh env)"):
//! cargo test --test scenarios -- --test-threads=1
//! ```
//!
//! Two modes, local (the default: every scenario starts its own pod-director from this
//! checkout) and cluster (`E2E_MODE=cluster`: the chart installed it), are described in
//! `harness`, with the environment each needs. Scenarios that need to control the process
//! print `SKIPPED <scenario> in cluster mode: <why>` and pass; those running a webhook
//! inside the test process need `E2E_STUB_HOST` there (on kind: the docker network's
//! gateway). Every scenario uses namespaces of its own, `e2e-<scenario>-<random>`,
//! deleted at the end; pod-director's log of each local scenario stays in
//! `$E2E_STATE_DIR/logs/scenarios/`.

use pod_director_e2e::{fixtures, harness};

mod affinity;
mod alternatives;
mod audit;
mod conflicts;
mod differential;
mod in_tree;
mod in_tree_audit;
mod lifecycle;
mod live_config;
mod modes;
mod node_bindings;
mod nodes;
mod policies;
mod provisioning;
mod reconcile_yields;
mod reports;
mod reservation;
mod reservation_bindings;
mod scheduling;
mod tenants;
mod webhooks;
mod workloads;
