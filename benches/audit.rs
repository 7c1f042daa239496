//! `pod-director audit` at scale: wall time and peak memory of the release
//! binary auditing N pods in M namespaces of a real API server on loopback.
//!
//! ```sh
//! cargo build --release                            # the binary measured below
//! export E2E_STATE_DIR="$(mktemp -d)"              # a cluster of its own: the pods are left behind
//! e2e/cluster.sh start && eval "$(e2e/cluster.sh env)"
//! cargo bench --bench audit                        # 10 000 pods in 100 namespaces, 3 runs
//! cargo bench --bench audit -- --namespaces 10 --pods 50 --runs 5 --page-size 100
//! e2e/cluster.sh stop
//! ```
//!
//! Creates namespaces `pd-audit-NNN` (group `bench`) and `--pods` pods in each
//! (a typical pod: 2 containers with env, resources, probes; every tenth asks
//! for another pool, so enforce would refuse it), 32 creations in flight at
//! most, skipping what exists; then runs `pod-director audit -o json --quiet`
//! `--runs` times and reports, per run, the wall time and the peak resident
//! set of the audit process (`wait4`'s `ru_maxrss`). The API server's URL must
//! be a loopback address.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

const PREFIX: &str = "pd-audit-";
/// Most pod creations in flight.
const CONCURRENCY: usize = 32;
/// Longest the pod creation may take, whatever the counts.
const CREATE_BUDGET: Duration = Duration::from_secs(1800);

/// The configuration audited: the in-process paged cluster's (`benches/audit_memory.rs`), one
/// dryRun group `bench`.
const CONFIG: &str = pod_director::testing::PagedCluster::CONFIG;

struct Args {
    namespaces: usize,
    pods: usize,
    runs: usize,
    page_size: u32,
    binary: PathBuf,
}

fn parse() -> Args {
    let mut args = Args {
        namespaces: 100,
        pods: 100,
        runs: 3,
        page_size: 500,
        binary: pod_director_testkit::repo().join("target/release/pod-director"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--namespaces" => args.namespaces = value().parse().expect("--namespaces N"),
            "--pods" => args.pods = value().parse().expect("--pods N (per namespace)"),
            "--runs" => args.runs = value().parse().expect("--runs N"),
            "--page-size" => args.page_size = value().parse().expect("--page-size N"),
            "--binary" => args.binary = PathBuf::from(value()),
            "--bench" => {}
            other => panic!(
                "unknown argument {other:?}; usage: cargo bench --bench audit -- [--namespaces N] [--pods N] \
                 [--runs N] [--page-size N] [--binary PATH]"
            ),
        }
    }
    args
}

fn pod(name: &str, refused: bool) -> Pod {
    let env: Vec<Value> = (0..8)
        .map(|i| json!({"name": format!("SETTING_{i}"), "value": format!("value-{i}-of-a-typical-setting")}))
        .collect();
    let container = |name: &str| {
        json!({
            "name": name,
            "image": "registry.invalid/app:1.2.3",
            "ports": [{"containerPort": 8080, "name": "http"}],
            "env": env,
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 5},
        })
    };
    let mut spec = json!({"containers": [container("app"), container("sidecar")]});
    if refused {
        spec["nodeSelector"] = json!({"node-pool": "elsewhere"});
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "bench", "team": "bench", "version": "1"}},
        "spec": spec,
    }))
    .expect("a pod")
}

