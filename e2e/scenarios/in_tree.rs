//! The in-tree plugins held to the real ones: `PodNodeSelector` and
//! `PodTolerationRestriction` run by a reference kube-apiserver of the same release
//! (`e2e/cluster.sh plugins-start`, harness `plugins`), against pod-director's
//! `inTreePlugins` on the main cluster, both configured by the same
//! `AdmissionConfiguration` file.
//!
//! The corpus (`fixtures::in_tree`): named namespaces × named pods (the plugins' edge
//! cases), plus a seeded random part (`E2E_INTREE_SEED=N` replays one; the seed is
//! printed). Twin namespaces have the same name and annotations on both servers; every pod
//! is created for real on both (held by a scheduling gate: Pending, never scheduled), then
//! some are UPDATEd with the same JSON patch. A namespace's annotations are replaced between
//! the CREATEs and the UPDATEs (`PodNodeSelector` does not run on UPDATE,
//! `PodTolerationRestriction` does, against the new whitelist).
//!
//! What must hold, pod for pod and update for update:
//! - both servers store the pod, with **the same `spec.nodeSelector` and `spec.tolerations`**
//!   (JSON values compared as stored, order included), or both refuse it. Refusal messages
//!   differ (the plugins' `pod node label selector conflicts with its namespace node label
//!   selector`, or a bare parse error; pod-director's webhook denial) and are not compared:
//!   a mismatch prints both, and the first few refusals of each kind are printed as they are;
//! - on the reference server, the named cases give what the plugins' code says (a few
//!   outcomes written out by hand below: this proves the reference, hence the differential);
//! - pod-director in dryRun predicts its enforce answers: the would-be patch logged for each
//!   pod, applied to the pod it admitted untouched, gives the stored enforce pod; a would-be
//!   refusal is logged exactly for the pods enforce refused.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use http_body_util::BodyExt as _;
use kube::Client;
use serde_json::{Value, json};

use crate::fixtures::in_tree::{
    Corpus, NODE_SELECTOR, PodCase, TOLERATIONS_WHITELIST, Update, keeps_existing_tolerations,
};
use crate::harness::plugins::Reference;
use crate::harness::{Decision, Env, env_var, k8s, notice};

mod tenant;

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

    /// Two answers agree: the same stored placement, or both refused.
    pub(crate) fn agrees(&self, other: &Outcome) -> bool {
        match (self, other) {
            (Outcome::Refused { .. }, Outcome::Refused { .. }) => true,
            _ => self == other,
        }
    }
}

/// A pod in the corpus: its namespace and its name there.
type Key = (String, String);

