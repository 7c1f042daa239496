//! The e2e harness: one [`Env`] per scenario.
//!
//! **Local mode** (the default; `e2e/run` sets it up): a loopback control plane
//! from `e2e/cluster.sh` is running, `KUBECONFIG` and `E2E_STATE_DIR` point at it.
//! [`Env::start`] renders the chart with `e2e/scenarios/values.yaml` (`helm
//! template`, `webhook.url` = the loopback address of a pod-director it spawns from
//! this checkout), runs pod-director with the ConfigMap's `config.yaml` and the
//! webhook certificate of the state dir (both in kubelet-style `..data`
//! directories, so they can be swapped), applies the chart's two webhook
//! configurations, and waits until the API server calls the new process.
//!
//! **Cluster mode** (`E2E_MODE=cluster`, e.g. kind in CI): pod-director is already
//! installed by the chart with `-f e2e/scenarios/values.yaml` (release
//! `E2E_RELEASE`, namespace `E2E_NAMESPACE`); decisions are read from its pods'
//! logs. Scenarios that need to control the process (stop it, rotate its
//! certificate, edit its config file, slow its API connection) print why they
//! are skipped and pass.
//!
//! Webhook configurations are cluster-wide, so scenarios run one at a time: each
//! [`Env`] holds a global lock until it is dropped. Dropping an `Env` kills the
//! pod-director it started and deletes the namespaces and webhook configurations
//! it created, also when the scenario panicked.

pub mod certs;
pub mod chart;
pub mod container;
pub mod identity;
pub mod jaeger;
pub mod k8s;
pub mod logs;
pub mod oci;
pub mod plugins;
pub mod process;
pub mod prometheus;
pub mod proxy;
mod rng;
pub mod scheduling;
mod settings;
pub mod stub;
pub mod supply_chain;

use std::collections::BTreeMap;
use std::hash::{BuildHasher as _, Hasher as _};
use std::io::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, ServiceAccount};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource as _};
use pod_director_engine::config::Config;
use serde_json::{Value, json};

pub use self::k8s::{Created, pod};
pub use self::logs::{Decision, LogSource};
use self::process::{PodDirector, Spawn};
use self::proxy::DelayProxy;
pub use self::rng::Rng;
pub use self::settings::*;

/// Scenarios run one at a time (webhook configurations are cluster-wide).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Field manager of everything the suite applies.
pub const FIELD_MANAGER: &str = "pod-director-e2e";
/// How long to wait for things the API server or pod-director do asynchronously.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// How a scenario wants pod-director started (local mode).
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Latency added to pod-director's connection to the API server (both ways).
    pub api_latency: Option<Duration>,
    /// Extra environment of the pod-director process, e.g. its `OTEL_*` exporter settings.
    pub env: Vec<(String, String)>,
    /// `serve --audit-interval` (the continuous audit); `None`: off (`0`).
    pub audit_interval: Option<Duration>,
    /// Run pod-director as the chart's ServiceAccount, authorized by the chart's RBAC rendered with these
    /// `--set`s (local mode; see [`identity`]); `None`: with the suite's kubeconfig user.
    pub chart_rbac: Option<Vec<String>>,
}

/// Webhook configurations and namespaces to delete when the scenario ends.
#[derive(Default)]
struct Cleanup {
    namespaces: Vec<String>,
    mutating: Vec<String>,
    validating: Vec<String>,
    nodes: Vec<String>,
    /// The admission policies pod-director applied (`--admission-policies`): its objects outlive it.
    admission_policies: bool,
    /// The chart's ClusterRole and ClusterRoleBinding applied for pod-director's identity (their name).
    chart_rbac: Option<String>,
}

/// One scenario's world: a client, pod-director's decisions, what to clean up.
pub struct Env {
    pub client: Client,
    pub settings: Settings,
    /// The configuration pod-director runs with.
    pub config: Config,
    pub logs: LogSource,
    /// Short scenario name, used in object names.
    pub scenario: String,
    pod_director: Option<PodDirector>,
    /// The log of a pod-director the scenario runs itself ([`Env::start_external`]).
    external_log: Option<PathBuf>,
    proxy: Option<DelayProxy>,
    created: Mutex<Cleanup>,
    // Last: released after Drop::drop has cleaned up.
    _serial: tokio::sync::MutexGuard<'static, ()>,
}

impl Env {
    /// Sets up a scenario in either mode.
    pub async fn start(scenario: &str) -> Env {
        Self::start_with(scenario, Options::default()).await
    }

