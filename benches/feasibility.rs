//! Feasible-node counts on the admission path, with 5 000 (and 500) cached
//! synthetic nodes: what the `/mutate` decision costs with node data (memo warm:
//! the steady state, one hash and one map lookup per placement) against
//! without, and what one memo miss costs (a pass over every node: a new
//! placement, or the first review after a node changed).
//!
//! `cargo bench --bench feasibility` (add `-- --quick` for a fast pass).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group};
use pod_director::admission::{self, Reviewed};
use pod_director::cluster::Nodes;
use pod_director::testing::StaticNodes;
use pod_director_engine::config::Config;
use pod_director_engine::decision::Write;
use pod_director_engine::placement::{self, Context, Namespace, NodeInfo, NodeView, Placement, Webhook, feasible};
use pod_director_engine::testing::decide_pod;

use pod_director_testkit::nodes;
use pod_director_testkit::pods;

fn cache(count: usize) -> Nodes {
    let source = Arc::new(StaticNodes::new());
    for i in 0..count {
        source.insert(NodeInfo::from_node(&nodes::node(i)));
    }
    Nodes::new(source)
}

fn bench(c: &mut Criterion) {
    let loaded = Config::from_yaml(pods::CONFIG, "bench", Vec::new()).expect("bench config is valid");
    let pods: Vec<(&str, placement::Pod)> = pods::SIZES
        .iter()
        .map(|&size| {
            let body = pods::review("705ab4f5-6393-11e8-b7cc-42010a800002", &pods::sized(size, "team-a"));
            let parsed = admission::parse(Webhook::Mutate, &body).expect("parses");
            let Reviewed::Pod(Write::Create(pod)) = parsed.subject else {
                panic!("a pod CREATE")
            };
            (size, *pod)
        })
        .collect();
    for group in ["ci", "shadow"] {
        let labels = BTreeMap::from([("pod-director/group".to_owned(), group.to_owned())]);
        let ns = Namespace::new("team-a", &labels);
        let mut g = c.benchmark_group(format!("mutate/{group}"));
        for (size, pod) in &pods {
            g.bench_with_input(BenchmarkId::new("no-nodes", size), pod, |b, pod| {
                b.iter(|| {
                    decide_pod(
                        Webhook::Mutate,
                        &loaded.config,
                        &ns,
                        black_box(pod),
                        &Context::default(),
                    )
                })
            });
            for count in [500, 5_000] {
                let cached = cache(count);
                let view = cached.view(None);
                let ctx = Context::offline().with_nodes(Some(&view as &dyn NodeView));
                let out = decide_pod(Webhook::Mutate, &loaded.config, &ns, pod, &ctx);
                assert!(out.feasible_nodes.is_some() && out.feasible_nodes_before.is_some());
                g.bench_with_input(BenchmarkId::new(format!("{count}-nodes"), size), pod, |b, pod| {
                    b.iter(|| decide_pod(Webhook::Mutate, &loaded.config, &ns, black_box(pod), &ctx))
                });
            }
        }
        g.finish();
    }
    // Exactly what a review adds with node data, memo warm: the pod's placement
    // fingerprinted and looked up (before), the pod's and group's fingerprints
    // combined and looked up (after the patch).
    let mut g = c.benchmark_group("added-per-review");
    let group = &loaded.config.groups["ci"];
    for count in [500, 5_000] {
        let cached = cache(count);
        let view = cached.view(None);
        for (size, pod) in &pods {
            let spec = pod.spec.clone().unwrap_or_default();
            let labels = BTreeMap::from([("pod-director/group".to_owned(), "ci".to_owned())]);
            let ns = Namespace::new("team-a", &labels);
            // Warm the memo the way a first review does.
            let ctx = Context::offline().with_nodes(Some(&view as &dyn NodeView));
            let warm = decide_pod(Webhook::Mutate, &loaded.config, &ns, pod, &ctx);
            g.bench_with_input(BenchmarkId::new(format!("{count}-nodes"), size), &spec, |b, spec| {
                b.iter(|| {
                    let placement = Placement::of_spec(black_box(spec));
                    let fingerprint = placement.fingerprint();
                    let before = view.feasible_keyed(&placement, fingerprint);
                    let key = feasible::combine(fingerprint, feasible::group_fingerprint(group));
                    let after = view.remembered(key, &mut || before);
                    (before, after)
                })
            });
            assert!(warm.feasible_nodes.is_some());
        }
    }
    g.finish();

    // One memo miss: a pass over every node for one placement.
    let group = &loaded.config.groups["ci"];
    let mut g = c.benchmark_group("count-uncached");
    // 1 000: the scale simulation's cluster (e2e/scale).
    for count in [500, 1_000, 5_000] {
        let infos: Vec<NodeInfo> = (0..count).map(|i| NodeInfo::from_node(&nodes::node(i))).collect();
        g.bench_function(BenchmarkId::from_parameter(count), |b| {
            b.iter(|| placement::feasible::count(&Placement::of_group(black_box(group)), &infos))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);

fn main() {
    benches();
    criterion::Criterion::default().configure_from_args().final_summary();
}
