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
    let (mut writer, guard) = spawn(gate.clone(), 1024 * 1024, LogFormat::Json, Counter::default()).expect("thread");
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