    /// Sets up a scenario that needs the local pod-director process; in cluster
    /// mode prints why it is skipped and returns `None`.
    pub async fn start_local(scenario: &str, why: &str) -> Option<Env> {
        let settings = Settings::from_env();
        if settings.target == Target::Cluster {
            notice(&format!("SKIPPED {scenario} in cluster mode: {why}"));
            return None;
        }
        Some(Self::start(scenario).await)
    }

    /// Sets up a scenario that runs a webhook of its own in the test process; skipped
    /// (returns `None`) when the API server cannot reach it (`E2E_STUB_HOST` unset in cluster mode).
    pub async fn start_with_stub(scenario: &str) -> Option<Env> {
        let settings = Settings::from_env();
        if settings.stub_host.is_none() {
            notice(&format!(
                "SKIPPED {scenario}: the scenario runs its own webhook in the test process; set \
                 E2E_STUB_HOST to an address of this machine that the API server can reach (kind: \
                 the docker network gateway, e.g. 172.18.0.1)"
            ));
            return None;
        }
        Some(Self::start(scenario).await)
    }

    pub async fn start_with(scenario: &str, options: Options) -> Env {
        let serial = SERIAL.lock().await;
        let settings = Settings::from_env();
        let client = Client::try_default()
            .await
            .expect("a Kubernetes client from KUBECONFIG");
        let suite = suite_config(&settings.values_file());
        let (logs, pod_director, proxy, created) = match settings.target {
            Target::Local => {
                let chart_rbac = options.chart_rbac.is_some().then(|| settings.fullname.clone());
                let (pod_director, proxy) =
                    Self::start_local_process(scenario, &settings, &client, &suite, options).await;
                let created = Cleanup {
                    mutating: vec![settings.fullname.clone()],
                    validating: vec![settings.fullname.clone()],
                    chart_rbac,
                    ..Cleanup::default()
                };
                (
                    LogSource::Local(pod_director.lines.clone()),
                    Some(pod_director),
                    proxy,
                    created,
                )
            }
            Target::Cluster => {
                let logs = Self::attach_to_cluster(&settings, &client, &suite).await;
                (logs, None, None, Cleanup::default())
            }
        };
        let env = Env {
            logs,
            client,
            settings,
            config: suite,
            scenario: scenario.to_owned(),
            pod_director,
            external_log: None,
            proxy,
            created: Mutex::new(created),
            _serial: serial,
        };
        // A node of the suite's blue pool, so that its groups' pods have somewhere to go
        // (0 feasible nodes would add a warning to every warn/enforce decision).
        env.create_node(&pool_node(&format!("e2e-blue-{scenario}-{}", suffix())))
            .await;
        env.wait_until_serving().await;
        env
    }

    /// Sets up a scenario around a pod-director the scenario started itself (local mode; the image
    /// suite runs it in a container): applies the chart's webhook configurations `rendered`, which
    /// call it, creates the scenario's blue node and waits until the API server calls it.
    pub async fn start_external(
        scenario: &str,
        rendered: &chart::Rendered,
        lines: logs::Lines,
        log_file: &Path,
    ) -> Env {
        let serial = SERIAL.lock().await;
        let settings = Settings::from_env();
        assert_eq!(
            settings.target,
            Target::Local,
            "an external pod-director runs on loopback"
        );
        let client = Client::try_default()
            .await
            .expect("a Kubernetes client from KUBECONFIG");
        apply(Api::all(client.clone()), &rendered.mutating).await;
        apply(Api::all(client.clone()), &rendered.validating).await;
        let env = Env {
            logs: LogSource::Local(lines),
            config: suite_config(&settings.values_file()),
            client,
            scenario: scenario.to_owned(),
            pod_director: None,
            external_log: Some(log_file.to_owned()),
            proxy: None,
            created: Mutex::new(Cleanup {
                mutating: vec![settings.fullname.clone()],
                validating: vec![settings.fullname.clone()],
                ..Cleanup::default()
            }),
            settings,
            _serial: serial,
        };
        env.create_node(&pool_node(&format!("e2e-blue-{scenario}-{}", suffix())))
            .await;
        env.wait_until_serving().await;
        env
    }

