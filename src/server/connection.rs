//! One accepted connection, from accept to close: the connection cap, the TLS
//! handshake, the per-connection timers and the drain on shutdown.
//!
//! hyper-util's auto builder reads the HTTP/2 preface without a timer, and
//! hyper's HTTP/1 header-read timeout also runs while a keep-alive connection
//! waits for its next request (so it cannot be both a short header timeout
//! and a long idle timeout). So every connection has a watchdog of its own,
//! fed by what the connection does — bytes read ([`CountingIo`]) and
//! requests started and finished (the service) — that enforces:
//!
//! | timer | from → to | on expiry |
//! |---|---|---|
//! | handshake | accept → TLS established | dropped |
//! | first byte | TLS established → first byte read | closed |
//! | header read | first byte of a request → its head complete (HTTP/2: preface, SETTINGS and the first request) | closed |
//! | idle | last request finished → next request started | HTTP/1: closed; HTTP/2: GOAWAY |
//!
//! HTTP/2 connections also send keep-alive PINGs and close when one is not
//! answered in time (a vanished peer, even with a request in flight).
//! A connection closed by a timer is shut down gracefully (GOAWAY, or the
//! close after the response) and dropped if that does not finish within
//! [`CLOSE_GRACE`].
//!
//! ## Drain
//! When the server stops ([`Phase::Draining`]), connections are not cut:
//! a connection with a request in flight answers it (HTTP/1 with
//! `connection: close`, HTTP/2 after a GOAWAY); a connection without one — idle,
//! mid-handshake, or still reading a request that has arrived — keeps
//! reading until it has been quiet (no request in flight, no byte read) for
//! [`DRAIN_QUIET`], so a request written just before the signal is read and
//! answered, then closes. At the end of the grace window ([`Phase::Cut`])
//! what remains is dropped and counted as cut.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::server::conn::auto;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tracing::debug;

use super::Respond;
use crate::metrics::{label_set, register};

/// After a timer closed a connection gracefully, how long it may take to go away.
pub(crate) const CLOSE_GRACE: Duration = Duration::from_secs(1);
/// While draining, how long a connection must be quiet (no request, no byte) before it is closed.
pub(crate) const DRAIN_QUIET: Duration = Duration::from_millis(500);
/// How often a draining connection checks whether it is quiet.
const DRAIN_TICK: Duration = Duration::from_millis(50);

/// The per-connection timers (see the module docs); `serve` flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeouts {
    pub handshake: Duration,
    pub first_byte: Duration,
    pub header_read: Duration,
    pub idle: Duration,
    /// HTTP/2 PING interval; `None` sends none.
    pub http2_keepalive_interval: Option<Duration>,
    /// How long an HTTP/2 PING may go unanswered.
    pub http2_keepalive_timeout: Duration,
}

impl Default for Timeouts {
    /// The `serve` defaults.
    fn default() -> Self {
        Self {
            handshake: Duration::from_secs(10),
            first_byte: Duration::from_secs(10),
            header_read: Duration::from_secs(10),
            idle: Duration::from_secs(120),
            http2_keepalive_interval: Some(Duration::from_secs(30)),
            http2_keepalive_timeout: Duration::from_secs(10),
        }
    }
}

/// The server's phase, watched by every connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Serving,
    /// Shutting down: answer what has arrived, then close.
    Draining,
    /// The grace window is over: drop what remains.
    Cut,
}

/// The connections of one listener: how many are open, and what the drain did.
#[derive(Debug)]
pub(crate) struct Tracker {
    open: AtomicUsize,
    closed: Notify,
    gauge: Option<Gauge>,
    /// Refused connections are counted under this reason.
    rejection: Rejection,
    /// Requests answered after the drain began.
    pub answered: AtomicU64,
    /// Requests in flight on connections dropped at the end of the grace window.
    pub cut_requests: AtomicU64,
    /// Connections dropped at the end of the grace window.
    pub cut_connections: AtomicU64,
    /// Connections open when the drain began.
    pub draining_connections: AtomicU64,
    draining: AtomicBool,
}

