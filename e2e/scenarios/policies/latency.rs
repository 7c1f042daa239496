//! What a pod CREATE costs through the API server on each enforcement path, measured side by
//! side in one run on one cluster: a namespace no webhook selects, a group enforced by the
//! webhook (its mutating and validating calls), one placed by the webhook and checked by its
//! ValidatingAdmissionPolicy (`webhookAndPolicy`: one call), and a group enforced by its admission
//! policies (the API server's own CEL; the observing webhook call for the pods of one
//! controller in 16, and for every pod without an owner). Two more arms give the API server's
//! floor for native admission: a namespace bound by a MutatingAdmissionPolicy of one constant
//! operation, and one bound by that and a ValidatingAdmissionPolicy of one check that reads the pod — no
//! compiled policy can cost less than its plugins do for those.
//!
//! A benchmark, not a check: run it alone, on an otherwise idle cluster, against the release
//! build (see `docs/src/performance.md`):
//!
//! ```sh
//! E2E_POD_DIRECTOR_BIN=$PWD/target/release/pod-director \
//!   cargo test --test scenarios -- --ignored --nocapture policies::latency
//! ```
//!
//! Dry-run CREATEs from 8 concurrent clients; the arms take turns in each round (their order
//! rotating), so that the machine's drift lands on every arm alike; each arm's p50 is
//! divided by the no-webhook p50 (and the MAP + VAP floor's) of the same round, and the table
//! shows the median of those ratios.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use pod_director_testkit::stats::median;
use serde_json::{Value, json};

use crate::harness::k8s::{IMAGE, eventually, pod_from, wait_for_service_account};
use crate::harness::{Env, Rng, admission_policy_api, env_var, notice};

/// Concurrent clients, unless `E2E_LATENCY_CLIENTS` says otherwise.
const CLIENTS: usize = 8;
/// Sequential CREATEs per client, per arm and round.
const PER_CLIENT: usize = 40;
const WARM_UP: usize = 5;

struct Arm {
    name: &'static str,
    namespace: String,
    /// Whether the pods carry a controller owner (one owner UID in 16 is observed).
    owned: bool,
    /// Whether the stored pod must come back placed.
    placed: bool,
    samples: Vec<Duration>,
    round_p50: Vec<Duration>,
    /// Seconds the API server spent in each of [`PLUGINS`] during this arm's CREATEs.
    plugin_seconds: [f64; 4],
}

impl Arm {
    fn new(name: &'static str, namespace: String, owned: bool, placed: bool) -> Self {
        Arm {
            name,
            namespace,
            owned,
            placed,
            samples: Vec::new(),
            round_p50: Vec::new(),
            plugin_seconds: [0.0; 4],
        }
    }
}

/// The admission plugins whose time the API server reports
/// (`apiserver_admission_controller_admission_duration_seconds`).
const PLUGINS: [&str; 4] = [
    "MutatingAdmissionPolicy",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook",
];

/// The API server's total seconds of CREATE admission per plugin of [`PLUGINS`], so far.
async fn plugin_seconds(env: &Env) -> [f64; 4] {
    let request = http::Request::get("/metrics").body(Vec::new()).expect("a request");
    let text = env
        .client
        .request_text(request)
        .await
        .unwrap_or_else(|e| panic!("the API server's /metrics: {e}"));
    let mut out = [0.0; 4];
    for line in text
        .lines()
        .filter(|l| l.starts_with("apiserver_admission_controller_admission_duration_seconds_sum{"))
    {
        if !line.contains(r#"operation="CREATE""#) {
            continue;
        }
        let Some(i) = PLUGINS.iter().position(|p| line.contains(&format!(r#"name="{p}""#))) else {
            continue;
        };
        out[i] += line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0);
    }
    out
}

/// The namespace label the floor policies' bindings select on (`map`, or `both`).
const FLOOR_LABEL: &str = "e2e.pod-director.io/latency-floor";

/// A fresh namespace of no group, labelled `FLOOR_LABEL=floor`.
async fn floor_namespace(env: &Env, floor: &str) -> String {
    let name = env.create_namespace(None).await;
    let patch = json!({"metadata": {"labels": {FLOOR_LABEL: floor}}});
    Api::<Namespace>::all(env.client.clone())
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("namespace {name} labelled {FLOOR_LABEL}={floor}: {e}"));
    wait_for_service_account(&env.client, &name, "default").await;
    name
}

