//! HTTPS admission server (placeholder: being written).

use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Configuration file (default: $POD_DIRECTOR_CONFIG, else /etc/pod-director/config.yaml).
    #[arg(short, long)]
    pub config: Option<PathBuf>,
}

pub async fn run(_args: ServeArgs) -> anyhow::Result<()> {
    anyhow::bail!("serve is not implemented yet")
}
