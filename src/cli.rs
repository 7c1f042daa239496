//! Command line: `serve`, `explain`, `audit`, `check-config`, `version`.

mod audit;
mod check_config;
mod duration;
pub(crate) mod explain;
mod policies;
mod serve;
mod stdout;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use pod_director_engine::config::{Config, Group};

pub(crate) use self::duration::parse_duration;
pub use self::serve::{ContinuousAuditArgs, ReconcileArgs, ServeArgs};

/// `--group` names no group of the configuration (`explain`, `explain --policies`, `audit`).
#[derive(Debug, thiserror::Error)]
#[error("--group {name:?} is not a group of the configuration (groups: {groups})")]
pub(crate) struct UnknownGroup {
    name: String,
    groups: String,
}

/// The group `--group` names, if any, checked against the configuration.
pub(crate) fn named_group<'c>(
    config: &'c Config,
    group: Option<&str>,
) -> Result<Option<(&'c str, &'c Group)>, UnknownGroup> {
    let Some(name) = group else {
        return Ok(None);
    };
    match config.groups.get_key_value(name) {
        Some((name, group)) => Ok(Some((name, group))),
        None => Err(UnknownGroup {
            name: name.to_owned(),
            groups: config.groups.keys().map(String::as_str).collect::<Vec<_>>().join(", "),
        }),
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "pod-director",
    version,
    about = "Kubernetes admission webhook that places the pods of chosen namespaces on chosen nodes, dry-run first"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
// Parsed once per process; boxing `serve`'s flags would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Command {
    /// Run the admission webhook (HTTPS) and its probe/metrics endpoint.
    Serve(ServeArgs),
    /// Show, offline, what pod-director would do to the pods in manifests.
    Explain(ExplainArgs),
    /// Audit a live cluster: decide its running pods and workload templates as enforce would, and say per
    /// group whether it is ready to enforce.
    Audit(AuditArgs),
    /// Validate a configuration file; prints "ok" and one line per group, or every error.
    CheckConfig(CheckConfigArgs),
    /// Turn the in-tree plugins' namespace annotations (PodNodeSelector, PodTolerationRestriction) into groups:
    /// prints the groups and the namespace labels to set as YAML, and what has no group equivalent.
    MigrateInTree(MigrateInTreeArgs),
    /// Print the version.
    Version,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
    Yaml,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    /// Exit 1 when any pod would be denied.
    Deny,
    /// Exit 1 when any pod would be patched or denied.
    Patch,
}

#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// Configuration file (default: $POD_DIRECTOR_CONFIG, else /etc/pod-director/config.yaml).
    #[arg(short, long)]
    pub config: Option<PathBuf>,
    /// Manifest files or directories (YAML or JSON, multi-document); `-` reads standard input.
    #[arg(short = 'f', long = "filename", required_unless_present = "policies", num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Print the admission policies compiled from the groups with `enforceWith: policy` or
    /// `webhookAndPolicy` in enforce (with `--group`: that group's, whatever its mode), for review
    /// before they are applied.
    #[arg(long, conflicts_with_all = ["files", "nodes", "namespace", "fail_on"])]
    pub policies: bool,
    /// Namespace for objects that name none (default: "default").
    #[arg(short, long)]
    pub namespace: Option<String>,
    /// Evaluate every pod as a member of this group, whatever its namespace says.
    #[arg(short, long)]
    pub group: Option<String>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// Exit 1 when a pod would be denied (deny) or changed at all (patch).
    #[arg(long, value_enum)]
    pub fail_on: Option<FailOn>,
    /// Node manifests (files or directories; `kubectl get nodes -o yaml` output works): count each pod's
    /// feasible nodes and check `spec.nodeName` against them. Karpenter NodePools and Cluster API
    /// MachineDeployments/MachineSets among them count as provisioners when no node fits.
    #[arg(long = "nodes", num_args = 1..)]
    pub nodes: Vec<PathBuf>,
    /// pod-director's own namespace (`serve --namespace`, the same `$POD_NAMESPACE`), excluded as `serve` excludes
    /// it: its pods are skipped, and the bindings `--policies` prints exclude it as the applied ones do.
    #[arg(long, env = "POD_NAMESPACE")]
    pub pod_director_namespace: Option<String>,
    /// Instead of the decisions: the pods that the in-tree plugins (the Namespaces' annotations, the files of
    /// `inTreePlugins`) and the groups `migrate-in-tree` makes of them decide differently, both in enforce;
    /// exit 1 when any does.
    #[arg(long, conflicts_with_all = ["policies", "group", "fail_on"])]
    pub compare_in_tree: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuditFailOn {
    /// Exit 1 when any audited group is not ready to enforce.
    NotReady,
}

#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// Configuration file (default: $POD_DIRECTOR_CONFIG, else /etc/pod-director/config.yaml).
    #[arg(short, long)]
    pub config: Option<PathBuf>,
    /// Audit only this group.
    #[arg(short, long)]
    pub group: Option<String>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// Exit 1 when a group is not ready to enforce (for pipelines).
    #[arg(long, value_enum)]
    pub fail_on: Option<AuditFailOn>,
    /// Objects per list request (`limit`); the next page is asked with `continue`.
    #[arg(long, default_value_t = crate::cluster::audit::scan::DEFAULT_PAGE_SIZE, value_parser = clap::value_parser!(u32).range(1..))]
    pub page_size: u32,
    /// Longest wait for each request to the API server (e.g. 30s, 5s).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub request_timeout: std::time::Duration,
    /// pod-director's own namespace, excluded as `serve` excludes it.
    #[arg(long, env = "POD_NAMESPACE")]
    pub pod_director_namespace: Option<String>,
    /// Whether the API server runs the in-tree plugins PodNodeSelector and PodTolerationRestriction, for the
    /// namespaces whose annotations nothing enforces: `probe` (a dry-run pod CREATE per plugin in an annotated
    /// namespace; needs create on pods there), `none`, or the plugins it runs (`PodNodeSelector,PodTolerationRestriction`).
    #[arg(long, default_value = "probe", value_parser = crate::cluster::audit::plugins::parse)]
    pub in_tree_plugins: crate::cluster::audit::plugins::InTreePlugins,
    /// No progress lines on standard error.
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Debug, clap::Args)]
pub struct MigrateInTreeArgs {
    /// Configuration file whose `inTreePlugins` files (the plugins' defaults and whitelists) are read too; the
    /// groups take its mode and `namespaceLabel` (without it: dryRun, pod-director/group).
    #[arg(short, long)]
    pub config: Option<PathBuf>,
    /// Manifests with the Namespaces (YAML or JSON, Lists too); from a live cluster:
    /// `kubectl get namespaces -o yaml | pod-director migrate-in-tree -f -`.
    #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct CheckConfigArgs {
    /// Configuration file (default: $POD_DIRECTOR_CONFIG, else /etc/pod-director/config.yaml).
    #[arg(short, long)]
    pub config: Option<PathBuf>,
    /// Print the JSON Schema (draft-07) of the configuration file instead of checking one
    /// (the chart's values.schema.json embeds it as `config`).
    #[arg(long, conflicts_with = "config")]
    pub print_schema: bool,
}

/// Runs the subcommands other than `serve` (which `main` runs inside its tokio
/// runtime); `audit` starts a small runtime of its own.
pub fn run_offline(command: &Command) -> ExitCode {
    match command {
        Command::Explain(args) => explain::run(args),
        Command::Audit(args) => audit::run(args),
        Command::CheckConfig(args) => check_config::run(args),
        Command::MigrateInTree(args) => explain::migrate_in_tree(args),
        Command::Version => stdout::emit(
            &format!("pod-director {}\n", env!("CARGO_PKG_VERSION")),
            ExitCode::SUCCESS,
            1,
        ),
        Command::Serve(_) => ExitCode::FAILURE,
    }
}