    /// Starts pod-director (behind the latency relay, when asked) and registers the chart's
    /// webhook configurations for it.
    async fn start_local_process(
        scenario: &str,
        settings: &Settings,
        client: &Client,
        suite: &Config,
        options: Options,
    ) -> (PodDirector, Option<DelayProxy>) {
        let state_dir = settings.state_dir.clone().expect("local mode has a state dir");
        if options.audit_interval.is_some() {
            // The continuous audit's Lease lives in pod-director's own namespace (in cluster
            // mode the chart's release namespace).
            ensure_namespace(client, &settings.namespace).await;
        }
        let webhook_dir = state_dir.join("webhook");
        let read = |name: &str| {
            std::fs::read(webhook_dir.join(name)).unwrap_or_else(|e| panic!("cannot read webhook/{name}: {e}"))
        };
        let (cert, key, ca) = (read("tls.crt"), read("tls.key"), read("ca.crt"));
        let addr = process::free_local_addr();
        let rendered = chart::render(settings, &format!("https://{addr}"), &ca);
        let rendered_config = Config::from_yaml(&rendered.config_yaml, "the chart's ConfigMap", Vec::new())
            .expect("the chart renders a valid config");
        assert_eq!(
            &rendered_config.config, suite,
            "the chart's ConfigMap carries the config of e2e/scenarios/values.yaml verbatim"
        );

        let mut kubeconfig = PathBuf::from(env_var("KUBECONFIG").expect("KUBECONFIG"));
        if let Some(sets) = &options.chart_rbac {
            identity::apply_chart_rbac(client, settings, sets).await;
            let dir = state_dir.join("scenarios");
            std::fs::create_dir_all(&dir).expect("scenarios dir");
            let user = identity::service_account_user(settings);
            kubeconfig = identity::impersonating(
                &kubeconfig,
                &user,
                &settings.namespace,
                &dir,
                &format!("{scenario}-{}", suffix()),
            );
        }
        let proxy = match options.api_latency {
            Some(latency) => Some(DelayProxy::start(&kubeconfig, latency).await),
            None => None,
        };
        let mut pod_director = PodDirector::spawn(&Spawn {
            scenario,
            state_dir: &state_dir,
            kubeconfig: proxy.as_ref().map_or(kubeconfig.as_path(), |p| p.kubeconfig.as_path()),
            config: &rendered.config_yaml,
            cert: &cert,
            key: &key,
            addr,
            own_namespace: &settings.namespace,
            webhook_configuration: &settings.fullname,
            env: &options.env,
            audit_interval: options.audit_interval,
        });
        pod_director.wait_ready().await;

        apply(Api::all(client.clone()), &rendered.mutating).await;
        apply(Api::all(client.clone()), &rendered.validating).await;
        println!(
            "pod-director pid {} serving https://{addr}, log {}",
            pod_director.pid(),
            pod_director.log_file.display()
        );
        (pod_director, proxy)
    }

    /// Checks that the release runs the suite's config; its pods' logs are the decisions.
    async fn attach_to_cluster(settings: &Settings, client: &Client, suite: &Config) -> LogSource {
        let config_map = format!("{}-config", settings.fullname);
        let installed = Api::<ConfigMap>::namespaced(client.clone(), &settings.namespace)
            .get(&config_map)
            .await
            .unwrap_or_else(|e| panic!("ConfigMap {}/{config_map} of the release: {e}", settings.namespace));
        let text = installed
            .data
            .as_ref()
            .and_then(|d| d.get("config.yaml"))
            .unwrap_or_else(|| panic!("ConfigMap {config_map} has no config.yaml"));
        let installed = Config::from_yaml(text, &config_map, Vec::new())
            .unwrap_or_else(|e| panic!("the installed config is invalid: {e}"))
            .config;
        assert_eq!(
            &installed,
            suite,
            "pod-director must be installed with the suite's values: helm upgrade --install {} ./chart -n {} -f {}",
            settings.release,
            settings.namespace,
            settings.values_file().display()
        );
        LogSource::pods(client, &settings.namespace, &settings.release)
    }

