//! Hot reload of the configuration and the serving certificate.
//!
//! Mounted ConfigMaps and Secrets change by kubelet swapping a `..data`
//! symlink in the mount directory, so each file's *directory* is watched
//! (non-recursively) and, because events can be missed (network filesystems,
//! symlink tricks), the files are also polled. Either way the files' content is
//! fingerprinted and only a change is acted on; an invalid new version is
//! refused once, logged and counted, and the previous one stays live.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use notify::Watcher as _;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, watch};
use tracing::{debug, error, info, warn};

use super::tls::{self, CertResolver, TlsFiles};
use crate::admission::AdmissionMetrics;
use crate::config::{Loaded, load_config};
use crate::metrics::{ResultLabels, register};

/// Events closer together than this are handled as one change.
const SETTLE: Duration = Duration::from_millis(100);

/// A digest of the files' content (or of the error reading them).
pub(crate) type Fingerprint = [u8; 32];

pub fn fingerprint(paths: &[&Path]) -> Fingerprint {
    let mut hasher = Sha256::new();
    for path in paths {
        match std::fs::read(path) {
            Ok(bytes) => {
                hasher.update(b"ok");
                hasher.update((bytes.len() as u64).to_le_bytes());
                hasher.update(&bytes);
            }
            Err(err) => {
                hasher.update(b"err");
                hasher.update(err.to_string().as_bytes());
            }
        }
    }
    hasher.finalize().into()
}

/// Logs the warnings of a configuration that was accepted (e.g. no groups defined).
pub(crate) fn warn_about(loaded: &Loaded) {
    for warning in &loaded.warnings {
        warn!(
            config.revision = loaded.revision.as_str(),
            warning = warning.as_str(),
            "configuration warning"
        );
    }
}

/// Something reloaded from files when they change.
pub(crate) trait Reload: Send + 'static {
    fn paths(&self) -> Vec<PathBuf>;
    /// Re-reads the files if their content changed.
    fn reload(&mut self);
}

/// Swaps in a new configuration when its file changes and validates.
pub(crate) struct ConfigReload {
    pub path: PathBuf,
    pub own_namespace: Option<String>,
    pub live: Arc<ArcSwap<Loaded>>,
    pub metrics: ReloadMetrics,
    /// Its series are initialised for each new configuration.
    pub admission: AdmissionMetrics,
    pub last: Fingerprint,
    /// Told the new revision after each successful reload (orphaned groups, webhook reconciliation).
    pub changed: watch::Sender<String>,
}

impl Reload for ConfigReload {
    fn paths(&self) -> Vec<PathBuf> {
        vec![self.path.clone()]
    }

    fn reload(&mut self) {
        let now = fingerprint(&[&self.path]);
        if now == self.last {
            return;
        }
        self.last = now;
        let previous = self.live.load().revision.clone();
        match load_config(&self.path, self.own_namespace.as_deref()) {
            Ok(loaded) => {
                info!(
                    config.revision = loaded.revision.as_str(),
                    config.previous_revision = previous.as_str(),
                    path = %self.path.display(),
                    "configuration reloaded"
                );
                warn_about(&loaded);
                let revision = loaded.revision.clone();
                self.admission.initialise(&loaded.config);
                self.live.store(Arc::new(loaded));
                self.metrics.config_reloaded(ReloadResult::Success);
                // Nobody listening (no reporter, no reconciler) is fine.
                self.changed.send_replace(revision);
            }
            Err(err) => {
                error!(
                    config.revision = previous.as_str(),
                    error = %err,
                    path = %self.path.display(),
                    "new configuration refused; the previous one stays live"
                );
                self.metrics.config_reloaded(ReloadResult::Error);
            }
        }
    }
}

/// Swaps in a new serving certificate when the pair changes and matches.
pub(crate) struct TlsReload {
    pub files: TlsFiles,
    pub resolver: Arc<CertResolver>,
    pub metrics: ReloadMetrics,
    pub last: Fingerprint,
}

