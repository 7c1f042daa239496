//! A port's accept loop and its drain: connections beyond the port's cap are refused at
//! accept; on shutdown the connections the kernel already queued are taken too, every
//! connection is drained (see [`connection`](super::connection)), and the outcome is logged.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::connection::{self, Listener, Phase};

/// Accepts connections until shutdown (refusing those beyond `max_connections` at accept),
/// then drains: see [`connection`].
pub(crate) async fn serve(
    listener: TcpListener,
    shared: Arc<Listener>,
    max_connections: usize,
    mut shutdown: watch::Receiver<bool>,
    drain_timeout: Duration,
) {
    let (phase, phase_rx) = watch::channel(Phase::Serving);
    let accept = |stream, peer| admit(&shared, max_connections, stream, peer, &phase_rx);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => accept(stream, peer),
                Err(err) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    warn!(error = %err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            _ = shutdown.changed() => break,
        }
    }
    // Connections the kernel has already accepted are clients that connected before the signal: serve them too.
    let started = tokio::time::Instant::now();
    let _ = phase.send(Phase::Draining);
    shared.tracker.begin_drain();
    take_queued(listener, accept);
    let open_at_signal = shared.tracker.open();
    let drained = tokio::time::timeout(drain_timeout, shared.tracker.all_closed())
        .await
        .is_ok();
    if !drained {
        let _ = phase.send(Phase::Cut);
        // Cut connections return at once; bounded all the same.
        let _ = tokio::time::timeout(Duration::from_secs(1), shared.tracker.all_closed()).await;
    }
    report_drain(&shared, open_at_signal, drained, started.elapsed(), drain_timeout);
}

/// Serves one accepted connection in its own task, or closes it at once when the port
/// holds `max_connections` already.
fn admit(
    shared: &Arc<Listener>,
    max_connections: usize,
    stream: TcpStream,
    peer: SocketAddr,
    phase: &watch::Receiver<Phase>,
) {
    if shared.tracker.open() >= max_connections {
        // Closed before any TLS work: refusing costs one accept and one close.
        shared.metrics.connection_rejected(shared.tracker.rejection());
        debug!(peer = %peer, max_connections, "connection refused: at the connection limit");
        return;
    }
    let open = shared.tracker.enter();
    // As Go does by default: no Nagle delay on small writes (HTTP/2 frames, TLS records),
    // which with the peer's delayed ACK stalls a response for ~40 ms.
    if let Err(err) = stream.set_nodelay(true) {
        debug!(peer = %peer, error = %err, "cannot set TCP_NODELAY");
    }
    let shared = shared.clone();
    let phase = phase.clone();
    tokio::spawn(async move {
        connection::run(stream, peer, shared, phase).await;
        drop(open);
    });
}

/// Accepts what the kernel has queued, straight from its queue: tokio's accept only sees
/// what its reactor has been told about.
fn take_queued(listener: TcpListener, accept: impl Fn(TcpStream, SocketAddr)) {
    match listener.into_std() {
        Ok(listener) => {
            while let Ok((stream, peer)) = listener.accept() {
                match stream.set_nonblocking(true).and_then(|()| TcpStream::from_std(stream)) {
                    Ok(stream) => accept(stream, peer),
                    Err(err) => debug!(peer = %peer, error = %err, "cannot serve a queued connection"),
                }
            }
        }
        Err(err) => warn!(error = %err, "cannot take the queued connections; they are refused"),
    }
}

/// The drain's outcome, per port.
fn report_drain(shared: &Listener, connections: usize, drained: bool, elapsed: Duration, timeout: Duration) {
    let tracker = &shared.tracker;
    let answered = tracker.answered.load(Ordering::Relaxed);
    let cut_requests = tracker.cut_requests.load(Ordering::Relaxed);
    let cut_connections = tracker.cut_connections.load(Ordering::Relaxed);
    let elapsed_ms = elapsed.as_millis() as u64;
    if drained {
        info!(
            listener = shared.name,
            connections,
            answered,
            cut_requests,
            cut_connections,
            elapsed_ms,
            "drained: every request that arrived was answered"
        );
    } else {
        warn!(
            listener = shared.name,
            connections,
            answered,
            cut_requests,
            cut_connections,
            elapsed_ms,
            timeout = ?timeout,
            "drain cut short by --shutdown-timeout: connections still open were closed"
        );
    }
}
