//! Faults only a real process shows, against `pod-director serve` as a child
//! process (the binary, a fake Kubernetes API on loopback): SIGTERM in the
//! middle of a burst of clients, a low file-descriptor limit under a flood of
//! connections, and a standard output nobody reads.

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pod_director_testkit::child::{ServeProcess, Spawn};
use pod_director_testkit::fixtures::{pod_create, raw_request, review_bytes};
use pod_director_testkit::wire::{self, tls_connect};
use pod_director_testkit::{eventually, metric_value};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const CONFIG: &str = "groups:\n  ci:\n    mode: enforce\n    nodeSelector: {node-pool: ci}\n";

/// What happened to one client of the burst.
#[derive(Debug)]
struct Outcome {
    /// When its TCP connection was established (in the server's accept queue at least).
    connected: Option<Instant>,
    /// When its whole request had been written (None: it never got that far).
    written: Option<Instant>,
    /// Whether it read a 200 answer carrying its uid.
    answered: bool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_burst_of_200_clients_loses_no_request_that_was_fully_written() {
    let mut server = ServeProcess::start(CONFIG, Spawn::args(&["--shutdown-timeout", "10s"])).await;
    let addr = server.addr;
    let ca = Arc::new(server.pki.ca_pem());
    let start = Arc::new(tokio::sync::Barrier::new(201));
    let mut clients = Vec::new();
    for n in 0..200 {
        let start = start.clone();
        let ca = ca.clone();
        clients.push(tokio::spawn(async move {
            start.wait().await;
            let uid = format!("burst-{n:03}");
            let mut outcome = Outcome {
                connected: None,
                written: None,
                answered: false,
            };
            let Ok(Ok(tcp)) = tokio::time::timeout(Duration::from_secs(20), tokio::net::TcpStream::connect(addr)).await
            else {
                return outcome;
            };
            outcome.connected = Some(Instant::now());
            let Ok(mut tls) = tokio::time::timeout(Duration::from_secs(20), handshake(tcp, &ca)).await else {
                return outcome;
            };
            let Some(tls) = tls.as_mut() else {
                return outcome;
            };
            if tls.write_all(&raw_request(&uid)).await.is_err() || tls.flush().await.is_err() {
                return outcome;
            }
            outcome.written = Some(Instant::now());
            let mut answer = Vec::new();
            let read = tokio::time::timeout(Duration::from_secs(20), async {
                let mut buf = [0_u8; 8192];
                loop {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            answer.extend_from_slice(&buf[..n]);
                            let text = String::from_utf8_lossy(&answer);
                            if text.starts_with("HTTP/1.1 200") && text.contains(&uid) && text.ends_with('}') {
                                break;
                            }
                        }
                    }
                }
            })
            .await;
            let text = String::from_utf8_lossy(&answer);
            outcome.answered = read.is_ok() && text.starts_with("HTTP/1.1 200") && text.contains(&uid);
            outcome
        }));
    }
    start.wait().await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    let signalled = Instant::now();
    server.terminate();
    let mut outcomes = Vec::new();
    for client in clients {
        outcomes.push(client.await.expect("client task"));
    }
    let status = tokio::task::spawn_blocking(move || {
        let status = server.wait(Duration::from_secs(20));
        (status, server)
    })
    .await
    .expect("wait");
    let written_before = outcomes
        .iter()
        .filter(|o| o.written.is_some_and(|at| at < signalled))
        .count();
    let lost: Vec<_> = outcomes
        .iter()
        .enumerate()
        .filter(|(_, o)| o.written.is_some_and(|at| at < signalled) && !o.answered)
        .map(|(n, _)| n)
        .collect();
    let answered = outcomes.iter().filter(|o| o.answered).count();
    let written = outcomes.iter().filter(|o| o.written.is_some()).count();
    let connected_before = outcomes
        .iter()
        .filter(|o| o.connected.is_some_and(|at| at < signalled))
        .count();
    let lost_after: Vec<_> = outcomes
        .iter()
        .enumerate()
        .filter(|(_, o)| (o.written.is_some() || o.connected.is_some_and(|at| at < signalled)) && !o.answered)
        .map(|(n, _)| n)
        .collect();
    eprintln!(
        "SIGTERM burst: 200 clients, {written_before} requests fully written before the signal, \
         {connected_before} connected before it, {written} written in all, {answered} answered, \
         {} lost ({} written before the signal)",
        lost_after.len(),
        lost.len()
    );
    assert!(
        lost.is_empty(),
        "requests written before SIGTERM but not answered: {lost:?}"
    );
    // Stronger, and what the drain is built for: clients that connected before the signal (even if
    // still in the accept queue) finish their handshake and write during the drain, and are answered.
    assert!(
        lost_after.is_empty(),
        "clients connected before SIGTERM, or whose request was written, but not answered: {lost_after:?}"
    );
    assert!(
        written_before >= 20,
        "the burst must straddle the signal: {written_before} written before it"
    );
    assert!(
        status.0.is_some_and(|s| s.success()),
        "exits 0 after the drain: {:?}",
        status.0
    );
}

