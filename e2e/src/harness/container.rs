//! The kubelet's part for one container run by runc (the image suite, `e2e/image`): volumes as
//! the kubelet writes them (ConfigMap and Secret data in `..data` directories swapped atomically,
//! `defaultMode`, group-owned by the pod's `fsGroup`), the container's life (`runc run`, `runc
//! kill`, `runc delete`), and its HTTP probes on the kubelet's schedule.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pod_director_testkit::MountedDir;
use serde_json::Value;

use super::logs::Lines;
use super::process::die_with_parent;

/// A ConfigMap or Secret volume: its files in a kubelet-style `..data` directory.
pub struct AtomicVolume {
    dir: MountedDir,
    root: PathBuf,
    mode: u32,
    gid: Option<u32>,
}

impl AtomicVolume {
    /// `files` written under `root` with `mode` (the volume's `defaultMode`, 0644 unless set),
    /// group-owned by `gid` (the pod's `fsGroup`) as the kubelet does.
    pub fn new(root: &Path, files: &[(&str, &[u8])], mode: u32, gid: Option<u32>) -> Self {
        let volume = Self {
            dir: MountedDir::new(root, files),
            root: root.to_owned(),
            mode,
            gid,
        };
        volume.own();
        volume
    }

    /// A new generation of the files, swapped in with one rename of `..data` (a ConfigMap update).
    pub fn update(&mut self, files: &[(&str, &[u8])]) {
        self.dir.update(files);
        self.own();
    }

    fn own(&self) {
        own_tree(&self.root, self.mode, self.gid);
    }
}

/// The kubelet's ownership rules on a volume: directories root:gid 02775 (setgid, as
/// SetVolumeOwnership leaves them), regular files root:gid with `mode` (plus group read).
fn own_tree(root: &Path, mode: u32, gid: Option<u32>) {
    let group_read = if gid.is_some() { 0o040 } else { 0 };
    let entries = std::fs::read_dir(root).unwrap_or_else(|e| panic!("cannot list {}: {e}", root.display()));
    let set = |path: &Path, bits: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(bits))
            .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
        std::os::unix::fs::chown(path, Some(0), gid).unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
    };
    set(root, if gid.is_some() { 0o2775 } else { 0o755 });
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_symlink() {
            let _ = std::os::unix::fs::lchown(&path, Some(0), gid);
        } else if kind.is_dir() {
            own_tree(&path, mode, gid);
        } else {
            set(&path, mode | group_read);
        }
    }
}

/// An emptyDir volume: a directory the container may write (0777, as the kubelet makes it).
pub fn empty_dir(root: &Path, gid: Option<u32>) -> PathBuf {
    std::fs::create_dir_all(root).unwrap_or_else(|e| panic!("emptyDir {}: {e}", root.display()));
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o777)).expect("emptyDir mode");
    std::os::unix::fs::chown(root, Some(0), gid).expect("emptyDir owner");
    root.to_owned()
}

/// A container run by `runc run` (foreground: its standard output is the container's, JSON log
/// lines collected into [`Lines`] and copied to a file).
pub struct Container {
    pub id: String,
    runc_root: PathBuf,
    child: Option<Child>,
    pub lines: Lines,
    pub log_file: PathBuf,
    reader: Option<JoinHandle<()>>,
    pub started: Instant,
}

