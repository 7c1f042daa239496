//! Log lines leave the runtime threads through a bounded buffer.
//!
//! Every line goes into one in-memory buffer of at most [`BUFFER_BYTES`];
//! a writer thread of its own moves it to standard output in batches. A
//! request never waits on the output: when standard output is slow or
//! blocked (a log pipe nobody drains) and the buffer is full, the line is
//! dropped and counted (`pod_director_log_lines_dropped_total`), and once
//! the output takes lines again the writer adds one `WARN` line saying how
//! many were dropped (at most one per [`WARN_INTERVAL`]).
//!
//! The writer waits for lines with a short timeout rather than being woken
//! for each one: under load a runtime thread only appends to the buffer
//! (a mutex held for a copy), and the writer picks up a batch every
//! [`LINGER`] at most. After a quiet [`LINGER`] it parks, and the next line
//! wakes it. [`WriterGuard::shutdown`] flushes what is buffered, bounded in time.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use tracing_subscriber::fmt::MakeWriter;

use super::LogFormat;

/// Most bytes of log lines held while the output is slow.
pub(crate) const BUFFER_BYTES: usize = 2 * 1024 * 1024;
/// At most one "log lines dropped" warning per interval.
pub(crate) const WARN_INTERVAL: Duration = Duration::from_secs(10);
/// How long the writer waits for more lines before parking.
const LINGER: Duration = Duration::from_millis(2);

#[derive(Debug, Default)]
struct State {
    buffer: Vec<u8>,
    /// The writer waits without a timeout; the next line must wake it.
    parked: bool,
    /// A producer already asked the writer to hurry (buffer half full).
    nudged: bool,
    closed: bool,
    /// The writer is writing a batch.
    writing: bool,
    /// Dropped since the last warning.
    dropped: u64,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Wakes the writer.
    lines: Condvar,
    /// Signals that the buffer was written out.
    drained: Condvar,
    capacity: usize,
    dropped_total: Counter,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves a consistent buffer.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Appends one line, or drops it when it does not fit. Never blocks on the output.
    fn push(&self, line: &[u8]) {
        let mut state = self.lock();
        if state.buffer.len() + line.len() > self.capacity || state.closed {
            state.dropped += 1;
            drop(state);
            self.dropped_total.inc();
            return;
        }
        state.buffer.extend_from_slice(line);
        let wake = if state.parked {
            state.parked = false;
            true
        } else if !state.nudged && !state.writing && state.buffer.len() >= self.capacity / 2 {
            state.nudged = true;
            true
        } else {
            false
        };
        drop(state);
        if wake {
            self.lines.notify_one();
        }
    }
}

/// The producer side: a [`MakeWriter`] whose writes are whole log lines.
#[derive(Debug, Clone)]
pub struct LogWriter {
    shared: Arc<Shared>,
}

impl Write for LogWriter {
    fn write(&mut self, line: &[u8]) -> std::io::Result<usize> {
        self.shared.push(line);
        // Dropped lines are counted, not errors: the caller must not retry.
        Ok(line.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'w> MakeWriter<'w> for LogWriter {
    type Writer = LogWriter;

    fn make_writer(&'w self) -> Self::Writer {
        self.clone()
    }
}

/// Owns the writer thread; [`WriterGuard::shutdown`] flushes and stops it.
#[derive(Debug)]
pub struct WriterGuard {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl WriterGuard {
    /// Writes out what is buffered (waiting at most `timeout`: the output may be blocked for good) and stops the thread.
    pub fn shutdown(mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.lock();
        state.closed = true;
        state.parked = false;
        self.shared.lines.notify_one();
        while !state.buffer.is_empty() || state.writing {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = match self.shared.drained.wait_timeout(state, left) {
                Ok((state, _)) => state,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        drop(state);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        true
    }
}

/// Starts the writer thread moving lines to `out`; `dropped` counts the lines that did not fit in `capacity` bytes.
pub(super) fn spawn<W>(
    out: W,
    capacity: usize,
    format: LogFormat,
    dropped: Counter,
) -> std::io::Result<(LogWriter, WriterGuard)>
where
    W: Write + Send + 'static,
{
    let shared = Arc::new(Shared {
        state: Mutex::new(State::default()),
        lines: Condvar::new(),
        drained: Condvar::new(),
        capacity,
        dropped_total: dropped,
    });
    let writer = shared.clone();
    let thread = std::thread::Builder::new()
        .name("log-writer".to_owned())
        .spawn(move || run(&writer, out, format))?;
    Ok((
        LogWriter { shared: shared.clone() },
        WriterGuard {
            shared,
            thread: Some(thread),
        },
    ))
}

fn run(shared: &Shared, mut out: impl Write, format: LogFormat) {
    let mut batch = Vec::new();
    let mut unreported = 0_u64;
    let mut last_warning: Option<Instant> = None;
    loop {
        let mut state = shared.lock();
        let mut lingered = false;
        while state.buffer.is_empty() && !state.closed {
            state = if lingered {
                state.parked = true;
                shared
                    .lines
                    .wait(state)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
            } else {
                lingered = true;
                match shared.lines.wait_timeout(state, LINGER) {
                    Ok((state, _)) => state,
                    Err(poisoned) => poisoned.into_inner().0,
                }
            };
        }
        if state.buffer.is_empty() && state.closed {
            shared.drained.notify_all();
            return;
        }
        std::mem::swap(&mut state.buffer, &mut batch);
        unreported += std::mem::take(&mut state.dropped);
        state.parked = false;
        state.nudged = false;
        state.writing = true;
        drop(state);

        // Blocking here is the point: this thread, not a request, waits for the output.
        let written = out.write_all(&batch).and_then(|()| out.flush());
        batch.clear();
        if written.is_ok() && unreported > 0 && last_warning.is_none_or(|at| at.elapsed() >= WARN_INTERVAL) {
            let _ = out.write_all(&warning(format, unreported)).and_then(|()| out.flush());
            unreported = 0;
            last_warning = Some(Instant::now());
        }
        let mut state = shared.lock();
        state.writing = false;
        if state.buffer.is_empty() {
            shared.drained.notify_all();
        }
    }
}

/// The line reporting `dropped` lost lines, in the output's format.
fn warning(format: LogFormat, dropped: u64) -> Vec<u8> {
    use tracing_subscriber::fmt::time::{FormatTime as _, SystemTime};
    let mut timestamp = String::new();
    let _ = SystemTime.format_time(&mut tracing_subscriber::fmt::format::Writer::new(&mut timestamp));
    let message = "log lines dropped: standard output did not keep up (pod_director_log_lines_dropped_total)";
    match format {
        LogFormat::Json => format!(
            "{{\"timestamp\":{},\"level\":\"WARN\",\"target\":\"pod_director::telemetry\",\"message\":{},\"dropped\":{dropped}}}\n",
            super::json_string(&timestamp),
            super::json_string(message),
        ),
        LogFormat::Text => format!("{timestamp}  WARN pod_director::telemetry: {message} dropped={dropped}\n"),
    }
    .into_bytes()
}

#[cfg(test)]
mod tests;
