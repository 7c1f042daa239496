//! The HTTPS admission server and its plain-HTTP probe port.
//!
//! warp routes the requests; warp 0.4 has no TLS, so each accepted TCP
//! connection goes through tokio-rustls (certificate picked per handshake, see
//! [`tls`]) and is served by hyper-util's auto builder (HTTP/1.1 or HTTP/2,
//! by ALPN/preface). Each connection has its own timers, and the admission
//! port holds at most `--max-connections` (derived from the descriptor
//! limit, see [`limits`]); see [`connection`]. A shutdown stops accepting
//! (taking the connections the kernel already queued), answers every request
//! that has arrived, closes each connection once it is quiet, and cuts what
//! remains after `--shutdown-timeout`; the outcome is logged.
//!
//! HTTP/TLS serving only: what it serves (the admission path, the metrics text) is composed
//! by [`crate::app`], and tests start the whole thing in-process with [`crate::app::start`].
//!
//! | file | what |
//! |---|---|
//! | `server.rs` | the module's names, [`ServerError`] |
//! | `settings.rs` | the [`Settings`] serving takes |
//! | `start.rs` | [`listen`]: the certificate and its reloader, both ports bound and served |
//! | `serve.rs` | a port's accept loop, the connection cap at accept, the drain |
//! | `connection.rs` | one connection: TLS, HTTP/1.1 or HTTP/2, its timers; [`ConnectionMetrics`] |
//! | `limits.rs` | the connection cap from the descriptor limit |
//! | `routes.rs` | warp routes: the admission endpoints, the probes |
//! | `reload.rs` | hot reload of the configuration and the certificate; [`ReloadMetrics`] |
//! | `tls.rs` | the serving certificate, picked per handshake |

// The floor server of the load harness (src/testing/floor.rs) serves on this exact stack.
pub(crate) mod connection;
pub(crate) mod limits;
pub(crate) mod reload;
pub(crate) mod routes;
pub(crate) mod serve;
mod settings;
pub(crate) mod start;
pub(crate) mod tls;

use std::net::SocketAddr;

pub use self::connection::{ConnectionMetrics, ConnectionTimeout, Rejection, Timeouts};
pub use self::reload::{ReloadMetrics, ReloadResult};
pub(crate) use self::routes::Scrape;
pub use self::settings::Settings;
use self::start::Respond;
pub(crate) use self::start::{listen, tls_acceptor};
pub(crate) use self::tls::TlsError;
pub use self::tls::{TlsFiles, tls_provider};
use pod_director_engine::config::ConfigError;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("serving certificate: {0}")]
    Tls(#[from] TlsError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}