impl Container {
    /// `runc --root RUNC_ROOT run --bundle BUNDLE ID`.
    pub fn run(id: &str, runc_root: &Path, bundle: &Path, log_file: &Path) -> Self {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_file)
            .unwrap_or_else(|e| panic!("log file {}: {e}", log_file.display()));
        let stderr = log.try_clone().expect("log file handle");
        let mut command = Command::new("runc");
        command
            .arg("--root")
            .arg(runc_root)
            .arg("run")
            .arg("--bundle")
            .arg(bundle)
            .arg(id)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr));
        die_with_parent(&mut command);
        let started = Instant::now();
        let mut child = command
            .spawn()
            .expect("runc runs (scripts/image.sh packages installs it)");
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
            id: id.to_owned(),
            runc_root: runc_root.to_owned(),
            child: Some(child),
            lines,
            log_file: log_file.to_owned(),
            reader: Some(reader),
            started,
        }
    }

    fn runc(&self, args: &[&str]) -> std::process::Output {
        Command::new("runc")
            .arg("--root")
            .arg(&self.runc_root)
            .args(args)
            .output()
            .expect("runc runs")
    }

    /// `runc kill ID SIGNAL`, as the runtime does for the kubelet's StopContainer.
    pub fn signal(&self, signal: &str) {
        let output = self.runc(&["kill", &self.id, signal]);
        assert!(
            output.status.success(),
            "runc kill {} {signal}: {}",
            self.id,
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// The container's state as runc reports it (`running`, `stopped`, …).
    pub fn state(&self) -> Option<Value> {
        let output = self.runc(&["state", &self.id]);
        output
            .status
            .success()
            .then(|| serde_json::from_slice(&output.stdout).ok())
            .flatten()
    }

    pub fn is_running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Waits up to `limit` for the container to exit; its status (runc run exits with the
    /// container process's code), or `None` when it still runs.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                if let Some(reader) = self.reader.take() {
                    let _ = reader.join();
                }
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The last `n` lines of the container's log.
    pub fn tail(&self, n: usize) -> String {
        super::process::tail(&self.log_file, n)
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if self.is_running() {
            let _ = self.runc(&["kill", &self.id, "KILL"]);
            let _ = self.wait_exit(Duration::from_secs(10));
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = self.runc(&["delete", "--force", &self.id]);
    }
}

/// An HTTP probe of the pod spec (`livenessProbe`, `readinessProbe`) with the kubelet's defaults.
#[derive(Debug, Clone)]
pub struct Probe {
    pub kind: String,
    pub url: String,
    pub period: Duration,
    pub timeout: Duration,
    pub failure_threshold: u32,
    pub initial_delay: Duration,
}

impl Probe {
    /// The `field` probe of `container`, called on `host` as the kubelet calls a pod IP.
    pub fn of(container: &Value, field: &str, host: &str) -> Self {
        let probe = &container[field];
        let get = &probe["httpGet"];
        assert!(!get.is_null(), "{field} is an httpGet probe: {probe}");
        let port = super::oci::container_port(container, &get["port"]);
        let scheme = get["scheme"].as_str().unwrap_or("HTTP").to_ascii_lowercase();
        let path = get["path"].as_str().unwrap_or("/");
        let seconds = |name: &str, default: u64| Duration::from_secs(probe[name].as_u64().unwrap_or(default));
        Self {
            kind: field.to_owned(),
            url: format!("{scheme}://{host}:{port}{path}"),
            period: seconds("periodSeconds", 10),
            timeout: seconds("timeoutSeconds", 1),
            failure_threshold: u32::try_from(probe["failureThreshold"].as_u64().unwrap_or(3)).unwrap_or(3),
            initial_delay: seconds("initialDelaySeconds", 0),
        }
    }

    /// The time the kubelet gives before acting: failureThreshold × periodSeconds (+ initial delay).
    pub fn budget(&self) -> Duration {
        self.initial_delay + self.period * self.failure_threshold
    }

    /// One probe as the kubelet's prober makes it: success is a status in 200..400 within the timeout.
    pub async fn call(&self, client: &reqwest::Client) -> Result<u16, String> {
        let response = client
            .get(&self.url)
            .header("User-Agent", "kube-probe/1.37")
            .header("Accept", "*/*")
            .timeout(self.timeout)
            .send()
            .await
            .map_err(|e| format!("{e}"))?;
        let status = response.status().as_u16();
        if (200..400).contains(&status) {
            Ok(status)
        } else {
            Err(format!("HTTP {status}"))
        }
    }
}

/// What the kubelet's probe workers saw.
#[derive(Debug, Default, Clone)]
pub struct ProbeRecord {
    /// Since the container started: when the readiness probe first succeeded.
    pub ready_at: Option<Duration>,
    /// Every probe result: (kind, since start, result).
    pub results: Vec<(String, Duration, Result<u16, String>)>,
    /// Consecutive failures of each probe now.
    pub consecutive_failures: BTreeMap<String, u32>,
    /// When a liveness probe reached its failureThreshold: the kubelet would restart the container.
    pub restart: Option<String>,
    /// Readiness failures after the pod was ready (it would leave the Service's endpoints).
    pub unready_after_ready: Vec<String>,
}

/// The kubelet's probe workers for one container: each probe runs every `periodSeconds` from the
/// container's start (after `initialDelaySeconds`), until [`Prober::stop`].
pub struct Prober {
    pub record: Arc<Mutex<ProbeRecord>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Prober {
    pub fn start(probes: Vec<Probe>, started: Instant) -> Self {
        let record = Arc::new(Mutex::new(ProbeRecord::default()));
        let client = reqwest::Client::builder().build().expect("an HTTP client");
        let tasks = probes
            .into_iter()
            .map(|probe| {
                let (record, client) = (record.clone(), client.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(probe.initial_delay).await;
                    let mut ticks = tokio::time::interval(probe.period);
                    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    loop {
                        ticks.tick().await;
                        let result = probe.call(&client).await;
                        let at = started.elapsed();
                        let mut record = record.lock().unwrap_or_else(|e| e.into_inner());
                        let failures = record.consecutive_failures.entry(probe.kind.clone()).or_default();
                        if result.is_ok() {
                            *failures = 0;
                        } else {
                            *failures += 1;
                        }
                        let failures = *failures;
                        if probe.kind == "readinessProbe" {
                            match (&result, record.ready_at) {
                                (Ok(_), None) => record.ready_at = Some(at),
                                (Err(e), Some(_)) => record.unready_after_ready.push(format!("{at:?}: {e}")),
                                _ => {}
                            }
                        }
                        if probe.kind == "livenessProbe" && failures >= probe.failure_threshold {
                            record.restart.get_or_insert_with(|| {
                                format!("{failures} liveness failures in a row at {at:?}: {result:?}")
                            });
                        }
                        record.results.push((probe.kind.clone(), at, result));
                    }
                })
            })
            .collect();
        Self { record, tasks }
    }

    pub fn snapshot(&self) -> ProbeRecord {
        self.record.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn stop(&mut self) {
        for task in self.tasks.drain(..) {
            task.abort();
        }
    }
}

impl Drop for Prober {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A digest of a directory tree's metadata and contents (paths, types, modes, owners, sizes,
/// mtimes, symlink targets): equal before and after a run when nothing under it was written.
pub fn tree_digest(root: &Path) -> BTreeMap<PathBuf, String> {
    use std::os::unix::fs::MetadataExt as _;
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let target = std::fs::read_link(&path)
                .map(|t| t.display().to_string())
                .unwrap_or_default();
            out.insert(
                path.strip_prefix(root).unwrap_or(&path).to_owned(),
                format!(
                    "{:o} {}:{} {} {}.{} {target}",
                    meta.mode(),
                    meta.uid(),
                    meta.gid(),
                    meta.size(),
                    meta.mtime(),
                    meta.mtime_nsec()
                ),
            );
            if meta.is_dir() {
                stack.push(path);
            }
        }
    }
    out
}
