//! What creates nodes on demand, read from the cluster so that "no node now" is not
//! mistaken for "no node ever" ([`pod_director_engine::provision`] decides):
//! - Karpenter NodePools (`karpenter.sh/v1`, cluster-scoped);
//! - Cluster API MachineDeployments and MachineSets (`cluster.x-k8s.io`, the version the
//!   API server prefers) that the cluster-autoscaler scales (its min/max-size annotations).
//!
//! [`KubeProvisioners::start`] looks each resource up in the API server's discovery and,
//! only when the cluster serves it, watches it into a [`ProvisionerStore`]; while it is not
//! served it looks again every discovery interval — no error, one info line. A watch
//! refused for lack of RBAC is logged once and counts none of that resource. If a resource
//! goes away (its CRD deleted), its provisioners are dropped and discovery resumes.
//!
//! The store is ready once every resource is known: not served, listed, forbidden, or its
//! first list failed (then counted as none until a list succeeds).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, discovery};
use tokio_util::task::AbortOnDropHandle;
use tracing::{info, warn};

use crate::cluster::nodes::ProvisionerStore;
use pod_director_engine::provision::Provisioner;

/// One kind of object that provisioners are read from.
#[derive(Debug, Clone, Copy)]
struct Source {
    group: &'static str,
    /// `None`: the version the API server prefers.
    version: Option<&'static str>,
    kind: &'static str,
    /// Who reads it, for log lines and the RBAC hint.
    what: &'static str,
    rbac: &'static str,
}

const SOURCES: [Source; 3] = [
    Source {
        group: "karpenter.sh",
        version: Some("v1"),
        kind: "NodePool",
        what: "Karpenter NodePools",
        rbac: "rbac.nodePools",
    },
    Source {
        group: "cluster.x-k8s.io",
        version: None,
        kind: "MachineDeployment",
        what: "Cluster API MachineDeployments",
        rbac: "rbac.clusterApi",
    },
    Source {
        group: "cluster.x-k8s.io",
        version: None,
        kind: "MachineSet",
        what: "Cluster API MachineSets",
        rbac: "rbac.clusterApi",
    },
];

impl Source {
    /// The provisioner `object` is, if any, and the name it has (or had) in the store.
    fn read(&self, object: &DynamicObject) -> (String, Option<Provisioner>) {
        let value = serde_json::to_value(object).unwrap_or_default();
        let name = object.metadata.name.clone().unwrap_or_default();
        if self.kind == "NodePool" {
            return (format!("nodepool/{name}"), Some(Provisioner::karpenter(&value)));
        }
        let full = format!(
            "{}/{}/{name}",
            self.kind.to_ascii_lowercase(),
            object.metadata.namespace.as_deref().unwrap_or_default()
        );
        // A MachineSet of a MachineDeployment is scaled through its MachineDeployment.
        let owned = object
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == "MachineDeployment");
        if self.kind == "MachineSet" && owned {
            return (full, None);
        }
        (full, Provisioner::node_group(self.kind, &value))
    }

    /// Whether `p` was read from this source.
    fn owns(&self, p: &Provisioner) -> bool {
        let prefix = if self.kind == "NodePool" {
            "nodepool/".to_owned()
        } else {
            format!("{}/", self.kind.to_ascii_lowercase())
        };
        p.name.starts_with(&prefix)
    }

    async fn discover(&self, client: &Client) -> Option<ApiResource> {
        match self.version {
            Some(version) => {
                let gvk = GroupVersionKind::gvk(self.group, version, self.kind);
                discovery::pinned_kind(client, &gvk).await.ok().map(|(r, _)| r)
            }
            None => discovery::group(client, self.group)
                .await
                .ok()?
                .recommended_kind(self.kind)
                .map(|(r, _)| r),
        }
    }
}

/// What a watch attempt ended with.
enum WatchEnded {
    /// The resource is no longer served: back to discovery.
    Gone,
    /// Listing is forbidden: nothing more to do until restart.
    Forbidden,
}

/// Reads provisioners from the API server into a store, for as long as it lives.
pub(crate) struct KubeProvisioners {
    store: Arc<ProvisionerStore>,
    _tasks: Vec<AbortOnDropHandle<()>>,
}

