//! The continuous audit in `serve`: the same scan as `pod-director audit`,
//! every `--audit-interval`, exported as gauges and one log line per group.
//!
//! **One replica scans.** The replicas elect one through a coordination.k8s.io
//! Lease (`--audit-lease`, in pod-director's namespace), held with
//! [`kube_lease_manager`] — a maintained crate built on kube 5 / k8s-openapi 0.29
//! that takes and renews the lease by server-side apply, each replica under its
//! own field manager, so the API server refuses a second taker: two replicas can
//! never both hold it. The holder scans; the others wait for the lease. A replica that loses
//! it stops exporting the audit gauges (Prometheus then sees one replica's
//! series, the holder's), and on shutdown the holder releases the lease. The
//! others notice a released or expired lease when its term ends: a new holder
//! audits within about one lease duration (15 s) of the old one stopping or
//! dying (measured by the e2e scenario). Without `--namespace` there is no Lease and
//! the replica scans on its own (local runs).
//!
//! The scan reads the live configuration and the Node cache (no extra node
//! list), and every list it sends is bounded by the scan's request timeout. A
//! failed scan is logged at WARN, counted
//! (`pod_director_audit_scans_total{result="error"}`) and retried after
//! [`RETRY_AFTER`] (or the interval, if shorter); the gauges keep the last
//! completed scan meanwhile. The scan runs in its own task: admission never
//! waits on it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use kube::Client;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::{Audit, ScanOptions};
use crate::config::Loaded;
use crate::metrics::{Metrics, ScanResult};
use crate::nodes::Nodes;

/// How soon a failed scan is tried again (at most the interval).
pub(crate) const RETRY_AFTER: Duration = Duration::from_secs(30);
/// How long the Lease is valid after each renewal, and how early before that the holder renews it.
const LEASE_DURATION_SECONDS: u64 = 15;
const LEASE_GRACE_SECONDS: u64 = 5;
/// Longest wait for the Lease to be created or read at start (retried).
const LEASE_SETUP_TIMEOUT: Duration = Duration::from_secs(10);

/// `serve`'s continuous audit flags.
#[derive(Debug, Clone, clap::Args)]
pub struct AuditArgs {
    /// How often the running pods and workloads are audited (e.g. 10m, 30s); 0 turns the continuous audit off.
    #[arg(long, env = "POD_DIRECTOR_AUDIT_INTERVAL", default_value = "10m", value_parser = crate::server::parse_duration)]
    pub audit_interval: Duration,
    /// The coordination.k8s.io Lease (in --namespace) that elects the one replica that audits.
    #[arg(long, env = "POD_DIRECTOR_AUDIT_LEASE", default_value = "pod-director-audit")]
    pub audit_lease: String,
}

/// Where the Lease lives, and who this replica is in it.
#[derive(Debug, Clone)]
pub struct LeaseTarget {
    pub namespace: String,
    pub name: String,
    /// This replica's holder identity (unique among the replicas).
    pub identity: String,
}

/// Everything the continuous audit needs.
pub struct Continuous {
    pub client: Client,
    pub config: Arc<ArcSwap<Loaded>>,
    pub nodes: Arc<Nodes>,
    pub metrics: Arc<Metrics>,
    pub interval: Duration,
    /// `None`: no election, this replica scans.
    pub lease: Option<LeaseTarget>,
    pub options: ScanOptions,
}

/// Starts the continuous audit; it ends (releasing the Lease) when `shutdown` turns true.
pub fn spawn(continuous: Continuous, shutdown: watch::Receiver<bool>) -> JoinHandle<()> {
    tokio::spawn(run(continuous, shutdown))
}

/// This replica's name in the Lease: the pod name (hostname) and the process id.
pub(crate) fn identity() -> String {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "pod-director".to_owned());
    format!("{host}-{}", std::process::id())
}

/// Waits for `shutdown` to turn true (or its sender to go).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

/// This replica's place in the election.
struct Election {
    /// Whether this replica holds the Lease.
    leader: watch::Receiver<bool>,
    /// Without a Lease: the sender of an always-true `leader`, kept open.
    _always: Option<watch::Sender<bool>>,
    /// The lease manager's task: it releases the Lease once `leader` is dropped.
    task: Option<JoinHandle<kube_lease_manager::Result<kube_lease_manager::LeaseManager>>>,
}

