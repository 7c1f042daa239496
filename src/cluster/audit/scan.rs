//! The scan: every namespace of the groups listed page by page (`limit` / `continue`), each
//! running pod and workload template handed to the engine's tally ([`tally::Scanned`]: decided
//! as enforce would decide its re-creation, counted as the pages arrive): a scan holds one page
//! of objects and one namespace's controllers, never all pods. Every request is bounded by a
//! timeout: an API server that stops answering ends the scan with [`AuditError::Timeout`].

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Namespace as CoreNamespace, Node, Pod, PodTemplateSpec};
use kube::api::{ListParams, ObjectMeta};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use pod_director_engine::audit::requester::{self, ControllerKind, Controllers};
use pod_director_engine::audit::reservation::ReservationAudit;
use pod_director_engine::audit::tally::{self, Scanned};
use pod_director_engine::audit::{Audit, GroupAudit};
use pod_director_engine::config::Config;
use pod_director_engine::placement::{Namespace, NodeView, Requester, Selection, select_group};

/// Objects per list request (the `limit` of each page): a fifth of kubectl's chunk size, so that the page a
/// scan holds (its JSON text and decoded items) stays near 1 MiB; 100 requests per 10,000 pods.
pub(crate) const DEFAULT_PAGE_SIZE: u32 = 100;
/// Longest wait for one list request.
pub(crate) const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a scan could not complete.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AuditError {
    #[error(
        "the API server did not answer within {timeout:?} while listing {what}: check that it is reachable \
         (KUBECONFIG or the in-cluster service account), or raise --request-timeout"
    )]
    Timeout { what: String, timeout: Duration },
    #[error("cannot list {what}: {}{hint}", chain(source))]
    List {
        what: String,
        #[source]
        source: kube::Error,
        hint: &'static str,
    },
    #[error("cannot list {what}: the API server sent the same continue token twice")]
    Pagination { what: String },
    #[error("cannot configure a Kubernetes client (KUBECONFIG or the in-cluster service account): {0}")]
    Client(String),
}

/// An error with its causes, `outer: inner: innermost` (kube's own text stops at the outer one).
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// How one scan lists.
#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// Only this group (all groups when `None`; the CLI checks that the configuration has it).
    pub group: Option<String>,
    /// `limit` of each list request.
    pub page_size: u32,
    /// Longest wait for one list request.
    pub request_timeout: Duration,
}

impl Default for ScanOptions {
    fn default() -> Self {
        Self {
            group: None,
            page_size: DEFAULT_PAGE_SIZE,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }
}

/// How far a scan has come (for progress lines).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Progress {
    pub namespaces_done: usize,
    pub namespaces_total: usize,
    pub pods: u64,
    pub templates: u64,
    pub elapsed: Duration,
}

/// One page of a list, as far as the audit reads it: the items decoded as `T` (a lean type
/// skips every field it does not name, unbuilt) and the continue token.
#[derive(serde::Deserialize)]
#[serde(bound = "T: DeserializeOwned")]
struct Page<T> {
    #[serde(default)]
    metadata: PageMeta,
    #[serde(default)]
    items: Vec<T>,
}

#[derive(Default, serde::Deserialize)]
struct PageMeta {
    #[serde(default, rename = "continue")]
    continue_: Option<String>,
}

/// Lists the collection at `url` (a `K::url_path`) page by page (`limit` / `continue`), handing
/// every object, decoded as `T`, to `each`; `after_page` is told how many objects each page had.
///
/// No `resourceVersion` is sent: each list is a consistent read with a `limit`, which the API
/// server answers from its watch cache (consistent reads from the cache: on by default since
/// 1.31, given etcd's progress notifications) and the continuations from the cache's snapshots
/// (`ListFromCacheSnapshot`, on by default since 1.34; older servers read those from etcd).
/// `resourceVersion=0` is no cheaper and is unbounded: the watch cache ignores `limit` with it
/// and sends the whole collection in one page (k8s.io/apiserver `computeListLimit`, 1.37 too).
pub(crate) async fn for_each_page<T: DeserializeOwned>(
    client: &Client,
    url: &str,
    what: &str,
    options: &ScanOptions,
    mut each: impl FnMut(T),
    mut after_page: impl FnMut(u64),
) -> Result<(), AuditError> {
    let request = kube::core::Request::new(url);
    let list_error = |source: kube::Error| AuditError::List {
        what: what.to_owned(),
        hint: forbidden_hint(&source),
        source,
    };
    let mut token: Option<String> = None;
    loop {
        let mut params = ListParams::default().limit(options.page_size.max(1));
        if let Some(token) = &token {
            params = params.continue_token(token);
        }
        let mut http = request
            .list(&params)
            .map_err(|e| list_error(kube::Error::BuildRequest(e)))?;
        http.extensions_mut().insert("list");
        let page: Page<T> = tokio::time::timeout(options.request_timeout, client.request(http))
            .await
            .map_err(|_| AuditError::Timeout {
                what: what.to_owned(),
                timeout: options.request_timeout,
            })?
            .map_err(list_error)?;
        let next = page.metadata.continue_.filter(|t| !t.is_empty());
        let count = page.items.len() as u64;
        page.items.into_iter().for_each(&mut each);
        after_page(count);
        match next {
            None => return Ok(()),
            Some(next) if token.as_deref() == Some(next.as_str()) => {
                return Err(AuditError::Pagination { what: what.to_owned() });
            }
            Some(next) => token = Some(next),
        }
    }
}

