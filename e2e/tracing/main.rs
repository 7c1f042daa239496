//! pod-director's traces against real receivers: a Jaeger v2 (OTLP in,
//! in-memory storage, HTTP query API) and a real kube-apiserver.
//!
//! `e2e/tracing/run` sets everything up: it starts Jaeger, then a loopback
//! control plane (`e2e/cluster.sh`, own state dir) whose API server exports its
//! own spans to the same Jaeger, and runs this target with
//!
//! | variable | meaning |
//! |---|---|
//! | `KUBECONFIG`, `E2E_STATE_DIR` | the control plane (webhook certificate in `$E2E_STATE_DIR/webhook/`) |
//! | `E2E_JAEGER_QUERY` | Jaeger's query API, e.g. `http://127.0.0.1:16686` |
//! | `E2E_JAEGER_OTLP` | Jaeger's OTLP/gRPC receiver, `host:port` |
//! | `E2E_JAEGER_OTLP_HTTP` | Jaeger's OTLP/HTTP receiver, `host:port` |
//! | `E2E_EXPECT_APISERVER_TRACE` | `true`: the API server's span must be in pod-director's trace |
//! | `E2E_TRACING_WORK` | scratch directory (pod-director's config lives there) |
//!
//! Without `E2E_JAEGER_QUERY` the target starts its own Jaeger (binary from
//! `E2E_JAEGER` or `e2e/tools.sh path jaeger`) on free ports; the API server
//! then traces elsewhere (or not at all) and the shared-trace assertion is
//! skipped with a notice, unless `$E2E_STATE_DIR/tracing.yaml` points at it.
//!
//! Every child process is killed and reaped on drop, also when a test panics.

use std::collections::BTreeMap;
use std::hash::{BuildHasher as _, Hasher as _};
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_pod-director");
/// How long to wait for anything asynchronous (exports, the API server).
const PATIENCE: Duration = Duration::from_secs(45);
/// The namespace label of this target's pod-director: no other installation uses it.
const LABEL: &str = "pod-director-e2e-tracing/group";
/// kube-apiserver's `service.name`.
const APISERVER_SERVICE: &str = "apiserver";
/// pod-director's `service.name` in these tests (`OTEL_SERVICE_NAME`).
const SERVICE: &str = "pod-director";

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Writes past the test harness's output capture (for notices that must be seen).
fn notice(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// A short random hex string.
fn random_hex(len: usize) -> String {
    let mut out = String::new();
    while out.len() < len {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default(),
        );
        out.push_str(&format!("{:016x}", hasher.finish()));
    }
    out.truncate(len);
    out
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on 127.0.0.1")
}

/// Scratch space, under `E2E_TRACING_WORK` when the run script provides it.
fn scratch(prefix: &str) -> tempfile::TempDir {
    let mut builder = tempfile::Builder::new();
    builder.prefix(prefix);
    match env_var("E2E_TRACING_WORK") {
        Some(dir) => builder.tempdir_in(dir),
        None => builder.tempdir(),
    }
    .expect("a scratch directory")
}

// --- child processes -------------------------------------------------------------

