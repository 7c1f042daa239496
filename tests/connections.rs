//! Connection timers, the connection cap and the drain, in-process over real
//! TLS on loopback: silent, half-open and trickling connections (HTTP/1.1 and
//! HTTP/2) are closed within their timeout, and not before; slow requests are
//! not cut; connections beyond `--max-connections` are refused at accept
//! while established clients and the probe port keep being served; a
//! shutdown answers the requests that have arrived.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use pod_director::server::Timeouts;
use pod_director::testing::StaticNamespaces;
use pod_director::testing::harness::{Harness, Options, Slow, metric};
use pod_director_testkit::fixtures::{labels, pod_create, raw_request, review_bytes};
use pod_director_testkit::wire::{self, HTTP2_PREFACE_AND_SETTINGS, closed_within, has_goaway, tls_connect};
use pod_director_testkit::{assert_contains, eventually};
use serde_json::Value;
use tokio::io::AsyncWriteExt as _;

const CONFIG: &str = "groups:\n  ci:\n    mode: enforce\n    nodeSelector: {node-pool: ci}\n";

/// Short timers, each distinct, so a test sees which one closed the connection.
fn timeouts() -> Timeouts {
    Timeouts {
        handshake: Duration::from_millis(600),
        first_byte: Duration::from_millis(500),
        header_read: Duration::from_millis(700),
        idle: Duration::from_millis(900),
        http2_keepalive_interval: None,
        http2_keepalive_timeout: Duration::from_secs(10),
    }
}

async fn start(timeouts: Timeouts, max_connections: Option<usize>) -> Harness {
    let options = Options {
        timeouts,
        max_connections,
        ..Options::default()
    };
    let harness = Harness::start_with(CONFIG, options, None).await;
    harness.label("ns", "ci");
    harness
}

/// `pod_director_connection_timeouts_total` of `timeout`.
async fn timed_out(harness: &Harness, timeout: &str) -> Option<f64> {
    metric(
        harness,
        &format!("pod_director_connection_timeouts_total{{timeout=\"{timeout}\"}}"),
    )
    .await
}

/// Asserts that a connection was closed no earlier than `at_least` and no later than `at_least` + 1.5 s.
fn assert_closed_in(closed: Option<(Duration, Vec<u8>)>, at_least: Duration, what: &str) -> Vec<u8> {
    let Some((after, bytes)) = closed else {
        panic!("{what}: still open");
    };
    assert!(
        after + Duration::from_millis(50) >= at_least,
        "{what}: closed after {after:?}, before its {at_least:?} timeout"
    );
    assert!(
        after <= at_least + Duration::from_millis(1500),
        "{what}: closed only after {after:?}"
    );
    bytes
}