/// The field manager of one replica's writes to the Lease. It must differ per replica: the
/// lease manager takes the Lease by server-side apply and relies on the API server's conflict
/// between two managers to refuse the second taker; one name shared by all replicas lets two
/// replicas take the Lease at once. Cut to the API server's 128 bytes (a pod name is
/// at most 63, so the replica's part stays whole in practice).
fn field_manager(identity: &str) -> String {
    crate::telemetry::truncate_bytes(&format!("pod-director-audit-{identity}"), 128)
}

/// Joins the election (retrying until the Lease can be set up), or `None` on shutdown.
async fn elect(c: &Continuous, shutdown: &mut watch::Receiver<bool>) -> Option<Election> {
    let Some(lease) = &c.lease else {
        let (always, leader) = watch::channel(true);
        return Some(Election {
            leader,
            _always: Some(always),
            task: None,
        });
    };
    let identity = &lease.identity;
    let mut delay = Duration::from_secs(1);
    loop {
        let build = kube_lease_manager::LeaseManagerBuilder::new(c.client.clone(), &lease.name)
            .with_namespace(&lease.namespace)
            .with_identity(identity)
            .with_duration(LEASE_DURATION_SECONDS)
            .with_grace(LEASE_GRACE_SECONDS)
            .with_field_manager(field_manager(identity))
            .build();
        let failure = match tokio::time::timeout(LEASE_SETUP_TIMEOUT, build).await {
            Ok(Ok(manager)) => {
                info!(
                    lease = lease.name.as_str(),
                    namespace = lease.namespace.as_str(),
                    identity = identity.as_str(),
                    "audit: joined the election for the audit lease"
                );
                let (leader, task) = manager.watch().await;
                return Some(Election {
                    leader,
                    _always: None,
                    task: Some(task),
                });
            }
            Ok(Err(err)) => err.to_string(),
            Err(_) => format!("no answer within {LEASE_SETUP_TIMEOUT:?}"),
        };
        warn!(
            lease = lease.name.as_str(),
            namespace = lease.namespace.as_str(),
            error = failure.as_str(),
            "audit: cannot set up the audit lease; retrying"
        );
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = stopped(shutdown) => return None,
        }
        delay = (delay * 2).min(Duration::from_secs(30));
    }
}

async fn run(c: Continuous, mut shutdown: watch::Receiver<bool>) {
    // Rejoins the election if it ever ends (the lease manager's task stopped).
    while let Some(election) = elect(&c, &mut shutdown).await {
        if follow(&c, election, &mut shutdown).await == Ended::Shutdown {
            return;
        }
        warn!("audit: the lease election ended; joining it again");
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
            () = stopped(&mut shutdown) => return,
        }
    }
}

/// Why [`follow`] returned.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    Shutdown,
    ElectionEnded,
}

/// Scans while this replica leads, until shutdown or the end of the election.
async fn follow(c: &Continuous, election: Election, shutdown: &mut watch::Receiver<bool>) -> Ended {
    let Election {
        mut leader,
        _always,
        task: lease_task,
    } = election;
    let mut leading = false;
    let ended = loop {
        let is_leader = *leader.borrow_and_update();
        if is_leader != leading {
            leading = is_leader;
            if leading {
                info!(
                    identity = c.lease.as_ref().map_or("", |l| l.identity.as_str()),
                    "audit: this replica holds the audit lease and audits"
                );
            } else {
                c.metrics.clear_audit();
                info!("audit: this replica does not hold the audit lease; another replica audits");
            }
        }
        let wait = if !leading {
            None
        } else if !c.nodes.is_ready() {
            Some(Duration::from_secs(1))
        } else {
            Some(scan_once(c).await)
        };
        tokio::select! {
            () = async { match wait { Some(d) => tokio::time::sleep(d).await, None => std::future::pending().await } } => {}
            changed = leader.changed() => if changed.is_err() {
                c.metrics.clear_audit();
                break Ended::ElectionEnded;
            },
            () = stopped(shutdown) => break Ended::Shutdown,
        }
    };
    // Closing the channel makes the election task release the lease; bounded, shutdown must not hang on it.
    drop(leader);
    if let Some(task) = lease_task {
        let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
    }
    ended
}