/// The floor's policies and bindings: a MutatingAdmissionPolicy adding one constant annotation
/// (namespaces labelled `map` or `both`) and a ValidatingAdmissionPolicy of one check that reads the pod
/// (`both`). Not labelled as pod-director's: it would prune them.
fn floor_policies() -> Vec<(&'static str, &'static str, Value)> {
    let metadata = json!({"name": FLOOR_POLICY});
    let pod_creates = json!({"resourceRules": [{
        "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"],
    }]});
    let selector = |floors: &[&str]| json!({"namespaceSelector": {"matchExpressions": [{"key": FLOOR_LABEL, "operator": "In", "values": floors}]}});
    vec![
        (
            "MutatingAdmissionPolicy",
            "mutatingadmissionpolicies",
            json!({
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy", "metadata": metadata,
                "spec": {
                    "failurePolicy": "Fail", "reinvocationPolicy": "Never", "matchConstraints": pod_creates,
                    "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression":
                        r#"[JSONPatch{op: "add", path: "/metadata/annotations", value: {"e2e.pod-director.io/floor": "1"}}]"#}}],
                },
            }),
        ),
        (
            "MutatingAdmissionPolicyBinding",
            "mutatingadmissionpolicybindings",
            json!({
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding", "metadata": metadata,
                "spec": {"policyName": FLOOR_POLICY, "matchResources": selector(&["map", "both"])},
            }),
        ),
        (
            "ValidatingAdmissionPolicy",
            "validatingadmissionpolicies",
            json!({
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": metadata,
                "spec": {
                    "failurePolicy": "Fail", "matchConstraints": pod_creates,
                    "validations": [{"expression": "size(object.spec.containers) > 0", "message": "a pod has containers"}],
                },
            }),
        ),
        (
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
            json!({
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": metadata,
                "spec": {"policyName": FLOOR_POLICY, "validationActions": ["Deny"], "matchResources": selector(&["both"])},
            }),
        ),
    ]
}

/// The name of each of the floor's four objects.
const FLOOR_POLICY: &str = "e2e-latency-floor";

/// Deletes the floor's objects (those of a run that did not get to its end, too).
async fn delete_floor(env: &Env) {
    for (kind, plural, _) in floor_policies() {
        match admission_policy_api(&env.client, kind, plural)
            .delete(FLOOR_POLICY, &DeleteParams::background())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.is_not_found() => {}
            Err(e) => panic!("{kind} {FLOOR_POLICY} deleted: {e}"),
        }
    }
}

/// Creates the floor's policies; waits until both namespaces' pods come back annotated (the
/// API server's policy caches have them).
async fn apply_floor(env: &Env, namespaces: &[&str]) {
    delete_floor(env).await;
    for (kind, plural, object) in floor_policies() {
        let object: DynamicObject = serde_json::from_value(object).unwrap_or_else(|e| panic!("a {kind}: {e}"));
        admission_policy_api(&env.client, kind, plural)
            .create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("{kind} {FLOOR_POLICY} created: {e}"));
    }
    for namespace in namespaces {
        eventually(&format!("the floor policy annotates pods in {namespace}"), || async {
            let created = env.create_pod_dry_run(namespace, &bench_pod(None)).await;
            (created.body["metadata"]["annotations"]["e2e.pod-director.io/floor"] == "1").then_some(())
        })
        .await;
    }
}

fn uuid(rng: &mut Rng) -> String {
    let (a, b) = (rng.next_u64(), rng.next_u64());
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        b >> 52,
        b & 0xffff_ffff_ffff
    )
}

