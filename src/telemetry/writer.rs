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
pub fn spawn<W>(
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
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    /// An output that blocks while `blocked` is set, like a pipe nobody reads.
    #[derive(Clone, Default)]
    struct Gate {
        blocked: Arc<AtomicBool>,
        /// Set once the writer thread is inside `write` (waiting, if blocked).
        entered: Arc<AtomicBool>,
        written: Arc<Mutex<Vec<u8>>>,
    }

    impl Write for Gate {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.entered.store(true, Ordering::SeqCst);
            while self.blocked.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
            self.written
                .lock()
                .map_err(|_| std::io::Error::other("poisoned"))?
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Gate {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.written.lock().map(|w| w.clone()).unwrap_or_default()).into_owned()
        }
    }

    #[test]
    fn lines_reach_the_output_in_order_and_shutdown_flushes_them() {
        let gate = Gate::default();
        let (mut writer, guard) =
            spawn(gate.clone(), 1024 * 1024, LogFormat::Json, Counter::default()).expect("thread");
        for i in 0..1000 {
            writer.write_all(format!("line {i}\n").as_bytes()).expect("never fails");
        }
        assert!(guard.shutdown(Duration::from_secs(5)), "flushed");
        let text = gate.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1000);
        assert!(lines.iter().enumerate().all(|(i, line)| *line == format!("line {i}")));
    }

    #[test]
    fn a_blocked_output_drops_and_counts_lines_without_blocking_the_caller_then_warns_once() {
        let gate = Gate::default();
        gate.blocked.store(true, Ordering::SeqCst);
        let dropped = Counter::default();
        let (mut writer, guard) = spawn(gate.clone(), 4096, LogFormat::Json, dropped.clone()).expect("thread");
        let line = format!("{}\n", "x".repeat(99));
        // The writer thread holds a first line, stuck in the output, before the flood: all
        // the drops then happen while it waits, and the one warning counts them all (on a
        // busy machine it could otherwise take its first batch after some drops, and report
        // those at once and the rest one WARN_INTERVAL later).
        writer.write_all(line.as_bytes()).expect("never fails");
        let waiting = Instant::now();
        while !gate.entered.load(Ordering::SeqCst) {
            assert!(
                waiting.elapsed() < Duration::from_secs(10),
                "the writer thread never wrote"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let started = Instant::now();
        for _ in 0..10_000 {
            writer.write_all(line.as_bytes()).expect("never fails");
        }
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "the caller never waits on the output"
        );
        // 4096 bytes hold 40 lines; the writer may hold one more batch of them while blocked.
        assert!(dropped.get() >= 10_000 - 2 * 41, "dropped {}", dropped.get());

        gate.blocked.store(false, Ordering::SeqCst);
        writer.write_all(b"after\n").expect("never fails");
        assert!(guard.shutdown(Duration::from_secs(5)));
        let text = gate.text();
        let warnings: Vec<&str> = text.lines().filter(|l| l.contains("log lines dropped")).collect();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        let warning: serde_json::Value = serde_json::from_str(warnings[0]).expect("a JSON line");
        assert_eq!(warning["level"], "WARN");
        assert_eq!(warning["dropped"].as_u64(), Some(dropped.get()));
        assert!(
            text.lines().any(|l| l == "after"),
            "lines flow again once the output drains"
        );
    }

    #[test]
    fn shutdown_gives_up_on_an_output_blocked_for_good() {
        let gate = Gate::default();
        gate.blocked.store(true, Ordering::SeqCst);
        let (mut writer, guard) = spawn(gate.clone(), 4096, LogFormat::Text, Counter::default()).expect("thread");
        writer.write_all(b"stuck\n").expect("never fails");
        let started = Instant::now();
        assert!(!guard.shutdown(Duration::from_millis(200)));
        assert!(started.elapsed() < Duration::from_secs(2));
        gate.blocked.store(false, Ordering::SeqCst);
    }
}
