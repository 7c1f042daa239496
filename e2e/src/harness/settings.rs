//! What the suite runs against: where pod-director runs ([`Target`]), the suite's settings from
//! its environment ([`Settings`]), the tools, and the small builders scenarios share (pool nodes,
//! a unique suffix, the suite's configuration).

use super::*;

/// Where pod-director runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Spawned by the suite on loopback (e2e/cluster.sh).
    Local,
    /// Installed by the chart (kind in CI).
    Cluster,
}

/// The suite's settings, from the environment.
#[derive(Debug, Clone)]
pub struct Settings {
    pub repo: PathBuf,
    pub target: Target,
    /// Local mode: the e2e/cluster.sh state dir (webhook certificate, logs).
    pub state_dir: Option<PathBuf>,
    /// Helm release name and namespace of pod-director.
    pub release: String,
    pub namespace: String,
    /// The chart's full name: the webhook configurations' names.
    pub fullname: String,
    /// Where in-process test webhooks listen and how the API server reaches them.
    pub stub_host: Option<IpAddr>,
}

/// The checkout: the workspace root.
pub use pod_director_testkit::repo;

/// The variable `name`, unless it is unset or blank.
pub fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// A third-party tool: `$VARIABLE`, else the binary `e2e/tools.sh path TOOL` builds (cached).
pub fn tool(variable: &str, tool: &str) -> PathBuf {
    if let Some(path) = env_var(variable) {
        return PathBuf::from(path);
    }
    let tools = repo().join("e2e/tools.sh");
    let output = std::process::Command::new(&tools)
        .args(["path", tool])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", tools.display()));
    assert!(
        output.status.success(),
        "e2e/tools.sh path {tool} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
}

impl Settings {
    pub fn from_env() -> Self {
        let repo = repo().to_path_buf();
        let mode = env_var("E2E_MODE")
            .or_else(|| env_var("E2E_WEBHOOK_MODE").map(|m| if m == "chart" { "cluster".to_owned() } else { m }))
            .unwrap_or_else(|| "local".to_owned());
        let target = match mode.as_str() {
            "local" => Target::Local,
            "cluster" => Target::Cluster,
            other => panic!("E2E_MODE={other:?}: expected local (the default) or cluster"),
        };
        let stub_host = |default: Option<IpAddr>| {
            env_var("E2E_STUB_HOST")
                .map(|h| {
                    h.parse()
                        .unwrap_or_else(|e| panic!("E2E_STUB_HOST={h:?} is not an IP address: {e}"))
                })
                .or(default)
        };
        match target {
            Target::Local => {
                assert!(
                    env_var("KUBECONFIG").is_some(),
                    "KUBECONFIG is not set: run the suite with e2e/run, or start a cluster with \
                     `e2e/cluster.sh start` and `eval \"$(e2e/cluster.sh env)\"`"
                );
                let state_dir = env_var("E2E_STATE_DIR")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| panic!("E2E_STATE_DIR is not set: `eval \"$(e2e/cluster.sh env)\"` exports it"));
                assert!(
                    state_dir.join("webhook/tls.crt").is_file(),
                    "{} has no webhook/tls.crt: is it an e2e/cluster.sh state dir?",
                    state_dir.display()
                );
                Self {
                    repo,
                    target,
                    state_dir: Some(state_dir),
                    release: "e2e".to_owned(),
                    namespace: "pod-director-e2e".to_owned(),
                    fullname: "e2e-pod-director".to_owned(),
                    stub_host: stub_host(Some(IpAddr::from([127, 0, 0, 1]))),
                }
            }
            Target::Cluster => {
                let release = env_var("E2E_RELEASE").unwrap_or_else(|| "pod-director".to_owned());
                // The chart's "pod-director.fullname" without overrides.
                let fullname = env_var("E2E_FULLNAME").unwrap_or_else(|| {
                    if release.contains("pod-director") {
                        release.clone()
                    } else {
                        format!("{release}-pod-director")
                    }
                });
                Self {
                    repo,
                    target,
                    state_dir: None,
                    namespace: env_var("E2E_NAMESPACE").unwrap_or_else(|| "pod-director".to_owned()),
                    release,
                    fullname,
                    stub_host: stub_host(None),
                }
            }
        }
    }

    /// The chart values the suite runs with: `e2e/scenarios/values.yaml`, or `$E2E_VALUES_FILE`
    /// (the scale simulation's, `e2e/scale/values.yaml`).
    pub fn values_file(&self) -> PathBuf {
        env_var("E2E_VALUES_FILE").map_or_else(|| self.repo.join("e2e/scenarios/values.yaml"), PathBuf::from)
    }
}

/// Writes a line to the real standard error, past the test harness's capture:
/// for skip notices, which must be seen even when the scenario passes.
pub fn notice(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// A short random suffix for object names.
pub fn suffix() -> String {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    format!("{:06x}", hasher.finish() & 0xff_ffff)
}

/// A Node of the suite's blue pool (`e2e/scenarios/values.yaml`): its labels and
/// the taint its groups tolerate, and the labels the scenarios' workload pod asks
/// for (`fixtures::workload`). [`Env::create_node`] makes it a kwok node: Ready, and
/// the pods bound to it run.
pub fn pool_node(name: &str) -> Node {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": pool_labels("blue")},
        "spec": {"taints": [{"key": "e2e.pod-director.io/dedicated", "value": "blue", "effect": "NoSchedule"}]},
    }))
    .expect("a Node")
}

/// The labels of a [`pool_node`] of pool `pool`.
pub fn pool_labels(pool: &str) -> Value {
    json!({
        "e2e.pod-director.io/pool": pool,
        "kubernetes.io/os": "linux",
        "topology.kubernetes.io/zone": "zone-a",
        "e2e.pod-director.io/team": "web",
        "e2e.pod-director.io/arch": "amd64",
    })
}

/// The suite's pod-director configuration: `config` of `e2e/scenarios/values.yaml`.
pub fn suite_config(values_file: &Path) -> Config {
    let text =
        std::fs::read_to_string(values_file).unwrap_or_else(|e| panic!("cannot read {}: {e}", values_file.display()));
    let values: Value = serde_saphyr::from_str(&text).expect("e2e/scenarios/values.yaml is YAML");
    let mut config = values.get("config").cloned().expect("values.yaml has a config section");
    // The chart drops an empty defaultGroup (= none).
    if let Some(map) = config.as_object_mut()
        && map.get("defaultGroup").is_some_and(|g| g.is_null() || g == "")
    {
        map.remove("defaultGroup");
    }
    Config::from_yaml(&config.to_string(), "e2e/scenarios/values.yaml", Vec::new())
        .expect("the suite's config is valid")
        .config
}