fn forbidden_hint(error: &kube::Error) -> &'static str {
    match error {
        kube::Error::Api(status) if status.is_forbidden() => {
            "; the audit reads namespaces, nodes, pods, deployments, replicasets, statefulsets, daemonsets, jobs \
             and cronjobs (get/list): grant them to whoever runs it (the chart does when audit.interval is not 0)"
        }
        _ => "",
    }
}

/// Every Node, as placement sees it (for the CLI; `serve` has its Node cache).
pub(crate) async fn list_nodes(
    client: &Client,
    options: &ScanOptions,
) -> Result<Vec<pod_director_engine::placement::NodeInfo>, AuditError> {
    let mut nodes = Vec::new();
    for_each_page(
        client,
        &Node::url_path(&(), None),
        "nodes",
        options,
        |node: Node| {
            nodes.push(pod_director_engine::placement::NodeInfo::from_node(&node));
        },
        |_| {},
    )
    .await?;
    Ok(nodes)
}

/// The controlling owner of an object, as `Kind/name`.
fn controlling_owner(meta: &ObjectMeta) -> Option<(&str, &str)> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| (o.kind.as_str(), o.name.as_str()))
}

fn name_of(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

/// One scan of the cluster: every group's namespaces, their workloads and pods,
/// decided as enforce would; `nodes` gives the feasibility counts (`None`: none).
/// `progress` is called after every page and namespace.
pub(crate) async fn scan(
    client: &Client,
    config: &Config,
    nodes: Option<&dyn NodeView>,
    options: &ScanOptions,
    progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<Audit, AuditError> {
    let started = Instant::now();
    let mut groups: BTreeMap<String, GroupAudit> = config
        .groups
        .iter()
        .filter(|(name, _)| options.group.as_ref().is_none_or(|g| g == *name))
        .map(|(name, group)| (name.clone(), GroupAudit::new(name.clone(), config.mode_of(group))))
        .collect();

    let mut reservations: Vec<ReservationAudit> = pod_director_engine::placement::reservation::reservations(config)
        .filter(|r| options.group.as_ref().is_none_or(|g| g == r.name))
        .map(|r| ReservationAudit::new(r.name.to_owned(), r.reserve.mode))
        .collect();
    let reserving = !reservations.is_empty();
    // Which namespace selects which audited group (labels only; dropped once grouped); with a
    // reservation, every other namespace too (`None`).
    let mut selected: Vec<(String, BTreeMap<String, String>, Option<String>)> = Vec::new();
    let mut undefined: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut side_doors: Vec<String> = Vec::new();
    for_each_page(
        client,
        &CoreNamespace::url_path(&(), None),
        "namespaces",
        options,
        |namespace: CoreNamespace| {
            let name = name_of(&namespace.metadata).to_owned();
            side_doors.extend(tally::side_door(config, &namespace.metadata));
            let labels = namespace.metadata.labels.unwrap_or_default();
            let choice = select_group(
                config,
                &Namespace {
                    name: &name,
                    labels: &labels,
                },
            );
            match choice {
                Selection::Group { name: group, .. } if groups.contains_key(group) => {
                    let group = Some(group.to_owned());
                    selected.push((name, labels, group));
                }
                Selection::Excluded => {}
                Selection::Unknown { name: group } => {
                    if reserving {
                        selected.push((name.clone(), labels, None));
                    }
                    if options.group.is_none() {
                        undefined.entry(group).or_default().push(name);
                    }
                }
                // Pods of any other namespace may intrude on a reservation.
                _ if reserving => selected.push((name, labels, None)),
                _ => {}
            }
        },
        |_| {},
    )
    .await?;
    selected.sort_by(|a, b| a.0.cmp(&b.0));

    let mut audit = Audit {
        groups: Vec::new(),
        nodes: nodes.and_then(NodeView::total),
        namespaces_scanned: 0,
        pods_scanned: 0,
        templates_scanned: 0,
        elapsed: Duration::ZERO,
        warnings: undefined
            .iter()
            .map(|(group, namespaces)| tally::undefined_group(config, group, namespaces))
            .chain(side_doors)
            .collect(),
        reservations: Vec::new(),
    };
    let total = selected.len();
    let at = |done: usize, a: &Audit| Progress {
        namespaces_done: done,
        namespaces_total: total,
        pods: a.pods_scanned,
        templates: a.templates_scanned,
        elapsed: started.elapsed(),
    };
    for (done, (namespace, labels, group_name)) in selected.iter().enumerate() {
        let mut group = group_name.as_ref().and_then(|name| groups.get_mut(name));
        if let Some(group) = group.as_mut() {
            group.namespaces += 1;
            group.workloads.namespace(namespace, &group.group);
        }
        let ns = Namespace {
            name: namespace,
            labels,
        };
        scan_namespace(
            client,
            Scanned {
                config,
                namespace: &ns,
                nodes,
                group,
                own: group_name.as_deref(),
                reservations: &mut reservations,
            },
            options,
            &mut audit,
            &mut |a: &Audit| progress(at(done, a)),
        )
        .await?;
        audit.namespaces_scanned += 1;
        progress(at(done + 1, &audit));
    }
    for mut group in groups.into_values() {
        group.conclude(config, nodes, audit.nodes);
        audit.groups.push(group);
    }
    for mut reservation in reservations {
        reservation.conclude(config, nodes);
        audit.reservations.push(reservation);
    }
    audit.elapsed = started.elapsed();
    Ok(audit)
}

/// A workload kind whose pod template the audit decides.
trait Workload: Resource<DynamicType = (), Scope = NamespaceResourceScope> + Clone + DeserializeOwned + fmt::Debug {
    /// Its list, as errors name it.
    const PLURAL: &'static str;
    /// What it is among the namespace's controllers (the owners its pods name), if anything.
    const CONTROLLER: Option<ControllerKind>;
    /// The kind of owner that manages it: then the owner's template is decided, not its own.
    const CONTROLLED_BY: Option<&'static str> = None;
    /// The `(apiVersion, kind)` of its pods' owner, named after it; `None` (a DaemonSet):
    /// decided as the object is at /mutate, where whoever updates it is a user.
    const POD_OWNER: Option<(&'static str, &'static str)>;

    fn template(&self) -> Option<&PodTemplateSpec>;
}

impl Workload for Deployment {
    const PLURAL: &'static str = "deployments";
    const CONTROLLER: Option<ControllerKind> = None;
    const POD_OWNER: Option<(&'static str, &'static str)> = Some(("apps/v1", "ReplicaSet"));
    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().map(|s| &s.template)
    }
}

impl Workload for ReplicaSet {
    const PLURAL: &'static str = "replicasets";
    const CONTROLLER: Option<ControllerKind> = Some(ControllerKind::ReplicaSet);
    const CONTROLLED_BY: Option<&'static str> = Some("Deployment");
    const POD_OWNER: Option<(&'static str, &'static str)> = Some(("apps/v1", "ReplicaSet"));
    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().and_then(|s| s.template.as_ref())
    }
}

