use super::*;

fn args(config: &std::path::Path, namespace: Option<&str>, group: Option<&str>) -> ExplainArgs {
    ExplainArgs {
        config: Some(config.to_owned()),
        files: Vec::new(),
        policies: true,
        namespace: None,
        group: group.map(str::to_owned),
        output: OutputFormat::Json,
        fail_on: None,
        nodes: Vec::new(),
        pod_director_namespace: namespace.map(str::to_owned),
        compare_in_tree: false,
    }
}

/// The bindings' `NotIn` values on the namespace name.
fn excluded_by_bindings(policies: &[Policies]) -> Vec<Vec<Value>> {
    policies
        .iter()
        .flat_map(|p| &p.objects)
        .filter(|o| o["kind"].as_str().is_some_and(|k| k.ends_with("Binding")))
        .map(|o| {
            o["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|r| r["operator"] == "NotIn")
                .flat_map(|r| r["values"].as_array().cloned().unwrap_or_default())
                .collect()
        })
        .collect()
}

#[test]
fn explain_policies_prints_what_the_reconciler_applies_for_the_same_config_and_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(
            &path,
            "excludedNamespaces: [monitoring]\ngroups:\n  ci:\n    mode: enforce\n    enforceWith: policy\n    \
             nodeSelector: {pool: ci}\n  gpu:\n    mode: enforce\n    enforceWith: policy\n    nodeSelector: {pool: gpu}\n  \
             web:\n    mode: enforce\n    enforceWith: webhookAndPolicy\n    nodeSelector: {pool: web}\n",
        )
        .unwrap();
    for namespace in [Some("pd-system"), None] {
        // The reconciler applies what compile_all gives (less the kinds the API server does not serve).
        let config = load_config(&path, namespace).unwrap().config;
        let applied = admission_policies::compile_all(
            &config,
            &pod_director_engine::compile::webhook_entries::excluded(&config),
        );
        let applied: Vec<Policies> = applied.into_values().collect();
        let printed = compiled(&args(&path, namespace, None)).expect("compiles");
        assert_eq!(printed, applied, "namespace {namespace:?}");
        let one = compiled(&args(&path, namespace, Some("gpu"))).expect("compiles");
        assert_eq!(one[..], applied[1..2], "--group gpu, namespace {namespace:?}");
        let web = compiled(&args(&path, namespace, Some("web"))).expect("compiles");
        let kinds: Vec<&Value> = web[0].objects.iter().map(|o| &o["kind"]).collect();
        assert_eq!(
            kinds,
            ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"],
            "webhookAndPolicy: the validating policy alone"
        );
        assert!(web[0].validation_only && !printed[0].validation_only);
        let excluded = excluded_by_bindings(&printed);
        assert_eq!(
            excluded.len(),
            5,
            "two bindings per policy group, one for web: {excluded:?}"
        );
        for values in excluded {
            assert_eq!(
                values.iter().any(|v| v == "pd-system"),
                namespace.is_some(),
                "{values:?}"
            );
            assert!(values.iter().any(|v| v == "monitoring"), "{values:?}");
        }
    }
}