/// A child process whose output lines are collected; killed and reaped on drop.
struct Process {
    name: String,
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Process {
    fn spawn(name: &str, command: &mut Command) -> Self {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let lines = Arc::new(Mutex::new(Vec::new()));
        for stream in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let lines = lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if let Ok(mut lines) = lines.lock() {
                        lines.push(line);
                    }
                }
            });
        }
        Self {
            name: name.to_owned(),
            child,
            lines,
        }
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The output so far, for failure messages.
    fn output(&self) -> String {
        format!("--- {} output ---\n{}", self.name, self.lines().join("\n"))
    }

    /// SIGTERM, then wait (at most `PATIENCE`) for the exit status.
    fn terminate(&mut self) -> ExitStatus {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -TERM {} failed", self.child.id());
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().expect("waitpid") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "{} ignored SIGTERM\n{}",
                self.name,
                self.output()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

// --- Jaeger ------------------------------------------------------------------------

struct Jaeger {
    query: String,
    otlp_grpc: String,
    otlp_http: String,
    http: reqwest::Client,
    _process: Option<(Process, tempfile::TempDir)>,
}

impl Jaeger {
    /// The Jaeger of the run script, or one started here.
    async fn connect() -> Self {
        let http = reqwest::Client::new();
        if let Some(query) = env_var("E2E_JAEGER_QUERY") {
            let otlp_grpc = env_var("E2E_JAEGER_OTLP").expect("E2E_JAEGER_OTLP (host:port) goes with E2E_JAEGER_QUERY");
            let otlp_http =
                env_var("E2E_JAEGER_OTLP_HTTP").expect("E2E_JAEGER_OTLP_HTTP (host:port) goes with E2E_JAEGER_QUERY");
            let jaeger = Self {
                query: query.trim_end_matches('/').to_owned(),
                otlp_grpc,
                otlp_http,
                http,
                _process: None,
            };
            jaeger.wait_ready(None).await;
            return jaeger;
        }
        let binary = env_var("E2E_JAEGER").unwrap_or_else(|| {
            let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/tools.sh");
            let out = Command::new(&tools)
                .args(["path", "jaeger"])
                .stderr(Stdio::inherit())
                .output()
                .unwrap_or_else(|e| panic!("cannot run {}: {e}", tools.display()));
            assert!(out.status.success(), "{} path jaeger failed", tools.display());
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        });
        let dir = scratch("jaeger-");
        let (query, grpc, http_port, query_grpc) = (free_port(), free_port(), free_port(), free_port());
        let config = dir.path().join("jaeger.yaml");
        std::fs::write(&config, jaeger_config(query, query_grpc, grpc, http_port)).expect("jaeger config written");
        let process = Process::spawn(
            "jaeger",
            Command::new(&binary)
                .arg("--config")
                .arg(format!("file:{}", config.display())),
        );
        let jaeger = Self {
            query: format!("http://127.0.0.1:{query}"),
            otlp_grpc: format!("127.0.0.1:{grpc}"),
            otlp_http: format!("127.0.0.1:{http_port}"),
            http,
            _process: Some((process, dir)),
        };
        jaeger.wait_ready(jaeger._process.as_ref().map(|(p, _)| p)).await;
        jaeger
    }

    async fn wait_ready(&self, process: Option<&Process>) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let url = format!("{}/api/services", self.query);
            if let Ok(response) = self.http.get(&url).send().await
                && response.status().is_success()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "Jaeger's query API {url} does not answer\n{}",
                process.map(Process::output).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// `GET /api/traces/{id}`: the trace, once Jaeger has it.
    async fn trace(&self, trace_id: &str) -> Option<Value> {
        let response = self
            .http
            .get(format!("{}/api/traces/{trace_id}", self.query))
            .send()
            .await
            .ok()?;
        if !response.status().is_success() {
            return None;
        }
        let body: Value = response.json().await.ok()?;
        body["data"].as_array()?.first().cloned()
    }

    /// `GET /api/traces?service=…&tags=…`: traces with a span carrying all `tags`.
    async fn search(&self, service: &str, tags: &Value) -> Vec<Value> {
        let Ok(response) = self
            .http
            .get(format!("{}/api/traces", self.query))
            .query(&[
                ("service", service),
                ("tags", &tags.to_string()),
                ("lookback", "1h"),
                ("limit", "20"),
            ])
            .send()
            .await
        else {
            return Vec::new();
        };
        let body: Value = response.json().await.unwrap_or_default();
        body["data"].as_array().cloned().unwrap_or_default()
    }

    /// Waits until `done(trace)` holds for the trace `trace_id`, and returns it.
    async fn wait_for_trace(&self, trace_id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + PATIENCE;
        let mut last = None;
        loop {
            if let Some(trace) = self.trace(trace_id).await {
                if done(&trace) {
                    return trace;
                }
                last = Some(trace);
            }
            assert!(
                Instant::now() < deadline,
                "Jaeger never showed {what} in trace {trace_id}; last seen: {}",
                last.map(|t| serde_json::to_string_pretty(&t).unwrap_or_default())
                    .unwrap_or_else(|| "no such trace".to_owned())
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// A Jaeger v2 configuration: OTLP in, memory storage, query API; loopback only.
fn jaeger_config(query: u16, query_grpc: u16, otlp_grpc: u16, otlp_http: u16) -> String {
    format!(
        "service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: memory
    http:
      endpoint: 127.0.0.1:{query}
    grpc:
      endpoint: 127.0.0.1:{query_grpc}
  jaeger_storage:
    backends:
      memory:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{otlp_grpc}
      http:
        endpoint: 127.0.0.1:{otlp_http}
processors:
  batch:
    timeout: 200ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memory
"
    )
}

/// The spans of a Jaeger trace with their process's service name.
fn spans(trace: &Value) -> Vec<(String, &Value)> {
    trace["spans"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|span| {
            let process = span["processID"].as_str().unwrap_or_default();
            let service = trace["processes"][process]["serviceName"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            (service, span)
        })
        .collect()
}

/// A span's tags as `key → {type, value}`.
fn tags(span: &Value) -> BTreeMap<String, (String, Value)> {
    span["tags"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| {
            Some((
                t["key"].as_str()?.to_owned(),
                (t["type"].as_str().unwrap_or_default().to_owned(), t["value"].clone()),
            ))
        })
        .collect()
}

fn tag<'a>(tags: &'a BTreeMap<String, (String, Value)>, key: &str) -> &'a Value {
    tags.get(key)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("the span has no tag {key}; tags: {tags:?}"))
}

/// pod-director's decision span for `request_name` in a trace.
fn decision_span<'a>(trace: &'a Value, request_name: &str) -> Option<&'a Value> {
    spans(trace).into_iter().find_map(|(service, span)| {
        (service == SERVICE && tags(span).get("admission.request.name").map(|(_, v)| v) == Some(&json!(request_name)))
            .then_some(span)
    })
}

// --- pod-director ------------------------------------------------------------------

struct Settings {
    state_dir: PathBuf,
}

impl Settings {
    fn from_env() -> Self {
        assert!(
            env_var("KUBECONFIG").is_some(),
            "KUBECONFIG is not set: run e2e/tracing/run, or start a cluster (e2e/cluster.sh start) and \
             eval \"$(e2e/cluster.sh env)\""
        );
        let state_dir = PathBuf::from(env_var("E2E_STATE_DIR").expect("E2E_STATE_DIR (an e2e/cluster.sh state dir)"));
        assert!(
            state_dir.join("webhook/tls.crt").is_file(),
            "{} has no webhook/tls.crt: is it an e2e/cluster.sh state dir?",
            state_dir.display()
        );
        Self { state_dir }
    }

    fn webhook_file(&self, name: &str) -> PathBuf {
        self.state_dir.join("webhook").join(name)
    }

    fn ca_bundle(&self) -> Vec<u8> {
        std::fs::read(self.webhook_file("ca.crt")).expect("the webhook CA")
    }

    /// Whether the cluster's API server exports its spans to `otlp_grpc`.
    fn apiserver_traces_to(&self, otlp_grpc: &str) -> bool {
        std::fs::read_to_string(self.state_dir.join("tracing.yaml"))
            .map(|text| {
                text.lines()
                    .filter_map(|l| l.trim().strip_prefix("endpoint:"))
                    .any(|endpoint| endpoint.trim() == otlp_grpc)
            })
            .unwrap_or(false)
    }
}

struct PodDirector {
    process: Process,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl PodDirector {
    async fn start(settings: &Settings, config: &str, otel: &[(&str, String)]) -> Self {
        let dir = scratch("pod-director-");
        let config_path = dir.path().join("config.yaml");
        std::fs::write(&config_path, config).expect("config written");
        let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let probe: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let mut command = Command::new(BINARY);
        command
            .arg("serve")
            .arg("--config")
            .arg(&config_path)
            .arg("--addr")
            .arg(addr.to_string())
            .arg("--probe-addr")
            .arg(probe.to_string())
            .arg("--tls-cert")
            .arg(settings.webhook_file("tls.crt"))
            .arg("--tls-key")
            .arg(settings.webhook_file("tls.key"))
            .arg("--log-format")
            .arg("json")
            .env("RUST_LOG", "info")
            .env("OTEL_SERVICE_NAME", SERVICE)
            .env("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=e2e-tracing")
            .env_remove("OTEL_TRACES_SAMPLER")
            .env_remove("OTEL_SDK_DISABLED")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
        for (name, value) in otel {
            command.env(name, value);
        }
        let process = Process::spawn("pod-director", &mut command);
        let pod_director = Self {
            process,
            addr,
            _dir: dir,
        };
        // Ready = the namespace cache has synced.
        let deadline = Instant::now() + PATIENCE;
        let client = reqwest::Client::new();
        loop {
            if let Ok(response) = client.get(format!("http://{probe}/readyz")).send().await
                && response.status().is_success()
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "pod-director never became ready\n{}",
                pod_director.process.output()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        pod_director
    }

    /// The decision log lines so far.
    fn decisions(&self) -> Vec<Value> {
        self.process
            .lines()
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|l| l["target"] == "pod_director::decision")
            .collect()
    }

    fn decision(&self, matches: impl Fn(&Value) -> bool) -> Option<Value> {
        self.decisions().into_iter().find(|l| matches(l))
    }
}

fn otlp_grpc_env(jaeger: &Jaeger) -> Vec<(&'static str, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{}", jaeger.otlp_grpc)),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".to_owned()),
        ("OTEL_BSP_SCHEDULE_DELAY", "200".to_owned()),
    ]
}

/// The group config of these tests: one dryRun group.
fn config(default_group: bool) -> String {
    format!(
        "namespaceLabel: {LABEL}
{}groups:
  traced:
    mode: dryRun
    nodeSelector: {{node-pool: traced, kubernetes.io/os: linux}}
    tolerations:
      - {{key: dedicated, operator: Equal, value: traced, effect: NoSchedule}}
",
        if default_group { "defaultGroup: traced\n" } else { "" }
    )
}

/// The patch any plain pod gets from the `traced` group: nodeSelector added, toleration added.
fn assert_traced_patch(patch: &Value) {
    let ops = patch
        .as_array()
        .unwrap_or_else(|| panic!("the patch is not an array: {patch}"));
    assert!(
        ops.iter().any(|op| op["op"] == "add"
            && op["path"] == "/spec/nodeSelector"
            && op["value"] == json!({"node-pool": "traced", "kubernetes.io/os": "linux"})),
        "no nodeSelector op in {patch}"
    );
    assert!(
        ops.iter().any(|op| op["op"] == "add"
            && op["path"].as_str().is_some_and(|p| p.starts_with("/spec/tolerations"))
            && op["value"].to_string().contains("\"dedicated\"")),
        "no toleration op in {patch}"
    );
}

// --- Kubernetes objects -----------------------------------------------------------

/// Deletes what a test created, also when it panics.
struct Cleanup {
    webhook: Option<String>,
    namespace: Option<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let (webhook, namespace) = (self.webhook.take(), self.namespace.take());
        if webhook.is_none() && namespace.is_none() {
            return;
        }
        // Drop cannot await: delete from a thread with its own runtime.
        let _ = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                return;
            };
            runtime.block_on(async {
                let Ok(client) = Client::try_default().await else {
                    return;
                };
                if let Some(name) = webhook {
                    let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
                    let _ = api.delete(&name, &DeleteParams::default()).await;
                }
                if let Some(name) = namespace {
                    let api: Api<Namespace> = Api::all(client);
                    let _ = api.delete(&name, &DeleteParams::default()).await;
                }
            });
        })
        .join();
    }
}

