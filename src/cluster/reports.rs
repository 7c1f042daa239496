//! The continuous audit's findings as OpenReports (`openreports.io/v1alpha1` `Report`), one per
//! namespace that selects a group, where Kubernetes users already look (`kubectl get reports`,
//! Policy Reporter): see `pod_director_engine::audit::open_reports` for what a report says.
//!
//! **No scan of its own, never on the admission path.** The audit's holder hands each completed
//! scan's outcomes to a [`Publisher`] (building the wanted reports is pure and cheap); a task of
//! its own writes them, so a slow API server delays neither admission nor the next scan, and a
//! newer scan replaces one not yet written.
//!
//! At each scan the writer checks discovery (so a CRD installed later is picked up without a
//! restart), lists the reports it owns (label `app.kubernetes.io/managed-by=pod-director`, its
//! report name), and writes only what changed: a report whose [`open_reports::DIGEST_ANNOTATION`]
//! equals the digest of the wanted content is left alone (no write, no new resourceVersion); the
//! others are applied (server-side apply, field manager `pod-director-reports`), and the reports
//! of namespaces that left every group are deleted. Every request is bounded by a timeout.
//!
//! The CRD absent, removed at runtime, or RBAC refusing: one log line when that state begins
//! (info for an absent CRD, warn otherwise), nothing written, no crash, readiness untouched;
//! the next scan tries again. With `--reports false`, the audit's holder deletes the reports it
//! wrote, if the CRD is served and it may (the chart's RBAC goes with the feature: see the book).

pub(crate) mod events;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use pod_director_engine::audit::Audit;
use pod_director_engine::audit::open_reports::{self, API_GROUP, API_VERSION, DIGEST_ANNOTATION, Report, Settings};
use pod_director_engine::compile::{MANAGED_BY, MANAGED_BY_LABEL};
use pod_director_engine::config::Config;

/// The field manager of the reports' server-side applies.
pub(crate) const FIELD_MANAGER: &str = "pod-director-reports";
/// Logged when the writer finds the Report CRD served (after it was not, or at start).
pub const REPORTS_SERVED: &str = "reports: the Report CRD is served; writing a report per grouped namespace";
/// Logged when the writer finds the Report CRD not served (at start, or removed): install the
/// OpenReports CRDs to get reports; checked again at each audit scan.
pub const REPORTS_NOT_SERVED: &str =
    "reports: the Report CRD is not served; nothing written, checked again at each audit scan";
/// Longest wait for one request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// What one pass wants: the reports (none with `--reports false`: pod-director's are removed),
/// and the audit's outcomes (for the Events).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Wanted {
    pub reports: BTreeMap<String, Report>,
    pub ledger: Arc<pod_director_engine::audit::workloads::Ledger>,
}

/// What the writer does.
#[derive(Debug, Clone)]
pub struct ReportsOptions {
    pub settings: Settings,
    /// Write reports (else remove pod-director's, once).
    pub reports: bool,
    /// Publish Events on verdict changes, as this reporting controller.
    pub events: Option<String>,
}

/// The audit's side: hands each completed scan to the writer (never blocks).
#[derive(Debug, Clone)]
pub struct Publisher {
    settings: Settings,
    enabled: bool,
    /// Events are published on verdict changes (the writer compares ledgers).
    events: bool,
    tx: Arc<watch::Sender<Option<Arc<Wanted>>>>,
}

impl Publisher {
    /// Builds the reports of `audit` and hands them to the writer (replacing any not yet written).
    /// The audit's ledger moves into what the writer keeps until the next scan (taken out of
    /// `audit`, not copied); with neither reports nor Events nothing reads it, and it is dropped.
    pub fn publish(&self, audit: &mut Audit, config: &Config) {
        let mut ledger = pod_director_engine::audit::workloads::of_audit(audit);
        if !self.enabled && !self.events {
            ledger = Default::default();
        }
        let ledger = Arc::new(ledger);
        let reports = if self.enabled {
            open_reports::desired(&ledger, config, &self.settings)
        } else {
            BTreeMap::new()
        };
        self.tx.send_replace(Some(Arc::new(Wanted { reports, ledger })));
    }
}