impl Workload for StatefulSet {
    const PLURAL: &'static str = "statefulsets";
    const CONTROLLER: Option<ControllerKind> = Some(ControllerKind::StatefulSet);
    const POD_OWNER: Option<(&'static str, &'static str)> = Some(("apps/v1", "StatefulSet"));
    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().map(|s| &s.template)
    }
}

impl Workload for DaemonSet {
    const PLURAL: &'static str = "daemonsets";
    const CONTROLLER: Option<ControllerKind> = Some(ControllerKind::DaemonSet);
    const POD_OWNER: Option<(&'static str, &'static str)> = None;
    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().map(|s| &s.template)
    }
}

impl Workload for CronJob {
    const PLURAL: &'static str = "cronjobs";
    const CONTROLLER: Option<ControllerKind> = None;
    const POD_OWNER: Option<(&'static str, &'static str)> = Some(("batch/v1", "Job"));
    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec
            .as_ref()
            .and_then(|s| s.job_template.spec.as_ref())
            .map(|s| &s.template)
    }
}

impl Workload for Job {
    const PLURAL: &'static str = "jobs";
    const CONTROLLER: Option<ControllerKind> = Some(ControllerKind::Job);
    const CONTROLLED_BY: Option<&'static str> = Some("CronJob");
    const POD_OWNER: Option<(&'static str, &'static str)> = Some(("batch/v1", "Job"));
    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().map(|s| &s.template)
    }
}

