use super::*;
use crate::testing::config;

const GROUPS: &str = r#"
groups:
  ci:
    mode: enforce
    enforceWith: policy
    onConflict: override
    allowPodExclusion: true
    allowDaemonSets: true
    nodeSelector: {node-pool: ci, "example.com/tier": gold}
    tolerations:
      - {key: dedicated, value: ci, effect: NoSchedule}
      - {key: dedicated, operator: Equal, value: ci, effect: NoSchedule}
      - {key: gpu, operator: Exists, effect: NoExecute, tolerationSeconds: 30}
"#;

fn compiled(yaml: &str, group: &str) -> Policies {
    let config = config(yaml);
    let g = &config.groups[group];
    compile(&config, group, g, &["kube-system".to_owned()]).expect("compiles")
}

/// The ValidatingAdmissionPolicy's variable `name`: its expression.
fn variable(p: &Policies, name: &str) -> String {
    p.objects[2]["spec"]["variables"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == name)
        .map(|v| v["expression"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_else(|| panic!("no variable {name}: {}", p.objects[2]))
}

fn kinds(p: &Policies) -> Vec<&str> {
    p.objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap_or_default())
        .collect()
}

#[test]
fn a_group_compiles_to_two_policies_and_their_bindings_all_named_after_it() {
    let p = compiled(GROUPS, "ci");
    assert_eq!(p.name, "pod-director-ci");
    assert_eq!(
        kinds(&p),
        [
            "MutatingAdmissionPolicy",
            "MutatingAdmissionPolicyBinding",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding"
        ]
    );
    for object in &p.objects {
        assert_eq!(object["apiVersion"], API_VERSION);
        assert_eq!(object["metadata"]["name"], "pod-director-ci");
        assert_eq!(object["metadata"]["labels"][MANAGED_BY_LABEL], MANAGED_BY);
        assert_eq!(object["metadata"]["labels"][GROUP_LABEL], "ci");
    }
    assert_eq!(p.objects[1]["spec"]["policyName"], "pod-director-ci");
    assert_eq!(p.objects[3]["spec"]["validationActions"], json!(["Deny"]));
    let selector = &p.objects[1]["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"];
    assert_eq!(
        selector,
        &json!([
            {"key": "pod-director/group", "operator": "In", "values": ["ci"]},
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]},
        ])
    );
    assert_eq!(
        selector,
        &p.objects[3]["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
    );
    // Pod CREATEs only: updates, DaemonSets and spec.nodeName stay on the webhook.
    let rules = &p.objects[0]["spec"]["matchConstraints"]["resourceRules"];
    assert_eq!(rules[0]["operations"], json!(["CREATE"]));
    assert_eq!(rules[0]["resources"], json!(["pods"]));
    assert_eq!(p.objects[0]["spec"]["failurePolicy"], "Fail");
    assert_eq!(p.objects[2]["spec"]["failurePolicy"], "Fail");
}

