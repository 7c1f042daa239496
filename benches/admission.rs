//! The pure admission path, per review: decode the AdmissionReview JSON, decide
//! (plan + render the patch), write the response (`admission::respond`) — for a small,
//! a typical and a large pod. Also counts heap allocations per review.
//!
//! `cargo bench --bench admission` (add `-- --quick` for a fast pass).

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use pod_director::admission::{self, Reviewed};
use pod_director_engine::config::{Config, Loaded};
use pod_director_engine::decision::Write;
use pod_director_engine::placement::{self, Namespace, Webhook};
use pod_director_engine::testing::decide_pod;

use pod_director_testkit::pods;

use pod_director_testkit::alloc;

#[global_allocator]
static GLOBAL: alloc::Counting = alloc::Counting;

/// decode → decide → respond, as the server does minus I/O. Not inlined, so
/// profilers (callgrind `--toggle-collect=*handle*`) can price one review.
#[inline(never)]
fn handle(loaded: &Loaded, labels: &BTreeMap<String, String>, body: &[u8]) -> Vec<u8> {
    let parsed = admission::parse(Webhook::Mutate, body).expect("bench review parses");
    let Reviewed::Pod(Write::Create(pod)) = &parsed.subject else {
        panic!("bench review is a pod CREATE")
    };
    let ns = Namespace::new("team-a", labels);
    let ctx = placement::Context::from_user_info(&parsed.request.user_info);
    let outcome = decide_pod(Webhook::Mutate, &loaded.config, &ns, pod, &ctx);
    admission::respond(&parsed.request.uid, &outcome, &loaded.revision)
}

fn cases() -> Vec<(&'static str, Vec<u8>)> {
    pods::SIZES
        .iter()
        .map(|&size| {
            (
                size,
                pods::review("705ab4f5-6393-11e8-b7cc-42010a800002", &pods::sized(size, "team-a")),
            )
        })
        .collect()
}

fn setup() -> Loaded {
    Config::from_yaml(pods::CONFIG, "bench", Vec::new()).expect("bench config is valid")
}

fn report_allocations() {
    let loaded = setup();
    println!("allocations per review (mutate, enforce group):");
    for group in ["ci", "shadow"] {
        let labels = BTreeMap::from([("pod-director/group".to_owned(), group.to_owned())]);
        for (name, body) in cases() {
            let before = alloc::heap();
            let out = black_box(handle(&loaded, &labels, &body));
            let used = alloc::heap() - before;
            println!(
                "  {group:<6} {name:<8} request {:>7} B  response {:>5} B  {:>6} allocations  {:>9} B allocated",
                body.len(),
                out.len(),
                used.allocations,
                used.allocated
            );
        }
    }
}

fn bench(c: &mut Criterion) {
    let loaded = setup();
    for group in ["ci", "shadow"] {
        let labels = BTreeMap::from([("pod-director/group".to_owned(), group.to_owned())]);
        let mut g = c.benchmark_group(format!("review/{group}"));
        for (name, body) in cases() {
            g.throughput(Throughput::Bytes(body.len() as u64));
            g.bench_with_input(BenchmarkId::from_parameter(name), &body, |b, body| {
                b.iter(|| handle(&loaded, &labels, black_box(body)))
            });
        }
        g.finish();
    }
    let labels = BTreeMap::from([("pod-director/group".to_owned(), "ci".to_owned())]);
    let mut g = c.benchmark_group("decide");
    for (name, body) in cases() {
        let parsed = admission::parse(Webhook::Mutate, &body).expect("parses");
        let Reviewed::Pod(Write::Create(pod)) = parsed.subject else {
            panic!("a pod CREATE")
        };
        g.bench_function(name, |b| {
            b.iter(|| {
                let ns = Namespace::new("team-a", &labels);
                decide_pod(
                    Webhook::Mutate,
                    &loaded.config,
                    &ns,
                    black_box(&pod),
                    &placement::Context::default(),
                )
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);

fn main() {
    report_allocations();
    benches();
    criterion::Criterion::default().configure_from_args().final_summary();
}
