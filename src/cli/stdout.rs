//! Standard output of the offline commands. A reader that goes away early (`pod-director explain … | head -1`)
//! is not a failure of the command: the rest of the output is dropped and the command exits with the code it had
//! decided (0, or `--fail-on`'s 1), not with the 141 of a process killed by SIGPIPE, so `set -o pipefail` scripts
//! do not fail because `head` stopped reading (docs/src/commands.md, "Output into a closed pipe"). Any other write error (a full disk) is reported on standard error and exits with
//! the command's error code. Rust ignores SIGPIPE, so a closed pipe shows up here as `BrokenPipe` instead of
//! killing the process; `println!` would panic on it.

use std::io::{self, Write};
use std::process::ExitCode;

/// Writes `text` to standard output and flushes it.
///
/// Ok when everything was written or the reader closed the pipe.
pub(crate) fn write(text: &str) -> io::Result<()> {
    write_to(&mut io::stdout().lock(), text)
}

fn write_to(out: &mut impl Write, text: &str) -> io::Result<()> {
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Writes `text` and returns `decided`; on a write error other than a closed pipe, says so on standard error and
/// returns `error_code`.
pub(crate) fn emit(text: &str, decided: ExitCode, error_code: u8) -> ExitCode {
    match write(text) {
        Ok(()) => decided,
        Err(err) => {
            // Standard error may be closed too: never panic for it.
            let _ = writeln!(io::stderr(), "error: cannot write to standard output: {err}");
            ExitCode::from(error_code)
        }
    }
}

#[cfg(test)]
mod tests;
