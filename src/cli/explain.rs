//! `pod-director explain` (being written).
use std::process::ExitCode;

use super::ExplainArgs;

pub fn run(_args: &ExplainArgs) -> ExitCode {
    ExitCode::from(2)
}