fn bench_pod(owner: Option<String>) -> Pod {
    let mut pod = json!({
        "metadata": {"name": "bench", "labels": {"app": "bench"}},
        "spec": {"containers": [{"name": "app", "image": IMAGE, "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
    });
    if let Some(uid) = owner {
        pod["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "bench", "uid": uid, "controller": true}]);
    }
    pod_from(pod)
}

/// `count` sequential dry-run CREATEs of one client; their latencies.
async fn client(env: &Env, arm: &Arm, seed: u64, count: usize) -> Vec<Duration> {
    let mut rng = Rng(seed);
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let pod = bench_pod(arm.owned.then(|| uuid(&mut rng)));
        let start = Instant::now();
        let created = env.create_pod_dry_run(&arm.namespace, &pod).await;
        out.push(start.elapsed());
        assert!(
            created.status.is_success(),
            "{}: {} {}",
            arm.name,
            created.status,
            created.body
        );
        assert_eq!(
            created.body["spec"]["nodeSelector"]["e2e.pod-director.io/pool"].is_string(),
            arm.placed,
            "{}: placed as the arm says: {}",
            arm.name,
            created.body["spec"]
        );
    }
    out
}

async fn run(env: &Env, arm: &Arm, seed: u64, clients: usize, per_client: usize) -> Vec<Duration> {
    let clients = (0..clients as u64).map(|c| client(env, arm, seed ^ (c << 32), per_client));
    futures::future::join_all(clients).await.concat()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: cargo test --test scenarios -- --ignored --nocapture policies::latency"]
async fn latency_of_a_pod_create_with_no_webhook_the_webhook_and_the_admission_policies() {
    let Some(env) = super::start("policy-latency").await else {
        return;
    };
    let rounds: usize = env_var("E2E_LATENCY_ROUNDS").map_or(7, |r| {
        r.parse().unwrap_or_else(|e| panic!("E2E_LATENCY_ROUNDS={r:?}: {e}"))
    });
    let clients: usize = env_var("E2E_LATENCY_CLIENTS").map_or(CLIENTS, |c| {
        c.parse().unwrap_or_else(|e| panic!("E2E_LATENCY_CLIENTS={c:?}: {e}"))
    });
    let policy_ns = env.namespace(Some("e2e-policy-reject")).await;
    let (map_ns, both_ns) = (floor_namespace(&env, "map").await, floor_namespace(&env, "both").await);
    apply_floor(&env, &[&map_ns, &both_ns]).await;
    let mut arms = vec![
        Arm::new("no webhook", env.namespace(None).await, true, false),
        Arm::new("floor: a one-operation MAP", map_ns, true, false),
        Arm::new("floor: a one-operation MAP + a one-check VAP", both_ns, true, false),
        Arm::new(
            "webhook enforce (mutate + validate)",
            env.namespace(Some("e2e-twin-reject")).await,
            true,
            true,
        ),
        Arm::new(
            "webhook mutate + its VAP (webhookAndPolicy)",
            env.namespace(Some("e2e-check-reject")).await,
            true,
            true,
        ),
        Arm::new("policy enforce (oneIn16 observed)", policy_ns.clone(), true, true),
        Arm::new("policy enforce, every pod observed", policy_ns, false, true),
    ];
    for (i, arm) in arms.iter().enumerate() {
        run(&env, arm, i as u64, clients, WARM_UP).await;
    }
    for round in 0..rounds {
        for k in 0..arms.len() {
            let i = (round + k) % arms.len();
            let before = plugin_seconds(&env).await;
            let mut samples = run(&env, &arms[i], ((round * 31 + i) as u64) << 8, clients, PER_CLIENT).await;
            let after = plugin_seconds(&env).await;
            for (p, spent) in arms[i].plugin_seconds.iter_mut().enumerate() {
                *spent += after[p] - before[p];
            }
            samples.sort();
            arms[i].round_p50.push(percentile(&samples, 0.5));
            arms[i].samples.extend(samples);
        }
    }
    let base = arms[0].round_p50.clone();
    let floor = arms[2].round_p50.clone();
    let mut table = format!(
        "pod CREATE through the API server (dry run, {clients} clients, {rounds} interleaved rounds of {} per arm):\n\
         | path | CREATEs | p50 | p99 | p50 / no webhook | p50 / floor MAP + VAP | mean in MAP / mutating webhook / VAP / validating webhook |\n\
         |---|--:|--:|--:|--:|--:|--:|\n",
        clients * PER_CLIENT
    );
    // Each ratio: the median over the rounds of this arm's p50 over the other's in the same round.
    let ratio = |of: &[Duration], to: &[Duration]| {
        median(
            of.iter()
                .zip(to)
                .map(|(a, b)| a.as_secs_f64() / b.as_secs_f64())
                .collect(),
        )
    };
    for arm in &mut arms {
        arm.samples.sort();
        let per_create = arm
            .plugin_seconds
            .map(|s| format!("{:.2}", s * 1e3 / arm.samples.len() as f64));
        table += &format!(
            "| {} | {} | {} | {} | {:.2}× | {:.2}× | {} ms |\n",
            arm.name,
            arm.samples.len(),
            ms(percentile(&arm.samples, 0.5)),
            ms(percentile(&arm.samples, 0.99)),
            ratio(&arm.round_p50, &base),
            ratio(&arm.round_p50, &floor),
            per_create.join(" / ")
        );
    }
    delete_floor(&env).await;
    notice(&table);
}
