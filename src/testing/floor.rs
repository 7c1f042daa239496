//! The floor of the load harness (`benches/load.rs`): a server on the admission port's
//! exact stack that answers a canned review without reviewing anything.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tracing::warn;
use warp::{Filter, Reply};

use crate::server::connection::{ConnectionMetrics, Listener, Rejection, Tracker};
use crate::server::routes::{rejection, review_reply, review_request};
use crate::server::start::{bind, builder, local_addr, respond};
use crate::server::{ServerError, Timeouts, TlsFiles, tls};

/// A server on the admission port's exact stack — TLS from `tls`, hyper-util's
/// auto builder, the request deadline, warp routing and body handling — that
/// answers `canned` to every review without reviewing anything: the floor the
/// load harness (`benches/load.rs`) compares pod-director with.
pub async fn start_canned(
    addr: SocketAddr,
    tls: &TlsFiles,
    max_body_bytes: u64,
    canned: bytes::Bytes,
) -> Result<CannedServer, ServerError> {
    let resolver = Arc::new(tls::CertResolver::new(tls::load(tls)?));
    let acceptor = TlsAcceptor::from(Arc::new(tls::server_config(resolver)?));
    let listener = bind(addr).await?;
    let addr = local_addr(&listener, addr);
    let (shutdown, shutdown_rx) = watch::channel(false);
    let routes = respond(canned_routes(canned, max_body_bytes), Duration::from_secs(10));
    let timeouts = Timeouts::default();
    let metrics = ConnectionMetrics::register(&mut crate::metrics::registry());
    let task = tokio::spawn(crate::server::serve::serve(
        listener,
        Arc::new(Listener {
            name: "floor",
            tls: Some(acceptor),
            respond: routes,
            builder: builder(&timeouts),
            timeouts,
            metrics,
            tracker: Arc::new(Tracker::new(None, Rejection::Limit)),
        }),
        usize::MAX,
        shutdown_rx,
        Duration::from_secs(10),
    ));
    Ok(CannedServer { addr, shutdown, task })
}

/// A started [`start_canned`] server.
pub struct CannedServer {
    pub addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl CannedServer {
    /// Stops accepting and drains in-flight requests.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        if let Err(err) = self.task.await {
            warn!(error = %err, "the canned server ended abnormally");
        }
    }
}

/// `POST /mutate` and `POST /validate` answering `canned` (an AdmissionReview) to
/// every request, after the same routing and body handling as the admission routes:
/// the load harness's floor (`benches/load.rs`), which reviews nothing.
fn canned_routes(
    canned: Bytes,
    max_body_bytes: u64,
) -> impl Filter<Extract = (impl Reply,), Error = Infallible> + Clone {
    let endpoint = move |name: &'static str| {
        let canned = canned.clone();
        review_request(name, max_body_bytes).then(move |_headers: http::HeaderMap, _body: Bytes| {
            let body = canned.to_vec();
            async move { review_reply(body, StatusCode::OK) }
        })
    };
    endpoint("mutate").or(endpoint("validate")).unify().recover(rejection)
}
