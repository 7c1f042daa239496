//! The pure admission path, per review: decode the AdmissionReview JSON, decide
//! (plan + render the patch), build the response and encode it — for a small,
//! a typical and a large pod. Also counts heap allocations per review.
//!
//! `cargo bench --bench admission` (add `-- --quick` for a fast pass).

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use pod_director::admission::{self, Subject};
use pod_director::config::{Config, Loaded};
use pod_director::placement::{self, Namespace};
use serde_json::{Value, json};

/// Counts allocations so the bench can report them per review.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const CONFIG: &str = r#"
groups:
  ci:
    mode: enforce
    nodeSelector: {node-pool: ci, kubernetes.io/os: linux}
    tolerations:
      - {key: dedicated, operator: Equal, value: ci, effect: NoSchedule}
      - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
    affinity:
      nodeAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
            - matchExpressions:
                - {key: topology.kubernetes.io/zone, operator: In, values: [eu-west-1a, eu-west-1b]}
        preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 10
            preference: {matchExpressions: [{key: disk, operator: In, values: [ssd]}]}
  shadow:
    mode: dryRun
    nodeSelector: {node-pool: ci}
    tolerations: [{key: dedicated, operator: Equal, value: ci, effect: NoSchedule}]
"#;

fn container(i: usize, env: usize) -> Value {
    json!({
        "name": format!("container-{i}"),
        "image": format!("registry.example.com/team/app-{i}:1.2.3"),
        "args": ["--port=8080", "--verbose"],
        "env": (0..env).map(|e| json!({"name": format!("VAR_{e}"), "value": format!("value-of-variable-{e}-for-container-{i}")})).collect::<Vec<_>>(),
        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    })
}

fn toleration(i: usize) -> Value {
    json!({"key": format!("example.com/taint-{i}"), "operator": "Equal", "value": format!("v{i}"), "effect": "NoSchedule"})
}

fn term(i: usize) -> Value {
    json!({"matchExpressions": [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [format!("eu-west-1{}", ["a", "b", "c"][i % 3])]},
        {"key": format!("example.com/feature-{i}"), "operator": "Exists"},
    ]})
}

/// A pod with `containers` containers (each with `env` variables), `tolerations`
/// tolerations and `terms` required node-affinity terms.
fn pod(containers: usize, env: usize, tolerations: usize, terms: usize) -> Value {
    let mut spec = json!({
        "containers": (0..containers).map(|i| container(i, env)).collect::<Vec<_>>(),
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "tolerations": (0..tolerations).map(toleration).collect::<Vec<_>>(),
        "volumes": [{"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}],
    });
    if terms > 0 {
        spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": (0..terms).map(term).collect::<Vec<_>>()}}});
    }
    json!({
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"generateName": "web-7d4b9c-", "namespace": "team-a", "labels": {"app": "web", "pod-template-hash": "7d4b9c"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4b9c", "uid": "2c6b0c5e-4a39-4a4e-8a62-3f1b7cbd0c11", "controller": true, "blockOwnerDeletion": true}]},
        "spec": spec,
        "status": {},
    })
}

/// An AdmissionReview shaped like the API server's.
fn review(pod: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "team-a",
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller", "uid": "a1", "groups": ["system:serviceaccounts", "system:authenticated"]},
            "object": pod,
            "oldObject": null,
            "dryRun": false,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        }
    }))
    .expect("review serializes")
}

/// decode → decide → render → encode, as the server does minus I/O.
fn handle(loaded: &Loaded, labels: &BTreeMap<String, String>, body: &[u8]) -> Vec<u8> {
    let parsed = admission::parse(body).expect("bench review parses");
    let Subject::Pod { pod, .. } = &parsed.subject else {
        panic!("bench review is a pod")
    };
    let ns = Namespace { name: "team-a", labels };
    let outcome = placement::mutate(&loaded.config, &ns, pod);
    let review = admission::render(&parsed.request, &outcome, &loaded.revision).expect("renders");
    admission::to_wire(&review).expect("encodes")
}

fn cases() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("small", review(&pod(1, 2, 0, 0))),
        ("typical", review(&pod(3, 5, 5, 2))),
        ("large", review(&pod(50, 12, 50, 10))),
    ]
}

fn setup() -> Loaded {
    Config::from_yaml(CONFIG, "bench", Vec::new()).expect("bench config is valid")
}

fn report_allocations() {
    let loaded = setup();
    println!("allocations per review (mutate, enforce group):");
    for group in ["ci", "shadow"] {
        let labels = BTreeMap::from([("pod-director/group".to_owned(), group.to_owned())]);
        for (name, body) in cases() {
            let before = (ALLOCATIONS.load(Ordering::Relaxed), BYTES.load(Ordering::Relaxed));
            let out = black_box(handle(&loaded, &labels, &body));
            let after = (ALLOCATIONS.load(Ordering::Relaxed), BYTES.load(Ordering::Relaxed));
            println!(
                "  {group:<6} {name:<8} request {:>7} B  response {:>5} B  {:>6} allocations  {:>9} B allocated",
                body.len(),
                out.len(),
                after.0 - before.0,
                after.1 - before.1
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
        let parsed = admission::parse(&body).expect("parses");
        let Subject::Pod { pod, .. } = parsed.subject else {
            panic!("a pod")
        };
        g.bench_function(name, |b| {
            b.iter(|| {
                let ns = Namespace {
                    name: "team-a",
                    labels: &labels,
                };
                placement::mutate(&loaded.config, &ns, black_box(&pod))
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
