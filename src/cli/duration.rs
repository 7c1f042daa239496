//! The durations of the command line's flags (`--request-timeout 8s`, `--audit-interval 10m`).

use std::time::Duration;

/// Parses `10s`, `500ms`, `2m`, `1h` or a bare number of seconds.
///
/// Not `kube::core::Duration`: it refuses a bare number of seconds (`--idle-timeout 120`
/// works today), and panics on values that overflow (`99999999999999999999h`), where this
/// says what to write.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration; write e.g. 10s, 500ms, 2m"))?;
    let seconds = match unit.trim() {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        other => return Err(format!("unknown unit {other:?} in {text:?}; use ms, s, m or h")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("{text:?}: {e}"))
}

#[cfg(test)]
mod tests;
