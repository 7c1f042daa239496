//! `pod-director explain --policies` prints what `serve` applies: run with the configuration and
//! the namespace pod-director runs with, every object it prints is the live one, field for
//! field — only what the API server adds (defaults, metadata it keeps) may differ.

use serde_json::Value;

use crate::harness::{ADMISSION_POLICY_KINDS, Env, admission_policy_api};

/// Whether every field of `printed` is in `live` with the same value: objects may have more
/// fields live (the API server's defaults), lists hold the same number of items, each contained.
fn contained(printed: &Value, live: &Value, path: &str, differences: &mut Vec<String>) {
    match (printed, live) {
        (Value::Object(printed), Value::Object(live)) => {
            for (key, value) in printed {
                let at = format!("{path}.{key}");
                match live.get(key) {
                    Some(live) => contained(value, live, &at, differences),
                    None => differences.push(format!("{at}: printed {value}, absent live")),
                }
            }
        }
        (Value::Array(printed), Value::Array(live)) if printed.len() == live.len() => {
            for (i, (printed, live)) in printed.iter().zip(live).enumerate() {
                contained(printed, live, &format!("{path}[{i}]"), differences);
            }
        }
        (printed, live) if printed == live => {}
        (printed, live) => differences.push(format!("{path}: printed {printed}, live {live}")),
    }
}

/// Runs `explain --policies -o json` with the scenario's configuration and pod-director's namespace, and holds
/// every object it prints to the one in the cluster; returns how many it compared.
pub(super) async fn assert_explain_prints_what_is_applied(env: &Env) -> usize {
    let dir = tempfile::tempdir().expect("a temp dir");
    let config = dir.path().join("config.yaml");
    // JSON is YAML.
    let text = serde_json::to_string(&env.config).expect("the config serializes");
    std::fs::write(&config, text).expect("config written");
    let out = std::process::Command::new(crate::harness::process::binary())
        .args(["explain", "--policies", "-o", "json", "-c"])
        .arg(&config)
        .args(["--pod-director-namespace", &env.settings.namespace])
        .env_remove("POD_NAMESPACE")
        .output()
        .expect("pod-director explain runs");
    assert!(
        out.status.success(),
        "explain --policies: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: Value = serde_json::from_slice(&out.stdout).expect("explain prints JSON");
    let items = printed["items"].as_array().cloned().unwrap_or_default();
    let mut differences = Vec::new();
    for item in &items {
        let kind = item["kind"].as_str().unwrap_or_default();
        let name = item["metadata"]["name"].as_str().unwrap_or_default();
        let (_, plural) = ADMISSION_POLICY_KINDS
            .iter()
            .find(|(k, _)| *k == kind)
            .unwrap_or_else(|| panic!("explain printed a {kind:?}"));
        let live = admission_policy_api(&env.client, kind, plural)
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("{kind} {name} printed by explain is not in the cluster: {e}"));
        let mut live = serde_json::to_value(&live).expect("serializes");
        // DynamicObject leaves the type out of its fields.
        live["apiVersion"] = item["apiVersion"].clone();
        live["kind"] = item["kind"].clone();
        contained(item, &live, &format!("{kind}/{name}"), &mut differences);
    }
    assert!(
        differences.is_empty(),
        "explain --policies does not print what serve applied:\n  {}",
        differences.join("\n  ")
    );
    items.len()
}

#[test]
fn containment_finds_a_missing_value_in_a_list_and_allows_defaults() {
    let printed = serde_json::json!({"spec": {"values": ["a", "b"], "x": 1}});
    let mut differences = Vec::new();
    contained(
        &printed,
        &serde_json::json!({"spec": {"values": ["a", "b"], "x": 1, "defaulted": true}}),
        "o",
        &mut differences,
    );
    assert!(differences.is_empty(), "{differences:?}");
    contained(
        &printed,
        &serde_json::json!({"spec": {"values": ["a", "b", "pod-director"], "x": 1}}),
        "o",
        &mut differences,
    );
    assert_eq!(differences.len(), 1, "{differences:?}");
}
