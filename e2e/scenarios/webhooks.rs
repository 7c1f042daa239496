//! pod-director among other mutating webhooks: reinvocation, and a later webhook
//! undoing pod-director's work (caught by /validate).

use std::sync::Arc;

use serde_json::{Value, json};

use crate::fixtures::{Placement, gpu_toleration, group_toleration, workload};
use crate::harness::Env;
use crate::harness::stub::Handler;

/// A webhook that labels the pod and adds a toleration of its own.
fn labeller() -> Handler {
    Arc::new(|_pod: &Value| {
        Some(json!([
            {"op": "add", "path": "/metadata/labels/e2e.pod-director.io~1stub", "value": "seen"},
            {"op": "add", "path": "/spec/tolerations/-", "value": {"key": "e2e.pod-director.io/stub", "operator": "Exists"}},
        ]))
    })
}

/// A webhook that removes every toleration of the group's key (no change when there is none).
/// (Also the later mutator of the policy path, e2e/scenarios/policies.rs.)
pub(crate) fn stripper() -> Handler {
    Arc::new(|pod: &Value| {
        let tolerations = pod["spec"]["tolerations"].as_array()?;
        let kept: Vec<&Value> = tolerations
            .iter()
            .filter(|t| t["key"] != "e2e.pod-director.io/dedicated")
            .collect();
        (kept.len() != tolerations.len())
            .then(|| json!([{"op": "replace", "path": "/spec/tolerations", "value": kept}]))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_webhook_s_change_reinvokes_pod_director_which_does_not_patch_twice() {
    let Some(env) = Env::start_with_stub("reinvoke").await else {
        return;
    };
    let ns = env.namespace(Some("e2e-enforce")).await;
    let stub = env.stub_webhook(&ns, "Never", labeller()).await;

    env.create_admitted_pod(&ns, &workload("web")).await;
    let stored = env.get_pod(&ns, "web").await;
    let labels = stored.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("e2e.pod-director.io/stub").map(String::as_str), Some("seen"));
    let stub_toleration =
        serde_json::from_value(json!({"key": "e2e.pod-director.io/stub", "operator": "Exists"})).expect("a Toleration");
    let mut expected = Placement::enforced();
    expected.tolerations = vec![gpu_toleration(), group_toleration(), stub_toleration];
    assert_eq!(
        Placement::of(&stored),
        expected,
        "group placement once, the other webhook's toleration kept, nothing doubled"
    );
    assert_eq!(stub.calls().iter().filter(|n| *n == "web").count(), 1);

    let mutate = env.decisions(&ns, "web", "mutate", 2).await;
    let decisions: Vec<&str> = mutate.iter().map(|d| d.decision()).collect();
    assert_eq!(
        decisions,
        ["patched", "noop"],
        "called first, then reinvoked after the other webhook's change: nothing left to do"
    );
    assert_eq!(mutate[1].patch(), &json!([]));

    // Local mode: the API server's audit log records which webhook mutated in which round.
    if let Some(event) = env.audit_events(&ns, "web").first() {
        let mut rounds: Vec<(String, String, bool)> = event["annotations"]
            .as_object()
            .expect("annotations")
            .iter()
            .filter_map(|(key, value)| {
                let round = key.strip_prefix("mutation.webhook.admission.k8s.io/round_")?;
                let entry: Value = serde_json::from_str(value.as_str()?).ok()?;
                let round = round.split('_').next()?.to_owned();
                Some((
                    round,
                    entry["configuration"].as_str()?.to_owned(),
                    entry["mutated"] == true,
                ))
            })
            .collect();
        rounds.sort();
        let fullname = env.settings.fullname.clone();
        let stub = |(_, configuration, _): &(String, String, bool)| configuration.starts_with("zz-reinvoke-");
        assert_eq!(rounds.len(), 3, "{rounds:?}");
        assert_eq!(
            (rounds[0].0.as_str(), rounds[0].1.as_str(), rounds[0].2),
            ("0", fullname.as_str(), true)
        );
        assert!(rounds[1].0 == "0" && stub(&rounds[1]) && rounds[1].2, "{rounds:?}");
        assert_eq!(
            (rounds[2].0.as_str(), rounds[2].1.as_str(), rounds[2].2),
            ("1", fullname.as_str(), false)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_toleration_stripped_by_a_later_webhook_gets_the_pod_denied_in_enforce() {
    let Some(env) = Env::start_with_stub("strip").await else {
        return;
    };
    let ns = env.namespace(Some("e2e-enforce")).await;
    env.stub_webhook(&ns, "IfNeeded", stripper()).await;

    let created = env.create_pod(&ns, &workload("web")).await;
    assert_eq!(created.status, http::StatusCode::FORBIDDEN, "{created:?}");
    let validate = env.decision(&ns, "web", "validate").await;
    assert_eq!(validate.decision(), "denied");
    assert_eq!(
        validate.get("placement.violations"),
        &json!(["tolerations: missing a toleration of e2e.pod-director.io/dedicated=blue:NoSchedule"]),
        "exactly the stripped toleration is missing"
    );
    let message = validate.text("placement.message");
    assert_eq!(
        message,
        "pod-director: the pod does not satisfy placement group \"e2e-enforce\": \
         tolerations: missing a toleration of e2e.pod-director.io/dedicated=blue:NoSchedule"
    );
    assert_eq!(
        created.error_message(),
        Some(env.denied_by("enforce", "validate", message).as_str())
    );
    assert!(env.pods(&ns).get_opt("web").await.expect("GET pod").is_none());

    // pod-director patched, the stripper stripped; reinvoked, pod-director put back
    // only the toleration, and the stripper (reinvoked too) removed it again.
    let mutate = env.decisions(&ns, "web", "mutate", 2).await;
    let decisions: Vec<&str> = mutate.iter().map(|d| d.decision()).collect();
    assert_eq!(decisions, ["patched", "patched"]);
    assert_eq!(mutate[1].get("placement.patch.paths"), &json!(["/spec/tolerations/-"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_toleration_stripped_by_a_later_webhook_shows_as_a_reinvoked_would_patch_in_dry_run() {
    let Some(env) = Env::start_with_stub("stripdry").await else {
        return;
    };
    let ns = env.namespace(Some("e2e-dryrun")).await;
    env.stub_webhook(&ns, "IfNeeded", stripper()).await;

    // A pod that already carries the whole placement: compliant until stripped.
    let mut compliant = workload("web");
    let placement = Placement::enforced();
    let spec = compliant.spec.as_mut().expect("a spec");
    spec.node_selector = Some(placement.node_selector.clone());
    spec.tolerations = Some(placement.tolerations.clone());
    spec.affinity = placement.affinity.clone();

    let created = env.create_admitted_pod(&ns, &compliant).await;
    assert_eq!(created.warnings, Vec::<String>::new());
    let stored = env.get_pod(&ns, "web").await;
    let mut expected = placement;
    expected.tolerations = vec![gpu_toleration()];
    assert_eq!(Placement::of(&stored), expected, "admitted as the stripper left it");

    // /validate judges the pod as enforce's /mutate would have left it, which puts the
    // toleration back: what a later webhook does to the patched pod is beyond the shadow's
    // sight (in enforce the stripper strips it again, and /validate denies). The strip shows
    // in dryRun as the reinvoked /mutate's would_patch below.
    let validate = env.decision(&ns, "web", "validate").await;
    assert_eq!(validate.decision(), "noop", "{validate:?}");
    // Compliant at first; reinvoked after the stripper, it would put the toleration back.
    let mutate = env.decisions(&ns, "web", "mutate", 2).await;
    let decisions: Vec<&str> = mutate.iter().map(|d| d.decision()).collect();
    assert_eq!(decisions, ["noop", "would_patch"]);
    assert_eq!(mutate[1].get("placement.patch.paths"), &json!(["/spec/tolerations/-"]));
}
