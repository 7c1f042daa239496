//! `pod-director audit` against API servers that misbehave, on loopback: one
//! that accepts connections and never answers, one that refuses every request.
//! Each ends the audit with a clear error and exit code 2, in bounded time.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pod_director_testkit::assert_contains;

/// Longest any server thread of these tests lives.
const SERVER_LIFETIME: Duration = Duration::from_secs(60);
/// Most connections a test server accepts.
const MAX_CONNECTIONS: usize = 32;

fn config() -> PathBuf {
    pod_director_testkit::repo().join("examples/config.yaml")
}

/// A kubeconfig naming `server`, with a bearer token.
fn kubeconfig(dir: &Path, server: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    \
             insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n  \
             context: {{cluster: c, user: u}}\ncurrent-context: x\n"
        ),
    )
    .expect("kubeconfig written");
    path
}

fn audit(kubeconfig: &Path, args: &[&str]) -> (Output, Duration) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pod-director"));
    command
        .arg("audit")
        .arg("--config")
        .arg(config())
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("POD_DIRECTOR_CONFIG");
    let started = Instant::now();
    let output = command.output().expect("the binary runs");
    (output, started.elapsed())
}

/// A loopback server: `handle` gets each accepted connection, until the test ends (bounded).
struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    fn start(handle: fn(TcpStream, &mut Vec<TcpStream>)) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        listener.set_nonblocking(true).expect("non-blocking");
        let addr = listener.local_addr().expect("address");
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let deadline = Instant::now() + SERVER_LIFETIME;
            let mut held = Vec::new();
            let mut accepted = 0;
            while !stopped.load(Ordering::SeqCst) && Instant::now() < deadline && accepted < MAX_CONNECTIONS {
                match listener.accept() {
                    Ok((stream, _)) => {
                        accepted += 1;
                        let _ = stream.set_nonblocking(false);
                        handle(stream, &mut held);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Self {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[test]
fn an_api_server_that_stops_answering_ends_the_audit_with_a_clear_error_within_the_timeout() {
    // Accepts, reads nothing, answers nothing: the TLS handshake never completes.
    let server = Server::start(|stream, held| held.push(stream));
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = kubeconfig(dir.path(), &format!("https://{}", server.addr));
    let (output, took) = audit(&kubeconfig, &["--request-timeout", "1s"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_contains(
        &stderr,
        "error: the API server did not answer within 1s while listing nodes",
    );
    assert!(stderr.contains("--request-timeout"), "says what to change: {stderr}");
    assert!(took < Duration::from_secs(10), "bounded: took {took:?}");
    assert!(output.stdout.is_empty(), "nothing printed as a report");
}

#[test]
fn an_api_server_that_refuses_the_audit_gets_an_error_naming_what_to_grant() {
    let server = Server::start(|mut stream, _| {
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let mut request = Vec::new();
        let mut buf = [0u8; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 64 * 1024 {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => request.extend_from_slice(&buf[..n]),
            }
        }
        let body = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"nodes is forbidden: User \"u\" cannot list resource \"nodes\" in API group \"\" at the cluster scope","reason":"Forbidden","details":{"kind":"nodes"},"code":403}"#;
        let _ = write!(
            stream,
            "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    });
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = kubeconfig(dir.path(), &format!("http://{}", server.addr));
    let (output, took) = audit(&kubeconfig, &["--request-timeout", "5s"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_contains(&stderr, "error: cannot list nodes:");
    assert_contains(&stderr, "forbidden");
    assert!(
        stderr.contains("the audit reads namespaces, nodes, pods, deployments"),
        "names what to grant: {stderr}"
    );
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn an_unknown_group_is_refused_before_the_cluster_is_asked() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Nothing listens there: the check must not need the API server.
    let kubeconfig = kubeconfig(dir.path(), "https://127.0.0.1:9");
    let (output, _) = audit(&kubeconfig, &["--group", "nope"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_contains(
        &stderr,
        "error: --group \"nope\" is not a group of the configuration (groups: ",
    );
}

#[test]
fn an_in_tree_plugin_pod_director_does_not_know_is_refused_naming_those_it_does() {
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = kubeconfig(dir.path(), "https://127.0.0.1:9");
    let (output, _) = audit(&kubeconfig, &["--in-tree-plugins", "PodNodeSelector,PodSecurity"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_contains(
        &stderr,
        "\"PodSecurity\" is not an in-tree plugin pod-director knows (PodNodeSelector, PodTolerationRestriction); or \
         probe, or none",
    );
}