async fn handshake(
    tcp: tokio::net::TcpStream,
    ca: &str,
) -> Option<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from_pem_slice(ca.as_bytes()).ok()?)
        .ok()?;
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .ok()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let name = rustls::pki_types::ServerName::try_from("localhost").ok()?;
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_low_descriptor_limit_a_flood_is_refused_while_probes_and_a_connected_client_are_served() {
    // 256 descriptors: at most 256 - 96 = 160 admission connections.
    let server = ServeProcess::start(CONFIG, Spawn::args(&["--handshake-timeout", "60s"]).open_files(256)).await;
    let mut established = tls_connect(server.addr, &server.pki, &["http/1.1"]).await;
    let mut flood = Vec::new();
    for _ in 0..300 {
        match tokio::net::TcpStream::connect(server.addr).await {
            Ok(stream) => flood.push(stream),
            Err(err) => panic!("loopback connect failed: {err}"),
        }
    }
    // The server holds at most its cap; the rest is closed at accept.
    let mut refused = 0;
    for stream in &mut flood {
        let mut byte = [0_u8; 1];
        if let Ok(Ok(0) | Err(_)) = tokio::time::timeout(Duration::from_millis(20), stream.read(&mut byte)).await {
            refused += 1;
        }
    }
    let metrics = server.metrics().await;
    assert!(!metrics.is_empty(), "the probe port answers /metrics under the flood");
    let open = metric_value(&metrics, "pod_director_connections_open").unwrap_or_default();
    let rejected =
        metric_value(&metrics, "pod_director_connections_rejected_total{reason=\"limit\"}").unwrap_or_default();
    eprintln!("RLIMIT_NOFILE 256: 301 connections, {open} open, {rejected} refused at accept ({refused} seen closed)");
    assert_eq!(open, 160.0, "{metrics}");
    assert_eq!(rejected, 141.0, "{metrics}");
    assert!(refused >= 141, "{refused} flood connections seen closed");

    let healthz = reqwest::get(format!("http://{}/healthz", server.probe_addr))
        .await
        .expect("healthz");
    assert_eq!(healthz.status(), 200);
    established
        .write_all(&raw_request("u-established"))
        .await
        .expect("write");
    let mut answer = vec![0_u8; 16 * 1024];
    let n = tokio::time::timeout(Duration::from_secs(5), established.read(&mut answer))
        .await
        .expect("answered in time")
        .expect("read");
    let text = String::from_utf8_lossy(&answer[..n]);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");

    // Once the flood goes away, new clients are served again (while the server is still
    // closing the flood, a new connection may be refused at accept: try again).
    drop(flood);
    let served = eventually(Duration::from_secs(5), || async {
        let Ok(mut tls) = wire::try_tls_connect(server.addr, &server.pki, &["http/1.1"]).await else {
            return false;
        };
        if tls.write_all(&raw_request("u-after")).await.is_err() {
            return false;
        }
        let mut answer = vec![0_u8; 16 * 1024];
        matches!(
            tokio::time::timeout(Duration::from_secs(2), tls.read(&mut answer)).await,
            Ok(Ok(n)) if String::from_utf8_lossy(&answer[..n]).starts_with("HTTP/1.1 200")
        )
    })
    .await;
    assert!(served);
}

/// Latencies of `count` reviews over one keep-alive connection, sorted.
async fn latencies(server: &ServeProcess, count: usize) -> Vec<Duration> {
    let client = wire::client(&server.pki, wire::ClientKind::Http1);
    let url = format!("https://{}/mutate", server.addr);
    let mut out = Vec::with_capacity(count);
    for n in 0..count {
        let body = pod_create(&format!("lat-{n}"), "ns");
        let started = Instant::now();
        let response = tokio::time::timeout(Duration::from_secs(5), client.post(&url).json(&body).send())
            .await
            .unwrap_or_else(|_| panic!("review {n} not answered within 5 s"))
            .expect("answered");
        assert_eq!(response.status(), 200);
        let _ = response.bytes().await.expect("body");
        out.push(started.elapsed());
    }
    out.sort();
    out
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(at).copied().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standard_output_nobody_reads_leaves_reviews_and_healthz_answering() {
    let drained = ServeProcess::start(CONFIG, Spawn::args(&[])).await;
    let baseline = latencies(&drained, 500).await;
    drop(drained);

    let mut blocked = ServeProcess::start(CONFIG, Spawn::args(&[]).stdout(Stdio::piped())).await;
    // Held, never read: the pipe fills (64 KiB), then the log buffer (2 MiB of ~1.5 KB lines).
    let _stdout = blocked.child.stdout.take();
    let _fill = latencies(&blocked, 2500).await;
    let under = latencies(&blocked, 500).await;
    let started = Instant::now();
    let healthz = reqwest::get(format!("http://{}/healthz", blocked.probe_addr))
        .await
        .expect("healthz");
    assert_eq!(healthz.status(), 200);
    assert!(started.elapsed() < Duration::from_secs(1));
    let metrics = blocked.metrics().await;
    let dropped = metric_value(&metrics, "pod_director_log_lines_dropped_total").unwrap_or_default();
    eprintln!(
        "review latency over one keep-alive connection: stdout drained p50 {:?} p99 {:?}; \
         stdout blocked p50 {:?} p99 {:?}; {dropped} log lines dropped",
        percentile(&baseline, 0.5),
        percentile(&baseline, 0.99),
        percentile(&under, 0.5),
        percentile(&under, 0.99),
    );
    assert!(dropped > 0.0, "lines were dropped, not waited for: {metrics}");
    assert!(
        percentile(&under, 0.99) < percentile(&baseline, 0.99) * 5 + Duration::from_millis(20),
        "latency with a blocked stdout stays near normal"
    );
}

/// Resident memory of `pid`, in KiB.
fn rss_kib(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kib| kib.parse().ok())
        })
        .unwrap_or(0)
}

