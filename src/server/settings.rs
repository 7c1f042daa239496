//! The [`Settings`] [`crate::app::start`] and serving take, which tests build directly; `serve`'s
//! flags become them ([`crate::cli::ServeArgs`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::{Timeouts, TlsFiles};

/// Everything [`crate::app::start`] needs; `Settings::from_args` builds it from the command line.
#[derive(Debug, Clone)]
pub struct Settings {
    pub config_path: PathBuf,
    pub addr: SocketAddr,
    pub probe_addr: SocketAddr,
    /// `None` serves the admission endpoints over plain HTTP (`--insecure-http`).
    pub tls: Option<TlsFiles>,
    pub own_namespace: Option<String>,
    pub request_timeout: Duration,
    pub max_body_bytes: u64,
    pub reload_poll_interval: Duration,
    pub shutdown_timeout: Duration,
    /// The per-connection timers.
    pub timeouts: Timeouts,
    /// `None`: derived from the descriptor limit ([`super::limits::max_connections`]).
    pub max_connections: Option<usize>,
}
