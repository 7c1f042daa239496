//! What the OpenReports reports cost (`E2E_SCALE_MODE=reports e2e/scale/run`): a benchmark,
//! not a timed test. pod-director runs with `--reports true` and the continuous audit on the
//! loopback control plane of `e2e/scale/run`; then:
//!
//! 1. `E2E_SCALE_NAMESPACES` grouped namespaces (enforce and dryRun in turn), each with
//!    `E2E_SCALE_WORKLOADS` workloads: a quarter Deployments of one replica, the rest bare pods
//!    (one pod per workload: the audit's work and the reports' results grow with workloads,
//!    not replicas), while the Report CRD is not installed (nothing written).
//! 2. Once a scan has seen every pod, the OpenReports CRDs are installed (from `e2e/tools.sh`),
//!    and the API server's `apiserver_request_total` is read at each scan's end for
//!    `E2E_SCALE_SCANS` + 1 scans: the writes of scan k fall between the end of scan k and of
//!    scan k + 1 (the writer runs after the scan). The interval before the install is the
//!    baseline (reports on, CRD absent).
//! 3. `E2E_SCALE_ROUNDS` rounds of pod CREATEs (20 per second) in a dryRun namespace of their own, alternating
//!    reports on (CRDs installed, every report written) and off (CRDs removed: the writer finds
//!    nothing served), on, off, off, on, …, each CREATE timed, at `E2E_SCALE_CONCURRENCY` in
//!    flight, for at least two audit intervals per round (so scans and their writes overlap
//!    the CREATEs).
//!
//! | variable | default |
//! |---|---|
//! | `E2E_SCALE_NAMESPACES` | 100 |
//! | `E2E_SCALE_WORKLOADS` | 20 (per namespace) |
//! | `E2E_SCALE_NODES` | 90 |
//! | `E2E_SCALE_SCANS` | 3 |
//! | `E2E_SCALE_ROUNDS` | 4 |
//! | `E2E_SCALE_AUDIT_INTERVAL` | 10 (seconds) |
//! | `E2E_SCALE_CONCURRENCY` | 4 |

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams};
use serde_json::{Value, json};

use super::harness::{Env, Options, k8s, tool};
use super::{DRYRUN, ENFORCE, POLL_LOG, apiserver_metrics, create_nodes, ms, number, pod_template, quantile, ratio};
use crate::prom::Sample;

const CRDS: [(&str, &str); 2] = [
    ("reports.openreports.io", "openreports.io_reports.yaml"),
    ("clusterreports.openreports.io", "openreports.io_clusterreports.yaml"),
];
const SCAN_DONE: &str = "audit: scan completed";

struct ReportsScale {
    namespaces: usize,
    workloads: usize,
    nodes: usize,
    scans: usize,
    rounds: usize,
    interval: Duration,
    concurrency: usize,
}

impl ReportsScale {
    fn from_env() -> Self {
        let settings = Self {
            namespaces: number("E2E_SCALE_NAMESPACES", 100),
            workloads: number("E2E_SCALE_WORKLOADS", 20),
            nodes: number("E2E_SCALE_NODES", 90),
            scans: number("E2E_SCALE_SCANS", 3),
            rounds: number("E2E_SCALE_ROUNDS", 4),
            interval: Duration::from_secs(number("E2E_SCALE_AUDIT_INTERVAL", 10) as u64),
            concurrency: number("E2E_SCALE_CONCURRENCY", 4),
        };
        assert!(
            settings.rounds >= 2 && settings.rounds.is_multiple_of(2),
            "E2E_SCALE_ROUNDS must be even"
        );
        assert!(settings.scans >= 2 && !settings.interval.is_zero() && settings.workloads >= 4);
        settings
    }
}

fn crds(env: &Env) -> Api<CustomResourceDefinition> {
    Api::all(env.client.clone())
}

