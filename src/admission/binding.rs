//! `pods/binding` at `/validate` and `/validate-reservation`: a Binding puts a pending pod on a
//! node without the scheduler, so `/validate` decides whether the node is one of the pod's
//! group (as it decides a `spec.nodeName` at CREATE) and the reservation whether it intrudes on
//! a reserved pool.
//!
//! The Binding names the pod (the request's `name`) and the node (`target.name`), nothing else:
//! when the engine cannot skip the binding without them ([`decision::binding_skipped`]: no
//! group, no reservation, an excluded namespace, a trusted scheduler binds), the pod is read from the
//! API server (bounded and counted, [`crate::cluster::pods`]), then the node and the engine's
//! decision as for any request ([`Admission::decide`] of a `Subject::Binding`: like an UPDATE that
//! sets the pod's `spec.nodeName`). A pod that cannot be read makes the binding undecidable:
//! HTTP 503, so the API server applies the entry's failurePolicy (Fail for a group, or a
//! reservation, in enforce). At `/mutate` a binding is admitted untouched, whatever its object.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Binding;
use kube::core::DynamicObject;
use kube::core::admission::AdmissionRequest;
use serde_json::value::RawValue;

use super::parse::{invalid, namespace_error};
use super::wire::Trail;
use super::{Admission, AdmissionError};
use crate::cluster::pods::{self, PodLookupError, PodMetrics, PodSource};
use pod_director_engine::config::Config;
use pod_director_engine::decision::{self, Decidable, Subject};
use pod_director_engine::placement::{self, Context, Outcome, Webhook};

/// What [`AdmissionError::InvalidObject`] calls the object of a binding.
const BINDING: &str = "v1 Binding";

/// The node a Binding targets (`target.name`), from its raw object.
fn target(object: Option<&RawValue>) -> Result<String, AdmissionError> {
    let raw = object.ok_or(AdmissionError::MissingObject)?;
    let binding: Binding =
        serde_json::from_str(raw.get()).map_err(|e| invalid("object", BINDING, &Trail::default(), e))?;
    match binding.target.name {
        Some(name) if !name.is_empty() => Ok(name),
        _ => {
            let error = <serde_json::Error as serde::de::Error>::missing_field("target.name");
            Err(invalid("object", BINDING, &Trail::default(), error))
        }
    }
}

impl Admission {
    /// Decides `pods/binding` requests with the bound pods read from `pods`.
    pub fn with_pods(mut self, pods: Arc<dyn PodSource>, metrics: PodMetrics) -> Self {
        self.pods = Some((pods, metrics));
        self
    }

    /// `webhook`'s decision of a Binding (see the module's text).
    pub(super) async fn binding(
        &self,
        webhook: Webhook,
        config: &Config,
        request: &AdmissionRequest<DynamicObject>,
        object: Option<&RawValue>,
    ) -> Result<Outcome, AdmissionError> {
        if let Some(elsewhere) = decision::binding_elsewhere(webhook) {
            return Ok(elsewhere);
        }
        let target = target(object)?;
        if let Some(error) = namespace_error(request) {
            return Err(error);
        }
        let found = self.namespace(config, request).await?;
        let namespace = placement::Namespace::new(request.namespace.as_deref().unwrap_or_default(), &found.labels);
        let ctx = Context::from_user_info(&request.user_info);
        if let Some(skipped) = decision::binding_skipped(webhook, config, &namespace, &ctx) {
            return Ok(skipped);
        }
        let Some((source, metrics)) = &self.pods else {
            return Err(PodLookupError::NoSource.into());
        };
        let found = pods::lookup(
            source.as_ref(),
            namespace.name,
            &request.name,
            pods::FETCH_TIMEOUT,
            metrics,
        )
        .await?;
        let Some(pod) = found else {
            // The API server refuses a binding of a pod that does not exist.
            return Ok(decision::skipped(webhook, "the bound pod does not exist"));
        };
        let subject = Subject::Binding {
            pod: &pod,
            target: &target,
        };
        match Decidable::at(webhook, &subject) {
            Ok(decidable) => self.decide(decidable, config, &namespace, ctx).await,
            Err(why) => Ok(decision::skipped(webhook, why)),
        }
    }
}

#[cfg(test)]
mod tests;
