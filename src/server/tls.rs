//! Serving certificates: PEM files in, a rustls server configuration out, and
//! a resolver that hands every new connection the current certificate.
//!
//! Rotation (cert-manager, kubelet's `..data` symlink swap) replaces the
//! [`CertifiedKey`] behind an [`ArcSwap`]; connections already open keep the
//! certificate they were established with, new handshakes get the new one,
//! and no request is dropped. A half-written or mismatched pair is refused and
//! the previous certificate stays in use.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio_rustls::rustls;
use tokio_rustls::rustls::crypto::CryptoProvider;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;

/// Why a certificate pair could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} holds no PEM CERTIFICATE block")]
    NoCertificate { path: PathBuf },
    #[error("{path} is not valid PEM: {source}")]
    Pem {
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("the private key in {key} does not match the certificate in {cert}, or is unusable: {source}")]
    KeyMismatch {
        cert: PathBuf,
        key: PathBuf,
        #[source]
        source: rustls::Error,
    },
    #[error("cannot build the TLS configuration: {0}")]
    Config(#[source] rustls::Error),
}

/// Where the serving certificate and its key are read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TlsFiles {
    pub fn paths(&self) -> [&Path; 2] {
        [&self.cert, &self.key]
    }
}

/// The crypto provider used for serving (ring; aws-lc-rs is not compiled in).
pub fn tls_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Parses a certificate chain and its private key, checking that they belong together.
pub(crate) fn certified_key(files: &TlsFiles, cert_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::Pem {
            path: files.cert.clone(),
            source,
        })?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate {
            path: files.cert.clone(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|source| TlsError::Pem {
        path: files.key.clone(),
        source,
    })?;
    CertifiedKey::from_der(chain, key, &tls_provider()).map_err(|source| TlsError::KeyMismatch {
        cert: files.cert.clone(),
        key: files.key.clone(),
        source,
    })
}

/// Reads and parses the pair from disk.
pub(crate) fn load(files: &TlsFiles) -> Result<CertifiedKey, TlsError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| TlsError::Read {
            path: path.to_owned(),
            source,
        })
    };
    certified_key(files, &read(&files.cert)?, &read(&files.key)?)
}

/// Hands out the current certificate to each new handshake.
#[derive(Debug)]
pub(crate) struct CertResolver {
    current: ArcSwap<CertifiedKey>,
}

impl CertResolver {
    pub(crate) fn new(initial: CertifiedKey) -> Self {
        Self {
            current: ArcSwap::from_pointee(initial),
        }
    }

    /// Makes `next` the certificate of every connection from now on.
    pub(crate) fn replace(&self, next: CertifiedKey) {
        self.current.store(Arc::new(next));
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// A server configuration using `resolver`, offering HTTP/2 and HTTP/1.1 (ALPN).
pub(crate) fn server_config(resolver: Arc<CertResolver>) -> Result<rustls::ServerConfig, TlsError> {
    let mut config = rustls::ServerConfig::builder_with_provider(tls_provider())
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests;
