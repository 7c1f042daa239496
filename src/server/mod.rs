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
//! Tests start the whole server in-process with [`start`] on port 0 and read
//! the bound addresses from [`RunningServer`].

pub mod connection;
pub mod limits;
mod reload;
mod routes;
pub mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
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
use tracing::{debug, info, warn};
use warp::{Filter, Reply};

pub use self::connection::Timeouts;
use self::connection::{Listener, Phase, Tracker};
pub use self::reload::load_config;
pub use self::tls::{TlsError, TlsFiles};
use crate::admission::Admission;
use crate::config::{Config, ConfigError};
use crate::metrics::{Metrics, Rejection};
use crate::namespaces::{KubeNamespaces, NamespaceSource};
use crate::nodes::{KubeNodes, Nodes};
use crate::telemetry::LogFormat;

#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Configuration file (default: $POD_DIRECTOR_CONFIG, else /etc/pod-director/config.yaml).
    #[arg(short, long)]
    pub config: Option<PathBuf>,
    /// Address of the HTTPS admission endpoints (/mutate, /validate).
    #[arg(long, env = "POD_DIRECTOR_ADDR", default_value = "0.0.0.0:8443")]
    pub addr: SocketAddr,
    /// Address of the plain-HTTP probe endpoints (/healthz, /readyz, /metrics).
    #[arg(long, env = "POD_DIRECTOR_PROBE_ADDR", default_value = "0.0.0.0:8080")]
    pub probe_addr: SocketAddr,
    /// Serving certificate (PEM chain); reloaded when it changes.
    #[arg(long, env = "POD_DIRECTOR_TLS_CERT", default_value = "/etc/pod-director/tls/tls.crt")]
    pub tls_cert: PathBuf,
    /// Private key of the serving certificate (PEM).
    #[arg(long, env = "POD_DIRECTOR_TLS_KEY", default_value = "/etc/pod-director/tls/tls.key")]
    pub tls_key: PathBuf,
    /// Serve the admission endpoints over plain HTTP. For local debugging only:
    /// the API server only calls webhooks over HTTPS.
    #[arg(long, env = "POD_DIRECTOR_INSECURE_HTTP")]
    pub insecure_http: bool,
    /// The namespace pod-director runs in; its pods are never touched.
    #[arg(long, env = "POD_NAMESPACE")]
    pub namespace: Option<String>,
    /// Log line format.
    #[arg(long, env = "POD_DIRECTOR_LOG_FORMAT", value_enum, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,
    /// Longest time spent on one admission request (e.g. 10s, 500ms); keep it below the webhook's timeoutSeconds.
    #[arg(long, env = "POD_DIRECTOR_REQUEST_TIMEOUT", default_value = "8s", value_parser = parse_duration)]
    pub request_timeout: Duration,
    /// Largest request body accepted; larger ones get 413.
    #[arg(long, env = "POD_DIRECTOR_MAX_BODY_BYTES", default_value_t = 4 * 1024 * 1024)]
    pub max_body_bytes: u64,
    /// How often the configuration and certificate files are re-read, besides watching them (e.g. 10s).
    #[arg(long, env = "POD_DIRECTOR_RELOAD_POLL_INTERVAL", default_value = "10s", value_parser = parse_duration)]
    pub reload_poll_interval: Duration,
    /// Longest wait for in-flight requests after SIGTERM/SIGINT.
    #[arg(long, env = "POD_DIRECTOR_SHUTDOWN_TIMEOUT", default_value = "25s", value_parser = parse_duration)]
    pub shutdown_timeout: Duration,
    #[command(flatten)]
    pub webhooks: crate::webhooks::ReconcileArgs,
    #[command(flatten)]
    pub audit: crate::audit::continuous::AuditArgs,
    /// Longest TLS handshake; slower connections are dropped.
    #[arg(long, env = "POD_DIRECTOR_HANDSHAKE_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub handshake_timeout: Duration,
    /// Longest wait for the first byte of a connection once TLS is established.
    #[arg(long, env = "POD_DIRECTOR_FIRST_BYTE_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub first_byte_timeout: Duration,
    /// Longest wait from a request's first byte to its complete head (HTTP/1.1 headers; HTTP/2: the
    /// connection preface and the first request).
    #[arg(long, env = "POD_DIRECTOR_HEADER_READ_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub header_read_timeout: Duration,
    /// How long a connection may stay without a request before it is closed (HTTP/2: GOAWAY). Above the
    /// API server's 90s client idle timeout, so the client closes idle connections first.
    #[arg(long, env = "POD_DIRECTOR_IDLE_TIMEOUT", default_value = "120s", value_parser = parse_duration)]
    pub idle_timeout: Duration,
    /// How often HTTP/2 connections are PINGed when quiet (0 turns PINGs off).
    #[arg(long, env = "POD_DIRECTOR_HTTP2_KEEPALIVE_INTERVAL", default_value = "30s", value_parser = parse_duration)]
    pub http2_keepalive_interval: Duration,
    /// How long an HTTP/2 PING may go unanswered before the connection is closed.
    #[arg(long, env = "POD_DIRECTOR_HTTP2_KEEPALIVE_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub http2_keepalive_timeout: Duration,
    /// Most connections the admission port holds; more are refused at accept. Default: the soft
    /// RLIMIT_NOFILE minus 96 descriptors kept for the probe port, the cache watch and the API client,
    /// at most 4096.
    #[arg(long, env = "POD_DIRECTOR_MAX_CONNECTIONS", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: Option<u64>,
}