impl Reload for TlsReload {
    fn paths(&self) -> Vec<PathBuf> {
        vec![self.files.cert.clone(), self.files.key.clone()]
    }

    fn reload(&mut self) {
        let now = fingerprint(&self.files.paths());
        if now == self.last {
            return;
        }
        self.last = now;
        match tls::load(&self.files) {
            Ok(key) => {
                self.resolver.replace(key);
                info!(cert = %self.files.cert.display(), "serving certificate reloaded");
                self.metrics.tls_reloaded(ReloadResult::Success);
            }
            Err(err) => {
                warn!(error = %err, "new serving certificate refused; the previous one stays in use");
                self.metrics.tls_reloaded(ReloadResult::Error);
            }
        }
    }
}

/// Runs `target.reload()` whenever its files' directories report a change and every `poll`, until `shutdown`.
pub fn spawn(
    mut target: impl Reload,
    poll: Duration,
    mut shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let (tx, mut rx) = mpsc::unbounded_channel::<()>();
    let directories: BTreeSet<PathBuf> = target
        .paths()
        .iter()
        .map(|p| match p.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
            _ => PathBuf::from("."),
        })
        .collect();
    let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if event.is_ok() {
            // The receiver is gone only after shutdown.
            let _ = tx.send(());
        }
    })
    .and_then(|mut watcher| {
        for dir in &directories {
            watcher.watch(dir, notify::RecursiveMode::NonRecursive)?;
        }
        Ok(watcher)
    });
    let watcher = match watcher {
        Ok(w) => Some(w),
        Err(err) => {
            warn!(error = %err, poll_seconds = poll.as_secs_f64(), "cannot watch for file changes; polling only");
            None
        }
    };
    tokio::spawn(async move {
        let _watcher = watcher;
        let mut ticker = tokio::time::interval(poll.max(Duration::from_millis(10)));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            tokio::select! {
                _ = shutdown.changed() => break,
                _ = ticker.tick() => {}
                Some(()) = rx.recv() => {
                    // Let a burst of events (a symlink swap is several) settle first.
                    tokio::time::sleep(SETTLE).await;
                    while rx.try_recv().is_ok() {}
                    debug!("file change event");
                }
            }
            target.reload();
        }
    })
}

named_enum! {
    /// What a reload attempt ended with (`result` label).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ReloadResult {
        Success => "success",
        Error => "error",
    }
}

/// `pod_director_config_reloads_total`, `pod_director_tls_reloads_total`.
#[derive(Debug, Clone)]
pub struct ReloadMetrics {
    config_reloads: Family<ResultLabels, Counter>,
    tls_reloads: Family<ResultLabels, Counter>,
}

impl ReloadMetrics {
    pub fn register(r: &mut Registry) -> Self {
        let config_reloads = register(
            r,
            "config_reloads",
            "Configuration reload attempts by result",
            Family::default(),
        );
        let tls_reloads = register(
            r,
            "tls_reloads",
            "TLS certificate reload attempts by result",
            Family::default(),
        );
        Self {
            config_reloads,
            tls_reloads,
        }
    }

    /// Exports every result at 0 before the first reload (see [`AdmissionMetrics::initialise`]).
    pub fn initialise(&self) {
        for result in ReloadResult::ALL {
            let labels = ResultLabels {
                result: result.as_str(),
            };
            let _ = self.config_reloads.get_or_create(&labels);
            let _ = self.tls_reloads.get_or_create(&labels);
        }
    }

    pub fn config_reloaded(&self, result: ReloadResult) {
        self.config_reloads
            .get_or_create(&ResultLabels {
                result: result.as_str(),
            })
            .inc();
    }

    pub fn tls_reloaded(&self, result: ReloadResult) {
        self.tls_reloads
            .get_or_create(&ResultLabels {
                result: result.as_str(),
            })
            .inc();
    }
}
