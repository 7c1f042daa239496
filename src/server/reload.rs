//! Hot reload of the configuration and the serving certificate.
//!
//! Mounted ConfigMaps and Secrets change by kubelet swapping a `..data`
//! symlink in the mount directory, so each file's *directory* is watched
//! (non-recursively) and, because events can be missed (network filesystems,
//! symlink tricks), the files are also polled. Either way the files' content is
//! fingerprinted and only a change is acted on. A new version that does not
//! load is judged again once it has been unchanged for [`QUIET`] (a file being
//! written in place is briefly empty or cut short): only then is it refused,
//! logged and counted, once; the previous version stays live all along.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
use crate::metrics::{ResultLabels, register};
use pod_director_engine::config::{Loaded, load_config};
use pod_director_engine::plugin_config;

/// Events closer together than this are handled as one change.
const SETTLE: Duration = Duration::from_millis(100);

/// A digest of the files' content (or of the error reading them).
pub(crate) type Fingerprint = [u8; 32];

pub(crate) fn fingerprint(paths: &[&Path]) -> Fingerprint {
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

/// Every file the configuration at `path` reads, as its content says now (the environment's
/// overrides applied): itself, then the in-tree plugins' files it names
/// ([`plugin_config::paths`]). Read leniently: a file that does not parse names no other, and the
/// load says what is wrong with it.
fn config_files(path: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut document = serde_saphyr::from_str::<serde_json::Value>(&text).unwrap_or_default();
    // An override that does not apply is the load's error to report.
    let _ = pod_director_engine::config::env::apply(&mut document, std::env::vars());
    let base = path.parent().filter(|dir| !dir.as_os_str().is_empty());
    let plugins = plugin_config::paths(&document["inTreePlugins"], base.unwrap_or(Path::new(".")));
    [vec![path.to_owned()], plugins].concat()
}

/// The fingerprint of the configuration at `path` and of the files it names ([`config_files`]).
pub(crate) fn config_fingerprint(path: &Path) -> Fingerprint {
    fingerprint(&config_files(path).iter().map(PathBuf::as_path).collect::<Vec<_>>())
}

/// Logs the warnings of a configuration that was accepted (e.g. no groups defined).
pub(crate) fn warn_about(loaded: &Loaded) {
    let reservations = pod_director_engine::placement::reservation::warnings(&loaded.config);
    for warning in loaded.warnings.iter().chain(&reservations) {
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
    /// The fingerprint of the content now live.
    fn live(&mut self) -> &mut Fingerprint;
    /// Loads the files and swaps them in (logging and counting the success), or says why not.
    fn load(&mut self) -> Result<(), String>;
    /// Logs and counts a refusal that outlasted [`QUIET`]: the previous version stays live.
    fn refuse(&self, why: &str);
}

/// How long a refused new version must stay unchanged before it counts as refused.
/// A file written in place (truncated, then written: `cat > file`, many editors) is
/// empty or cut short for a moment; its complete content arrives well within this.
pub(crate) const QUIET: Duration = Duration::from_secs(1);

/// Change detection and settling for one [`Reload`] target.
struct Changes<R> {
    target: R,
    /// A new version that did not load, and when it was first read.
    unsettled: Option<(Fingerprint, Instant)>,
}

impl<R: Reload> Changes<R> {
    /// Acts on the files' current content; returns when to look again if a refusal has not settled.
    fn check(&mut self) -> Option<Instant> {
        let paths = self.target.paths();
        let now = fingerprint(&paths.iter().map(PathBuf::as_path).collect::<Vec<_>>());
        if let Some((pending, since)) = self.unsettled
            && pending == now
        {
            if since.elapsed() < QUIET {
                return Some(since + QUIET);
            }
            self.unsettled = None;
            *self.target.live() = now;
            if let Err(why) = self.target.load() {
                self.target.refuse(&why);
            }
            return None;
        }
        if now == *self.target.live() {
            self.unsettled = None;
            return None;
        }
        match self.target.load() {
            Ok(()) => {
                *self.target.live() = now;
                self.unsettled = None;
                None
            }
            Err(why) => {
                debug!(
                    error = why.as_str(),
                    quiet_ms = QUIET.as_millis() as u64,
                    "new file content does not load yet; judging it once it has been unchanged for a while"
                );
                let since = Instant::now();
                self.unsettled = Some((now, since));
                Some(since + QUIET)
            }
        }
    }
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
    /// The configuration file and the in-tree plugins' files it names now.
    fn paths(&self) -> Vec<PathBuf> {
        config_files(&self.path)
    }

    fn live(&mut self) -> &mut Fingerprint {
        &mut self.last
    }

    fn load(&mut self) -> Result<(), String> {
        let previous = self.live.load().revision.clone();
        let loaded = load_config(&self.path, self.own_namespace.as_deref()).map_err(|err| err.to_string())?;
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
        Ok(())
    }

    fn refuse(&self, why: &str) {
        error!(
            config.revision = self.live.load().revision.as_str(),
            error = why,
            path = %self.path.display(),
            "new configuration refused; the previous one stays live"
        );
        self.metrics.config_reloaded(ReloadResult::Error);
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

    fn live(&mut self) -> &mut Fingerprint {
        &mut self.last
    }

    fn load(&mut self) -> Result<(), String> {
        let key = tls::load(&self.files).map_err(|err| err.to_string())?;
        self.resolver.replace(key);
        info!(cert = %self.files.cert.display(), "serving certificate reloaded");
        self.metrics.tls_reloaded(ReloadResult::Success);
        Ok(())
    }

    fn refuse(&self, why: &str) {
        warn!(
            error = why,
            "new serving certificate refused; the previous one stays in use"
        );
        self.metrics.tls_reloaded(ReloadResult::Error);
    }
}

/// Checks `target`'s files whenever their directories report a change, every `poll`, and when a
/// refused new version has been unchanged for [`QUIET`], until `shutdown`.
pub(crate) fn spawn(
    target: impl Reload,
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
        let mut changes = Changes {
            target,
            unsettled: None,
        };
        let mut ticker = tokio::time::interval(poll.max(Duration::from_millis(10)));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        let mut again: Option<Instant> = None;
        loop {
            let settle = async {
                match again {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = shutdown.changed() => break,
                _ = ticker.tick() => {}
                () = settle => {}
                Some(()) = rx.recv() => {
                    // Let a burst of events (a symlink swap is several) settle first.
                    tokio::time::sleep(SETTLE).await;
                    while rx.try_recv().is_ok() {}
                    debug!("file change event");
                }
            }
            again = changes.check();
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