async fn install_crds(env: &Env) {
    for (name, file) in CRDS {
        let path = tool("E2E_OPENREPORTS_CRDS", "openreports-crds").join(file);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let value: Value = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let crd: CustomResourceDefinition = serde_json::from_value(value).expect("a CustomResourceDefinition");
        match crds(env).create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_already_exists() => {}
            Err(e) => panic!("{name} created: {e}"),
        }
    }
}

async fn delete_crds(env: &Env) {
    for (name, _) in CRDS {
        let _ = crds(env).delete(name, &DeleteParams::default()).await;
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    for (name, _) in CRDS {
        while crds(env).get_opt(name).await.expect("GET a CRD").is_some() {
            assert!(Instant::now() < deadline, "{name} not gone after 300 s");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// The reports in the cluster (0 when the CRD is not served).
async fn report_count(env: &Env) -> usize {
    let gvk = GroupVersionKind::gvk("openreports.io", "v1alpha1", "Report");
    let api: Api<DynamicObject> =
        Api::all_with(env.client.clone(), &ApiResource::from_gvk_with_plural(&gvk, "reports"));
    api.list(&ListParams::default()).await.map_or(0, |l| l.items.len())
}

/// The audit scans completed so far.
async fn scans(env: &Env) -> Vec<Value> {
    env.logs.messages(SCAN_DONE).await
}

/// Waits for the next scan to complete (after `seen` of them), and returns its line.
async fn next_scan(env: &Env, seen: usize, interval: Duration) -> Value {
    let deadline = Instant::now() + interval * 4 + Duration::from_secs(120);
    loop {
        let all = scans(env).await;
        if all.len() > seen {
            return all[all.len() - 1].clone();
        }
        assert!(Instant::now() < deadline, "no audit scan after {seen}");
        tokio::time::sleep(POLL_LOG).await;
    }
}

/// `apiserver_request_total` by (verb, group/resource), `after` − `before`, non-zero.
fn requests(before: &[Sample], after: &[Sample]) -> BTreeMap<(String, String), f64> {
    let key = |s: &Sample| {
        let get = |k: &str| s.labels.get(k).cloned().unwrap_or_default();
        let group = get("group");
        let mut resource = if group.is_empty() {
            get("resource")
        } else {
            format!("{group}/{}", get("resource"))
        };
        if !get("subresource").is_empty() {
            resource = format!("{resource}/{}", get("subresource"));
        }
        if resource.is_empty() {
            resource = "(non-resource)".to_owned();
        }
        (get("verb"), resource)
    };
    let mut out: BTreeMap<(String, String), f64> = BTreeMap::new();
    for s in after.iter().filter(|s| s.name == "apiserver_request_total") {
        *out.entry(key(s)).or_default() += s.value;
    }
    for s in before.iter().filter(|s| s.name == "apiserver_request_total") {
        *out.entry(key(s)).or_default() -= s.value;
    }
    out.retain(|_, v| *v > 0.5);
    out
}

fn is_write(verb: &str) -> bool {
    !matches!(verb, "GET" | "LIST" | "WATCH")
}

/// The requests on reports (`openreports.io`), writes and reads.
fn report_requests(delta: &BTreeMap<(String, String), f64>) -> (f64, f64) {
    let mut out = (0.0, 0.0);
    for ((verb, resource), n) in delta {
        if resource.starts_with("openreports.io/") {
            if is_write(verb) { out.0 += n } else { out.1 += n }
        }
    }
    out
}

fn describe(delta: &BTreeMap<(String, String), f64>) -> String {
    let mut parts: Vec<(f64, String)> = delta
        .iter()
        .map(|((verb, resource), n)| (*n, format!("{verb} {resource} {n:.0}")))
        .collect();
    parts.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    parts.into_iter().map(|(_, p)| p).collect::<Vec<_>>().join(", ")
}

/// Creates the namespace's workloads: a quarter Deployments of one replica, the rest bare pods.
async fn workloads(env: &Env, ns: &str, count: usize) {
    let deployments = count / 4;
    for d in 0..deployments {
        let name = format!("deploy-{d:02}");
        let mut template = pod_template(0, &name);
        template["metadata"]["labels"]["deployment"] = json!(name);
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"deployment": name}}, "template": template},
        }))
        .expect("a Deployment");
        Api::<Deployment>::namespaced(env.client.clone(), ns)
            .create(&PostParams::default(), &deployment)
            .await
            .unwrap_or_else(|e| panic!("Deployment {ns}/{name}: {e}"));
    }
    for p in deployments..count {
        let mut pod = pod_template(0, "bare");
        pod["metadata"]["name"] = json!(format!("bare-{p:02}"));
        let pod: Pod = serde_json::from_value(pod).expect("a pod");
        let created = k8s::create_pod(&env.client, ns, &pod, false).await;
        assert!(created.status.is_success(), "{ns}: {:?}", created.error_message());
    }
}

