//! The part of the test kit that must live in the product (the `testing` feature, and the unit
//! tests): the helpers whose types are the product's own — in-memory namespace and node sources
//! (`sources.rs`) implementing the product's source traits, and the admission path built on them.
//! The product's unit tests are compiled as a second copy of the product, whose traits and types
//! do not unify with those of the copy the test kit (`crates/testkit`) links, so these cannot move
//! there; the test kit re-exports them for `tests/`, `benches/` and `e2e/`. Never used by
//! pod-director itself, not compiled into its release build, and not part of its API.

mod sources;

pub use sources::{StaticNamespaces, StaticNodes};

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use pod_director_engine::testing::loaded;
use serde_json::Value;

use crate::admission::Admission;
use crate::app::Metrics;
use crate::cluster::namespaces::NamespaceSource;
use crate::placement::Webhook;

/// `admission`'s answer to the review `body` at `webhook`: the HTTP status and the AdmissionReview sent back.
pub async fn answer(admission: &Admission, webhook: Webhook, body: &[u8]) -> (http::StatusCode, Value) {
    let reply = admission.review(webhook, &http::HeaderMap::new(), body).await;
    (
        reply.status,
        serde_json::from_slice(&reply.body).expect("a JSON review"),
    )
}

/// The admission path on the configuration `config_yaml` (a test's, valid), its
/// namespaces labelled for their groups (`(namespace, group)`), and its metrics.
pub fn admission(config_yaml: &str, namespaces: &[(&str, &str)]) -> (Admission, Metrics) {
    let source = StaticNamespaces::new();
    for (name, group) in namespaces {
        source.insert(name, [("pod-director/group".to_owned(), (*group).to_owned())].into());
    }
    admission_on(config_yaml, Arc::new(source))
}

/// The admission path on the configuration `config_yaml` (a test's, valid) and the namespace source `namespaces`.
pub fn admission_on(config_yaml: &str, namespaces: Arc<dyn NamespaceSource>) -> (Admission, Metrics) {
    let metrics = Metrics::register();
    let live = Arc::new(ArcSwap::from_pointee(loaded(config_yaml)));
    let admission = Admission::new(live, namespaces, metrics.admission.clone(), Duration::from_secs(5));
    (admission, metrics)
}
