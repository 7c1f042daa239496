//! Shared harness for the in-process server tests: certificates from a test CA,
//! kubelet-style mounted directories (`..data` symlink swaps), the server on
//! port 0, a real HTTPS client, and AdmissionReview bodies shaped like the API
//! server's.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub(crate) mod child;
pub(crate) mod cli;

pub(crate) use pod_director_testkit::pki::Pki;

use pod_director::app::RunningServer;
use pod_director::cluster::NamespaceSource;
use pod_director::server::{Settings, Timeouts, TlsFiles};
use pod_director::testing::StaticNamespaces;
pub(crate) use pod_director_testkit::MountedDir;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// The server running in-process over real TLS, with its client.
pub(crate) struct Harness {
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

pub(crate) struct Options {
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
    pub(crate) async fn start(config_yaml: &str) -> Self {
        Self::start_with(config_yaml, Options::default(), None).await
    }

    /// Starts with `source` as the namespace source when given (else a [`StaticNamespaces`]).
    pub(crate) async fn start_with(
        config_yaml: &str,
        options: Options,
        source: Option<Arc<dyn NamespaceSource>>,
    ) -> Self {
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
        let server = pod_director::app::start(settings, source).await.expect("server starts");
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
    pub(crate) fn label(&self, namespace: &str, group: &str) {
        self.namespaces
            .insert(namespace, labels(&[("pod-director/group", group)]));
    }

    /// POSTs a review to `/mutate` or `/validate`; returns the status and the parsed body.
    pub(crate) async fn post(&self, endpoint: &str, review: &Value) -> (StatusCode, Value) {
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientKind {
    /// Keeps connections alive (HTTP/2 when offered).
    Pooled,
    /// A new TLS connection for every request.
    FreshConnections,
    /// HTTP/1.1 only.
    Http1,
}

/// An HTTPS client trusting only the test CA.
pub(crate) fn client(pki: &Pki, kind: ClientKind) -> reqwest::Client {
    let ca = reqwest::Certificate::from_pem(pki.ca_pem().as_bytes()).expect("CA cert");
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(ca)
        .tls_info(true)
        .timeout(Duration::from_secs(20));
    match kind {
        ClientKind::Pooled => {}
        ClientKind::FreshConnections => builder = builder.pool_max_idle_per_host(0),
        ClientKind::Http1 => builder = builder.http1_only(),
    }
    builder.build().expect("client")
}

pub(crate) fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

/// A pod as a ReplicaSet creates it ([`pod_director_testkit::fixtures::replica_set_pod`]), with the
/// DefaultTolerationSeconds tolerations; `spec` entries are merged into it.
pub(crate) fn pod(namespace: &str, extra_spec: Value) -> Value {
    let mut pod = pod_director_testkit::fixtures::replica_set_pod(namespace);
    pod["spec"]["tolerations"] = json!([
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    ]);
    if let (Some(spec), Value::Object(extra)) = (pod["spec"].as_object_mut(), extra_spec) {
        for (k, v) in extra {
            if k == "tolerations" {
                if let (Some(Value::Array(have)), Value::Array(more)) = (spec.get_mut("tolerations"), v) {
                    have.extend(more);
                }
            } else {
                spec.insert(k, v);
            }
        }
    }
    pod
}

/// A pod AdmissionReview exactly as kube-apiserver sends it ([`pod_director_testkit::fixtures::Review`]).
pub(crate) fn review(uid: &str, operation: &str, object: &Value, old_object: Option<&Value>) -> Value {
    let review = pod_director_testkit::fixtures::Review::pod(operation, object.clone()).uid(uid);
    match old_object {
        Some(old) => review.old(old.clone()).value(),
        None => review.value(),
    }
}

/// A CREATE review of a plain [`pod`] in `namespace`.
pub(crate) fn pod_create(uid: &str, namespace: &str) -> Value {
    review(uid, "CREATE", &pod(namespace, json!({})), None)
}

/// The bytes of a CREATE review of a plain [`pod`] in namespace `ns`.
pub(crate) fn review_bytes(uid: &str) -> Vec<u8> {
    serde_json::to_vec(&pod_create(uid, "ns")).unwrap_or_default()
}

/// A whole HTTP/1.1 `POST /mutate` of [`review_bytes`].
pub(crate) fn raw_request(uid: &str) -> Vec<u8> {
    let body = review_bytes(uid);
    let mut request = format!(
        "POST /mutate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(&body);
    request
}

/// `pod` with `patch` applied, as the API server would.
pub(crate) fn patched(pod: &Value, patch: &json_patch::Patch) -> Value {
    let mut doc = pod.clone();
    json_patch::patch(&mut doc, patch).expect("the patch applies to the original pod");
    doc
}

/// Waits until `check` holds, polling every 50 ms, for at most `limit`.
pub(crate) async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
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

/// A raw TLS connection to `addr` trusting the test CA, offering `alpn` (`h2`, `http/1.1`).
pub(crate) async fn tls_connect(
    addr: SocketAddr,
    pki: &Pki,
    alpn: &[&str],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    try_tls_connect(addr, pki, alpn)
        .await
        .expect("TCP connect and TLS handshake")
}

/// [`tls_connect`], or the error of the connect or of the handshake (a server at its
/// connection cap closes a connection at accept).
pub(crate) async fn try_tls_connect(
    addr: SocketAddr,
    pki: &Pki,
    alpn: &[&str],
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    use tokio_rustls::rustls;
    let mut roots = rustls::RootCertStore::empty();
    use rustls::pki_types::pem::PemObject as _;
    let ca = rustls::pki_types::CertificateDer::from_pem_slice(pki.ca_pem().as_bytes()).expect("CA PEM");
    roots.add(ca).expect("CA certificate");
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
}

/// Reads from `stream` until the server closes it (EOF or an error), for at most `limit`:
/// how long that took and the bytes received; `None` when still open after `limit`.
pub(crate) async fn closed_within<S>(stream: &mut S, limit: Duration) -> Option<(Duration, Vec<u8>)>
where
    S: tokio::io::AsyncRead + Unpin,
{
    use tokio::io::AsyncReadExt as _;
    let started = tokio::time::Instant::now();
    let mut received = Vec::new();
    let mut buf = [0_u8; 4096];
    loop {
        let left = limit.checked_sub(started.elapsed())?;
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some((started.elapsed(), received)),
            Ok(Ok(n)) => received.extend_from_slice(&buf[..n]),
        }
    }
}

/// The HTTP/2 connection preface followed by an empty SETTINGS frame.
pub(crate) const HTTP2_PREFACE_AND_SETTINGS: &[u8] =
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// Whether `bytes` (frames from the server) hold an HTTP/2 GOAWAY frame.
pub(crate) fn has_goaway(bytes: &[u8]) -> bool {
    let mut at = 0;
    while at + 9 <= bytes.len() {
        let length = (usize::from(bytes[at]) << 16) | (usize::from(bytes[at + 1]) << 8) | usize::from(bytes[at + 2]);
        if bytes[at + 3] == 0x7 {
            return true;
        }
        at += 9 + length;
    }
    false
}

/// A metric's value in `/metrics` of the harness (the first line starting with `line_start`).
pub(crate) async fn metric(harness: &Harness, line_start: &str) -> Option<f64> {
    let text = reqwest::get(format!("{}/metrics", harness.probe))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    pod_director_testkit::metric_value(&text, line_start)
}

/// Namespaces that take `delay` to answer, to keep a request in flight.
pub(crate) struct Slow {
    pub inner: pod_director::testing::StaticNamespaces,
    pub delay: std::time::Duration,
}

impl pod_director::cluster::NamespaceSource for Slow {
    fn cached(&self, _name: &str) -> Option<pod_director::cluster::Labels> {
        None
    }
    fn fetch<'a>(
        &'a self,
        name: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<Option<pod_director::cluster::Labels>, pod_director::cluster::LookupError>>
    {
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