#[test]
fn the_skip_rules_are_match_conditions_of_both_policies() {
    let p = compiled(GROUPS, "ci");
    let names = |i: usize| -> Vec<String> {
        p.objects[i]["spec"]["matchConditions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| c["name"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let expected = [
        "not-left-to-the-webhook",
        "not-excluded-by-label",
        "not-a-daemon-set-pod",
    ];
    assert_eq!(names(0), expected);
    assert_eq!(names(2), expected);
    let conditions = p.objects[0]["spec"]["matchConditions"].to_string();
    assert!(conditions.contains("pod-director/exclude"), "{conditions}");
    assert!(
        conditions.contains("system:serviceaccount:kube-system:daemon-set-controller"),
        "{conditions}"
    );
    let plain = compiled(
        "groups: {a: {mode: enforce, enforceWith: policy, nodeSelector: {p: a}}}",
        "a",
    );
    assert_eq!(
        plain.objects[0]["spec"]["matchConditions"].as_array().map(Vec::len),
        Some(1)
    );
}

/// The one mutation's expression (the API server patches the pod once per mutation).
fn mutation(p: &Policies) -> String {
    let mutations = p.objects[0]["spec"]["mutations"].as_array().map(Vec::len);
    assert_eq!(mutations, Some(1), "{}", p.objects[0]);
    p.objects[0]["spec"]["mutations"][0]["jsonPatch"]["expression"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn the_node_selector_mutation_escapes_keys_and_follows_on_conflict() {
    let p = compiled(GROUPS, "ci");
    let ns = mutation(&p);
    assert!(ns.starts_with("(\n// groups.ci.nodeSelector:"), "{ns}");
    assert!(
        ns.contains(")\n) + (\n// groups.ci.tolerations:"),
        "then the tolerations': {ns}"
    );
    assert_eq!(p.objects[0]["spec"]["reinvocationPolicy"], "Never", "runs once per pod");
    assert!(ns.contains(r#""/spec/nodeSelector/example.com~1tier""#), "{ns}");
    assert!(ns.contains(r#"op: "replace""#), "override replaces: {ns}");
    let reject = compiled(
        "groups: {a: {mode: enforce, enforceWith: policy, nodeSelector: {p: a}}}",
        "a",
    );
    assert!(!mutation(&reject).contains(r#"op: "replace""#));
    let conflicts = variable(&reject, "conflicts");
    assert!(conflicts.contains("(rejected)"), "{conflicts}");
    let ignore = compiled(
        "groups: {a: {mode: enforce, enforceWith: policy, onConflict: ignore, nodeSelector: {p: a}}}",
        "a",
    );
    let violations = variable(&ignore, "violations");
    assert!(violations.contains("missing; the group requires p=a"), "{violations}");
    assert!(
        !violations.contains("is \\\""),
        "ignore keeps the pod's value: {violations}"
    );
}

#[test]
fn tolerations_spelled_alike_are_added_once_in_the_engines_spelling() {
    let p = compiled(GROUPS, "ci");
    let t = mutation(&p);
    // The first two are the same toleration (operator omitted = Equal): one variable, one append.
    assert_eq!(t.matches("/spec/tolerations/-").count(), 2, "{t}");
    let variables = p.objects[0]["spec"]["variables"].as_array().map(Vec::len);
    assert_eq!(variables, Some(2));
    assert!(
        t.contains(
            r#"Object.spec.tolerations{key: "dedicated", operator: "Equal", value: "ci", effect: "NoSchedule"}"#
        ),
        "{t}"
    );
    assert!(t.contains("tolerationSeconds: 30"), "{t}");
    // The validating policy checks each of the group's tolerations, as /validate does.
    let violations = variable(&p, "violations");
    assert_eq!(violations.matches("missing a toleration of").count(), 3, "{violations}");
}

#[test]
fn messages_are_the_webhooks() {
    let reject = GROUPS.replace("onConflict: override", "onConflict: reject");
    let validations = compiled(&reject, "ci").objects[2]["spec"]["validations"].to_string();
    assert!(
        validations.contains(r#"pod-director: the pod conflicts with placement group \\\"ci\\\": "#),
        "{validations}"
    );
    assert!(
        validations.contains(r#"pod-director: the pod does not satisfy placement group \\\"ci\\\": "#),
        "{validations}"
    );
    // Only onConflict: reject refuses a conflict.
    let validations = &compiled(GROUPS, "ci").objects[2]["spec"]["validations"];
    assert_eq!(validations.as_array().map(Vec::len), Some(1), "{validations}");
}

#[test]
fn a_message_is_built_only_for_a_refused_pod_and_each_variable_is_used_once() {
    // The API server evaluates every messageExpression for every request, its variables afresh.
    for on_conflict in ["reject", "override", "ignore"] {
        let yaml = GROUPS.replace("onConflict: override", &format!("onConflict: {on_conflict}"));
        let p = compiled(&yaml, "ci");
        let spec = &p.objects[2]["spec"];
        let mut uses = 0;
        for validation in spec["validations"].as_array().into_iter().flatten() {
            let expression = validation["expression"].as_str().unwrap_or_default();
            let message = validation["messageExpression"].as_str().unwrap_or_default();
            let check = expression.split_once('\n').map_or(expression, |(_comment, rest)| rest);
            assert!(
                message.starts_with(&format!("({check}) ? \"\" :\n")),
                "{on_conflict}: the message asks the validation first: {message}"
            );
            assert!(!expression.contains("variables."), "{on_conflict}: {expression}");
            uses += message.matches("variables.").count();
        }
        let variables = spec["variables"].as_array().map_or(0, Vec::len);
        assert_eq!(uses, variables, "{on_conflict}: each variable used once: {spec}");
    }
}

#[test]
fn a_toleration_is_looked_for_in_the_engines_spelling_before_the_superset_rule() {
    let p = compiled(GROUPS, "ci");
    let validations = p.objects[2]["spec"]["validations"].to_string();
    let exact = r#"object.spec.tolerations.exists(t, has(t.key) && t.key == \"gpu\" && has(t.effect) && t.effect == \"NoExecute\" && has(t.operator) && t.operator == \"Exists\" && !has(t.value) && has(t.tolerationSeconds) && t.tolerationSeconds == 30) || object.spec.tolerations.exists(t, "#;
    assert!(validations.contains(exact), "{validations}");
    // The NoExecute seconds are asked only of a NoExecute toleration of the group.
    let dedicated = tolerated(&toleration_of(
        json!({"key": "dedicated", "value": "ci", "effect": "NoSchedule"}),
    ));
    assert!(!dedicated.contains("<= t.tolerationSeconds"), "{dedicated}");
    assert!(!dedicated.contains(r#"!= "NoExecute""#), "{dedicated}");
    let gpu = tolerated(&toleration_of(
        json!({"key": "gpu", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}),
    ));
    assert!(gpu.contains("30 <= t.tolerationSeconds"), "{gpu}");
    // Pods naming a node are the webhook's; the matchConstraints leave out the rest of WEBHOOK_ONLY.
    let condition = p.objects[2]["spec"]["matchConditions"][0]["expression"]
        .as_str()
        .unwrap_or_default();
    assert!(condition.ends_with(NAMES_NO_NODE), "{condition}");
}

fn toleration_of(value: Value) -> Toleration {
    serde_json::from_value(value).expect("a toleration")
}

#[test]
fn object_names_are_valid_for_every_group_name() {
    assert_eq!(object_name("ci"), "pod-director-ci");
    for name in ["Team_A", "a.b", "UPPER", "x_"] {
        let object = object_name(name);
        assert!(
            object
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{object}"
        );
        assert!(!object.ends_with('-'), "{object}");
    }
    assert_ne!(object_name("A"), object_name("a"));
    // The chart computes the same names for its RBAC's resourceNames (chart/tests/resources_test.yaml).
    assert_eq!(object_name("Team_A.gpu"), "pod-director-team-a-gpu-731ce652");
}

#[test]
fn groups_a_policy_cannot_express_are_not_compiled_and_say_why() {
    let yaml = r#"
onNoFeasibleNode: deny
defaultGroup: d
groups:
  d: {mode: enforce}
  aff:
    mode: enforce
    affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: z, operator: In, values: [a]}]}]}}}
"#;
    let config = config(yaml);
    let err = compile(&config, "aff", &config.groups["aff"], &[]).expect_err("affinity");
    let text = err.join("; ");
    assert!(text.contains("affinity"), "{text}");
    assert!(text.contains("onNoFeasibleNode: deny"), "{text}");
    let err = compile(&config, "d", &config.groups["d"], &[]).expect_err("default group");
    assert!(err.join("; ").contains("defaultGroup"), "{err:?}");
}

#[test]
fn enforce_with_policy_on_a_group_a_policy_cannot_express_is_a_config_error() {
    let yaml = r#"
groups:
  aff:
    enforceWith: policy
    onNoFeasibleNode: deny
"#;
    let err = Config::from_yaml(yaml, "test", Vec::new()).expect_err("refused");
    let text = err.to_string();
    assert!(text.contains("groups.aff.enforceWith: policy, but"), "{text}");
    assert!(text.contains("set enforceWith: webhook"), "{text}");
}

#[test]
fn only_enforce_groups_on_policy_are_compiled() {
    let yaml = r#"
groups:
  a: {mode: enforce, enforceWith: policy, nodeSelector: {p: a}}
  b: {mode: dryRun, enforceWith: policy, nodeSelector: {p: b}}
  c: {mode: enforce, nodeSelector: {p: c}}
"#;
    let all = compile_all(&config(yaml), &[]);
    assert_eq!(all.keys().collect::<Vec<_>>(), ["a"]);
}

#[test]
fn a_webhook_and_policy_group_in_enforce_compiles_to_its_validating_policy_alone() {
    let yaml = r#"
groups:
  a: {mode: enforce, enforceWith: policy, nodeSelector: {p: a}}
  v: {mode: enforce, enforceWith: webhookAndPolicy, nodeSelector: {p: v}}
  d: {mode: dryRun, enforceWith: webhookAndPolicy, nodeSelector: {p: d}}
  aff:
    mode: enforce
    enforceWith: webhookAndPolicy
    affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: z, operator: In, values: [a]}]}]}}}