/// CREATEs per second of a latency round (paced: the same load with reports on and off).
const RATE: f64 = 20.0;

/// One latency round: CREATEs in `ns` at [`RATE`] for `length`, `concurrency` in flight.
async fn round(env: &Env, ns: &str, i: usize, length: Duration, concurrency: usize) -> Vec<Duration> {
    let start = Instant::now();
    let mut latencies = Vec::new();
    let mut n = 0;
    while start.elapsed() < length {
        let batch: Vec<Duration> = futures::stream::iter(n..n + concurrency * 5)
            .map(|k| {
                let client = env.client.clone();
                let mut pod = pod_template(i, "latency");
                pod["metadata"]["name"] = json!(format!("round-{i}-{k:05}"));
                async move {
                    let pod: Pod = serde_json::from_value(pod).expect("a pod");
                    let t = Instant::now();
                    let created = k8s::create_pod(&client, ns, &pod, false).await;
                    assert!(created.status.is_success(), "{:?}", created.error_message());
                    t.elapsed()
                }
            })
            .buffer_unordered(concurrency)
            .collect()
            .await;
        n += batch.len();
        latencies.extend(batch);
        let due = start + Duration::from_secs_f64(n as f64 / RATE);
        tokio::time::sleep_until(due.into()).await;
    }
    latencies
}

