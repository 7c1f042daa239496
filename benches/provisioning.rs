//! Karpenter NodePools on the admission path: what a review of a group whose pool has no
//! node costs without NodePools (the baseline: nothing is consulted), with NodePools and
//! the memo warm (one hash, one map lookup), and one memo miss (every NodePool's
//! compatibility rule); and a review whose pool has nodes, with and without NodePools
//! (NodePools are not consulted when a node exists).
//!
//! `cargo bench --bench provisioning` (add `-- --quick` for a fast pass).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group};
use pod_director::admission::{self, Reviewed};
use pod_director::cluster::{Nodes, ProvisionerStore};
use pod_director::testing::StaticNodes;
use pod_director_engine::config::Config;
use pod_director_engine::decision::Write;
use pod_director_engine::placement::{Context, Namespace, NodeInfo, NodeView, Placement, Webhook};
use pod_director_engine::provision::{self, Provisioner};
use pod_director_engine::testing::decide_pod;
use serde_json::json;

use pod_director_testkit::nodes;
use pod_director_testkit::pods;

/// `count` NodePools; the last one can provision the `ci` group's pool.
fn node_pools(count: usize) -> Vec<Provisioner> {
    (0..count)
        .map(|i| {
            let pool = if i + 1 == count { "ci" } else { "batch" };
            Provisioner::karpenter(&json!({
                "metadata": {"name": format!("pool-{i}")},
                "spec": {"template": {
                    "metadata": {"labels": {"node-pool": pool}},
                    "spec": {
                        "requirements": [
                            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["eu-west-1a", "eu-west-1b"]},
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "spot"]},
                            {"key": "example.com/feature-0", "operator": "Exists"}
                        ],
                        "taints": [{"key": "dedicated", "value": pool, "effect": "NoSchedule"}]
                    }
                }, "limits": {"cpu": "1000"}},
                "status": {"conditions": [{"type": "Ready", "status": "True"}], "resources": {"cpu": "10"}}
            }))
        })
        .collect()
}

/// 500 nodes; with `ci_pool`, some of them in the `ci` pool.
fn cache(ci_pool: bool, pools: usize) -> Nodes {
    let source = Arc::new(StaticNodes::new());
    for i in 0..500 {
        let node = NodeInfo::from_node(&nodes::node(i));
        if ci_pool || node.label("node-pool") != Some("ci") {
            source.insert(node);
        }
    }
    Nodes::new(source).with_provisioners(Arc::new(ProvisionerStore::of(node_pools(pools))))
}

fn bench(c: &mut Criterion) {
    let loaded = Config::from_yaml(pods::CONFIG, "bench", Vec::new()).expect("bench config is valid");
    let body = pods::review("705ab4f5-6393-11e8-b7cc-42010a800002", &pods::sized("small", "team-a"));
    let Reviewed::Pod(Write::Create(pod)) = admission::parse(Webhook::Mutate, &body).expect("parses").subject else {
        panic!("a pod CREATE")
    };
    let labels = BTreeMap::from([("pod-director/group".to_owned(), "ci".to_owned())]);
    let ns = Namespace::new("team-a", &labels);
    for (case, ci_pool) in [("pool-empty", false), ("pool-has-nodes", true)] {
        let mut g = c.benchmark_group(format!("mutate/{case}"));
        for pools in [0, 10, 100] {
            let cached = cache(ci_pool, pools);
            let view = cached.view(None);
            let ctx = Context::offline().with_nodes(Some(&view as &dyn NodeView));
            let out = decide_pod(Webhook::Mutate, &loaded.config, &ns, &pod, &ctx);
            assert_eq!(out.feasible_nodes == Some(0), !ci_pool, "{case}: {out:?}");
            assert_eq!(
                !out.provisionable_by.is_empty(),
                !ci_pool && pools > 0,
                "{case}/{pools}: {:?}",
                out.provisionable_by
            );
            g.bench_with_input(BenchmarkId::new("nodepools", pools), &pod, |b, pod| {
                b.iter(|| decide_pod(Webhook::Mutate, &loaded.config, &ns, black_box(pod), &ctx))
            });
        }
        g.finish();
    }
    // One memo miss: the compatibility rule over every NodePool, for the group's placement.
    let group = &loaded.config.groups["ci"];
    let mut g = c.benchmark_group("provisioners-uncached");
    for count in [10, 100] {
        let pools = node_pools(count);
        g.bench_function(BenchmarkId::from_parameter(count), |b| {
            b.iter(|| provision::provisioners(&pools, &Placement::of_group(black_box(group))))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);

fn main() {
    benches();
    criterion::Criterion::default().configure_from_args().final_summary();
}
