//! Memory and start-up at scale: what the namespace cache costs per namespace,
//! what the Node cache costs per node, and how long pod-director takes from
//! process start to `/readyz` 200.
//!
//! ```sh
//! cargo bench --bench scale                       # the stores fed directly (no cluster)
//!
//! cargo build --release                           # the binary measured below
//! export E2E_STATE_DIR="$(mktemp -d)"             # a cluster of its own: its namespaces are left behind
//! e2e/cluster.sh start && eval "$(e2e/cluster.sh env)"
//! cargo bench --bench scale -- --cluster          # + the release binary against that API server
//! e2e/cluster.sh stop
//! ```
//!
//! **Store**: namespaces shaped like the API server's metadata-only list items
//! (name, uid, resourceVersion, creationTimestamp, 4 labels) are applied to a
//! kube-runtime reflector store the way the watcher does it (Init, InitApply…,
//! InitDone); live heap bytes are counted by a counting allocator.
//!
//! **Node store**: 5 000 synthetic Nodes shaped like a managed cluster's
//! (15 labels, a pool taint on some, status with conditions and 25 cached
//! images: `pod_director_testkit::nodes`) are reduced to what placement keeps and
//! applied to the Node cache's store the way its watch does; live heap bytes
//! held by the store are counted (the decoded Nodes are dropped first).
//!
//! **Cluster** (`--cluster`, needs `KUBECONFIG`): creates `pd-scale-NNNNN`
//! namespaces (labels `pod-director/group`, `team`, `environment`, plus the
//! API server's own `kubernetes.io/metadata.name`) up to each count, then
//! starts `target/release/pod-director serve` several times per count and
//! reports the median of: process start → `/readyz` 200, the cache list time
//! (from the log line timestamps), and resident memory 2 s after ready. The
//! namespaces are not deleted: use a throwaway cluster.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams, PartialObjectMeta, PostParams};
use kube::runtime::reflector;
use kube::runtime::watcher::Event;
use serde_json::json;

use pod_director_testkit::alloc;

#[global_allocator]
static GLOBAL: alloc::Counting = alloc::Counting;

use pod_director_testkit::nodes;

const PREFIX: &str = "pd-scale-";
/// Nodes in the Node store measurement.
const NODES: usize = 5_000;
/// The Node cache's budget per node.
const NODE_BUDGET_BYTES: f64 = 2048.0;
const COUNTS: [usize; 2] = [1_000, 10_000];
const GROUPS: [&str; 3] = ["ci", "shadow", "gpu"];
const CONFIG: &str = "groups:\n  ci: {mode: enforce, nodeSelector: {node-pool: ci}}\n  shadow: {mode: dryRun, nodeSelector: {node-pool: ci}}\n  gpu: {mode: dryRun, nodeSelector: {node-pool: gpu}}\n";

type NamespaceMeta = PartialObjectMeta<Namespace>;

fn main() {
    let mut cluster = false;
    let mut runs = 3;
    let mut binary = pod_director_testkit::repo().join("target/release/pod-director");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--bench" => {}
            "--cluster" => cluster = true,
            "--runs" => runs = args.next().and_then(|v| v.parse().ok()).expect("--runs N"),
            "--binary" => binary = args.next().map(PathBuf::from).expect("--binary PATH"),
            other => {
                eprintln!(
                    "unknown argument {other:?}; usage: cargo bench --bench scale -- [--cluster] [--runs N] [--binary PATH]"
                );
                std::process::exit(2);
            }
        }
    }
    store();
    node_store();
    if cluster {
        let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
        runtime.block_on(in_cluster(&binary, runs));
    } else {
        println!("\n(add `-- --cluster` with KUBECONFIG set to measure the release binary against an API server)");
    }
}

/// A namespace as a metadata-only list returns it, managedFields and annotations already stripped.
fn namespace_meta(i: usize) -> NamespaceMeta {
    let name = format!("{PREFIX}{i:05}");
    serde_json::from_value(json!({
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadata",
        "metadata": {
            "name": name,
            "uid": format!("3f6c2a9e-1b7d-4c5e-9a8f-{i:012}"),
            "resourceVersion": format!("{}", 100_000 + i),
            "creationTimestamp": "2026-11-29T10:00:00Z",
            "labels": labels(&name, i),
        }
    }))
    .expect("valid PartialObjectMetadata")
}

fn labels(name: &str, i: usize) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("kubernetes.io/metadata.name".to_owned(), name.to_owned()),
        ("pod-director/group".to_owned(), GROUPS[i % GROUPS.len()].to_owned()),
        ("team".to_owned(), format!("team-{}", i % 97)),
        ("environment".to_owned(), ["dev", "staging", "prod"][i % 3].to_owned()),
    ])
}

