//! `serve`'s command line ([`ServeArgs`], each flag also an environment variable, with the
//! webhook reconciler's [`ReconcileArgs`] and the continuous audit's [`ContinuousAuditArgs`]) and the
//! [`Settings`] they become.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::parse_duration;
use crate::server::{Settings, Timeouts, TlsFiles};
use crate::telemetry::LogFormat;
use pod_director_engine::compile::webhook_entries::{EntrySettings, Kind};
use pod_director_engine::config::Config;

#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Configuration file (default: $POD_DIRECTOR_CONFIG, else /etc/pod-director/config.yaml).
    #[arg(short, long)]
    pub config: Option<PathBuf>,
    /// Address of the HTTPS admission endpoints (/mutate, /validate).
    #[arg(long, env = "POD_DIRECTOR_ADDR", default_value = "0.0.0.0:8443")]
    pub addr: SocketAddr,
    /// Address of the plain-HTTP probe endpoints (/healthz, /readyz, /metrics).
    #[arg(long, env = "POD_DIRECTOR_PROBE_ADDR", default_value = "0.0.0.0:8080")]
    pub probe_addr: SocketAddr,
    /// Serving certificate (PEM chain); reloaded when it changes.
    #[arg(long, env = "POD_DIRECTOR_TLS_CERT", default_value = "/etc/pod-director/tls/tls.crt")]
    pub tls_cert: PathBuf,
    /// Private key of the serving certificate (PEM).
    #[arg(long, env = "POD_DIRECTOR_TLS_KEY", default_value = "/etc/pod-director/tls/tls.key")]
    pub tls_key: PathBuf,
    /// Serve the admission endpoints over plain HTTP. For local debugging only:
    /// the API server only calls webhooks over HTTPS.
    #[arg(long, env = "POD_DIRECTOR_INSECURE_HTTP")]
    pub insecure_http: bool,
    /// The namespace pod-director runs in; its pods are never touched.
    #[arg(long, env = "POD_NAMESPACE")]
    pub namespace: Option<String>,
    /// Log line format.
    #[arg(long, env = "POD_DIRECTOR_LOG_FORMAT", value_enum, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,
    /// Longest time spent on one admission request (e.g. 10s, 500ms); keep it below the webhook's timeoutSeconds.
    #[arg(long, env = "POD_DIRECTOR_REQUEST_TIMEOUT", default_value = "8s", value_parser = parse_duration)]
    pub request_timeout: Duration,
    /// Largest request body accepted; larger ones get 413.
    #[arg(long, env = "POD_DIRECTOR_MAX_BODY_BYTES", default_value_t = 4 * 1024 * 1024)]
    pub max_body_bytes: u64,
    /// How often the configuration and certificate files are re-read, besides watching them (e.g. 10s).
    #[arg(long, env = "POD_DIRECTOR_RELOAD_POLL_INTERVAL", default_value = "10s", value_parser = parse_duration)]
    pub reload_poll_interval: Duration,
    /// Longest wait for in-flight requests after SIGTERM/SIGINT.
    #[arg(long, env = "POD_DIRECTOR_SHUTDOWN_TIMEOUT", default_value = "25s", value_parser = parse_duration)]
    pub shutdown_timeout: Duration,
    /// How often to look again whether the cluster serves Karpenter NodePools or Cluster API node groups, while it does not.
    #[arg(long, env = "POD_DIRECTOR_NODEPOOL_DISCOVERY_INTERVAL", default_value = "5m", value_parser = parse_duration)]
    pub nodepool_discovery_interval: Duration,
    #[command(flatten)]
    pub webhooks: ReconcileArgs,
    #[command(flatten)]
    pub audit: ContinuousAuditArgs,
    /// Longest TLS handshake; slower connections are dropped.
    #[arg(long, env = "POD_DIRECTOR_HANDSHAKE_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub handshake_timeout: Duration,
    /// Longest wait for the first byte of a connection once TLS is established.
    #[arg(long, env = "POD_DIRECTOR_FIRST_BYTE_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub first_byte_timeout: Duration,
    /// Longest wait from a request's first byte to its complete head (HTTP/1.1 headers; HTTP/2: the
    /// connection preface and the first request).
    #[arg(long, env = "POD_DIRECTOR_HEADER_READ_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub header_read_timeout: Duration,
    /// How long a connection may stay without a request before it is closed (HTTP/2: GOAWAY). Above the
    /// API server's 90s client idle timeout, so the client closes idle connections first.
    #[arg(long, env = "POD_DIRECTOR_IDLE_TIMEOUT", default_value = "120s", value_parser = parse_duration)]
    pub idle_timeout: Duration,
    /// How often HTTP/2 connections are PINGed when quiet (0 turns PINGs off).
    #[arg(long, env = "POD_DIRECTOR_HTTP2_KEEPALIVE_INTERVAL", default_value = "30s", value_parser = parse_duration)]
    pub http2_keepalive_interval: Duration,
    /// How long an HTTP/2 PING may go unanswered before the connection is closed.
    #[arg(long, env = "POD_DIRECTOR_HTTP2_KEEPALIVE_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub http2_keepalive_timeout: Duration,
    /// Most connections the admission port holds; more are refused at accept. Default: the soft
    /// RLIMIT_NOFILE minus 96 descriptors kept for the probe port, the cache watch and the API client,
    /// at most 4096.
    #[arg(long, env = "POD_DIRECTOR_MAX_CONNECTIONS", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: Option<u64>,
}

