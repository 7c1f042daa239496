//! What pod-director costs a cluster that is large, busy and scheduling: a simulation on a
//! throwaway loopback control plane (`e2e/cluster.sh`: etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler, kwok). `e2e/scale/run` sets it up and runs this
//! target (`cargo test --test scale`) with `E2E_POD_DIRECTOR_BIN` naming the
//! release build of pod-director, the binary the harness then starts.
//!
//! 1. pod-director starts as the scenario suite's harness starts it (`e2e/src/harness`:
//!    the chart rendered with `e2e/scale/values.yaml`, its two webhook configurations applied,
//!    `--mutating/--validating-webhook-configuration` as the chart passes them), with the
//!    continuous audit on.
//! 2. `E2E_SCALE_NODES` kwok nodes in three pools: blue (the groups' pool: a label and a
//!    taint they tolerate), red and green (untainted), zones a/b/c in turn.
//! 3. `E2E_SCALE_ROUNDS` rounds alternate *with* pod-director's webhook configurations and
//!    *without* them (deleted; pod-director keeps running: caches, audit, reconciler), in the
//!    order with, without, without, with, … so that what grows during the run (pods in etcd,
//!    the audit's work) and the machine's noise weigh on both. Each round creates
//!    `E2E_SCALE_PODS / E2E_SCALE_ROUNDS` pods, half in an enforce and half in a dryRun
//!    namespace: `E2E_SCALE_DIRECT_PERCENT` of them by this process, one POST per pod at
//!    `E2E_SCALE_CONCURRENCY` in flight (each CREATE timed), the rest by Deployments (the
//!    controller-manager creates them; timed until every one of their pods is Running).
//! 4. Around each round: the API server's `/metrics` (pod CREATE latency, webhook latency per
//!    webhook name, webhook rejections and fail-open calls) and pod-director's CPU seconds.
//! 5. In-process, on the cluster's own Node objects: the feasible memo rebuilt after a node
//!    change (`pod_director::cluster::Nodes` over a static source, as the Node cache feeds it).
//! 6. At the end: one more continuous-audit scan of every pod, its time and the resident
//!    memory it took; pod-director's peak RSS; the table.
//!
//! | variable | default |
//! |---|---|
//! | `E2E_SCALE_NODES` | 1000 |
//! | `E2E_SCALE_PODS` | 10000 |
//! | `E2E_SCALE_ROUNDS` | 4 (even: as many with as without) |
//! | `E2E_SCALE_CONCURRENCY` | 8 |
//! | `E2E_SCALE_DIRECT_PERCENT` | 20 |
//! | `E2E_SCALE_AUDIT_INTERVAL` | 30 (seconds; 0: the continuous audit off) |
//! | `E2E_SCALE_ROUND_TIMEOUT` | 900 (seconds, per round) |
//! | `E2E_SCALE_REPORT` | a file to write the table to (Markdown) |
//! | `E2E_SCALE_MODE` | `simulation` (this), or `reports`: what the OpenReports reports cost ([`reports`]) |

use pod_director_e2e::harness;

mod procfs;
mod prom;
mod reports;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::{Client, Resource as _, ResourceExt as _};
use serde_json::{Value, json};

use harness::{Env, Options, env_var, k8s, scheduling};
use prom::{Histogram, Sample};

/// The groups of `e2e/scale/values.yaml`.
const ENFORCE: &str = "e2e-enforce";
const DRYRUN: &str = "e2e-dryrun";
/// How often the end of an audit scan is looked for in pod-director's log.
const POLL_LOG: Duration = Duration::from_millis(500);
/// Pools, in the order nodes are dealt to them.
const POOLS: [&str; 3] = ["blue", "red", "green"];

#[derive(Debug, Clone)]
struct Settings {
    nodes: usize,
    pods: usize,
    rounds: usize,
    concurrency: usize,
    direct_percent: usize,
    audit_interval: Duration,
    round_timeout: Duration,
}

fn number(name: &str, default: usize) -> usize {
    env_var(name).map_or(default, |v| {
        v.parse()
            .unwrap_or_else(|e| panic!("{name}={v:?} is not a number: {e}"))
    })
}

