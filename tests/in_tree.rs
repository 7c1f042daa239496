//! The in-tree plugins' webhooks through the admission path (`/mutate-in-tree`,
//! `/validate-in-tree`): a Capsule-style namespace (annotation only) enforced, the precedence
//! with a group's `/mutate` on the same namespace, the guard of the annotations, and the engine's
//! pure answers agreeing with what the webhooks do.

use std::collections::BTreeMap;
use std::sync::Arc;

use pod_director::testing::{StaticNamespaces, admission_on, answer};
use pod_director_engine::in_tree::{self, NODE_SELECTOR_ANNOTATION, TOLERATIONS_WHITELIST_ANNOTATION};
use pod_director_engine::placement::{Namespace, Pod, Webhook};
use pod_director_testkit::fixtures::{Review, decoded_patch};
use serde_json::{Value, json};

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn pod(namespace: &str, spec: Value) -> Value {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    if let (Some(target), Some(extra)) = (pod["spec"].as_object_mut(), spec.as_object()) {
        target.extend(extra.clone());
    }
    pod
}

/// `pod` with the patch of `response` applied (unchanged without one).
fn patched(pod: &Value, response: &Value) -> Value {
    let mut out = pod.clone();
    if let Some(patch) = decoded_patch(&response["response"]) {
        json_patch::patch(&mut out, &patch).expect("the patch applies");
    }
    out
}

fn source() -> Arc<StaticNamespaces> {
    let source = StaticNamespaces::new();
    // A Capsule tenant's namespace: the annotation, no group label.
    source.insert_annotated(
        "tenant",
        BTreeMap::new(),
        map(&[(NODE_SELECTOR_ANNOTATION, "pool=tenant")]),
    );
    // A namespace with both: the group places on pool=gpu, the annotation says pool=team.
    source.insert_annotated(
        "both",
        map(&[("pod-director/group", "gpu")]),
        map(&[(NODE_SELECTOR_ANNOTATION, "pool=team")]),
    );
    Arc::new(source)
}

