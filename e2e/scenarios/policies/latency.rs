//! What a pod CREATE costs through the API server on each path pod-director offers, measured side
//! by side in one run on one cluster: a namespace no webhook selects; pod-director's `/mutate` alone
//! (a second pod-director, of one enforce group, behind a mutating webhook configuration of this
//! test's own: no validating call); a group enforced by the webhook (its mutating and validating
//! calls); one placed by the webhook and checked by its ValidatingAdmissionPolicy
//! (`webhookAndPolicy`: one call); a dryRun group as deployed (the `observe` entries: `/mutate`
//! for every pod, `/validate` for a sample: the pods of one controller in 16, and every pod
//! without an owner); and a group enforced by its admission policies (the API server's own CEL;
//! the observing webhook call for the same sample). Two more arms give the API server's floor for
//! native admission: a namespace bound by a MutatingAdmissionPolicy of one constant operation,
//! and one bound by that and a ValidatingAdmissionPolicy of one check that reads the pod — no
//! compiled policy can cost less than its plugins do for those.
//!
//! A benchmark, not a check: run it alone, on an otherwise idle cluster, against the release
//! build (see `docs/src/performance.md`):
//!
//! ```sh
//! E2E_POD_DIRECTOR_BIN=$PWD/target/release/pod-director E2E_LATENCY_CLIENTS=1,8 E2E_LATENCY_ROUNDS=15 \
//!   cargo test --test scenarios -- --ignored --nocapture policies::latency
//! ```
//!
//! Dry-run CREATEs from N concurrent clients (`E2E_LATENCY_CLIENTS`, a list: each round measures
//! every arm at every count); the arms take turns in each round (their order rotating), so that
//! the machine's drift lands on every arm alike; each arm's p50 is divided by the no-webhook p50
//! (and mutate alone's, and the MAP + VAP floor's) of the same round, and the table shows the
//! median of those ratios. Around each arm's CREATEs the API server's own metrics are read: its
//! time per admission plugin and its ValidatingAdmissionPolicy checks
//! (`apiserver_validating_admission_policy_check_duration_seconds`).

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use pod_director_testkit::stats::median;
use serde_json::{Value, json};

use crate::harness::k8s::{IMAGE, eventually, pod_from, wait_for_service_account};
use crate::harness::process::{self, PodDirector, Spawn};
use crate::harness::{Env, Rng, admission_policy_api, env_var, notice};

/// Concurrent clients, unless `E2E_LATENCY_CLIENTS` (a comma-separated list) says otherwise.
const CLIENTS: &str = "8";
/// Sequential CREATEs per client, per arm and round.
const PER_CLIENT: usize = 40;
const WARM_UP: usize = 5;

/// One arm's figures at one client count.
#[derive(Default)]
struct Series {
    samples: Vec<Duration>,
    round_p50: Vec<Duration>,
    /// What the API server reported during this arm's CREATEs ([`Scrape`] differences, summed).
    spent: Scrape,
}

struct Arm {
    name: &'static str,
    namespace: String,
    /// Whether the pods carry a controller owner (one owner UID in 16 is observed).
    owned: bool,
    /// Whether the stored pod must come back placed.
    placed: bool,
    /// Per client count (the order of `E2E_LATENCY_CLIENTS`).
    series: Vec<Series>,
}

