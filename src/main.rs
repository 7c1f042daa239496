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