async fn ensure(client: &kube::Client, args: &Args) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let started = Instant::now();
    let mut work = Vec::new();
    for n in 0..args.namespaces {
        let name = format!("{PREFIX}{n:03}");
        let namespace: Namespace = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"pod-director/group": "bench"}}
        }))
        .expect("a namespace");
        match namespaces.create(&PostParams::default(), &namespace).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.is_already_exists() => {}
            Err(e) => panic!("namespace {name}: {e}"),
        }
        let have = Api::<Pod>::namespaced(client.clone(), &name)
            .list_metadata(&ListParams::default())
            .await
            .expect("pods listed")
            .items
            .len();
        if have < args.pods {
            work.extend((0..args.pods).map(|p| (name.clone(), p)));
        }
    }
    let total = work.len();
    let created = futures::stream::iter(work)
        .map(|(namespace, p)| {
            let api = Api::<Pod>::namespaced(client.clone(), &namespace);
            async move {
                match api
                    .create(&PostParams::default(), &pod(&format!("p-{p:04}"), p % 10 == 0))
                    .await
                {
                    Ok(_) => 1usize,
                    Err(kube::Error::Api(status)) if status.is_already_exists() => 0,
                    Err(e) => panic!("pod {namespace}/p-{p:04}: {e}"),
                }
            }
        })
        .buffer_unordered(CONCURRENCY)
        .take_while(|_| futures::future::ready(started.elapsed() < CREATE_BUDGET))
        .fold(0usize, |sum, n| futures::future::ready(sum + n))
        .await;
    println!(
        "{} namespaces, {} pods each: created {created} of {total} missing pods in {:.1} s",
        args.namespaces,
        args.pods,
        started.elapsed().as_secs_f64()
    );
}

/// Runs the audit once: wall time, peak RSS (KiB) of the child, and its report.
#[allow(unsafe_code)] // a system call the standard library lacks (SAFETY below)
fn run_once(args: &Args, config: &Path) -> (Duration, i64, Value) {
    let started = Instant::now();
    // Reaped below by wait4, which also gives its resource usage.
    #[allow(clippy::zombie_processes)]
    let child = Command::new(&args.binary)
        .args(["audit", "-o", "json", "--quiet", "--page-size"])
        .arg(args.page_size.to_string())
        .arg("--config")
        .arg(config)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the release binary starts");
    let pid = i32::try_from(child.id()).expect("a pid");
    let output = std::thread::spawn(move || {
        let mut stdout = child.stdout.expect("piped");
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut text).expect("stdout read");
        text
    });
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, which nothing else reaps.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4 failed");
    let elapsed = started.elapsed();
    let text = output.join().expect("reader thread");
    let report: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("audit printed no JSON: {e}\n{text}"));
    (elapsed, usage.ru_maxrss, report)
}

fn main() {
    let args = parse();
    assert!(
        args.binary.exists(),
        "{} not found: run `cargo build --release` first (or pass --binary)",
        args.binary.display()
    );
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let config = kube::Config::infer()
            .await
            .expect("a Kubernetes configuration from KUBECONFIG (eval \"$(e2e/cluster.sh env)\")");
        let host = config.cluster_url.host().unwrap_or_default().to_owned();
        assert!(
            matches!(host.as_str(), "127.0.0.1" | "localhost" | "[::1]" | "::1"),
            "the API server {} is not on loopback: this bench only loads a loopback cluster",
            config.cluster_url
        );
        let client = kube::Client::try_from(config).expect("a client");
        ensure(&client, &args).await;
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, CONFIG).expect("config written");
    println!("\n| run | pods audited | namespaces | wall time | peak RSS |");
    println!("|--:|--:|--:|--:|--:|");
    let mut times = Vec::new();
    let mut peaks = Vec::new();
    for run in 1..=args.runs {
        let (elapsed, peak_kib, report) = run_once(&args, &config);
        let pods = &report["scanned"]["pods"];
        let namespaces = &report["scanned"]["namespaces"];
        println!(
            "| {run} | {pods} | {namespaces} | {:.2} s | {:.1} MiB |",
            elapsed.as_secs_f64(),
            peak_kib as f64 / 1024.0
        );
        times.push(elapsed.as_secs_f64());
        peaks.push(peak_kib as f64 / 1024.0);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    println!(
        "\nmedian of {} runs: {:.2} s, peak RSS {:.1} MiB (page size {})",
        args.runs,
        median(times),
        median(peaks),
        args.page_size
    );
}
