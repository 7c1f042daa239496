use serde_json::{Value, json};

use super::super::{AdmissionError, parse};
use super::*;

fn pod() -> Value {
    json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "generateName": "web-7c9f8d-", "namespace": "team-ci", "creationTimestamp": null,
            "labels": {"app": "web"}, "annotations": {"a": "b"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7c9f8d",
                "uid": "0f8e3c1a", "controller": true}]
        },
        "spec": {
            "containers": [{"name": "web", "image": "nginx:1.27", "resources": {"limits": {"cpu": "1"}}}],
            "nodeSelector": {"disk": "ssd"},
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 30}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}}},
            "terminationGracePeriodSeconds": 30, "priority": 0
        },
        "status": {}
    })
}

/// The review kube-core's builders make for `outcome`, serialized through a `Value` with
/// the patch swapped for base64: what [`decided`] must write.
fn reference(request: &AdmissionRequest<DynamicObject>, outcome: &Outcome, revision: &str) -> Value {
    let mut response = AdmissionResponse::from(request);
    if !outcome.allowed() {
        let message = outcome.message.clone();
        response = response.deny(message.unwrap_or_else(|| format!("pod-director: {}", outcome.decision)));
        response.result.status = Some(kube::core::response::StatusSummary::Failure);
        response.result.code = 403;
        response.result.reason = "Forbidden".to_owned();
    } else if outcome.apply_patch() && !outcome.patch.0.is_empty() {
        response = response
            .with_patch(outcome.patch.clone())
            .expect("the patch serializes");
    }
    response.warnings = outcome.warning.clone().map(|w| vec![w]);
    if outcome.group.is_some() {
        let annotations = super::super::audit_annotations(outcome, revision);
        response.audit_annotations = annotations.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    }
    let review = response.into_review();
    let mut value = serde_json::to_value(&review).unwrap_or_default();
    if let (Some(patch), Some(slot)) = (
        review.response.as_ref().and_then(|r| r.patch.as_ref()),
        value.pointer_mut("/response/patch"),
    ) {
        *slot = Value::String(base64::engine::general_purpose::STANDARD.encode(patch));
    }
    value
}

#[test]
fn decided_responses_are_what_kube_cores_builders_make_with_the_patch_as_base64() {
    use pod_director_engine::config::Config;
    use pod_director_engine::decision::{self, View};
    use pod_director_engine::placement::{self, Namespace};
    let config = "groups:\n  ci:\n    mode: enforce\n    nodeSelector: {pool: ci}\n    \
                      tolerations: [{key: dedicated, operator: Equal, value: ci, effect: NoSchedule}]\n  \
                      strict: {mode: enforce, onConflict: reject, nodeSelector: {disk: hdd}}\n  \
                      loose: {mode: enforce, onConflict: override, nodeSelector: {disk: hdd}}\n  \
                      shadow: {mode: dryRun, nodeSelector: {pool: ci}}\n";
    let loaded = Config::from_yaml(config, "test", Vec::new()).expect("valid config");
    let body = pod_director_testkit::fixtures::Review::pod("CREATE", pod()).bytes();
    let parsed = parse(placement::Webhook::Mutate, &body).expect("parses");
    let subject = parsed.subject.subject("").expect("a pod");
    let mut decisions = Vec::new();
    for group in ["ci", "strict", "loose", "shadow", "unknown"] {
        let labels = std::collections::BTreeMap::from([("pod-director/group".to_owned(), group.to_owned())]);
        let namespace = Namespace::new("team-ci", &labels);
        let view = View {
            config: &loaded.config,
            namespace: &namespace,
            context: &placement::Context::default(),
        };
        let outcome = decision::decide(placement::Webhook::Mutate, &subject, &view);
        assert_eq!(outcome.patch_text(), outcome.patch_json().to_string(), "{group}");
        let wire: Value =
            serde_json::from_slice(&super::super::respond(&parsed.request.uid, &outcome, &loaded.revision))
                .expect("JSON");
        assert_eq!(wire, reference(&parsed.request, &outcome, &loaded.revision), "{group}");
        decisions.push(outcome.decision);
    }
    // A skipped request: no group, no annotations; a denial without a message.
    let skipped = Outcome::new(placement::Webhook::Mutate, placement::Decision::Skipped);
    let mut denied = Outcome::new(placement::Webhook::Validate, placement::Decision::Denied);
    denied.warning = Some("w \"quoted\"".to_owned());
    for outcome in [skipped, denied] {
        let wire: Value = serde_json::from_slice(&super::super::respond("u-1", &outcome, "r")).expect("JSON");
        let mut request = parsed.request.clone();
        request.uid = "u-1".to_owned();
        assert_eq!(wire, reference(&request, &outcome, "r"), "{:?}", outcome.decision);
    }
    use placement::Decision::{Denied, Patched, UnknownGroup, WouldPatch};
    for wanted in [Patched, Denied, WouldPatch, UnknownGroup] {
        assert!(decisions.contains(&wanted), "{wanted:?} not among {decisions:?}");
    }
}

#[test]
fn error_reviews_encode_as_kube_core_serializes_them() {
    let error = super::super::render_error(Some("uid"), &AdmissionError::MissingObject);
    let wire: Value = serde_json::from_slice(&encode(error.clone()).expect("encodes")).expect("JSON");
    assert_eq!(wire, serde_json::to_value(&error).unwrap_or_default());
}
