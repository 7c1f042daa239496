use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::testing::config;

const GROUPS: &str = r#"
groups:
  shadow: {mode: dryRun, nodeSelector: {pool: blue}}
  loud: {mode: warn, nodeSelector: {pool: blue}}
  strict: {mode: enforce, nodeSelector: {pool: blue}}
"#;

fn pod(spec: serde_json::Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).expect("a pod")
}

/// `/validate`'s outcome for `pod`'s creation in a namespace of `group`, and whether it disagrees
/// with `/mutate`'s decision of the same pod.
fn judged(group: &str, pod: &Pod, outcome: Option<Outcome>) -> (Outcome, bool) {
    let config = config(GROUPS);
    let labels = BTreeMap::from([("pod-director/group".to_owned(), group.to_owned())]);
    let namespace = Namespace::new("team", &labels);
    let context = Context::default();
    let view = View {
        config: &config,
        namespace: &namespace,
        context: &context,
    };
    let subject = Subject::Pod(Write::Create(pod));
    let validate = Decidable::at(Webhook::Validate, &subject).expect("decided at /validate");
    let outcome = outcome.unwrap_or_else(|| validate.decide(&view));
    let disagrees = validate.shadow_disagrees(&view, &outcome);
    (outcome, disagrees)
}

#[test]
fn a_refusal_mutate_predicted_is_no_disagreement_in_dry_run_or_warn() {
    let conflicting = pod(json!({"nodeSelector": {"pool": "red"}}));
    for group in ["shadow", "loud"] {
        let (outcome, disagrees) = judged(group, &conflicting, None);
        assert_eq!(outcome.decision, Decision::WouldDeny, "{group}: {}", outcome.summary);
        assert!(!disagrees, "{group}: /mutate predicted it");
        let (outcome, disagrees) = judged(group, &pod(json!({})), None);
        assert_eq!(outcome.decision, Decision::Noop, "{group}: {}", outcome.summary);
        assert!(!disagrees);
    }
}

#[test]
fn a_validate_refusal_of_a_pod_mutate_admits_is_a_disagreement_but_only_in_the_shadow_sample() {
    // /validate refusing a pod whose /mutate decision admits it: what the counter is for.
    let refused = |group: &str| {
        let mut outcome = judged(group, &pod(json!({"nodeSelector": {"pool": "red"}})), None).0;
        outcome.decision = if group == "strict" {
            Decision::Denied
        } else {
            Decision::WouldDeny
        };
        outcome
    };
    let compliant = pod(json!({}));
    assert!(judged("shadow", &compliant, Some(refused("shadow"))).1);
    assert!(judged("loud", &compliant, Some(refused("loud"))).1);
    // Not in enforce (no shadow), and not for a pod naming a node (always sent to /validate,
    // which checks the node: /mutate does not).
    assert!(!judged("strict", &compliant, Some(refused("strict"))).1);
    let named = pod(json!({"nodeName": "n1"}));
    assert!(!judged("shadow", &named, Some(refused("shadow"))).1);
}
