//! The audit's peak heap against the number of pods: one scan, as `pod-director audit` and the
//! continuous audit run it, over an in-process API server that generates the lists page by page
//! (`pod_director::testing::PagedCluster`: 20 namespaces of 5 Deployments and 10 bare pods each, the
//! pods spread over them, each ≈ 4 KB of JSON as the API server sends a running pod), measured
//! with the test kit's counting allocator: the highest bytes live during the scan, above what
//! was live before it.
//!
//! ```sh
//! cargo bench --bench audit_memory                              # 10,000 and 100,000 pods, page size 100 (the default)
//! cargo bench --bench audit_memory -- --pods 10000,50000 --page-size 500
//! ```
//!
//! Target (issue 47): the peak at 100,000 pods at most 1.5× the peak at 10,000 — the audit keeps
//! per-group, per-workload tallies and one page, never the pods. The generated page is counted
//! too (the API server's side of the page, here in the same process), so the figures are an
//! upper bound of the audit's own.

use std::time::Instant;

use pod_director::testing::PagedCluster;
use pod_director_testkit::alloc;

#[global_allocator]
static GLOBAL: alloc::Counting = alloc::Counting;

const NAMESPACES: usize = 20;
const DEPLOYMENTS: usize = 5;
/// The highest ratio of the last count's peak to the first's that holds the target.
const TARGET_RATIO: f64 = 1.5;

struct Args {
    pods: Vec<usize>,
    page_size: u32,
}

fn parse() -> Args {
    let mut args = Args {
        pods: vec![10_000, 100_000],
        page_size: 100,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--pods" => {
                args.pods = value()
                    .split(',')
                    .map(|n| n.trim().parse().expect("--pods N[,N…]"))
                    .collect();
            }
            "--page-size" => args.page_size = value().parse().expect("--page-size N"),
            "--bench" => {}
            other => panic!(
                "unknown argument {other:?}; usage: cargo bench --bench audit_memory -- [--pods N[,N…]] [--page-size N]"
            ),
        }
    }
    assert!(!args.pods.is_empty(), "--pods needs at least one count");
    args
}

fn mib(bytes: i64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn main() {
    let args = parse();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // The client's request buffer is a task of this runtime.
    let _runtime = runtime.enter();
    println!(
        "| pods | namespaces | templates | pods would_deny | scan time | peak heap above start | bytes allocated |"
    );
    println!("|--:|--:|--:|--:|--:|--:|--:|");
    let mut peaks = Vec::new();
    for &pods in &args.pods {
        let cluster = PagedCluster {
            namespaces: NAMESPACES,
            deployments: DEPLOYMENTS,
            pods,
        };
        let client = cluster.client();
        let before = alloc::heap();
        alloc::reset_peak();
        let started = Instant::now();
        let scanned = runtime
            .block_on(pod_director::testing::audit_scan(
                &client,
                PagedCluster::CONFIG,
                args.page_size,
            ))
            .unwrap_or_else(|e| panic!("the audit scan failed: {e}"));
        let elapsed = started.elapsed();
        let peak = alloc::peak() - before.live;
        let spent = alloc::heap() - before;
        assert_eq!(scanned.pods, pods as u64, "the scan saw every pod");
        println!(
            "| {pods} | {} | {} | {} | {:.2} s | {:.2} MiB | {:.0} MiB |",
            scanned.namespaces,
            scanned.templates,
            scanned.would_deny_pods,
            elapsed.as_secs_f64(),
            mib(peak),
            mib(spent.allocated as i64),
        );
        peaks.push((pods, peak));
    }
    if let (Some((first_pods, first)), Some((last_pods, last))) = (peaks.first(), peaks.last())
        && peaks.len() > 1
    {
        let ratio = *last as f64 / (*first).max(1) as f64;
        println!(
            "\npeak heap at {last_pods} pods / at {first_pods} pods: {ratio:.2}× (page size {}; target ≤ {TARGET_RATIO}×: {})",
            args.page_size,
            if ratio <= TARGET_RATIO { "holds" } else { "missed" }
        );
    }
}
