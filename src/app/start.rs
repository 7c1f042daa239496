//! Starting pod-director in-process: the configuration loaded, the metrics composed, the
//! reloaders and reporters spawned, both ports served ([`start`]). Tests start it on port 0 and
//! read the bound addresses from [`RunningServer`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::Metrics;
use crate::admission::Admission;
use crate::cluster::namespaces::NamespaceSource;
use crate::cluster::nodes::Nodes;
use crate::cluster::pods::PodSource;
use crate::server::{self, ServerError, Settings, reload};
use pod_director_engine::config::Loaded;

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
    /// Every metric family, by owner.
    pub metrics: Metrics,
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
    start_with_nodes(settings, namespaces, None, None).await
}

/// [`start`], with node data for feasibility counts, the `spec.nodeName`
/// check and `pod_director_group_nodes`, and with the pods `pods/binding` requests bind.
pub(crate) async fn start_with_nodes(
    settings: Settings,
    namespaces: Arc<dyn NamespaceSource>,
    nodes: Option<Arc<Nodes>>,
    pods: Option<Arc<dyn PodSource>>,
) -> Result<RunningServer, ServerError> {
    let metrics = Metrics::register();
    let config_fingerprint = reload::config_fingerprint(&settings.config_path);
    let loaded = load_initial(&settings)?;
    metrics.initialise(&loaded.config);
    let (config_changed, config_changes) = watch::channel(loaded.revision.clone());
    let config = Arc::new(ArcSwap::from_pointee(loaded));
    let (shutdown, shutdown_rx) = watch::channel(false);
    let mut tasks = Vec::new();

    let acceptor = server::tls_acceptor(&settings, &metrics.reloads, &shutdown_rx, &mut tasks)?;
    tasks.push(reload::spawn(
        reload::ConfigReload {
            path: settings.config_path.clone(),
            own_namespace: settings.own_namespace.clone(),
            live: config.clone(),
            metrics: metrics.reloads.clone(),
            admission: metrics.admission.clone(),
            last: config_fingerprint,
            changed: config_changed,
        },
        settings.reload_poll_interval,
        shutdown_rx.clone(),
    ));
    tasks.push(crate::cluster::orphans::spawn_reporter(
        config.clone(),
        namespaces.clone(),
        config_changes.clone(),
        shutdown_rx.clone(),
    ));
    let mut admission = Admission::new(
        config.clone(),
        namespaces,
        metrics.admission.clone(),
        settings.request_timeout,
    );
    if let Some(nodes) = nodes {
        tasks.push(tokio::spawn(crate::cluster::nodes::keep_group_gauge(
            nodes.clone(),
            config.clone(),
            metrics.nodes.clone(),
            GROUP_GAUGE_INTERVAL,
            shutdown_rx.clone(),
        )));
        admission = admission.with_nodes(nodes, metrics.nodes.clone());
    }
    if let Some(pods) = pods {
        admission = admission.with_pods(pods, metrics.pods.clone());
    }
    let admission = Arc::new(admission);

    let scrape = metrics.scrape(admission.clone());
    let (addr, probe_addr) = server::listen(
        &settings,
        acceptor,
        admission,
        scrape,
        &metrics.connections,
        &shutdown_rx,
        &mut tasks,
    )
    .await?;
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
    let loaded = pod_director_engine::config::load_config(&settings.config_path, settings.own_namespace.as_deref())?;
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
