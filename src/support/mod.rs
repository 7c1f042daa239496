//! Test and benchmark support: shared by the unit tests, `tests/`, `benches/` and `e2e/`,
//! never used by pod-director itself, and not part of its API (hidden from the docs).
//! `mod.rs`: the log capture, the `/metrics` sample reader, an admission path on a test config and its answer
//! to a review, a JSON value's pointers and a condition polled until it holds; `floor.rs`: the load harness's
//! no-work floor server; `mounted.rs`: kubelet-style mounted directories; `sources.rs`: in-memory namespaces
//! and nodes. The engine's helpers (a test config, a node, a toleration, `assert_contains`, the scheduler's
//! reading of required node affinity) are the engine's own (`pod_director_engine::testing`), re-exported here.

mod floor;
mod mounted;
mod sources;

pub use floor::{CannedServer, start_canned};
pub use mounted::MountedDir;
pub use pod_director_engine::testing::{assert_contains, config, loaded, node, scheduler, toleration};
pub use sources::{StaticNamespaces, StaticNodes};

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use serde_json::Value;
use tracing_subscriber::fmt::MakeWriter;

use crate::admission::Admission;
use crate::app::Metrics;
use crate::namespaces::NamespaceSource;
use crate::placement::Webhook;

/// Every JSON Pointer inside `value` (objects and arrays, depth first), its tokens escaped.
pub fn json_pointers(value: &Value) -> Vec<String> {
    fn walk(value: &Value, at: &str, out: &mut Vec<String>) {
        let children: Vec<(String, &Value)> = match value {
            Value::Object(map) => map
                .iter()
                .map(|(k, v)| (k.replace('~', "~0").replace('/', "~1"), v))
                .collect(),
            Value::Array(items) => items.iter().enumerate().map(|(i, v)| (i.to_string(), v)).collect(),
            _ => Vec::new(),
        };
        for (token, child) in children {
            let pointer = format!("{at}/{token}");
            out.push(pointer.clone());
            walk(child, &pointer, out);
        }
    }
    let mut out = Vec::new();
    walk(value, "", &mut out);
    out
}

/// Polls `check` every 10 ms until it holds; fails naming `what` after 10 s.
pub async fn until(what: &str, check: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

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

/// The value of the first sample of a `/metrics` text whose line starts with
/// `line_start` (e.g. `pod_director_config_reloads_total{result="error"}`).
pub fn metric_value(text: &str, line_start: &str) -> Option<f64> {
    text.lines()
        .find(|line| line.starts_with(line_start))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}

/// A log output that keeps every byte written to it, for a subscriber under test
/// (`JsonLayer::new(capture.clone())`, `fmt().with_writer(capture.clone())`).
#[derive(Clone, Default)]
pub struct LogCapture(Arc<Mutex<Vec<u8>>>);

impl LogCapture {
    /// Everything written so far, as text.
    pub fn text(&self) -> String {
        let bytes = self.0.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The lines written so far that are JSON objects (log lines), in order.
    pub fn json_lines(&self) -> Vec<Value> {
        self.text()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .collect()
    }
}

impl io::Write for LogCapture {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| io::Error::other("a writer panicked"))?
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'w> MakeWriter<'w> for LogCapture {
    type Writer = LogCapture;

    fn make_writer(&'w self) -> Self::Writer {
        self.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    #[test]
    fn a_capture_keeps_what_every_clone_writes_and_parses_the_json_lines() {
        let capture = LogCapture::default();
        let mut writer = capture.make_writer();
        writer.write_all(b"{\"a\":1}\nnot json\n").expect("write");
        capture.clone().write_all(b"{\"b\":2}\n").expect("write");
        assert_eq!(capture.text(), "{\"a\":1}\nnot json\n{\"b\":2}\n");
        assert_eq!(
            capture.json_lines(),
            [serde_json::json!({"a": 1}), serde_json::json!({"b": 2})]
        );
    }
}
