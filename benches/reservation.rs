//! What a reservation costs. The /mutate review of a pod is unchanged by a configuration that
//! reserves (the reservation is decided at its own entry, which pods without tolerations or a
//! `spec.nodeName` never reach: its matchCondition). And the `/validate-reservation` decision
//! itself, for a pod that intrudes (a wildcard toleration: the pool counted over 1,000 nodes)
//! and for one that does not (a toleration of another key).
//!
//! `cargo bench --bench reservation` (add `-- --quick` for a fast pass). Compare
//! `mutate/plain` with `mutate/reserving`: the same work, in one run.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group};
use pod_director::admission::{self, Reviewed};
use pod_director_engine::config::{Config, Loaded};
use pod_director_engine::decision::Write;
use pod_director_engine::placement::{self, Namespace, NodeInfo, NodeTaint, NodeView, Webhook, reservation};
use pod_director_engine::testing::decide_pod;

use pod_director_testkit::pods;

/// [`pods::CONFIG`] with the enforce group `ci` reserving its nodes.
fn reserving() -> String {
    pods::CONFIG.replacen(
        "  ci:\n    mode: enforce\n",
        "  ci:\n    mode: enforce\n    reserve: {mode: enforce}\n",
        1,
    )
}

fn load(text: &str) -> Loaded {
    Config::from_yaml(text, "bench", Vec::new()).expect("bench config is valid")
}

/// 1,000 nodes: a tenth in the ci pool (labelled and tainted), the rest general.
fn nodes() -> Vec<Arc<NodeInfo>> {
    (0..1000)
        .map(|i| {
            let ci = i % 10 == 0;
            let pool = if ci { "ci" } else { "general" };
            let labels = [
                ("node-pool".to_owned(), pool.to_owned()),
                ("kubernetes.io/os".to_owned(), "linux".to_owned()),
                ("topology.kubernetes.io/zone".to_owned(), "eu-west-1a".to_owned()),
            ];
            let taints = if ci {
                vec![NodeTaint::new("dedicated", "ci", "NoSchedule")]
            } else {
                Vec::new()
            };
            Arc::new(NodeInfo::new(&format!("node-{i}"), labels, taints, false))
        })
        .collect()
}

fn mutate(loaded: &Loaded, labels: &BTreeMap<String, String>, body: &[u8]) -> Vec<u8> {
    let parsed = admission::parse(Webhook::Mutate, body).expect("bench review parses");
    let Reviewed::Pod(Write::Create(pod)) = &parsed.subject else {
        panic!("bench review is a pod CREATE")
    };
    let ns = Namespace::new("team-a", labels);
    let ctx = placement::Context::from_user_info(&parsed.request.user_info);
    let outcome = decide_pod(Webhook::Mutate, &loaded.config, &ns, pod, &ctx);
    admission::respond(&parsed.request.uid, &outcome, &loaded.revision)
}

fn reserve(loaded: &Loaded, nodes: &dyn NodeView, body: &[u8]) -> Vec<u8> {
    let parsed = admission::parse(Webhook::Mutate, body).expect("bench review parses");
    let Reviewed::Pod(Write::Create(pod)) = &parsed.subject else {
        panic!("bench review is a pod CREATE")
    };
    let labels = BTreeMap::new();
    let ns = Namespace::new("batch", &labels);
    let ctx = placement::Context::from_user_info(&parsed.request.user_info).with_nodes(Some(nodes));
    let outcome = decide_pod(Webhook::ValidateReservation, &loaded.config, &ns, pod, &ctx);
    admission::respond(&parsed.request.uid, &outcome, &loaded.revision)
}

fn review_with_tolerations(tolerations: serde_json::Value) -> Vec<u8> {
    let mut pod = pods::sized("typical", "batch");
    pod["spec"]["tolerations"] = tolerations;
    pods::review("705ab4f5-6393-11e8-b7cc-42010a800002", &pod)
}

fn benches(c: &mut Criterion) {
    let plain = load(pods::CONFIG);
    let reserved = load(&reserving());
    assert!(reservation::any_reservation(&reserved.config));
    let labels = BTreeMap::from([("pod-director/group".to_owned(), "ci".to_owned())]);
    let body = pods::review(
        "705ab4f5-6393-11e8-b7cc-42010a800002",
        &pods::sized("typical", "team-a"),
    );
    let mut group = c.benchmark_group("mutate");
    group.bench_function("plain", |b| {
        b.iter(|| black_box(mutate(&plain, &labels, black_box(&body))))
    });
    group.bench_function("reserving", |b| {
        b.iter(|| black_box(mutate(&reserved, &labels, black_box(&body))))
    });
    group.finish();

    let nodes = nodes();
    let intruder = review_with_tolerations(serde_json::json!([{"operator": "Exists"}]));
    let other = review_with_tolerations(serde_json::json!([{"key": "example.com/other", "operator": "Exists"}]));
    let mut group = c.benchmark_group("validate-reservation");
    group.bench_function("intruder-1000-nodes", |b| {
        b.iter(|| black_box(reserve(&reserved, &nodes, black_box(&intruder))))
    });
    group.bench_function("other-key", |b| {
        b.iter(|| black_box(reserve(&reserved, &nodes, black_box(&other))))
    });
    group.finish();
}

criterion_group!(reservation_benches, benches);

fn main() {
    reservation_benches();
    Criterion::default().configure_from_args().final_summary();
}
