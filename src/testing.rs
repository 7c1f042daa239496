//! The test helpers whose types are the product's own (the `testing` feature, and the unit tests):
//! in-memory namespace and node sources (`sources.rs`) implementing the product's source traits,
//! the admission path built on them, the load harness's floor server on the admission port's
//! stack (`floor.rs`), an in-process API server paging the lists the audit reads (`paged.rs`),
//! the server in-process over real TLS ([`harness`]) and the reviews run through the production
//! telemetry layers ([`telemetry`]). `tests/`, `benches/` and `e2e/` use them with the `testing`
//! feature; what names none of the product's types is the test kit's (`crates/testkit`), so the
//! product's unit tests link one copy of it. Never used by pod-director itself, not compiled into
//! its release build.

mod floor;
pub mod harness;
mod paged;
mod sources;
pub mod telemetry;

pub use floor::{CannedServer, start_canned};
pub use paged::PagedCluster;
pub use sources::{StaticNamespaces, StaticNodes};

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use pod_director_engine::testing::loaded;
use serde_json::Value;

use crate::admission::Admission;
use crate::app::Metrics;
use crate::cluster::namespaces::NamespaceSource;
use pod_director_engine::placement::Webhook;

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

/// What one audit scan saw: pods, templates, namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scanned {
    pub pods: u64,
    pub templates: u64,
    pub namespaces: usize,
    /// Pods counted would_deny, all groups.
    pub would_deny_pods: u64,
}

/// One audit scan (as `pod-director audit` runs it, without node data) through `client` with
/// the configuration `config_yaml` (a test's, valid) and `page_size` objects per list request.
pub async fn audit_scan(client: &kube::Client, config_yaml: &str, page_size: u32) -> Result<Scanned, String> {
    let config = pod_director_engine::testing::config(config_yaml);
    let options = crate::cluster::audit::scan::ScanOptions {
        page_size,
        ..Default::default()
    };
    let audit = crate::cluster::audit::scan::scan(client, &config, None, &options, &mut |_| {})
        .await
        .map_err(|e| e.to_string())?;
    Ok(Scanned {
        pods: audit.pods_scanned,
        templates: audit.templates_scanned,
        namespaces: audit.namespaces_scanned,
        would_deny_pods: audit.groups.iter().map(|g| g.pods.would_deny).sum(),
    })
}
