//! pod-director's test kit: what the unit tests, `tests/`, `benches/` and `e2e/` share, in a crate of
//! its own so that the product's release build does not compile it (a dev-dependency only).
//!
//! - `lib.rs`: the checkout's root ([`repo`]), the log capture, the `/metrics` sample reader, a JSON value's pointers and a condition
//!   polled until it holds.
//! - [`fixtures`]: the AdmissionReview builder; [`pki`]: a test CA issuing serving certificates;
//!   [`mounted`]: kubelet-style mounted directories.
//! - The benches' support: [`pods`] (reviews of three sizes), [`nodes`] (cloud-like Node objects),
//!   [`stats`] (median, CPU time, paired rounds), [`alloc`] (the counting allocator).
//! - Re-exported: the engine's helpers (a test config, a node, a toleration, `assert_contains`, a
//!   review's JSON edited, the scheduler's reading of required node affinity:
//!   `pod_director_engine::testing`).
//!
//! It names none of the product's types (those helpers are the product's own, `pod_director::testing`:
//! in-memory namespaces and nodes, the admission path on them, the floor server), so it does not
//! depend on the product: the product's unit tests use it as a dev-dependency without a cycle.

pub mod alloc;
pub mod fixtures;
pub mod mounted;
pub mod nodes;
pub mod pki;
pub mod pods;
pub mod stats;

pub use mounted::MountedDir;
pub use pod_director_engine::testing::{assert_contains, config, loaded, node, scheduler, toleration, with, without};

use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tracing_subscriber::fmt::MakeWriter;

/// The checkout: the workspace root, where the docs, the chart, the examples and the scripts are
/// (this crate is `crates/testkit`).
pub fn repo() -> &'static Path {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().and_then(Path::parent).unwrap_or(manifest)
}

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
mod tests;
