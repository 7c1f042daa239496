use super::*;
use serde_json::json;

fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

#[test]
fn camel_case_group_mode_is_flipped_by_one_variable() {
    let mut doc = json!({"groups": {"ci": {"mode": "dryRun"}}});
    let applied = apply(&mut doc, vars(&[("POD_DIRECTOR__GROUPS__CI__MODE", "enforce")])).unwrap();
    assert_eq!(doc["groups"]["ci"]["mode"], "enforce");
    assert_eq!(applied[0].1, "groups.ci.mode");
}

#[test]
fn unset_known_scalars_can_be_set_and_typed() {
    let mut doc = json!({"groups": {"gpu-a100": {}}});
    apply(
        &mut doc,
        vars(&[
            ("POD_DIRECTOR__DEFAULT_MODE", "warn"),
            ("POD_DIRECTOR__GROUPS__GPU_A100__ALLOW_DAEMON_SETS", "TRUE"),
            ("POD_DIRECTOR__GROUPS__GPU_A100__ALLOW_POD_EXCLUSION", "true"),
            ("POD_DIRECTOR__GROUPS__GPU_A100__ON_CONFLICT", "override"),
            ("POD_DIRECTOR__EXCLUDED_NAMESPACES", "kube-system, monitoring"),
            ("POD_DIRECTOR_CONFIG", "/not/an/override"),
        ]),
    )
    .unwrap();
    assert_eq!(doc["defaultMode"], "warn");
    assert_eq!(
        doc["groups"]["gpu-a100"]["allowDaemonSets"], true,
        "booleans in any case"
    );
    assert_eq!(doc["groups"]["gpu-a100"]["allowPodExclusion"], true);
    assert_eq!(doc["groups"]["gpu-a100"]["onConflict"], "override");
    assert_eq!(doc["excludedNamespaces"], json!(["kube-system", "monitoring"]));
}

#[test]
fn list_items_and_existing_map_keys_are_reachable() {
    let mut doc = json!({"groups": {"ci": {
        "nodeSelector": {"node-pool": "ci"},
        "tolerations": [{"key": "dedicated", "value": "ci"}]}}});
    apply(
        &mut doc,
        vars(&[
            ("POD_DIRECTOR__GROUPS__CI__TOLERATIONS__0__VALUE", "ci2"),
            ("POD_DIRECTOR__GROUPS__CI__NODE_SELECTOR__NODE_POOL", "ci2"),
        ]),
    )
    .unwrap();
    assert_eq!(doc["groups"]["ci"]["tolerations"][0]["value"], "ci2");
    assert_eq!(doc["groups"]["ci"]["nodeSelector"]["node-pool"], "ci2");
}

#[test]
fn errors_name_the_variable_and_what_is_wrong() {
    let mut doc = json!({"groups": {"ci": {"tolerations": []}}});
    let errors = apply(
        &mut doc,
        vars(&[
            ("POD_DIRECTOR__GROUPS__NOPE__MODE", "enforce"),
            ("POD_DIRECTOR__GROUPS__CI__ALLOW_POD_EXCLUSION", "yes"),
            ("POD_DIRECTOR__GROUPS__CI__TOLERATIONS__3__KEY", "x"),
            ("POD_DIRECTOR__GROUPS__CI", "x"),
            ("POD_DIRECTOR__BOGUS", "x"),
        ]),
    )
    .unwrap_err();
    let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(errors.len(), 5, "{text:#?}");
    assert!(
        text.iter()
            .any(|t| t.contains("POD_DIRECTOR__GROUPS__NOPE__MODE") && t.contains("\"NOPE\" matches no key"))
    );
    assert!(text.iter().any(|t| t.contains("\"yes\" is not true or false")));
    assert!(text.iter().any(|t| t.contains("index 3 is out of range")));
    assert!(text.iter().any(|t| t.contains("is a mapping, not a scalar")));
    assert!(text.iter().any(|t| t.contains("\"BOGUS\" matches no key")));
}

#[test]
fn settings_are_typed_by_the_schema_wherever_they_are() {
    let mut doc = json!({"groups": {"ci": {"affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "preference": {}}]}}}}});
    apply(
        &mut doc,
        vars(&[
            (
                "POD_DIRECTOR__GROUPS__CI__AFFINITY__NODE_AFFINITY__PREFERRED_DURING_SCHEDULING_IGNORED_DURING_EXECUTION__0__WEIGHT",
                "20",
            ),
            ("POD_DIRECTOR__GROUPS__CI__ALLOW_DAEMON_SETS", "true"),
            ("POD_DIRECTOR__NAMESPACE_GUARD__ALLOWED_GROUPS", "system:masters, platform"),
        ]),
    )
    .unwrap();
    let preferred = &doc["groups"]["ci"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"];
    assert_eq!(preferred[0]["weight"], 20, "an integer, not the string \"20\"");
    assert_eq!(doc["groups"]["ci"]["allowDaemonSets"], true);
    assert_eq!(
        doc["namespaceGuard"]["allowedGroups"],
        json!(["system:masters", "platform"])
    );
}

#[test]
fn a_variable_cannot_invent_a_group_or_a_key_the_schema_does_not_have() {
    let mut doc = json!({"groups": {"ci": {}}});
    let errors = apply(
        &mut doc,
        vars(&[
            ("POD_DIRECTOR__GROUPS__GPU__MODE", "enforce"),
            ("POD_DIRECTOR__GROUPS__CI__NODE_SELECTR", "x"),
        ]),
    )
    .unwrap_err();
    let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        [
            "environment variable POD_DIRECTOR__GROUPS__CI__NODE_SELECTR: \"NODE_SELECTR\" matches no key here \
             (keys: mode, onConflict, allowPodExclusion, onNoFeasibleNode, allowDaemonSets, nodeSelector, tolerations, affinity, alternatives, reserve, nodes, enforceWith)",
            "environment variable POD_DIRECTOR__GROUPS__GPU__MODE: \"GPU\" matches no key here (keys: ci)",
        ]
    );
}

#[test]
fn default_group_can_be_cleared() {
    let mut doc = json!({"defaultGroup": "ci"});
    apply(&mut doc, vars(&[("POD_DIRECTOR__DEFAULT_GROUP", "")])).unwrap();
    assert!(doc["defaultGroup"].is_null());
}
