//! A real Prometheus (built by `e2e/tools.sh`), started on loopback to scrape one
//! pod-director, and its HTTP API (`/api/v1/query`, `query_range`,
//! `query_exemplars`). Killed and reaped on drop.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::process::{die_with_parent, free_local_addr, tail};
use super::{PATIENCE, notice, tool};

/// A running Prometheus.
pub struct Prometheus {
    pub url: String,
    /// The scrape interval of its one job.
    pub scrape_interval: Duration,
    child: Child,
    log: PathBuf,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

/// An error answer of the HTTP API (`status: error`), or a transport failure.
pub type ApiError = String;

impl Prometheus {
    /// Starts Prometheus scraping `target`'s `/metrics` every `scrape_interval`, over
    /// OpenMetrics (exemplars), with exemplar storage on; waits until the target is up.
    pub async fn scrape(target: SocketAddr, scrape_interval: Duration) -> Self {
        let interval = format!("{}ms", scrape_interval.as_millis());
        let job = format!(
            "  - job_name: pod-director\n    scrape_timeout: {interval}\n    \
             scrape_protocols: [OpenMetricsText1.0.0]\n    static_configs:\n      \
             - targets: ['{target}']\n        labels: {{pod: pod-director-e2e}}\n"
        );
        Self::start(&job, 1, scrape_interval, &format!("http://{target}/metrics")).await
    }

    /// Starts Prometheus with these `scrape_configs` entries (YAML, indented as list items of
    /// `scrape_configs:`), evaluating every `scrape_interval`; waits until `targets` targets are up.
    pub async fn start(jobs: &str, targets: usize, scrape_interval: Duration, what: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("prometheus-")
            .tempdir()
            .expect("a scratch directory");
        let interval = format!("{}ms", scrape_interval.as_millis());
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: {interval}\n  evaluation_interval: {interval}\n\
                 scrape_configs:\n{jobs}"
            ),
        )
        .expect("prometheus.yml written");
        let addr = free_local_addr();
        let log = dir.path().join("prometheus.log");
        let out = std::fs::File::create(&log).expect("prometheus log file");
        let mut command = Command::new(tool("E2E_PROMETHEUS", "prometheus"));
        command
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--enable-feature=exemplar-storage")
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::from(out.try_clone().expect("log handle")))
            .stderr(Stdio::from(out));
        die_with_parent(&mut command);
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start Prometheus: {e}"));
        let prometheus = Self {
            url: format!("http://{addr}"),
            scrape_interval,
            child,
            log,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .expect("an HTTP client"),
            _dir: dir,
        };
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Ok(result) = prometheus.query("count(up == 1)", None).await
                && result["result"][0]["value"][1]
                    .as_str()
                    .and_then(|v| v.parse::<usize>().ok())
                    >= Some(targets)
            {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "Prometheus did not scrape {what} within {PATIENCE:?}:\n{}",
                prometheus.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        notice(&format!(
            "Prometheus {} scraping {what} every {interval}",
            prometheus.url
        ));
        prometheus
    }

    pub fn log_tail(&self) -> String {
        tail(&self.log, 30)
    }

    async fn get(&self, path: &str, params: &[(&str, String)]) -> Result<Value, ApiError> {
        let response = self
            .http
            .get(format!("{}{path}", self.url))
            .query(params)
            .send()
            .await
            .map_err(|e| format!("GET {path}: {e}"))?;
        let body: Value = response
            .json()
            .await
            .map_err(|e| format!("GET {path}: not JSON: {e}"))?;
        if body["status"] != "success" {
            return Err(format!(
                "{}: {}",
                body["errorType"].as_str().unwrap_or("error"),
                body["error"].as_str().unwrap_or_default()
            ));
        }
        Ok(body["data"].clone())
    }

    /// An instant query at `time` (seconds since the epoch; `None`: now): `{resultType, result}`.
    pub async fn query(&self, expr: &str, time: Option<f64>) -> Result<Value, ApiError> {
        let mut params = vec![("query", expr.to_owned())];
        if let Some(time) = time {
            params.push(("time", format!("{time:.3}")));
        }
        self.get("/api/v1/query", &params).await
    }

    /// A range query: `{resultType: matrix, result}`.
    pub async fn query_range(&self, expr: &str, start: f64, end: f64, step: Duration) -> Result<Value, ApiError> {
        self.get(
            "/api/v1/query_range",
            &[
                ("query", expr.to_owned()),
                ("start", format!("{start:.3}")),
                ("end", format!("{end:.3}")),
                ("step", format!("{}ms", step.as_millis())),
            ],
        )
        .await
    }

    /// `/api/v1/query_exemplars`: the exemplars of the series that `expr` selects.
    pub async fn query_exemplars(&self, expr: &str, start: f64, end: f64) -> Result<Value, ApiError> {
        self.get(
            "/api/v1/query_exemplars",
            &[
                ("query", expr.to_owned()),
                ("start", format!("{start:.3}")),
                ("end", format!("{end:.3}")),
            ],
        )
        .await
    }

    /// The timestamp of the latest stored scrape.
    pub async fn last_scrape(&self) -> Option<f64> {
        let result = self.query("timestamp(up)", None).await.ok()?;
        result["result"][0]["value"][1].as_str()?.parse().ok()
    }

    /// Waits until a scrape that started after this call has been stored: the
    /// `timestamp()` of `up` moves past now.
    pub async fn wait_for_next_scrape(&self) {
        let now = unix_now();
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if self.last_scrape().await.is_some_and(|at| at > now) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "Prometheus did not scrape again within {PATIENCE:?}:\n{}",
                self.log_tail()
            );
            tokio::time::sleep(self.scrape_interval / 4).await;
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Seconds since the epoch.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}
