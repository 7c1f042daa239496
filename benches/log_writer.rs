//! What writing the decision log line costs per review, synchronously on the
//! calling thread (as before the log writer thread) or through
//! `telemetry::log_writer` (a bounded buffer and a writer thread), both into a
//! pipe that a reader thread drains — how a container's standard output
//! reaches the runtime.
//!
//! Paired rounds alternate the two, measuring wall time and the process's
//! on-CPU time (all threads: the writer thread and the pipe's reader count)
//! per `Admission::review` of a typical pod in a dryRun group.
//!
//! `cargo bench --bench log_writer`

use std::hint::black_box;
use std::io::Read as _;
use std::os::fd::FromRawFd as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pod_director::telemetry::{self, JsonLayer, LogFormat};
use pod_director_engine::placement::Webhook;
use tracing_subscriber::layer::SubscriberExt as _;

use pod_director_testkit::pods;

const ROUNDS: usize = 21;
const BATCH: usize = 2000;

/// A pipe whose read end a thread drains; the write end as a file.
#[allow(unsafe_code)] // a system call the standard library lacks (SAFETY below)
fn drained_pipe() -> std::fs::File {
    let mut fds = [0; 2];
    // SAFETY: pipe writes two new descriptors into the array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    // SAFETY: both descriptors are new and owned here.
    let (mut reader, writer) = unsafe { (std::fs::File::from_raw_fd(fds[0]), std::fs::File::from_raw_fd(fds[1])) };
    std::thread::spawn(move || {
        let mut buf = vec![0_u8; 64 * 1024];
        while reader.read(&mut buf).is_ok_and(|n| n > 0) {}
    });
    writer
}

use pod_director_testkit::stats;

use stats::{median, paired_rounds, process_cpu_ns};

fn main() {
    let admission = pod_director::testing::admission(pods::CONFIG, pods::NAMESPACES).0;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let body = pods::review(
        "705ab4f5-6393-11e8-b7cc-42010a800002",
        &pods::sized("typical", "team-a"),
    );
    let headers = http::HeaderMap::new();

    let sync_pipe = Arc::new(drained_pipe());
    let sync = tracing_subscriber::registry()
        .with(tracing_subscriber::EnvFilter::new("info"))
        .with(JsonLayer::new(move || sync_pipe.clone()));
    let (writer, guard) = telemetry::log_writer(drained_pipe(), LogFormat::Json).expect("writer thread");
    let buffered = tracing_subscriber::registry()
        .with(tracing_subscriber::EnvFilter::new("info"))
        .with(JsonLayer::new(writer));
    let dispatchers = [
        ("synchronous write", tracing::Dispatch::new(sync)),
        ("log writer thread", tracing::Dispatch::new(buffered)),
    ];
    let samples = paired_rounds(ROUNDS, |i| {
        let (cpu, wall) = (process_cpu_ns(), Instant::now());
        tracing::dispatcher::with_default(&dispatchers[i].1, || {
            for _ in 0..BATCH {
                black_box(runtime.block_on(admission.review(Webhook::Mutate, &headers, black_box(&body))));
            }
        });
        // Let the writer thread catch up, so its CPU lands in this round.
        std::thread::sleep(Duration::from_millis(20));
        let wall = wall.elapsed().saturating_sub(Duration::from_millis(20));
        (
            wall.as_secs_f64() * 1e6 / BATCH as f64,
            process_cpu_ns().saturating_sub(cpu) as f64 / 1e3 / BATCH as f64,
        )
    });
    println!(
        "decision log line, typical pod, dryRun group (median of {ROUNDS} alternating rounds of {BATCH} reviews):"
    );
    println!("  {:<18} {:>12} {:>12}", "", "wall/review", "cpu/review");
    for (i, (name, _)) in dispatchers.iter().enumerate() {
        let wall = median(samples[i].iter().map(|s| s.0).collect());
        let cpu = median(samples[i].iter().map(|s| s.1).collect());
        println!("  {name:<18} {wall:>10.1}µs {cpu:>10.1}µs");
    }
    println!(
        "  dropped lines: {} (the pipe is drained; expected 0)",
        telemetry::log_lines_dropped().get()
    );
    let _ = guard.shutdown(Duration::from_secs(5));
}
