//! Starting the server: the configuration and certificate loaded, the reloaders and
//! reporters spawned, both ports bound and their accept loops running ([`start`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
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

use super::connection::{Listener, Tracker};
use super::{ServerError, Settings, Timeouts, limits, reload, routes, serve, tls};
use crate::admission::Admission;
use crate::config::Loaded;
use crate::metrics::{Metrics, Rejection};
use crate::namespaces::NamespaceSource;
use crate::nodes::Nodes;

/// A started server: its bound addresses and a way to stop it.
pub struct RunningServer {
    /// Where /mutate and /validate are served (HTTPS unless insecure).
    pub addr: SocketAddr,
    /// Where /healthz, /readyz and /metrics are served.
    pub probe_addr: SocketAddr,
    /// The live configuration (swapped on reload).
    pub config: Arc<ArcSwap<Loaded>>,
    /// Tells the new revision after every successful configuration reload.
    pub config_changes: watch::Receiver<String>,
    pub metrics: Arc<Metrics>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl RunningServer {
    /// Stops accepting, drains in-flight requests, stops the reloaders.
    pub async fn shutdown(self) {
        // Receivers live in the tasks awaited below.
        let _ = self.shutdown.send(true);
        for task in self.tasks {
            if let Err(err) = task.await {
                warn!(error = %err, "a server task ended abnormally");
            }
        }
    }
}

/// How often `pod_director_group_nodes` checks whether nodes or configuration changed.
const GROUP_GAUGE_INTERVAL: Duration = Duration::from_secs(2);

/// Loads the configuration and certificate, binds both ports and serves until
/// [`RunningServer::shutdown`]. Fails when the configuration or certificate is
/// invalid or a port cannot be bound. Decides without node data (see [`start_with_nodes`]).
pub async fn start(settings: Settings, namespaces: Arc<dyn NamespaceSource>) -> Result<RunningServer, ServerError> {
    start_with_nodes(settings, namespaces, None).await
}

/// [`start`], with node data for feasibility counts, the `spec.nodeName`
/// check and `pod_director_group_nodes`.
pub(crate) async fn start_with_nodes(
    settings: Settings,
    namespaces: Arc<dyn NamespaceSource>,
    nodes: Option<Arc<Nodes>>,
) -> Result<RunningServer, ServerError> {
    let metrics = Arc::new(Metrics::new());
    let config_fingerprint = reload::fingerprint(&[&settings.config_path]);
    let loaded = load_initial(&settings)?;
    metrics.initialise(&loaded.config);
    let (config_changed, config_changes) = watch::channel(loaded.revision.clone());
    let config = Arc::new(ArcSwap::from_pointee(loaded));
    let (shutdown, shutdown_rx) = watch::channel(false);
    let mut tasks = Vec::new();

    let acceptor = tls_acceptor(&settings, &metrics, &shutdown_rx, &mut tasks)?;
    tasks.push(reload::spawn(
        reload::ConfigReload {
            path: settings.config_path.clone(),
            own_namespace: settings.own_namespace.clone(),
            live: config.clone(),
            metrics: metrics.clone(),
            last: config_fingerprint,
            changed: config_changed,
        },
        settings.reload_poll_interval,
        shutdown_rx.clone(),
    ));
    tasks.push(crate::orphans::spawn_reporter(
        config.clone(),
        namespaces.clone(),
        config_changes.clone(),
        shutdown_rx.clone(),
    ));
    let mut admission = Admission::new(config.clone(), namespaces, metrics.clone(), settings.request_timeout);
    if let Some(nodes) = nodes {
        tasks.push(tokio::spawn(crate::nodes::keep_group_gauge(
            nodes.clone(),
            config.clone(),
            metrics.clone(),
            GROUP_GAUGE_INTERVAL,
            shutdown_rx.clone(),
        )));
        admission = admission.with_nodes(nodes);
    }
    let admission = Arc::new(admission);

    let listener = bind(settings.addr).await?;
    let probe_listener = bind(settings.probe_addr).await?;
    let addr = local_addr(&listener, settings.addr);
    let probe_addr = local_addr(&probe_listener, settings.probe_addr);
    // The outer timeout also covers reading the body; the review's own deadline leaves it room to answer.
    let admission_routes = respond(
        routes::admission(admission.clone(), settings.max_body_bytes),
        settings.request_timeout + Duration::from_secs(1),
    );
    let probe_routes = respond(routes::probes(admission, metrics.clone()), Duration::from_secs(10));
    let max_connections = limits::max_connections(settings.max_connections);
    let listen = |name, tls, respond, tracker| {
        Arc::new(Listener {
            name,
            tls,
            respond,
            builder: builder(&settings.timeouts),
            timeouts: settings.timeouts.clone(),
            metrics: metrics.clone(),
            tracker: Arc::new(tracker),
        })
    };
    let admission_port = listen(
        "admission",
        acceptor,
        admission_routes,
        Tracker::new(Some(metrics.connections_open().clone()), Rejection::Limit),
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
        shutdown_rx,
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
    Ok(RunningServer {
        addr,
        probe_addr,
        config,
        config_changes,
        metrics,
        shutdown,
        tasks,
    })
}

/// The configuration at start, logged with its warnings and environment overrides.
fn load_initial(settings: &Settings) -> Result<Loaded, ServerError> {
    let loaded = reload::load_config(&settings.config_path, settings.own_namespace.as_deref())?;
    info!(
        config.revision = loaded.revision.as_str(),
        path = %settings.config_path.display(),
        groups = loaded.config.groups.len(),
        overrides = loaded.overrides.len(),
        "configuration loaded"
    );
    reload::warn_about(&loaded);
    for (variable, setting) in &loaded.overrides {
        info!(
            variable = variable.as_str(),
            setting = setting.as_str(),
            "configuration overridden from the environment"
        );
    }
    Ok(loaded)
}

/// The TLS acceptor of the admission port, its certificate reloader pushed to `tasks`;
/// `None` with `--insecure-http`.
fn tls_acceptor(
    settings: &Settings,
    metrics: &Arc<Metrics>,
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

pub(crate) async fn bind(addr: SocketAddr) -> Result<TcpListener, ServerError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })
}

pub(crate) fn local_addr(listener: &TcpListener, fallback: SocketAddr) -> SocketAddr {
    listener.local_addr().unwrap_or(fallback)
}

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