/// Raises this process's soft descriptor limit to its hard limit (the measurement opens many connections).
#[allow(unsafe_code)] // a system call the standard library lacks (SAFETY below)
fn raise_own_open_files_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit on a struct of our own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// The figures of docs/src/reliability.md: connections held at a soft RLIMIT_NOFILE of 1024 (containerd 2's
/// default), and resident memory per idle connection (TLS done, nothing sent; and HTTP/2 after one request).
/// `cargo test --release --test process_faults -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run it with --ignored --nocapture"]
async fn measure_idle_connections_tolerated_and_memory_per_idle_connection() {
    raise_own_open_files_limit();
    let server = ServeProcess::start(
        CONFIG,
        Spawn::args(&["--first-byte-timeout", "600s", "--idle-timeout", "600s"]).open_files(1024),
    )
    .await;
    // Warm up: the first connections allocate the runtime's and TLS's lasting buffers.
    for _ in 0..20 {
        let mut tls = tls_connect(server.addr, &server.pki, &["http/1.1"]).await;
        let _ = tls.write_all(&raw_request("warm")).await;
        let mut answer = vec![0_u8; 16 * 1024];
        let _ = tokio::time::timeout(Duration::from_secs(2), tls.read(&mut answer)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = rss_kib(server.pid());
    const SILENT: usize = 400;
    let mut held = Vec::new();
    for _ in 0..SILENT {
        held.push(tls_connect(server.addr, &server.pki, &["h2"]).await);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let silent = rss_kib(server.pid());
    const USED: usize = 400;
    let mut used = Vec::new();
    for n in 0..USED {
        let tls = hyper_util::rt::TokioIo::new(tls_connect(server.addr, &server.pki, &["h2"]).await);
        let (mut sender, conn) = hyper::client::conn::http2::handshake::<_, _, http_body_util::Full<bytes::Bytes>>(
            hyper_util::rt::TokioExecutor::new(),
            tls,
        )
        .await
        .expect("HTTP/2");
        let task = tokio::spawn(async move {
            let _ = conn.await;
        });
        let body = review_bytes(&format!("m-{n}"));
        let request = http::Request::post("https://localhost/mutate")
            .header("content-type", "application/json")
            .body(http_body_util::Full::new(bytes::Bytes::from(body)))
            .expect("request");
        let response = sender.send_request(request).await.expect("answered");
        assert_eq!(response.status(), 200);
        used.push((sender, task));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after_used = rss_kib(server.pid());
    // Up to the cap: 1024 - 96 = 928 connections in all; the rest is refused.
    let mut extra = Vec::new();
    for _ in 0..400 {
        if let Ok(stream) = tokio::net::TcpStream::connect(server.addr).await {
            extra.push(stream);
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let metrics = server.metrics().await;
    let open = metric_value(&metrics, "pod_director_connections_open").unwrap_or_default();
    let rejected =
        metric_value(&metrics, "pod_director_connections_rejected_total{reason=\"limit\"}").unwrap_or_default();
    let healthz = reqwest::get(format!("http://{}/healthz", server.probe_addr))
        .await
        .expect("healthz");
    eprintln!(
        "RLIMIT_NOFILE 1024: {open} connections held, {rejected} refused at accept, /healthz {}; \
         RSS {before} KiB idle, +{:.1} KiB per silent TLS connection ({SILENT}), \
         +{:.1} KiB per idle HTTP/2 connection after one review ({USED})",
        healthz.status(),
        (silent.saturating_sub(before)) as f64 / SILENT as f64,
        (after_used.saturating_sub(silent)) as f64 / USED as f64,
    );
    assert_eq!(open, 928.0);
}