/// One scan into the gauges and the log; returns how long to wait before the next.
async fn scan_once(c: &Continuous) -> Duration {
    let loaded = c.config.load_full();
    let view = c.nodes.view(None);
    let started = Instant::now();
    let result = super::scan(
        &c.client,
        &loaded.config,
        Some(&view as &dyn crate::placement::NodeView),
        &c.options,
        &mut |_| {},
    )
    .await;
    c.metrics.set_audit_duration(started.elapsed());
    match result {
        Ok(audit) => {
            c.metrics.audit_scanned(ScanResult::Success);
            c.metrics.set_audit(&audit);
            log(&audit, &loaded.revision);
            c.interval
        }
        Err(err) => {
            c.metrics.audit_scanned(ScanResult::Error);
            warn!(
                error = err.to_string().as_str(),
                "audit: scan failed; the audit gauges keep the last completed scan"
            );
            RETRY_AFTER.min(c.interval)
        }
    }
}

/// One line per group, then one for the scan.
fn log(audit: &Audit, revision: &str) {
    for g in &audit.groups {
        info!(
            placement.group = g.group.as_str(),
            placement.mode = g.mode.as_str(),
            audit.ready = g.verdict.ready,
            audit.blockers = g.verdict.blockers.join("; ").as_str(),
            audit.warnings = g.verdict.warnings.join("; ").as_str(),
            audit.namespaces = g.namespaces,
            audit.pods.compliant = g.pods.compliant,
            audit.pods.would_patch = g.pods.would_patch,
            audit.pods.would_deny = g.pods.would_deny,
            audit.pods.skipped = g.pods.skipped,
            audit.templates.would_patch = g.templates.would_patch,
            audit.templates.would_deny = g.templates.would_deny,
            audit.feasible_nodes = g.feasible_nodes.map(|n| n as u64),
            config.revision = revision,
            "audit: group verdict"
        );
    }
    info!(
        audit.namespaces = audit.namespaces_scanned,
        audit.pods = audit.pods_scanned,
        audit.templates = audit.templates_scanned,
        elapsed_ms = audit.elapsed.as_millis() as u64,
        "audit: scan completed"
    );
}

/// Starts the continuous audit of `serve` as its flags say (`None` when `--audit-interval 0`).
pub(crate) fn start(
    args: &AuditArgs,
    own_namespace: Option<String>,
    client: &Client,
    server: &crate::server::RunningServer,
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
        "audit: continuous audit on"
    );
    Some(spawn(
        Continuous {
            client: client.clone(),
            config: server.config.clone(),
            nodes,
            metrics: server.metrics.clone(),
            interval: args.audit_interval,
            lease,
            options: ScanOptions::default(),
        },
        shutdown,
    ))
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use crate::cli::{Cli, Command};

    fn serve(args: &[&str]) -> super::AuditArgs {
        let cli = Cli::try_parse_from([&["pod-director", "serve"], args].concat()).expect("parses");
        let Command::Serve(serve) = cli.command else {
            panic!("serve expected");
        };
        serve.audit
    }

    #[test]
    fn the_continuous_audit_runs_every_ten_minutes_unless_told_otherwise() {
        let defaults = serve(&[]);
        assert_eq!(defaults.audit_interval, std::time::Duration::from_secs(600));
        assert_eq!(defaults.audit_lease, "pod-director-audit");
        let off = serve(&["--audit-interval", "0"]);
        assert!(off.audit_interval.is_zero());
        assert!(Cli::try_parse_from(["pod-director", "serve", "--audit-interval", "often"]).is_err());
    }

    #[test]
    fn each_replica_writes_the_lease_under_a_field_manager_of_its_own() {
        let (a, b) = (super::field_manager("pod-a-1"), super::field_manager("pod-b-1"));
        assert_ne!(a, b, "one shared manager lets two replicas take the Lease at once");
        assert_eq!(a, "pod-director-audit-pod-a-1");
        let long = super::field_manager(&"é".repeat(100));
        assert!(
            long.len() <= 128,
            "the API server refuses longer field managers: {long}"
        );
    }
}
