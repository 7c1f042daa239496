//! The three front ends of "decide a pod as the webhooks would" — the webhook path, the audit
//! and `explain` — call the engine's one entry (`pod_director_engine::decision`: a webhook's
//! decision, a pod's fate), so they give the same decision and the same patch for the same pod.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Candidate, decide};
use crate::testing::{admission, answer};
use pod_director_engine::decision::{self, Subject, View, Write};
use pod_director_engine::placement::{self, Context, Namespace, Requester, Webhook};
use pod_director_engine::testing::config;
use pod_director_testkit::fixtures::{Review, decoded_patch};

const CONFIG: &str = r#"
groups:
  ci:
    mode: enforce
    onConflict: reject
    nodeSelector: {node-pool: ci}
    tolerations: [{key: dedicated, operator: Equal, value: ci, effect: NoSchedule}]
  shadow:
    mode: dryRun
    onConflict: reject
    nodeSelector: {node-pool: shadow}
"#;

const NAMESPACES: &[(&str, &str)] = &[("team-ci", "ci"), ("team-shadow", "shadow")];

/// Pods of every shape the mutating decision tells apart: nothing to do, a patch, a conflict.
fn pods(namespace: &str) -> Vec<(&'static str, Value)> {
    let pool = if namespace == "team-ci" { "ci" } else { "shadow" };
    let pod = |name: &str, spec: Value| {
        let mut spec = spec;
        spec["containers"] = json!([{"name": "app", "image": "app:1"}]);
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec})
    };
    let mut compliant = json!({"nodeSelector": {"node-pool": pool}});
    if pool == "ci" {
        compliant["tolerations"] =
            json!([{"key": "dedicated", "operator": "Equal", "value": "ci", "effect": "NoSchedule"}]);
    }
    vec![
        ("bare", pod("bare", json!({}))),
        ("compliant", pod("compliant", compliant)),
        (
            "conflicting",
            pod("conflicting", json!({"nodeSelector": {"node-pool": "gpu"}})),
        ),
        ("partial", pod("partial", json!({"nodeSelector": {"disk": "ssd"}}))),
    ]
}

/// The decision and the patch at `/mutate`, as the API server would get them.
fn webhook(body: &[u8]) -> (String, Value) {
    let (admission, _) = admission(CONFIG, NAMESPACES);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let (status, review) = runtime.block_on(answer(&admission, Webhook::Mutate, body));
    assert_eq!(status, http::StatusCode::OK, "{review}");
    let response = &review["response"];
    let decision = response["auditAnnotations"]["decision"]
        .as_str()
        .expect("a decision annotation")
        .to_owned();
    // The patch enforce applies; in dryRun the would-be patch is the annotation's.
    let patch = match decoded_patch(response) {
        Some(patch) => serde_json::to_value(patch).expect("JSON"),
        None => response["auditAnnotations"]["patch"].as_str().map_or(json!([]), |p| {
            serde_json::from_str(p).expect("the patch annotation is JSON")
        }),
    };
    (decision, patch)
}

#[test]
fn the_webhook_the_audit_and_explain_give_the_same_decision_for_the_same_pod() {
    let config = config(CONFIG);
    let namespaces: BTreeMap<String, BTreeMap<String, String>> = NAMESPACES
        .iter()
        .map(|(ns, group)| {
            (
                ns.to_string(),
                BTreeMap::from([(config.namespace_label.clone(), group.to_string())]),
            )
        })
        .collect();
    let mut seen = Vec::new();
    for (namespace, _) in NAMESPACES {
        for (name, pod_json) in pods(namespace) {
            let user = Requester {
                username: "alice".to_owned(),
                groups: vec!["system:authenticated".to_owned()],
            };
            let review = Review::pod("CREATE", pod_json.clone()).user(&user.username, &["system:authenticated"]);
            let (by_webhook, webhook_patch) = webhook(&review.bytes());

            let typed: k8s_openapi::api::core::v1::Pod = serde_json::from_value(pod_json).expect("a pod");
            let pod = placement::Pod::from(&typed);
            let labels = &namespaces[*namespace];
            let ns = Namespace::new(namespace, labels);
            // The audit decides the pod's fate as created by its requester, and counts its placement.
            let context = Context {
                requester: user,
                nodes: None,
            };
            let view = View {
                config: &config,
                namespace: &ns,
                context: &context,
            };
            let audited = decision::fate(&Subject::Pod(Write::Create(&pod)), &view)
                .placement()
                .clone();

            let manifested: BTreeMap<String, super::Manifested> = namespaces
                .iter()
                .map(|(n, l)| (n.clone(), (l.clone(), BTreeMap::new())))
                .collect();
            let explained = decide(
                &config,
                None,
                &manifested,
                None,
                Candidate {
                    namespace: namespace.to_string(),
                    name: name.to_owned(),
                    kind: "Pod".to_owned(),
                    source: "test".to_owned(),
                    pod: pod.clone(),
                },
            );

            let what = format!("{namespace}/{name}");
            assert_eq!(
                audited.decision.as_str(),
                by_webhook,
                "{what}: the audit against the webhook"
            );
            assert_eq!(
                explained.decision.as_str(),
                by_webhook,
                "{what}: explain against the webhook"
            );
            assert_eq!(audited.patch_json(), webhook_patch, "{what}: the audit's patch");
            assert_eq!(explained.patch, webhook_patch, "{what}: explain's patch");
            seen.push(by_webhook);
        }
    }
    // The cases cover every mutating decision of both modes.
    seen.sort();
    seen.dedup();
    assert_eq!(
        seen,
        ["denied", "noop", "patched", "would_deny", "would_patch"],
        "the pods do not cover the decisions"
    );
}
