//! The pod a Binding binds (`pods/binding`): the reservation decides the binding of a pod to a
//! reserved node, but the Binding names the pod only, so the pod is read from the API server
//! ([`KubePods`]: a GET bounded by [`FETCH_TIMEOUT`], counted in
//! `pod_director_binding_pod_lookups_total{result}`). No cache: bindings reach pod-director only
//! when a requester other than a trusted scheduler sends them (the entry's matchCondition), which
//! is rare; a watch of every pod of the cluster would cost far more than those GETs.

use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod as PodObject;
use kube::Client;
use kube::api::Api;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tracing::warn;

use crate::metrics::{ResultLabels, register};
use pod_director_engine::placement::Pod;

/// Longest wait for the GET of a bound pod.
pub(crate) const FETCH_TIMEOUT: Duration = Duration::from_secs(2);

/// Why the pod a Binding names could not be read: the binding cannot be decided.
#[derive(Debug, thiserror::Error)]
pub enum PodLookupError {
    #[error("pod {namespace}/{name} (the binding's) cannot be read from the API server: {reason}")]
    Api {
        namespace: String,
        name: String,
        reason: String,
    },
    #[error("pod {namespace}/{name} (the binding's) was not read from the API server within {timeout:?}")]
    Timeout {
        namespace: String,
        name: String,
        timeout: Duration,
    },
    #[error("the binding's pod cannot be read: pod-director runs without a cluster client")]
    NoSource,
}

/// Where bound pods are read from.
pub trait PodSource: Send + Sync + 'static {
    /// The pod `namespace/name`, as the engine reads it; `Ok(None)` when it does not exist.
    fn fetch<'a>(&'a self, namespace: &'a str, name: &'a str) -> BoxFuture<'a, Result<Option<Pod>, String>>;
}

/// Pods read with the cluster client.
pub(crate) struct KubePods {
    client: Client,
}

impl KubePods {
    pub(crate) fn new(client: Client) -> Self {
        Self { client }
    }
}

impl PodSource for KubePods {
    fn fetch<'a>(&'a self, namespace: &'a str, name: &'a str) -> BoxFuture<'a, Result<Option<Pod>, String>> {
        Box::pin(async move {
            let api: Api<PodObject> = Api::namespaced(self.client.clone(), namespace);
            match api.get_opt(name).await {
                Ok(found) => Ok(found.as_ref().map(Pod::from)),
                Err(error) => Err(error.to_string()),
            }
        })
    }
}

named_enum! {
    /// How the GET of a bound pod was answered (`result` label).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum PodLookupResult {
        /// The pod was read.
        Found => "found",
        /// The pod does not exist (the API server refuses the binding anyway).
        NotFound => "not_found",
        /// The GET failed or timed out: the binding is undecidable (503).
        Error => "error",
    }
}

/// `pod_director_binding_pod_lookups_total`.
#[derive(Debug, Clone)]
pub struct PodMetrics {
    lookups: Family<ResultLabels, Counter>,
}

impl PodMetrics {
    pub fn register(r: &mut Registry) -> Self {
        let lookups = register(
            r,
            "binding_pod_lookups",
            "GETs of the pod a pods/binding request binds, for the reservation's decision, by result",
            Family::default(),
        );
        Self { lookups }
    }

    /// Every result at 0 before its first lookup, so that `increase()` sees the first one.
    pub fn initialise(&self) {
        for result in PodLookupResult::ALL {
            let _ = self.lookups.get_or_create(&ResultLabels {
                result: result.as_str(),
            });
        }
    }

    fn looked_up(&self, result: PodLookupResult) {
        self.lookups
            .get_or_create(&ResultLabels {
                result: result.as_str(),
            })
            .inc();
    }
}

/// The pod `namespace/name` from `source`, bounded by `timeout` and counted.
pub(crate) async fn lookup(
    source: &dyn PodSource,
    namespace: &str,
    name: &str,
    timeout: Duration,
    metrics: &PodMetrics,
) -> Result<Option<Pod>, PodLookupError> {
    let answer = tokio::time::timeout(timeout, source.fetch(namespace, name)).await;
    let (result, outcome) = match answer {
        Ok(Ok(Some(pod))) => (PodLookupResult::Found, Ok(Some(pod))),
        Ok(Ok(None)) => (PodLookupResult::NotFound, Ok(None)),
        Ok(Err(reason)) => (
            PodLookupResult::Error,
            Err(PodLookupError::Api {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                reason,
            }),
        ),
        Err(_) => (
            PodLookupResult::Error,
            Err(PodLookupError::Timeout {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                timeout,
            }),
        ),
    };
    metrics.looked_up(result);
    if let Err(error) = &outcome {
        warn!(error = %error, "bound pod lookup failed");
    }
    outcome
}

#[cfg(test)]
mod tests;
