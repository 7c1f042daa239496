//! The three modes, server-side dry runs and undefined groups.

use serde_json::{Value, json};

use crate::fixtures::{Placement, patched, workload};
use crate::harness::{Decision, Env, pod};

/// Longest audit annotation value pod-director writes, in bytes.
const MAX_ANNOTATION_BYTES: usize = 1024;

/// What the `patch` audit annotation says for a logged patch.
fn patch_annotation_is_consistent(annotation: &str, patch: &Value) -> bool {
    let compact = patch.to_string();
    if compact.len() <= MAX_ANNOTATION_BYTES {
        annotation == compact
    } else {
        let ops = patch.as_array().map_or(0, Vec::len);
        annotation.starts_with(&format!("{ops} operations: "))
    }
}

/// The decision line's fields that every decision about a plain pod CREATE carries.
fn assert_request_fields(line: &Decision, env: &Env, namespace: &str, name: &str, dry_run: bool) {
    assert_eq!(line.text("admission.request.operation"), "CREATE", "{line:?}");
    assert_eq!(line.text("admission.request.namespace"), namespace);
    assert_eq!(line.text("admission.request.name"), name);
    assert_eq!(line.get("admission.request.dryrun"), &json!(dry_run), "{line:?}");
    assert_eq!(line.text("config.revision"), env.config.revision(), "{line:?}");
    assert!(
        !line.text("admission.request.uid").is_empty(),
        "the request uid is logged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_group_admits_the_pod_untouched_and_logs_the_would_be_patch() {
    let env = Env::start("dryrun").await;
    let ns = env.namespace(Some("e2e-dryrun")).await;

    let created = env.create_admitted_pod(&ns, &workload("web")).await;
    assert_eq!(created.warnings, Vec::<String>::new(), "dryRun never warns the client");
    let stored = env.get_pod(&ns, "web").await;
    assert_eq!(
        Placement::of(&stored),
        Placement::submitted(),
        "the stored pod is untouched"
    );

    let mutate = env.decision(&ns, "web", "mutate").await;
    assert_request_fields(&mutate, &env, &ns, "web", false);
    assert_eq!(mutate.text("placement.group"), "e2e-dryrun");
    assert_eq!(mutate.text("placement.mode"), "dryRun");
    assert_eq!(mutate.decision(), "would_patch");
    let ops = mutate.patch().as_array().expect("an array");
    assert_eq!(mutate.get("placement.patch.op_count"), &json!(ops.len()));
    let paths: Vec<Value> = ops.iter().map(|op| op["path"].clone()).collect();
    assert_eq!(mutate.get("placement.patch.paths"), &Value::Array(paths));
    assert_eq!(
        Placement::of(&patched(&stored, mutate.patch())),
        Placement::enforced(),
        "the would-be patch, applied to the stored pod, gives exactly the group's placement"
    );

    // /validate judges the pod as enforce would have left it (the would-be patch applied):
    // enforce would not refuse it, so neither does the shadow.
    let validate = env.decision(&ns, "web", "validate").await;
    assert_request_fields(&validate, &env, &ns, "web", false);
    assert_eq!(validate.decision(), "noop", "{validate:?}");
    assert!(
        validate.get("placement.violations").is_null(),
        "no violation: {validate:?}"
    );

    // Local mode: the API server's audit log carries the decision too.
    if let Some(event) = env.audit_events(&ns, "web").first() {
        let hook = env.webhook_name("observe", "mutate");
        let annotations = &event["annotations"];
        assert_eq!(annotations[format!("{hook}/decision")], "would_patch");
        assert_eq!(annotations[format!("{hook}/group")], "e2e-dryrun");
        assert_eq!(annotations[format!("{hook}/mode")], "dryRun");
        let annotation = annotations[format!("{hook}/patch")]
            .as_str()
            .expect("a patch annotation");
        assert!(
            patch_annotation_is_consistent(annotation, mutate.patch()),
            "audit annotation {annotation:?} vs logged patch {}",
            mutate.patch()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warn_group_sends_the_client_the_warnings_it_logs() {
    let env = Env::start("warn").await;
    let ns = env.namespace(Some("e2e-warn")).await;

    let created = env.create_admitted_pod(&ns, &workload("web")).await;
    let stored = env.get_pod(&ns, "web").await;
    assert_eq!(Placement::of(&stored), Placement::submitted(), "warn does not patch");

    let mutate = env.decision(&ns, "web", "mutate").await;
    let validate = env.decision(&ns, "web", "validate").await;
    assert_eq!(mutate.text("placement.mode"), "warn");
    assert_eq!(mutate.decision(), "would_patch");
    assert_eq!(
        validate.decision(),
        "noop",
        "enforce would admit the patched pod: {validate:?}"
    );
    let expected = vec![mutate.text("placement.warning").to_owned()];
    assert_eq!(
        created.warnings, expected,
        "the client gets exactly the logged warnings"
    );
    for warning in &created.warnings {
        assert!(warning.starts_with("pod-director e2e-warn: "), "{warning}");
        assert!(warning.chars().count() <= 120, "at most 120 characters: {warning}");
    }
    assert!(created.warnings[0].starts_with("pod-director e2e-warn: would set nodeSelector"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enforce_group_stores_the_placement_the_dry_run_group_predicted() {
    let env = Env::start("enforce").await;
    let dry = env.namespace(Some("e2e-dryrun")).await;
    let enforced = env.namespace(Some("e2e-enforce")).await;

    let created = env.create_admitted_pod(&dry, &workload("web")).await;
    let untouched = created.pod();
    let created = env.create_admitted_pod(&enforced, &workload("web")).await;
    assert_eq!(created.warnings, Vec::<String>::new(), "no warning without conflicts");
    let stored = env.get_pod(&enforced, "web").await;
    assert_eq!(Placement::of(&stored), Placement::enforced(), "exactly as planned");

    let would = env.decision(&dry, "web", "mutate").await;
    let applied = env.decision(&enforced, "web", "mutate").await;
    assert_eq!(would.decision(), "would_patch");
    assert_eq!(applied.decision(), "patched");
    assert_eq!(applied.text("placement.mode"), "enforce");
    assert_eq!(
        applied.patch().to_string(),
        would.patch().to_string(),
        "the would-be patch of dryRun is byte-for-byte the patch enforce applied"
    );
    assert_eq!(
        Placement::of(&patched(&untouched, would.patch())),
        Placement::of(&stored),
        "dryRun's stored pod + its would-be patch = enforce's stored pod"
    );
    let validate = env.decision(&enforced, "web", "validate").await;
    assert_eq!(
        validate.decision(),
        "noop",
        "the final pod satisfies its group: {validate:?}"
    );
    assert_eq!(validate.get("placement.violations"), &Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_dry_run_requests_are_logged_as_dry_runs() {
    let env = Env::start("serverdry").await;
    let ns = env.namespace(Some("e2e-enforce")).await;

    let answer = env.create_pod_dry_run(&ns, &workload("probe")).await;
    assert_eq!(answer.status, http::StatusCode::CREATED, "{answer:?}");
    assert_eq!(
        Placement::of(&answer.pod()),
        Placement::enforced(),
        "the dry-run answer shows the pod as enforce would store it"
    );
    assert!(
        env.pods(&ns).get_opt("probe").await.expect("GET pod").is_none(),
        "a dry run stores nothing"
    );
    env.create_admitted_pod(&ns, &workload("probe")).await;

    let mutate = env.decisions(&ns, "probe", "mutate", 2).await;
    let validate = env.decisions(&ns, "probe", "validate", 2).await;
    assert_eq!(mutate.len(), 2, "one decision per request: {mutate:?}");
    assert_eq!(validate.len(), 2, "one decision per request: {validate:?}");
    assert_request_fields(&mutate[0], &env, &ns, "probe", true);
    assert_request_fields(&validate[0], &env, &ns, "probe", true);
    assert_request_fields(&mutate[1], &env, &ns, "probe", false);
    assert_request_fields(&validate[1], &env, &ns, "probe", false);
    assert_eq!(mutate[0].decision(), "patched");
    assert_eq!(
        mutate[0].patch(),
        mutate[1].patch(),
        "a dry run is decided like the real request"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_naming_an_undefined_group_is_admitted_with_a_warning() {
    let env = Env::start("unknown").await;
    let ns = env.namespace(Some("e2e-undefined")).await;

    let created = env.create_admitted_pod(&ns, &pod("web")).await;
    let stored = env.get_pod(&ns, "web").await;
    assert_eq!(stored.spec.as_ref().and_then(|s| s.node_selector.clone()), None);

    let mutate = env.decision(&ns, "web", "mutate").await;
    assert_eq!(mutate.decision(), "unknown_group");
    assert_eq!(mutate.text("placement.group"), "e2e-undefined");
    let warning = mutate.text("placement.warning");
    assert!(
        warning.starts_with(&format!(
            "pod-director: namespace \"{ns}\" selects group \"e2e-undefined\""
        )),
        "{warning}"
    );
    // Both webhooks warn the same; the API server passes identical warnings on once.
    assert_eq!(created.warnings, vec![warning.to_owned()]);
}

/// The pods of the shadow-vs-enforce comparison: name, spec, and a node to create first.
fn twin_pods() -> Vec<(&'static str, Value)> {
    vec![
        (
            "plain",
            json!({"containers": [{"name": "c", "image": "registry.invalid/pause:3"}]}),
        ),
        (
            "conflicting",
            json!({"nodeSelector": {"e2e.pod-director.io/pool": "red"},
                   "containers": [{"name": "c", "image": "registry.invalid/pause:3"}]}),
        ),
        (
            "compliant",
            json!({"nodeSelector": {"e2e.pod-director.io/pool": "blue", "kubernetes.io/os": "linux"},
                   "tolerations": [{"key": "e2e.pod-director.io/dedicated", "operator": "Equal", "value": "blue", "effect": "NoSchedule"}],
                   "containers": [{"name": "c", "image": "registry.invalid/pause:3"}]}),
        ),
        (
            "on-a-stranger-node",
            json!({"nodeName": "e2e-twins-stranger", "containers": [{"name": "c", "image": "registry.invalid/pause:3"}]}),
        ),
        (
            "on-a-missing-node",
            json!({"nodeName": "e2e-twins-nowhere", "containers": [{"name": "c", "image": "registry.invalid/pause:3"}]}),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_predicts_enforce_pod_by_pod_would_deny_exactly_where_enforce_denies() {
    let env = Env::start("twins").await;
    let stranger: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "e2e-twins-stranger", "labels": {"e2e.pod-director.io/pool": "red"}},
    }))
    .expect("a Node");
    env.create_node(&stranger).await;
    let shadow = env.namespace(Some("e2e-dryrun")).await;
    let enforced = env.namespace(Some("e2e-enforce")).await;
    let mut mismatches = Vec::new();
    for (name, spec) in twin_pods() {
        let object =
            crate::harness::k8s::pod_from(json!({"metadata": {"name": name, "labels": {"app": "e2e"}}, "spec": spec}));
        let in_shadow = env.create_pod(&shadow, &object).await;
        assert!(
            in_shadow.error_message().is_none(),
            "{name}: dryRun admits: {in_shadow:?}"
        );
        let in_enforce = env.create_pod(&enforced, &object).await;
        let denied = in_enforce.error_message().is_some();
        // Which webhooks decided it: /validate is only called when /mutate admitted it.
        let mutate = env.decision(&shadow, name, "mutate").await;
        let validate = env.decision(&shadow, name, "validate").await;
        let would_deny = [&mutate, &validate].iter().any(|d| d.decision() == "would_deny");
        if would_deny != denied {
            mismatches.push(format!(
                "{name}: dryRun mutate {} / validate {} ({}), enforce {}",
                mutate.decision(),
                validate.decision(),
                validate.text("placement.summary"),
                in_enforce.error_message().unwrap_or("admitted")
            ));
        }
        let enforce_mutate = env.decision(&enforced, name, "mutate").await;
        assert_eq!(
            mutate.decision().replace("would_", ""),
            enforce_mutate
                .decision()
                .replace("patched", "patch")
                .replace("denied", "deny"),
            "{name}: /mutate's shadow is /mutate's enforce decision"
        );
        if enforce_mutate.decision() != "denied" {
            let enforce_validate = env.decision(&enforced, name, "validate").await;
            assert_eq!(
                validate.decision() == "would_deny",
                enforce_validate.decision() == "denied",
                "{name}: /validate's shadow ({}) is its enforce decision ({})",
                validate.text("placement.summary"),
                enforce_validate.text("placement.summary")
            );
        }
    }
    assert!(mismatches.is_empty(), "shadow != enforce:\n{}", mismatches.join("\n"));
}

/// A pod of a controller, its owner's UID `owner_uid` (the sample is drawn from it).
fn owned(name: &str, owner_uid: &str, spec: Value) -> k8s_openapi::api::core::v1::Pod {
    crate::harness::k8s::pod_from(json!({
        "metadata": {
            "name": name,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": owner_uid, "controller": true}],
        },
        "spec": spec,
    }))
}

/// `shadowValidation: oneIn16` (the default): `/mutate` predicts every pod's fate; `/validate`
/// judges again the pods of one controller in 16 and every bare pod, and every pod naming a node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_group_costs_one_webhook_call_for_the_pods_of_fifteen_controllers_in_sixteen() {
    let env = Env::start("shadow-sample").await;
    let ns = env.namespace(Some("e2e-dryrun")).await;
    let containers = json!({"containers": [{"name": "c", "image": "registry.invalid/pause:3"}]});
    let named = json!({"nodeName": "e2e-shadow-nowhere", "containers": containers["containers"].clone()});
    let cases = [
        (
            "unsampled",
            owned("unsampled", "7c1d0a2e-5b4f-4e3a-9d2c-1a2b3c4d5e6f", containers.clone()),
        ),
        ("named", owned("named", "7c1d0a2e-5b4f-4e3a-9d2c-1a2b3c4d5e6d", named)),
        (
            "sampled",
            owned("sampled", "7c1d0a2e-5b4f-4e3a-9d2c-1a2b3c4d5e60", containers.clone()),
        ),
        ("bare", pod("bare")),
    ];
    for (name, object) in &cases {
        let created = env.create_pod_dry_run(&ns, object).await;
        assert!(
            created.status.is_success(),
            "{name}: {} {}",
            created.status,
            created.body
        );
        let mutate = env.decision(&ns, name, "mutate").await;
        assert_eq!(
            mutate.decision(),
            "would_patch",
            "{name}: every pod is predicted at /mutate"
        );
    }
    // The pod naming a node that does not exist: /validate's would-be refusal (its node is checked there).
    let named = env.decision(&ns, "named", "validate").await;
    assert_eq!(named.decision(), "would_deny", "{named:?}");
    for name in ["sampled", "bare"] {
        let validate = env.decision(&ns, name, "validate").await;
        assert_eq!(validate.decision(), "noop", "{name}: {validate:?}");
    }
    // Created before the others, so its /validate line (had it been sent) would be in the log by now.
    let unsampled = env
        .decisions_with(&[
            ("admission.request.namespace", &ns),
            ("admission.request.name", "unsampled"),
            ("webhook", "validate"),
        ])
        .await;
    assert!(
        unsampled.is_empty(),
        "a pod of an unsampled controller costs one call: {unsampled:?}"
    );
    if env.settings.target == crate::harness::Target::Local {
        let sample = r#"pod_director_shadow_disagreements_total{group="e2e-dryrun",mode="dryRun",webhook="validate"}"#;
        assert_eq!(
            env.metric(sample).await,
            Some(0.0),
            "no /validate refusal that /mutate did not predict"
        );
    }
}