impl Tracker {
    /// `gauge` follows the open connections (the admission port's `pod_director_connections_open`).
    pub(crate) fn new(gauge: Option<Gauge>, rejection: Rejection) -> Self {
        Self {
            open: AtomicUsize::new(0),
            closed: Notify::new(),
            gauge,
            rejection,
            answered: AtomicU64::new(0),
            cut_requests: AtomicU64::new(0),
            cut_connections: AtomicU64::new(0),
            draining_connections: AtomicU64::new(0),
            draining: AtomicBool::new(false),
        }
    }

    pub(crate) fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    pub(crate) fn rejection(&self) -> Rejection {
        self.rejection
    }

    /// Counts a new connection until the returned guard is dropped.
    pub(crate) fn enter(self: &Arc<Self>) -> Open {
        self.open.fetch_add(1, Ordering::SeqCst);
        if let Some(gauge) = &self.gauge {
            gauge.inc();
        }
        Open { tracker: self.clone() }
    }

    /// Marks the start of the drain.
    pub(crate) fn begin_drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        self.draining_connections.store(self.open() as u64, Ordering::SeqCst);
    }

    /// Resolves when no connection is open.
    pub(crate) async fn all_closed(&self) {
        loop {
            let notified = self.closed.notified();
            if self.open() == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// One open connection, counted by its [`Tracker`] until dropped.
#[derive(Debug)]
pub(crate) struct Open {
    tracker: Arc<Tracker>,
}

impl Drop for Open {
    fn drop(&mut self) {
        if let Some(gauge) = &self.tracker.gauge {
            gauge.dec();
        }
        if self.tracker.open.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.tracker.closed.notify_waiters();
        }
    }
}

/// What a connection has done, shared by its IO, its service and its watchdog.
#[derive(Debug)]
struct Activity {
    started: Instant,
    bytes_read: AtomicU64,
    /// Nanoseconds since `started` (+1) of the first byte of a request head not yet complete; 0 when none.
    head_started: AtomicU64,
    in_flight: AtomicUsize,
    requests: AtomicU64,
    /// Nanoseconds since `started` at which the last request finished.
    last_finished: AtomicU64,
    http2: AtomicBool,
}

impl Activity {
    fn new() -> Self {
        Self {
            started: Instant::now(),
            bytes_read: AtomicU64::new(0),
            head_started: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            requests: AtomicU64::new(0),
            last_finished: AtomicU64::new(0),
            http2: AtomicBool::new(false),
        }
    }

    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.started).as_nanos()).unwrap_or(u64::MAX)
    }

    fn at(&self, nanos: u64) -> Instant {
        self.started + Duration::from_nanos(nanos)
    }

    fn read(&self, n: usize) {
        self.bytes_read.fetch_add(n as u64, Ordering::Relaxed);
        // A head starts with the first byte read while no request is in flight (HTTP/2: until its first request).
        if self.in_flight.load(Ordering::Relaxed) == 0
            && self.head_started.load(Ordering::Relaxed) == 0
            && !(self.http2.load(Ordering::Relaxed) && self.requests.load(Ordering::Relaxed) > 0)
        {
            self.head_started
                .store(self.nanos(Instant::now()) + 1, Ordering::Relaxed);
        }
    }

    /// A request's head is complete and it is being served.
    fn start(self: &Arc<Self>, http2: bool) -> InFlight {
        if http2 {
            self.http2.store(true, Ordering::Relaxed);
        }
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.head_started.store(0, Ordering::Relaxed);
        InFlight { activity: self.clone() }
    }
}

