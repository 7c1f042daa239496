//! The namespace label guard served over real TLS: `POST /validate-namespace`
//! answers Namespace reviews with the guard's decision, and a config reload
//! switches its mode without a restart.

use std::time::Duration;

use pod_director::testing::harness::Harness;
use pod_director_testkit::eventually;
use pod_director_testkit::fixtures::Review;
use reqwest::StatusCode;
use serde_json::{Value, json};

const ENFORCE: &str = "namespaceGuard: {mode: enforce}\ngroups: {ci: {}, gpu: {}}\n";

/// A namespace UPDATE moving `team-a` from ci to gpu, by `username`.
fn relabel(username: &str, groups: &[&str]) -> Value {
    let object = |group: &str| {
        json!({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "team-a",
            "labels": {"kubernetes.io/metadata.name": "team-a", "pod-director/group": group}}})
    };
    Review::namespace("UPDATE", object("gpu"))
        .uid("6a1f")
        .user(username, groups)
        .old(object("ci"))
        .value()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_namespace_denies_a_tenant_s_relabel_and_admits_an_admin_s() {
    let mut harness = Harness::start(ENFORCE).await;
    let (status, body) = harness
        .post("/validate-namespace", &relabel("alice", &["system:authenticated"]))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["response"]["allowed"], false, "{body}");
    assert_eq!(body["response"]["status"]["code"], 403);
    let (_, body) = harness
        .post("/validate-namespace", &relabel("admin", &["system:masters"]))
        .await;
    assert_eq!(body["response"]["allowed"], true, "{body}");
    // The same review at /validate is not a pod review: admitted untouched.
    let (status, body) = harness.post("/validate", &relabel("alice", &[])).await;
    assert_eq!(
        (status, body["response"]["allowed"].clone()),
        (StatusCode::OK, json!(true))
    );

    harness
        .config
        .update(&[("config.yaml", ENFORCE.replace("enforce", "dryRun").as_bytes())]);
    let reloaded = eventually(Duration::from_secs(10), || async {
        let (_, body) = harness.post("/validate-namespace", &relabel("alice", &[])).await;
        body["response"]["allowed"] == true
    })
    .await;
    assert!(reloaded, "dryRun admits the relabel after the reload");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relabel_through_the_status_or_finalize_subresource_is_decided_like_the_namespace() {
    let harness = Harness::start(ENFORCE).await;
    for sub in ["status", "finalize"] {
        let mut review = relabel("alice", &["system:authenticated"]);
        review["request"]["subResource"] = json!(sub);
        let (status, body) = harness.post("/validate-namespace", &review).await;
        assert_eq!(status, StatusCode::OK, "{sub}: {body}");
        assert_eq!(body["response"]["allowed"], false, "{sub}: {body}");
        let mut review = relabel("admin", &["system:masters"]);
        review["request"]["subResource"] = json!(sub);
        let (_, body) = harness.post("/validate-namespace", &review).await;
        assert_eq!(body["response"]["allowed"], true, "{sub}: {body}");
    }
    // Other subresources of a namespace carry no labels pod-director decides.
    let mut review = relabel("alice", &["system:authenticated"]);
    review["request"]["subResource"] = json!("other");
    let (_, body) = harness.post("/validate-namespace", &review).await;
    assert_eq!(body["response"]["allowed"], true, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_a_relabel_out_of_an_enforce_group_is_denied_and_one_among_dry_run_groups_observed() {
    let harness = Harness::start("groups: {ci: {mode: enforce}, gpu: {}, web: {}}\n").await;
    let (_, body) = harness.post("/validate-namespace", &relabel("alice", &[])).await;
    assert_eq!(body["response"]["allowed"], false, "ci is enforced: {body}");
    let among = |body: Value| {
        serde_json::to_string(&body)
            .unwrap_or_default()
            .replace("\"ci\"", "\"web\"")
    };
    let review: Value = serde_json::from_str(&among(relabel("alice", &[]))).unwrap_or_default();
    let (_, body) = harness.post("/validate-namespace", &review).await;
    assert_eq!(body["response"]["allowed"], true, "web to gpu, both dryRun: {body}");
    assert_eq!(body["response"]["auditAnnotations"]["decision"], "would_deny", "{body}");
}