/// The webhook configurations to keep in step (`serve` flags; the chart sets them).
#[derive(Debug, Clone, clap::Args)]
pub struct ReconcileArgs {
    /// Name of the MutatingWebhookConfiguration whose pod entries pod-director keeps in
    /// step with its live configuration (the chart sets it; empty: not reconciled).
    #[arg(long, env = "POD_DIRECTOR_MUTATING_WEBHOOK_CONFIGURATION", default_value = "")]
    pub mutating_webhook_configuration: String,
    /// Name of the ValidatingWebhookConfiguration to keep in step likewise.
    #[arg(long, env = "POD_DIRECTOR_VALIDATING_WEBHOOK_CONFIGURATION", default_value = "")]
    pub validating_webhook_configuration: String,
    /// How often the webhook configurations are re-checked besides after each reload
    /// (undoes drift, e.g. a `helm upgrade` rendering other selectors), e.g. 60s.
    #[arg(long, env = "POD_DIRECTOR_WEBHOOK_RESYNC_INTERVAL", default_value = "60s", value_parser = parse_duration)]
    pub webhook_resync_interval: Duration,
    /// Apply and keep in step the MutatingAdmissionPolicy and ValidatingAdmissionPolicy (and their
    /// bindings) of the groups with `enforceWith: policy` in enforce, and hand their pods over to
    /// them from the webhook entries; of those with `webhookAndPolicy`, the ValidatingAdmissionPolicy
    /// alone, in place of `/validate` (the chart's `webhook.admissionPolicies`). Off: every group stays on the webhook.
    #[arg(long, env = "POD_DIRECTOR_ADMISSION_POLICIES", default_value_t = false, action = clap::ArgAction::Set)]
    pub admission_policies: bool,
    #[command(flatten)]
    pub entries: EntryArgs,
}

/// The chart values that shape the entries besides the configuration ([`EntrySettings`]): the
/// serve flags the chart passes (`webhook.timeoutSeconds`, `webhook.failurePolicy.*`), defaulting
/// to the chart's defaults.
#[derive(Debug, Clone, clap::Args)]
pub struct EntryArgs {
    /// timeoutSeconds of every entry pod-director owns (the chart's `webhook.timeoutSeconds`).
    #[arg(long, env = "POD_DIRECTOR_WEBHOOK_TIMEOUT_SECONDS", default_value_t = 5,
          value_parser = clap::value_parser!(u8).range(1..=30))]
    pub webhook_timeout_seconds: u8,
    /// failurePolicy of the entries for groups in enforce (`webhook.failurePolicy.enforce`).
    #[arg(long, env = "POD_DIRECTOR_WEBHOOK_FAILURE_POLICY_ENFORCE", default_value = "Fail",
          value_parser = ["Fail", "Ignore"])]
    pub webhook_failure_policy_enforce: String,
    /// failurePolicy of the entry for labels naming no group (`webhook.failurePolicy.unknownGroup`).
    #[arg(long, env = "POD_DIRECTOR_WEBHOOK_FAILURE_POLICY_UNKNOWN_GROUP", default_value = "Ignore",
          value_parser = ["Fail", "Ignore"])]
    pub webhook_failure_policy_unknown_group: String,
}