/// Parses `10s`, `500ms`, `2m`, `1h` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration; write e.g. 10s, 500ms, 2m"))?;
    let seconds = match unit.trim() {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        other => return Err(format!("unknown unit {other:?} in {text:?}; use ms, s, m or h")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("{text:?}: {e}"))
}

/// Everything [`start`] needs; [`Settings::from_args`] builds it from the command line.
#[derive(Debug, Clone)]
pub struct Settings {
    pub config_path: PathBuf,
    pub addr: SocketAddr,
    pub probe_addr: SocketAddr,
    /// `None` serves the admission endpoints over plain HTTP (`--insecure-http`).
    pub tls: Option<TlsFiles>,
    pub own_namespace: Option<String>,
    pub request_timeout: Duration,
    pub max_body_bytes: u64,
    pub reload_poll_interval: Duration,
    pub shutdown_timeout: Duration,
    /// The per-connection timers.
    pub timeouts: Timeouts,
    /// `None`: derived from the descriptor limit ([`limits::max_connections`]).
    pub max_connections: Option<usize>,
}

impl Settings {
    pub fn from_args(args: &ServeArgs) -> Self {
        Self {
            config_path: Config::resolve_path(args.config.as_deref()),
            addr: args.addr,
            probe_addr: args.probe_addr,
            tls: (!args.insecure_http).then(|| TlsFiles {
                cert: args.tls_cert.clone(),
                key: args.tls_key.clone(),
            }),
            own_namespace: args.namespace.clone().filter(|n| !n.is_empty()),
            request_timeout: args.request_timeout,
            max_body_bytes: args.max_body_bytes,
            reload_poll_interval: args.reload_poll_interval,
            shutdown_timeout: args.shutdown_timeout,
            timeouts: Timeouts {
                handshake: args.handshake_timeout,
                first_byte: args.first_byte_timeout,
                header_read: args.header_read_timeout,
                idle: args.idle_timeout,
                http2_keepalive_interval: Some(args.http2_keepalive_interval).filter(|d| !d.is_zero()),
                http2_keepalive_timeout: args.http2_keepalive_timeout,
            },
            max_connections: args.max_connections.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        }
    }
}

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

