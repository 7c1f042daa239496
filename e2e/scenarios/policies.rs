//! Groups enforced by native admission policies (`enforceWith: policy`, pod-director run
//! with `--admission-policies` as the chart's ServiceAccount, with only the chart's RBAC for
//! `webhook.admissionPolicies: true`), held to twins on the webhook through the real API server.
//!
//! Each `e2e-policy-<onConflict>` group of `e2e/scenarios/values.yaml` has a twin
//! `e2e-twin-<onConflict>` with the same placement on the webhook, and so has each
//! `e2e-check-<onConflict>` (`enforceWith: webhookAndPolicy`: placed by `/mutate`, its final pod
//! checked by its ValidatingAdmissionPolicy alone, one webhook call per pod). Every case — the
//! engine's named placement cases and a seeded random corpus of pods (nodeSelectors that
//! agree, conflict or are empty; toleration spellings that are supersets, duplicates,
//! wildcards, other effects or seconds; required node affinity with ORed and empty terms,
//! preferred terms, pod (anti-)affinity; the exclusion label; `spec.nodeName`) — is created
//! in a namespace of each, and must be stored with byte-identical placement fields, or
//! refused by both with the same message. `E2E_POLICY_SEED=N` replays a corpus; a mismatch
//! prints the case.

mod explain;
mod latency;
mod rbac;

use kube::Client;
use serde_json::{Value, json};

use super::reservation_bindings::{bind, binder, held, node_of};
use crate::harness::k8s::{IMAGE, eventually, pod_from};
use crate::harness::{ADMISSION_POLICY_KINDS, Created, Env, Options, Rng, admission_policy_api, notice, suffix};

/// (group on policies, its twin on the webhook).
const TWINS: [(&str, &str); 3] = [
    ("e2e-policy-reject", "e2e-twin-reject"),
    ("e2e-policy-override", "e2e-twin-override"),
    ("e2e-policy-ignore", "e2e-twin-ignore"),
];

/// (group placed by the webhook and checked by its ValidatingAdmissionPolicy, its twin on the webhook).
const CHECKED: [(&str, &str); 3] = [
    ("e2e-check-reject", "e2e-twin-reject"),
    ("e2e-check-override", "e2e-twin-override"),
    ("e2e-check-ignore", "e2e-twin-ignore"),
];

/// Every pair the differential compares: [`TWINS`], then [`CHECKED`].
fn pairs() -> impl Iterator<Item = (&'static str, &'static str)> {
    TWINS.into_iter().chain(CHECKED)
}

/// Random pods per run, besides the named cases.
const RANDOM_CASES: usize = 80;

const P: &str = "e2e.pod-director.io/";

/// Whether the API server serves `admissionregistration.k8s.io/v1` MutatingAdmissionPolicy.
async fn served(client: &Client) -> bool {
    match client.list_api_group_resources("admissionregistration.k8s.io/v1").await {
        Ok(list) => list.resources.iter().any(|r| r.name == "mutatingadmissionpolicies"),
        Err(e) => panic!("discovery of admissionregistration.k8s.io/v1: {e}"),
    }
}

/// A pod-director on admission policies whose policy groups are handed over to them; `None`
/// (skipped) in cluster mode or on an API server without MutatingAdmissionPolicy.
async fn start(scenario: &str) -> Option<Env> {
    start_with(scenario, Vec::new()).await
}

async fn start_with(scenario: &str, extra_env: Vec<(String, String)>) -> Option<Env> {
    let settings = crate::harness::Settings::from_env();
    if settings.target == crate::harness::Target::Cluster {
        notice(&format!(
            "SKIPPED {scenario} in cluster mode: runs pod-director with --admission-policies"
        ));
        return None;
    }
    let options = Options {
        env: [("POD_DIRECTOR_ADMISSION_POLICIES".to_owned(), "true".to_owned())]
            .into_iter()
            .chain(extra_env)
            .collect(),
        // As the chart runs it with webhook.admissionPolicies: its ServiceAccount, the chart's RBAC for it (writes
        // only to the objects named for the configured groups), nothing more.
        chart_rbac: Some(vec!["webhook.admissionPolicies=true".to_owned()]),
        ..Options::default()
    };
    let env = Env::start_with(scenario, options).await;
    env.clean_up_admission_policies();
    if !served(&env.client).await {
        notice(&format!(
            "SKIPPED {scenario}: the API server does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicy"
        ));
        return None;
    }
    wait_for_handover(&env).await;
    Some(env)
}