fn rss_kib(pid: &str) -> u64 {
    status_field(pid, "VmRSS:")
}

fn status_field(pid: &str, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The reflector store fed directly: live heap bytes per namespace.
fn store() {
    println!("namespace cache, reflector store fed directly (heap bytes counted by allocator):");
    println!("| namespaces | heap held | per namespace | RSS growth |");
    println!("|--:|--:|--:|--:|");
    for count in COUNTS {
        let (rss_before, live_before) = (rss_kib("self"), alloc::heap().live);
        let items: Vec<NamespaceMeta> = (0..count).map(namespace_meta).collect();
        let (store, mut writer) = reflector::store::<NamespaceMeta>();
        writer.apply_watcher_event(&Event::Init);
        for item in items {
            writer.apply_watcher_event(&Event::InitApply(item));
        }
        writer.apply_watcher_event(&Event::InitDone);
        assert_eq!(store.len(), count);
        let held = alloc::heap().live - live_before;
        let rss = rss_kib("self").saturating_sub(rss_before);
        println!(
            "| {count} | {:.1} MiB | {:.0} B | {:.1} MiB |",
            held as f64 / 1048576.0,
            held as f64 / count as f64,
            rss as f64 / 1024.0
        );
        drop((store, writer));
    }
}

/// The Node cache's store fed directly: live heap bytes per node.
fn node_store() {
    use pod_director::cluster::NodeStore;
    use pod_director_engine::placement::NodeInfo;
    println!("\nNode cache, store fed directly (heap bytes counted by allocator):");
    let raw: Vec<k8s_openapi::api::core::v1::Node> = (0..NODES).map(nodes::node).collect();
    let raw_bytes = raw
        .iter()
        .map(|n| serde_json::to_vec(n).map(|v| v.len()).unwrap_or(0))
        .sum::<usize>();
    // Counted from here: the store, and what each conversion leaves behind in it (temporaries are freed).
    let live_before = alloc::heap().live;
    let store = NodeStore::new();
    for node in &raw {
        store.apply(NodeInfo::from_node(node));
    }
    let held = alloc::heap().live - live_before;
    drop(raw);
    assert_eq!(store.len(), NODES);
    let per_node = held as f64 / NODES as f64;
    println!("| nodes | Node JSON as listed (avg) | store heap held | per node | budget |");
    println!("|--:|--:|--:|--:|--:|");
    println!(
        "| {NODES} | {:.1} KiB | {:.2} MiB | {per_node:.0} B | {} B: {} |",
        raw_bytes as f64 / NODES as f64 / 1024.0,
        held as f64 / 1048576.0,
        NODE_BUDGET_BYTES,
        if per_node <= NODE_BUDGET_BYTES { "met" } else { "MISSED" }
    );
}

use pod_director_testkit::stats;

use stats::median;

/// Creates `pd-scale-*` namespaces until there are `count`.
async fn ensure_namespaces(api: &Api<Namespace>, count: usize) {
    let existing = api
        .list_metadata(&ListParams::default())
        .await
        .expect("list namespaces")
        .items
        .into_iter()
        .filter(|ns| ns.metadata.name.as_deref().is_some_and(|n| n.starts_with(PREFIX)))
        .count();
    if existing >= count {
        return;
    }
    let started = Instant::now();
    let created = futures::stream::iter(existing..count)
        .map(|i| async move {
            let name = format!("{PREFIX}{i:05}");
            let mut labels = labels(&name, i);
            labels.remove("kubernetes.io/metadata.name");
            let namespace: Namespace =
                serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).expect("namespace");
            match api.create(&PostParams::default(), &namespace).await {
                Ok(_) => true,
                Err(kube::Error::Api(status)) if status.code == 409 => true,
                Err(err) => panic!("create {name}: {err}"),
            }
        })
        .buffer_unordered(16)
        .filter(|ok| std::future::ready(*ok))
        .count()
        .await;
    println!(
        "  created {created} namespaces in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `GET path` on the probe port: the status code and body.
fn probe(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Some((status, body))
}

/// Seconds since midnight of a log line's RFC 3339 `timestamp`.
fn log_seconds(line: &serde_json::Value) -> Option<f64> {
    let time = line["timestamp"].as_str()?.split_once('T')?.1.trim_end_matches('Z');
    let mut parts = time.split(':');
    let h: f64 = parts.next()?.parse().ok()?;
    let m: f64 = parts.next()?.parse().ok()?;
    let s: f64 = parts.next()?.parse().ok()?;
    Some(h * 3600.0 + m * 60.0 + s)
}

struct Start {
    ready: Duration,
    list: f64,
    rss_kib: u64,
    anon_kib: u64,
    cached: u64,
}

/// Starts the release binary, waits for `/readyz` 200 and measures it.
fn start_once(binary: &Path, dir: &Path, expected: usize) -> Start {
    let probe_addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let log = dir.join("pod-director.log");
    let started = Instant::now();
    let mut child: Child = Command::new(binary)
        .args(["serve", "--config"])
        .arg(dir.join("config.yaml"))
        .arg("--tls-cert")
        .arg(dir.join("tls.crt"))
        .arg("--tls-key")
        .arg(dir.join("tls.key"))
        .args(["--addr", "127.0.0.1:0", "--probe-addr"])
        .arg(probe_addr.to_string())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).expect("log file"))
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start pod-director");
    let ready = loop {
        if let Some((200, _)) = probe(probe_addr, "/readyz") {
            break started.elapsed();
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("pod-director exited with {status}; see {}", log.display());
        }
        assert!(started.elapsed() < Duration::from_secs(120), "not ready within 120 s");
        std::thread::sleep(Duration::from_millis(5));
    };
    std::thread::sleep(Duration::from_secs(2));
    let pid = child.id().to_string();
    let (rss_kib, anon_kib) = (rss_kib(&pid), status_field(&pid, "RssAnon:"));
    let cached = probe(probe_addr, "/metrics")
        .and_then(|(_, body)| {
            body.lines()
                .find_map(|l| l.strip_prefix("pod_director_namespace_cache_size "))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0);
    assert!(
        cached >= expected as u64,
        "the cache holds {cached} namespaces, expected ≥ {expected}"
    );
    let _ = child.kill();
    let _ = child.wait();
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let at = |message: &str| lines.iter().find(|l| l["message"] == message).and_then(log_seconds);
    let list = match (at("pod-director serving"), at("namespace cache synced")) {
        (Some(serving), Some(synced)) => synced - serving,
        _ => f64::NAN,
    };
    Start {
        ready,
        list,
        rss_kib,
        anon_kib,
        cached,
    }
}

async fn in_cluster(binary: &Path, runs: usize) {
    assert!(
        binary.exists(),
        "{} not found: run `cargo build --release` first (or pass --binary)",
        binary.display()
    );
    let client = kube::Client::try_default()
        .await
        .expect("a Kubernetes client from KUBECONFIG (eval \"$(e2e/cluster.sh env)\")");
    let api: Api<Namespace> = Api::all(client);
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).expect("certificate");
    std::fs::write(dir.path().join("tls.crt"), cert.cert.pem()).expect("write certificate");
    std::fs::write(dir.path().join("tls.key"), cert.signing_key.serialize_pem()).expect("write key");
    std::fs::write(dir.path().join("config.yaml"), CONFIG).expect("write config");

    println!("\nrelease binary against the API server ({runs} starts per count, medians):");
    let mut rows = Vec::new();
    for count in [0].into_iter().chain(COUNTS) {
        ensure_namespaces(&api, count).await;
        let total = api
            .list_metadata(&ListParams::default())
            .await
            .expect("list namespaces")
            .items
            .len();
        let starts: Vec<Start> = (0..runs).map(|_| start_once(binary, dir.path(), total)).collect();
        let med = |f: fn(&Start) -> f64| median(starts.iter().map(f).collect());
        let row = (
            total,
            med(|s| s.ready.as_secs_f64() * 1000.0),
            med(|s| s.list * 1000.0),
            med(|s| s.rss_kib as f64 / 1024.0),
            med(|s| s.anon_kib as f64 / 1024.0),
            starts.iter().map(|s| s.cached).max().unwrap_or(0),
        );
        println!(
            "  {} namespaces: ready {:.0} ms (list {:.0} ms), RSS {:.1} MiB (anon {:.1} MiB), cache size {}",
            row.0, row.1, row.2, row.3, row.4, row.5
        );
        rows.push(row);
    }
    let base = rows.first().map(|r| r.3).unwrap_or(0.0);
    println!("\n| namespaces | start → /readyz 200 | cache list | RSS after ready | per namespace (vs empty) |");
    println!("|--:|--:|--:|--:|--:|");
    for (total, ready, list, rss, _, _) in &rows {
        let per = if *total > rows[0].0 {
            format!("{:.2} KiB", (rss - base) * 1024.0 / (total - rows[0].0) as f64)
        } else {
            "—".to_owned()
        };
        println!("| {total} | {ready:.0} ms | {list:.0} ms | {rss:.1} MiB | {per} |");
    }
}
