//! A process's CPU time and memory, from `/proc/PID/{stat,status}`, and a sampler that
//! records its resident set every few milliseconds (to see what one audit scan takes).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// User + system CPU seconds the process has used so far.
#[allow(unsafe_code)] // a system call the standard library lacks (SAFETY below)
pub(crate) fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: count fields after the last `)`.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // After `)`: state (field 3 of proc(5)), …, utime (14), stime (15).
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (per_second > 0).then(|| ticks as f64 / per_second as f64)
}

/// A `/proc/PID/status` field in kB (e.g. `VmRSS`, `VmHWM`: the peak resident set), in bytes.
pub(crate) fn status_bytes(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status
        .lines()
        .find(|l| l.strip_prefix(field).is_some_and(|rest| rest.starts_with(':')))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

pub(crate) fn rss(pid: u32) -> u64 {
    status_bytes(pid, "VmRSS").unwrap_or(0)
}

/// Records the process's `VmRSS` every `every` until dropped (or the process is gone).
pub(crate) struct Sampler {
    samples: Arc<Mutex<Vec<(Instant, u64)>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    pub(crate) fn start(pid: u32, every: Duration) -> Self {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (into, stopped) = (samples.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                let Some(bytes) = status_bytes(pid, "VmRSS") else { break };
                into.lock().expect("not poisoned").push((Instant::now(), bytes));
                std::thread::sleep(every);
            }
        });
        Self {
            samples,
            stop,
            thread: Some(thread),
        }
    }

    /// The samples taken between `from` and `to`.
    pub(crate) fn between(&self, from: Instant, to: Instant) -> Vec<u64> {
        let samples = self.samples.lock().expect("not poisoned");
        samples
            .iter()
            .filter(|(t, _)| *t >= from && *t <= to)
            .map(|(_, b)| *b)
            .collect()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_cpu_time_and_a_resident_set() {
        let pid = std::process::id();
        let spin = Instant::now();
        while spin.elapsed() < Duration::from_millis(30) {
            std::hint::black_box(0u64);
        }
        assert!(cpu_seconds(pid).is_some_and(|s| s > 0.0));
        let (rss, peak) = (rss(pid), status_bytes(pid, "VmHWM").expect("VmHWM"));
        assert!(rss > 0 && peak >= rss, "rss {rss}, peak {peak}");
        let sampler = Sampler::start(pid, Duration::from_millis(5));
        std::thread::sleep(Duration::from_millis(50));
        assert!(!sampler.between(spin, Instant::now()).is_empty());
    }
}