/// Where the writer stands, logged when it changes (a failure by its kind, not its text: the
/// same failure at every scan is one line).
#[derive(Debug, Clone, PartialEq, Eq)]
enum CrdState {
    Unknown,
    Writing,
    Absent,
    Failing(&'static str),
}

fn state_of(result: &Result<Written, PassError>) -> CrdState {
    match result {
        Ok(_) => CrdState::Writing,
        Err(PassError::Absent) => CrdState::Absent,
        Err(err) if err.forbidden() => CrdState::Failing("forbidden"),
        Err(PassError::Timeout { .. }) => CrdState::Failing("timeout"),
        Err(PassError::Api { .. }) => CrdState::Failing("api"),
    }
}

/// Why a pass could not complete.
#[derive(Debug, thiserror::Error)]
enum PassError {
    #[error("the Report CRD ({API_VERSION}) is not served")]
    Absent,
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("{what}: no answer within {REQUEST_TIMEOUT:?}")]
    Timeout { what: String },
}

impl PassError {
    fn api(what: impl Into<String>, source: kube::Error) -> Self {
        match &source {
            kube::Error::Api(status) if status.code == 404 => PassError::Absent,
            _ => PassError::Api {
                what: what.into(),
                source,
            },
        }
    }

    /// Refused by RBAC (a 403 that is not the namespace lifecycle's).
    fn forbidden(&self) -> bool {
        matches!(self, PassError::Api { source: kube::Error::Api(s), .. } if s.is_forbidden())
            && !self.namespace_terminating()
    }

    /// Refused because the namespace is being deleted (the API server's `NamespaceTerminating` cause).
    fn namespace_terminating(&self) -> bool {
        let PassError::Api {
            source: kube::Error::Api(status),
            ..
        } = self
        else {
            return false;
        };
        status
            .details
            .as_ref()
            .is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating"))
    }
}

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Written {
    pub applied: usize,
    pub deleted: usize,
    pub unchanged: usize,
    /// Reports not written because their namespace is being deleted.
    pub skipped: usize,
}

/// Starts the writer (reports and Events, as `options` say).
pub fn spawn_reports(
    client: Client,
    options: ReportsOptions,
    mut shutdown: watch::Receiver<bool>,
) -> (Publisher, JoinHandle<()>) {
    let (tx, mut rx) = watch::channel::<Option<Arc<Wanted>>>(None);
    let ReportsOptions {
        settings,
        reports: enabled,
        events,
    } = options;
    let publisher = Publisher {
        settings: settings.clone(),
        enabled,
        events: events.is_some(),
        tx: Arc::new(tx),
    };
    let task = tokio::spawn(async move {
        let mut state = CrdState::Unknown;
        let mut cleaned = false;
        let recorder = events.map(|controller| {
            (
                events::recorder(client.clone(), &controller),
                events::Baseline::default(),
            )
        });
        let mut recorder = recorder;
        loop {
            tokio::select! {
                changed = rx.changed() => if changed.is_err() { return },
                _ = shutdown.wait_for(|stop| *stop) => return,
            }
            let Some(wanted) = rx.borrow_and_update().clone() else {
                continue;
            };
            if enabled || !cleaned {
                let result = tokio::select! {
                    r = pass(&client, &settings, &wanted, enabled) => r,
                    _ = shutdown.wait_for(|stop| *stop) => return,
                };
                // Off: cleaned up once (or nothing to clean: no CRD, no permission); done until the next start.
                cleaned = !enabled;
                state = log_pass(state, enabled, &result);
            }
            if let Some((recorder, baseline)) = recorder.as_mut() {
                let changes = baseline.changes(&wanted.ledger);
                tokio::select! {
                    _ = events::publish(recorder, &changes) => {}
                    _ = shutdown.wait_for(|stop| *stop) => return,
                }
            }
        }
    });
    (publisher, task)
}