/// Lists the `K`s of namespace `name` into `controllers` and hands each template that is
/// decided (as `Kind/name`, the pod it makes, and who would create that pod) to `decide`.
async fn scan_workloads<K: Workload>(
    client: &Client,
    config: &Config,
    name: &str,
    options: &ScanOptions,
    controllers: &mut Controllers,
    decide: &mut impl FnMut(String, &pod_director_engine::placement::Pod, Requester, bool),
) -> Result<(), AuditError> {
    let kind = K::kind(&());
    // A DaemonSet's pods are created by the DaemonSet controller, whoever writes the object.
    let creator = K::POD_OWNER
        .and_then(|(api_version, owner)| ControllerKind::of(api_version, owner))
        .unwrap_or(ControllerKind::DaemonSet);
    let creator = requester::controller_requester(config, creator);
    let each = |object: K| {
        let meta = object.meta();
        let object_name = name_of(meta);
        let manager = K::CONTROLLED_BY
            .and_then(|controlled_by| controlling_owner(meta).filter(|(kind, _)| *kind == controlled_by))
            .map(|(kind, owner)| format!("{kind}/{owner}"));
        if let Some(controller) = K::CONTROLLER {
            let uid = meta.uid.as_deref().unwrap_or_default();
            controllers.insert(controller, object_name, uid, manager.clone());
        }
        if let (None, Some(template)) = (&manager, object.template()) {
            let owner = K::POD_OWNER.map(|(api_version, owner)| (api_version, owner, object_name));
            let pod = requester::template_pod(template, owner);
            decide(
                format!("{kind}/{object_name}"),
                &pod,
                creator.clone(),
                K::POD_OWNER.is_none(),
            );
        }
    };
    let what = format!("{} in namespace {name}", K::PLURAL);
    for_each_page(client, &K::url_path(&(), Some(name)), &what, options, each, |_| {}).await
}

/// Lists the workloads and the pods of one namespace, each decided into its group and the
/// reservations.
async fn scan_namespace(
    client: &Client,
    mut scanned: Scanned<'_>,
    options: &ScanOptions,
    audit: &mut Audit,
    progress: &mut (dyn FnMut(&Audit) + Send),
) -> Result<(), AuditError> {
    let (config, name) = (scanned.config, scanned.namespace.name);
    let mut controllers = Controllers::default();
    let mut templates = 0u64;
    let mut decide = |workload: String, pod: &pod_director_engine::placement::Pod, creator, daemon_set| {
        scanned.template(&workload, pod, creator, daemon_set);
        templates += 1;
    };
    let c = &mut controllers;
    scan_workloads::<Deployment>(client, config, name, options, c, &mut decide).await?;
    scan_workloads::<ReplicaSet>(client, config, name, options, c, &mut decide).await?;
    scan_workloads::<StatefulSet>(client, config, name, options, c, &mut decide).await?;
    scan_workloads::<DaemonSet>(client, config, name, options, c, &mut decide).await?;
    scan_workloads::<CronJob>(client, config, name, options, c, &mut decide).await?;
    scan_workloads::<Job>(client, config, name, options, c, &mut decide).await?;
    audit.templates_scanned += templates;

    // Pods: page by page, each decided as its re-creation would be.
    // Decoded straight into the engine's pod (metadata and placement fields): a pod's
    // containers, status and managed fields are skipped as the page is read, never built.
    for_each_page(
        client,
        &Pod::url_path(&(), Some(name)),
        &format!("pods in namespace {name}"),
        options,
        |pod: pod_director_engine::placement::Pod| scanned.pod(pod, &controllers),
        |count| {
            audit.pods_scanned += count;
            progress(audit);
        },
    )
    .await
}

#[cfg(test)]
mod tests;