/// A request being served; dropping it ends it.
struct InFlight {
    activity: Arc<Activity>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let now = self.activity.nanos(Instant::now());
        self.activity.last_finished.store(now, Ordering::Relaxed);
        self.activity.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The connection's stream, counting the bytes read.
struct CountingIo<I> {
    inner: I,
    activity: Arc<Activity>,
}

impl<I: AsyncRead + Unpin> AsyncRead for CountingIo<I> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &poll {
            let n = buf.filled().len() - before;
            if n > 0 {
                self.activity.read(n);
            }
        }
        poll
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for CountingIo<I> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Everything a connection task needs, shared by the listener's connections.
pub(crate) struct Listener {
    /// `admission` or `probe`, for logs.
    pub name: &'static str,
    pub tls: Option<TlsAcceptor>,
    pub respond: Respond,
    pub builder: auto::Builder<hyper_util::rt::TokioExecutor>,
    pub timeouts: Timeouts,
    pub metrics: ConnectionMetrics,
    pub tracker: Arc<Tracker>,
}

/// Serves one accepted connection until it closes, a timer closes it, or the drain ends.
pub(crate) async fn run(
    stream: TcpStream,
    peer: std::net::SocketAddr,
    ctx: Arc<Listener>,
    phase: watch::Receiver<Phase>,
) {
    match &ctx.tls {
        Some(acceptor) => {
            let mut cut = phase.clone();
            let handshake = tokio::time::timeout(ctx.timeouts.handshake, acceptor.accept(stream));
            let stream = tokio::select! {
                result = handshake => match result {
                    Ok(Ok(stream)) => stream,
                    Ok(Err(err)) => {
                        debug!(peer = %peer, error = %err, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        debug!(peer = %peer, "TLS handshake timed out");
                        ctx.metrics.connection_timed_out(ConnectionTimeout::Handshake);
                        return;
                    }
                },
                () = wait_for(&mut cut, Phase::Cut) => {
                    ctx.tracker.cut_connections.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            };
            serve(stream, peer, &ctx, phase).await;
        }
        None => serve(stream, peer, &ctx, phase).await,
    }
}

/// Resolves once `phase` reaches `wanted` (or the server is gone).
async fn wait_for(phase: &mut watch::Receiver<Phase>, wanted: Phase) {
    let _ = phase.wait_for(|p| *p == wanted).await;
}

/// What the watchdog decided.
enum WatchdogCall {
    /// Look again at this instant.
    Wait(Instant),
    /// Close the connection (gracefully), for this reason when a timer expired.
    Close(Option<ConnectionTimeout>),
}

/// The watchdog's own memory.
struct Watch {
    ready: Instant,
    /// Draining: bytes read when last looked, and since when that count holds.
    quiet: Option<(u64, Instant)>,
    /// `graceful_shutdown` was called.
    graceful: bool,
}

impl Watch {
    /// The timers of a serving connection (see the module docs).
    fn serving(&self, activity: &Activity, timeouts: &Timeouts, now: Instant) -> WatchdogCall {
        if activity.in_flight.load(Ordering::SeqCst) > 0 {
            // Handling is bounded by the request timeout; look again when it may be idle.
            return WatchdogCall::Wait(now + timeouts.idle.min(timeouts.header_read));
        }
        let requests = activity.requests.load(Ordering::Relaxed);
        let http2 = activity.http2.load(Ordering::Relaxed);
        let head = activity.head_started.load(Ordering::Relaxed);
        let (deadline, timer) = if activity.bytes_read.load(Ordering::Relaxed) == 0 {
            (self.ready + timeouts.first_byte, ConnectionTimeout::FirstByte)
        } else if head != 0 && !(http2 && requests > 0) {
            (
                activity.at(head - 1) + timeouts.header_read,
                ConnectionTimeout::HeaderRead,
            )
        } else if requests == 0 {
            // Bytes, but no head start recorded (cannot happen): time from the handshake.
            (self.ready + timeouts.header_read, ConnectionTimeout::HeaderRead)
        } else {
            let finished = activity.at(activity.last_finished.load(Ordering::Relaxed));
            (finished + timeouts.idle, ConnectionTimeout::Idle)
        };
        if now >= deadline {
            WatchdogCall::Close(Some(timer))
        } else {
            WatchdogCall::Wait(deadline)
        }
    }

    /// A draining connection: answer what is in flight, close once quiet.
    fn draining(&mut self, activity: &Activity, timeouts: &Timeouts, now: Instant) -> WatchdogCall {
        // The serving timers still hold (a trickling client does not get the whole grace window).
        if let WatchdogCall::Close(Some(timer)) = self.serving(activity, timeouts, now) {
            return WatchdogCall::Close(Some(timer));
        }
        let bytes = activity.bytes_read.load(Ordering::Relaxed);
        let since = match self.quiet {
            Some((seen, since)) if seen == bytes => since,
            _ => {
                self.quiet = Some((bytes, now));
                now
            }
        };
        if activity.in_flight.load(Ordering::SeqCst) > 0 {
            return WatchdogCall::Close(None);
        }
        let finished = activity.at(activity.last_finished.load(Ordering::Relaxed));
        let quiet_since = since.max(finished).max(self.ready);
        if now >= quiet_since + DRAIN_QUIET {
            WatchdogCall::Close(None)
        } else {
            WatchdogCall::Wait((now + DRAIN_TICK).min(quiet_since + DRAIN_QUIET))
        }
    }
}

async fn serve<I>(io: I, peer: std::net::SocketAddr, ctx: &Listener, mut phase: watch::Receiver<Phase>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Arc::new(Activity::new());
    let service = {
        let activity = activity.clone();
        let respond = ctx.respond.clone();
        let tracker = ctx.tracker.clone();
        hyper::service::service_fn(move |request: http::Request<Incoming>| {
            let in_flight = activity.start(request.version() == http::Version::HTTP_2);
            let respond = respond.clone();
            let tracker = tracker.clone();
            async move {
                let response = respond(request).await;
                if tracker.draining.load(Ordering::Relaxed) {
                    tracker.answered.fetch_add(1, Ordering::Relaxed);
                }
                drop(in_flight);
                Ok::<_, Infallible>(response)
            }
        })
    };
    let io = TokioIo::new(CountingIo {
        inner: io,
        activity: activity.clone(),
    });
    let conn = ctx.builder.serve_connection(io, service);
    let mut conn = std::pin::pin!(conn);
    let mut watch = Watch {
        ready: activity.started,
        quiet: None,
        graceful: false,
    };
    let mut closing: Option<Instant> = None;
    let sleep = tokio::time::sleep_until(watch.ready + ctx.timeouts.first_byte);
    let mut sleep = std::pin::pin!(sleep);
    let mut current = *phase.borrow_and_update();
    let mut phase_open = true;
    if current != Phase::Serving {
        sleep.as_mut().reset(Instant::now());
    }
    loop {
        tokio::select! {
            biased;
            result = conn.as_mut() => {
                if let Err(err) = result {
                    debug!(peer = %peer, error = %err, "connection ended with an error");
                }
                return;
            }
            changed = phase.changed(), if phase_open => {
                if changed.is_err() {
                    // The server is gone: nothing will signal the end of a drain.
                    phase_open = false;
                    current = Phase::Cut;
                } else {
                    current = *phase.borrow_and_update();
                }
                if current == Phase::Cut {
                    ctx.tracker.cut_connections.fetch_add(1, Ordering::Relaxed);
                    ctx.tracker
                        .cut_requests
                        .fetch_add(activity.in_flight.load(Ordering::SeqCst) as u64, Ordering::Relaxed);
                    return;
                }
                if closing.is_none() {
                    sleep.as_mut().reset(Instant::now());
                }
            }
            () = &mut sleep => {
                let now = Instant::now();
                if let Some(deadline) = closing {
                    if now >= deadline {
                        debug!(peer = %peer, "connection did not close in time after a graceful shutdown; dropped");
                        return;
                    }
                    sleep.as_mut().reset(deadline);
                    continue;
                }
                let verdict = match current {
                    Phase::Serving => watch.serving(&activity, &ctx.timeouts, now),
                    _ => watch.draining(&activity, &ctx.timeouts, now),
                };
                match verdict {
                    WatchdogCall::Wait(at) => sleep.as_mut().reset(at),
                    WatchdogCall::Close(timer) => {
                        if !watch.graceful {
                            watch.graceful = true;
                            conn.as_mut().graceful_shutdown();
                        }
                        if let Some(timer) = timer {
                            debug!(peer = %peer, timeout = timer.as_str(), "connection timer expired; closing");
                            ctx.metrics.connection_timed_out(timer);
                            let deadline = now + CLOSE_GRACE;
                            closing = Some(deadline);
                            sleep.as_mut().reset(deadline);
                        } else if activity.in_flight.load(Ordering::SeqCst) > 0 {
                            // Draining with a request in flight: it is answered, then the connection closes.
                            sleep.as_mut().reset(now + DRAIN_TICK);
                        } else {
                            // Quiet: the graceful close goes out now; bounded like a timer's.
                            let deadline = now + CLOSE_GRACE;
                            closing = Some(deadline);
                            sleep.as_mut().reset(deadline);
                        }
                    }
                }
            }
        }
    }
}

named_enum! {
    /// Why a connection was refused at accept (`reason` label).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Rejection {
        /// The admission port holds `--max-connections` connections.
        Limit => "limit",
        /// The probe port holds its own maximum.
        ProbeLimit => "probe_limit",
    }
}

named_enum! {
    /// Which connection timer closed a connection (`timeout` label).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ConnectionTimeout {
        /// The TLS handshake did not finish in time.
        Handshake => "handshake",
        /// Connected (and TLS done), but no byte arrived in time.
        FirstByte => "first_byte",
        /// A request's head (for HTTP/2, the preface and first request) did not arrive in time.
        HeaderRead => "header_read",
        /// No request for the idle timeout.
        Idle => "idle",
    }
}

label_set! {
    ReasonLabels { reason: &'static str }
    TimeoutLabels { timeout: &'static str }
}

/// `pod_director_connections_open`, `pod_director_connections_rejected_total`,
/// `pod_director_connection_timeouts_total`.
#[derive(Debug, Clone)]
pub struct ConnectionMetrics {
    connections_open: Gauge,
    connections_rejected: Family<ReasonLabels, Counter>,
    connection_timeouts: Family<TimeoutLabels, Counter>,
}

impl ConnectionMetrics {
    pub fn register(r: &mut Registry) -> Self {
        let connections_open = register(
            r,
            "connections_open",
            "Connections open on the admission port (accepted, not yet closed)",
            Gauge::default(),
        );
        let connections_rejected = register(
            r,
            "connections_rejected",
            "Connections closed at accept, before the TLS handshake, by reason",
            Family::default(),
        );
        let connection_timeouts = register(
            r,
            "connection_timeouts",
            "Connections closed by a connection timer, by timer",
            Family::default(),
        );
        Self {
            connections_open,
            connections_rejected,
            connection_timeouts,
        }
    }

    /// The open connections gauge of the admission port (moved by the server as connections come and go).
    pub fn connections_open(&self) -> &Gauge {
        &self.connections_open
    }

    pub fn connection_rejected(&self, reason: Rejection) {
        self.connections_rejected
            .get_or_create(&ReasonLabels {
                reason: reason.as_str(),
            })
            .inc();
    }

    pub fn connection_timed_out(&self, timeout: ConnectionTimeout) {
        self.connection_timeouts
            .get_or_create(&TimeoutLabels {
                timeout: timeout.as_str(),
            })
            .inc();
    }
}