/// Logs a pass: one line when the writer's state changes, the writes when there were any.
fn log_pass(previous: CrdState, enabled: bool, result: &Result<Written, PassError>) -> CrdState {
    let state = state_of(result);
    let changed = state != previous;
    match result {
        Ok(w) => {
            if changed && enabled {
                info!(api_version = API_VERSION, "{REPORTS_SERVED}");
            }
            if w.applied + w.deleted > 0 {
                info!(
                    reports.applied = w.applied as u64,
                    reports.deleted = w.deleted as u64,
                    reports.unchanged = w.unchanged as u64,
                    "reports: written"
                );
            } else {
                debug!(reports.unchanged = w.unchanged as u64, "reports: unchanged");
            }
        }
        Err(PassError::Absent) if changed && enabled => info!(api_version = API_VERSION, "{REPORTS_NOT_SERVED}"),
        Err(err) if changed && !enabled => debug!(error = err.to_string().as_str(), "reports: no cleanup"),
        Err(err) if changed && err.forbidden() => warn!(
            error = err.to_string().as_str(),
            "reports: RBAC refuses access to reports (openreports.io: get, list, create, patch, delete); nothing \
             written until it is granted (the chart grants it with reports.enabled)"
        ),
        Err(err) if changed => warn!(
            error = err.to_string().as_str(),
            "reports: cannot write the reports; retried at the next audit"
        ),
        Err(_) => {}
    }
    state
}

fn api_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk(API_GROUP, "v1alpha1", "Report");
    ApiResource::from_gvk_with_plural(&gvk, "reports")
}

async fn bounded<T>(
    what: &str,
    request: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, PassError> {
    tokio::time::timeout(REQUEST_TIMEOUT, request)
        .await
        .map_err(|_| PassError::Timeout { what: what.to_owned() })?
        .map_err(|e| PassError::api(what, e))
}

/// Whether the API server serves the Report kind.
async fn served(client: &Client) -> Result<bool, PassError> {
    match bounded("discovery", client.list_api_group_resources(API_VERSION)).await {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == "reports")),
        Err(PassError::Absent) => Ok(false),
        Err(err) => Err(err),
    }
}

/// One pass: discovery, the reports owned, then the writes that differ.
async fn pass(client: &Client, settings: &Settings, wanted: &Wanted, enabled: bool) -> Result<Written, PassError> {
    if !served(client).await? {
        return Err(PassError::Absent);
    }
    let ar = api_resource();
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let mut existing: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut token: Option<String> = None;
    let selector = format!("{MANAGED_BY_LABEL}={MANAGED_BY}");
    // Bounded: at most 1000 pages of 500.
    for _ in 0..1000 {
        let mut params = ListParams::default().labels(&selector).limit(500);
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let page = bounded("list reports", all.list(&params)).await?;
        for report in page.items {
            if report.metadata.name.as_deref() != Some(settings.name.as_str()) {
                continue;
            }
            let Some(namespace) = report.metadata.namespace.clone() else {
                continue;
            };
            let digest = report
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DIGEST_ANNOTATION))
                .cloned();
            existing.insert(namespace, digest);
        }
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            break;
        }
    }
    let mut written = Written::default();
    let apply = PatchParams::apply(FIELD_MANAGER).force();
    for (namespace, report) in &wanted.reports {
        if existing
            .get(namespace)
            .is_some_and(|d| d.as_deref() == Some(report.digest.as_str()))
        {
            written.unchanged += 1;
            continue;
        }
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
        let what = format!("apply report {namespace}/{}", settings.name);
        match bounded(&what, api.patch(&settings.name, &apply, &Patch::Apply(&report.object))).await {
            Ok(_) => written.applied += 1,
            // Its namespace is being deleted (the audit listed it just before): nothing to report there.
            Err(err) if err.namespace_terminating() => written.skipped += 1,
            Err(err) => return Err(err),
        }
    }
    for namespace in existing.keys().filter(|ns| !wanted.reports.contains_key(*ns)) {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
        let what = format!("delete report {namespace}/{}", settings.name);
        match bounded(&what, api.delete(&settings.name, &DeleteParams::default())).await {
            Ok(_) | Err(PassError::Absent) => written.deleted += 1,
            Err(err) => return Err(err),
        }
    }
    if !enabled && written.deleted > 0 {
        info!("reports: off (--reports false): the reports pod-director wrote are deleted");
    }
    Ok(written)
}

#[cfg(test)]
mod tests;
