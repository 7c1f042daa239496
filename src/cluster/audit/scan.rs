//! The scan: the namespaces, then the workloads and pods of each namespace the audit decides,
//! listed page by page (`limit` / `continue`) into the engine's one object ([`Scan`]: each
//! running pod and template decided as enforce would decide its re-creation, counted as the pages
//! arrive): a scan holds one page of objects and one namespace's controllers, never all pods. Every request is bounded by a
//! timeout: an API server that stops answering ends the scan with [`AuditError::Timeout`].

use std::fmt;
use std::time::{Duration, Instant};

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{self, Node, PodTemplateSpec};
use kube::api::ListParams;
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use pod_director_engine::audit::Audit;
use pod_director_engine::audit::tally::Scan;
use pod_director_engine::config::Config;
use pod_director_engine::placement::{NodeInfo, NodeView, Pod};

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
    /// Whether the API server runs the in-tree plugins: probed, or as declared.
    pub in_tree_plugins: super::plugins::InTreePlugins,
}

impl Default for ScanOptions {
    fn default() -> Self {
        Self {
            group: None,
            page_size: DEFAULT_PAGE_SIZE,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            in_tree_plugins: super::plugins::InTreePlugins::default(),
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
pub(crate) async fn list_nodes(client: &Client, options: &ScanOptions) -> Result<Vec<NodeInfo>, AuditError> {
    let mut nodes = Vec::new();
    for_each_page(
        client,
        &Node::url_path(&(), None),
        "nodes",
        options,
        |node: Node| {
            nodes.push(NodeInfo::from_node(&node));
        },
        |_| {},
    )
    .await?;
    Ok(nodes)
}

/// One scan of the cluster: every namespace listed into the engine's [`Scan`], whether the API
/// server runs the in-tree plugins its annotated namespaces ask for, then the workloads and pods
/// of those it decides, namespace by namespace; `nodes` gives the feasibility counts
/// (`None`: none). `progress` is called after every page of pods and every namespace.
pub(crate) async fn scan(
    client: &Client,
    config: &Config,
    nodes: Option<&dyn NodeView>,
    options: &ScanOptions,
    progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<Audit, AuditError> {
    let started = Instant::now();
    let mut audit = Scan::new(config, nodes, options.group.as_deref());
    let namespaces = v1::Namespace::url_path(&(), None);
    let each = |namespace: v1::Namespace| audit.namespace(namespace.metadata);
    for_each_page(client, &namespaces, "namespaces", options, each, |_| {}).await?;
    let namespaces = audit.namespaces();
    super::plugins::detect(client, &mut audit, &options.in_tree_plugins, options.request_timeout).await;
    let at = |done: usize, (_, pods, templates): (usize, u64, u64)| Progress {
        namespaces_done: done,
        namespaces_total: namespaces.len(),
        pods,
        templates,
        elapsed: started.elapsed(),
    };
    for (done, name) in namespaces.iter().enumerate() {
        audit.enter(name);
        let a = &mut audit;
        scan_workloads::<Deployment>(client, name, options, a).await?;
        scan_workloads::<ReplicaSet>(client, name, options, a).await?;
        scan_workloads::<StatefulSet>(client, name, options, a).await?;
        scan_workloads::<DaemonSet>(client, name, options, a).await?;
        scan_workloads::<CronJob>(client, name, options, a).await?;
        scan_workloads::<Job>(client, name, options, a).await?;
        // Pods: page by page, each decoded straight into the engine's pod (metadata and placement
        // fields): a pod's containers, status and managed fields are skipped as the page is read.
        let (_, mut pods, templates) = audit.counts();
        let url = v1::Pod::url_path(&(), Some(name));
        let each = |pod: Pod| audit.pod(pod);
        let after_page = |count: u64| {
            pods += count;
            progress(at(done, (done, pods, templates)));
        };
        for_each_page(
            client,
            &url,
            &format!("pods in namespace {name}"),
            options,
            each,
            after_page,
        )
        .await?;
        progress(at(done + 1, audit.counts()));
    }
    Ok(audit.finish(started.elapsed()))
}

/// A workload kind whose pod template the audit decides.
trait Workload: Resource<DynamicType = (), Scope = NamespaceResourceScope> + Clone + DeserializeOwned + fmt::Debug {
    /// Its list, as errors name it.
    const PLURAL: &'static str;

    fn template(&self) -> Option<&PodTemplateSpec>;
}

impl Workload for Deployment {
    const PLURAL: &'static str = "deployments";
    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().map(|s| &s.template)
    }
}

impl Workload for ReplicaSet {
    const PLURAL: &'static str = "replicasets";
    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().and_then(|s| s.template.as_ref())
    }
}

impl Workload for StatefulSet {
    const PLURAL: &'static str = "statefulsets";
    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().map(|s| &s.template)
    }
}

impl Workload for DaemonSet {
    const PLURAL: &'static str = "daemonsets";
    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().map(|s| &s.template)
    }
}

impl Workload for CronJob {
    const PLURAL: &'static str = "cronjobs";
    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec
            .as_ref()
            .and_then(|s| s.job_template.spec.as_ref())
            .map(|s| &s.template)
    }
}

impl Workload for Job {
    const PLURAL: &'static str = "jobs";
    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().map(|s| &s.template)
    }
}

/// Lists the `K`s of namespace `name` into the scan.
async fn scan_workloads<K: Workload>(
    client: &Client,
    name: &str,
    options: &ScanOptions,
    audit: &mut Scan<'_>,
) -> Result<(), AuditError> {
    let (api_version, kind) = (K::api_version(&()), K::kind(&()));
    let each = |object: K| audit.workload(&api_version, &kind, object.meta(), object.template());
    let what = format!("{} in namespace {name}", K::PLURAL);
    for_each_page(client, &K::url_path(&(), Some(name)), &what, options, each, |_| {}).await
}

#[cfg(test)]
mod tests;
