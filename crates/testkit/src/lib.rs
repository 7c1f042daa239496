//! pod-director's test kit: what the unit tests, `tests/`, `benches/` and `e2e/` share, in a crate of
//! its own so that the product's release build does not compile it (a dev-dependency only).
//!
//! - `lib.rs`: the checkout's root ([`repo`]), the log capture, the `/metrics` sample reader, a JSON value's pointers and a condition
//!   polled until it holds ([`until`], [`eventually`]).
//! - [`fixtures`]: the AdmissionReview builder; [`pki`]: a test CA issuing serving certificates;
//!   [`mounted`]: kubelet-style mounted directories; [`wire`]: an HTTPS client trusting the test CA,
//!   raw TLS connections and the HTTP/2 frames the server tests read.
//! - The binary end to end ([`binary`]): [`cli`], a command and readers of what it printed; [`child`],
//!   `pod-director serve` as a child process against a fake Kubernetes API on loopback.
//! - The benches' support: [`pods`] (reviews of three sizes), [`nodes`] (cloud-like Node objects),
//!   [`stats`] (median, CPU time, paired rounds), [`alloc`] (the counting allocator).
//! - Re-exported: the engine's helpers (a test config, a node, a toleration, `assert_contains`, a
//!   review's JSON edited, the scheduler's reading of required node affinity:
//!   `pod_director_engine::testing`).
//!
//! It names none of the product's types (those helpers are the product's own, `pod_director::testing`:
//! in-memory namespaces and nodes, the admission path on them, the floor server, the in-process
//! server over TLS, the telemetry harness), so it does not depend on the product: the product's unit
//! tests use it as a dev-dependency without a cycle. These two are the homes of the test helpers
//! (with the engine's own `testing` module, for the engine's unit tests).

pub mod alloc;
pub mod child;
pub mod cli;
pub mod fixtures;
pub mod mounted;
pub mod nodes;
pub mod pki;
pub mod pods;
pub mod stats;
pub mod wire;

pub use mounted::MountedDir;
pub use pod_director_engine::testing::{assert_contains, config, loaded, node, scheduler, toleration, with, without};

use std::io;
use std::path::{Path, PathBuf};
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

/// Waits until `check` holds, polling every 50 ms, for at most `limit`.
pub async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    check().await
}

/// The product's binary, as cargo built it for the running integration test or bench
/// (`CARGO_BIN_EXE_pod-director`, else `pod-director` in the test executable's profile directory).
pub fn binary() -> PathBuf {
    std::env::var_os("CARGO_BIN_EXE_pod-director").map_or_else(
        || {
            // The test executable is <target dir>/<profile dir>/deps/<name>-<hash>.
            let exe = std::env::current_exe().expect("the test executable's path");
            let profile_dir = exe
                .parent()
                .and_then(Path::parent)
                .expect("the test executable sits in <profile>/deps");
            profile_dir.join("pod-director")
        },
        PathBuf::from,
    )
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