impl Arm {
    fn new(name: &'static str, namespace: String, owned: bool, placed: bool) -> Self {
        Arm {
            name,
            namespace,
            owned,
            placed,
            series: Vec::new(),
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

/// Counters of the API server's `/metrics` that the table reports, as totals so far.
#[derive(Debug, Clone, Copy, Default)]
struct Scrape {
    /// Seconds of CREATE admission in each of [`PLUGINS`].
    plugins: [f64; 4],
    /// `apiserver_validating_admission_policy_check_duration_seconds`: seconds and checks, every policy.
    policy_check_seconds: f64,
    policy_checks: f64,
}

impl Scrape {
    async fn take(env: &Env) -> Self {
        let request = http::Request::get("/metrics").body(Vec::new()).expect("a request");
        let text = env
            .client
            .request_text(request)
            .await
            .unwrap_or_else(|e| panic!("the API server's /metrics: {e}"));
        let value = |line: &str| {
            line.rsplit(' ')
                .next()
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        let mut out = Scrape::default();
        for line in text.lines() {
            if line.starts_with("apiserver_admission_controller_admission_duration_seconds_sum{")
                && line.contains(r#"operation="CREATE""#)
            {
                if let Some(i) = PLUGINS.iter().position(|p| line.contains(&format!(r#"name="{p}""#))) {
                    out.plugins[i] += value(line);
                }
            } else if line.starts_with("apiserver_validating_admission_policy_check_duration_seconds_sum{") {
                out.policy_check_seconds += value(line);
            } else if line.starts_with("apiserver_validating_admission_policy_check_duration_seconds_count{") {
                out.policy_checks += value(line);
            }
        }
        out
    }

    /// `self - before`, added to `total`.
    fn add_difference(self, before: Scrape, total: &mut Scrape) {
        for (i, spent) in total.plugins.iter_mut().enumerate() {
            *spent += self.plugins[i] - before.plugins[i];
        }
        total.policy_check_seconds += self.policy_check_seconds - before.policy_check_seconds;
        total.policy_checks += self.policy_checks - before.policy_checks;
    }
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

/// The group of the mutate-alone arm's pod-director, and the [`FLOOR_LABEL`] value of its namespace.
const MUTATE_ALONE: &str = "mutate-alone";
/// The mutating webhook configuration of this test's own that calls it.
const MUTATE_ALONE_CONFIGURATION: &str = "e2e-latency-mutate-alone";

/// `/mutate` alone: a second pod-director whose only group is the suite's `e2e-twin-reject` (in
/// enforce) under the namespace label [`FLOOR_LABEL`], called by a mutating webhook configuration
/// of this test's own — the chart's `enforce` mutating entry with its URL and selector — and by
/// no validating one. Returns it (stopped when dropped) and its namespace, once a pod comes back
/// placed there.
async fn mutate_alone(env: &Env) -> (PodDirector, String) {
    let state_dir = env.settings.state_dir.clone().expect("local mode has a state dir");
    let read = |name: &str| {
        std::fs::read(state_dir.join("webhook").join(name)).unwrap_or_else(|e| panic!("webhook/{name}: {e}"))
    };
    let mut config = env.config.clone();
    let twin = config.groups["e2e-twin-reject"].clone();
    config.namespace_label = FLOOR_LABEL.to_owned();
    config.default_group = None;
    config.groups = [(MUTATE_ALONE.to_owned(), twin)].into_iter().collect();
    let config = serde_json::to_string(&config).expect("a config serializes");
    let kubeconfig = std::path::PathBuf::from(env_var("KUBECONFIG").expect("KUBECONFIG"));
    let addr = process::free_local_addr();
    let mut second = PodDirector::spawn(&Spawn {
        scenario: "policy-latency-mutate-alone",
        state_dir: &state_dir,
        kubeconfig: &kubeconfig,
        config: &config,
        cert: &read("tls.crt"),
        key: &read("tls.key"),
        addr,
        own_namespace: &env.settings.namespace,
        // No reconciler: the configuration below is this test's.
        webhook_configuration: "",
        env: &[],
        audit_interval: None,
    });
    second.wait_ready().await;
    let (mutating, _) = env.webhook_configurations().await;
    let mut entry = mutating
        .webhooks
        .unwrap_or_default()
        .into_iter()
        .find(|w| w.name == env.webhook_name("enforce", "mutate"))
        .expect("the chart's enforce mutating entry");
    entry.name = format!("enforce.mutate.{MUTATE_ALONE_CONFIGURATION}.pod-director.io");
    entry.client_config.url = Some(format!("https://{addr}/mutate"));
    entry.client_config.service = None;
    entry.namespace_selector =
        Some(serde_json::from_value(json!({"matchLabels": {FLOOR_LABEL: MUTATE_ALONE}})).expect("a label selector"));
    entry.match_conditions = None;
    let configuration = MutatingWebhookConfiguration {
        metadata: kube::api::ObjectMeta {
            name: Some(MUTATE_ALONE_CONFIGURATION.to_owned()),
            ..Default::default()
        },
        webhooks: Some(vec![entry]),
    };
    env.apply_mutating(&configuration).await;
    let namespace = floor_namespace(env, MUTATE_ALONE).await;
    eventually("the second pod-director places pods", || async {
        let created = env.create_pod_dry_run(&namespace, &bench_pod(None)).await;
        created.body["spec"]["nodeSelector"]["e2e.pod-director.io/pool"]
            .is_string()
            .then_some(())
    })
    .await;
    (second, namespace)
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

/// The median over the rounds of `of`'s p50 over `to`'s in the same round.
fn ratio(of: &[Duration], to: &[Duration]) -> f64 {
    median(
        of.iter()
            .zip(to)
            .map(|(a, b)| a.as_secs_f64() / b.as_secs_f64())
            .collect(),
    )
}

/// The arms' names the table's ratios and the targets refer to.
const NO_WEBHOOK: &str = "no webhook";
const FLOOR: &str = "floor: a one-operation MAP + a one-check VAP";
const MUTATE: &str = "webhook mutate alone (enforce)";
const ENFORCE: &str = "webhook enforce (mutate + validate)";
const CHECKED: &str = "webhook mutate + its VAP (webhookAndPolicy)";

/// The table of one client count: each arm's CREATEs, percentiles, ratios and the API server's
/// time per CREATE in each admission plugin; then the issue's targets.
fn table(arms: &[Arm], c: usize, clients: usize, rounds: usize) -> String {
    let by_name = |name: &str| {
        &arms
            .iter()
            .find(|a| a.name == name)
            .unwrap_or_else(|| panic!("arm {name}"))
            .series[c]
    };
    let (base, mutate, floor) = (by_name(NO_WEBHOOK), by_name(MUTATE), by_name(FLOOR));
    let mut out = format!(
        "pod CREATE through the API server (dry run, {clients} clients, {rounds} interleaved rounds of {} per arm):\n\
         | path | CREATEs | p50 | p99 | p50 / no webhook | p50 / mutate alone | p50 / floor MAP + VAP | \
         mean in MAP / mutating webhook / VAP / validating webhook | VAP checks per CREATE, mean check |\n\
         |---|--:|--:|--:|--:|--:|--:|--:|--:|\n",
        clients * PER_CLIENT
    );
    for arm in arms {
        let series = &arm.series[c];
        let mut sorted = series.samples.clone();
        sorted.sort();
        let creates = sorted.len().max(1) as f64;
        let per_create = series.spent.plugins.map(|s| format!("{:.2}", s * 1e3 / creates));
        let spent = &series.spent;
        let checks = if spent.policy_checks > 0.0 {
            format!(
                "{:.2}, {:.1} µs",
                spent.policy_checks / creates,
                spent.policy_check_seconds * 1e6 / spent.policy_checks
            )
        } else {
            "0".to_owned()
        };
        out += &format!(
            "| {} | {} | {} | {} | {:.2}× | {:.2}× | {:.2}× | {} ms | {checks} |\n",
            arm.name,
            sorted.len(),
            ms(percentile(&sorted, 0.5)),
            ms(percentile(&sorted, 0.99)),
            ratio(&series.round_p50, &base.round_p50),
            ratio(&series.round_p50, &mutate.round_p50),
            ratio(&series.round_p50, &floor.round_p50),
            per_create.join(" / ")
        );
    }
    let (enforce, checked) = (by_name(ENFORCE), by_name(CHECKED));
    out += &format!(
        "webhookAndPolicy / webhook enforce: {:.2}× (target at 8 clients: ≤ 1.00×); webhookAndPolicy / mutate alone: \
         {:.2}× (target at 1 client: ≤ 1.10×)\n",
        ratio(&checked.round_p50, &enforce.round_p50),
        ratio(&checked.round_p50, &mutate.round_p50),
    );
    out
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
    let counts: Vec<usize> = env_var("E2E_LATENCY_CLIENTS")
        .unwrap_or_else(|| CLIENTS.to_owned())
        .split(',')
        .map(|c| {
            c.trim()
                .parse()
                .ok()
                .filter(|&n| n > 0)
                .unwrap_or_else(|| panic!("E2E_LATENCY_CLIENTS: {c:?} is not a count of clients"))
        })
        .collect();
    let policy_ns = env.namespace(Some("e2e-policy-reject")).await;
    let dry_run_ns = env.namespace(Some("e2e-dryrun")).await;
    let (map_ns, both_ns) = (floor_namespace(&env, "map").await, floor_namespace(&env, "both").await);
    apply_floor(&env, &[&map_ns, &both_ns]).await;
    let (_second, mutate_ns) = mutate_alone(&env).await;
    let mut arms = vec![
        Arm::new(NO_WEBHOOK, env.namespace(None).await, true, false),
        Arm::new("floor: a one-operation MAP", map_ns, true, false),
        Arm::new(FLOOR, both_ns, true, false),
        Arm::new(MUTATE, mutate_ns, true, true),
        Arm::new(ENFORCE, env.namespace(Some("e2e-twin-reject")).await, true, true),
        Arm::new(CHECKED, env.namespace(Some("e2e-check-reject")).await, true, true),
        Arm::new(
            "webhook dryRun as deployed (oneIn16 validated)",
            dry_run_ns.clone(),
            true,
            false,
        ),
        Arm::new(
            "webhook dryRun, bare pods (every pod validated)",
            dry_run_ns,
            false,
            false,
        ),
        Arm::new("policy enforce (oneIn16 observed)", policy_ns.clone(), true, true),
        Arm::new("policy enforce, every pod observed", policy_ns, false, true),
    ];
    for (i, arm) in arms.iter_mut().enumerate() {
        arm.series = counts.iter().map(|_| Series::default()).collect();
        run(&env, arm, i as u64, counts[0], WARM_UP).await;
    }
    for round in 0..rounds {
        for (c, &clients) in counts.iter().enumerate() {
            for k in 0..arms.len() {
                let i = (round + k) % arms.len();
                let seed = ((round * 31 + c * 7 + i) as u64) << 8;
                let before = Scrape::take(&env).await;
                let mut samples = run(&env, &arms[i], seed, clients, PER_CLIENT).await;
                let after = Scrape::take(&env).await;
                let series = &mut arms[i].series[c];
                after.add_difference(before, &mut series.spent);
                samples.sort();
                series.round_p50.push(percentile(&samples, 0.5));
                series.samples.extend(samples);
            }
        }
    }
    delete_floor(&env).await;
    let tables: Vec<String> = counts
        .iter()
        .enumerate()
        .map(|(c, &clients)| table(&arms, c, clients, rounds))
        .collect();
    notice(&format!(
        "load average at the end: {}\n{}",
        load_average(),
        tables.join("\n")
    ));
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
