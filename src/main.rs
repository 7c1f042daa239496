use std::process::ExitCode;

use clap::Parser;
use pod_director::cli::{Cli, Command, ServeArgs, run_offline};
use pod_director::{app, telemetry};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve(args),
        other => run_offline(&other),
    }
}

fn serve(args: ServeArgs) -> ExitCode {
    limit_malloc_arenas();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let telemetry = match telemetry::init(args.log_format) {
            Ok(telemetry) => telemetry,
            Err(err) => {
                eprintln!("error: {err}");
                return ExitCode::FAILURE;
            }
        };
        let result = app::run(args).await;
        if let Err(err) = &result {
            tracing::error!(error = format!("{err:#}").as_str(), "pod-director failed");
        }
        // Flushing blocks until the exporter answers; keep it off the async workers.
        let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
        match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("error: {err:#}");
                ExitCode::FAILURE
            }
        }
    })
}

/// At most two glibc malloc arenas, unless `MALLOC_ARENA_MAX` says otherwise. glibc gives a thread
/// that meets contention an arena of its own (up to eight per core); spread over them, what the
/// continuous audit's scans freed stayed resident. The scale run (1,000 nodes, 10,000 pods, an
/// audit every 30 s; docs/src/performance-at-scale.md): peak RSS with the audit 25.9 MiB by
/// default, 23.8 MiB with two arenas (without the audit 20.2 and 20.5 MiB); `/mutate`'s
/// throughput the same (`cargo bench --bench load`).
#[allow(unsafe_code)] // a libc call the standard library lacks (SAFETY below)
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt takes no pointer; it runs before the server starts any thread.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}