impl Settings {
    fn from_env() -> Self {
        let settings = Self {
            nodes: number("E2E_SCALE_NODES", 1000),
            pods: number("E2E_SCALE_PODS", 10_000),
            rounds: number("E2E_SCALE_ROUNDS", 4),
            concurrency: number("E2E_SCALE_CONCURRENCY", 8),
            direct_percent: number("E2E_SCALE_DIRECT_PERCENT", 20),
            audit_interval: Duration::from_secs(number("E2E_SCALE_AUDIT_INTERVAL", 30) as u64),
            round_timeout: Duration::from_secs(number("E2E_SCALE_ROUND_TIMEOUT", 900) as u64),
        };
        assert!(
            settings.rounds >= 2 && settings.rounds.is_multiple_of(2),
            "E2E_SCALE_ROUNDS must be even"
        );
        assert!(settings.nodes >= 3 && settings.concurrency >= 1 && settings.direct_percent <= 100);
        assert!(
            settings.pods >= settings.rounds * 4,
            "E2E_SCALE_PODS too small for the rounds"
        );
        settings
    }

    /// Round `i` (from 0) runs with pod-director's webhooks: with, without, without, with, …
    fn with_webhooks(i: usize) -> bool {
        matches!(i % 4, 0 | 3)
    }
}

/// A kwok node of `pool`: the harness's pool labels, zone a/b/c in turn, SSD on every other.
fn node(pool: &str, i: usize) -> Node {
    let name = format!("scale-{pool}-{i:05}");
    let mut labels = harness::pool_labels(pool);
    labels["topology.kubernetes.io/zone"] = json!(["zone-a", "zone-b", "zone-c"][i % 3]);
    labels["kubernetes.io/hostname"] = json!(name);
    if i.is_multiple_of(2) {
        labels["e2e.pod-director.io/disk"] = json!("ssd");
    }
    let taints = if pool == "blue" {
        json!([{"key": "e2e.pod-director.io/dedicated", "value": "blue", "effect": "NoSchedule"}])
    } else {
        json!([])
    };
    let node = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": taints},
    }))
    .expect("a Node");
    scheduling::kwok_node(node)
}

/// The simulation's pod template: one container, a small request, labels naming its round.
fn pod_template(round: usize, kind: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": format!("scale-{kind}"), "scale-round": round.to_string()}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "app",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
            }],
        },
    })
}

/// What one arm (with or without pod-director) measured over its rounds.
#[derive(Debug, Default)]
struct Arm {
    /// This process's pod CREATEs: latency of each success.
    latencies: Vec<Duration>,
    failed_creates: usize,
    first_failure: Option<String>,
    /// The API server's `apiserver_request_duration_seconds` for pod CREATEs (not dry-run).
    apiserver_creates: Histogram,
    /// `apiserver_admission_webhook_admission_duration_seconds` by webhook name (CREATE).
    webhooks: BTreeMap<String, Histogram>,
    rejections: f64,
    fail_open: f64,
    /// Per round: Deployments created → every one of their pods Running.
    to_running: Vec<Duration>,
    deployment_pods: usize,
    cpu_seconds: f64,
    rounds: usize,
}

/// The API server's `/metrics`, parsed.
async fn apiserver_metrics(client: &Client) -> Vec<Sample> {
    let request = http::Request::get("/metrics").body(Vec::new()).expect("a request");
    let text = client.request_text(request).await.expect("the API server's /metrics");
    prom::parse(&text)
}

const REQUEST_DURATION: &str = "apiserver_request_duration_seconds";
const WEBHOOK_DURATION: &str = "apiserver_admission_webhook_admission_duration_seconds";

fn pod_creates(labels: &prom::Labels) -> bool {
    let get = |k: &str| labels.get(k).map(String::as_str).unwrap_or_default();
    get("verb") == "POST" && get("resource") == "pods" && get("subresource").is_empty() && get("dry_run").is_empty()
}

fn webhook_creates(name: &str) -> impl Fn(&prom::Labels) -> bool + '_ {
    move |l: &prom::Labels| {
        l.get("name").is_some_and(|n| n == name) && l.get("operation").is_some_and(|o| o == "CREATE")
    }
}

/// pod-director's decisions so far (every webhook, every decision).
async fn decisions(env: &Env) -> f64 {
    let text = env.metrics().await.unwrap_or_default();
    prom::sum(&prom::parse(&text), "pod_director_decisions_total", |_| true)
}

