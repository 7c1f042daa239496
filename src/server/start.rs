//! Serving both ports ([`listen`]): the admission port (HTTPS unless `--insecure-http`, its
//! certificate reloaded, see [`tls_acceptor`]) and the plain-HTTP probe port, bound and their
//! accept loops running until shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use http::StatusCode;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt as _;
use tracing::{info, warn};
use warp::{Filter, Reply};

use super::connection::{ConnectionMetrics, Listener, Rejection, Tracker};
use super::reload::{self, ReloadMetrics};
use super::routes::{self, Scrape};
use super::{ServerError, Settings, Timeouts, limits, serve, tls};
use crate::admission::Admission;

/// Binds both ports and serves them until `shutdown`: `admission` answers the admission
/// endpoints (over TLS with `acceptor`, else plain HTTP), `scrape` renders `/metrics`.
/// The accept loops are pushed to `tasks`; returns the bound addresses (admission, probe).
pub(crate) async fn listen(
    settings: &Settings,
    acceptor: Option<TlsAcceptor>,
    admission: Arc<Admission>,
    scrape: Scrape,
    connections: &ConnectionMetrics,
    shutdown_rx: &watch::Receiver<bool>,
    tasks: &mut Vec<JoinHandle<()>>,
) -> Result<(SocketAddr, SocketAddr), ServerError> {
    let listener = bind(settings.addr).await?;
    let probe_listener = bind(settings.probe_addr).await?;
    let addr = local_addr(&listener, settings.addr);
    let probe_addr = local_addr(&probe_listener, settings.probe_addr);
    // The outer timeout also covers reading the body; the review's own deadline leaves it room to answer.
    let admission_routes = respond(
        routes::admission(admission.clone(), settings.max_body_bytes),
        settings.request_timeout + Duration::from_secs(1),
    );
    let probe_routes = respond(routes::probes(admission, scrape), Duration::from_secs(10));
    let max_connections = limits::max_connections(settings.max_connections);
    let listen = |name, tls, respond, tracker| {
        Arc::new(Listener {
            name,
            tls,
            respond,
            builder: builder(&settings.timeouts),
            timeouts: settings.timeouts.clone(),
            metrics: connections.clone(),
            tracker: Arc::new(tracker),
        })
    };
    let admission_port = listen(
        "admission",
        acceptor,
        admission_routes,
        Tracker::new(Some(connections.connections_open().clone()), Rejection::Limit),
    );
    let probe_port = listen("probe", None, probe_routes, Tracker::new(None, Rejection::ProbeLimit));
    tasks.push(tokio::spawn(serve::serve(
        listener,
        admission_port,
        max_connections,
        shutdown_rx.clone(),
        settings.shutdown_timeout,
    )));
    tasks.push(tokio::spawn(serve::serve(
        probe_listener,
        probe_port,
        limits::PROBE_MAX_CONNECTIONS,
        shutdown_rx.clone(),
        settings.shutdown_timeout,
    )));
    info!(
        addr = %addr,
        probe_addr = %probe_addr,
        tls = settings.tls.is_some(),
        max_connections,
        open_files_limit = limits::open_files_limit(),
        version = env!("CARGO_PKG_VERSION"),
        "pod-director serving"
    );
    Ok((addr, probe_addr))
}

/// The TLS acceptor of the admission port, its certificate reloader pushed to `tasks`;
/// `None` with `--insecure-http`.
pub(crate) fn tls_acceptor(
    settings: &Settings,
    metrics: &ReloadMetrics,
    shutdown: &watch::Receiver<bool>,
    tasks: &mut Vec<JoinHandle<()>>,
) -> Result<Option<TlsAcceptor>, ServerError> {
    let Some(files) = &settings.tls else {
        warn!(
            addr = %settings.addr,
            "INSECURE: admission endpoints are served over plain HTTP (--insecure-http). \
             The Kubernetes API server only calls webhooks over HTTPS; use this for local debugging only"
        );
        return Ok(None);
    };
    let tls_fingerprint = reload::fingerprint(&files.paths());
    let resolver = Arc::new(tls::CertResolver::new(tls::load(files)?));
    let server_config = tls::server_config(resolver.clone())?;
    tasks.push(reload::spawn(
        reload::TlsReload {
            files: files.clone(),
            resolver,
            metrics: metrics.clone(),
            last: tls_fingerprint,
        },
        settings.reload_poll_interval,
        shutdown.clone(),
    ));
    Ok(Some(TlsAcceptor::from(Arc::new(server_config))))
}

/// Binds `addr`.
pub(crate) async fn bind(addr: SocketAddr) -> Result<TcpListener, ServerError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })
}

/// The address `listener` is bound to (`fallback` when the OS does not say).
pub(crate) fn local_addr(listener: &TcpListener, fallback: SocketAddr) -> SocketAddr {
    listener.local_addr().unwrap_or(fallback)
}

/// A listener's request handler.
pub(crate) type Respond =
    Arc<dyn Fn(http::Request<Incoming>) -> BoxFuture<'static, warp::reply::Response> + Send + Sync>;

/// Wraps a warp filter as a request → response function with a deadline.
pub(crate) fn respond<F, R>(filter: F, timeout: Duration) -> Respond
where
    F: Filter<Extract = (R,), Error = std::convert::Infallible> + Clone + Send + Sync + 'static,
    R: Reply,
    F::Future: Send,
{
    let service = warp::service(filter);
    Arc::new(move |request| {
        let service = service.clone();
        Box::pin(async move {
            match tokio::time::timeout(timeout, service.oneshot(request)).await {
                Ok(Ok(response)) => response,
                Ok(Err(never)) => match never {},
                Err(_) => warp::reply::with_status(
                    format!("request not completed within {timeout:?} (--request-timeout)\n"),
                    StatusCode::SERVICE_UNAVAILABLE,
                )
                .into_response(),
            }
        })
    })
}

/// hyper's HTTP/1.1 and HTTP/2 settings for `timeouts`. hyper's own HTTP/1 header-read timeout is off:
/// it also runs while a keep-alive connection is idle; the connection watchdog times heads instead.
pub(crate) fn builder(timeouts: &Timeouts) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(None);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(timeouts.http2_keepalive_interval)
        .keep_alive_timeout(timeouts.http2_keepalive_timeout);
    builder
}
