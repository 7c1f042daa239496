//! The in-tree plugins on a reference server: `PodNodeSelector` and
//! `PodTolerationRestriction` run by a second kube-apiserver of the cluster's release
//! (`e2e/cluster.sh plugins-start`, harness `plugins`), configured by an
//! `AdmissionConfiguration` file the scenario writes (PodNodeSelector by `path:`,
//! PodTolerationRestriction inline).
//!
//! The corpus (`fixtures::in_tree`): named namespaces × named pods (the plugins' edge
//! cases), plus a seeded random part (`E2E_INTREE_SEED=N` replays one; the seed is
//! printed). Every pod is created for real (held by a scheduling gate: Pending, never
//! scheduled), then some are UPDATEd with a JSON patch, after a namespace's annotations
//! changed (`PodNodeSelector` does not run on UPDATE, `PodTolerationRestriction` does,
//! against the new whitelist). The named cases must give what the plugins' code says
//! (written out by hand below): this proves the reference server, which the differential
//! against pod-director's `inTreePlugins` then holds pod-director to.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use http_body_util::BodyExt as _;
use kube::Client;
use serde_json::{Value, json};

use crate::fixtures::in_tree::{Corpus, NODE_SELECTOR, PodCase, TOLERATIONS_WHITELIST, Update};
use crate::harness::plugins::Reference;
use crate::harness::{Env, env_var, k8s, notice};

/// Random namespaces and pods in each (on top of the named cases: 23 × 13).
const RANDOM_NAMESPACES: usize = 16;
const PODS_PER_NAMESPACE: usize = 16;
/// Requests in flight at once, per server.
const CONCURRENCY: usize = 8;
/// The whole corpus on one server must not take longer.
const PHASE_LIMIT: Duration = Duration::from_secs(180);

/// What one server did with one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// Stored (or, dry run, would be stored) with this `spec.nodeSelector` and `spec.tolerations`.
    Stored { node_selector: Value, tolerations: Value },
    /// Refused: HTTP status and message.
    Refused { status: u16, message: String },
}

impl Outcome {
    pub(crate) fn of(status: http::StatusCode, body: &Value) -> Outcome {
        if status.is_success() {
            Outcome::Stored {
                node_selector: body["spec"]["nodeSelector"].clone(),
                tolerations: body["spec"]["tolerations"].clone(),
            }
        } else {
            Outcome::Refused {
                status: status.as_u16(),
                message: body["message"].as_str().map_or_else(|| body.to_string(), str::to_owned),
            }
        }
    }

    fn stored(&self) -> bool {
        matches!(self, Outcome::Stored { .. })
    }
}

/// A pod in the corpus: its namespace and its name there.
type Key = (String, String);

/// One answer.
#[derive(Debug, Clone)]
struct Reply {
    outcome: Outcome,
}

type Replies = BTreeMap<Key, Reply>;

/// A server's answers to the corpus's CREATEs and UPDATEs.
#[derive(Debug, Clone, Default)]
struct Answers {
    create: Replies,
    update: Replies,
}

impl Answers {
    fn summary(&self) -> String {
        let stored = |r: &Replies| r.values().filter(|r| r.outcome.stored()).count();
        format!(
            "{} pods ({} stored), {} updates ({} stored)",
            self.create.len(),
            stored(&self.create),
            self.update.len(),
            stored(&self.update)
        )
    }
}

/// Sends `body` to `uri` with `method` through `client`; the answer, whatever its status.
async fn send(client: &Client, request: http::Request<Vec<u8>>) -> Reply {
    let uri = request.uri().to_string();
    let response = client
        .send(request.map(kube::client::Body::from))
        .await
        .unwrap_or_else(|e| panic!("{uri}: {e}"));
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("the answer's body")
        .to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
    Reply {
        outcome: Outcome::of(status, &body),
    }
}