    /// Dry-run pods in a dryRun-group namespace until pod-director logs both
    /// webhooks' decisions for one: the API server now calls *this* pod-director
    /// (a webhook configuration change takes effect asynchronously).
    async fn wait_until_serving(&self) {
        let ns = self.namespace(Some("e2e-dryrun")).await;
        let deadline = tokio::time::Instant::now() + PATIENCE;
        for attempt in 0.. {
            let name = format!("canary-{attempt}");
            let created = self.create_pod_dry_run(&ns, &pod(&name)).await;
            if created.status.is_success() {
                let seen = self.logs.decisions().await;
                let called = |webhook: &str| seen.iter().any(|d| d.is(&ns, &name, webhook));
                // And its Node cache sees the scenario's pool node.
                let placed = seen
                    .iter()
                    .any(|d| d.is(&ns, &name, "mutate") && d.get("placement.feasible_nodes").as_u64() >= Some(1));
                if called("mutate") && called("validate") && placed {
                    return;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the API server did not call pod-director within {PATIENCE:?} (last canary: {} {:?}); {}",
                created.status,
                created.error_message(),
                self.log_hint()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Where to look when something fails.
    pub fn log_hint(&self) -> String {
        match (&self.pod_director, &self.external_log) {
            (Some(pd), _) => format!("pod-director's log: {}", pd.log_file.display()),
            (None, Some(log)) => format!("pod-director's log: {}", log.display()),
            (None, None) => format!(
                "pod-director's logs: kubectl -n {} logs -l app.kubernetes.io/instance={}",
                self.settings.namespace, self.settings.release
            ),
        }
    }

    /// The local pod-director (panics in cluster mode: use [`Env::start_local`]).
    pub fn pod_director(&mut self) -> &mut PodDirector {
        self.pod_director
            .as_mut()
            .expect("this scenario needs the local pod-director (Env::start_local)")
    }

    /// Writes the suite's config with `edit` applied as the new generation of the
    /// local pod-director's mounted file; returns what was written.
    pub fn edit_config(&mut self, edit: impl FnOnce(&mut Value)) -> Value {
        let mut config = serde_json::to_value(&self.config).expect("the config serializes");
        edit(&mut config);
        // JSON is YAML.
        self.pod_director().write_config(&config.to_string());
        config
    }

    /// The config revision pod-director loaded at start.
    pub async fn loaded_revision(&self) -> String {
        let loaded = self.logs.messages("configuration loaded").await;
        let revision = loaded.first().and_then(|l| l["config.revision"].as_str());
        revision.expect("a loaded revision").to_owned()
    }

    /// Waits until pod-director logged `configuration reloaded` away from `revision`; returns the new one.
    pub async fn reloaded_from(&self, revision: &str) -> String {
        let line = self
            .logged("configuration reloaded", |l| l["config.previous_revision"] == revision)
            .await;
        line["config.revision"].as_str().expect("a revision").to_owned()
    }

    /// Waits until pod-director logs a line with `message` for which `holds` is true; returns it.
    pub async fn logged(&self, message: &str, holds: impl Fn(&Value) -> bool) -> Value {
        k8s::eventually(&format!("a log line {message:?}"), || async {
            self.logs.messages(message).await.into_iter().find(|l| holds(l))
        })
        .await
    }

    /// The value of a sample of the local pod-director's `/metrics` (the first line
    /// starting with `sample`, e.g. `pod_director_config_reloads_total{result="error"}`).
    pub async fn metric(&self, sample: &str) -> Option<f64> {
        pod_director_testkit::metric_value(&self.metrics().await?, sample)
    }

    /// Waits until the local pod-director's `sample` has a value for which `holds` is true.
    pub async fn wait_for_metric(&self, sample: &str, what: &str, holds: impl Fn(f64) -> bool) {
        k8s::eventually(&format!("{sample} {what}"), || async {
            self.metric(sample).await.filter(|v| holds(*v)).map(|_| ())
        })
        .await;
    }

    /// The local pod-director's `/metrics` (`None` in cluster mode, or when it does not answer).
    pub async fn metrics(&self) -> Option<String> {
        let probe = self.pod_director.as_ref()?.probe_addr;
        reqwest::get(format!("http://{probe}/metrics"))
            .await
            .ok()?
            .text()
            .await
            .ok()
    }

    /// The chart's two webhook configurations as they are in the cluster now.
    pub async fn webhook_configurations(&self) -> (MutatingWebhookConfiguration, ValidatingWebhookConfiguration) {
        let name = &self.settings.fullname;
        let mutating = Api::<MutatingWebhookConfiguration>::all(self.client.clone())
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("MutatingWebhookConfiguration {name}: {e}"));
        let validating = Api::<ValidatingWebhookConfiguration>::all(self.client.clone())
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("ValidatingWebhookConfiguration {name}: {e}"));
        (mutating, validating)
    }

    /// The name of one of the chart's webhooks, e.g. `enforce.mutate.e2e-pod-director.pod-director.io`.
    pub fn webhook_name(&self, entry: &str, webhook: &str) -> String {
        format!("{entry}.{webhook}.{}.pod-director.io", self.settings.fullname)
    }

    /// The API server's error when the chart's webhook `entry`.`webhook` denies with `message`.
    pub fn denied_by(&self, entry: &str, webhook: &str, message: &str) -> String {
        let hook = self.webhook_name(entry, webhook);
        format!("admission webhook \"{hook}\" denied the request: {message}")
    }

    /// Asserts that the API server refused `created` because it could not call the mutate
    /// webhook of the chart's entry `entry` (failurePolicy Fail).
    pub fn assert_failed_calling(&self, created: &Created, entry: &str) {
        let message = created.error_message().unwrap_or_default();
        let hook = self.webhook_name(entry, "mutate");
        assert!(
            message.contains(&format!("failed calling webhook \"{hook}\"")),
            "refused by {hook} (failurePolicy Fail): {message}"
        );
    }

    /// A fresh namespace `e2e-<scenario>-<random>` labelled with `group` (when given),
    /// ready for pods: its `default` ServiceAccount exists (e2e/cluster.sh wait-sa).
    pub async fn namespace(&self, group: Option<&str>) -> String {
        let name = self.create_namespace(group).await;
        k8s::wait_for_service_account(&self.client, &name, "default").await;
        name
    }

    /// Creates a namespace without waiting for anything.
    pub async fn create_namespace(&self, group: Option<&str>) -> String {
        let name = format!("e2e-{}-{}", self.scenario, suffix());
        let mut labels = BTreeMap::new();
        if let Some(group) = group {
            labels.insert(self.config.namespace_label.clone(), group.to_owned());
        }
        let namespace: Namespace = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels}
        }))
        .expect("a Namespace");
        self.create_namespace_object(&namespace).await;
        name
    }

    /// Creates namespace `name` with `annotations` and no group label, ready for pods (its
    /// `default` ServiceAccount exists); deleted at the end. Differential scenarios name their
    /// twins on another API server alike.
    pub async fn annotated_namespace(&self, name: &str, annotations: &BTreeMap<String, String>) {
        let namespace: Namespace = serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": annotations}
        }))
        .expect("a Namespace");
        self.create_namespace_object(&namespace).await;
        k8s::wait_for_service_account(&self.client, name, "default").await;
    }

    /// Creates `namespace`, deleted when the scenario ends.
    async fn create_namespace_object(&self, namespace: &Namespace) {
        let name = namespace.metadata.name.clone().expect("a named Namespace");
        self.created.lock().expect("not poisoned").namespaces.push(name.clone());
        // A labelled namespace goes through the namespace label guard (failurePolicy Fail when it
        // enforces): right after the webhook configurations are replaced, the API server may still
        // call the previous scenario's pod-director for a moment.
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            match Api::<Namespace>::all(self.client.clone())
                .create(&PostParams::default(), namespace)
                .await
            {
                Ok(_) => break,
                Err(kube::Error::Api(status))
                    if status.message.contains("failed calling webhook") && tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("namespace {name} created: {e}"),
            }
        }
    }

    /// A ServiceAccount in `namespace` (for pods that must not wait for `default`).
    pub async fn create_service_account(&self, namespace: &str, name: &str) {
        let account: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": name}})).expect("an SA");
        Api::<ServiceAccount>::namespaced(self.client.clone(), namespace)
            .create(&PostParams::default(), &account)
            .await
            .unwrap_or_else(|e| panic!("ServiceAccount {namespace}/{name} created: {e}"));
    }

    /// Creates a Node object played by kwok (annotation [`scheduling::KWOK_NODE`]: kwok marks it
    /// Ready, renews its Lease and runs the pods bound to it), deleted at the end.
    pub async fn create_node(&self, node: &Node) -> Node {
        self.create_unmanaged_node(&scheduling::kwok_node(node.clone())).await
    }

    /// [`Env::create_node`], then waits until kwok made it Ready and the node lifecycle removed
    /// its `node.kubernetes.io/*` taints: until then a binding to it is decided against a taint
    /// no group tolerates.
    pub async fn create_ready_node(&self, node: &Node) {
        let name = node.metadata.name.clone().expect("a named Node");
        self.create_node(node).await;
        k8s::eventually(&format!("node {name} Ready without the not-ready taint"), || async {
            let node = Api::<Node>::all(self.client.clone()).get(&name).await.ok()?;
            let tainted = node
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|t| t.iter().any(|t| t.key.starts_with("node.kubernetes.io/")));
            (scheduling::is_ready(&node) && !tainted).then_some(())
        })
        .await;
    }

    /// Creates a Node object as given: without the kwok annotation no kubelet plays it, so it
    /// stays NotReady (tainted `node.kubernetes.io/not-ready`, later `unreachable`). Deleted at the end.
    pub async fn create_unmanaged_node(&self, node: &Node) -> Node {
        let name = node.metadata.name.clone().expect("a named Node");
        self.created.lock().expect("not poisoned").nodes.push(name.clone());
        Api::<Node>::all(self.client.clone())
            .create(&PostParams::default(), node)
            .await
            .unwrap_or_else(|e| panic!("node {name} created: {e}"))
    }

    pub fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// The pods in `namespace` with labels matching `selector`, e.g. `app=web`.
    pub async fn list_pods(&self, namespace: &str, selector: &str) -> Vec<Pod> {
        let params = kube::api::ListParams::default().labels(selector);
        self.pods(namespace).list(&params).await.expect("pods listed").items
    }

    /// Waits until `count` pods in `namespace` match `selector` (a controller's); returns them.
    pub async fn wait_for_pods(&self, namespace: &str, selector: &str, count: usize) -> Vec<Pod> {
        k8s::eventually(&format!("{count} pods {selector} in {namespace}"), || async {
            let pods = self.list_pods(namespace, selector).await;
            (pods.len() == count).then_some(pods)
        })
        .await
    }

    /// Creates a pod, keeping the HTTP status, the Warning headers and any error.
    pub async fn create_pod(&self, namespace: &str, pod: &Pod) -> Created {
        k8s::create_pod(&self.client, namespace, pod, false).await
    }

    /// Creates a pod with `dryRun=All` (kubectl --dry-run=server): admitted, not stored.
    pub async fn create_pod_dry_run(&self, namespace: &str, pod: &Pod) -> Created {
        k8s::create_pod(&self.client, namespace, pod, true).await
    }

    /// Creates a pod that must be admitted; returns the stored pod.
    pub async fn create_admitted_pod(&self, namespace: &str, pod: &Pod) -> Created {
        let created = self.create_pod(namespace, pod).await;
        assert!(
            created.status.is_success(),
            "pod {namespace}/{} was not admitted: {} {:?}",
            pod.metadata.name.as_deref().unwrap_or_default(),
            created.status,
            created.error_message()
        );
        created
    }

    /// The stored pod.
    pub async fn get_pod(&self, namespace: &str, name: &str) -> Pod {
        self.pods(namespace)
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("pod {namespace}/{name}: {e}"))
    }

    /// The first decision pod-director logged for pod `name` at `webhook` (waits for it).
    pub async fn decision(&self, namespace: &str, name: &str, webhook: &str) -> Decision {
        self.decisions(namespace, name, webhook, 1).await.remove(0)
    }

    /// Every decision logged for pod `name` at `webhook`, once there are at least
    /// `count`, and after a short settling time (so that extra ones would show).
    pub async fn decisions(&self, namespace: &str, name: &str, webhook: &str, count: usize) -> Vec<Decision> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let logged = || async {
            let all = self.logs.decisions().await;
            all.into_iter()
                .filter(|d| d.is(namespace, name, webhook))
                .collect::<Vec<_>>()
        };
        loop {
            let found = logged().await;
            if found.len() >= count {
                tokio::time::sleep(Duration::from_millis(300)).await;
                return logged().await;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "pod-director logged {} {webhook} decision(s) for pod {namespace}/{name}, expected {count}; {}",
                found.len(),
                self.log_hint()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The decisions logged so far whose string fields have these values.
    pub async fn decisions_with(&self, fields: &[(&str, &str)]) -> Vec<Decision> {
        let all = self.logs.decisions().await;
        all.into_iter()
            .filter(|d| fields.iter().all(|(field, value)| d.str(field) == Some(value)))
            .collect()
    }

    /// Deletes, when the scenario ends, the admission policies pod-director applies
    /// (`--admission-policies`): they outlive its process by design.
    pub fn clean_up_admission_policies(&self) {
        self.created.lock().expect("not poisoned").admission_policies = true;
    }

    /// Applies RBAC objects (e.g. `render_template` output): cluster-wide roles and
    /// bindings; Roles and RoleBindings in their namespace, else the release's.
    pub async fn apply_rbac(&self, objects: Vec<Value>) {
        apply_rbac(&self.client, &self.settings.namespace, objects).await;
    }

    /// Applies a MutatingWebhookConfiguration of the scenario's own (deleted at the end).
    pub async fn apply_mutating(&self, configuration: &MutatingWebhookConfiguration) {
        let name = configuration.meta().name.clone().expect("named");
        self.created.lock().expect("not poisoned").mutating.push(name);
        apply(Api::all(self.client.clone()), configuration).await;
    }

    /// Applies a ValidatingWebhookConfiguration of the scenario's own (deleted at the end).
    pub async fn apply_validating(&self, configuration: &ValidatingWebhookConfiguration) {
        let name = configuration.meta().name.clone().expect("named");
        self.created.lock().expect("not poisoned").validating.push(name);
        apply(Api::all(self.client.clone()), configuration).await;
    }

    /// Starts a test webhook (see [`stub`]), registers it for `namespace` under a
    /// configuration name that sorts after pod-director's (so it is called after
    /// pod-director), and waits until the API server calls it.
    pub async fn stub_webhook(&self, namespace: &str, reinvocation: &str, handler: stub::Handler) -> stub::Stub {
        let host = self.settings.stub_host.expect("a stub host (Env::start_with_stub)");
        let stub = stub::Stub::start(host, handler).await;
        let name = format!("zz-{}-{}", self.scenario, suffix());
        assert!(
            name.as_str() > self.settings.fullname.as_str(),
            "{name} sorts after pod-director's webhooks"
        );
        self.apply_mutating(&stub.configuration(&name, namespace, reinvocation))
            .await;
        let mut attempt = 0;
        k8s::eventually(&format!("the API server to call the test webhook {}", stub.url), || {
            attempt += 1;
            let (canary, stub) = (format!("stub-canary-{attempt}"), &stub);
            async move {
                self.create_pod_dry_run(namespace, &pod(&canary)).await;
                stub.calls().contains(&canary).then_some(())
            }
        })
        .await;
        stub
    }

    /// The chart's ServiceAccount as the authorizer sees it: its user name and groups.
    pub fn service_account(&self) -> (String, Vec<String>) {
        let namespace = &self.settings.namespace;
        let user = format!("system:serviceaccount:{namespace}:{}", self.settings.fullname);
        let groups = [
            "system:serviceaccounts",
            &format!("system:serviceaccounts:{namespace}"),
            "system:authenticated",
        ];
        (user, groups.map(str::to_owned).to_vec())
    }

    /// Whether the chart's ServiceAccount may `verb` the `resource`s of API group `group`
    /// (in `namespace`, named `name`, when given), as a SubjectAccessReview answers.
    pub async fn service_account_may(
        &self,
        group: &str,
        resource: &str,
        verb: &str,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> bool {
        use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
        let (user, groups) = self.service_account();
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user),
                groups: Some(groups),
                resource_attributes: Some(ResourceAttributes {
                    group: Some(group.to_owned()),
                    resource: Some(resource.to_owned()),
                    verb: Some(verb.to_owned()),
                    namespace: namespace.map(str::to_owned),
                    name: name.map(str::to_owned),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .expect("a SubjectAccessReview")
            .status
            .is_some_and(|s| s.allowed)
    }

    /// The API server's audit events for pod `namespace/name` (local mode; empty otherwise).
    pub fn audit_events(&self, namespace: &str, name: &str) -> Vec<Value> {
        let Some(state_dir) = &self.settings.state_dir else {
            return Vec::new();
        };
        let text = std::fs::read_to_string(state_dir.join("logs/audit.log")).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| {
                e["objectRef"]["resource"] == "pods"
                    && e["objectRef"]["namespace"] == namespace
                    && e["objectRef"]["name"] == name
                    && e["stage"] == "ResponseComplete"
            })
            .collect()
    }
}

/// Applies RBAC objects through `client`: cluster-wide roles and bindings; Roles and
/// RoleBindings in their namespace, else `namespace`.
pub async fn apply_rbac(client: &Client, namespace: &str, objects: Vec<Value>) {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    for object in objects {
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or(namespace);
        let client = client.clone();
        match object["kind"].as_str() {
            Some("ClusterRole") => apply_json(Api::<ClusterRole>::all(client), object).await,
            Some("ClusterRoleBinding") => apply_json(Api::<ClusterRoleBinding>::all(client), object).await,
            Some("Role") => apply_json(Api::<Role>::namespaced(client, namespace), object).await,
            Some("RoleBinding") => apply_json(Api::<RoleBinding>::namespaced(client, namespace), object).await,
            other => panic!("unexpected RBAC object {other:?}"),
        }
    }
}

/// Server-side applies `object`.
async fn apply<K>(api: Api<K>, object: &K)
where
    K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let (kind, name) = (K::kind(&()), object.meta().name.clone().expect("named"));
    api.patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(object))
        .await
        .unwrap_or_else(|e| panic!("{kind} {name} applied: {e}"));
}