/// The `In` values of the `requirement` on the namespace label in a webhook entry's selector.
fn selected_groups(entry: &Value, label: &str) -> Vec<String> {
    entry["namespaceSelector"]["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["key"] == label && r["operator"] == "In")
        .flat_map(|r| r["values"].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// Both webhook configurations' entries as JSON (their names tell mutate from validate).
async fn webhook_entries(env: &Env) -> Vec<Value> {
    let (mutating, validating) = env.webhook_configurations().await;
    [
        serde_json::to_value(mutating.webhooks.unwrap_or_default()),
        serde_json::to_value(validating.webhooks.unwrap_or_default()),
    ]
    .into_iter()
    .flat_map(|list| list.ok().and_then(|v| v.as_array().cloned()).unwrap_or_default())
    .collect()
}

/// The groups entry `<entry>.<webhook>` of `entries` selects.
fn groups_of(env: &Env, entries: &[Value], entry: &str, webhook: &str) -> Vec<String> {
    let name = env.webhook_name(entry, webhook);
    entries
        .iter()
        .find(|e| e["name"] == name.as_str())
        .map(|e| selected_groups(e, &env.config.namespace_label))
        .unwrap_or_default()
}

/// Waits until the policy groups left the webhook's `enforce` entries for its `policy` entries
/// (their admission policies are in place), and the checked groups the validating `enforce`
/// entry only (their ValidatingAdmissionPolicy is; `/mutate` keeps placing their pods).
async fn wait_for_handover(env: &Env) {
    eventually("the policy groups handed over to their admission policies", || async {
        let entries = webhook_entries(env).await;
        let groups = |entry: &str, webhook: &str| groups_of(env, &entries, entry, webhook);
        let has = |list: &[String], group: &str| list.iter().any(|g| g == group);
        let (on_policy, on_mutate) = (groups("policy", "mutate"), groups("enforce", "mutate"));
        let (checked, on_validate) = (groups("policy", "validate"), groups("enforce", "validate"));
        let policies = TWINS.iter().all(|(policy, twin)| {
            has(&on_policy, policy) && !has(&on_mutate, policy) && has(&on_mutate, twin) && has(&on_validate, twin)
        });
        let checks = CHECKED.iter().all(|(check, _)| {
            has(&checked, check) && !has(&on_validate, check) && has(&on_mutate, check) && !has(&on_policy, check)
        });
        (policies && checks).then_some(())
    })
    .await;
}

/// The names of pod-director's admission policy objects in the cluster, as `Kind/name`.
async fn policy_objects(client: &Client) -> Vec<String> {
    let mut out = Vec::new();
    for (kind, plural) in ADMISSION_POLICY_KINDS {
        let params = kube::api::ListParams::default().labels("app.kubernetes.io/managed-by=pod-director");
        let list = admission_policy_api(client, kind, plural)
            .list(&params)
            .await
            .unwrap_or_else(|e| panic!("list {plural}: {e}"));
        out.extend(
            list.items
                .into_iter()
                .map(|o| format!("{kind}/{}", o.metadata.name.unwrap_or_default())),
        );
    }
    out.sort();
    out
}

/// The four objects of each policy group, and of each [`CHECKED`] group its validating two.
fn expected_objects(groups: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = groups
        .iter()
        .flat_map(|g| ADMISSION_POLICY_KINDS.map(|(kind, _)| format!("{kind}/pod-director-{g}")))
        .chain(CHECKED.iter().flat_map(|(g, _)| {
            ADMISSION_POLICY_KINDS
                .iter()
                .filter(|(kind, _)| kind.starts_with("Validating"))
                .map(move |(kind, _)| format!("{kind}/pod-director-{g}"))
        }))
        .collect();
    out.sort();
    out
}

/// The fields the engine places, exactly as the API server answered them.
fn placement(body: &Value) -> String {
    let spec = &body["spec"];
    json!({
        "nodeSelector": spec["nodeSelector"],
        "tolerations": spec["tolerations"],
        "affinity": spec["affinity"],
        "nodeName": spec["nodeName"],
    })
    .to_string()
}

/// A refusal's message with the namespace and group names taken out, from pod-director's own
/// words on (the API server's prefix names the webhook or the policy that refused).
fn refusal(created: &Created, namespace: &str, group: &str) -> String {
    let message = created.error_message().unwrap_or_default();
    let own = message.find("pod-director: ").map_or(message, |at| &message[at..]);
    own.replace(namespace, "<namespace>").replace(group, "<group>")
}

/// One case in one twin pair: both admitted with the same placement, or both refused alike.
fn compare(
    case: &str,
    pod: &Value,
    pair: (&str, &str),
    on_policy: (&str, &Created),
    on_webhook: (&str, &Created),
) -> Option<String> {
    let (policy_ns, policy) = on_policy;
    let (webhook_ns, webhook) = on_webhook;
    let mismatch = |what: String| {
        Some(format!(
            "case {case} in {} vs {}: {what}\n  pod: {pod}\n  policy path: {} {}\n  webhook path: {} {}",
            pair.0, pair.1, policy.status, policy.body, webhook.status, webhook.body
        ))
    };
    match (policy.status.is_success(), webhook.status.is_success()) {
        (true, true) => {
            let (a, b) = (placement(&policy.body), placement(&webhook.body));
            if a == b {
                None
            } else {
                mismatch(format!("placement differs:\n    {a}\n    {b}"))
            }
        }
        (false, false) => {
            let (a, b) = (refusal(policy, policy_ns, pair.0), refusal(webhook, webhook_ns, pair.1));
            if policy.status != webhook.status || a != b {
                mismatch(format!("refused differently:\n    {a}\n    {b}"))
            } else {
                None
            }
        }
        (admitted, _) => mismatch(format!(
            "only the {} path admitted it",
            if admitted { "policy" } else { "webhook" }
        )),
    }
}

fn toleration(
    key: &str,
    operator: Option<&str>,
    value: Option<&str>,
    effect: Option<&str>,
    seconds: Option<i64>,
) -> Value {
    let mut t = json!({});
    if !key.is_empty() {
        t["key"] = json!(format!("{P}{key}"));
    }
    for (field, v) in [("operator", operator), ("value", value), ("effect", effect)] {
        if let Some(v) = v {
            t[field] = json!(v);
        }
    }
    if let Some(s) = seconds {
        t["tolerationSeconds"] = json!(s);
    }
    t
}

/// Toleration spellings around the groups' three (`dedicated=blue:NoSchedule`, `spot` Exists
/// with any effect, `drain` Exists NoExecute for 30 s).
fn toleration_spellings() -> Vec<Value> {
    vec![
        toleration("dedicated", Some("Equal"), Some("blue"), Some("NoSchedule"), None),
        toleration("dedicated", None, Some("blue"), Some("NoSchedule"), None),
        toleration("dedicated", Some("Exists"), None, None, None),
        toleration("dedicated", Some("Exists"), None, Some("NoSchedule"), None),
        toleration("dedicated", Some("Equal"), Some("blue"), None, None),
        toleration("dedicated", Some("Equal"), Some("red"), Some("NoSchedule"), None),
        toleration("dedicated", Some("Equal"), Some("blue"), Some("NoExecute"), None),
        toleration("", Some("Exists"), None, None, None),
        toleration("", Some("Exists"), None, Some("NoSchedule"), None),
        toleration("spot", Some("Exists"), None, None, None),
        toleration("spot", Some("Exists"), None, Some("NoSchedule"), None),
        toleration("drain", Some("Exists"), None, Some("NoExecute"), Some(30)),
        toleration("drain", Some("Exists"), None, Some("NoExecute"), Some(60)),
        toleration("drain", Some("Exists"), None, Some("NoExecute"), Some(10)),
        toleration("drain", Some("Exists"), None, Some("NoExecute"), None),
        toleration("gpu", Some("Exists"), None, Some("NoSchedule"), None),
    ]
}

/// nodeSelector pairs that agree with the groups', conflict with them, or are unrelated.
const SELECTORS: [(&str, &str); 6] = [
    ("e2e.pod-director.io/pool", "blue"),
    ("e2e.pod-director.io/pool", "red"),
    ("kubernetes.io/os", "linux"),
    ("kubernetes.io/os", "windows"),
    ("e2e.pod-director.io/disk", "ssd"),
    ("e2e.pod-director.io/a~b", "x"),
];

fn random_term(rng: &mut Rng) -> Value {
    const EXPRESSIONS: [(&str, &str, &[&str]); 5] = [
        ("zone", "In", &["a", "b"]),
        ("pool", "NotIn", &["red"]),
        ("disk", "Exists", &[]),
        ("gen", "Gt", &["2"]),
        ("zone", "DoesNotExist", &[]),
    ];
    match rng.below(5) {
        0 => json!({}),
        1 => json!({"matchExpressions": []}),
        2 => json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["e2e-policies-node"]}]}),
        _ => {
            let expressions: Vec<Value> = (0..=rng.below(2))
                .map(|_| {
                    let (key, operator, values) = *rng.pick(&EXPRESSIONS);
                    let mut e = json!({"key": format!("{P}{key}"), "operator": operator});
                    if !values.is_empty() {
                        e["values"] = json!(values);
                    }
                    e
                })
                .collect();
            json!({ "matchExpressions": expressions })
        }
    }
}