impl KubeProvisioners {
    /// Starts discovery (and, once a resource is served, its watch), one task per resource.
    pub(crate) fn start(client: Client, discovery_interval: Duration) -> Self {
        let store = Arc::new(ProvisionerStore::new());
        store.expect(SOURCES.len());
        let tasks = SOURCES
            .iter()
            .map(|source| {
                let task = tokio::spawn(follow(*source, client.clone(), store.clone(), discovery_interval));
                AbortOnDropHandle::new(task)
            })
            .collect();
        Self { store, _tasks: tasks }
    }

    pub(crate) fn store(&self) -> Arc<ProvisionerStore> {
        self.store.clone()
    }
}

/// Every provisioner the cluster serves, listed once (`pod-director audit`). A resource the
/// cluster does not serve counts none; one listing is forbidden for counts none, with a note
/// on standard error.
pub(crate) async fn list(client: &Client) -> Result<Vec<Provisioner>, kube::Error> {
    let mut found = Vec::new();
    for source in &SOURCES {
        let Some(resource) = source.discover(client).await else {
            continue;
        };
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        match api.list(&kube::api::ListParams::default()).await {
            Ok(list) => found.extend(list.items.iter().filter_map(|o| source.read(o).1)),
            Err(kube::Error::Api(status)) if status.code == 403 => eprintln!(
                "audit: cannot list {} (forbidden): they are not counted as provisioners",
                source.what
            ),
            Err(err) => return Err(err),
        }
    }
    Ok(found)
}

/// Discovery, then the watch, of one source, until the task is dropped.
async fn follow(source: Source, client: Client, store: Arc<ProvisionerStore>, discovery_interval: Duration) {
    let mut known = false;
    let mut announced = false;
    let mut mark_known = || {
        if !known {
            store.known();
            known = true;
        }
    };
    loop {
        match source.discover(&client).await {
            Some(resource) => {
                info!(resource = source.kind, "{} are served: reading them", source.what);
                announced = false;
                let ended = watch(&source, &client, &resource, &store, &mut mark_known).await;
                store.replace_where(|p| source.owns(p), Vec::new());
                mark_known();
                match ended {
                    WatchEnded::Gone => info!("{} are no longer served; counting none", source.what),
                    WatchEnded::Forbidden => return,
                }
            }
            None => {
                if !announced {
                    info!(
                        interval_s = discovery_interval.as_secs_f64(),
                        "{} are not served: counting none; looking again every interval", source.what
                    );
                    announced = true;
                }
                mark_known();
            }
        }
        tokio::time::sleep(discovery_interval).await;
    }
}

fn status_code(err: &watcher::Error) -> Option<u16> {
    match err {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => Some(status.code),
        _ => None,
    }
}

/// Watches one source into `store` until the resource goes away or listing is forbidden.
async fn watch(
    source: &Source,
    client: &Client,
    resource: &ApiResource,
    store: &ProvisionerStore,
    synced: &mut (dyn FnMut() + Send),
) -> WatchEnded {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    let mut stream = std::pin::pin!(stream);
    let mut listing: Option<Vec<Provisioner>> = None;
    let mut listed = false;
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => listing = Some(Vec::new()),
            Ok(watcher::Event::InitApply(object)) => {
                if let (_, Some(p)) = source.read(&object) {
                    listing.get_or_insert_with(Vec::new).push(p);
                }
            }
            Ok(watcher::Event::InitDone) => {
                let found = listing.take().unwrap_or_default();
                let count = found.len();
                store.replace_where(|p| source.owns(p), found);
                if !listed {
                    info!(provisioners = count, "{} synced", source.what);
                    listed = true;
                }
                synced();
            }
            Ok(watcher::Event::Apply(object)) => match source.read(&object) {
                (_, Some(p)) => store.apply(p),
                (name, None) => store.delete(&name),
            },
            Ok(watcher::Event::Delete(object)) => store.delete(&source.read(&object).0),
            Err(err) => match status_code(&err) {
                Some(404) => return WatchEnded::Gone,
                Some(403) => {
                    warn!(
                        error = %err,
                        "cannot list {} (forbidden): counting none; grant get/list/watch on them (chart value {}) \
                         to count the nodes they provision on demand",
                        source.what,
                        source.rbac
                    );
                    return WatchEnded::Forbidden;
                }
                // A list that keeps failing (e.g. a CRD conversion webhook that is down) must not hold
                // readiness: the source is known, counting what it has, and the watch retries.
                _ => {
                    warn!(error = %err, "{} watch failed; retrying with backoff", source.what);
                    synced();
                }
            },
        }
    }
    WatchEnded::Gone
}

#[cfg(test)]
mod tests;
