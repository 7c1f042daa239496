//! pod-director's end-to-end scenarios against a real Kubernetes API server.
//!
//! ```sh
//! e2e/run                                   # everything: tools, cluster, this suite, teardown
//! # or, with a cluster already started (e2e/cluster.sh start; eval "$(e2e/cluster.sh env)"):
//! cargo build && cargo test --features e2e --test e2e -- --test-threads=1
//! ```
//!
//! Two modes (see `harness`):
//! - **local** (default): needs `KUBECONFIG` and `E2E_STATE_DIR` from
//!   `e2e/cluster.sh env`; every scenario starts its own pod-director from this
//!   checkout on loopback and registers the chart's webhook configurations for it.
//! - **cluster** (`E2E_MODE=cluster`): pod-director installed by the chart with
//!   `-f e2e/scenarios/values.yaml` (release `E2E_RELEASE`, default `pod-director`,
//!   in namespace `E2E_NAMESPACE`, default `pod-director`). Scenarios that need to
//!   control the process print `SKIPPED <scenario> in cluster mode: <why>` and pass:
//!   the config reload, the certificate rotation, pod-director stopped, and the
//!   forced namespace-cache miss (which then runs without forcing the miss).
//!   Scenarios running a webhook inside the test process (reinvocation, a later
//!   webhook stripping a toleration) need `E2E_STUB_HOST`, an address of this
//!   machine the API server reaches (on kind: the docker network's gateway).
//!
//! Scenarios run one at a time (webhook configurations are cluster-wide): each
//! holds a global lock, so `--test-threads=1` is optional. Every scenario uses
//! namespaces of its own, `e2e-<scenario>-<random>`, deleted at the end.
//! pod-director's log of each local scenario stays in
//! `$E2E_STATE_DIR/logs/scenarios/`.

mod fixtures;
mod harness;

mod affinity;
mod audit;
mod conflicts;
mod lifecycle;
mod live_config;
mod modes;
mod nodes;
mod tenants;
mod webhooks;
mod workloads;