pub(crate) async fn run() {
    let settings = ReportsScale::from_env();
    let started = Instant::now();
    let env = Env::start_with(
        "scale-reports",
        Options {
            audit_interval: Some(settings.interval),
            env: vec![("POD_DIRECTOR_REPORTS".to_owned(), "true".to_owned())],
            ..Options::default()
        },
    )
    .await;
    delete_crds(&env).await;
    create_nodes(&env, settings.nodes, 16).await;

    // 1. Namespaces and workloads, the CRD absent.
    let t = Instant::now();
    let mut namespaces = Vec::new();
    for n in 0..settings.namespaces {
        namespaces.push(
            env.create_namespace(Some(if n % 2 == 0 { ENFORCE } else { DRYRUN }))
                .await,
        );
    }
    for ns in &namespaces {
        k8s::wait_for_service_account(&env.client, ns, "default").await;
    }
    let created: Vec<()> = futures::stream::iter(namespaces.iter())
        .map(|ns| workloads(&env, ns, settings.workloads))
        .buffer_unordered(settings.concurrency)
        .collect()
        .await;
    let total = created.len() * settings.workloads;
    println!(
        "{} namespaces × {} workloads created in {:.1?}",
        namespaces.len(),
        settings.workloads,
        t.elapsed()
    );
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut seen = scans(&env).await.len();
    loop {
        let scan = next_scan(&env, seen, settings.interval).await;
        seen += 1;
        if scan["audit.pods"].as_u64().unwrap_or(0) as usize >= total {
            break;
        }
        assert!(Instant::now() < deadline, "no scan of {total} pods: {scan}");
    }

    // 2. The baseline interval (CRD absent), then the CRD installed and S + 1 scans.
    let mut snapshots = vec![apiserver_metrics(&env.client).await];
    next_scan(&env, seen, settings.interval).await;
    seen += 1;
    snapshots.push(apiserver_metrics(&env.client).await);
    install_crds(&env).await;
    let mut scan_ms = Vec::new();
    for _ in 0..=settings.scans {
        let scan = next_scan(&env, seen, settings.interval).await;
        seen += 1;
        scan_ms.push(scan["elapsed_ms"].as_u64().unwrap_or(0));
        snapshots.push(apiserver_metrics(&env.client).await);
    }
    let reports_written = report_count(&env).await;

    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n## Reports at scale: {} namespaces × {} workloads ({} pods), audit every {:?}\n",
        settings.namespaces, settings.workloads, total, settings.interval
    );
    let _ = writeln!(
        out,
        "| interval | Report writes | Report reads | every API request in the interval (verb resource count) |\n|---|---|---|---|"
    );
    let baseline = requests(&snapshots[0], &snapshots[1]);
    let (w, r) = report_requests(&baseline);
    let _ = writeln!(
        out,
        "| one scan, CRD absent (baseline) | {w:.0} | {r:.0} | {} |",
        describe(&baseline)
    );
    // snapshots[2] is the end of the first scan after the install: scan k's writes are in (k, k + 1].
    for k in 0..settings.scans {
        let delta = requests(&snapshots[2 + k], &snapshots[3 + k]);
        let (w, r) = report_requests(&delta);
        let label = if k == 0 {
            "first scan after the install".to_owned()
        } else {
            format!("scan {} (steady state)", k + 1)
        };
        let _ = writeln!(out, "| {label} | {w:.0} | {r:.0} | {} |", describe(&delta));
    }
    let _ = writeln!(
        out,
        "\nreports in the cluster: {reports_written}; scan times {scan_ms:?} ms"
    );

    // 3. Latency rounds: reports on, off, off, on, …
    let length = settings.interval * 2 + Duration::from_secs(2);
    let (mut on, mut off) = (Vec::new(), Vec::new());
    let mut reports_on = true;
    for i in 0..settings.rounds {
        let want_on = matches!(i % 4, 0 | 3);
        if want_on != reports_on {
            if want_on {
                install_crds(&env).await;
                let deadline = Instant::now() + Duration::from_secs(300);
                while report_count(&env).await < settings.namespaces {
                    assert!(Instant::now() < deadline, "the reports not rewritten after 300 s");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            } else {
                delete_crds(&env).await;
            }
            reports_on = want_on;
        }
        // dryRun: decided at both webhooks, scheduled on the untainted pools (room for every round).
        let ns = env.namespace(Some(DRYRUN)).await;
        let latencies = round(&env, &ns, i, length, settings.concurrency).await;
        println!(
            "round {i} (reports {}): {} CREATEs",
            if want_on { "on" } else { "off" },
            latencies.len()
        );
        if want_on {
            on.extend(latencies)
        } else {
            off.extend(latencies)
        }
    }
    on.sort();
    off.sort();
    let secs = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
    let _ = writeln!(
        out,
        "\n| pod CREATE, this client ({} in flight) | reports on | reports off | ratio |\n|---|---|---|---|",
        settings.concurrency
    );
    let _ = writeln!(out, "| CREATEs | {} | {} | |", on.len(), off.len());
    for (label, q) in [("p50", 0.5), ("p95", 0.95)] {
        let (a, b) = (quantile(&on, q), quantile(&off, q));
        let _ = writeln!(out, "| {label} | {} | {} | {} |", ms(a), ms(b), ratio(secs(a), secs(b)));
    }
    let _ = writeln!(out, "\nwhole run {:.1?}", started.elapsed());
    println!("{out}");
    if let Some(path) = super::harness::env_var("E2E_SCALE_REPORT") {
        std::fs::write(&path, &out).unwrap_or_else(|e| panic!("cannot write {path}: {e}"));
    }
}