fn random_affinity(rng: &mut Rng) -> Value {
    let mut affinity = json!({});
    if rng.chance(75) {
        let mut node = json!({});
        if rng.chance(80) {
            let terms: Vec<Value> = (0..=rng.below(3)).map(|_| random_term(rng)).collect();
            node["requiredDuringSchedulingIgnoredDuringExecution"] = json!({ "nodeSelectorTerms": terms });
        }
        if rng.chance(40) {
            node["preferredDuringSchedulingIgnoredDuringExecution"] =
                json!([{ "weight": 1 + rng.below(100), "preference": random_term(rng) }]);
        }
        affinity["nodeAffinity"] = node;
    }
    let term = json!({"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "e2e"}}});
    if rng.chance(25) {
        affinity["podAffinity"] = json!({ "requiredDuringSchedulingIgnoredDuringExecution": [term.clone()] });
    }
    if rng.chance(25) {
        affinity["podAntiAffinity"] =
            json!({ "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "podAffinityTerm": term}] });
    }
    affinity
}

fn random_pod(rng: &mut Rng) -> Value {
    let mut labels = json!({"app": "e2e"});
    if rng.chance(10) {
        labels["pod-director/exclude"] = json!(rng.pick(&["true", "false"]));
    }
    let mut spec = json!({"containers": [{"name": "app", "image": IMAGE}]});
    if rng.chance(60) {
        let mut selector = serde_json::Map::new();
        for _ in 0..rng.below(4) {
            let (key, value) = *rng.pick(&SELECTORS);
            selector.insert(key.to_owned(), json!(value));
        }
        spec["nodeSelector"] = Value::Object(selector);
    }
    if rng.chance(60) {
        let spellings = toleration_spellings();
        let tolerations: Vec<Value> = (0..rng.below(5)).map(|_| rng.pick(&spellings).clone()).collect();
        spec["tolerations"] = Value::Array(tolerations);
    }
    if rng.chance(40) {
        spec["affinity"] = random_affinity(rng);
    }
    if rng.chance(4) {
        spec["nodeName"] = json!("e2e-policies-nowhere");
    }
    json!({ "metadata": { "labels": labels }, "spec": spec })
}

/// The engine's named placement cases (crates/engine/src/placement/tests.rs), as pods.
fn named_cases() -> Vec<(&'static str, Value)> {
    let spec = |extra: Value| {
        let mut spec = json!({"containers": [{"name": "app", "image": IMAGE}]});
        for (k, v) in extra.as_object().cloned().unwrap_or_default() {
            spec[k] = v;
        }
        json!({ "metadata": { "labels": { "app": "e2e" } }, "spec": spec })
    };
    let group_tolerations = json!([
        toleration("dedicated", Some("Equal"), Some("blue"), Some("NoSchedule"), None),
        toleration("spot", Some("Exists"), None, None, None),
        toleration("drain", Some("Exists"), None, Some("NoExecute"), Some(30)),
    ]);
    let mut excluded = spec(json!({}));
    excluded["metadata"]["labels"]["pod-director/exclude"] = json!("true");
    vec![
        ("no-placement", spec(json!({}))),
        (
            "already-placed",
            spec(
                json!({"nodeSelector": {"e2e.pod-director.io/pool": "blue", "kubernetes.io/os": "linux"}, "tolerations": group_tolerations}),
            ),
        ),
        (
            "selector-partly-there",
            spec(json!({"nodeSelector": {"kubernetes.io/os": "linux"}})),
        ),
        (
            "selector-conflict",
            spec(json!({"nodeSelector": {"e2e.pod-director.io/pool": "red"}})),
        ),
        (
            "selector-conflict-and-unrelated",
            spec(
                json!({"nodeSelector": {"e2e.pod-director.io/pool": "red", "kubernetes.io/os": "windows", "e2e.pod-director.io/disk": "ssd"}}),
            ),
        ),
        ("selector-empty", spec(json!({"nodeSelector": {}}))),
        ("tolerations-empty", spec(json!({"tolerations": []}))),
        (
            "toleration-wildcard",
            spec(json!({"tolerations": [{"operator": "Exists"}]})),
        ),
        (
            "toleration-key-exists",
            spec(json!({"tolerations": [toleration("dedicated", Some("Exists"), None, None, None)]})),
        ),
        (
            "toleration-default-operator",
            spec(json!({"tolerations": [toleration("dedicated", None, Some("blue"), Some("NoSchedule"), None)]})),
        ),
        (
            "toleration-longer-seconds",
            spec(json!({"tolerations": [toleration("drain", Some("Exists"), None, Some("NoExecute"), Some(60))]})),
        ),
        (
            "toleration-other-effect",
            spec(json!({"tolerations": [toleration("spot", Some("Exists"), None, Some("NoSchedule"), None)]})),
        ),
        (
            "tolerations-duplicated",
            spec(
                json!({"tolerations": [toleration("gpu", Some("Exists"), None, Some("NoSchedule"), None), toleration("gpu", Some("Exists"), None, Some("NoSchedule"), None)]}),
            ),
        ),
        (
            "required-affinity-ored-terms",
            spec(
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "e2e.pod-director.io/zone", "operator": "In", "values": ["a"]}]},
                    {"matchExpressions": [{"key": "e2e.pod-director.io/disk", "operator": "Exists"}]},
                    {}
                ]}}}}),
            ),
        ),
        (
            "pod-anti-affinity",
            spec(
                json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "e2e"}}}
                ]}}}),
            ),
        ),
        ("excluded-by-label", excluded),
        ("node-name", spec(json!({"nodeName": "e2e-policies-nowhere"}))),
        ("invalid-toleration", spec(json!({"tolerations": [{"value": "x"}]}))),
    ]
}

