//! pod-director as a child process (local mode): its config file and serving
//! certificate live in kubelet-style `..data` directories, its JSON log lines are
//! collected from standard output (and copied to a file under the state dir).

use std::fs::OpenOptions;
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::thread::JoinHandle;
use std::time::Duration;

use pod_director_testkit::MountedDir;
use serde_json::Value;

use super::logs::Lines;
use super::{PATIENCE, suffix};

/// The binary [`PodDirector::spawn`] runs: `$E2E_POD_DIRECTOR_BIN` (e.g. the release build, for
/// the scale simulation), else [`checkout_binary`].
pub fn binary() -> PathBuf {
    super::env_var("E2E_POD_DIRECTOR_BIN").map_or_else(checkout_binary, PathBuf::from)
}

/// The pod-director binary of this checkout, in the profile and target dir of the running test
/// (`target/debug/pod-director` for `cargo test`), built once per test process: this crate
/// cannot name another package's binary as a dependency, so the harness runs `cargo build` itself
/// (a no-op when `e2e/run` already built it) and never runs a binary older than the checkout.
pub fn checkout_binary() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            // The test executable is <target dir>/<profile dir>/deps/<name>-<hash>.
            let exe = std::env::current_exe().expect("the test executable's path");
            let profile_dir = exe
                .parent()
                .and_then(Path::parent)
                .expect("the test executable sits in <profile>/deps");
            let target_dir = profile_dir.parent().expect("the profile dir sits in the target dir");
            let profile = match profile_dir.file_name().and_then(|name| name.to_str()) {
                Some("debug") | None => "dev",
                Some(other) => other,
            };
            let status = Command::new(env!("CARGO"))
                .args([
                    "build",
                    "--quiet",
                    "--locked",
                    "-p",
                    "pod-director",
                    "--bin",
                    "pod-director",
                    "--profile",
                ])
                .arg(profile)
                .arg("--target-dir")
                .arg(target_dir)
                .current_dir(super::repo())
                .status()
                .expect("cannot run cargo to build pod-director");
            assert!(
                status.success(),
                "cargo build -p pod-director --profile {profile} failed: {status}"
            );
            profile_dir.join("pod-director")
        })
        .clone()
}

/// A free port on 127.0.0.1 (bound, then released for the child to take), below
/// the kernel's ephemeral range, as `e2e/cluster.sh` picks its ports: a port from
/// that range can be taken, between its release and the child's bind, as the
/// local port of any outgoing connection (the API server's, the controllers'), and
/// the child then fails with "Address already in use".
pub fn free_local_addr() -> SocketAddr {
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let (low, high) = (10_000u16, ephemeral_low.max(10_001));
    let mut seed = u64::from(std::process::id())
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
    for _ in 0..500 {
        // xorshift: enough to spread the tries; bounded in count.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let port = low + (seed % u64::from(high - low)) as u16;
        if let Ok(addr) = TcpListener::bind(("127.0.0.1", port)).and_then(|l| l.local_addr()) {
            return addr;
        }
    }
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port on 127.0.0.1")
}

/// The child of `command` dies with the thread that spawned it (the scenario's), even
/// when the test binary is killed and no Drop runs.
#[allow(unsafe_code)] // a system call the standard library lacks (SAFETY below)
pub fn die_with_parent(command: &mut Command) {
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The last `n` lines of the file at `path`.
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// How to start pod-director.
pub struct Spawn<'a> {
    pub scenario: &'a str,
    pub state_dir: &'a Path,
    pub kubeconfig: &'a Path,
    pub config: &'a str,
    pub cert: &'a [u8],
    pub key: &'a [u8],
    pub addr: SocketAddr,
    pub own_namespace: &'a str,
    /// The chart's webhook configurations' name, which pod-director keeps in step with its config.
    pub webhook_configuration: &'a str,
    /// Extra environment (e.g. `OTEL_*` for the tracing e2e); the test's own `POD_DIRECTOR_*`
    /// and `OTEL_*` variables are never passed on.
    pub env: &'a [(String, String)],
    /// `--audit-interval`; `None`: the continuous audit is off.
    pub audit_interval: Option<Duration>,
}