/// A started server: its bound addresses and a way to stop it.
pub struct RunningServer {
    /// Where /mutate and /validate are served (HTTPS unless insecure).
    pub addr: SocketAddr,
    /// Where /healthz, /readyz and /metrics are served.
    pub probe_addr: SocketAddr,
    /// The live configuration (swapped on reload).
    pub config: Arc<ArcSwap<crate::config::Loaded>>,
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
pub async fn start_with_nodes(
    settings: Settings,
    namespaces: Arc<dyn NamespaceSource>,
    nodes: Option<Arc<Nodes>>,
) -> Result<RunningServer, ServerError> {
    let metrics = Arc::new(Metrics::new());
    let own = settings.own_namespace.as_deref();
    let config_fingerprint = reload::fingerprint(&[&settings.config_path]);
    let loaded = load_config(&settings.config_path, own)?;
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
    metrics.initialise(&loaded.config);
    let (config_changed, config_changes) = watch::channel(loaded.revision.clone());
    let config = Arc::new(ArcSwap::from_pointee(loaded));
    let (shutdown, shutdown_rx) = watch::channel(false);
    let mut tasks = Vec::new();

    let acceptor = match &settings.tls {
        Some(files) => {
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
                shutdown_rx.clone(),
            ));
            Some(TlsAcceptor::from(Arc::new(server_config)))
        }
        None => {
            warn!(
                addr = %settings.addr,
                "INSECURE: admission endpoints are served over plain HTTP (--insecure-http). \
                 The Kubernetes API server only calls webhooks over HTTPS; use this for local debugging only"
            );
            None
        }
    };
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
    let bind = |addr: SocketAddr| async move {
        TcpListener::bind(addr)
            .await
            .map_err(|source| ServerError::Bind { addr, source })
    };
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
    tasks.push(tokio::spawn(serve(
        listener,
        Arc::new(Listener {
            name: "admission",
            tls: acceptor,
            respond: admission_routes,
            builder: builder(&settings.timeouts),
            timeouts: settings.timeouts.clone(),
            metrics: metrics.clone(),
            tracker: Arc::new(Tracker::new(Some(metrics.connections_open().clone()), Rejection::Limit)),
        }),
        max_connections,
        shutdown_rx.clone(),
        settings.shutdown_timeout,
    )));
    tasks.push(tokio::spawn(serve(
        probe_listener,
        Arc::new(Listener {
            name: "probe",
            tls: None,
            respond: probe_routes,
            builder: builder(&settings.timeouts),
            timeouts: settings.timeouts.clone(),
            metrics: metrics.clone(),
            tracker: Arc::new(Tracker::new(None, Rejection::ProbeLimit)),
        }),
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

/// A server on the admission port's exact stack — TLS from `tls`, hyper-util's
/// auto builder, the request deadline, warp routing and body handling — that
/// answers `canned` to every review without reviewing anything: the floor the
/// load harness (`benches/load.rs`) compares pod-director with.
#[doc(hidden)]
pub async fn start_canned(
    addr: SocketAddr,
    tls: &TlsFiles,
    max_body_bytes: u64,
    canned: bytes::Bytes,
) -> Result<CannedServer, ServerError> {
    let resolver = Arc::new(tls::CertResolver::new(tls::load(tls)?));
    let acceptor = TlsAcceptor::from(Arc::new(tls::server_config(resolver)?));
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })?;
    let addr = local_addr(&listener, addr);
    let (shutdown, shutdown_rx) = watch::channel(false);
    let routes = respond(routes::canned(canned, max_body_bytes), Duration::from_secs(10));
    let timeouts = Timeouts::default();
    let metrics = Arc::new(Metrics::new());
    let task = tokio::spawn(serve(
        listener,
        Arc::new(Listener {
            name: "floor",
            tls: Some(acceptor),
            respond: routes,
            builder: builder(&timeouts),
            timeouts,
            metrics: metrics.clone(),
            tracker: Arc::new(Tracker::new(None, Rejection::Limit)),
        }),
        usize::MAX,
        shutdown_rx,
        Duration::from_secs(10),
    ));
    Ok(CannedServer { addr, shutdown, task })
}

/// A started [`start_canned`] server.
#[doc(hidden)]
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

fn local_addr(listener: &TcpListener, fallback: SocketAddr) -> SocketAddr {
    listener.local_addr().unwrap_or(fallback)
}

/// `pod-director serve`: connects to the cluster (in-cluster or `KUBECONFIG`),
/// starts the namespace and Node caches and the server, and drains on SIGTERM/SIGINT.
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let settings = Settings::from_args(&args);
    let client = kube::Client::try_default()
        .await
        .context("cannot configure a Kubernetes client (in-cluster service account or KUBECONFIG)")?;
    let namespaces = Arc::new(KubeNamespaces::start(client.clone()));
    let nodes = Arc::new(Nodes::new(Arc::new(KubeNodes::start(client.clone()))));
    let own_namespace = settings.own_namespace.clone();
    let server = start_with_nodes(settings, namespaces, Some(nodes.clone())).await?;
    let (stop_audit, audit_stopped) = watch::channel(false);
    let audit = crate::audit::continuous::start(&args.audit, own_namespace, &client, &server, nodes, audit_stopped);
    let targets = args.webhooks.targets();
    let (stop_reconciler, stopped) = watch::channel(false);
    let reconciler = if targets.is_empty() {
        info!("webhook configurations are not reconciled (no --mutating/--validating-webhook-configuration)");
        None
    } else {
        Some(crate::webhooks::spawn(
            crate::webhooks::Reconciler {
                client,
                targets,
                live: server.config.clone(),
                metrics: server.metrics.clone(),
            },
            server.config_changes.clone(),
            args.webhooks.webhook_resync_interval,
            stopped,
        ))
    };
    shutdown_signal().await;
    info!("shutdown signal received; draining in-flight requests");
    // Stopped at once, not awaited: an attempt in flight (up to 10 s) must not delay
    // the drain; a patch the API server received is applied whole or not at all.
    let _ = stop_reconciler.send(true);
    if let Some(task) = reconciler {
        task.abort();
    }
    // The audit releases its Lease (bounded) while the server drains.
    let _ = stop_audit.send(true);
    server.shutdown().await;
    if let Some(task) = audit {
        let _ = tokio::time::timeout(Duration::from_secs(3), task).await;
    }
    info!("pod-director stopped");
    Ok(())
}