/// Server-side applies `object`, a `K` as JSON.
async fn apply_json<K>(api: Api<K>, object: Value)
where
    K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let typed: K = serde_json::from_value(object).unwrap_or_else(|e| panic!("a {}: {e}", K::kind(&())));
    apply(api, &typed).await;
}

impl Drop for Env {
    fn drop(&mut self) {
        if let Some(mut pd) = self.pod_director.take() {
            pd.stop();
        }
        self.proxy.take();
        let created = std::mem::take(&mut *self.created.lock().unwrap_or_else(|e| e.into_inner()));
        // The scenario's client is bound to its runtime, which is blocked here: clean up
        // from a thread with a runtime and a client of its own.
        let cleanup = std::thread::spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(runtime) => runtime,
                Err(e) => return eprintln!("cleanup: no runtime: {e}"),
            };
            // The timeout is made inside the runtime: outside it, tokio has no timer to arm.
            if runtime
                .block_on(async { tokio::time::timeout(PATIENCE, delete(created)).await })
                .is_err()
            {
                eprintln!("cleanup: gave up after {PATIENCE:?}");
            }
        });
        let _ = cleanup.join();
    }
}

/// Deletes the scenario's webhook configurations, then its namespaces and nodes (in the background).
async fn delete(created: Cleanup) {
    let client = match Client::try_default().await {
        Ok(client) => client,
        Err(e) => return eprintln!("cleanup: no client: {e}"),
    };
    delete_all::<MutatingWebhookConfiguration>(&client, &created.mutating).await;
    delete_all::<ValidatingWebhookConfiguration>(&client, &created.validating).await;
    if created.admission_policies {
        delete_admission_policies(&client).await;
    }
    if let Some(name) = &created.chart_rbac {
        identity::delete_chart_rbac(&client, name).await;
    }
    // Namespaces before nodes: kwok finishes the deletion of the pods bound to its nodes.
    delete_all::<Namespace>(&client, &created.namespaces).await;
    delete_all::<Node>(&client, &created.nodes).await;
}

