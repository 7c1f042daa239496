//! What is enforced is the live configuration: a mode or `defaultGroup` changed by
//! editing the config file alone reaches the webhook configurations (the server
//! reconciles their namespaceSelectors), a file that means nothing is refused, and
//! namespaces left selecting a removed group are reported.

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhook, ValidatingWebhook};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Value, json};

use crate::fixtures::{Placement, workload};
use crate::harness::k8s::{eventually, label_namespace};
use crate::harness::{Env, suffix};

const RECONCILED: &str = "webhook configuration reconciled: the entries pod-director owns follow the configuration";

/// The namespaceSelector and failurePolicy of entry `entry` in both configurations.
async fn entries(env: &Env, entry: &str) -> Vec<(Option<LabelSelector>, Option<String>)> {
    let (mutating, validating) = env.webhook_configurations().await;
    let m_name = env.webhook_name(entry, "mutate");
    let v_name = env.webhook_name(entry, "validate");
    let m: Option<&MutatingWebhook> = mutating.webhooks.iter().flatten().find(|w| w.name == m_name);
    let v: Option<&ValidatingWebhook> = validating.webhooks.iter().flatten().find(|w| w.name == v_name);
    let m = m.unwrap_or_else(|| panic!("no entry {m_name}"));
    let v = v.unwrap_or_else(|| panic!("no entry {v_name}"));
    vec![
        (m.namespace_selector.clone(), m.failure_policy.clone()),
        (v.namespace_selector.clone(), v.failure_policy.clone()),
    ]
}

fn first_expression(selector: &Option<LabelSelector>) -> Value {
    selector
        .as_ref()
        .and_then(|s| s.match_expressions.as_ref())
        .and_then(|e| e.first())
        .map(|r| serde_json::to_value(r).unwrap_or_default())
        .unwrap_or_default()
}

/// Whether the first expression of an entry's selector lists `group`.
fn selects(selector: &Option<LabelSelector>, group: &str) -> bool {
    let values = &first_expression(selector)["values"];
    values.as_array().is_some_and(|v| v.contains(&json!(group)))
}

