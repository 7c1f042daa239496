//! What the in-process and child-process server tests send and read on the wire: an HTTPS client
//! trusting the test CA, raw TLS connections offering an ALPN, reading until the server closes,
//! and the HTTP/2 frames they look for.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::pki::Pki;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientKind {
    /// Keeps connections alive (HTTP/2 when offered).
    Pooled,
    /// A new TLS connection for every request.
    FreshConnections,
    /// HTTP/1.1 only.
    Http1,
}

/// An HTTPS client trusting only the test CA.
pub fn client(pki: &Pki, kind: ClientKind) -> reqwest::Client {
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

/// A raw TLS connection to `addr` trusting the test CA, offering `alpn` (`h2`, `http/1.1`).
pub async fn tls_connect(
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
pub async fn try_tls_connect(
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
pub async fn closed_within<S>(stream: &mut S, limit: Duration) -> Option<(Duration, Vec<u8>)>
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
pub const HTTP2_PREFACE_AND_SETTINGS: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// Whether `bytes` (frames from the server) hold an HTTP/2 GOAWAY frame.
pub fn has_goaway(bytes: &[u8]) -> bool {
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