/// A dry-run pod in `namespace`: does pod-director decide it?
async fn canary_decided(env: &Env, namespace: &str, n: &mut usize) -> bool {
    *n += 1;
    let before = decisions(env).await;
    let created = env
        .create_pod_dry_run(namespace, &harness::pod(&format!("canary-{n}")))
        .await;
    assert!(
        created.status.is_success(),
        "canary: {} {:?}",
        created.status,
        created.error_message()
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    decisions(env).await > before
}

/// Puts pod-director's webhook configurations in place (as saved) or removes them, and waits
/// until the API server acts on it: canaries decided (with), or five in a row not (without).
async fn set_webhooks(
    env: &Env,
    on: bool,
    saved: &(MutatingWebhookConfiguration, ValidatingWebhookConfiguration),
    canary_ns: &str,
    canaries: &mut usize,
) {
    let (mutating, validating): (Api<MutatingWebhookConfiguration>, Api<ValidatingWebhookConfiguration>) =
        (Api::all(env.client.clone()), Api::all(env.client.clone()));
    let name = &env.settings.fullname;
    let fresh = |meta: &ObjectMeta| ObjectMeta {
        name: meta.name.clone(),
        labels: meta.labels.clone(),
        annotations: meta.annotations.clone(),
        ..ObjectMeta::default()
    };
    if on {
        let mut m = saved.0.clone();
        m.metadata = fresh(m.meta());
        let mut v = saved.1.clone();
        v.metadata = fresh(v.meta());
        for result in [
            mutating.create(&PostParams::default(), &m).await.map(|_| ()),
            validating.create(&PostParams::default(), &v).await.map(|_| ()),
        ] {
            match result {
                Ok(()) => {}
                Err(kube::Error::Api(s)) if s.is_already_exists() => {}
                Err(e) => panic!("webhook configuration {name} created: {e}"),
            }
        }
    } else {
        for result in [
            mutating.delete(name, &DeleteParams::default()).await.map(|_| ()),
            validating.delete(name, &DeleteParams::default()).await.map(|_| ()),
        ] {
            match result {
                Ok(()) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => panic!("webhook configuration {name} deleted: {e}"),
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut quiet = 0;
    loop {
        let decided = canary_decided(env, canary_ns, canaries).await;
        if on && decided {
            return;
        }
        quiet = if decided { 0 } else { quiet + 1 };
        if !on && quiet >= 5 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the API server did not act on the webhook change within 60 s"
        );
    }
}

/// Creates the nodes, `concurrency` at a time; waits until kwok has made them all Ready and
/// pod-director's Node cache holds them.
async fn create_nodes(env: &Env, count: usize, concurrency: usize) {
    let api: Api<Node> = Api::all(env.client.clone());
    let results: Vec<_> = futures::stream::iter(0..count)
        .map(|i| {
            let api = api.clone();
            async move {
                let node = node(POOLS[i % POOLS.len()], i);
                api.create(&PostParams::default(), &node).await.map(|_| ())
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    if let Some(e) = results.into_iter().find_map(Result::err) {
        panic!("a node was not created: {e}");
    }
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let nodes = api
            .list(&ListParams::default().labels("e2e.pod-director.io/pool"))
            .await
            .expect("nodes listed");
        let ready = nodes.items.iter().filter(|n| scheduling::is_ready(n)).count();
        let cached = env.metric("pod_director_node_cache_size").await.unwrap_or(0.0) as usize;
        if ready >= count && cached >= count {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{ready} of {count} nodes Ready, {cached} in pod-director's cache after 600 s"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// One round: direct CREATEs, then Deployments until Ready; what it measured goes into `arm`.
async fn round(env: &Env, settings: &Settings, i: usize, namespaces: &[(String, String)], arm: &mut Arm, pid: u32) {
    let (enforce_ns, dryrun_ns) = &namespaces[i];
    let per_round = settings.pods / settings.rounds;
    let direct = per_round * settings.direct_percent / 100;
    let deployed = per_round - direct;
    let before = apiserver_metrics(&env.client).await;
    let cpu_before = procfs::cpu_seconds(pid).unwrap_or(0.0);

    // Direct CREATEs at a fixed concurrency, enforce and dryRun in turn.
    let template = pod_template(i, "direct");
    let results: Vec<(Duration, Result<(), String>)> = futures::stream::iter(0..direct)
        .map(|n| {
            let client = env.client.clone();
            let ns = if n % 2 == 0 {
                enforce_ns.clone()
            } else {
                dryrun_ns.clone()
            };
            let mut pod = template.clone();
            pod["metadata"]["name"] = json!(format!("direct-{i}-{n:05}"));
            async move {
                let pod: Pod = serde_json::from_value(pod).expect("a pod");
                let start = Instant::now();
                let created = k8s::create_pod(&client, &ns, &pod, false).await;
                let took = start.elapsed();
                let result = if created.status.is_success() {
                    Ok(())
                } else {
                    Err(format!("{} {:?}", created.status, created.error_message()))
                };
                (took, result)
            }
        })
        .buffer_unordered(settings.concurrency)
        .collect()
        .await;
    for (took, result) in results {
        match result {
            Ok(()) => arm.latencies.push(took),
            Err(e) => {
                arm.failed_creates += 1;
                arm.first_failure.get_or_insert(e);
            }
        }
    }

    // Deployments: two per namespace.
    let replicas = [deployed / 4, deployed / 4, deployed / 4, deployed - 3 * (deployed / 4)];
    let start = Instant::now();
    for (d, &count) in replicas.iter().enumerate() {
        let ns = if d < 2 { enforce_ns } else { dryrun_ns };
        let name = format!("scale-{i}-{d}");
        let mut template = pod_template(i, &name);
        template["metadata"]["labels"]["deployment"] = json!(name);
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {
                "replicas": count,
                "selector": {"matchLabels": {"deployment": name}},
                "template": template,
            },
        }))
        .expect("a Deployment");
        Api::<Deployment>::namespaced(env.client.clone(), ns)
            .create(&PostParams::default(), &deployment)
            .await
            .unwrap_or_else(|e| panic!("Deployment {ns}/{name} created: {e}"));
    }
    // Every pod of the round Running, as the pods say (Deployment status lags behind them,
    // the controller-manager's work queues are long): a list from the watch cache.
    let deadline = start + settings.round_timeout;
    let mut deployed_running = None;
    loop {
        let mut running = (0, 0);
        for ns in [enforce_ns, dryrun_ns] {
            let params = ListParams::default().labels(&format!("scale-round={i}")).match_any();
            let pods = Api::<Pod>::namespaced(env.client.clone(), ns)
                .list(&params)
                .await
                .unwrap_or_else(|e| panic!("pods of {ns}: {e}"));
            for pod in pods.items.iter().filter(|p| scheduling::phase(p) == "Running") {
                let direct = pod.labels().get("app").is_some_and(|a| a == "scale-direct");
                if direct { running.0 += 1 } else { running.1 += 1 }
            }
        }
        if deployed_running.is_none() && running.1 >= deployed {
            deployed_running = Some(start.elapsed());
        }
        if deployed_running.is_some() && running.0 + arm.failed_creates >= direct {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "round {i}: {} of {direct} direct and {} of {deployed} Deployment pods Running after {:?}",
            running.0,
            running.1,
            settings.round_timeout
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    arm.to_running.push(deployed_running.expect("all Running"));
    arm.deployment_pods += deployed;

    let after = apiserver_metrics(&env.client).await;
    arm.cpu_seconds += procfs::cpu_seconds(pid).unwrap_or(0.0) - cpu_before;
    arm.apiserver_creates.add(
        &Histogram::of(&after, REQUEST_DURATION, pod_creates).since(&Histogram::of(
            &before,
            REQUEST_DURATION,
            pod_creates,
        )),
    );
    for name in prom::label_values(&after, &format!("{WEBHOOK_DURATION}_count"), "name") {
        let observed = Histogram::of(&after, WEBHOOK_DURATION, webhook_creates(&name)).since(&Histogram::of(
            &before,
            WEBHOOK_DURATION,
            webhook_creates(&name),
        ));
        if observed.count > 0.0 {
            arm.webhooks.entry(name).or_default().add(&observed);
        }
    }
    let delta = |name: &str| prom::sum(&after, name, |_| true) - prom::sum(&before, name, |_| true);
    arm.rejections += delta("apiserver_admission_webhook_rejection_count");
    arm.fail_open += delta("apiserver_admission_webhook_fail_open_count");
    arm.rounds += 1;
}

/// The feasible memo rebuilt after one node change, on the cluster's Node objects.
struct Memo {
    nodes: usize,
    feasible: usize,
    rebuild: Vec<Duration>,
    hit: Duration,
}

fn measure_memo(nodes: &[Node], config: &pod_director_engine::config::Config) -> Memo {
    use pod_director::testing::StaticNodes;
    use pod_director_engine::placement::{NodeInfo, Placement};
    let source = Arc::new(StaticNodes::new());
    for node in nodes {
        source.insert(NodeInfo::from_node(node));
    }
    let cache = pod_director::cluster::Nodes::new(source.clone());
    let placement = Placement::of_group(&config.groups[ENFORCE]);
    let feasible = cache.feasible(&placement).expect("a synced static source");
    let hits = 10_000;
    let start = Instant::now();
    for _ in 0..hits {
        std::hint::black_box(cache.feasible(std::hint::black_box(&placement)));
    }
    let hit = start.elapsed() / hits;
    let mut rebuild = Vec::new();
    for k in 0..301 {
        let mut changed = nodes[k % nodes.len()].clone();
        changed
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert("e2e.pod-director.io/touched".to_owned(), k.to_string());
        let generation = cache.generation();
        source.insert(NodeInfo::from_node(&changed));
        assert_ne!(cache.generation(), generation, "a node change is a new generation");
        let start = Instant::now();
        std::hint::black_box(cache.feasible(std::hint::black_box(&placement)));
        rebuild.push(start.elapsed());
    }
    rebuild.sort();
    Memo {
        nodes: nodes.len(),
        feasible,
        rebuild,
        hit,
    }
}

fn quantile<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

fn ms(d: Option<Duration>) -> String {
    d.map_or("–".to_owned(), |d| format!("{:.2} ms", d.as_secs_f64() * 1e3))
}

fn ms_f(s: Option<f64>) -> String {
    s.map_or("–".to_owned(), |s| format!("{:.2} ms", s * 1e3))
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
        _ => "–".to_owned(),
    }
}

/// `E2E_SCALE_MODE`: which of the target's benchmarks runs (`simulation`, the default, or `reports`).
fn mode_is(mode: &str) -> bool {
    let wanted = env_var("E2E_SCALE_MODE").unwrap_or_else(|| "simulation".to_owned());
    if wanted != mode {
        println!("{mode}: skipped (E2E_SCALE_MODE={wanted})");
    }
    wanted == mode
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_at_scale() {
    if mode_is("reports") {
        reports::run().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulation() {
    if !mode_is("simulation") {
        return;
    }
    let settings = Settings::from_env();
    let started = Instant::now();
    println!("scale simulation: {settings:?}");
    let mut env = Env::start_with(
        "scale",
        Options {
            audit_interval: (!settings.audit_interval.is_zero()).then_some(settings.audit_interval),
            ..Options::default()
        },
    )
    .await;
    let pid = env.pod_director().pid();
    let sampler = procfs::Sampler::start(pid, Duration::from_millis(50));
    let binary = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
    println!("pod-director pid {pid}: {}", binary.display());

    // The Node cache: resident memory before and after the nodes join it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss_before_nodes = procfs::rss(pid);
    let t = Instant::now();
    create_nodes(&env, settings.nodes, 16).await;
    let nodes_took = t.elapsed();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let rss_after_nodes = procfs::rss(pid);
    println!(
        "{} nodes Ready and cached in {nodes_took:.1?}; RSS {} → {}",
        settings.nodes,
        mib(rss_before_nodes),
        mib(rss_after_nodes)
    );
    let all_nodes = Api::<Node>::all(env.client.clone())
        .list(&ListParams::default())
        .await
        .expect("nodes listed")
        .items;
    let memo = measure_memo(&all_nodes, &env.config);

    // Namespaces (while the namespace guard is in place): an enforce and a dryRun one per round.
    let canary_ns = env.namespace(Some(ENFORCE)).await;
    let mut namespaces = Vec::new();
    for _ in 0..settings.rounds {
        namespaces.push((env.namespace(Some(ENFORCE)).await, env.namespace(Some(DRYRUN)).await));
    }
    let saved = env.webhook_configurations().await;

    let mut with = Arm::default();
    let mut without = Arm::default();
    let mut canaries = 0;
    let mut webhooks_on = true;
    for i in 0..settings.rounds {
        let on = Settings::with_webhooks(i);
        if on != webhooks_on {
            set_webhooks(&env, on, &saved, &canary_ns, &mut canaries).await;
            webhooks_on = on;
        }
        let t = Instant::now();
        let arm = if on { &mut with } else { &mut without };
        round(&env, &settings, i, &namespaces, arm, pid).await;
        println!(
            "round {i} ({}) done in {:.1?}; pod-director RSS {}",
            if on { "with pod-director" } else { "without" },
            t.elapsed(),
            mib(procfs::rss(pid))
        );
    }
    if !webhooks_on {
        set_webhooks(&env, true, &saved, &canary_ns, &mut canaries).await;
    }

    // The continuous audit at full size: a scan that saw every pod.
    let total_pods = settings.pods / settings.rounds * settings.rounds;
    let scans_before = env.logs.messages("audit: scan completed").await.len();
    let deadline = Instant::now() + settings.audit_interval * 3 + Duration::from_secs(120);
    // `E2E_SCALE_AUDIT_INTERVAL=0`: the audit is off (what the rest costs without it).
    let audit_on = !settings.audit_interval.is_zero();
    let (scan, seen_at) = loop {
        if !audit_on {
            break (
                json!({"audit.pods": "(audit off)", "audit.namespaces": 0}),
                Instant::now(),
            );
        }
        let scans = env.logs.messages("audit: scan completed").await;
        if let Some(scan) = scans
            .iter()
            .skip(scans_before)
            .find(|s| s["audit.pods"].as_u64().unwrap_or(0) as usize >= total_pods)
        {
            break (scan.clone(), Instant::now());
        }
        assert!(Instant::now() < deadline, "no audit scan of {total_pods} pods");
        // Each look copies every log line collected so far: not too often.
        tokio::time::sleep(POLL_LOG).await;
    };
    let scan_ms = scan["elapsed_ms"].as_u64().unwrap_or(0);
    let scan_start = seen_at - Duration::from_millis(scan_ms) - POLL_LOG - Duration::from_millis(100);
    let before_scan = sampler.between(scan_start - Duration::from_secs(2), scan_start);
    let during_scan = sampler.between(scan_start, seen_at);
    let scan_base = before_scan.iter().copied().min().unwrap_or(0);
    let scan_peak = during_scan.iter().copied().max().unwrap_or(0);
    let peak_rss = procfs::status_bytes(pid, "VmHWM").unwrap_or(0);
    let final_rss = procfs::rss(pid);
    let total_cpu = procfs::cpu_seconds(pid).unwrap_or(0.0);
    let pd_metrics = prom::parse(&env.metrics().await.unwrap_or_default());
    let pd_errors = prom::sum(&pd_metrics, "pod_director_decisions_total", |l| {
        l.get("decision").is_some_and(|d| d == "error" || d == "denied")
    });
    let dropped = prom::sum(&pd_metrics, "pod_director_log_lines_dropped_total", |_| true);
    let audit_gauge = prom::sum(&pd_metrics, "pod_director_audit_duration_seconds", |_| true);

    // The table.
    let mut out = String::new();
    let lat = |arm: &Arm, q| {
        let mut sorted = arm.latencies.clone();
        sorted.sort();
        quantile(&sorted, q)
    };
    let secs = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
    let _ = writeln!(
        out,
        "\n## pod-director at scale: {} nodes, {} pods ({} rounds, {} with / {} without pod-director's webhooks)\n",
        settings.nodes, total_pods, settings.rounds, with.rounds, without.rounds
    );
    let _ = writeln!(out, "| | with pod-director | without | ratio |\n|---|---|---|---|");
    for (label, q) in [("p50", 0.5), ("p99", 0.99)] {
        let _ = writeln!(
            out,
            "| pod CREATE {label}, this client ({} in flight; {} / {} CREATEs) | {} | {} | {} |",
            settings.concurrency,
            with.latencies.len(),
            without.latencies.len(),
            ms(lat(&with, q)),
            ms(lat(&without, q)),
            ratio(secs(lat(&with, q)), secs(lat(&without, q)))
        );
    }
    for (label, q) in [("p50", 0.5), ("p99", 0.99)] {
        let (a, b) = (
            with.apiserver_creates.quantile(q),
            without.apiserver_creates.quantile(q),
        );
        let _ = writeln!(
            out,
            "| pod CREATE {label}, API server (`apiserver_request_duration_seconds`, every pod CREATE, interpolated; {:.0} / {:.0}) | {} | {} | {} |",
            with.apiserver_creates.count,
            without.apiserver_creates.count,
            ms_f(a),
            ms_f(b),
            ratio(a, b)
        );
    }
    let (a, b) = (with.apiserver_creates.mean(), without.apiserver_creates.mean());
    let _ = writeln!(
        out,
        "| pod CREATE mean, API server | {} | {} | {} |",
        ms_f(a),
        ms_f(b),
        ratio(a, b)
    );
    let running = |arm: &Arm| {
        let total: Duration = arm.to_running.iter().sum();
        (total, arm.deployment_pods as f64 / total.as_secs_f64().max(1e-9))
    };
    let (tw, rw) = running(&with);
    let (tn, rn) = running(&without);
    let _ = writeln!(
        out,
        "| Deployment pods: created → all Running ({} / {} pods) | {tw:.1?} ({rw:.0} pods/s) | {tn:.1?} ({rn:.0} pods/s) | {} |",
        with.deployment_pods,
        without.deployment_pods,
        ratio(Some(tw.as_secs_f64()), Some(tn.as_secs_f64()))
    );
    let _ = writeln!(
        out,
        "| failed CREATEs (this client) / webhook rejections / fail-open calls | {} / {} / {} | {} / {} / {} | |",
        with.failed_creates,
        with.rejections,
        with.fail_open,
        without.failed_creates,
        without.rejections,
        without.fail_open
    );
    let _ = writeln!(
        out,
        "| pod-director CPU seconds during the rounds | {:.1} s | {:.1} s | |",
        with.cpu_seconds, without.cpu_seconds
    );
    let _ = writeln!(
        out,
        "\n| webhook (API server's view, pod CREATEs of the with rounds) | calls | mean (`_sum/_count`) | p99 bucket (`le`) |\n|---|---|---|---|"
    );
    for (name, h) in &with.webhooks {
        let _ = writeln!(
            out,
            "| `{name}` | {:.0} | {} | ≤ {} |",
            h.count,
            ms_f(h.mean()),
            ms_f(h.bucket_of(0.99))
        );
    }
    // pod-director's own time per pod decision (`latency_ms` of its decision lines), by webhook.
    let mut own: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for d in env.logs.decisions().await {
        if d.str("admission.request.resource") == Some("pods")
            && let (Some(webhook), Some(ms)) = (d.str("webhook"), d.get("latency_ms").as_f64())
        {
            own.entry(webhook.to_owned()).or_default().push(ms);
        }
    }
    for (webhook, latencies) in &mut own {
        latencies.sort_by(f64::total_cmp);
        let mean = latencies.iter().sum::<f64>() / latencies.len() as f64;
        let _ = writeln!(
            out,
            "| pod-director's own time per pod decision, `/{webhook}` (its log's `latency_ms`, every round) | {} | mean {mean:.3} ms | p50 {:.3} ms, p99 {:.3} ms |",
            latencies.len(),
            quantile(latencies, 0.5).unwrap_or(0.0),
            quantile(latencies, 0.99).unwrap_or(0.0)
        );
    }
    let rebuild_p50 = quantile(&memo.rebuild, 0.5);
    let rebuild_p99 = quantile(&memo.rebuild, 0.99);
    let _ = writeln!(out, "\n| pod-director | |\n|---|---|");
    let _ = writeln!(out, "| CPU seconds, whole run | {total_cpu:.1} s |");
    let _ = writeln!(out, "| peak RSS (`VmHWM`) | {} |", mib(peak_rss));
    let _ = writeln!(
        out,
        "| RSS at the end ({} nodes, {} pods) | {} |",
        settings.nodes,
        total_pods,
        mib(final_rss)
    );
    let per_node = rss_after_nodes.saturating_sub(rss_before_nodes) as f64 / settings.nodes as f64;
    let _ = writeln!(
        out,
        "| Node cache, bytes per node (RSS after − before the {} nodes joined, ÷ nodes) | {per_node:.0} B ({} → {}) |",
        settings.nodes,
        mib(rss_before_nodes),
        mib(rss_after_nodes)
    );
    let _ = writeln!(
        out,
        "| audit scan at full size ({} pods, {} namespaces) | {scan_ms} ms (gauge {:.0} ms) |",
        scan["audit.pods"],
        scan["audit.namespaces"],
        audit_gauge * 1e3
    );
    let _ = writeln!(
        out,
        "| audit scan memory (peak RSS during the scan − RSS before it) | {} ({} → {}) |",
        mib(scan_peak.saturating_sub(scan_base)),
        mib(scan_base),
        mib(scan_peak)
    );
    let _ = writeln!(
        out,
        "| feasible memo rebuilt after a node change, {} nodes ({} feasible), in the test process ({}) | p50 {}, p99 {} (a memo hit: {:.0} ns) |",
        memo.nodes,
        memo.feasible,
        if cfg!(debug_assertions) {
            "unoptimized test build: `cargo bench --bench feasibility -- count-uncached` for the release figure"
        } else {
            "release build"
        },
        ms(rebuild_p50),
        ms(rebuild_p99),
        memo.hit.as_nanos()
    );
    let _ = writeln!(
        out,
        "| decisions `error`/`denied`, log lines dropped | {pd_errors} / {dropped} |"
    );
    // What the control plane took, for sizing a larger run.
    let _ = writeln!(
        out,
        "\n| control plane (e2e/cluster.sh) | peak RSS | CPU seconds |\n|---|---|---|"
    );
    let run_dir = env.settings.state_dir.clone().expect("local mode").join("run");
    for component in [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kwok",
    ] {
        let pid = std::fs::read_to_string(run_dir.join(format!("{component}.pid")))
            .ok()
            .and_then(|p| p.trim().parse::<u32>().ok());
        if let Some(pid) = pid {
            let _ = writeln!(
                out,
                "| {component} | {} | {:.0} s |",
                mib(procfs::status_bytes(pid, "VmHWM").unwrap_or(0)),
                procfs::cpu_seconds(pid).unwrap_or(0.0)
            );
        }
    }
    let _ = writeln!(
        out,
        "\nnodes Ready and cached in {nodes_took:.1?}; whole simulation {:.1?}",
        started.elapsed()
    );

    // Targets.
    let p50 = ratio_value(secs(lat(&with, 0.5)), secs(lat(&without, 0.5)));
    let p99 = ratio_value(secs(lat(&with, 0.99)), secs(lat(&without, 0.99)));
    let failed = with.failed_creates + without.failed_creates;
    let admissions_ok = failed == 0 && with.rejections == 0.0 && with.fail_open == 0.0 && pd_errors == 0.0;
    let _ = writeln!(out, "\n| target | measured | holds |\n|---|---|---|");
    let holds = |ok: bool| if ok { "yes" } else { "**no**" };
    let _ = writeln!(
        out,
        "| CREATE p50 with ≤ 1.10× without | {p50:.2}× | {} |",
        holds(p50 <= 1.10)
    );
    let _ = writeln!(
        out,
        "| CREATE p99 with ≤ 1.25× without | {p99:.2}× | {} |",
        holds(p99 <= 1.25)
    );
    let _ = writeln!(
        out,
        "| RSS ≤ 64 MiB at {} nodes + {} pods, {} | peak {} | {} |",
        settings.nodes,
        total_pods,
        if audit_on { "audit on" } else { "audit OFF" },
        mib(peak_rss),
        holds(peak_rss <= 64 << 20)
    );
    let _ = writeln!(
        out,
        "| 0 failed admissions | {failed} failed CREATEs, {} rejections, {} fail-open, {pd_errors} error/denied decisions | {} |",
        with.rejections,
        with.fail_open,
        holds(admissions_ok)
    );
    if let Some(first) = with.first_failure.as_ref().or(without.first_failure.as_ref()) {
        let _ = writeln!(out, "\nfirst failed CREATE: {first}");
    }
    println!("{out}");
    if let Some(path) = env_var("E2E_SCALE_REPORT") {
        std::fs::write(&path, &out).unwrap_or_else(|e| panic!("cannot write {path}: {e}"));
    }
    drop(sampler);
    assert!(admissions_ok, "failed admissions: see the table");
}

fn ratio_value(a: Option<f64>, b: Option<f64>) -> f64 {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => a / b,
        _ => f64::NAN,
    }
}
