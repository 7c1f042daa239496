//! The harness of pod-director's end-to-end suites, shared by the three of them: the scenario
//! suite (`scenarios/`, run by `e2e/run`), the observability stack (`tracing/`, `e2e/tracing/run`)
//! and the scale simulation (`scale/`, `e2e/scale/run`).
//!
//! - [`harness`]: one [`harness::Env`] per scenario — the control plane, a pod-director of this
//!   checkout (local mode) or the chart's install (cluster mode), namespaces, webhook
//!   configurations, and the tools around them (Jaeger, Prometheus, a relay, an in-process webhook).
//! - [`fixtures`]: the pods the scenarios create and the placement they must end up with, written
//!   out by hand from `e2e/scenarios/values.yaml`.

pub mod fixtures;
pub mod harness;