async fn register_webhook(client: &Client, name: &str, pod_director: &PodDirector, settings: &Settings) {
    use base64::Engine as _;
    let webhook: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "pod-director-e2e-tracing"}},
        "webhooks": [{
            "name": "mutate.tracing.e2e.pod-director.io",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Ignore",
            "timeoutSeconds": 5,
            "reinvocationPolicy": "Never",
            "clientConfig": {
                "url": format!("https://{}/mutate", pod_director.addr),
                "caBundle": base64::engine::general_purpose::STANDARD.encode(settings.ca_bundle()),
            },
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"], "scope": "Namespaced"}],
            "namespaceSelector": {"matchLabels": {LABEL: "traced"}},
        }]
    }))
    .expect("a valid MutatingWebhookConfiguration");
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &webhook)
        .await
        .expect("the MutatingWebhookConfiguration is created");
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "traced"}},
        "spec": {"containers": [{"name": "app", "image": "registry.example.com/app:1.0"}]}
    }))
    .expect("a valid pod")
}

// --- the tests -------------------------------------------------------------------

/// A pod created through the API server: pod-director's dryRun decision span
/// arrives in Jaeger over OTLP/gRPC with the decision's attributes and the
/// would-be patch (the same as in its log line), as a child of the API
/// server's span in one trace.
#[tokio::test]
async fn a_dry_run_decision_span_arrives_in_jaeger_inside_the_api_servers_trace() {
    let settings = Settings::from_env();
    let jaeger = Jaeger::connect().await;
    let expect_apiserver = env_var("E2E_EXPECT_APISERVER_TRACE").is_some_and(|v| v == "true");
    let apiserver_here = settings.apiserver_traces_to(&jaeger.otlp_grpc);
    assert!(
        apiserver_here || !expect_apiserver,
        "E2E_EXPECT_APISERVER_TRACE=true but {}/tracing.yaml does not send the API server's spans to {}",
        settings.state_dir.display(),
        jaeger.otlp_grpc
    );
    let pod_director = PodDirector::start(&settings, &config(false), &otlp_grpc_env(&jaeger)).await;
    let client = Client::try_default()
        .await
        .expect("a Kubernetes client from KUBECONFIG");
    let suffix = random_hex(6);
    let namespace = format!("tracing-e2e-{suffix}");
    let webhook_name = format!("pod-director-e2e-tracing-{suffix}");
    let _cleanup = Cleanup {
        webhook: Some(webhook_name.clone()),
        namespace: Some(namespace.clone()),
    };
    register_webhook(&client, &webhook_name, &pod_director, &settings).await;
    let ns: Namespace = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": namespace, "labels": {LABEL: "traced"}}
    }))
    .expect("a valid namespace");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("the namespace is created");
    // Pods need the namespace's default ServiceAccount (ServiceAccount admission).
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
    let deadline = Instant::now() + PATIENCE;
    while accounts.get_opt("default").await.ok().flatten().is_none() {
        assert!(Instant::now() < deadline, "no default ServiceAccount in {namespace}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The API server picks new webhook configurations up asynchronously: probe
    // with server-side dry runs until pod-director sees one.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let deadline = Instant::now() + PATIENCE;
    let probe = loop {
        pods.create(&dry_run, &pod("probe"))
            .await
            .expect("a dry-run pod create");
        if let Some(line) = pod_director.decision(|l| l["admission.request.namespace"] == namespace.as_str()) {
            break line;
        }
        assert!(
            Instant::now() < deadline,
            "the API server never called pod-director\n{}",
            pod_director.process.output()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(
        probe["admission.request.dryrun"], true,
        "kubectl --dry-run=server is labelled: {probe}"
    );

    pods.create(&PostParams::default(), &pod("traced-pod"))
        .await
        .expect("the pod is created");
    let line = pod_director
        .decision(|l| l["admission.request.name"] == "traced-pod")
        .unwrap_or_else(|| panic!("no decision line for traced-pod\n{}", pod_director.process.output()));
    assert_eq!(line["placement.decision"], "would_patch", "{line}");
    let trace_id = line["trace_id"]
        .as_str()
        .expect("the log line has a trace_id")
        .to_owned();
    let span_id = line["span_id"].as_str().expect("the log line has a span_id").to_owned();

    // The span, as Jaeger returns it.
    let trace = jaeger
        .wait_for_trace(&trace_id, "pod-director's decision span", |t| {
            decision_span(t, "traced-pod").is_some()
        })
        .await;
    let span = decision_span(&trace, "traced-pod").expect("found above");
    notice(&format!(
        "pod-director decision span as Jaeger returned it:\n{}\nits log line:\n{line}",
        serde_json::to_string_pretty(span).unwrap_or_default()
    ));
    assert_eq!(span["traceID"], trace_id.as_str());
    assert_eq!(span["spanID"], span_id.as_str(), "the log line names the span");
    assert_eq!(span["operationName"], "POST /mutate");
    let span_tags = tags(span);
    for (key, expected) in [
        ("span.kind", json!("server")),
        ("webhook", json!("mutate")),
        ("placement.group", json!("traced")),
        ("placement.mode", json!("dryRun")),
        ("placement.decision", json!("would_patch")),
        ("admission.request.operation", json!("CREATE")),
        ("admission.request.namespace", json!(namespace)),
        ("admission.request.name", json!("traced-pod")),
        ("admission.request.dryrun", json!(false)),
    ] {
        assert_eq!(tag(&span_tags, key), &expected, "tag {key}");
    }
    for key in [
        "admission.request.uid",
        "config.revision",
        "placement.summary",
        "placement.patch.paths",
        "latency_ms",
    ] {
        assert_eq!(
            tag(&span_tags, key),
            &line[key].clone().to_string_if_json(key),
            "tag {key} = log field {key}"
        );
    }
    assert_eq!(
        span_tags["placement.patch.op_count"].0, "int64",
        "op_count is a number on the span"
    );
    assert_eq!(
        tag(&span_tags, "placement.patch.op_count"),
        &line["placement.patch.op_count"]
    );
    // The Node cache's counts: numbers on the span as in the log line (this cluster has no node).
    for key in ["placement.feasible_nodes", "placement.feasible_nodes_before"] {
        assert_eq!(
            span_tags.get(key).map(|t| t.0.as_str()),
            Some("int64"),
            "{key} is a number on the span"
        );
        assert_eq!(tag(&span_tags, key), &line[key], "tag {key} = log field {key}");
    }
    assert_eq!(line["placement.feasible_nodes"], json!(0), "{line}");
    assert_eq!(tag(&span_tags, "placement.no_feasible_node"), &json!(true));
    let patch: Value = serde_json::from_str(tag(&span_tags, "placement.patch.json").as_str().unwrap_or_default())
        .expect("the span's patch is whole JSON (it is small)");
    assert_traced_patch(&patch);
    assert_eq!(
        patch, line["placement.patch.json"],
        "the span's patch is the log line's"
    );
    let process = &trace["processes"][span["processID"].as_str().unwrap_or_default()];
    let resource = tags(process);
    assert_eq!(
        tag(&resource, "deployment.environment"),
        "e2e-tracing",
        "OTEL_RESOURCE_ATTRIBUTES"
    );
    assert!(resource.contains_key("service.version"), "{resource:?}");

    // The search API finds it by attribute too.
    let found = jaeger
        .search(
            SERVICE,
            &json!({"admission.request.name": "traced-pod", "admission.request.namespace": namespace}),
        )
        .await;
    assert!(
        found.iter().any(|t| t["traceID"] == trace_id.as_str()),
        "/api/traces?service={SERVICE}&tags=… does not find trace {trace_id}"
    );

    if !apiserver_here {
        notice(&format!(
            "NOTICE: the API server does not export its spans to {} (see e2e/tracing/run): \
             the shared-trace assertion is skipped",
            jaeger.otlp_grpc
        ));
        return;
    }
    // One trace: the API server's spans and pod-director's, pod-director's parent being the API server's.
    let parent = span["references"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["refType"] == "CHILD_OF"))
        .and_then(|r| r["spanID"].as_str())
        .unwrap_or_else(|| panic!("pod-director's span has no parent: {span}"))
        .to_owned();
    let trace = jaeger
        .wait_for_trace(&trace_id, "the API server's spans", |t| {
            spans(t)
                .iter()
                .any(|(service, s)| service == APISERVER_SERVICE && s["spanID"] == parent.as_str())
        })
        .await;
    let apiserver_spans: Vec<String> = spans(&trace)
        .into_iter()
        .filter(|(service, _)| service == APISERVER_SERVICE)
        .map(|(_, s)| s["operationName"].as_str().unwrap_or_default().to_owned())
        .collect();
    let parent_name = spans(&trace)
        .into_iter()
        .find(|(_, s)| s["spanID"] == parent.as_str())
        .and_then(|(_, s)| s["operationName"].as_str().map(str::to_owned))
        .unwrap_or_default();
    notice(&format!(
        "trace {trace_id}: API server spans {apiserver_spans:?}; pod-director's {:?} is a child of the API \
         server's {parent_name:?} ({parent})",
        span["operationName"]
    ));
    assert!(spans(&trace).iter().all(|(_, s)| s["traceID"] == trace_id.as_str()));
}

/// A span's tag value as the log line holds it: JSON fields are strings on spans.
trait AsTag {
    fn to_string_if_json(self, key: &str) -> Value;
}

impl AsTag for Value {
    fn to_string_if_json(self, key: &str) -> Value {
        if pod_director::telemetry::JSON_FIELDS.contains(&key) {
            Value::String(self.to_string())
        } else {
            self
        }
    }
}

/// Over OTLP/HTTP, with an export delay far beyond the test: the span of a
/// request that joined an *unsampled* caller trace reaches Jaeger only because
/// SIGTERM flushes the exporter before pod-director exits.
#[tokio::test]
async fn sigterm_flushes_a_decision_span_of_an_unsampled_trace_over_otlp_http() {
    let settings = Settings::from_env();
    let jaeger = Jaeger::connect().await;
    let mut pod_director = PodDirector::start(
        &settings,
        &config(true),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{}", jaeger.otlp_http)),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf".to_owned()),
            ("OTEL_BSP_SCHEDULE_DELAY", "600000".to_owned()),
        ],
    )
    .await;
    let trace_id = random_hex(32);
    let parent = random_hex(16);
    let uid = format!("e2e-tracing-{}", random_hex(8));
    let review = json!({
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "e2e"},
            "object": {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"generateName": "flushed-", "namespace": "default"},
                "spec": {"containers": [{"name": "app", "image": "registry.example.com/app:1.0"}]}
            },
            "dryRun": false
        }
    });
    let ca = reqwest::Certificate::from_pem(&settings.ca_bundle()).expect("the webhook CA is PEM");
    let https = reqwest::Client::builder()
        .add_root_certificate(ca)
        .build()
        .expect("an HTTPS client");
    let response = https
        .post(format!("https://{}/mutate", pod_director.addr))
        .header("traceparent", format!("00-{trace_id}-{parent}-00"))
        .json(&review)
        .send()
        .await
        .expect("pod-director answers");
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    let answer: Value = response.json().await.expect("an AdmissionReview");
    assert_eq!(answer["response"]["allowed"], true);
    assert!(
        answer["response"].get("patch").is_none(),
        "dryRun does not patch: {answer}"
    );

    let status = pod_director.process.terminate();
    assert!(
        status.success(),
        "pod-director exits cleanly on SIGTERM: {status}\n{}",
        pod_director.process.output()
    );
    let line = pod_director
        .decision(|l| l["admission.request.uid"] == uid.as_str())
        .unwrap_or_else(|| panic!("no decision line\n{}", pod_director.process.output()));
    assert_eq!(
        line["trace_id"],
        trace_id.as_str(),
        "the log line is in the caller's trace"
    );

    let trace = jaeger
        .wait_for_trace(&trace_id, "the flushed decision span", |t| {
            spans(t).iter().any(|(service, _)| service == SERVICE)
        })
        .await;
    let (_, span) = spans(&trace)
        .into_iter()
        .find(|(service, _)| service == SERVICE)
        .expect("found above");
    let span_tags = tags(span);
    assert_eq!(tag(&span_tags, "admission.request.uid"), &json!(uid));
    assert_eq!(tag(&span_tags, "placement.decision"), "would_patch");
    assert_eq!(tag(&span_tags, "placement.group"), "traced");
    assert_eq!(
        span["references"][0]["spanID"],
        parent.as_str(),
        "the unsampled caller span is the parent"
    );
    assert_traced_patch(
        &serde_json::from_str(tag(&span_tags, "placement.patch.json").as_str().unwrap_or_default())
            .expect("JSON patch"),
    );
}
