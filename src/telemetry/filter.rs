//! The `RUST_LOG` filter: decisions stay at `info` unless `RUST_LOG` names their target.

use tracing_subscriber::{EnvFilter, filter};

use super::{DECISION_TARGET, TelemetryError};

/// `RUST_LOG` (default `info`), with decisions kept at `info` unless it names their target.
pub(super) fn env_filter(rust_log: Option<&str>) -> Result<EnvFilter, TelemetryError> {
    let directives = rust_log.unwrap_or_default();
    let filter = EnvFilter::builder()
        .with_default_directive(filter::LevelFilter::INFO.into())
        .parse(directives)
        .map_err(TelemetryError::Filter)?;
    if directives.contains(DECISION_TARGET) {
        return Ok(filter);
    }
    let decisions = format!("{DECISION_TARGET}=info")
        .parse()
        .map_err(TelemetryError::Filter)?;
    Ok(filter.add_directive(decisions))
}
