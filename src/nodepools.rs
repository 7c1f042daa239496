//! Karpenter NodePools (`karpenter.sh/v1`, cluster-scoped): the pools an
//! autoscaler creates nodes for on demand, read so that "no node now" is not
//! mistaken for "no node ever" ([`crate::placement::provision`] decides).
//!
//! [`KubeNodePools::start`] looks the resource up in the API server's discovery
//! and, only when the cluster serves it, watches NodePools into a
//! [`NodePoolStore`]; while it is not served it looks again every discovery
//! interval — no error, one info line. A watch refused for lack of RBAC
//! (`rbac.nodePools: false`) is logged once and counts no NodePool. If the
//! resource goes away (the CRD deleted), the store empties and discovery resumes.
//!
//! The store is "ready" once it knows: the resource is not served, the first
//! list completed, or listing is forbidden. Decisions before that count no
//! NodePool.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, discovery};
use tokio_util::task::AbortOnDropHandle;
use tracing::{info, warn};

use crate::nodes::NodePoolStore;
use crate::placement::provision::NodePool;

/// The resource the cluster serves NodePools as.
fn gvk() -> GroupVersionKind {
    GroupVersionKind::gvk("karpenter.sh", "v1", "NodePool")
}

/// What a watch attempt ended with.
enum Ended {
    /// The resource is no longer served: back to discovery.
    Gone,
    /// Listing is forbidden: nothing more to do until restart.
    Forbidden,
}

/// Reads NodePools from the API server into a store, for as long as it lives.
pub struct KubeNodePools {
    store: Arc<NodePoolStore>,
    _task: AbortOnDropHandle<()>,
}

impl KubeNodePools {
    /// Starts discovery (and, once the resource is served, the watch) in a task.
    pub fn start(client: Client, discovery_interval: Duration) -> Self {
        let store = Arc::new(NodePoolStore::new());
        store.set_ready(false);
        let writer = store.clone();
        let task = tokio::spawn(async move {
            let mut announced = false;
            loop {
                match discovery::pinned_kind(&client, &gvk()).await {
                    Ok((resource, _)) => {
                        info!("karpenter.sh/v1 NodePools are served: reading them");
                        announced = false;
                        match watch(&client, &resource, &writer).await {
                            Ended::Gone => {
                                info!("karpenter.sh/v1 NodePools are no longer served; counting none");
                                writer.replace(Vec::new());
                                writer.set_ready(true);
                            }
                            Ended::Forbidden => {
                                writer.replace(Vec::new());
                                writer.set_ready(true);
                                return;
                            }
                        }
                    }
                    Err(_) => {
                        if !announced {
                            info!(
                                interval_s = discovery_interval.as_secs_f64(),
                                "karpenter.sh/v1 NodePools are not served (no Karpenter CRDs): counting none; \
                                 looking again every interval"
                            );
                            announced = true;
                        }
                        writer.set_ready(true);
                    }
                }
                tokio::time::sleep(discovery_interval).await;
            }
        });
        Self {
            store,
            _task: AbortOnDropHandle::new(task),
        }
    }

    pub fn store(&self) -> Arc<NodePoolStore> {
        self.store.clone()
    }
}

fn status_code(err: &watcher::Error) -> Option<u16> {
    match err {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status)) => Some(status.code),
        watcher::Error::WatchFailed(kube::Error::Api(status)) => Some(status.code),
        _ => None,
    }
}

/// Watches NodePools into `store` until the resource goes away or listing is forbidden.
async fn watch(client: &Client, resource: &ApiResource, store: &NodePoolStore) -> Ended {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    let mut stream = std::pin::pin!(stream);
    let mut listing: Option<Vec<NodePool>> = None;
    let mut synced = false;
    let read = |object: &DynamicObject| NodePool::from_value(&serde_json::to_value(object).unwrap_or_default());
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => listing = Some(Vec::new()),
            Ok(watcher::Event::InitApply(object)) => listing.get_or_insert_with(Vec::new).push(read(&object)),
            Ok(watcher::Event::InitDone) => {
                store.replace(listing.take().unwrap_or_default());
                if !synced {
                    info!(nodepools = store.pools().len(), "NodePools synced");
                    synced = true;
                }
                store.set_ready(true);
            }
            Ok(watcher::Event::Apply(object)) => store.apply(read(&object)),
            Ok(watcher::Event::Delete(object)) => store.delete(object.metadata.name.as_deref().unwrap_or_default()),
            Err(err) => match status_code(&err) {
                Some(404) => return Ended::Gone,
                Some(403) => {
                    warn!(
                        error = %err,
                        "cannot list karpenter.sh NodePools (forbidden): counting none; grant get/list/watch on \
                         nodepools (chart value rbac.nodePools) to count pools Karpenter provisions on demand"
                    );
                    return Ended::Forbidden;
                }
                _ => warn!(error = %err, "NodePool watch failed; retrying with backoff"),
            },
        }
    }
    Ended::Gone
}
