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
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | `pod-director serve` ([`run`]): the cluster client, the caches, the signal |
//! | `args.rs` | the `serve` flags and the [`Settings`] they become |
//! | `start.rs` | [`start`]: configuration, certificate, reloaders, both ports bound |
//! | `serve.rs` | a port's accept loop, the connection cap at accept, the drain |
//! | `connection.rs` | one connection: TLS, HTTP/1.1 or HTTP/2, its timers |
//! | `limits.rs` | the connection cap from the descriptor limit |
//! | `routes.rs` | warp routes: the admission endpoints, the probes |
//! | `reload.rs` | hot reload of the configuration and the certificate |
//! | `tls.rs` | the serving certificate, picked per handshake |

mod args;
pub mod connection;
pub mod limits;
mod reload;
pub(crate) mod routes;
pub(crate) mod serve;
pub(crate) mod start;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use tokio::sync::watch;
use tracing::{info, warn};

pub(crate) use self::args::parse_duration;
pub use self::args::{ServeArgs, Settings};
pub use self::connection::Timeouts;
pub use self::reload::load_config;
use self::start::Respond;
pub(crate) use self::start::start_with_nodes;
pub use self::start::{RunningServer, start};
pub(crate) use self::tls::TlsError;
pub use self::tls::TlsFiles;
use crate::config::ConfigError;
use crate::namespaces::KubeNamespaces;
use crate::nodes::{KubeNodes, Nodes};

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
                entries: args.webhooks.entries.clone(),
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
        let _ = tokio::time::timeout(std::time::Duration::from_secs(3), task).await;
    }
    info!("pod-director stopped");
    Ok(())
}

/// Resolves on SIGTERM (what Kubernetes sends) or SIGINT (Ctrl-C).
pub(crate) async fn shutdown_signal() {
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