#[tokio::test]
async fn a_capsule_style_namespace_is_enforced_without_a_group_label() {
    let (admission, _) = admission_on("inTreePlugins: {mode: enforce}\ngroups: {}\n", source());
    let web = pod("tenant", json!({}));
    let (status, body) = answer(
        &admission,
        Webhook::MutateInTree,
        &Review::pod("CREATE", web.clone()).bytes(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body["response"]["allowed"], true, "{body}");
    assert_eq!(patched(&web, &body)["spec"]["nodeSelector"], json!({"pool": "tenant"}));

    let escaping = pod("tenant", json!({"nodeSelector": {"pool": "shared"}}));
    let (_, body) = answer(
        &admission,
        Webhook::MutateInTree,
        &Review::pod("CREATE", escaping).bytes(),
    )
    .await;
    assert_eq!(body["response"]["allowed"], false, "{body}");
    assert_eq!(body["response"]["status"]["code"], 403);
    let message = body["response"]["status"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(in_tree::CONFLICT_MESSAGE), "{message}");
}

#[tokio::test]
async fn dry_run_admits_untouched_and_reports_the_patch_enforce_applies() {
    let (dry, _) = admission_on("inTreePlugins: {mode: dryRun}\ngroups: {}\n", source());
    let (enforce, _) = admission_on("inTreePlugins: {mode: enforce}\ngroups: {}\n", source());
    let review = Review::pod("CREATE", pod("tenant", json!({}))).bytes();
    let (_, would) = answer(&dry, Webhook::MutateInTree, &review).await;
    let (_, did) = answer(&enforce, Webhook::MutateInTree, &review).await;
    assert_eq!(would["response"]["allowed"], true);
    assert!(would["response"].get("patch").is_none(), "{would}");
    let annotations = &would["response"]["auditAnnotations"];
    let reported = annotations
        .as_object()
        .into_iter()
        .flatten()
        .find(|(k, _)| *k == "patch");
    let applied = did["response"]["patch"].as_str().expect("enforce patches");
    let applied = String::from_utf8(base64_decode(applied)).expect("utf-8");
    assert_eq!(
        reported.map(|(_, v)| v.as_str().unwrap_or_default()),
        Some(applied.as_str()),
        "{would}"
    );
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(text).expect("base64")
}

#[tokio::test]
async fn the_annotation_merges_first_then_the_group_s_on_conflict_decides_then_validate_in_tree_refuses() {
    let config = |on_conflict: &str| {
        format!(
            "inTreePlugins: {{mode: enforce}}\ngroups:\n  gpu: {{mode: enforce, onConflict: {on_conflict}, nodeSelector: {{pool: gpu}}}}\n"
        )
    };
    // The API server's order: /mutate-in-tree, the group's /mutate, /validate-in-tree.
    for (on_conflict, mutate_allows, final_selector) in [("reject", false, None), ("override", true, Some("gpu"))] {
        let (admission, _) = admission_on(&config(on_conflict), source());
        let web = pod("both", json!({}));
        let (_, first) = answer(
            &admission,
            Webhook::MutateInTree,
            &Review::pod("CREATE", web.clone()).bytes(),
        )
        .await;
        let web = patched(&web, &first);
        assert_eq!(web["spec"]["nodeSelector"], json!({"pool": "team"}), "{on_conflict}");
        let (_, group) = answer(&admission, Webhook::Mutate, &Review::pod("CREATE", web.clone()).bytes()).await;
        assert_eq!(group["response"]["allowed"], mutate_allows, "{on_conflict}: {group}");
        if let Some(value) = final_selector {
            let web = patched(&web, &group);
            assert_eq!(web["spec"]["nodeSelector"]["pool"], value);
            let (_, last) = answer(&admission, Webhook::ValidateInTree, &Review::pod("CREATE", web).bytes()).await;
            assert_eq!(last["response"]["allowed"], false, "{on_conflict}: {last}");
        }
    }
    // Same key, same value: admitted everywhere.
    let (admission, _) = admission_on(&config("reject"), source());
    let web = pod("both", json!({"nodeSelector": {"pool": "team"}}));
    let (_, group) = answer(&admission, Webhook::Mutate, &Review::pod("CREATE", web).bytes()).await;
    assert_eq!(
        group["response"]["allowed"], false,
        "the group's selector still contradicts the annotation's"
    );
}

#[tokio::test]
async fn a_tenant_cannot_drop_or_change_the_annotation_in_enforce() {
    let (admission, _) = admission_on("inTreePlugins: {mode: enforce}\ngroups: {}\n", source());
    let namespace = |annotations: Value| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant", "annotations": annotations}});
    let old = namespace(json!({NODE_SELECTOR_ANNOTATION: "pool=tenant"}));
    for new in [json!({}), json!({NODE_SELECTOR_ANNOTATION: "pool=shared"})] {
        let review = Review::namespace("UPDATE", namespace(new.clone()))
            .old(old.clone())
            .user("alice", &["system:authenticated"]);
        let (_, body) = answer(&admission, Webhook::ValidateInTree, &review.bytes()).await;
        assert_eq!(body["response"]["allowed"], false, "{new}: {body}");
        let admin = Review::namespace("UPDATE", namespace(new.clone()))
            .old(old.clone())
            .user("root", &["system:masters"]);
        let (_, body) = answer(&admission, Webhook::ValidateInTree, &admin.bytes()).await;
        assert_eq!(body["response"]["allowed"], true, "{new}: {body}");
    }
}

#[test]
fn the_engine_s_pure_answers_are_the_webhooks_rules() {
    let annotations = map(&[
        (NODE_SELECTOR_ANNOTATION, "pool=tenant"),
        (TOLERATIONS_WHITELIST_ANNOTATION, "[]"),
    ]);
    let none = BTreeMap::new();
    let ns = Namespace::new("tenant", &none).with_annotations(&annotations);
    let files = in_tree::PluginFiles::default();
    assert!(in_tree::has_rules(&files, &ns));
    assert_eq!(
        in_tree::namespace_node_selector(&files, &ns),
        Ok(map(&[("pool", "tenant")]))
    );
    assert_eq!(
        in_tree::namespace_tolerations(&ns, TOLERATIONS_WHITELIST_ANNOTATION),
        Ok(Some(Vec::new()))
    );
    assert!(in_tree::verify_against_whitelist(&[], &[]));
    let typed: k8s_openapi::api::core::v1::Pod = serde_json::from_value(pod("tenant", json!({}))).expect("a pod");
    assert!(in_tree::best_effort(&Pod::from(&typed)));
}
