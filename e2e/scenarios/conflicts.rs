//! Conflicts under reject / override / ignore, and the pods pod-director leaves alone.

use serde_json::json;

use crate::fixtures::{Placement, asking_for_pool, group_toleration, with_labels, workload};
use crate::harness::Env;
use crate::harness::k8s::own_tolerations;

const CONFLICT: &str = r#"nodeSelector["e2e.pod-director.io/pool"]: pod has "red", group requires "blue""#;

fn pool(pod: &k8s_openapi::api::core::v1::Pod) -> Option<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_selector.as_ref())
        .and_then(|s| s.get("e2e.pod-director.io/pool").cloned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_asking_for_another_pool_is_denied_under_reject() {
    let env = Env::start("reject").await;
    let ns = env.namespace(Some("e2e-reject")).await;

    let created = env.create_pod(&ns, &asking_for_pool("red", "red")).await;
    assert_eq!(created.status, http::StatusCode::FORBIDDEN, "{created:?}");
    let mutate = env.decision(&ns, "red", "mutate").await;
    assert_eq!(mutate.decision(), "denied");
    assert_eq!(
        mutate.get("placement.conflicts"),
        &json!([format!("{CONFLICT} (rejected)")])
    );
    assert_eq!(mutate.patch(), &json!([]), "a denial carries no patch");
    let message = mutate.text("placement.message");
    assert_eq!(
        message,
        format!(
            "pod-director: the pod conflicts with placement group \"e2e-reject\": {CONFLICT} (rejected); \
             remove or change the pod's own placement (the group's onConflict is reject)"
        )
    );
    assert_eq!(
        created.error_message(),
        Some(env.denied_by("enforce", "mutate", message).as_str())
    );
    assert!(env.pods(&ns).get_opt("red").await.expect("GET pod").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_asking_for_another_pool_is_moved_to_the_group_s_pool_under_override() {
    let env = Env::start("override").await;
    let ns = env.namespace(Some("e2e-override")).await;

    let created = env.create_admitted_pod(&ns, &asking_for_pool("red", "red")).await;
    let stored = env.get_pod(&ns, "red").await;
    assert_eq!(pool(&stored).as_deref(), Some("blue"), "the group's value wins");
    assert_eq!(own_tolerations(&stored), vec![group_toleration()]);

    let mutate = env.decision(&ns, "red", "mutate").await;
    assert_eq!(mutate.decision(), "patched");
    assert_eq!(
        mutate.get("placement.conflicts"),
        &json!([format!("{CONFLICT} (overridden)")])
    );
    assert_eq!(
        mutate.get("placement.patch.paths"),
        &json!(["/spec/nodeSelector/e2e.pod-director.io~1pool", "/spec/tolerations/-"])
    );
    assert_eq!(mutate.patch()[0]["op"], "replace");
    assert_eq!(
        created.warnings,
        vec![mutate.text("placement.warning").to_owned()],
        "enforce warns on conflicts"
    );
    assert_eq!(env.decision(&ns, "red", "validate").await.decision(), "noop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_asking_for_another_pool_keeps_it_under_ignore() {
    let env = Env::start("ignore").await;
    let ns = env.namespace(Some("e2e-ignore")).await;

    let created = env.create_admitted_pod(&ns, &asking_for_pool("red", "red")).await;
    let stored = env.get_pod(&ns, "red").await;
    assert_eq!(pool(&stored).as_deref(), Some("red"), "the pod's value wins");
    assert_eq!(
        own_tolerations(&stored),
        vec![group_toleration()],
        "the rest is still applied"
    );

    let mutate = env.decision(&ns, "red", "mutate").await;
    assert_eq!(mutate.decision(), "patched");
    assert_eq!(
        mutate.get("placement.conflicts"),
        &json!([format!("{CONFLICT} (ignored)")])
    );
    assert_eq!(mutate.get("placement.patch.paths"), &json!(["/spec/tolerations/-"]));
    assert_eq!(created.warnings, vec![mutate.text("placement.warning").to_owned()]);
    let validate = env.decision(&ns, "red", "validate").await;
    assert_eq!(
        validate.decision(),
        "noop",
        "an ignored conflict is not a violation: {validate:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exclusion_label_exempts_a_pod_only_where_its_group_allows_it() {
    let env = Env::start("exclusion").await;
    let allowed = env.namespace(Some("e2e-exclusion")).await;
    let refused = env.namespace(Some("e2e-enforce")).await;
    let excluded = || with_labels(workload("web"), &[("pod-director/exclude", "true")]);

    env.create_admitted_pod(&allowed, &excluded()).await;
    let stored = env.get_pod(&allowed, "web").await;
    assert_eq!(Placement::of(&stored), Placement::submitted(), "exempt: untouched");
    for webhook in ["mutate", "validate"] {
        let line = env.decision(&allowed, "web", webhook).await;
        assert_eq!(line.decision(), "skipped", "{line:?}");
        assert_eq!(line.text("placement.skip_reason"), "exclusion_label");
    }

    env.create_admitted_pod(&refused, &excluded()).await;
    let stored = env.get_pod(&refused, "web").await;
    assert_eq!(
        Placement::of(&stored),
        Placement::enforced(),
        "the label does not exempt it here"
    );
    let mutate = env.decision(&refused, "web", "mutate").await;
    assert_eq!(mutate.decision(), "patched");
    assert_eq!(mutate.get("placement.skip_reason"), &serde_json::Value::Null);
}
