//! `pod-director audit`: against a live cluster (KUBECONFIG or in-cluster),
//! read-only, decide every group's running pods and workload templates as
//! enforce would, and say per group whether it is ready to enforce (see
//! [`crate::cluster::audit`]). Exit codes: 0 done, 1 when `--fail-on not-ready`
//! matched, 2 when the audit could not be done (bad configuration, the API
//! server unreachable or refusing, a request timing out).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{AuditArgs, AuditFailOn, OutputFormat};
use crate::cluster::audit::scan::{self, AuditError, Progress, ScanOptions};
use crate::cluster::nodes::{NodeStore, Nodes, ProvisionerStore};
use pod_director_engine::audit::{Audit, render};
use pod_director_engine::config::{Config, ConfigError};
use pod_director_engine::placement::NodeView;

/// How often a long scan says how far it is, on standard error.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Audit(#[from] AuditError),
    #[error("{0}")]
    UnknownGroup(#[from] super::UnknownGroup),
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    #[error("cannot render JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("cannot render YAML: {0}")]
    Yaml(String),
}

pub(super) fn run(args: &AuditArgs) -> ExitCode {
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CliError::Runtime)
        .and_then(|runtime| runtime.block_on(audit(args)));
    let rendered = result.and_then(|audit| {
        let text = match args.output {
            OutputFormat::Json => format!("{}\n", render::json(&audit)?),
            OutputFormat::Yaml => {
                let value: serde_json::Value = serde_json::from_str(&render::json(&audit)?)?;
                serde_saphyr::to_string(&value).map_err(|e| CliError::Yaml(e.to_string()))?
            }
            OutputFormat::Text => render::text(&audit),
        };
        Ok((audit, text))
    });
    match rendered {
        Ok((audit, text)) => {
            let decided = if args.fail_on == Some(AuditFailOn::NotReady) && !audit.all_ready() {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            };
            super::stdout::emit(&text, decided, 2)
        }
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(2)
        }
    }
}

/// A client from KUBECONFIG or the in-cluster service account, every request bounded by `timeout`.
async fn client(timeout: Duration) -> Result<kube::Client, AuditError> {
    let mut config = tokio::time::timeout(timeout, kube::Config::infer())
        .await
        .map_err(|_| AuditError::Client(format!("no configuration within {timeout:?}")))?
        .map_err(|e| AuditError::Client(e.to_string()))?;
    // The client's own timers back up the per-request bound (the list's timeout fires first, with its message).
    let backstop = timeout + Duration::from_secs(5);
    config.connect_timeout = Some(backstop);
    config.read_timeout = Some(backstop);
    config.write_timeout = Some(backstop);
    kube::Client::try_from(config).map_err(|e| AuditError::Client(e.to_string()))
}

async fn audit(args: &AuditArgs) -> Result<Audit, CliError> {
    let path = Config::resolve_path(args.config.as_deref());
    let loaded = pod_director_engine::config::load_config(&path, args.pod_director_namespace.as_deref())?;
    let config = loaded.config;
    super::named_group(&config, args.group.as_deref())?;
    let options = ScanOptions {
        group: args.group.clone(),
        page_size: args.page_size,
        request_timeout: args.request_timeout,
        in_tree_plugins: args.in_tree_plugins.clone(),
    };
    let client = client(args.request_timeout).await?;
    let store = NodeStore::new();
    for node in scan::list_nodes(&client, &options).await? {
        store.apply(node);
    }
    let provisioners = crate::cluster::provisioners::list(&client)
        .await
        .map_err(|source| AuditError::List {
            what: "provisioners (Karpenter NodePools, Cluster API node groups)".to_owned(),
            source,
            hint: "",
        })?;
    let pools = ProvisionerStore::of(provisioners);
    let nodes = Nodes::new(Arc::new(store)).with_provisioners(Arc::new(pools));
    let view = nodes.view(None);
    let quiet = args.quiet;
    let mut last = Instant::now();
    let mut progress = move |p: Progress| {
        if quiet || last.elapsed() < PROGRESS_EVERY {
            return;
        }
        last = Instant::now();
        eprintln!(
            "audit: {}/{} namespaces, {} pods, {} workload templates ({:.1} s)",
            p.namespaces_done,
            p.namespaces_total,
            p.pods,
            p.templates,
            p.elapsed.as_secs_f64()
        );
    };
    Ok(scan::scan(&client, &config, Some(&view as &dyn NodeView), &options, &mut progress).await?)
}