/// A running pod-director; stopped (and reaped) on drop.
pub struct PodDirector {
    child: Option<Child>,
    pid: u32,
    pub addr: SocketAddr,
    pub probe_addr: SocketAddr,
    pub lines: Lines,
    pub log_file: PathBuf,
    config: MountedDir,
    tls: MountedDir,
    reader: Option<JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl PodDirector {
    pub fn spawn(spawn: &Spawn<'_>) -> Self {
        let runs = spawn.state_dir.join("scenarios");
        let logs = spawn.state_dir.join("logs/scenarios");
        std::fs::create_dir_all(&runs).expect("scenarios dir");
        std::fs::create_dir_all(&logs).expect("scenario logs dir");
        let dir = tempfile::Builder::new()
            .prefix(&format!("{}-", spawn.scenario))
            .tempdir_in(&runs)
            .expect("scenario temp dir");
        let config = MountedDir::new(&dir.path().join("config"), &[("config.yaml", spawn.config.as_bytes())]);
        let tls = MountedDir::new(
            &dir.path().join("tls"),
            &[("tls.crt", spawn.cert), ("tls.key", spawn.key)],
        );
        let probe_addr = free_local_addr();
        let log_file = logs.join(format!("{}-{}.log", spawn.scenario, suffix()));
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_file)
            .expect("pod-director log file");
        let stderr = log.try_clone().expect("log file handle");

        let binary = binary();
        let mut command = Command::new(&binary);
        command
            .arg("serve")
            .arg("--config")
            .arg(config.path("config.yaml"))
            .arg("--tls-cert")
            .arg(tls.path("tls.crt"))
            .arg("--tls-key")
            .arg(tls.path("tls.key"))
            .args(["--addr", &spawn.addr.to_string()])
            .args(["--probe-addr", &probe_addr.to_string()])
            .args(["--log-format", "json"])
            .args(["--namespace", spawn.own_namespace])
            .args(["--reload-poll-interval", "1s"])
            .args(["--shutdown-timeout", "5s"])
            // As the chart runs it (webhook.reconcile: true).
            .args(["--mutating-webhook-configuration", spawn.webhook_configuration])
            .args(["--validating-webhook-configuration", spawn.webhook_configuration])
            .args([
                "--audit-interval",
                &format!("{}ms", spawn.audit_interval.map_or(0, |d| d.as_millis())),
            ])
            .env("KUBECONFIG", spawn.kubeconfig)
            // The live namespace lookup (cache miss) is logged at debug.
            .env("RUST_LOG", "info,pod_director::cluster::namespaces=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr));
        // Nothing from the test's environment may override the config.
        for (name, _) in std::env::vars() {
            if name.starts_with("POD_DIRECTOR_") || name.starts_with("OTEL_") {
                command.env_remove(name);
            }
        }
        command.envs(spawn.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        die_with_parent(&mut command);
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e} (run `cargo build` first)", binary.display()));
        let pid = child.id();
        let stdout = child.stdout.take().expect("piped stdout");
        let lines = Lines::default();
        let collected = lines.clone();
        let mut copy = log;
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = writeln!(copy, "{line}");
                if let Ok(value) = serde_json::from_str::<Value>(&line) {
                    collected.push(value);
                }
            }
        });
        Self {
            child: Some(child),
            pid,
            addr: spawn.addr,
            probe_addr,
            lines,
            log_file,
            config,
            tls,
            reader: Some(reader),
            _dir: dir,
        }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Waits for `/readyz` (namespace cache synced); fails when the process exits.
    pub async fn wait_ready(&mut self) {
        let url = format!("http://{}/readyz", self.probe_addr);
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .expect("HTTP client");
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if !self.is_running() {
                panic!("pod-director exited during start-up:\n{}", self.tail(30));
            }
            if let Ok(response) = client.get(&url).send().await
                && response.status().is_success()
            {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "pod-director not ready within {PATIENCE:?}:\n{}",
                self.tail(30)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Replaces the config file (a `..data` swap, as a ConfigMap update).
    pub fn write_config(&mut self, text: &str) {
        self.config.update(&[("config.yaml", text.as_bytes())]);
    }

    /// Rewrites the config file in place, as `cat > config.yaml` or an editor does: truncated
    /// (empty for `pause`), then written in two parts `pause` apart.
    pub fn write_config_in_place(&mut self, text: &str, pause: std::time::Duration) {
        use std::io::Write as _;
        let path = self.config.path("config.yaml");
        let mut cut = text.len() / 2;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let (head, tail) = text.split_at(cut);
        let mut file = std::fs::File::create(&path).expect("truncate the config in place");
        std::thread::sleep(pause);
        file.write_all(head.as_bytes()).expect("first part");
        file.flush().expect("flush");
        std::thread::sleep(pause);
        file.write_all(tail.as_bytes()).expect("second part");
    }

    /// Replaces the serving certificate and key (a `..data` swap, as a Secret update).
    pub fn write_tls(&mut self, cert: &[u8], key: &[u8]) {
        self.tls.update(&[("tls.crt", cert), ("tls.key", key)]);
    }

    /// The last `n` lines of the log file.
    pub fn tail(&self, n: usize) -> String {
        tail(&self.log_file, n)
    }

    /// SIGTERM (pod-director drains and exits), SIGKILL after 10 s; reaps the process and
    /// returns its exit status (`None` when it was already stopped).
    #[allow(unsafe_code)] // a system call the standard library lacks (SAFETY below)
    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        if matches!(child.try_wait(), Ok(None)) {
            if let Ok(pid) = i32::try_from(child.id()) {
                // SAFETY: plain kill(2) on our own child, which has not been reaped yet.
                unsafe {
                    libc::kill(pid, libc::SIGTERM);
                }
            }
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while matches!(child.try_wait(), Ok(None)) && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
        }
        let status = child.wait().ok();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        status
    }
}

impl Drop for PodDirector {
    fn drop(&mut self) {
        self.stop();
    }
}
