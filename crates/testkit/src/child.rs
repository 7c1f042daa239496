//! The release binary as a child process, against a fake Kubernetes API on
//! loopback: for what only a real process shows (signals, descriptor limits,
//! a blocked standard output).
//!
//! The fake API answers the namespace cache's metadata list (one namespace,
//! `ns`, in group `ci`) and an empty Node list, holds both watches open, and answers every live GET with
//! 404. It counts the requests it sees.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, StreamBody};
use hyper_util::rt::{TokioExecutor, TokioIo};

use crate::pki::Pki;

/// The fake API server; stops when dropped.
pub struct FakeApi {
    pub addr: SocketAddr,
    pub requests: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

fn json(status: u16, value: &serde_json::Value) -> http::Response<Body> {
    let mut response = http::Response::new(Full::new(Bytes::from(value.to_string())).boxed());
    *response.status_mut() = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::OK);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

fn answer(request: &http::Request<hyper::body::Incoming>) -> http::Response<Body> {
    let path = request.uri().path();
    let query = request.uri().query().unwrap_or_default();
    if (path == "/api/v1/namespaces" || path == "/api/v1/nodes") && query.contains("watch=") {
        // A watch that never sends an event (and never ends).
        let body = StreamBody::new(futures::stream::pending::<Result<hyper::body::Frame<Bytes>, Infallible>>());
        let mut response = http::Response::new(body.boxed());
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        return response;
    }
    if path == "/api/v1/namespaces" {
        return json(
            200,
            &serde_json::json!({
                "kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                "metadata": {"resourceVersion": "1"},
                "items": [{
                    "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                    "metadata": {"name": "ns", "resourceVersion": "1", "labels": {"pod-director/group": "ci"}}
                }]
            }),
        );
    }
    if path == "/api/v1/nodes" {
        // No nodes: the Node cache syncs empty.
        return json(
            200,
            &serde_json::json!({
                "kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": []
            }),
        );
    }
    let name = path.trim_start_matches("/api/v1/namespaces/");
    json(
        404,
        &serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
            "message": format!("namespaces \"{name}\" not found")
        }),
    )
}

impl FakeApi {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind fake API");
        let addr = listener.local_addr().expect("address");
        let requests = Arc::new(AtomicUsize::new(0));
        let counted = requests.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let counted = counted.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        counted.fetch_add(1, Ordering::SeqCst);
                        let response = answer(&request);
                        async move { Ok::<_, Infallible>(response) }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { addr, requests, task }
    }

    /// A kubeconfig pointing at this server.
    pub fn kubeconfig(&self, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://{}\n\
             users:\n- name: fake\n  user:\n    token: fake\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n\
             current-context: fake\n",
            self.addr
        );
        std::fs::write(&path, text).expect("kubeconfig");
        path
    }
}

/// A free loopback port (bound, then released for the child).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `pod-director serve` running as a child process.
pub struct ServeProcess {
    pub child: Child,
    pub addr: SocketAddr,
    pub probe_addr: SocketAddr,
    pub pki: Pki,
    pub dir: tempfile::TempDir,
    pub api: FakeApi,
}

/// The child's extra `serve` arguments, how its standard output is wired (discarded unless set), and its limits.
pub struct Spawn<'a> {
    pub stdout: Stdio,
    /// Soft RLIMIT_NOFILE for the child.
    pub open_files: Option<u64>,
    pub args: &'a [&'a str],
}

impl<'a> Spawn<'a> {
    pub fn args(args: &'a [&'a str]) -> Self {
        Self {
            stdout: Stdio::null(),
            open_files: None,
            args,
        }
    }

    pub fn open_files(self, limit: u64) -> Self {
        Self {
            open_files: Some(limit),
            ..self
        }
    }

    pub fn stdout(self, stdout: Stdio) -> Self {
        Self { stdout, ..self }
    }
}

impl ServeProcess {
    #[allow(unsafe_code)] // a system call the standard library lacks (SAFETY below)
    pub async fn start(config_yaml: &str, spawn: Spawn<'_>) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let pki = Pki::new();
        let leaf = pki.leaf("pod-director child");
        std::fs::write(dir.path().join("tls.crt"), &leaf.cert_pem).expect("cert");
        std::fs::write(dir.path().join("tls.key"), &leaf.key_pem).expect("key");
        std::fs::write(dir.path().join("config.yaml"), config_yaml).expect("config");
        let api = FakeApi::start().await;
        let kubeconfig = api.kubeconfig(dir.path());
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let probe_addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let mut command = Command::new(crate::binary());
        command
            .arg("serve")
            .arg("--config")
            .arg(dir.path().join("config.yaml"))
            .arg("--tls-cert")
            .arg(dir.path().join("tls.crt"))
            .arg("--tls-key")
            .arg(dir.path().join("tls.key"))
            .args(["--addr", &addr.to_string(), "--probe-addr", &probe_addr.to_string()])
            .args(["--namespace", "pod-director"])
            .args(spawn.args)
            .env("KUBECONFIG", &kubeconfig)
            .env("RUST_LOG", "info")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .stdin(Stdio::null())
            .stdout(spawn.stdout)
            .stderr(Stdio::inherit());
        let open_files = spawn.open_files;
        // SAFETY: only async-signal-safe calls (prctl, setrlimit) between fork and exec.
        unsafe {
            use std::os::unix::process::CommandExt as _;
            command.pre_exec(move || {
                // The child dies with the test.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if let Some(soft) = open_files {
                    let mut limit = libc::rlimit {
                        rlim_cur: 0,
                        rlim_max: 0,
                    };
                    if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    limit.rlim_cur = soft as libc::rlim_t;
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("spawn pod-director");
        let process = Self {
            child,
            addr,
            probe_addr,
            pki,
            dir,
            api,
        };
        let ready = crate::eventually(Duration::from_secs(60), || async {
            reqwest::get(format!("http://{probe_addr}/readyz"))
                .await
                .is_ok_and(|r| r.status() == 200)
        })
        .await;
        assert!(ready, "pod-director did not become ready");
        process
    }

    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap_or(i32::MAX)
    }

    /// Sends SIGTERM.
    #[allow(unsafe_code)] // a system call the standard library lacks (SAFETY below)
    pub fn terminate(&self) {
        // SAFETY: kill with a pid of our own child.
        unsafe {
            libc::kill(self.pid(), libc::SIGTERM);
        }
    }

    /// Waits (bounded) for the child to exit; kills it when it does not.
    pub fn wait(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }

    pub async fn metrics(&self) -> String {
        match reqwest::get(format!("http://{}/metrics", self.probe_addr)).await {
            Ok(response) => response.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