/// PATCHes pod `namespace/name` with a JSON patch (optionally `dryRun=All`).
async fn patch_pod(client: &Client, namespace: &str, name: &str, patch: &Value, dry_run: bool) -> Reply {
    let mut uri = format!("/api/v1/namespaces/{namespace}/pods/{name}");
    if dry_run {
        uri.push_str("?dryRun=All");
    }
    let request = http::Request::patch(uri)
        .header(http::header::CONTENT_TYPE, "application/json-patch+json")
        .body(serde_json::to_vec(patch).expect("a patch serializes"))
        .expect("a PATCH request");
    send(client, request).await
}

/// Creates every pod of the corpus through `client` (`dry_run`: `dryRun=All`, named
/// `<name><suffix>`), at most [`CONCURRENCY`] at once.
async fn create_all(client: &Client, corpus: &Corpus, suffix: &str, dry_run: bool) -> Replies {
    let started = Instant::now();
    let answers: Vec<_> = futures::stream::iter(&corpus.pods)
        .map(|case| async move {
            let namespace = &corpus.namespaces[case.namespace].name;
            let mut pod = case.pod.clone();
            pod.metadata.name = Some(format!("{}{suffix}", case.name));
            let mut uri = format!("/api/v1/namespaces/{namespace}/pods");
            if dry_run {
                uri.push_str("?dryRun=All");
            }
            let request = http::Request::post(uri)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(serde_json::to_vec(&pod).expect("a pod serializes"))
                .expect("a POST request");
            ((namespace.clone(), case.name.clone()), send(client, request).await)
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    assert!(
        started.elapsed() < PHASE_LIMIT,
        "{} creates took {:?}",
        corpus.pods.len(),
        started.elapsed()
    );
    answers.into_iter().collect()
}

/// Sends each update of the corpus, to the pods `created` stored, through `client`.
async fn update_all(client: &Client, corpus: &Corpus, created: &Replies, dry_run: bool) -> Replies {
    let updates: Vec<(&PodCase, &Update, bool)> = corpus
        .pods
        .iter()
        .filter_map(|case| {
            let key = (corpus.namespaces[case.namespace].name.clone(), case.name.clone());
            match (created.get(&key).map(|r| &r.outcome), &case.update) {
                (Some(Outcome::Stored { node_selector, .. }), Some(update)) => {
                    Some((case, update, node_selector.is_object()))
                }
                _ => None,
            }
        })
        .collect();
    let answers: Vec<_> = futures::stream::iter(updates)
        .map(|(case, update, has_selector)| async move {
            let namespace = &corpus.namespaces[case.namespace].name;
            let reply = patch_pod(client, namespace, &case.name, &update.patch(has_selector), dry_run).await;
            ((namespace.clone(), case.name.clone()), reply)
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    answers.into_iter().collect()
}

/// The tolerations the API server adds to every pod (DefaultTolerationSeconds) and the plugin
/// adds to pods that are not BestEffort.
fn not_ready() -> Value {
    json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
}
fn unreachable() -> Value {
    json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
}
fn memory_pressure() -> Value {
    json!({"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"})
}
fn shared() -> Value {
    json!({"key": "e2e.pod-director.io/shared", "operator": "Exists", "effect": "NoSchedule"})
}

/// A stored pod's `spec.nodeSelector` and `spec.tolerations`, or `None`: refused.
type Expected = Option<(Value, Value)>;

/// What the plugins' code (v1.37) makes of some named cases: (namespace suffix, pod,
/// expected nodeSelector and tolerations, or `None`: refused).
fn known_behaviour() -> Vec<(&'static str, &'static str, Expected)> {
    let west = json!({"e2e.pod-director.io/region": "west"});
    let evict = |s: i64| json!({"key": "e2e.pod-director.io/evict", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": s});
    vec![
        // The cluster defaults; memory-pressure for Burstable pods only.
        (
            "plain",
            "best-effort",
            Some((west.clone(), json!([not_ready(), unreachable(), shared()]))),
        ),
        (
            "plain",
            "burstable",
            Some((
                west.clone(),
                json!([not_ready(), unreachable(), shared(), memory_pressure()]),
            )),
        ),
        // A conflict with the cluster default is one too; the same value is no conflict.
        ("plain", "conflict", None),
        ("plain", "same-selector", None),
        (
            "plain",
            "west-selector",
            Some((
                json!({"e2e.pod-director.io/region": "west", "e2e.pod-director.io/tier": "web"}),
                json!([not_ready(), unreachable(), shared(), memory_pressure()]),
            )),
        ),
        (
            "selector",
            "same-selector",
            Some((
                json!({"e2e.pod-director.io/region": "east", "e2e.pod-director.io/tier": "web"}),
                json!([not_ready(), unreachable(), shared()]),
            )),
        ),
        // An empty annotation: no selector at all, not the cluster default.
        (
            "empty-selector",
            "best-effort",
            Some((Value::Null, json!([not_ready(), unreachable(), shared()]))),
        ),
        (
            "empty-selector",
            "conflict",
            Some((
                json!({"e2e.pod-director.io/region": "north"}),
                json!([not_ready(), unreachable(), shared()]),
            )),
        ),
        // Trimmed; the last of a repeated key; an empty value.
        (
            "spaced",
            "best-effort",
            Some((
                json!({"e2e.pod-director.io/region": "east", "e2e.pod-director.io/tier": "db"}),
                json!([not_ready(), unreachable(), shared()]),
            )),
        ),
        (
            "repeated",
            "best-effort",
            Some((
                json!({"e2e.pod-director.io/tier": "db"}),
                json!([not_ready(), unreachable(), shared()]),
            )),
        ),
        (
            "empty-value",
            "best-effort",
            Some((
                json!({"e2e.pod-director.io/tier": ""}),
                json!([not_ready(), unreachable(), shared()]),
            )),
        ),
        ("bad-selector", "best-effort", None),
        ("trailing-comma", "best-effort", None),
        ("double-equals", "best-effort", None),
        // Whitelist "", [] and null (read into an empty list) check nothing; absent falls back to
        // the cluster's.
        // (A wildcard tolerates the API server's not-ready and unreachable taints, which it then
        // does not add, and makes the cluster's default toleration redundant.)
        (
            "whitelist-empty",
            "wildcard",
            Some((west.clone(), json!([{"operator": "Exists"}]))),
        ),
        (
            "whitelist-list",
            "wildcard",
            Some((west.clone(), json!([{"operator": "Exists"}]))),
        ),
        (
            "whitelist-null",
            "wildcard",
            Some((west.clone(), json!([{"operator": "Exists"}]))),
        ),
        ("plain", "wildcard", None),
        ("whitelist", "burstable", None),
        (
            "whitelist",
            "best-effort",
            Some((west.clone(), json!([not_ready(), unreachable(), shared()]))),
        ),
        // Default tolerations "", [] and null add none; absent adds the cluster's.
        (
            "defaults-empty",
            "best-effort",
            Some((west.clone(), json!([not_ready(), unreachable()]))),
        ),
        (
            "defaults-list",
            "best-effort",
            Some((west.clone(), json!([not_ready(), unreachable()]))),
        ),
        (
            "defaults-null",
            "best-effort",
            Some((west.clone(), json!([not_ready(), unreachable()]))),
        ),
        (
            "defaults",
            "best-effort",
            Some((
                west.clone(),
                json!([
                    not_ready(),
                    unreachable(),
                    {"key": "e2e.pod-director.io/dedicated", "operator": "Equal", "value": "blue", "effect": "NoSchedule"},
                    {"key": "e2e.pod-director.io/gpu", "operator": "Exists"},
                ]),
            )),
        ),
        // The pod's toleration tolerating longer covers the default's: only the pod's stays.
        (
            "defaults-seconds",
            "seconds",
            Some((
                west.clone(),
                json!([evict(60), not_ready(), unreachable(), memory_pressure()]),
            )),
        ),
        // An Exists toleration with an empty effect makes the cluster default redundant.
        (
            "plain",
            "exists",
            Some((
                west.clone(),
                json!([
                    {"key": "e2e.pod-director.io/shared", "operator": "Exists"}, not_ready(), unreachable(), memory_pressure(),
                ]),
            )),
        ),
        // The pod's redundant toleration is dropped too (the merge keeps supersets only).
        (
            "plain",
            "redundant",
            Some((
                west.clone(),
                json!([shared(), not_ready(), unreachable(), memory_pressure()]),
            )),
        ),
        // No operator is not `Equal` to the whitelist's check.
        ("plain", "no-operator", None),
        ("bad-defaults", "best-effort", None),
        ("bad-whitelist", "best-effort", None),
        (
            "pns-whitelist",
            "best-effort",
            Some((west.clone(), json!([not_ready(), unreachable(), shared()]))),
        ),
        ("pns-whitelist", "other-key", None),
        ("pns-whitelist-annotated", "best-effort", None),
    ]
}

/// Checks the reference server's answers to the named cases against [`known_behaviour`].
fn check_known_behaviour(prefix: &str, answers: &Replies) -> Vec<String> {
    let mut failures = Vec::new();
    for (namespace, pod, expected) in known_behaviour() {
        let key = (format!("{prefix}-{namespace}"), pod.to_owned());
        let Some(got) = answers.get(&key).map(|r| &r.outcome) else {
            failures.push(format!("{namespace}/{pod}: no answer"));
            continue;
        };
        let holds = match (&expected, got) {
            (None, Outcome::Refused { .. }) => true,
            (
                Some((selector, tolerations)),
                Outcome::Stored {
                    node_selector,
                    tolerations: stored,
                },
            ) => selector == node_selector && tolerations == stored,
            _ => false,
        };
        if !holds {
            failures.push(format!(
                "{namespace}/{pod}: expected {expected:?}, the reference server answered {got:?}"
            ));
        }
    }
    failures
}

/// What the plugins' code makes of some UPDATEs: (key, stored).
fn known_updates(prefix: &str) -> Vec<(Key, bool)> {
    let key = |ns: &str, pod: &str| (format!("{prefix}-{ns}"), pod.to_owned());
    vec![
        // The changed namespace's new whitelist lacks memory-pressure: the Burstable pod's label
        // change is refused, the BestEffort pod's admitted.
        (key(CHANGED, "burstable"), false),
        (key(CHANGED, "best-effort"), true),
        // PodNodeSelector does not run on UPDATE: a key added to a pod whose stored region now
        // contradicts the namespace's new selector is admitted.
        (key(CHANGED, "other-key"), true),
        // A toleration outside the cluster's whitelist, added by UPDATE: refused; allowed where
        // the whitelist is null (no check) or has everything.
        (key("pns-whitelist", "exists"), false),
        (key("whitelist-null", "exists"), true),
        (key("defaults", "exists"), true),
    ]
}

/// Replaces the annotations of the namespace [`CHANGED`] between CREATEs and UPDATEs: a
/// selector and a whitelist without memory-pressure appear.
fn changed_annotations() -> Value {
    let whitelist = json!([
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists"},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists"},
        {"key": "e2e.pod-director.io/shared", "operator": "Exists"},
    ]);
    json!({NODE_SELECTOR: "e2e.pod-director.io/region=east", TOLERATIONS_WHITELIST: whitelist.to_string()})
}

/// Merge-patches a namespace's annotations (`null` removes one) through `client`.
async fn annotate(client: &Client, name: &str, annotations: Value) -> Result<(), kube::Error> {
    use k8s_openapi::api::core::v1::Namespace;
    let patch = json!({"metadata": {"annotations": annotations}});
    kube::Api::<Namespace>::all(client.clone())
        .patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .map(|_| ())
}

/// The named namespace whose annotations change between CREATEs and UPDATEs.
const CHANGED: &str = "plain";

/// Prints up to `n` refusals of `answers` (with `twin`'s answer to the same request).
fn print_refusals(label: &str, answers: &Replies, twin: Option<&Replies>, n: usize) {
    let refused = answers.iter().filter(|(_, r)| !r.outcome.stored()).take(n);
    for (key, reply) in refused {
        let other = twin
            .and_then(|t| t.get(key))
            .map_or_else(String::new, |r| format!("\n    pod-director: {:?}", r.outcome));
        println!("{label} {}/{}: {:?}{other}", key.0, key.1, reply.outcome);
    }
}

/// Fails with every line of `failures` (and the seed), if any.
fn assert_none(what: &str, seed: u64, failures: &[String]) {
    const SHOWN: usize = 30;
    assert!(
        failures.is_empty(),
        "{what}: {} difference(s) (seed {seed}, replay: E2E_INTREE_SEED={seed} e2e/run in_tree); the first {}:\n{}",
        failures.len(),
        failures.len().min(SHOWN),
        failures.iter().take(SHOWN).cloned().collect::<Vec<_>>().join("\n")
    );
}

/// Waits until the reference server decides with [`changed_annotations`] in namespace
/// `changed` (the plugins read namespaces from a watch): a dry-run pod there gets the new selector.
async fn change_seen(reference: &Reference, changed: &str) {
    let east = json!({"e2e.pod-director.io/region": "east"});
    let mut attempt = 0;
    k8s::eventually("the reference server to see the changed annotations", || {
        attempt += 1;
        let (name, east) = (format!("changed-{attempt}"), &east);
        async move {
            let pod = crate::fixtures::in_tree::corpus_pod(&name, false, Value::Null, Value::Null);
            let created = reference.create_pod(changed, &pod, true).await;
            (created.status.is_success() && created.body["spec"]["nodeSelector"] == *east).then_some(())
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_server_runs_the_in_tree_plugins_as_their_code_says() {
    let Some(env) = Env::start_local(
        "intree",
        "the reference API server runs beside the loopback control plane (e2e/cluster.sh plugins-start)",
    )
    .await
    else {
        return;
    };
    let started = Instant::now();
    let seed = env_var("E2E_INTREE_SEED")
        .map(|s| {
            s.parse::<u64>()
                .unwrap_or_else(|e| panic!("E2E_INTREE_SEED={s:?}: {e}"))
        })
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    notice(&format!("in_tree: seed {seed} (replay with E2E_INTREE_SEED={seed})"));
    let prefix = format!("e2e-intree-{}", crate::harness::suffix());
    let corpus = Corpus::generate(seed, &prefix, RANDOM_NAMESPACES, PODS_PER_NAMESPACE);
    assert!(corpus.pods.len() >= 500, "{} pods", corpus.pods.len());
    let state_dir = env.settings.state_dir.clone().expect("local mode has a state dir");
    let admission = corpus.write_admission_config(&state_dir.join("scenarios").join(&prefix));

    let reference = Reference::start(&state_dir, &admission).await;
    for ns in &corpus.namespaces {
        reference.namespace(&ns.name, &ns.annotations).await;
    }
    let mut plugins = Answers {
        create: create_all(&reference.client, &corpus, "", false).await,
        ..Answers::default()
    };
    assert_none(
        "the plugins' known behaviour",
        seed,
        &check_known_behaviour(&prefix, &plugins.create),
    );
    print_refusals("reference refused", &plugins.create, None, 4);

    let changed = format!("{prefix}-{CHANGED}");
    annotate(&reference.client, &changed, changed_annotations())
        .await
        .expect("the reference namespace annotated");
    change_seen(&reference, &changed).await;
    plugins.update = update_all(&reference.client, &corpus, &plugins.create, false).await;
    let mut failures = Vec::new();
    for (key, stored) in known_updates(&prefix) {
        match plugins.update.get(&key).map(|r| &r.outcome) {
            Some(outcome) if outcome.stored() == stored => {}
            other => failures.push(format!("UPDATE {key:?}: expected stored={stored}, got {other:?}")),
        }
    }
    assert_none("the plugins' known behaviour on UPDATE", seed, &failures);
    print_refusals("reference refused the UPDATE of", &plugins.update, None, 4);

    reference.delete_namespaces().await;
    drop(reference);
    notice(&format!(
        "in_tree: reference {}; {:?} (seed {seed})",
        plugins.summary(),
        started.elapsed()
    ));
}