/// The admission policy kinds (`admissionregistration.k8s.io/v1`), bindings first.
pub const ADMISSION_POLICY_KINDS: [(&str, &str); 4] = [
    ("MutatingAdmissionPolicyBinding", "mutatingadmissionpolicybindings"),
    ("ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings"),
    ("MutatingAdmissionPolicy", "mutatingadmissionpolicies"),
    ("ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
];

/// The API of one admission policy kind.
pub fn admission_policy_api(client: &Client, kind: &str, plural: &str) -> Api<kube::api::DynamicObject> {
    let gvk = kube::api::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
    Api::all_with(
        client.clone(),
        &kube::api::ApiResource::from_gvk_with_plural(&gvk, plural),
    )
}

/// Deletes every admission policy and binding labelled as pod-director's.
async fn delete_admission_policies(client: &Client) {
    for (kind, plural) in ADMISSION_POLICY_KINDS {
        let api = admission_policy_api(client, kind, plural);
        let params = kube::api::ListParams::default().labels("app.kubernetes.io/managed-by=pod-director");
        if let Err(e) = api.delete_collection(&DeleteParams::background(), &params).await {
            eprintln!("cleanup: {kind}s: {e}");
        }
    }
}

/// Deletes the cluster-scoped `K`s `names` (in the background), reporting failures.
async fn delete_all<K>(client: &Client, names: &[String])
where
    K: kube::Resource<DynamicType = (), Scope = kube::core::ClusterResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
{
    let api: Api<K> = Api::all(client.clone());
    for name in names {
        if let Err(e) = api.delete(name, &DeleteParams::background()).await {
            eprintln!("cleanup: {} {name}: {e}", K::kind(&()));
        }
    }
}

/// Creates namespace `name` unless it exists (e.g. pod-director's own, in local mode).
pub async fn ensure_namespace(client: &Client, name: &str) {
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).expect("a Namespace");
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.is_already_exists() => {}
        Err(e) => panic!("namespace {name}: {e}"),
    }
}