/// Creates dry-run pods in `namespace` until the API server refuses them because the
/// webhook cannot be called (its view of the webhook configurations is asynchronous).
async fn wait_until_refused(env: &Env, namespace: &str) {
    eventually("the API server to refuse pods of the namespace", || async {
        let created = env.create_pod_dry_run(namespace, &workload("probe")).await;
        (created.status == http::StatusCode::INTERNAL_SERVER_ERROR).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_flipped_to_enforce_by_editing_the_config_alone_is_refused_while_pod_director_is_down() {
    let Some(mut env) = Env::start_local(
        "flip",
        "edits pod-director's config file and stops it (on a cluster: a ConfigMap edit, then scale to 0)",
    )
    .await
    else {
        return;
    };
    let flipped = env.namespace(Some("e2e-warn")).await;
    let dry = env.namespace(Some("e2e-dryrun")).await;

    // The chart rendered exactly what the server computes: nothing to patch at start.
    let mut own = env.config.clone();
    own.excluded_namespaces.push(env.settings.namespace.clone());
    let computed = pod_director_engine::compile::webhook_entries::namespace_selectors(&own, &Default::default());
    for entry in pod_director_engine::compile::webhook_entries::PodEntry::ALL {
        for (selector, _) in entries(&env, entry.as_str()).await {
            assert_eq!(
                selector.as_ref(),
                Some(&computed[&entry]),
                "{entry}: helm template rendered what the server computes"
            );
        }
    }
    // A first reconciliation finds the chart's entries in step.
    let unchanged = r#"pod_director_webhook_reconciles_total{result="unchanged"}"#;
    env.wait_for_metric(unchanged, "at least 1", |v| v >= 1.0).await;
    assert!(
        env.logs.messages(RECONCILED).await.is_empty(),
        "nothing patched before the edit; {}",
        env.log_hint()
    );
    for (selector, policy) in entries(&env, "observe").await {
        assert!(selects(&selector, "e2e-warn"), "{selector:?}");
        assert_eq!(policy.as_deref(), Some("Ignore"));
    }

    let before = env.create_admitted_pod(&flipped, &workload("before")).await;
    assert_eq!(
        Placement::of(&before.pod()),
        Placement::submitted(),
        "warn: admitted untouched"
    );
    let old_revision = env
        .decision(&flipped, "before", "mutate")
        .await
        .text("config.revision")
        .to_owned();

    // Flip e2e-warn to enforce in the config file only: no helm, no kubectl.
    env.edit_config(|c| c["groups"]["e2e-warn"]["mode"] = json!("enforce"));
    let revision = env.reloaded_from(&old_revision).await;
    let line = env
        .logged(RECONCILED, |l| l["config.revision"] == revision.as_str())
        .await;
    assert!(
        line["entries"].as_str().is_some_and(|e| e.contains("enforce.")),
        "{line}"
    );
    for (selector, policy) in entries(&env, "enforce").await {
        assert!(selects(&selector, "e2e-warn"), "{selector:?}");
        assert_eq!(policy.as_deref(), Some("Fail"));
    }
    for (selector, _) in entries(&env, "observe").await {
        assert!(!selects(&selector, "e2e-warn"), "{selector:?}");
    }
    assert!(
        env.metric(r#"pod_director_webhook_reconciles_total{result="patched"}"#)
            .await
            >= Some(1.0)
    );

    env.pod_director().stop();
    wait_until_refused(&env, &flipped).await;
    let refused = env.create_pod(&flipped, &workload("after")).await;
    assert_eq!(refused.status, http::StatusCode::INTERNAL_SERVER_ERROR, "{refused:?}");
    env.assert_failed_calling(&refused, "enforce");
    assert!(env.pods(&flipped).get_opt("after").await.expect("GET pod").is_none());

    let admitted = env.create_admitted_pod(&dry, &workload("web")).await;
    assert_eq!(
        Placement::of(&admitted.pod()),
        Placement::submitted(),
        "a dryRun group stays on the Ignore entry: admitted, untouched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_group_set_by_editing_the_config_places_pods_of_unlabelled_namespaces() {
    let Some(mut env) = Env::start_local(
        "default",
        "edits pod-director's config file (on a cluster: a ConfigMap edit) and stops it",
    )
    .await
    else {
        return;
    };
    let unlabelled = env.namespace(None).await;
    for (selector, policy) in entries(&env, "default-group").await {
        assert_eq!(
            first_expression(&selector),
            json!({"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["none.pod-director.io"]}),
            "no defaultGroup: the entry selects no namespace"
        );
        assert_eq!(policy.as_deref(), Some("Ignore"));
    }
    let before = env.create_admitted_pod(&unlabelled, &workload("before")).await;
    assert_eq!(Placement::of(&before.pod()), Placement::submitted());

    let old_revision = env.loaded_revision().await;
    env.edit_config(|c| c["defaultGroup"] = json!("e2e-enforce"));
    env.reloaded_from(&old_revision).await;
    eventually("the default-group entries to select unlabelled namespaces", || async {
        entries(&env, "default-group")
            .await
            .iter()
            .all(|(selector, policy)| {
                first_expression(selector) == json!({"key": "pod-director/group", "operator": "DoesNotExist"})
                    && policy.as_deref() == Some("Fail")
            })
            .then_some(())
    })
    .await;

    // The API server's view of the webhook configurations follows asynchronously.
    eventually("pods of the unlabelled namespace to be placed", || async {
        let created = env.create_pod_dry_run(&unlabelled, &workload("probe")).await;
        (created.status.is_success() && Placement::of(&created.pod()) == Placement::enforced()).then_some(())
    })
    .await;
    env.create_admitted_pod(&unlabelled, &workload("after")).await;
    assert_eq!(
        Placement::of(&env.get_pod(&unlabelled, "after").await),
        Placement::enforced()
    );
    let decision = env.decision(&unlabelled, "after", "mutate").await;
    assert_eq!(decision.decision(), "patched");
    assert_eq!(decision.text("placement.group"), "e2e-enforce");

    // The default group enforces: its entry took the enforce entry's failurePolicy.
    env.pod_director().stop();
    wait_until_refused(&env, &unlabelled).await;
    let refused = env.create_pod(&unlabelled, &workload("down")).await;
    env.assert_failed_calling(&refused, "default-group");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_file_that_means_nothing_is_refused_and_the_old_revision_keeps_deciding() {
    let Some(mut env) = Env::start_local(
        "emptied",
        "empties pod-director's config file (on a cluster: a ConfigMap edit)",
    )
    .await
    else {
        return;
    };
    let ns = env.namespace(Some("e2e-enforce")).await;
    env.create_admitted_pod(&ns, &workload("before")).await;
    let revision = env
        .decision(&ns, "before", "mutate")
        .await
        .text("config.revision")
        .to_owned();

    for (count, text) in [(1.0, ""), (2.0, "# emptied by a broken template\n"), (3.0, "null\n")] {
        env.pod_director().write_config(text);
        let refused = r#"pod_director_config_reloads_total{result="error"}"#;
        env.wait_for_metric(refused, "counting the refused reload", |v| v == count)
            .await;
        let refused = env
            .logs
            .messages("new configuration refused; the previous one stays live")
            .await;
        assert_eq!(refused.len() as f64, count, "{refused:?}");
        let last = &refused[refused.len() - 1];
        assert!(
            last["error"].as_str().is_some_and(|e| e.contains("is empty (")),
            "the error says the file is empty: {last}"
        );
        assert_eq!(last["config.revision"], revision.as_str());

        let name = format!("after-{count}");
        env.create_admitted_pod(&ns, &workload(&name)).await;
        assert_eq!(Placement::of(&env.get_pod(&ns, &name).await), Placement::enforced());
        let decision = env.decision(&ns, &name, "mutate").await;
        assert_eq!(decision.decision(), "patched", "still enforced after {text:?}");
        assert_eq!(decision.text("config.revision"), revision, "the old revision decides");
    }
    assert_eq!(
        env.metric(r#"pod_director_config_reloads_total{result="success"}"#)
            .await,
        Some(0.0),
        "no reload succeeded (the series is exported at 0 from the start)"
    );

    // No group on purpose is written `groups: {}`: accepted, with a WARN.
    env.pod_director().write_config("groups: {}\n");
    let new_revision = env.reloaded_from(&revision).await;
    let warning = env
        .logged("configuration warning", |l| {
            l["config.revision"] == new_revision.as_str()
        })
        .await;
    assert_eq!(warning["level"], "WARN");
    assert!(
        warning["warning"]
            .as_str()
            .is_some_and(|w| w.starts_with("groups is empty")),
        "{warning}"
    );
    assert_eq!(
        env.metric(r#"pod_director_config_reloads_total{result="success"}"#)
            .await,
        Some(1.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_group_that_namespaces_select_is_warned_and_exported() {
    let Some(mut env) = Env::start_local(
        "orphan",
        "edits pod-director's config file (on a cluster: a ConfigMap edit)",
    )
    .await
    else {
        return;
    };
    let group = format!("e2e-gone-{}", suffix());
    let old_revision = env.loaded_revision().await;
    env.edit_config(|c| {
        c["groups"][group.as_str()] = json!({"mode": "dryRun", "nodeSelector": {"e2e.pod-director.io/pool": "gone"}});
    });
    let with_group = env.reloaded_from(&old_revision).await;
    let a = env.create_namespace(Some(&group)).await;
    env.create_namespace(Some(&group)).await;
    let gauge = format!("pod_director_orphaned_group_namespaces{{group=\"{group}\"}}");
    assert_eq!(env.metric(&gauge).await, None, "the group is defined");
    // Let the namespace watch (milliseconds on loopback) bring both into pod-director's cache
    // before the reload: the WARN counts what the cache holds then.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;

    // Remove the group, leaving both namespaces labelled with it.
    let suite = env.config.clone();
    env.pod_director()
        .write_config(&serde_json::to_string(&suite).expect("JSON"));
    env.reloaded_from(&with_group).await;
    let orphaned = "namespaces select a group that is not defined; their pods are decided by unknownGroup";
    let warned = env.logged(orphaned, |l| l["group"] == group.as_str()).await;
    assert_eq!(warned["level"], "WARN");
    assert_eq!(warned["namespaces"], 2, "{warned}");
    assert_eq!(warned["label"], "pod-director/group");
    assert_eq!(env.metric(&gauge).await, Some(2.0));

    // The gauge follows the namespaces: relabel one.
    label_namespace(&env.client, &a, json!({"pod-director/group": "e2e-dryrun"}))
        .await
        .expect("namespace relabelled");
    env.wait_for_metric(&gauge, "following the relabelled namespace", |v| v == 1.0)
        .await;
}

/// Whether the chart's ServiceAccount, as the authorizer sees it, may `verb` the webhook
/// configurations `resource` named `name` (`None`: any).
async fn may(env: &Env, verb: &str, resource: &str, name: Option<&str>) -> bool {
    env.service_account_may("admissionregistration.k8s.io", resource, verb, None, name)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_s_rbac_lets_the_server_read_and_patch_its_own_webhook_configurations_only() {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    use kube::api::{Api, DeleteParams};

    let env = Env::start("rbac").await;
    let name = env.settings.fullname.clone();
    let local = env.settings.target == crate::harness::Target::Local;
    let roles: Api<ClusterRole> = Api::all(env.client.clone());
    let bindings: Api<ClusterRoleBinding> = Api::all(env.client.clone());
    if local {
        // In cluster mode the chart installed them.
        env.apply_rbac(crate::harness::chart::render_rbac(&env.settings)).await;
    }
    // The authorizer sees a new ClusterRole through its informer: wait for the grant before
    // asserting the denials, so that they are denials and not a role not yet seen.
    eventually("the authorizer to see the chart's ClusterRole", || async {
        may(&env, "get", "mutatingwebhookconfigurations", Some(&name))
            .await
            .then_some(())
    })
    .await;
    for resource in ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"] {
        for verb in ["get", "patch"] {
            assert!(may(&env, verb, resource, Some(&name)).await, "{verb} {resource}/{name}");
        }
        for verb in ["update", "delete"] {
            assert!(
                !may(&env, verb, resource, Some(&name)).await,
                "no {verb} on {resource}/{name}"
            );
        }
        assert!(
            !may(&env, "patch", resource, Some("someone-elses-webhooks")).await,
            "another configuration of {resource} cannot be patched"
        );
        for verb in ["list", "watch", "create"] {
            assert!(!may(&env, verb, resource, None).await, "no {verb} on {resource}");
        }
    }
    if local {
        let dp = DeleteParams::default();
        bindings.delete(&name, &dp).await.expect("ClusterRoleBinding deleted");
        roles.delete(&name, &dp).await.expect("ClusterRole deleted");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_config_written_in_place_is_loaded_and_never_counted_as_refused() {
    let Some(mut env) = Env::start_local(
        "in-place",
        "rewrites pod-director's config file in place (on a cluster a ConfigMap is swapped atomically)",
    )
    .await
    else {
        return;
    };
    let revision = env.loaded_revision().await;
    let mut config = serde_json::to_value(&env.config).expect("the config serializes");
    config["groups"]["e2e-in-place"] = json!({"mode": "enforce", "nodeSelector": {"e2e.pod-director.io/pool": "blue"}});
    env.pod_director()
        .write_config_in_place(&config.to_string(), std::time::Duration::from_millis(200));
    let new_revision = env.reloaded_from(&revision).await;
    assert_ne!(new_revision, revision);
    // Well past the quiet period: the empty and the half-written file were never refused.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(
        env.metric(r#"pod_director_config_reloads_total{result="error"}"#).await,
        Some(0.0),
        "an edit in progress is not a refusal"
    );
    assert!(
        env.logs
            .messages("new configuration refused; the previous one stays live")
            .await
            .is_empty()
    );
    let ns = env.namespace(Some("e2e-in-place")).await;
    env.create_admitted_pod(&ns, &workload("web")).await;
    assert_eq!(env.decision(&ns, "web", "mutate").await.decision(), "patched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_edited_entry_is_restored_to_what_the_chart_renders() {
    let Some(mut env) = Env::start_local(
        "hand-edit",
        "triggers a reconciliation by editing pod-director's config file",
    )
    .await
    else {
        return;
    };
    let (_, validating) = env.webhook_configurations().await;
    let name = env.webhook_name("enforce", "validate");
    let index = validating
        .webhooks
        .iter()
        .flatten()
        .position(|w| w.name == name)
        .expect("the enforce entry");
    // An admin relaxes the enforce entry by hand: fail open, a longer timeout, fewer operations.
    let patch = json!([
        {"op": "test", "path": format!("/webhooks/{index}/name"), "value": name},
        {"op": "replace", "path": format!("/webhooks/{index}/failurePolicy"), "value": "Ignore"},
        {"op": "replace", "path": format!("/webhooks/{index}/timeoutSeconds"), "value": 29},
        {"op": "replace", "path": format!("/webhooks/{index}/rules/0/operations"), "value": ["CREATE"]},
    ]);
    let api = kube::Api::<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration>::all(
        env.client.clone(),
    );
    api.patch(
        &env.settings.fullname,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Json::<()>(serde_json::from_value(patch).expect("a JSON patch")),
    )
    .await
    .expect("the hand edit");
    // Any reload reconciles (so does the resync interval).
    let revision = env.loaded_revision().await;
    env.edit_config(|c| c["groups"]["e2e-hand-edit"] = json!({}));
    env.reloaded_from(&revision).await;
    let restored = eventually("the enforce entry restored", || async {
        let (_, validating) = env.webhook_configurations().await;
        let entry = validating.webhooks.into_iter().flatten().find(|w| w.name == name)?;
        (entry.failure_policy.as_deref() == Some("Fail")).then_some(entry)
    })
    .await;
    assert_eq!(restored.timeout_seconds, Some(5));
    let operations = restored
        .rules
        .as_ref()
        .and_then(|r| r.first())
        .and_then(|r| r.operations.clone());
    assert_eq!(operations, Some(vec!["CREATE".to_owned(), "UPDATE".to_owned()]));
}