"#;
    let c = config(yaml);
    let all = compile_all(&c, &[]);
    // aff: the policy cannot check its affinity, so /validate keeps it (no config error).
    assert_eq!(all.keys().collect::<Vec<_>>(), ["a", "v"]);
    let full = compile(&c, "v", &c.groups["v"], &[]).unwrap_or_else(|e| panic!("{e:?}"));
    assert!(all["v"].validation_only && !all["a"].validation_only);
    assert_eq!(
        all["v"].objects[..],
        full.objects[2..],
        "the very objects the policy path applies"
    );
    assert!(validated_by_policy(&c, "v", &c.groups["v"]) && !validated_by_policy(&c, "aff", &c.groups["aff"]));
}

#[test]
fn observation_is_sampled_by_the_owner_uid_and_keeps_every_bare_pod() {
    assert_eq!(observation_condition(Observation::None), None);
    let every = observation_condition(Observation::Every).unwrap_or_default();
    assert_eq!(every, format!("!({WEBHOOK_ONLY})"));
    let sampled = observation_condition(Observation::OneIn16).unwrap_or_default();
    assert!(sampled.starts_with(&format!("!({WEBHOOK_ONLY}) && ")), "{sampled}");
    assert!(sampled.contains(r#"ownerReferences[0].uid.endsWith("0")"#), "{sampled}");
    assert!(sampled.contains("!has(object.metadata.ownerReferences)"), "{sampled}");
    let rarer = observation_condition(Observation::OneIn256).unwrap_or_default();
    assert!(rarer.contains(r#"uid.endsWith("00")"#), "{rarer}");
}

#[test]
fn a_compiled_group_refuses_a_choice_of_placement_with_the_webhook_s_conflict() {
    let yaml = GROUPS.replace("onConflict: override", "onConflict: reject");
    let p = compiled(&yaml, "ci");
    let conflicts = variable(&p, "conflicts");
    // The webhook's conflict for a pod labelled gpu in a group that offers no alternative.
    let config = config(&yaml);
    let pod: crate::placement::Pod = serde_json::from_value(json!({
        "metadata": {"labels": {"pod-director/placement": "gpu"}},
        "spec": {"containers": [{"name": "app", "image": "busybox"}]},
    }))
    .expect("a pod");
    let chosen = crate::placement::choice::choose(&config, &config.groups["ci"], &pod);
    let webhook = chosen.conflict.expect("a conflict").to_string();
    assert_eq!(
        webhook,
        r#"metadata.labels["pod-director/placement"]: pod has "gpu", group requires one of default (rejected)"#
    );
    // The policy builds the same text around the label's value.
    let (before, after) = webhook.split_once("gpu").expect("the value");
    for piece in [lit(before), lit(after)] {
        assert!(conflicts.contains(&piece), "{piece} in {conflicts}");
    }
    assert!(
        conflicts.contains(r#"object.metadata.labels["pod-director/placement"] != "default""#),
        "{conflicts}"
    );
    // override and ignore apply the default: nothing to refuse.
    assert!(
        !compiled(GROUPS, "ci").objects[2]["spec"]
            .to_string()
            .contains("pod-director/placement")
    );
}