/// Resolves on SIGTERM (what Kubernetes sends) or SIGINT (Ctrl-C).
pub async fn shutdown_signal() {
    let interrupt = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            warn!(error = %err, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(err) => {
                warn!(error = %err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}

type Respond = Arc<dyn Fn(http::Request<Incoming>) -> BoxFuture<'static, warp::reply::Response> + Send + Sync>;

/// Wraps a warp filter as a request → response function with a deadline.
fn respond<F, R>(filter: F, timeout: Duration) -> Respond
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
fn builder(timeouts: &Timeouts) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(None);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(timeouts.http2_keepalive_interval)
        .keep_alive_timeout(timeouts.http2_keepalive_timeout);
    builder
}

/// Accepts connections until shutdown (refusing those beyond `max_connections` at accept),
/// then drains: see [`connection`].
async fn serve(
    listener: TcpListener,
    shared: Arc<Listener>,
    max_connections: usize,
    mut shutdown: watch::Receiver<bool>,
    drain_timeout: Duration,
) {
    let (phase, phase_rx) = watch::channel(Phase::Serving);
    let accept = |stream: tokio::net::TcpStream, peer: SocketAddr| {
        if shared.tracker.open() >= max_connections {
            // Closed before any TLS work: refusing costs one accept and one close.
            shared.metrics.connection_rejected(shared.tracker.rejection());
            debug!(peer = %peer, max_connections, "connection refused: at the connection limit");
            return;
        }
        let open = shared.tracker.enter();
        // As Go does by default: no Nagle delay on small writes (HTTP/2 frames, TLS records),
        // which with the peer's delayed ACK stalls a response for ~40 ms.
        if let Err(err) = stream.set_nodelay(true) {
            debug!(peer = %peer, error = %err, "cannot set TCP_NODELAY");
        }
        let shared = shared.clone();
        let phase = phase_rx.clone();
        tokio::spawn(async move {
            connection::run(stream, peer, shared, phase).await;
            drop(open);
        });
    };
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => accept(stream, peer),
                Err(err) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    warn!(error = %err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            _ = shutdown.changed() => break,
        }
    }
    // Connections the kernel has already accepted are clients that connected before the signal: serve them too.
    let started = tokio::time::Instant::now();
    let _ = phase.send(Phase::Draining);
    shared.tracker.begin_drain();
    // Straight from the kernel's queue: tokio's accept only sees what its reactor has been told about.
    match listener.into_std() {
        Ok(listener) => {
            while let Ok((stream, peer)) = listener.accept() {
                match stream
                    .set_nonblocking(true)
                    .and_then(|()| tokio::net::TcpStream::from_std(stream))
                {
                    Ok(stream) => accept(stream, peer),
                    Err(err) => debug!(peer = %peer, error = %err, "cannot serve a queued connection"),
                }
            }
        }
        Err(err) => warn!(error = %err, "cannot take the queued connections; they are refused"),
    }
    let tracker = &shared.tracker;
    let open_at_signal = tracker.open();
    let drained = tokio::time::timeout(drain_timeout, tracker.all_closed()).await.is_ok();
    if !drained {
        let _ = phase.send(Phase::Cut);
        // Cut connections return at once; bounded all the same.
        let _ = tokio::time::timeout(Duration::from_secs(1), tracker.all_closed()).await;
    }
    let answered = tracker.answered.load(std::sync::atomic::Ordering::Relaxed);
    let cut_requests = tracker.cut_requests.load(std::sync::atomic::Ordering::Relaxed);
    let cut_connections = tracker.cut_connections.load(std::sync::atomic::Ordering::Relaxed);
    let elapsed_ms = started.elapsed().as_millis() as u64;
    if drained {
        info!(
            listener = shared.name,
            connections = open_at_signal,
            answered,
            cut_requests,
            cut_connections,
            elapsed_ms,
            "drained: every request that arrived was answered"
        );
    } else {
        warn!(
            listener = shared.name,
            connections = open_at_signal,
            answered,
            cut_requests,
            cut_connections,
            elapsed_ms,
            timeout = ?drain_timeout,
            "drain cut short by --shutdown-timeout: connections still open were closed"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("ten seconds").is_err());
        assert!(parse_duration("5 fortnights").is_err());
    }

    #[test]
    fn serve_flags_have_the_documented_defaults() {
        use clap::Parser as _;
        let cli = crate::cli::Cli::try_parse_from(["pod-director", "serve"]).expect("defaults parse");
        let crate::cli::Command::Serve(args) = cli.command else {
            panic!("serve expected");
        };
        let settings = Settings::from_args(&args);
        assert_eq!(settings.addr.to_string(), "0.0.0.0:8443");
        assert_eq!(settings.probe_addr.to_string(), "0.0.0.0:8080");
        assert_eq!(
            settings.tls,
            Some(TlsFiles {
                cert: "/etc/pod-director/tls/tls.crt".into(),
                key: "/etc/pod-director/tls/tls.key".into(),
            })
        );
        let cli = crate::cli::Cli::try_parse_from(["pod-director", "serve", "--insecure-http", "--namespace", "pd"])
            .expect("parses");
        let crate::cli::Command::Serve(args) = cli.command else {
            panic!("serve expected");
        };
        let settings = Settings::from_args(&args);
        assert_eq!(settings.tls, None);
        assert_eq!(settings.own_namespace.as_deref(), Some("pd"));
    }
}
