//! A TCP relay between pod-director and the API server that delays every byte by
//! a fixed latency, both ways (TLS passes through untouched). With it, the watch
//! event of a new namespace reaches pod-director's cache *after* the API server
//! asks pod-director about the namespace's first pod: a deterministic cache miss.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::config::Kubeconfig;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// A running relay and a kubeconfig that goes through it; stops on drop.
pub struct DelayProxy {
    pub kubeconfig: PathBuf,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl DelayProxy {
    /// Relays to the API server of `kubeconfig`'s current context.
    pub async fn start(kubeconfig: &Path, latency: Duration) -> Self {
        let mut config = Kubeconfig::read_from(kubeconfig).expect("a readable kubeconfig");
        let context_name = config
            .current_context
            .clone()
            .expect("the kubeconfig has a current context");
        let cluster_name = config
            .contexts
            .iter()
            .find(|c| c.name == context_name)
            .and_then(|c| c.context.as_ref())
            .map(|c| c.cluster.clone())
            .expect("the current context names a cluster");
        let cluster = config
            .clusters
            .iter_mut()
            .find(|c| c.name == cluster_name)
            .and_then(|c| c.cluster.as_mut())
            .expect("the context's cluster is defined");
        let server: http::Uri = cluster
            .server
            .as_deref()
            .expect("the cluster has a server")
            .parse()
            .expect("the server is a URL");
        let upstream = format!(
            "{}:{}",
            server.host().expect("the server URL has a host"),
            server.port_u16().unwrap_or(443)
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("the relay listens");
        let port = listener.local_addr().expect("bound address").port();
        // The API server's certificate is valid for 127.0.0.1, whatever the port.
        cluster.server = Some(format!("https://127.0.0.1:{port}"));
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, serde_json::to_vec(&config).expect("kubeconfig serializes")).expect("kubeconfig written");
        let task = tokio::spawn(async move {
            loop {
                let Ok((downstream, _)) = listener.accept().await else {
                    continue;
                };
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let Ok(up) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let (down_read, down_write) = downstream.into_split();
                    let (up_read, up_write) = up.into_split();
                    tokio::join!(relay(down_read, up_write, latency), relay(up_read, down_write, latency));
                });
            }
        });
        Self {
            kubeconfig: path,
            task,
            _dir: dir,
        }
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Copies `from` to `to`, each chunk `latency` after it was read (order kept, no throughput limit).
async fn relay(mut from: tokio::net::tcp::OwnedReadHalf, mut to: tokio::net::tcp::OwnedWriteHalf, latency: Duration) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reader = async move {
        let mut buffer = vec![0u8; 64 * 1024];
        while let Ok(n) = from.read(&mut buffer).await {
            if n == 0 || tx.send((Instant::now() + latency, buffer[..n].to_vec())).is_err() {
                break;
            }
        }
    };
    let writer = async move {
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&chunk).await.is_err() {
                break;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reader, writer);
}
