//! Load harness: drives `POST /mutate` over TLS with keep-alive connections at
//! several concurrency levels, for a dryRun and an enforce group, and compares
//! pod-director with a *floor*: a server on the same stack (tokio-rustls,
//! hyper-util auto builder, the same warp routing and body handling) that
//! answers a canned AdmissionReview without reviewing anything.
//!
//! ```sh
//! cargo bench --bench load                                   # defaults below
//! cargo bench --bench load -- --rounds 5 --duration 5 --pod large --concurrency 1,32
//! cargo bench --bench load -- --http2                        # one HTTP/2 connection, N streams
//! ```
//!
//! Each server runs in its own process (this binary, re-executed), so its
//! resident memory and CPU time are its own: pod-director is
//! `app::start` with a [`StaticNamespaces`] cache and JSON decision logs
//! written to a file, exactly as `pod-director serve` runs minus the
//! Kubernetes client; the floor is `pod_director::testing::start_canned`. Both trust a
//! certificate made here with the test PKI (crates/testkit/src/pki.rs) and listen on 127.0.0.1 only.
//!
//! `--no-telemetry` runs pod-director without a tracing subscriber (no span,
//! no decision log line): the difference is what observability costs.
//! `POD_DIRECTOR_LOAD_WRAPPER` starts both servers under a command, e.g.
//! `valgrind --tool=callgrind --toggle-collect=*server::serve::*` for the
//! instructions each spends per request (connection tasks only).
//!
//! Every round measures, for each group and concurrency level, the floor and
//! pod-director back to back (alternating which goes first), so both see the
//! same background load; the summary gives the median over rounds and the
//! median of the per-round ratios. Closed loop: each connection (or HTTP/2
//! stream) sends its next review when the previous answer has arrived.
//! Latency is from sending the request to reading the whole response body.
//! CPU per request comes from /proc (clock ticks), "other" is CPU used by
//! processes other than the servers and this load generator, in cores.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::Read as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use pod_director::admission::{self, Reviewed};
use pod_director::server::{self, Settings, TlsFiles};
use pod_director::telemetry::{self, LogFormat};
use pod_director::testing::StaticNamespaces;
use pod_director_engine::config::Config;
use pod_director_engine::decision::Write;
use pod_director_engine::placement::{self, Namespace, Webhook};
use pod_director_engine::testing::decide_pod;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::{self, pki_types::CertificateDer, pki_types::ServerName};

use pod_director_testkit::pki::Pki;
use pod_director_testkit::pods;
use pod_director_testkit::stats;

use stats::median;

/// Set in a re-executed child: which server it runs (`pod-director` | `floor`).
const ROLE_VAR: &str = "POD_DIRECTOR_LOAD_ROLE";
/// Set in a re-executed child: the directory with the certificate, config and canned answers.
const DIR_VAR: &str = "POD_DIRECTOR_LOAD_DIR";
/// Set in a re-executed child: run without a tracing subscriber (no decision log lines).
const NO_TELEMETRY_VAR: &str = "POD_DIRECTOR_LOAD_NO_TELEMETRY";
/// A command (and arguments) the servers are started under, e.g. a profiler.
const WRAPPER_VAR: &str = "POD_DIRECTOR_LOAD_WRAPPER";
const LABEL: &str = "pod-director/group";
/// A group measured: its mode's name, the config group and the namespace selecting it.
#[derive(Debug, Clone, Copy)]
struct Group {
    mode: &'static str,
    group: &'static str,
    namespace: &'static str,
}

const GROUPS: [Group; 2] = [
    Group {
        mode: "dryRun",
        group: "shadow",
        namespace: "team-dryrun",
    },
    Group {
        mode: "enforce",
        group: "ci",
        namespace: "team-enforce",
    },
];