/// Namespaces per twin pair of [`pairs`]: (policy's or checked's, webhook's).
async fn twin_namespaces(env: &Env) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (policy, twin) in pairs() {
        out.push((env.namespace(Some(policy)).await, env.namespace(Some(twin)).await));
    }
    out
}

/// Creates `pod` as `name` in every namespace pair (a dry run unless `store`); the mismatches.
async fn run_case(
    env: &Env,
    namespaces: &[(String, String)],
    case: &str,
    name: &str,
    pod: &Value,
    store: bool,
) -> Vec<String> {
    let mut named = pod.clone();
    named["metadata"]["name"] = json!(name);
    if store {
        // No scheduler binds it: what is read back is what admission stored.
        named["spec"]["schedulerName"] = json!("e2e-not-scheduled");
    }
    let typed = pod_from(named);
    let mut mismatches = Vec::new();
    for ((policy_ns, webhook_ns), pair) in namespaces.iter().zip(pairs()) {
        let (policy, webhook) = if store {
            (
                env.create_pod(policy_ns, &typed).await,
                env.create_pod(webhook_ns, &typed).await,
            )
        } else {
            (
                env.create_pod_dry_run(policy_ns, &typed).await,
                env.create_pod_dry_run(webhook_ns, &typed).await,
            )
        };
        if let Some(m) = compare(case, pod, pair, (policy_ns, &policy), (webhook_ns, &webhook)) {
            mismatches.push(m);
            continue;
        }
        if store && policy.status.is_success() {
            // What is stored, read back, is what the create answered.
            let (a, b) = (env.get_pod(policy_ns, name).await, env.get_pod(webhook_ns, name).await);
            let (a, b) = (
                placement(&serde_json::to_value(a).expect("serializes")),
                placement(&serde_json::to_value(b).expect("serializes")),
            );
            if a != b {
                mismatches.push(format!(
                    "case {case} in {} vs {}: stored placement differs:\n    {a}\n    {b}",
                    pair.0, pair.1
                ));
            }
        }
    }
    mismatches
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_in_a_group_on_policies_is_stored_and_refused_exactly_as_on_the_webhook() {
    let Some(env) = start("policies").await else {
        return;
    };
    let objects = policy_objects(&env.client).await;
    assert_eq!(
        objects,
        expected_objects(&TWINS.map(|(policy, _)| policy)),
        "pod-director applied the four objects of each policy group, the validating two of each checked group, \
         and nothing else"
    );
    let namespaces = twin_namespaces(&env).await;
    let seed = crate::harness::env_var("E2E_POLICY_SEED")
        .map(|s| s.parse().unwrap_or_else(|e| panic!("E2E_POLICY_SEED={s:?}: {e}")))
        .unwrap_or_else(|| u64::from_str_radix(&suffix(), 16).unwrap_or(1) ^ 0x9011c7);
    notice(&format!("policies: seed {seed} (replay with E2E_POLICY_SEED={seed})"));

    let mut mismatches = Vec::new();
    let mut refused = 0;
    let mut cases = 0;
    for (i, (case, pod)) in named_cases().into_iter().enumerate() {
        mismatches.extend(run_case(&env, &namespaces, case, &format!("named-{i}"), &pod, true).await);
        cases += 1;
    }
    let mut rng = Rng(seed);
    for i in 0..RANDOM_CASES {
        let pod = random_pod(&mut rng);
        let name = format!("random-{i}");
        let found = run_case(&env, &namespaces, &format!("{name} (seed {seed})"), &name, &pod, false).await;
        let probe = env
            .create_pod_dry_run(
                &namespaces[0].1,
                &pod_from({
                    let mut p = pod.clone();
                    p["metadata"]["name"] = json!(name);
                    p
                }),
            )
            .await;
        refused += usize::from(!probe.status.is_success());
        mismatches.extend(found);
        cases += 1;
    }
    println!(
        "policies: {cases} cases × {} twin pairs, {refused} of the random ones refused on the reject twin, {} mismatches",
        namespaces.len(),
        mismatches.len()
    );
    assert!(
        mismatches.is_empty(),
        "{} mismatch(es) between the policy and the webhook path (seed {seed}):\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    assert!(
        refused > 0 && refused < RANDOM_CASES,
        "the corpus exercises both admission and refusal ({refused} of {RANDOM_CASES} refused)"
    );
    invalid_and_in_conflict_is_refused_by_each_path_in_its_phase(&env, &namespaces[0]).await;
    a_checked_group_s_pod_costs_one_webhook_call(&env, &namespaces[TWINS.len()]).await;
    a_binding_outside_the_pool_is_refused_at_validate(&env, &namespaces).await;
}

/// `pods/binding` sets a pending pod's node without a pod write, which no policy sees: for a group on
/// policies and a checked one, the `policy` entry still sends it to `/validate`, which refuses a tenant's
/// binding to a node outside the group's pool (impersonated, with RBAC to bind and nothing more).
async fn a_binding_outside_the_pool_is_refused_at_validate(env: &Env, namespaces: &[(String, String)]) {
    let outside = format!("e2e-policies-gray-{}", suffix());
    env.create_node(&super::nodes::node(&outside, "gray", json!([]), false))
        .await;
    let tenant = format!("policy-binder-{}", suffix());
    for (ns, _) in [&namespaces[0], &namespaces[TWINS.len()]] {
        let client = binder(env, &tenant, ns).await;
        env.create_admitted_pod(ns, &held("escape")).await;
        let (status, body) = bind(&client, ns, "escape", &outside).await;
        let message = body["message"].as_str().unwrap_or_default();
        assert_eq!(status.as_u16(), 403, "{ns}: the binding refused: {body}");
        assert!(
            message.contains(&format!(
                "binding target: node \"{outside}\" is not a node of the group"
            )),
            "{ns}: {message}"
        );
        assert_eq!(node_of(&env.get_pod(ns, "escape").await), None, "{ns}: still pending");
    }
}

/// `webhookAndPolicy`: a pod of a checked group is decided at `/mutate` and never at `/validate` (its
/// ValidatingAdmissionPolicy checks it); its webhook twin's at both.
async fn a_checked_group_s_pod_costs_one_webhook_call(env: &Env, pair: &(String, String)) {
    let (checked_ns, twin_ns) = pair;
    for ns in [checked_ns, twin_ns] {
        let created = env.create_pod(ns, &crate::harness::k8s::pod("one-call")).await;
        assert!(created.status.is_success(), "{} {}", created.status, created.body);
        let decision = env.decision(ns, "one-call", "mutate").await;
        assert_eq!(decision.decision(), "patched", "{decision:?}");
    }
    // The checked pod's admission ended before its twin's began: had /validate decided it, its line would be in.
    let twin = env.decision(twin_ns, "one-call", "validate").await;
    assert_eq!(twin.decision(), "noop", "{twin:?}");
    let validated = env
        .decisions_with(&[
            ("admission.request.namespace", checked_ns),
            ("admission.request.name", "one-call"),
            ("webhook", "validate"),
        ])
        .await;
    assert!(
        validated.is_empty(),
        "a checked group's pod is not sent to /validate: {validated:?}"
    );
}

/// The difference docs/src/admission-policies.md states: a pod both invalid (the API server's validation
/// refuses a `matchFields` requirement with two values) and in conflict is refused by the webhook at `/mutate`
/// (403, pod-director's conflict message). On the policy path the same happens to a pod the observation sends to
/// the webhook (a bare pod here); one it does not send (a pod of an unsampled controller) is refused by the API
/// server's validation, which runs before the ValidatingAdmissionPolicy (422).
async fn invalid_and_in_conflict_is_refused_by_each_path_in_its_phase(env: &Env, pair: &(String, String)) {
    let invalid = |name: &str, owner_uid: Option<&str>| {
        let mut pod = json!({
            "metadata": {"name": name},
            "spec": {
                "nodeSelector": {"e2e.pod-director.io/pool": "green"},
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}
                ]}}},
                "containers": [{"name": "app", "image": IMAGE}],
            },
        });
        if let Some(uid) = owner_uid {
            pod["metadata"]["ownerReferences"] =
                json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": uid, "controller": true}]);
        }
        pod_from(pod)
    };
    let conflict = "pod-director: the pod conflicts with placement group";
    // Unsampled (oneIn16 observes owners whose UID ends in 0), and observed (no owner).
    for (pod, policy_status) in [
        (
            invalid("invalid-unsampled", Some("5b0c2f8e-0d6b-4f55-9d39-3f1b2e7c9a41")),
            422,
        ),
        (invalid("invalid-bare", None), 403),
    ] {
        let (policy, webhook) = (
            env.create_pod_dry_run(&pair.0, &pod).await,
            env.create_pod_dry_run(&pair.1, &pod).await,
        );
        let (on_policy, on_webhook) = (
            policy.error_message().unwrap_or_default(),
            webhook.error_message().unwrap_or_default(),
        );
        assert_eq!(policy.status.as_u16(), policy_status, "policy path: {on_policy}");
        if policy_status == 422 {
            assert!(
                on_policy.contains("is invalid") && !on_policy.contains("pod-director:"),
                "{on_policy}"
            );
        } else {
            assert!(on_policy.contains(conflict), "{on_policy}");
        }
        assert_eq!(webhook.status.as_u16(), 403, "webhook path: {on_webhook}");
        assert!(on_webhook.contains(conflict), "{on_webhook}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_pod_director_stopped_a_group_on_policies_is_still_enforced_and_one_on_the_webhook_is_refused() {
    let Some(mut env) = start("policy-down").await else {
        return;
    };
    let (policy_ns, webhook_ns) = twin_namespaces(&env).await.remove(0);
    let checked_ns = env.namespace(Some(CHECKED[0].0)).await;
    env.pod_director().stop();

    let pod = |name: &str, extra: Value| {
        let mut p = json!({"metadata": {"name": name, "labels": {"app": "e2e"}}, "spec": {"containers": [{"name": "app", "image": IMAGE}]}});
        for (k, v) in extra.as_object().cloned().unwrap_or_default() {
            p["spec"][k] = v;
        }
        pod_from(p)
    };
    let created = env.create_admitted_pod(&policy_ns, &pod("placed", json!({}))).await;
    let stored = env.get_pod(&policy_ns, "placed").await;
    let spec = stored.spec.expect("a spec");
    let selector = spec.node_selector.unwrap_or_default();
    assert_eq!(
        selector.get("e2e.pod-director.io/pool").map(String::as_str),
        Some("blue"),
        "{}",
        created.body
    );
    assert_eq!(selector.get("kubernetes.io/os").map(String::as_str), Some("linux"));
    let keys: Vec<String> = spec
        .tolerations
        .unwrap_or_default()
        .into_iter()
        .filter_map(|t| t.key)
        .filter(|k| k.starts_with(P))
        .collect();
    assert_eq!(
        keys,
        ["dedicated", "spot", "drain"].map(|k| format!("{P}{k}")),
        "the group's tolerations, in order"
    );

    let conflict = env
        .create_pod(
            &policy_ns,
            &pod("conflict", json!({"nodeSelector": {"e2e.pod-director.io/pool": "red"}})),
        )
        .await;
    let message = conflict.error_message().unwrap_or_default();
    assert!(
        !conflict.status.is_success() && message.contains("ValidatingAdmissionPolicy 'pod-director-e2e-policy-reject'"),
        "a conflict is refused by the group's ValidatingAdmissionPolicy: {} {message}",
        conflict.status
    );

    // What the policies leave to the webhook (spec.nodeName: the Node is checked) needs it.
    let named = env
        .create_pod(&policy_ns, &pod("named", json!({"nodeName": "e2e-policies-nowhere"})))
        .await;
    env.assert_failed_calling(&named, "policy");

    let twin = env.create_pod(&webhook_ns, &pod("unplaced", json!({}))).await;
    env.assert_failed_calling(&twin, "enforce");
    // A checked group's pods need /mutate: refused, as its twin's.
    let checked = env.create_pod(&checked_ns, &pod("unplaced", json!({}))).await;
    env.assert_failed_calling(&checked, "enforce");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admission_policies_follow_the_configuration() {
    let resync = ("POD_DIRECTOR_WEBHOOK_RESYNC_INTERVAL".to_owned(), "2s".to_owned());
    let Some(mut env) = start_with("policy-sync", vec![resync]).await else {
        return;
    };
    let all = TWINS.map(|(policy, _)| policy);
    assert_eq!(policy_objects(&env.client).await, expected_objects(&all));
    // What `explain --policies` prints for the same config and namespace is what was applied.
    assert_eq!(
        explain::assert_explain_prints_what_is_applied(&env).await,
        4 * all.len() + 2 * CHECKED.len()
    );

    // A group leaving enforce: its policies go once the webhook has it back, and no pod of
    // the group is refused on the way (its ValidatingAdmissionPolicy goes first), though the
    // API server may place some for a moment after (it drops deleted policies from its cache).
    let ns = env.namespace(Some("e2e-policy-ignore")).await;
    let probe =
        pod_from(json!({"metadata": {"name": "probe"}, "spec": {"containers": [{"name": "app", "image": IMAGE}]}}));
    let revision = env.loaded_revision().await;
    let written = env.edit_config(|config| config["groups"]["e2e-policy-ignore"]["mode"] = json!("dryRun"));
    let revision = env.reloaded_from(&revision).await;
    eventually(
        "the dryRun group's admission policies deleted and no longer applied",
        || async {
            let probed = env.create_pod_dry_run(&ns, &probe).await;
            assert!(
                probed.status.is_success(),
                "a dryRun group's pod refused on the way: {:?}",
                probed.error_message()
            );
            let gone = policy_objects(&env.client).await == expected_objects(&all[..2]);
            (gone && probed.body["spec"]["nodeSelector"].is_null()).then_some(())
        },
    )
    .await;
    let created = env
        .create_admitted_pod(
            &ns,
            &pod_from(
                json!({"metadata": {"name": "observed"}, "spec": {"containers": [{"name": "app", "image": IMAGE}]}}),
            ),
        )
        .await;
    assert!(
        created.body["spec"]["nodeSelector"].is_null(),
        "dryRun leaves the pod alone: {}",
        created.body
    );
    let decision = env.decision(&ns, "observed", "mutate").await;
    assert_eq!(decision.decision(), "would_patch", "{decision:?}");

    // Back in enforce: its policies are applied again and its pods handed over.
    env.pod_director().write_config(&written_back(written));
    let revision = env.reloaded_from(&revision).await;
    eventually("every policy group's objects in place again", || async {
        (policy_objects(&env.client).await == expected_objects(&all)).then_some(())
    })
    .await;
    wait_for_handover(&env).await;

    // An object deleted by hand comes back at the next resync, with no reload.
    let (kind, plural) = ADMISSION_POLICY_KINDS[0];
    admission_policy_api(&env.client, kind, plural)
        .delete("pod-director-e2e-policy-reject", &kube::api::DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("delete {kind}: {e}"));
    eventually("the deleted binding restored by the resync", || async {
        (policy_objects(&env.client).await == expected_objects(&all)).then_some(())
    })
    .await;

    // From `policy` to `webhookAndPolicy`: `/mutate` takes the group back, then its mutating objects
    // go and its validating ones stay, checking its pods in place of `/validate`.
    env.edit_config(|config| config["groups"]["e2e-policy-ignore"]["enforceWith"] = json!("webhookAndPolicy"));
    env.reloaded_from(&revision).await;
    let mut checked = expected_objects(&all[..2]);
    checked.extend(
        ADMISSION_POLICY_KINDS
            .iter()
            .filter(|(kind, _)| kind.starts_with("Validating"))
            .map(|(kind, _)| format!("{kind}/pod-director-e2e-policy-ignore")),
    );
    checked.sort();
    eventually(
        "e2e-policy-ignore's mutating objects deleted, its validating ones kept",
        || async { (policy_objects(&env.client).await == checked).then_some(()) },
    )
    .await;
    let entries = webhook_entries(&env).await;
    let selects = |entry: &str, webhook: &str| {
        groups_of(&env, &entries, entry, webhook)
            .iter()
            .any(|g| g == "e2e-policy-ignore")
    };
    assert!(selects("enforce", "mutate"), "placed by /mutate again");
    assert!(!selects("policy", "mutate"), "no longer on the mutating policy entry");
    assert!(
        selects("policy", "validate"),
        "its bindings and updates still reach /validate"
    );
    assert!(
        !selects("enforce", "validate"),
        "its pod CREATEs are checked by its policy"
    );
    eventually("a pod of the group placed by /mutate", || async {
        let created = env.create_pod_dry_run(&ns, &probe).await;
        (created.body["spec"]["nodeSelector"]["e2e.pod-director.io/pool"] == "blue").then_some(())
    })
    .await;
}

fn written_back(mut config: Value) -> String {
    config["groups"]["e2e-policy-ignore"]["mode"] = json!("enforce");
    config.to_string()
}

/// A pod with one owner of this UID (a ReplicaSet that need not exist: dry runs only).
fn owned_pod(name: &str, owner_uid: &str) -> k8s_openapi::api::core::v1::Pod {
    pod_from(json!({
        "metadata": {
            "name": name,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": owner_uid, "controller": true}],
        },
        "spec": {"containers": [{"name": "app", "image": IMAGE}]},
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_on_policies_is_still_logged_for_the_pods_of_one_controller_in_16_and_every_bare_pod() {
    let Some(env) = start("policy-observe").await else {
        return;
    };
    let ns = env.namespace(Some("e2e-policy-reject")).await;
    let unsampled = env
        .create_pod_dry_run(&ns, &owned_pod("unsampled", "5b0c2f8e-0d6b-4f55-9d39-3f1b2e7c9a41"))
        .await;
    let sampled = env
        .create_pod_dry_run(&ns, &owned_pod("sampled", "5b0c2f8e-0d6b-4f55-9d39-3f1b2e7c9a40"))
        .await;
    let bare = env.create_pod_dry_run(&ns, &crate::harness::k8s::pod("bare")).await;
    for created in [&unsampled, &sampled, &bare] {
        assert!(created.status.is_success(), "{} {}", created.status, created.body);
        assert_eq!(
            created.body["spec"]["nodeSelector"]["e2e.pod-director.io/pool"], "blue",
            "placed by the policy: {}",
            created.body
        );
    }
    for name in ["sampled", "bare"] {
        let decision = env.decision(&ns, name, "mutate").await;
        assert_eq!(
            decision.decision(),
            "noop",
            "the policy placed it; the observing call finds nothing to do: {decision:?}"
        );
        assert_eq!(
            decision.str("placement.group"),
            Some("e2e-policy-reject"),
            "{decision:?}"
        );
        assert_eq!(decision.str("placement.mode"), Some("enforce"), "{decision:?}");
    }
    // Sent before the sampled one, so its line (had it been sent) would be in the log by now.
    let logged = env
        .decisions_with(&[
            ("admission.request.namespace", &ns),
            ("admission.request.name", "unsampled"),
        ])
        .await;
    assert!(
        logged.is_empty(),
        "a pod of an unsampled controller costs no webhook call: {logged:?}"
    );
}

/// `reinvocationPolicy: Never`, the compiled MutatingAdmissionPolicy's trade-off: a later
/// mutating webhook that takes a toleration off again is not followed by the policy putting it
/// back; the ValidatingAdmissionPolicy refuses the pod instead, with the words the webhook path's
/// `/validate` uses for its twin (there, the reinvoked `/mutate` puts it back, the stripper takes
/// it off again, and `/validate` refuses).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_toleration_stripped_by_a_later_webhook_gets_the_pod_refused_on_policies_as_on_the_webhook() {
    if crate::harness::Settings::from_env().stub_host.is_none() {
        notice("SKIPPED policy-strip: runs its own webhook in the test process (E2E_STUB_HOST unset)");
        return;
    }
    let Some(env) = start("policy-strip").await else {
        return;
    };
    let namespaces = twin_namespaces(&env).await;
    let mut stubs = Vec::new();
    for (policy_ns, webhook_ns) in &namespaces {
        stubs.push(
            env.stub_webhook(policy_ns, "IfNeeded", crate::webhooks::stripper())
                .await,
        );
        stubs.push(
            env.stub_webhook(webhook_ns, "IfNeeded", crate::webhooks::stripper())
                .await,
        );
    }
    let pod = json!({
        "metadata": {"labels": {"app": "strip"}},
        "spec": {"containers": [{"name": "app", "image": IMAGE}]},
    });
    let mut mismatches = run_case(&env, &namespaces, "stripped", "strip", &pod, false).await;
    for ((policy_ns, _), (policy, _)) in namespaces.iter().zip(pairs()) {
        let created = env
            .create_pod_dry_run(
                policy_ns,
                &pod_from(json!({"metadata": {"name": "strip"}, "spec": pod["spec"]})),
            )
            .await;
        let expected = format!(
            "pods \"strip\" is forbidden: ValidatingAdmissionPolicy 'pod-director-{policy}' with binding 'pod-director-{policy}' denied request: \
             pod-director: the pod does not satisfy placement group \"{policy}\": \
             tolerations: missing a toleration of {P}dedicated=blue:NoSchedule"
        );
        if created.error_message() != Some(expected.as_str()) {
            mismatches.push(format!(
                "{policy}: refused by its ValidatingAdmissionPolicy for the stripped toleration\n  expected: {expected}\n  got: {} {}",
                created.status, created.body
            ));
        }
    }
    drop(stubs);
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
