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
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use kube::Client;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::scan::ScanOptions;
use crate::cluster::nodes::Nodes;
use crate::metrics::{GroupLabels, ResultLabels, gauge, label_set, register};
use pod_director_engine::audit::{Audit, AuditDecision, Findings};
use pod_director_engine::config::Loaded;

/// How soon a failed scan is tried again (at most the interval).
pub(crate) const RETRY_AFTER: Duration = Duration::from_secs(30);
/// How long the Lease is valid after each renewal, and how early before that the holder renews it.
const LEASE_DURATION_SECONDS: u64 = 15;
const LEASE_GRACE_SECONDS: u64 = 5;
/// Longest wait for the Lease to be created or read at start (retried).
const LEASE_SETUP_TIMEOUT: Duration = Duration::from_secs(10);

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
    pub metrics: AuditMetrics,
    pub interval: Duration,
    /// `None`: no election, this replica scans.
    pub lease: Option<LeaseTarget>,
    pub options: ScanOptions,
    /// Where each completed scan goes as OpenReports (`None`: not written).
    pub reports: Option<crate::cluster::reports::Publisher>,
}

/// Starts the continuous audit; it ends (releasing the Lease) when `shutdown` turns true.
pub fn spawn_audit(continuous: Continuous, shutdown: watch::Receiver<bool>) -> JoinHandle<()> {
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
    pod_director_engine::placement::truncate_bytes(&format!("pod-director-audit-{identity}"), 128)
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
        if follow(&c, election, &mut shutdown).await == FollowEnded::Shutdown {
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
enum FollowEnded {
    Shutdown,
    ElectionEnded,
}

/// Scans while this replica leads, until shutdown or the end of the election.
async fn follow(c: &Continuous, election: Election, shutdown: &mut watch::Receiver<bool>) -> FollowEnded {
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
                break FollowEnded::ElectionEnded;
            },
            () = stopped(shutdown) => break FollowEnded::Shutdown,
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
    let result = super::scan::scan(
        &c.client,
        &loaded.config,
        Some(&view as &dyn pod_director_engine::placement::NodeView),
        &c.options,
        &mut |_| {},
    )
    .await;
    c.metrics.set_audit_duration(started.elapsed());
    let next = match result {
        Ok(mut audit) => {
            c.metrics.audit_scanned(ScanResult::Success);
            c.metrics.set_audit(&audit);
            if let Some(reports) = &c.reports {
                reports.publish(&mut audit, &loaded.config);
            }
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
    };
    release_freed_memory();
    next
}

/// Hands the memory the scan freed back to the system. The scan holds one page of objects at a
/// time, but glibc keeps what a thread freed in that thread's arena, resident: without this the
/// pages of every scan stay in the resident set between scans (as they did at 10,000 pods in the
/// scale run: docs/src/performance-at-scale.md).
#[allow(unsafe_code)] // a system call the standard library lacks (SAFETY below)
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointer; it only returns free memory of glibc's arenas to the kernel.
    unsafe {
        libc::malloc_trim(0);
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
    for r in &audit.reservations {
        info!(
            reservation.group = r.group.as_str(),
            reservation.mode = r.mode.as_str(),
            audit.ready = r.verdict.ready,
            audit.blockers = r.verdict.blockers.join("; ").as_str(),
            audit.warnings = r.verdict.warnings.join("; ").as_str(),
            audit.reservation.would_deny =
                r.would_deny.iter().map(|f| f.pods.max(1)).sum::<u64>() + r.would_deny.omitted,
            audit.reservation.requester_unknown =
                r.requester_unknown.iter().map(|f| f.pods).sum::<u64>() + r.requester_unknown.omitted,
            audit.reservation.running = r.running.iter().map(|f| f.pods).sum::<u64>() + r.running.omitted,
            audit.reservation.exempt = r.exempt,
            audit.pool_nodes = r.pool_nodes.map(|n| n as u64),
            config.revision = revision,
            "audit: reservation verdict"
        );
    }
    let in_tree = &audit.in_tree;
    if !in_tree.is_empty() {
        let holes: Vec<&str> = (in_tree.namespaces.iter())
            .filter(|(_, ns)| ns.is_hole())
            .map(|(name, _)| name.as_str())
            .collect();
        info!(
            placement.mode = in_tree.mode.map_or("off", |m| m.as_str()),
            audit.ready = in_tree.verdict.ready,
            audit.blockers = in_tree.verdict.blockers.join("; ").as_str(),
            audit.warnings = in_tree.verdict.warnings.join("; ").as_str(),
            audit.namespaces = in_tree.namespaces.len(),
            audit.in_tree.unenforced = holes.join(",").as_str(),
            audit.pods.compliant = in_tree.pods.compliant,
            audit.pods.would_patch = in_tree.pods.would_patch,
            audit.pods.would_deny = in_tree.pods.would_deny,
            audit.templates.would_patch = in_tree.templates.would_patch,
            audit.templates.would_deny = in_tree.templates.would_deny,
            config.revision = revision,
            "audit: in-tree verdict"
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

named_enum! {
    /// What one continuous audit scan ended with (`result` label).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ScanResult {
        Success => "success",
        /// The scan could not complete (the API server did not answer, RBAC); the gauges keep the last scan.
        Error => "error",
    }
}

label_set! {
    GroupDecisionLabels { group: String, decision: &'static str }
    IntruderLabels { group: String, state: &'static str }
    DecisionLabels { decision: &'static str }
    /// No label: a family of one series, removed when this replica stops auditing.
    NoLabels {}
}

/// `pod_director_audit_pods`, `pod_director_audit_templates`, `pod_director_group_ready`,
/// `pod_director_group_blockers`, `pod_director_reservation_intruders`, `pod_director_reservation_ready`,
/// `pod_director_in_tree_pods`, `pod_director_in_tree_unenforced_namespaces`,
/// `pod_director_in_tree_violating_pods`, `pod_director_in_tree_ready`,
/// `pod_director_audit_scans_total`, `pod_director_audit_duration_seconds`.
#[derive(Debug, Clone)]
pub struct AuditMetrics {
    audit_pods: Family<GroupDecisionLabels, Gauge>,
    audit_templates: Family<GroupDecisionLabels, Gauge>,
    group_ready: Family<GroupLabels, Gauge>,
    group_blockers: Family<GroupLabels, Gauge>,
    reservation_intruders: Family<IntruderLabels, Gauge>,
    reservation_ready: Family<GroupLabels, Gauge>,
    in_tree_pods: Family<DecisionLabels, Gauge>,
    /// Label-less families: their series exist only while this replica audits, as the others'.
    in_tree_unenforced: Family<NoLabels, Gauge>,
    in_tree_violating: Family<NoLabels, Gauge>,
    in_tree_ready: Family<NoLabels, Gauge>,
    audit_scans: Family<ResultLabels, Counter>,
    audit_duration: Gauge<f64, AtomicU64>,
}

impl AuditMetrics {
    pub fn register(r: &mut Registry) -> Self {
        let audit_pods = register(
            r,
            "audit_pods",
            "Running pods of each group by what enforce would decide for their re-creation (latest audit)",
            Family::default(),
        );
        let audit_templates = register(
            r,
            "audit_templates",
            "Workload pod templates of each group by what enforce would decide (latest audit)",
            Family::default(),
        );
        let group_ready = register(
            r,
            "group_ready",
            "1 when the latest audit found the group ready to enforce (no blocker), else 0",
            Family::default(),
        );
        let group_blockers = register(
            r,
            "group_blockers",
            "Blockers the latest audit found for enforcing each group",
            Family::default(),
        );
        let reservation_intruders = register(
            r,
            "reservation_intruders",
            "Intruders of each reservation by state (latest audit): would_deny = pods and templates the reservation \
             in enforce would refuse, running = pods on the pool's nodes now, exempt = intruders whose requester is allowed",
            Family::default(),
        );
        let reservation_ready = register(
            r,
            "reservation_ready",
            "1 when the latest audit found the reservation ready to enforce (no blocker), else 0",
            Family::default(),
        );
        let in_tree_pods = register(
            r,
            "in_tree_pods",
            "Running pods of the namespaces carrying in-tree annotations (PodNodeSelector, PodTolerationRestriction) by \
             what the in-tree rule in enforce would decide for their re-creation (latest audit)",
            Family::default(),
        );
        let in_tree_unenforced = register(
            r,
            "in_tree_unenforced_namespaces",
            "Namespaces carrying in-tree annotations that no admission plugin enforces on this cluster (latest audit)",
            Family::default(),
        );
        let in_tree_violating = register(
            r,
            "in_tree_violating_pods",
            "Running pods of those namespaces that violate their namespace's in-tree annotations (latest audit)",
            Family::default(),
        );
        let in_tree_ready = register(
            r,
            "in_tree_ready",
            "1 when the latest audit found the in-tree rule ready to enforce (nothing it would refuse), else 0",
            Family::default(),
        );
        let audit_scans = register(r, "audit_scans", "Continuous audit scans by result", Family::default());
        let audit_duration = Gauge::<f64, AtomicU64>::default();
        r.register_with_unit(
            "audit_duration",
            "Duration of the latest continuous audit scan",
            Unit::Seconds,
            audit_duration.clone(),
        );
        Self {
            audit_pods,
            audit_templates,
            group_ready,
            group_blockers,
            reservation_intruders,
            reservation_ready,
            in_tree_pods,
            in_tree_unenforced,
            in_tree_violating,
            in_tree_ready,
            audit_scans,
            audit_duration,
        }
    }

    /// Sets the audit gauges to exactly this audit's groups (groups it did not audit disappear).
    pub fn set_audit(&self, audit: &Audit) {
        self.clear_audit();
        let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        for g in &audit.groups {
            for decision in AuditDecision::ALL {
                let labels = GroupDecisionLabels {
                    group: g.group.clone(),
                    decision: decision.as_str(),
                };
                self.audit_pods.get_or_create(&labels).set(count(g.pods.get(decision)));
                self.audit_templates
                    .get_or_create(&labels)
                    .set(count(g.templates.get(decision)));
            }
            let group = GroupLabels { group: g.group.clone() };
            self.group_ready.get_or_create(&group).set(i64::from(g.verdict.ready));
            self.group_blockers
                .get_or_create(&group)
                .set(gauge(g.verdict.blockers.len()));
        }
        for r in &audit.reservations {
            let pods = |f: &Findings| f.iter().map(|f| f.pods.max(1)).sum::<u64>() + f.omitted;
            for (state, n) in [
                ("would_deny", pods(&r.would_deny)),
                ("requester_unknown", pods(&r.requester_unknown)),
                ("running", pods(&r.running)),
                ("exempt", r.exempt),
            ] {
                self.reservation_intruders
                    .get_or_create(&IntruderLabels {
                        group: r.group.clone(),
                        state,
                    })
                    .set(count(n));
            }
            self.reservation_ready
                .get_or_create(&GroupLabels { group: r.group.clone() })
                .set(i64::from(r.verdict.ready));
        }
        let in_tree = &audit.in_tree;
        for decision in AuditDecision::ALL {
            self.in_tree_pods
                .get_or_create(&DecisionLabels {
                    decision: decision.as_str(),
                })
                .set(count(in_tree.pods.get(decision)));
        }
        let holes = || in_tree.namespaces.values().filter(|ns| ns.is_hole());
        self.in_tree_unenforced
            .get_or_create(&NoLabels {})
            .set(gauge(holes().count()));
        self.in_tree_violating
            .get_or_create(&NoLabels {})
            .set(count(holes().map(|ns| ns.violating_pods).sum()));
        self.in_tree_ready
            .get_or_create(&NoLabels {})
            .set(i64::from(in_tree.is_empty() || in_tree.verdict.ready));
    }

    /// Removes every audit gauge series (this replica no longer audits).
    pub fn clear_audit(&self) {
        self.audit_pods.clear();
        self.audit_templates.clear();
        self.group_ready.clear();
        self.group_blockers.clear();
        self.reservation_intruders.clear();
        self.reservation_ready.clear();
        self.in_tree_pods.clear();
        for family in [&self.in_tree_unenforced, &self.in_tree_violating, &self.in_tree_ready] {
            family.clear();
        }
    }

    pub fn audit_scanned(&self, result: ScanResult) {
        self.audit_scans
            .get_or_create(&ResultLabels {
                result: result.as_str(),
            })
            .inc();
    }

    pub fn set_audit_duration(&self, elapsed: Duration) {
        self.audit_duration.set(elapsed.as_secs_f64());
    }
}

#[cfg(test)]
mod tests;
