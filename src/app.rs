//! The composition root of `pod-director serve` ([`run`]): the cluster client, the namespace
//! and Node caches, the server, the continuous audit, the webhook reconciler, and the drain on
//! SIGTERM/SIGINT. Every other module gets the handles it needs from here; none reaches up.

mod metrics;
mod start;

use std::sync::Arc;

use anyhow::Context as _;
use arc_swap::ArcSwap;
use kube::Client;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

pub use self::metrics::Metrics;
pub(crate) use self::start::start_with_nodes;
pub use self::start::{RunningServer, start};
use crate::cli::{ContinuousAuditArgs, ServeArgs};
use crate::cluster::audit::continuous::AuditMetrics;
use crate::cluster::audit::continuous::{Continuous, LeaseTarget, identity, spawn_audit};
use crate::cluster::audit::scan::ScanOptions;
use crate::cluster::namespaces::KubeNamespaces;
use crate::cluster::nodes::{KubeNodes, Nodes};
use crate::cluster::pods::KubePods;
use crate::cluster::provisioners::KubeProvisioners;
use crate::server::Settings;
use pod_director_engine::config::Loaded;

/// `pod-director serve`: connects to the cluster (in-cluster or `KUBECONFIG`),
/// starts the namespace and Node caches and the server, and drains on SIGTERM/SIGINT.
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let settings = Settings::from_args(&args);
    let client = kube::Client::try_default()
        .await
        .context("cannot configure a Kubernetes client (in-cluster service account or KUBECONFIG)")?;
    let namespaces = Arc::new(KubeNamespaces::start(client.clone()));
    let node_pools = KubeProvisioners::start(client.clone(), args.nodepool_discovery_interval);
    let nodes = Arc::new(Nodes::new(Arc::new(KubeNodes::start(client.clone()))).with_provisioners(node_pools.store()));
    let own_namespace = settings.own_namespace.clone();
    let pods: Arc<dyn crate::cluster::pods::PodSource> = Arc::new(KubePods::new(client.clone()));
    let server = start_with_nodes(settings, namespaces, Some(nodes.clone()), Some(pods)).await?;
    let (stop_audit, audit_stopped) = watch::channel(false);
    let audit = start_audit(
        &args.audit,
        own_namespace,
        &client,
        server.config.clone(),
        server.metrics.audit.clone(),
        nodes,
        audit_stopped,
    );
    let targets = args.webhooks.targets();
    let (stop_reconciler, stopped) = watch::channel(false);
    let reconciler = if targets.is_empty() {
        info!("webhook configurations are not reconciled (no --mutating/--validating-webhook-configuration)");
        None
    } else {
        Some(crate::cluster::webhooks::spawn(
            crate::cluster::webhooks::Reconciler {
                client,
                targets,
                entries: args.webhooks.entries.settings(),
                live: server.config.clone(),
                metrics: server.metrics.reconciles.clone(),
                policies: args
                    .webhooks
                    .admission_policies
                    .then(|| Arc::new(crate::cluster::webhooks::admission_policies::PolicySync::default())),
                yields: Default::default(),
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
async fn shutdown_signal() {
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

/// Starts the continuous audit of `serve` as its flags say (`None` when `--audit-interval 0`).
fn start_audit(
    args: &ContinuousAuditArgs,
    own_namespace: Option<String>,
    client: &Client,
    config: Arc<ArcSwap<Loaded>>,
    metrics: AuditMetrics,
    nodes: Arc<Nodes>,
    shutdown: watch::Receiver<bool>,
) -> Option<JoinHandle<()>> {
    if args.audit_interval.is_zero() {
        info!("audit: the continuous audit is off (--audit-interval 0)");
        return None;
    }
    let lease = match own_namespace {
        Some(namespace) => Some(LeaseTarget {
            namespace,
            name: args.audit_lease.clone(),
            identity: identity(),
        }),
        None => {
            warn!("audit: no --namespace, so no audit lease: this replica audits whatever other replicas do");
            None
        }
    };
    info!(
        interval_s = args.audit_interval.as_secs_f64(),
        lease = args.audit_lease.as_str(),
        reports = args.reports,
        events = args.audit_events,
        "audit: continuous audit on"
    );
    let (reports, _writer) = crate::cluster::reports::spawn_reports(
        client.clone(),
        crate::cluster::reports::ReportsOptions {
            settings: pod_director_engine::audit::open_reports::Settings {
                name: args.reports_name.clone(),
                max_results: args.reports_max_results as usize,
            },
            reports: args.reports,
            events: args.audit_events.then(|| args.reports_name.clone()),
        },
        shutdown.clone(),
    );
    Some(spawn_audit(
        Continuous {
            client: client.clone(),
            config,
            nodes,
            metrics,
            interval: args.audit_interval,
            lease,
            options: ScanOptions {
                in_tree_plugins: args.audit_in_tree_plugins.clone(),
                ..ScanOptions::default()
            },
            reports: Some(reports),
        },
        shutdown,
    ))
}
