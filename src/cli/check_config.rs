//! `pod-director check-config`: validate a file the way `serve` would.

use std::process::ExitCode;

use super::CheckConfigArgs;
use crate::config::Config;

pub fn run(args: &CheckConfigArgs) -> ExitCode {
    let path = Config::resolve_path(args.config.as_deref());
    match Config::load(&path) {
        Ok(loaded) => {
            println!("ok: {} (revision {})", path.display(), loaded.revision);
            for (var, setting) in &loaded.overrides {
                println!("override: {setting} from {var}");
            }
            for warning in &loaded.warnings {
                eprintln!("warning: {warning}");
            }
            if loaded.config.groups.is_empty() {
                println!("no groups defined: every pod is left alone");
            }
            for line in loaded.config.group_summaries() {
                println!("{line}");
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(1)
        }
    }
}