/// [`assert_closed_in`] of `stream`, read for at most 5 s.
async fn assert_closes_in<S: tokio::io::AsyncRead + Unpin>(stream: &mut S, at_least: Duration, what: &str) -> Vec<u8> {
    assert_closed_in(closed_within(stream, Duration::from_secs(5)).await, at_least, what)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_never_starts_tls_is_dropped_at_the_handshake_timeout() {
    let harness = start(timeouts(), None).await;
    let mut tcp = tokio::net::TcpStream::connect(harness.server.addr)
        .await
        .expect("connect");
    assert_closes_in(&mut tcp, timeouts().handshake, "no ClientHello").await;
    let mut half = tokio::net::TcpStream::connect(harness.server.addr)
        .await
        .expect("connect");
    // The first bytes of a ClientHello record, then nothing.
    half.write_all(&[0x16, 0x03, 0x01, 0x02]).await.expect("write");
    assert_closes_in(&mut half, timeouts().handshake, "half a ClientHello").await;
    assert_eq!(timed_out(&harness, "handshake").await, Some(2.0));
    harness.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_silent_after_tls_is_closed_at_the_first_byte_timeout() {
    let harness = start(timeouts(), None).await;
    for alpn in [&["h2"][..], &["http/1.1"], &[]] {
        let mut tls = tls_connect(harness.server.addr, &harness.pki, alpn).await;
        assert_closes_in(&mut tls, timeouts().first_byte, &format!("silent, ALPN {alpn:?}")).await;
    }
    assert_eq!(timed_out(&harness, "first_byte").await, Some(3.0));
    harness.server.shutdown().await;
}

/// Writes `bytes` one at a time, `every` apart, until the server closes the connection or they run out.
async fn trickle<S: tokio::io::AsyncWrite + Unpin>(stream: &mut S, bytes: &[u8], every: Duration) {
    for byte in bytes {
        if stream.write_all(&[*byte]).await.is_err() || stream.flush().await.is_err() {
            return;
        }
        tokio::time::sleep(every).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trickled_http1_headers_and_a_trickled_http2_preface_are_cut_at_the_header_read_timeout() {
    let harness = start(timeouts(), None).await;
    let head =
        b"POST /mutate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
    for (name, alpn, bytes) in [
        ("HTTP/1.1 headers", "http/1.1", &head[..]),
        ("the HTTP/2 preface", "h2", HTTP2_PREFACE_AND_SETTINGS),
    ] {
        let tls = tls_connect(harness.server.addr, &harness.pki, &[alpn]).await;
        let (mut read, mut write) = tokio::io::split(tls);
        let started = tokio::time::Instant::now();
        let writer = async {
            trickle(&mut write, bytes, Duration::from_millis(100)).await;
            // Then hold the connection open without sending more.
            std::future::pending::<()>().await;
        };
        let closed = tokio::select! {
            closed = closed_within(&mut read, Duration::from_secs(5)) => closed,
            () = writer => None,
        };
        let closed = closed.map(|(_, bytes)| (started.elapsed(), bytes));
        // The clock starts at the first byte, sent at once.
        assert_closed_in(closed, timeouts().header_read, name);
    }
    assert_eq!(timed_out(&harness, "header_read").await, Some(2.0));
    harness.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_client_that_sends_its_preface_and_settings_then_idles_is_closed() {
    let harness = start(timeouts(), None).await;
    let mut tls = tls_connect(harness.server.addr, &harness.pki, &["h2"]).await;
    tls.write_all(HTTP2_PREFACE_AND_SETTINGS).await.expect("preface");
    let bytes = assert_closes_in(&mut tls, timeouts().header_read, "preface, then nothing").await;
    assert!(has_goaway(&bytes), "the server says GOAWAY before closing: {bytes:?}");
    harness.server.shutdown().await;
}

/// A hyper client connection, HTTP/1.1 or HTTP/2.
enum Sender {
    Http1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    Http2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

impl Sender {
    fn send(
        &mut self,
        request: http::Request<Full<Bytes>>,
    ) -> BoxFuture<'static, hyper::Result<http::Response<hyper::body::Incoming>>> {
        match self {
            Sender::Http1(sender) => Box::pin(sender.send_request(request)),
            Sender::Http2(sender) => Box::pin(sender.send_request(request)),
        }
    }

    async fn ready(&mut self) {
        match self {
            Sender::Http1(sender) => sender.ready().await.expect("ready"),
            Sender::Http2(sender) => sender.ready().await.expect("ready"),
        }
    }
}

/// A client connection and a task that ends when the server closes it.
async fn hyper_client(harness: &Harness, http2: bool) -> (Sender, tokio::task::JoinHandle<()>) {
    let alpn = if http2 { "h2" } else { "http/1.1" };
    let tls = TokioIo::new(tls_connect(harness.server.addr, &harness.pki, &[alpn]).await);
    if http2 {
        let (sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), tls)
            .await
            .expect("HTTP/2 handshake");
        (
            Sender::Http2(sender),
            tokio::spawn(async move {
                let _ = conn.await;
            }),
        )
    } else {
        let (sender, conn) = hyper::client::conn::http1::handshake(tls)
            .await
            .expect("HTTP/1 handshake");
        (
            Sender::Http1(sender),
            tokio::spawn(async move {
                let _ = conn.await;
            }),
        )
    }
}

fn post(uid: &str, http2: bool) -> http::Request<Full<Bytes>> {
    let mut builder = http::Request::post("https://localhost/mutate").header("content-type", "application/json");
    if !http2 {
        builder = builder.header("host", "localhost");
    }
    builder
        .version(if http2 {
            http::Version::HTTP_2
        } else {
            http::Version::HTTP_11
        })
        .body(Full::new(Bytes::from(review_bytes(uid))))
        .expect("request")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_keep_alive_connections_are_closed_after_the_idle_timeout_and_not_before() {
    let harness = start(timeouts(), None).await;
    for http2 in [false, true] {
        let (mut sender, conn) = hyper_client(&harness, http2).await;
        // Requests closer together than the idle timeout keep the connection.
        for n in 0..3 {
            sender.ready().await;
            let response = sender.send(post(&format!("u-{n}"), http2)).await.expect("answer");
            assert_eq!(response.status(), 200, "http2={http2}");
            let body = response.into_body().collect().await.expect("body").to_bytes();
            let body: Value = serde_json::from_slice(&body).expect("JSON");
            assert_eq!(body["response"]["uid"], format!("u-{n}"));
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        assert!(!conn.is_finished(), "http2={http2}: open while used");
        let idle_from = tokio::time::Instant::now();
        tokio::time::timeout(Duration::from_secs(5), conn)
            .await
            .expect("closed by the idle timeout")
            .expect("task");
        // The last request finished about 500 ms before `idle_from`.
        let after = idle_from.elapsed() + Duration::from_millis(500);
        assert!(
            after + Duration::from_millis(100) >= timeouts().idle,
            "http2={http2}: after {after:?}"
        );
        assert!(
            after <= timeouts().idle + Duration::from_millis(1500),
            "http2={http2}: after {after:?}"
        );
    }
    assert_eq!(timed_out(&harness, "idle").await, Some(2.0));
    harness.server.shutdown().await;
}

fn slow(delay: Duration) -> Arc<Slow> {
    let slow = Slow {
        inner: StaticNamespaces::new(),
        delay,
    };
    slow.inner.insert_remote("ns", labels(&[("pod-director/group", "ci")]));
    Arc::new(slow)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_slower_than_the_idle_and_header_timeouts_is_answered() {
    let options = Options {
        timeouts: timeouts(),
        ..Options::default()
    };
    let harness = Harness::start_with(CONFIG, options, Some(slow(Duration::from_millis(1800)))).await;
    for kind in [wire::ClientKind::Http1, wire::ClientKind::Pooled] {
        let client = wire::client(&harness.pki, kind);
        let response = client
            .post(format!("{}/mutate", harness.base))
            .header("content-type", "application/json")
            .body(review_bytes("u-slow"))
            .send()
            .await
            .expect("answered");
        assert_eq!(response.status(), 200);
        let body: Value = response.json().await.expect("JSON");
        assert_eq!(body["response"]["uid"], "u-slow");
    }
    harness.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_are_refused_at_accept_while_open_ones_and_probes_are_served() {
    let harness = start(Timeouts::default(), Some(6)).await;
    // An established client, served before and during the flood.
    let (mut established, _conn) = hyper_client(&harness, true).await;
    let mut held = Vec::new();
    for _ in 0..5 {
        held.push(tls_connect(harness.server.addr, &harness.pki, &["h2"]).await);
    }
    assert!(
        eventually(Duration::from_secs(2), || async {
            metric(&harness, "pod_director_connections_open").await == Some(6.0)
        })
        .await
    );
    for n in 0..20 {
        let mut tcp = tokio::net::TcpStream::connect(harness.server.addr)
            .await
            .expect("connect");
        let closed = closed_within(&mut tcp, Duration::from_secs(1)).await;
        let (after, _) = closed.unwrap_or_else(|| panic!("connection {n} beyond the cap is still open"));
        assert!(after < Duration::from_millis(500), "refused fast: {after:?}");
    }
    assert_eq!(
        metric(&harness, "pod_director_connections_rejected_total{reason=\"limit\"}").await,
        Some(20.0)
    );
    let response = established
        .send(post("u-held", true))
        .await
        .expect("the established client is served");
    assert_eq!(response.status(), 200);
    let healthz = reqwest::get(format!("{}/healthz", harness.probe)).await.expect("probe");
    assert_eq!(healthz.status(), 200);

    // Room again once connections close.
    drop(held);
    assert!(
        eventually(Duration::from_secs(2), || async {
            metric(&harness, "pod_director_connections_open").await == Some(1.0)
        })
        .await
    );
    let (status, body) = harness.post("/mutate", &pod_create("u-after", "ns")).await;
    assert_eq!(status, 200, "{body}");
    harness.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_answers_every_request_that_arrives_and_closes_idle_connections_once_quiet() {
    let harness = Harness::start_with(CONFIG, Options::default(), Some(slow(Duration::from_millis(400)))).await;
    // Connected, never used: closed by the drain once quiet.
    let mut idle = tls_connect(harness.server.addr, &harness.pki, &["h2"]).await;
    // Connected, writing its request 200 ms into the drain: still read and answered.
    let mut late = tls_connect(harness.server.addr, &harness.pki, &["http/1.1"]).await;
    // An HTTP/1.1 keep-alive connection, idle after one request.
    let (mut h1, _h1_conn) = hyper_client(&harness, false).await;
    h1.ready().await;
    assert_eq!(h1.send(post("u-first", false)).await.expect("first").status(), 200);
    // A fresh connection whose request is written but not yet answered when the shutdown starts.
    let mut raw = tls_connect(harness.server.addr, &harness.pki, &["http/1.1"]).await;
    let body = review_bytes("u-raw");
    let head = format!(
        "POST /mutate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    h1.ready().await;
    let second = h1.send(post("u-idle", false));
    raw.write_all(head.as_bytes()).await.expect("head");
    raw.write_all(&body).await.expect("body");
    raw.flush().await.expect("flush");
    tokio::time::sleep(Duration::from_millis(100)).await;

    let Harness { server, .. } = harness;
    let shutdown = tokio::spawn(server.shutdown());
    tokio::time::sleep(Duration::from_millis(200)).await;
    late.write_all(&raw_request("u-late")).await.expect("late request");
    let answer = second.await.expect("the keep-alive request is answered");
    assert_eq!(answer.status(), 200);
    assert_eq!(
        answer.headers().get("connection").map(|v| v.as_bytes()),
        Some(&b"close"[..])
    );
    let (_, bytes) = closed_within(&mut raw, Duration::from_secs(5))
        .await
        .expect("closed after answering");
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert_contains(&text, "u-raw");
    let (_, bytes) = closed_within(&mut late, Duration::from_secs(5))
        .await
        .expect("closed after answering");
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.starts_with("HTTP/1.1 200") && text.contains("u-late"), "{text}");
    let (after, _) = closed_within(&mut idle, Duration::from_secs(5))
        .await
        .expect("the idle connection is closed");
    assert!(after < Duration::from_secs(2), "{after:?}");
    tokio::time::timeout(Duration::from_secs(5), shutdown)
        .await
        .expect("the drain ends once connections are quiet")
        .expect("task");
}