/// One answer: what it means, and the object (or `Status`) it carried.
#[derive(Debug, Clone)]
struct Reply {
    outcome: Outcome,
    body: Value,
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

/// Sends `request` through `client`; the answer, whatever its status.
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
        body,
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

/// The requests on which `left` and `right` disagree, each printed with both answers.
fn disagreements(what: &str, left: (&str, &Replies), right: (&str, &Replies)) -> Vec<String> {
    let mut found = Vec::new();
    for (key, l) in left.1 {
        let r = right.1.get(key);
        if !r.is_some_and(|r| l.outcome.agrees(&r.outcome)) {
            found.push(format!(
                "{what} {}/{}:\n    {}: {:?}\n    {}: {:?}",
                key.0,
                key.1,
                left.0,
                l.outcome,
                right.0,
                r.map(|r| &r.outcome)
            ));
        }
    }
    found.extend(
        right
            .1
            .keys()
            .filter(|k| !left.1.contains_key(*k))
            .map(|k| format!("{what} {}/{}: only {} answered", k.0, k.1, right.0)),
    );
    found
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

/// Whether `decision` is the in-tree webhooks' about `key`'s pod named `name`, for `operation`.
fn about(decision: &Decision, namespace: &str, name: &str, operation: &str) -> bool {
    decision.str("webhook").is_some_and(|w| w.ends_with("-in-tree"))
        && decision.str("admission.request.namespace") == Some(namespace)
        && decision.str("admission.request.name") == Some(name)
        && decision.str("admission.request.operation") == Some(operation)
        && decision.get("admission.request.dryrun") == &json!(true)
}

/// What pod-director in dryRun says enforce would answer: the dry-run answer `reply` (the pod as
/// it would be stored, untouched) with the logged would-be patch applied, or a refusal when it
/// logged a would-be denial (or the API server refused the dry run for another reason). For an
/// UPDATE of the stored pod `before`, a patched pod that drops or changes one of `before`'s
/// tolerations is refused: pod validation, after the webhooks, forbids that.
fn predicted(reply: &Reply, decisions: &[&Decision], before: Option<&Value>) -> Result<Outcome, String> {
    if !reply.outcome.stored() {
        return Ok(reply.outcome.clone());
    }
    if decisions.is_empty() {
        return Err("no decision logged".to_owned());
    }
    if let Some(denial) = decisions.iter().find(|d| d.decision() == "would_deny") {
        return Ok(Outcome::Refused {
            status: 0,
            message: format!("would_deny: {}", denial.0),
        });
    }
    let mut body = reply.body.clone();
    if let Some(would_patch) = decisions.iter().find(|d| d.decision() == "would_patch") {
        let patch: json_patch::Patch = serde_json::from_value(would_patch.patch().clone())
            .map_err(|e| format!("the logged patch is no JSON patch: {e}"))?;
        json_patch::patch(&mut body, &patch).map_err(|e| format!("the logged patch does not apply: {e}"))?;
    }
    if let Some(before) = before
        && !keeps_existing_tolerations(&before["spec"]["tolerations"], &body["spec"]["tolerations"])
    {
        return Ok(Outcome::Refused {
            status: http::StatusCode::UNPROCESSABLE_ENTITY.as_u16(),
            message: "existing toleration can not be modified except its tolerationSeconds".to_owned(),
        });
    }
    Ok(Outcome::of(http::StatusCode::OK, &body))
}

/// Whether dryRun's `prediction` is the API server's refusal of a toleration of the pod as sent
/// (invalid, e.g. `Exists` with a value) where enforce stored the pod: the tolerations' merge dropped
/// it for a toleration that tolerates all it does, as the plugin's does. dryRun leaves the pod as it
/// is, so the API server validates the pod enforce never stores; its would-be patch is that merge.
fn repaired_by_the_merge(prediction: &Outcome, enforced: &Outcome) -> bool {
    matches!(prediction, Outcome::Refused { status: 422, message } if message.contains("spec.tolerations"))
        && enforced.stored()
}

/// Compares pod-director's dryRun predictions (its dry-run answers `dry` to `operation`s on pods
/// named `<name><suffix>`, and its logged decisions) with enforce's actual answers `actual`.
/// `before`: for UPDATEs, the stored pods they update.
async fn check_predictions(
    env: &Env,
    operation: &str,
    suffix: &str,
    dry: &Replies,
    actual: &Replies,
    before: Option<&Replies>,
) -> Vec<String> {
    // Every admitted dry run is logged: wait for the lines of the last ones.
    let wanted = dry.iter().filter(|(_, r)| r.outcome.stored()).count();
    let decisions = k8s::eventually(
        &format!("pod-director's decisions on {wanted} dry-run {operation}s"),
        || async {
            let all = env.logs.decisions().await;
            let logged = dry
                .iter()
                .filter(|(key, r)| {
                    r.outcome.stored()
                        && all
                            .iter()
                            .any(|d| about(d, &key.0, &format!("{}{suffix}", key.1), operation))
                })
                .count();
            (logged == wanted).then_some(all)
        },
    )
    .await;
    let mut failures = Vec::new();
    for (key, reply) in dry {
        let name = format!("{}{suffix}", key.1);
        let mine: Vec<&Decision> = decisions
            .iter()
            .filter(|d| about(d, &key.0, &name, operation))
            .collect();
        let modes: Vec<&str> = mine.iter().filter_map(|d| d.str("placement.mode")).collect();
        if modes.iter().any(|m| *m != "dryRun") {
            failures.push(format!("{operation} {}/{name}: decided in modes {modes:?}", key.0));
        }
        let Some(enforced) = actual.get(key) else {
            failures.push(format!("{operation} {}/{}: no enforce answer", key.0, key.1));
            continue;
        };
        let old = before.and_then(|b| b.get(key)).map(|r| &r.body);
        if before.is_some() && old.is_none() {
            failures.push(format!("{operation} {}/{name}: no stored pod before it", key.0));
            continue;
        }
        match predicted(reply, &mine, old) {
            Ok(prediction) if prediction.agrees(&enforced.outcome) => {}
            Ok(prediction) if repaired_by_the_merge(&prediction, &enforced.outcome) => {}
            Ok(prediction) => failures.push(format!(
                "{operation} {}/{}: dryRun predicted {prediction:?}\n    enforce: {:?}",
                key.0, key.1, enforced.outcome
            )),
            Err(why) => failures.push(format!("{operation} {}/{name}: {why}", key.0)),
        }
    }
    failures
}

/// Turns pod-director's in-tree section on in `mode` with the plugins' file `admission`, and
/// waits until the API server calls it so: a dry-run canary in `namespace` is decided in `mode`.
async fn in_tree_mode(env: &mut Env, mode: &str, admission: &std::path::Path, namespace: &str) {
    let admission = admission.display().to_string();
    env.edit_config(|config| {
        config["inTreePlugins"] = json!({"mode": mode, "admissionConfigFile": admission});
    });
    let env = &*env;
    let mut attempt = 0;
    k8s::eventually(&format!("pod-director's in-tree webhooks in {mode}"), || {
        attempt += 1;
        let name = format!("canary-{}-{attempt}", mode.to_lowercase());
        async move {
            let canary = crate::fixtures::in_tree::corpus_pod(&name, false, Value::Null, Value::Null);
            env.create_pod_dry_run(namespace, &canary).await;
            let decisions = env.logs.decisions().await;
            decisions
                .iter()
                .any(|d| about(d, namespace, &name, "CREATE") && d.str("placement.mode") == Some(mode))
                .then_some(())
        }
    })
    .await;
}

/// Waits until both servers decide with [`changed_annotations`] in namespace `changed` (the
/// plugins and pod-director read namespaces from watches): a dry-run pod there gets (on the
/// reference server) or would get (pod-director in dryRun) the new selector.
async fn changes_seen(env: &Env, reference: &Reference, changed: &str) {
    let east = json!({"e2e.pod-director.io/region": "east"});
    let mut attempt = 0;
    k8s::eventually("both servers to see the changed annotations", || {
        attempt += 1;
        let (name, east) = (format!("changed-{attempt}"), &east);
        async move {
            let pod = crate::fixtures::in_tree::corpus_pod(&name, false, Value::Null, Value::Null);
            let created = reference.create_pod(changed, &pod, true).await;
            let seen_by_plugins = created.status.is_success() && created.body["spec"]["nodeSelector"] == *east;
            env.create_pod_dry_run(changed, &pod).await;
            let decisions = env.logs.decisions().await;
            let seen_by_pod_director = decisions.iter().any(|d| {
                about(d, changed, &name, "CREATE")
                    && d.decision() == "would_patch"
                    && d.patch().to_string().contains("\"east\"")
            });
            (seen_by_plugins && seen_by_pod_director).then_some(())
        }
    })
    .await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_tree_plugins_and_pod_director_store_and_refuse_the_same_pods() {
    let Some(mut env) = Env::start_local(
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
    let elapsed = |what: &str| println!("{what} after {:?}", started.elapsed());

    // The reference server: the named cases prove it runs the plugins as their code says.
    let reference = Reference::start(&state_dir, &admission).await;
    for ns in &corpus.namespaces {
        reference.namespace(&ns.name, &ns.annotations).await;
    }
    let mut plugins = Answers {
        create: create_all(&reference.client, &corpus, "", false).await,
        ..Answers::default()
    };
    elapsed(&format!("{} creates on the reference server", plugins.create.len()));
    assert_none(
        "the plugins' known behaviour",
        seed,
        &check_known_behaviour(&prefix, &plugins.create),
    );
    print_refusals("reference refused", &plugins.create, None, 4);

    // pod-director in enforce, twin namespaces: the same CREATEs.
    for ns in &corpus.namespaces {
        env.annotated_namespace(&ns.name, &ns.annotations).await;
    }
    let canary_ns = &corpus.namespaces[0].name;
    in_tree_mode(&mut env, "enforce", &admission, canary_ns).await;
    let mut pod_director = Answers {
        create: create_all(&env.client, &corpus, "", false).await,
        ..Answers::default()
    };
    elapsed(&format!("{} creates through pod-director", pod_director.create.len()));
    print_refusals("reference refused", &plugins.create, Some(&pod_director.create), 8);
    assert_none(
        "CREATEs: the plugins vs pod-director in enforce",
        seed,
        &disagreements(
            "CREATE",
            ("plugins", &plugins.create),
            ("pod-director", &pod_director.create),
        ),
    );

    // dryRun predicts enforce: the same pods, dry run (named <name>-d).
    in_tree_mode(&mut env, "dryRun", &admission, canary_ns).await;
    let dry_creates = create_all(&env.client, &corpus, "-d", true).await;
    let create_predictions = check_predictions(&env, "CREATE", "-d", &dry_creates, &pod_director.create, None).await;
    elapsed("dryRun CREATEs");

    // The changed namespace, then the UPDATEs: dry run first, then for real on both servers.
    let changed = format!("{prefix}-{CHANGED}");
    annotate(&reference.client, &changed, changed_annotations())
        .await
        .expect("the reference namespace annotated");
    annotate(&env.client, &changed, changed_annotations())
        .await
        .expect("the admin annotates the namespace");
    changes_seen(&env, &reference, &changed).await;
    let dry_updates = update_all(&env.client, &corpus, &pod_director.create, true).await;
    in_tree_mode(&mut env, "enforce", &admission, canary_ns).await;
    plugins.update = update_all(&reference.client, &corpus, &plugins.create, false).await;
    pod_director.update = update_all(&env.client, &corpus, &pod_director.create, false).await;
    elapsed("UPDATEs");
    let mut failures = Vec::new();
    for (key, stored) in known_updates(&prefix) {
        match plugins.update.get(&key).map(|r| &r.outcome) {
            Some(outcome) if outcome.stored() == stored => {}
            other => failures.push(format!("UPDATE {key:?}: expected stored={stored}, got {other:?}")),
        }
    }
    assert_none("the plugins' known behaviour on UPDATE", seed, &failures);
    print_refusals(
        "reference refused the UPDATE of",
        &plugins.update,
        Some(&pod_director.update),
        4,
    );
    assert_none(
        "UPDATEs: the plugins vs pod-director in enforce",
        seed,
        &disagreements(
            "UPDATE",
            ("plugins", &plugins.update),
            ("pod-director", &pod_director.update),
        ),
    );
    let update_predictions = check_predictions(
        &env,
        "UPDATE",
        "",
        &dry_updates,
        &pod_director.update,
        Some(&pod_director.create),
    )
    .await;
    assert_none("dryRun's CREATE predictions vs enforce", seed, &create_predictions);
    assert_none("dryRun's UPDATE predictions vs enforce", seed, &update_predictions);

    // A Capsule-style tenant.
    tenant::a_capsule_tenant_cannot_escape(&env, &reference, &prefix).await;

    reference.delete_namespaces().await;
    drop(reference);
    notice(&format!(
        "in_tree: reference {}; pod-director {}; {} dry runs; {:?} (seed {seed})",
        plugins.summary(),
        pod_director.summary(),
        dry_creates.len() + dry_updates.len(),
        started.elapsed()
    ));
}