/// `cargo bench --bench load -- [OPTIONS]`
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "load",
    about = "POST /mutate over TLS: pod-director against a no-work floor server"
)]
struct Options {
    /// Seconds measured per group, concurrency and server.
    #[arg(long, default_value = "3", value_parser = seconds)]
    duration: Duration,
    /// Seconds of warm-up before each measurement.
    #[arg(long, default_value = "0.5", value_parser = seconds)]
    warmup: Duration,
    /// Rounds; the summary gives medians over them.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..))]
    rounds: u16,
    /// Connections (or HTTP/2 streams), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,8,32,64", value_parser = clap::value_parser!(u16).range(1..))]
    concurrency: Vec<u16>,
    /// Groups measured, by mode: dryRun and/or enforce.
    #[arg(long, value_delimiter = ',', default_value = "dryRun,enforce", value_parser = group)]
    groups: Vec<Group>,
    /// The pod reviewed.
    #[arg(long, default_value = "typical", value_parser = pods::SIZES)]
    pod: String,
    /// Most requests per measurement.
    #[arg(long, default_value_t = 2_000_000)]
    max_requests: u64,
    /// Threads of the load generator.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..))]
    client_threads: u16,
    /// One HTTP/2 connection with N streams instead of N HTTP/1.1 connections.
    #[arg(long)]
    http2: bool,
    /// Where pod-director writes its decision log (default: a temporary file).
    #[arg(long)]
    log: Option<PathBuf>,
    /// pod-director without a tracing subscriber: no span, no decision log line.
    #[arg(long)]
    no_telemetry: bool,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

fn seconds(value: &str) -> Result<Duration, String> {
    value
        .parse::<f64>()
        .ok()
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .ok_or_else(|| format!("{value:?} is not a number of seconds"))
}

fn group(value: &str) -> Result<Group, String> {
    GROUPS
        .iter()
        .find(|known| known.mode.eq_ignore_ascii_case(value.trim()))
        .copied()
        .ok_or_else(|| format!("unknown group {value:?}; use dryRun and/or enforce"))
}

fn main() {
    if let Ok(role) = std::env::var(ROLE_VAR) {
        let dir = PathBuf::from(std::env::var(DIR_VAR).expect("the parent sets the directory"));
        child(&role, &dir);
        return;
    }
    run(&<Options as clap::Parser>::parse());
}

// ---------------------------------------------------------------------------------------------
// The servers (children)

/// Runs one server until standard input closes (the parent exits or drops it).
fn child(role: &str, dir: &Path) {
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    runtime.block_on(async {
        let tls = TlsFiles {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        };
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        let max_body_bytes = 4 * 1024 * 1024;
        let mut addrs = BTreeMap::new();
        let mut stop: Vec<Box<dyn FnOnce() -> futures::future::BoxFuture<'static, ()>>> = Vec::new();
        let mut installed = None;
        match role {
            "pod-director" => {
                if std::env::var_os(NO_TELEMETRY_VAR).is_none() {
                    installed = Some(telemetry::init(LogFormat::Json).expect("telemetry"));
                }
                let namespaces = Arc::new(StaticNamespaces::new());
                for group in GROUPS {
                    namespaces.insert(
                        group.namespace,
                        BTreeMap::from([(LABEL.to_owned(), group.group.to_owned())]),
                    );
                }
                let settings = Settings {
                    config_path: dir.join("config.yaml"),
                    addr: any,
                    probe_addr: any,
                    tls: Some(tls),
                    own_namespace: Some("pod-director".to_owned()),
                    request_timeout: Duration::from_secs(8),
                    max_body_bytes,
                    reload_poll_interval: Duration::from_secs(10),
                    shutdown_timeout: Duration::from_secs(5),
                    timeouts: server::Timeouts::default(),
                    max_connections: None,
                };
                let running = pod_director::app::start(settings, namespaces)
                    .await
                    .expect("pod-director starts");
                for group in GROUPS {
                    addrs.insert(group.mode, running.addr);
                }
                stop.push(Box::new(move || Box::pin(running.shutdown())));
            }
            "floor" => {
                for group in GROUPS {
                    let canned = std::fs::read(dir.join(format!("canned-{}.json", group.mode))).expect("canned");
                    let floor = pod_director::testing::start_canned(any, &tls, max_body_bytes, Bytes::from(canned))
                        .await
                        .expect("floor starts");
                    addrs.insert(group.mode, floor.addr);
                    stop.push(Box::new(move || Box::pin(floor.shutdown())));
                }
            }
            other => panic!("unknown role {other:?}"),
        }
        let listing: String = addrs.iter().map(|(mode, addr)| format!("{mode} {addr}\n")).collect();
        let ready = dir.join(format!("{role}.addr"));
        std::fs::write(ready.with_extension("tmp"), listing).expect("write addresses");
        std::fs::rename(ready.with_extension("tmp"), &ready).expect("publish addresses");
        // Standard input closes when the parent is done (or gone).
        let _ = tokio::task::spawn_blocking(|| std::io::stdin().read_to_end(&mut Vec::new())).await;
        for stop in stop {
            stop().await;
        }
        if let Some(installed) = installed {
            installed.shutdown();
        }
    });
}

/// A server process and where it serves each group.
struct Server {
    name: &'static str,
    child: Child,
    addrs: BTreeMap<String, SocketAddr>,
}

impl Server {
    fn spawn(role: &'static str, dir: &Path, log: &Path, telemetry: bool) -> Self {
        let exe = std::env::current_exe().expect("own path");
        // e.g. `valgrind --tool=callgrind --toggle-collect=*server::serve::*`: a profiler around each server.
        let wrapper = std::env::var(WRAPPER_VAR).unwrap_or_default();
        let mut words = wrapper.split_whitespace();
        let mut command = match words.next() {
            Some(program) => {
                let mut command = Command::new(program);
                command.args(words).arg(&exe);
                command
            }
            None => Command::new(&exe),
        };
        if !telemetry {
            command.env(NO_TELEMETRY_VAR, "1");
        }
        let child = command
            .env(ROLE_VAR, role)
            .env(DIR_VAR, dir)
            .env("RUST_LOG", "info")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .stdin(Stdio::piped())
            .stdout(File::create(log).expect("log file"))
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn server");
        let ready = dir.join(format!("{role}.addr"));
        let deadline = Instant::now() + Duration::from_secs(120);
        while !ready.exists() {
            assert!(Instant::now() < deadline, "{role} did not start within 120 s");
            std::thread::sleep(Duration::from_millis(10));
        }
        let addrs = std::fs::read_to_string(&ready)
            .expect("addresses")
            .lines()
            .filter_map(|line| {
                let (mode, addr) = line.split_once(' ')?;
                Some((mode.to_owned(), addr.parse().ok()?))
            })
            .collect();
        Self {
            name: role,
            child,
            addrs,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn stop(mut self) {
        drop(self.child.stdin.take());
        // Generous: a profiler writes its data on the way out.
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// /proc

/// Resident memory of `pid` in KiB (VmRSS).
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// User + system CPU time of `pid` (or "self"), in clock ticks (1/100 s on Linux).
fn cpu_ticks(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
            let rest = &stat[stat.rfind(')')? + 2..];
            let fields: Vec<&str> = rest.split_whitespace().collect();
            Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
        })
        .unwrap_or(0)
}

/// Busy CPU time of the whole machine, in clock ticks.
fn machine_busy_ticks() -> u64 {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|stat| {
            let fields: Vec<u64> = stat
                .lines()
                .next()?
                .split_whitespace()
                .skip(1)
                .filter_map(|f| f.parse().ok())
                .collect();
            // user nice system idle iowait irq softirq steal: busy = all but idle and iowait.
            Some(fields.iter().take(8).sum::<u64>() - fields.get(3)? - fields.get(4)?)
        })
        .unwrap_or(0)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

const TICKS_PER_SECOND: f64 = 100.0;

#[derive(Debug, Clone, Copy)]
struct CpuSnapshot {
    server: u64,
    client: u64,
    machine: u64,
    at: Instant,
}

impl CpuSnapshot {
    fn take(server_pid: u32) -> Self {
        Self {
            server: cpu_ticks(&server_pid.to_string()),
            client: cpu_ticks("self"),
            machine: machine_busy_ticks(),
            at: Instant::now(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The load generator

/// One measurement: a server, a group, a concurrency level.
#[derive(Debug, Clone)]
struct Sample {
    requests: u64,
    errors: u64,
    throughput: f64,
    p50_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
    max_ms: f64,
    server_cpu_us: f64,
    client_cpu_us: f64,
    other_cores: f64,
    peak_rss_kib: u64,
}

/// Sends one review and reads the whole answer; `Ok(status)` or the transport error.
enum Sender {
    Http1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    Http2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

impl Sender {
    async fn send(&mut self, request: http::Request<Full<Bytes>>) -> Result<(u16, Bytes), String> {
        let response = match self {
            Sender::Http1(sender) => {
                sender.ready().await.map_err(|e| e.to_string())?;
                sender.send_request(request).await
            }
            Sender::Http2(sender) => {
                sender.ready().await.map_err(|e| e.to_string())?;
                sender.send_request(request).await
            }
        }
        .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok((status, body))
    }
}

struct Client {
    connector: TlsConnector,
    http2: bool,
}

impl Client {
    fn new(ca: &CertificateDer<'static>, http2: bool) -> Self {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.clone()).expect("CA certificate");
        let mut config =
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .expect("TLS versions")
                .with_root_certificates(roots)
                .with_no_client_auth();
        config.alpn_protocols = vec![if http2 { b"h2".to_vec() } else { b"http/1.1".to_vec() }];
        Self {
            connector: TlsConnector::from(Arc::new(config)),
            http2,
        }
    }

    async fn connect(&self, addr: SocketAddr) -> Sender {
        let tcp = TcpStream::connect(addr).await.expect("connect");
        tcp.set_nodelay(true).expect("TCP_NODELAY");
        let name = ServerName::IpAddress(addr.ip().into());
        let tls = self.connector.connect(name, tcp).await.expect("TLS handshake");
        let io = TokioIo::new(tls);
        if self.http2 {
            let (sender, connection) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                .await
                .expect("HTTP/2 handshake");
            tokio::spawn(connection);
            Sender::Http2(sender)
        } else {
            let (sender, connection) = hyper::client::conn::http1::handshake(io)
                .await
                .expect("HTTP/1.1 handshake");
            tokio::spawn(connection);
            Sender::Http1(sender)
        }
    }

    /// Opens the connections for `concurrency` workers: one each over HTTP/1.1, one shared over HTTP/2.
    async fn senders(&self, addr: SocketAddr, concurrency: usize) -> Vec<Sender> {
        if self.http2 {
            let Sender::Http2(shared) = self.connect(addr).await else {
                unreachable!("an HTTP/2 connection")
            };
            (0..concurrency).map(|_| Sender::Http2(shared.clone())).collect()
        } else {
            futures::future::join_all((0..concurrency).map(|_| self.connect(addr))).await
        }
    }
}

fn request(addr: SocketAddr, http2: bool, body: Bytes) -> http::Request<Full<Bytes>> {
    let uri = if http2 {
        format!("https://{addr}/mutate")
    } else {
        "/mutate".to_owned()
    };
    let mut builder = http::Request::post(uri).header(http::header::CONTENT_TYPE, "application/json");
    if !http2 {
        builder = builder.header(http::header::HOST, addr.to_string());
    }
    builder.body(Full::new(body)).expect("request")
}

struct Worker {
    histogram: Histogram<u64>,
    requests: u64,
    errors: u64,
    first_error: Option<String>,
    finished: Instant,
}

async fn measure(
    client: &Client,
    server: &Server,
    group: Group,
    concurrency: usize,
    bodies: &Arc<Vec<Bytes>>,
    options: &Options,
) -> Sample {
    let addr = server.addrs[group.mode];
    let senders = client.senders(addr, concurrency).await;
    let started = Instant::now();
    let warm = started + options.warmup;
    let end = warm + options.duration;
    let issued = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = senders
        .into_iter()
        .enumerate()
        .map(|(index, mut sender)| {
            let bodies = bodies.clone();
            let issued = issued.clone();
            let (http2, max) = (options.http2, options.max_requests);
            tokio::spawn(async move {
                let mut worker = Worker {
                    histogram: Histogram::new_with_bounds(1, 60_000_000, 3).expect("histogram"),
                    requests: 0,
                    errors: 0,
                    first_error: None,
                    finished: Instant::now(),
                };
                let mut next = index;
                loop {
                    let sent = Instant::now();
                    if sent >= end || issued.fetch_add(1, Ordering::Relaxed) >= max {
                        break;
                    }
                    let body = bodies[next % bodies.len()].clone();
                    next += concurrency;
                    let result = sender.send(request(addr, http2, body)).await;
                    let latency = sent.elapsed();
                    let ok = matches!(&result, Ok((200, body)) if !body.is_empty());
                    if !ok {
                        worker.errors += 1;
                        if worker.first_error.is_none() {
                            worker.first_error = Some(match result {
                                Ok((status, body)) => format!("HTTP {status}: {}", String::from_utf8_lossy(&body)),
                                Err(error) => error,
                            });
                        }
                        if matches!(sender, Sender::Http1(ref s) if s.is_closed()) {
                            break;
                        }
                    }
                    if sent >= warm {
                        worker.requests += 1;
                        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX).max(1);
                        let _ = worker.histogram.record(micros);
                    }
                }
                worker.finished = Instant::now();
                worker
            })
        })
        .collect();

    // CPU counters at the end of the warm-up; peak memory while it runs.
    tokio::time::sleep_until(warm.into()).await;
    let before = CpuSnapshot::take(server.pid());
    let pid = server.pid();
    let sampler = tokio::spawn(async move {
        let mut peak = rss_kib(pid);
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            peak = peak.max(rss_kib(pid));
            if Instant::now() >= end {
                return peak;
            }
        }
    });
    let mut histogram = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram");
    let (mut requests, mut errors, mut finished, mut first_error) = (0, 0, warm, None);
    for worker in workers {
        let worker = worker.await.expect("worker");
        histogram.add(&worker.histogram).expect("same bounds");
        requests += worker.requests;
        errors += worker.errors;
        finished = finished.max(worker.finished);
        first_error = first_error.or(worker.first_error);
    }
    let after = CpuSnapshot::take(server.pid());
    let peak_rss_kib = sampler.await.unwrap_or(0);
    if let Some(error) = first_error {
        eprintln!(
            "  ! {} {} c={concurrency}: {errors} failed requests; first: {error}",
            server.name, group.mode
        );
    }
    let window = finished.saturating_duration_since(warm).as_secs_f64().max(1e-9);
    let cpu_window = after.at.saturating_duration_since(before.at).as_secs_f64().max(1e-9);
    let per_request = |ticks: u64| ticks as f64 / TICKS_PER_SECOND * 1e6 / requests.max(1) as f64;
    let server_ticks = after.server.saturating_sub(before.server);
    let client_ticks = after.client.saturating_sub(before.client);
    let other_ticks = after
        .machine
        .saturating_sub(before.machine)
        .saturating_sub(server_ticks + client_ticks);
    let ms = |q: f64| histogram.value_at_quantile(q) as f64 / 1000.0;
    Sample {
        requests,
        errors,
        throughput: requests as f64 / window,
        p50_ms: ms(0.5),
        p99_ms: ms(0.99),
        p999_ms: ms(0.999),
        max_ms: histogram.max() as f64 / 1000.0,
        server_cpu_us: per_request(server_ticks),
        client_cpu_us: per_request(client_ticks),
        other_cores: other_ticks as f64 / TICKS_PER_SECOND / cpu_window,
        peak_rss_kib,
    }
}

// ---------------------------------------------------------------------------------------------
// The run

/// The CA the load clients trust.
struct Trusted {
    ca_der: CertificateDer<'static>,
}

/// A CA and a serving certificate for 127.0.0.1/localhost, written to `dir`.
fn make_certificates(dir: &Path) -> Trusted {
    let ca = Pki::named("pod-director load CA");
    let leaf = ca.leaf("pod-director");
    std::fs::write(dir.join("tls.crt"), leaf.cert_pem).expect("write certificate");
    std::fs::write(dir.join("tls.key"), leaf.key_pem).expect("write key");
    Trusted {
        ca_der: CertificateDer::from(ca.ca_der()),
    }
}

/// Distinct reviews (uids) of the chosen pod for `group`, sent round-robin.
fn bodies(options: &Options, group: Group) -> Vec<Bytes> {
    let pod = pods::sized(&options.pod, group.namespace);
    let count = if options.pod == "large" { 16 } else { 128 };
    (0..count)
        .map(|i| Bytes::from(pods::review(&format!("00000000-0000-4000-8000-{i:012}"), &pod)))
        .collect()
}

/// What pod-director answers to `body` (computed in-process): the floor's canned answer.
fn canned(body: &[u8], group: Group) -> Vec<u8> {
    let loaded = Config::from_yaml(pods::CONFIG, "load", Vec::new()).expect("config");
    let parsed = admission::parse(Webhook::Mutate, body).expect("review parses");
    let Reviewed::Pod(Write::Create(pod)) = &parsed.subject else {
        panic!("a pod CREATE review")
    };
    let labels = BTreeMap::from([(LABEL.to_owned(), group.group.to_owned())]);
    let outcome = decide_pod(
        Webhook::Mutate,
        &loaded.config,
        &Namespace::new(group.namespace, &labels),
        pod,
        &placement::Context::from_user_info(&parsed.request.user_info),
    );
    admission::respond(&parsed.request.uid, &outcome, &loaded.revision)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Samples of one measurement: (group mode, concurrency, server name).
type Key = (&'static str, u16, &'static str);

/// What the servers need on disk, and the bodies the clients send.
struct Setup {
    /// Certificate, key, config and canned answers (the servers' `DIR_VAR`).
    dir: tempfile::TempDir,
    /// Log files, not next to the configuration and certificate: their directories are watched.
    logs: tempfile::TempDir,
    /// pod-director's decision log.
    log: PathBuf,
    pki: Trusted,
    bodies: BTreeMap<&'static str, Arc<Vec<Bytes>>>,
}

fn run(options: &Options) {
    let setup = prepare(options);
    print_plan(options, &setup);
    let started = Instant::now();
    let floor = Server::spawn("floor", setup.dir.path(), &setup.logs.path().join("floor.log"), true);
    let director = Server::spawn("pod-director", setup.dir.path(), &setup.log, !options.no_telemetry);
    std::thread::sleep(Duration::from_millis(500));
    let idle = (rss_kib(floor.pid()), rss_kib(director.pid()));
    println!(
        "idle RSS after start: floor {:.1} MiB, pod-director {:.1} MiB",
        mib(idle.0),
        mib(idle.1)
    );
    let samples = measure_rounds(options, &setup, [&floor, &director]);
    let after_load = (rss_kib(floor.pid()), rss_kib(director.pid()));
    floor.stop();
    director.stop();
    summarize(options, &samples);
    println!(
        "\nRSS: pod-director {:.1} MiB idle after start, {:.1} MiB idle after load; floor {:.1} → {:.1} MiB",
        mib(idle.1),
        mib(after_load.1),
        mib(idle.0),
        mib(after_load.0)
    );
    let (log_bytes, log_lines) = std::fs::read(&setup.log)
        .map(|text| (text.len(), text.iter().filter(|&&b| b == b'\n').count()))
        .unwrap_or_default();
    let (requests, errors) = samples
        .values()
        .flatten()
        .fold((0, 0), |(r, e), s| (r + s.requests, e + s.errors));
    println!(
        "{requests} requests measured, {errors} failed; decision log {:.1} MiB, {log_lines} lines ({:.0} B/line); {:.0} s; load average {} at end",
        log_bytes as f64 / 1048576.0,
        log_bytes as f64 / log_lines.max(1) as f64,
        started.elapsed().as_secs_f64(),
        load_average()
    );
}

/// Writes the certificate, the config and the floor's canned answers; builds the bodies.
fn prepare(options: &Options) -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = make_certificates(dir.path());
    std::fs::write(dir.path().join("config.yaml"), pods::CONFIG).expect("write config");
    let bodies: BTreeMap<&str, Arc<Vec<Bytes>>> =
        GROUPS.iter().map(|g| (g.mode, Arc::new(bodies(options, *g)))).collect();
    for group in GROUPS {
        let answer = canned(&bodies[group.mode][0], group);
        std::fs::write(dir.path().join(format!("canned-{}.json", group.mode)), answer).expect("write canned");
    }
    let logs = tempfile::tempdir().expect("tempdir");
    let log = options
        .log
        .clone()
        .unwrap_or_else(|| logs.path().join("pod-director.log"));
    Setup {
        dir,
        logs,
        log,
        pki,
        bodies,
    }
}

fn print_plan(options: &Options, setup: &Setup) {
    println!(
        "load: {} pod ({} B request), {} × {:?} after {:?} warm-up per measurement, {} round(s), {}, {} client thread(s)",
        options.pod,
        setup.bodies["enforce"][0].len(),
        options.concurrency.len() * options.groups.len() * 2,
        options.duration,
        options.warmup,
        options.rounds,
        if options.http2 {
            "HTTP/2: N streams on one connection"
        } else {
            "HTTP/1.1: N keep-alive connections"
        },
        options.client_threads
    );
    println!(
        "machine: {} CPUs, load average {} at start",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        load_average()
    );
}

/// Every round: for each group and concurrency, the floor and pod-director back to back
/// (alternating which goes first), each line printed as it is measured.
fn measure_rounds(options: &Options, setup: &Setup, [floor, director]: [&Server; 2]) -> BTreeMap<Key, Vec<Sample>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(usize::from(options.client_threads))
        .enable_all()
        .build()
        .expect("client runtime");
    let client = Client::new(&setup.pki.ca_der, options.http2);
    let mut samples: BTreeMap<Key, Vec<Sample>> = BTreeMap::new();
    println!(
        "\n{:<6} {:<8} {:>5} {:<12} {:>9} {:>8} {:>8} {:>9} {:>8} {:>9} {:>9} {:>6} {:>8}",
        "round",
        "group",
        "conc",
        "server",
        "req/s",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "srv µs/rq",
        "cli µs/rq",
        "other",
        "RSS MiB"
    );
    runtime.block_on(async {
        for round in 0..options.rounds {
            for &group in &options.groups {
                for &concurrency in &options.concurrency {
                    let order = if round % 2 == 0 {
                        [floor, director]
                    } else {
                        [director, floor]
                    };
                    for server in order {
                        let bodies = &setup.bodies[group.mode];
                        let sample = measure(&client, server, group, usize::from(concurrency), bodies, options).await;
                        print_sample(round, group, concurrency, server, &sample);
                        samples
                            .entry((group.mode, concurrency, server.name))
                            .or_default()
                            .push(sample);
                    }
                }
            }
        }
    });
    samples
}

fn print_sample(round: u16, group: Group, concurrency: u16, server: &Server, sample: &Sample) {
    println!(
        "{:<6} {:<8} {:>5} {:<12} {:>9.0} {:>8.3} {:>8.3} {:>9.3} {:>8.2} {:>9.1} {:>9.1} {:>6.2} {:>8.1}{}",
        round + 1,
        group.mode,
        concurrency,
        server.name,
        sample.throughput,
        sample.p50_ms,
        sample.p99_ms,
        sample.p999_ms,
        sample.max_ms,
        sample.server_cpu_us,
        sample.client_cpu_us,
        sample.other_cores,
        mib(sample.peak_rss_kib),
        if sample.errors > 0 {
            format!("  ({} errors)", sample.errors)
        } else {
            String::new()
        }
    );
}

/// The summary table: medians over rounds, and the median of the per-round ratios to the floor.
fn summarize(options: &Options, samples: &BTreeMap<Key, Vec<Sample>>) {
    println!(
        "\nsummary: median of {} round(s); ratio = median of per-round pod-director/floor throughput",
        options.rounds
    );
    let mut table = String::new();
    let _ = writeln!(
        table,
        "| group | conc. | floor req/s | pod-director req/s | ratio | p50 ms | p99 ms | p99.9 ms | floor p99 ms | CPU µs/review (floor) | peak RSS MiB |"
    );
    let _ = writeln!(table, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    for &group in &options.groups {
        for &concurrency in &options.concurrency {
            let pd = &samples[&(group.mode, concurrency, "pod-director")];
            let fl = &samples[&(group.mode, concurrency, "floor")];
            let of = |set: &[Sample], f: fn(&Sample) -> f64| median(set.iter().map(f).collect());
            let ratio = median(pd.iter().zip(fl).map(|(p, f)| p.throughput / f.throughput).collect());
            let _ = writeln!(
                table,
                "| {} | {} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.0} ({:.0}) | {:.1} |",
                group.mode,
                concurrency,
                of(fl, |s| s.throughput),
                of(pd, |s| s.throughput),
                ratio,
                of(pd, |s| s.p50_ms),
                of(pd, |s| s.p99_ms),
                of(pd, |s| s.p999_ms),
                of(fl, |s| s.p99_ms),
                of(pd, |s| s.server_cpu_us),
                of(fl, |s| s.server_cpu_us),
                mib(pd.iter().map(|s| s.peak_rss_kib).max().unwrap_or(0)),
            );
        }
    }
    print!("{table}");
}