impl EntryArgs {
    pub fn settings(&self) -> EntrySettings {
        EntrySettings {
            webhook_timeout_seconds: self.webhook_timeout_seconds,
            webhook_failure_policy_enforce: self.webhook_failure_policy_enforce.clone(),
            webhook_failure_policy_unknown_group: self.webhook_failure_policy_unknown_group.clone(),
        }
    }
}

impl ReconcileArgs {
    /// The configurations named, `(kind, name)`; empty when reconciling is off.
    pub fn targets(&self) -> Vec<(Kind, String)> {
        [
            (Kind::Mutating, &self.mutating_webhook_configuration),
            (Kind::Validating, &self.validating_webhook_configuration),
        ]
        .into_iter()
        .filter(|(_, name)| !name.trim().is_empty())
        .map(|(kind, name)| (kind, name.trim().to_owned()))
        .collect()
    }
}

/// `serve`'s continuous audit flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ContinuousAuditArgs {
    /// How often the running pods and workloads are audited (e.g. 10m, 30s); 0 turns the continuous audit off.
    #[arg(long, env = "POD_DIRECTOR_AUDIT_INTERVAL", default_value = "10m", value_parser = parse_duration)]
    pub audit_interval: Duration,
    /// The coordination.k8s.io Lease (in --namespace) that elects the one replica that audits.
    #[arg(long, env = "POD_DIRECTOR_AUDIT_LEASE", default_value = "pod-director-audit")]
    pub audit_lease: String,
    /// Write the continuous audit's findings as an OpenReports Report (openreports.io/v1alpha1) per
    /// namespace that selects a group, when the API server serves that CRD. Off: the audit deletes
    /// the reports it wrote, if it may.
    #[arg(long, env = "POD_DIRECTOR_REPORTS", default_value_t = false, action = clap::ArgAction::Set)]
    pub reports: bool,
    /// The name of the Report in each namespace (distinct per installation when several run).
    #[arg(long, env = "POD_DIRECTOR_REPORTS_NAME", default_value = "pod-director")]
    pub reports_name: String,
    /// Most results per Report (configuration.limits.maxResults): the worst are kept, the summary counts all.
    #[arg(long, env = "POD_DIRECTOR_REPORTS_MAX_RESULTS", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub reports_max_results: u32,
    /// Publish a Kubernetes Event (events.k8s.io/v1) on a workload when its audit verdict changes
    /// (at most 20 per scan; none at the first scan after start).
    #[arg(long, env = "POD_DIRECTOR_AUDIT_EVENTS", default_value_t = false, action = clap::ArgAction::Set)]
    pub audit_events: bool,
    /// Whether the API server runs the in-tree plugins PodNodeSelector and PodTolerationRestriction, for the
    /// namespaces whose annotations nothing enforces: `probe` (a dry-run pod CREATE per plugin and scan in an
    /// annotated namespace; needs create on pods there), `none`, or the plugins it runs (comma-separated).
    #[arg(long, env = "POD_DIRECTOR_AUDIT_IN_TREE_PLUGINS", default_value = "probe", value_parser = crate::cluster::audit::plugins::parse)]
    pub audit_in_tree_plugins: crate::cluster::audit::plugins::InTreePlugins,
}

impl Settings {
    pub(crate) fn from_args(args: &ServeArgs) -> Self {
        Self {
            config_path: Config::resolve_path(args.config.as_deref()),
            addr: args.addr,
            probe_addr: args.probe_addr,
            tls: (!args.insecure_http).then(|| TlsFiles {
                cert: args.tls_cert.clone(),
                key: args.tls_key.clone(),
            }),
            own_namespace: args.namespace.clone().filter(|n| !n.is_empty()),
            request_timeout: args.request_timeout,
            max_body_bytes: args.max_body_bytes,
            reload_poll_interval: args.reload_poll_interval,
            shutdown_timeout: args.shutdown_timeout,
            timeouts: Timeouts {
                handshake: args.handshake_timeout,
                first_byte: args.first_byte_timeout,
                header_read: args.header_read_timeout,
                idle: args.idle_timeout,
                http2_keepalive_interval: Some(args.http2_keepalive_interval).filter(|d| !d.is_zero()),
                http2_keepalive_timeout: args.http2_keepalive_timeout,
            },
            max_connections: args.max_connections.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        }
    }
}

#[cfg(test)]
mod tests;
