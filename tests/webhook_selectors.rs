//! The server's webhook entries are the chart's: for each value set in
//! `tests/webhook_selectors/`, the entries `pod_director_engine::compile::webhook_entries` computes from
//! the configuration the chart's ConfigMap carries (every one, in order: the in-tree plugins' first
//! while `inTreePlugins` is set) equal the golden, which `scripts/chart-test.sh selectors` checks
//! against `helm template` of the chart; and the reconciler leaves the chart's entries as they are.
//! `BLESS=1 cargo test --test webhook_selectors` rewrites the goldens.

use std::path::{Path, PathBuf};

use pod_director_engine::compile::webhook_entries::{EntrySettings, Kind, in_tree, owned_entries, plan_patch};
use pod_director_engine::config::Config;
use serde_json::{Map, Value, json};

/// The chart's release namespace in the goldens (always excluded, as the server's own).
const RELEASE_NAMESPACE: &str = "pod-director";
/// The configurations' name in the goldens: the chart's fullname for `helm template pd`.
const RELEASE: &str = "pd-pod-director";

fn cases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/webhook_selectors");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/webhook_selectors exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".values.yaml"))
        .collect();
    cases.sort();
    cases
}

/// The chart's default values merged under `values` (maps merged, `null` deletes), as Helm does.
fn merge(base: &mut Value, values: &Value) {
    match (base, values) {
        (Value::Object(base), Value::Object(values)) => {
            for (k, v) in values {
                if v.is_null() {
                    base.remove(k);
                } else {
                    merge(base.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (base, values) => *base = values.clone(),
    }
}

fn yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What the server is given for a value set: the configuration the chart's ConfigMap carries
/// (loaded as the server loads it) and the `webhook` values the chart passes as flags.
fn server_inputs(values_file: &Path) -> (Config, EntrySettings) {
    let mut values = yaml(&pod_director_testkit::repo().join("chart/values.yaml"));
    merge(&mut values, &yaml(values_file));
    // The ConfigMap: config verbatim, an empty defaultGroup or guard mode dropped (chart "pod-director.config").
    let mut config = values["config"].clone();
    if let Some(map) = config.as_object_mut()
        && map.get("defaultGroup").is_some_and(|g| g.is_null() || g == "")
    {
        map.remove("defaultGroup");
    }
    if let Some(guard) = config["namespaceGuard"].as_object_mut()
        && guard.get("mode").is_some_and(|m| m.is_null() || m == "")
    {
        guard.remove("mode");
    }
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, config.to_string()).expect("config written");
    let loaded = pod_director_engine::config::load_config(&path, Some(RELEASE_NAMESPACE))
        .unwrap_or_else(|e| panic!("{}: {e}", values_file.display()));
    let webhook = &values["webhook"];
    let settings = EntrySettings {
        webhook_timeout_seconds: webhook["timeoutSeconds"]
            .as_u64()
            .and_then(|t| u8::try_from(t).ok())
            .expect("timeoutSeconds"),
        webhook_failure_policy_enforce: webhook["failurePolicy"]["enforce"]
            .as_str()
            .expect("a policy")
            .to_owned(),
        webhook_failure_policy_unknown_group: webhook["failurePolicy"]["unknownGroup"]
            .as_str()
            .expect("a policy")
            .to_owned(),
    };
    (loaded.config, settings)
}

/// What the chart renders for a value set (every field of the entries pod-director owns
/// but clientConfig, by configuration kind), computed by the server's code.
fn server_entries(values_file: &Path) -> Value {
    let (config, settings) = server_inputs(values_file);
    let mut out = Map::new();
    for kind in [Kind::Mutating, Kind::Validating] {
        out.insert(
            kind.as_str().to_owned(),
            Value::Array(owned_entries(kind, RELEASE, &config, &settings, &Default::default())),
        );
    }
    Value::Object(out)
}

fn golden(case: &Path) -> Value {
    let golden_path = PathBuf::from(case.to_string_lossy().replace(".values.yaml", ".golden.json"));
    serde_json::from_str(
        &std::fs::read_to_string(&golden_path)
            .unwrap_or_else(|e| panic!("{}: {e} (BLESS=1 writes it)", golden_path.display())),
    )
    .expect("golden is JSON")
}

#[test]
fn the_servers_selectors_for_each_value_set_are_the_golden_ones_the_chart_renders() {
    let cases = cases();
    assert!(cases.len() >= 5, "value sets in tests/webhook_selectors: {cases:?}");
    let bless = std::env::var_os("BLESS").is_some();
    for case in cases {
        let golden_path = PathBuf::from(case.to_string_lossy().replace(".values.yaml", ".golden.json"));
        let computed = server_entries(&case);
        if bless {
            let text = serde_json::to_string_pretty(&computed).expect("JSON") + "\n";
            std::fs::write(&golden_path, text).expect("golden written");
            continue;
        }
        assert_eq!(
            computed,
            golden(&case),
            "{}: the server's selectors differ from the golden",
            case.display()
        );
    }
}

#[test]
fn every_golden_keeps_kube_system_and_the_release_namespace_out() {
    for case in cases() {
        let entries = server_entries(&case);
        for entry in entries
            .as_object()
            .into_iter()
            .flat_map(|m| m.values())
            .flat_map(|v| v.as_array().into_iter().flatten())
        {
            let expressions = &entry["namespaceSelector"]["matchExpressions"];
            let excluded = expressions
                .as_array()
                .and_then(|e| {
                    e.iter()
                        .find(|r| r["operator"] == "NotIn" && r["key"] == "kubernetes.io/metadata.name")
                })
                .unwrap_or_else(|| panic!("{}: {} has no exclusion", case.display(), entry["name"]));
            for name in ["kube-system", RELEASE_NAMESPACE] {
                assert!(
                    excluded["values"].as_array().is_some_and(|v| v.contains(&json!(name))),
                    "{}: {} selects {name}",
                    case.display(),
                    entry["name"]
                );
            }
        }
    }
}

#[test]
fn the_servers_webhook_flag_defaults_are_the_charts_default_values() {
    let values = yaml(&pod_director_testkit::repo().join("chart/values.yaml"));
    let defaults = EntrySettings::default();
    assert_eq!(
        json!(defaults.webhook_timeout_seconds),
        values["webhook"]["timeoutSeconds"]
    );
    assert_eq!(
        json!(defaults.webhook_failure_policy_enforce),
        values["webhook"]["failurePolicy"]["enforce"]
    );
    assert_eq!(
        json!(defaults.webhook_failure_policy_unknown_group),
        values["webhook"]["failurePolicy"]["unknownGroup"]
    );
}

/// The `webhooks` list of configuration `kind` as the chart installs it for a value set: the
/// golden's entries (which `scripts/chart-test.sh selectors` holds `helm template` to), each
/// with the clientConfig the chart gives it (the Service, at the entry's path).
fn chart_installed(case: &Path, kind: Kind) -> Vec<Value> {
    let entries = golden(case)[kind.as_str()].as_array().cloned().unwrap_or_default();
    entries
        .into_iter()
        .map(|mut entry| {
            let name = entry["name"].as_str().unwrap_or_default();
            let path = if name == in_tree::entry_name(kind, RELEASE) {
                in_tree::path(kind).to_owned()
            } else if name.contains(".namespace-guard.") {
                "/validate-namespace".to_owned()
            } else if name.starts_with("reservation.") {
                "/validate-reservation".to_owned()
            } else {
                format!("/{}", kind.webhook())
            };
            entry["clientConfig"] =
                json!({"service": {"name": RELEASE, "namespace": RELEASE_NAMESPACE, "path": path, "port": 443}});
            entry
        })
        .collect()
}

#[test]
fn the_reconciler_takes_the_entries_the_chart_installs_as_they_are() {
    for case in cases() {
        let (config, settings) = server_inputs(&case);
        for kind in [Kind::Mutating, Kind::Validating] {
            let live = chart_installed(&case, kind);
            let (operations, changed) = plan_patch(kind, RELEASE, &live, &config, &settings, &Default::default())
                .unwrap_or_else(|e| panic!("{}: {e}", case.display()));
            assert!(
                operations.is_empty() && changed.is_empty(),
                "{} {kind}: the reconciler would patch {changed:?} of the chart's entries: {operations:?}",
                case.display()
            );
        }
    }
}

#[test]
fn the_in_tree_value_sets_start_each_configuration_with_the_in_tree_entry_and_the_others_have_none() {
    let mut with_section = 0;
    for case in cases() {
        let (config, _) = server_inputs(&case);
        let golden = golden(&case);
        for kind in [Kind::Mutating, Kind::Validating] {
            let name = in_tree::entry_name(kind, RELEASE);
            let entries = golden[kind.as_str()].as_array().cloned().unwrap_or_default();
            let positions: Vec<usize> = (0..entries.len())
                .filter(|&i| entries[i]["name"] == name.as_str())
                .collect();
            let want: &[usize] = if config.in_tree_plugins.is_some() { &[0] } else { &[] };
            assert_eq!(positions, want, "{} {kind}: where {name} is", case.display());
        }
        with_section += usize::from(config.in_tree_plugins.is_some());
    }
    assert!(with_section >= 2, "value sets with inTreePlugins: {with_section}");
}
