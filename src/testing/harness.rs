//! The product's server in-process over real TLS (`tests/`): certificates from the test CA,
//! kubelet-style mounted directories (`..data` symlink swaps), the server on port 0, a real HTTPS
//! client, and a namespace source slow to answer.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use pod_director_testkit::MountedDir;
use pod_director_testkit::pki::Pki;
use pod_director_testkit::wire::{ClientKind, client};
use reqwest::StatusCode;
use serde_json::Value;

use crate::app::RunningServer;
use crate::cluster::{LookupError, NamespaceData, NamespaceSource};
use crate::server::{Settings, Timeouts, TlsFiles};
use crate::testing::StaticNamespaces;

/// The server running in-process over real TLS, with its client.
pub struct Harness {
    pub server: RunningServer,
    pub pki: Pki,
    pub client: reqwest::Client,
    pub config: MountedDir,
    pub tls: MountedDir,
    pub namespaces: Arc<StaticNamespaces>,
    pub base: String,
    pub probe: String,
    _tmp: tempfile::TempDir,
}

pub struct Options {
    pub own_namespace: Option<String>,
    pub request_timeout: Duration,
    pub max_body_bytes: u64,
    pub shutdown_timeout: Duration,
    pub timeouts: Timeouts,
    pub max_connections: Option<usize>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            own_namespace: Some("pod-director".to_owned()),
            request_timeout: Duration::from_secs(5),
            max_body_bytes: 1024 * 1024,
            shutdown_timeout: Duration::from_secs(10),
            timeouts: Timeouts::default(),
            max_connections: None,
        }
    }
}

impl Harness {
    pub async fn start(config_yaml: &str) -> Self {
        Self::start_with(config_yaml, Options::default(), None).await
    }

    /// Starts with `source` as the namespace source when given (else a [`StaticNamespaces`]).
    pub async fn start_with(config_yaml: &str, options: Options, source: Option<Arc<dyn NamespaceSource>>) -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let pki = Pki::new();
        let leaf = pki.leaf("pod-director generation 1");
        let tls = MountedDir::new(
            &tmp.path().join("tls"),
            &[
                ("tls.crt", leaf.cert_pem.as_bytes()),
                ("tls.key", leaf.key_pem.as_bytes()),
            ],
        );
        let config = MountedDir::new(&tmp.path().join("config"), &[("config.yaml", config_yaml.as_bytes())]);
        let namespaces = Arc::new(StaticNamespaces::new());
        let settings = Settings {
            config_path: config.path("config.yaml"),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            probe_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: Some(TlsFiles {
                cert: tls.path("tls.crt"),
                key: tls.path("tls.key"),
            }),
            own_namespace: options.own_namespace,
            request_timeout: options.request_timeout,
            max_body_bytes: options.max_body_bytes,
            reload_poll_interval: Duration::from_millis(200),
            shutdown_timeout: options.shutdown_timeout,
            timeouts: options.timeouts,
            max_connections: options.max_connections,
        };
        let source = source.unwrap_or_else(|| namespaces.clone());
        let server = crate::app::start(settings, source).await.expect("server starts");
        let client = client(&pki, ClientKind::Pooled);
        let base = format!("https://{}", server.addr);
        let probe = format!("http://{}", server.probe_addr);
        Self {
            server,
            pki,
            client,
            config,
            tls,
            namespaces,
            base,
            probe,
            _tmp: tmp,
        }
    }

    /// Labels `namespace` with `pod-director/group=<group>` in the namespace cache.
    pub fn label(&self, namespace: &str, group: &str) {
        self.namespaces.insert(
            namespace,
            BTreeMap::from([("pod-director/group".to_owned(), group.to_owned())]),
        );
    }

    /// POSTs a review to `/mutate` or `/validate`; returns the status and the parsed body.
    pub async fn post(&self, endpoint: &str, review: &Value) -> (StatusCode, Value) {
        let response = self
            .client
            .post(format!("{}{endpoint}", self.base))
            .json(review)
            .send()
            .await
            .expect("request sent");
        let status = response.status();
        let bytes = response.bytes().await.expect("body read");
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        (status, body)
    }
}

/// A metric's value in `/metrics` of the harness (the first line starting with `line_start`).
pub async fn metric(harness: &Harness, line_start: &str) -> Option<f64> {
    let text = reqwest::get(format!("{}/metrics", harness.probe))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    pod_director_testkit::metric_value(&text, line_start)
}

/// Namespaces that take `delay` to answer, to keep a request in flight.
pub struct Slow {
    pub inner: StaticNamespaces,
    pub delay: Duration,
}

impl NamespaceSource for Slow {
    fn cached(&self, _name: &str) -> Option<NamespaceData> {
        None
    }
    fn fetch<'a>(
        &'a self,
        name: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<Option<NamespaceData>, LookupError>> {
        Box::pin(async move {
            tokio::time::sleep(self.delay).await;
            self.inner.fetch(name).await
        })
    }
    fn is_ready(&self) -> bool {
        true
    }
    fn cached_count(&self) -> usize {
        0
    }
}
