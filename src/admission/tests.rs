use std::sync::Arc;

use base64::Engine as _;
use json_patch::{AddOperation, Patch, PatchOperation, jsonptr::PointerBuf};
use serde_json::{Value, json};

use super::*;
use crate::cluster::LookupError;
use crate::testing::{StaticNamespaces, admission_on, answer};
use pod_director_engine::config::Mode;
use pod_director_engine::decision::Write;
use pod_director_engine::testing::assert_contains;
use pod_director_engine::testing::{with, without};

/// The pod of [`review`]: a ReplicaSet's pod, generateName, no name yet, with its managed fields.
pub(super) fn pod_object() -> Value {
    let mut pod = pod_director_testkit::fixtures::replica_set_pod("team-ci");
    pod["metadata"]["managedFields"] = json!([{"manager": "kube-controller-manager", "operation": "Update",
        "apiVersion": "v1", "time": "2026-11-02T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}}]);
    pod
}

/// A pod CREATE exactly as kube-apiserver sends it, as a value to edit.
pub(super) fn review() -> Value {
    pod_director_testkit::fixtures::Review::pod("CREATE", pod_object()).value()
}

/// The same pod CREATE as bytes in kube-apiserver's field order (the object decoded in the review's pass).
pub(super) fn api_server_bytes() -> Vec<u8> {
    pod_director_testkit::fixtures::Review::pod("CREATE", pod_object()).bytes()
}

pub(super) fn bytes(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

pub(super) fn rejected(body: &[u8]) -> Rejected {
    match parse(Webhook::Mutate, body) {
        Ok(parsed) => panic!("expected a rejection, got {:?}", parsed.subject),
        Err(rejected) => rejected,
    }
}

#[test]
fn a_pod_create_from_the_api_server_parses_into_a_pod() {
    let parsed = parse(Webhook::Mutate, &bytes(&review())).expect("parses");
    assert_eq!(parsed.request.uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
    let Reviewed::Pod(Write::Create(pod)) = parsed.subject else {
        panic!("expected a pod CREATE");
    };
    assert_eq!(pod.metadata.generate_name.as_deref(), Some("web-7c9f8d-"));
}

#[test]
fn a_pod_in_the_api_server_s_field_order_parses_as_the_same_request_and_pod() {
    let inline = parse(Webhook::Mutate, &api_server_bytes()).expect("parses");
    let raw = parse(Webhook::Mutate, &bytes(&review())).expect("parses");
    assert_eq!(format!("{:?}", inline.request), format!("{:?}", raw.request));
    let (Reviewed::Pod(Write::Create(a)), Reviewed::Pod(Write::Create(b))) = (&inline.subject, &raw.subject) else {
        panic!("pods")
    };
    assert_eq!(a, b);
    assert_eq!(a.metadata.labels.as_ref().map(|l| l.len()), Some(2));
}

#[test]
fn a_pod_field_of_the_wrong_type_is_refused_naming_it_in_either_field_order() {
    let bad = |update: bool| {
        let mut object = pod_object();
        object["spec"]["affinity"] = json!({"nodeAffinity": "ci"});
        let review =
            pod_director_testkit::fixtures::Review::pod(if update { "UPDATE" } else { "CREATE" }, object.clone());
        if update {
            review.old(object).bytes()
        } else {
            review.bytes()
        }
    };
    for (name, body) in [
        ("inline", bad(false)),
        (
            "raw",
            bytes(&serde_json::from_slice::<Value>(&bad(false)).unwrap_or_default()),
        ),
        ("update", bad(true)),
    ] {
        let rejected = rejected(&body);
        let text = rejected.error.to_string();
        assert!(
            text.starts_with("request.object is not a valid v1 Pod: spec.affinity: invalid type: string \"ci\""),
            "{name}: {text}"
        );
        assert_eq!(
            rejected.uid.as_deref(),
            Some("705ab4f5-6393-11e8-b7cc-42010a800002"),
            "{name}"
        );
        assert_eq!(rejected.error.status(), StatusCode::BAD_REQUEST, "{name}");
    }
}

#[test]
fn an_update_carries_the_old_pod() {
    let body = with(review(), "/request/operation", json!("UPDATE"));
    let old = review().pointer("/request/object").cloned().unwrap_or_default();
    let body = with(body, "/request/oldObject", old);
    let parsed = parse(Webhook::Mutate, &bytes(&body)).expect("parses");
    assert!(matches!(parsed.subject, Reviewed::Pod(Write::Update { .. })));
}

#[test]
fn requests_that_are_not_pod_creates_or_updates_are_not_applicable() {
    let cases = [
        with(
            review(),
            "/request/resource",
            json!({"group": "apps", "version": "v1", "resource": "deployments"}),
        ),
        with(review(), "/request/operation", json!("DELETE")),
        with(review(), "/request/operation", json!("CONNECT")),
        {
            let mut v = review();
            v["request"]["subResource"] = json!("status");
            v
        },
    ];
    for body in cases {
        let parsed = parse(Webhook::Mutate, &bytes(&body)).expect("parses");
        assert!(
            matches!(parsed.subject, Reviewed::NotApplicable(_)),
            "{:?}",
            parsed.subject
        );
    }
}

#[test]
fn each_kind_of_bad_request_gets_its_own_error_and_keeps_the_uid_when_readable() {
    let set = |pointer: &str, value: Value| bytes(&with(review(), pointer, value));
    let unset = |parent: &str, key: &str| bytes(&without(review(), parent, key));
    let update = with(review(), "/request/operation", json!("UPDATE"));
    let update_with_old = |old: Value| bytes(&with(update.clone(), "/request/oldObject", old));
    let mut string_tolerations = review();
    string_tolerations["request"]["object"]["spec"]["tolerations"] = json!("dedicated");
    let string_tolerations = bytes(&string_tolerations);
    let uid = Some("705ab4f5-6393-11e8-b7cc-42010a800002");
    /// An error, the uid echoed with it (none when unreadable), and the requests that get it.
    type Case<'a> = (fn(&AdmissionError) -> bool, Option<&'a str>, Vec<(&'a str, Vec<u8>)>);
    let cases: Vec<Case> = vec![
        (
            |e| matches!(e, AdmissionError::EmptyBody),
            None,
            vec![("empty body", Vec::new())],
        ),
        (
            |e| matches!(e, AdmissionError::Decode(_)),
            None,
            vec![
                ("not JSON", b"hello".to_vec()),
                ("JSON array", b"[]".to_vec()),
                ("no uid", unset("/request", "uid")),
            ],
        ),
        (
            |e| matches!(e, AdmissionError::MissingRequest),
            None,
            vec![("no request", unset("", "request"))],
        ),
        (
            |e| matches!(e, AdmissionError::MissingUid),
            None,
            vec![("empty uid", set("/request/uid", json!("")))],
        ),
        (
            |e| matches!(e, AdmissionError::WrongKind(_)),
            uid,
            vec![("wrong kind", set("/kind", json!("Pod")))],
        ),
        (
            |e| matches!(e, AdmissionError::WrongApiVersion(_)),
            uid,
            vec![("v1beta1", set("/apiVersion", json!("admission.k8s.io/v1beta1")))],
        ),
        (
            |e| matches!(e, AdmissionError::MissingObject),
            uid,
            vec![
                ("no object", unset("/request", "object")),
                ("null object", set("/request/object", Value::Null)),
            ],
        ),
        (
            |e| matches!(e, AdmissionError::MissingNamespace),
            uid,
            vec![("no namespace", unset("/request", "namespace"))],
        ),
        (
            |e| matches!(e, AdmissionError::InvalidObject { field: "object", at, .. } if at == "kind"),
            uid,
            vec![(
                "a Deployment sent as a pod",
                set("/request/object/kind", json!("Deployment")),
            )],
        ),
        (
            |e| matches!(e, AdmissionError::InvalidObject { field: "object", at, .. } if at == "spec.tolerations"),
            uid,
            vec![("tolerations is a string", string_tolerations.clone())],
        ),
        (
            |e| matches!(e, AdmissionError::InvalidObject { field: "object", at, .. } if at == "metadata.labels"),
            uid,
            vec![(
                "a label value is a number",
                set("/request/object/metadata/labels/app", json!(7)),
            )],
        ),
        (
            |e| matches!(e, AdmissionError::InvalidObject { field: "oldObject", at, .. } if at == "spec.nodeSelector"),
            uid,
            vec![(
                "an old pod whose nodeSelector is a list",
                update_with_old(
                    json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "web"}, "spec": {"nodeSelector": []}}),
                ),
            )],
        ),
        (
            |e| matches!(e, AdmissionError::Decode(_)),
            uid,
            vec![("operation unknown", set("/request/operation", json!("PATCH")))],
        ),
        (
            |e| matches!(e, AdmissionError::InvalidNamespace { .. }),
            uid,
            vec![
                (
                    "a namespace naming a subresource",
                    set("/request/namespace", json!("team-ci/status")),
                ),
                (
                    "a namespace with a URL fragment",
                    set("/request/namespace", json!("team-ci#x")),
                ),
                ("a namespace in upper case", set("/request/namespace", json!("Team-CI"))),
                (
                    "a namespace longer than 63 characters",
                    set("/request/namespace", json!("a".repeat(64))),
                ),
            ],
        ),
        (
            |e| matches!(e, AdmissionError::MissingSpec { field: "object" }),
            uid,
            vec![
                ("an empty object", set("/request/object", json!({}))),
                ("a pod without a spec", unset("/request/object", "spec")),
                ("a pod whose spec is null", set("/request/object/spec", Value::Null)),
            ],
        ),
        (
            |e| matches!(e, AdmissionError::MissingSpec { field: "oldObject" }),
            uid,
            vec![(
                "an update whose old pod has no spec",
                update_with_old(json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "web"}})),
            )],
        ),
    ];
    // The message docs/src/reliability.md shows, its position in the body elided.
    let tolerations = rejected(&string_tolerations).error.to_string();
    let shown = "request.object is not a valid v1 Pod: spec.tolerations: invalid type: string \"dedicated\", expected a sequence at line 1 column ";
    assert!(tolerations.starts_with(shown), "{tolerations}");
    let page = "docs/src/reliability.md";
    let docs = std::fs::read_to_string(pod_director_testkit::repo().join(page)).unwrap();
    assert!(
        docs.lines().any(|line| line == format!("{shown}…")),
        "{page} shows the message as the webhook writes it: {tolerations}"
    );
    for (expected, expected_uid, requests) in cases {
        for (name, body) in requests {
            let rejected = rejected(&body);
            assert!(expected(&rejected.error), "{name}: got {:?}", rejected.error);
            assert_eq!(rejected.uid.as_deref(), expected_uid, "{name}");
            assert_eq!(rejected.error.status(), StatusCode::BAD_REQUEST, "{name}");
        }
    }
}

#[test]
fn the_uid_is_echoed_from_valid_json_beyond_serde_jsons_limits() {
    let uid = "705ab4f5-6393-11e8-b7cc-42010a800002";
    let text = String::from_utf8(bytes(&review())).unwrap_or_default();
    let huge_number = text.replace(
        "\"terminationGracePeriodSeconds\":30",
        "\"tolerations\":[{\"operator\":\"Exists\",\"tolerationSeconds\":1e400}],\"terminationGracePeriodSeconds\":30",
    );
    assert_ne!(huge_number, text, "the body was changed");
    let rejected = rejected(huge_number.as_bytes());
    assert!(
        matches!(&rejected.error, AdmissionError::InvalidObject { at, .. } if at == "spec.tolerations"),
        "{:?}",
        rejected.error
    );
    assert!(
        rejected.error.to_string().contains("number out of range"),
        "{}",
        rejected.error
    );
    assert_eq!(rejected.uid.as_deref(), Some(uid));
}

#[test]
fn fields_placement_does_not_read_are_checked_as_json_syntax_only() {
    let text = String::from_utf8(bytes(&review())).unwrap_or_default();
    let skipped = [
        (
            "1e400 in a pod field",
            "\"terminationGracePeriodSeconds\":30",
            "\"terminationGracePeriodSeconds\":1e400".to_owned(),
        ),
        (
            "containers is a string",
            "\"containers\":[",
            "\"containers\":\"nginx\",\"x\":[".to_owned(),
        ),
        (
            "10k nested objects in options",
            "\"options\":{",
            format!(
                "\"options\":{{\"deep\":{}1{},",
                "{\"a\":".repeat(10_000),
                "}".repeat(10_000)
            ),
        ),
    ];
    for (name, from, to) in skipped {
        let body = text.replace(from, &to);
        assert_ne!(body, text, "{name}: the body was changed");
        let parsed = parse(Webhook::Mutate, body.as_bytes()).unwrap_or_else(|r| panic!("{name}: {:?}", r.error));
        assert!(matches!(parsed.subject, Reviewed::Pod { .. }), "{name}");
    }
    let broken = text.replace("\"containers\":[", "\"containers\":[,");
    assert!(
        matches!(rejected(broken.as_bytes()).error, AdmissionError::Decode(_)),
        "still JSON"
    );
}

#[tokio::test]
async fn an_invalid_namespace_is_refused_before_any_lookup() {
    /// Counts every lookup.
    #[derive(Default)]
    struct Counting(std::sync::atomic::AtomicUsize);
    impl NamespaceSource for Counting {
        fn cached(&self, _name: &str) -> Option<namespaces::NamespaceData> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            None
        }
        fn fetch<'a>(
            &'a self,
            _name: &'a str,
        ) -> futures::future::BoxFuture<'a, Result<Option<namespaces::NamespaceData>, LookupError>> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(std::future::ready(Ok(None)))
        }
        fn is_ready(&self) -> bool {
            true
        }
        fn cached_count(&self) -> usize {
            0
        }
    }
    let counting = Arc::new(Counting::default());
    let (admission, _) = admission_on(
        "groups:\n  ci: {mode: enforce, nodeSelector: {pool: ci}}\n",
        counting.clone(),
    );
    for namespace in ["team-ci/status", "team-ci#x", "../kube-system", "team-ci?watch=1"] {
        let body = with(review(), "/request/namespace", json!(namespace));
        let (status, value) = answer(&admission, Webhook::Mutate, &bytes(&body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{namespace}");
        assert_eq!(value["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
        let message = value["response"]["status"]["message"].as_str().unwrap_or_default();
        assert_contains(message, "request.namespace");
    }
    assert_eq!(
        counting.0.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "no lookup at all"
    );
}

#[test]
fn deeply_nested_json_is_refused_without_overflowing_the_stack() {
    let depth = 100_000;
    let body = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    assert!(matches!(rejected(body.as_bytes()).error, AdmissionError::Decode(_)));
    let mut nested = String::from(r#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","x":"#);
    nested.push_str(&"{\"a\":".repeat(depth));
    assert!(matches!(rejected(nested.as_bytes()).error, AdmissionError::Decode(_)));
}

fn request() -> AdmissionRequest<DynamicObject> {
    parse(Webhook::Mutate, &bytes(&review())).expect("parses").request
}

fn outcome(mode: Mode, decision: Decision) -> Outcome {
    let mut outcome = Outcome::new(Webhook::Mutate, decision);
    outcome.group = Some("ci".to_owned());
    outcome.mode = Some(mode);
    outcome.patch = Patch(vec![PatchOperation::Add(AddOperation {
        path: PointerBuf::from_tokens(["spec", "nodeSelector"]),
        value: json!({"node-pool": "ci"}),
    })]);
    outcome.summary = "would set nodeSelector node-pool=ci".to_owned();
    outcome
}

fn wire(outcome: &Outcome) -> Value {
    serde_json::from_slice(&respond(&request().uid, outcome, "abc123")).expect("JSON")
}

#[test]
fn the_patch_is_sent_as_base64_as_the_api_server_expects() {
    let enforce = outcome(Mode::Enforce, Decision::Patched);
    let response = &wire(&enforce)["response"];
    assert_eq!(response["patchType"], "JSONPatch");
    let encoded = response["patch"].as_str().expect("patch is a base64 string");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .expect("valid base64");
    let patch: Value = serde_json::from_slice(&decoded).expect("patch is JSON");
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/spec/nodeSelector", "value": {"node-pool": "ci"}}])
    );
    assert_eq!(response["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_eq!(response["allowed"], true);
}

#[test]
fn a_dry_run_decision_carries_no_patch_but_annotates_the_would_be_patch() {
    let response = &wire(&outcome(Mode::DryRun, Decision::WouldPatch))["response"];
    assert!(response.get("patch").is_none());
    assert!(response.get("patchType").is_none());
    let annotations = &response["auditAnnotations"];
    assert_eq!(annotations["decision"], "would_patch");
    assert_eq!(annotations["group"], "ci");
    assert_eq!(annotations["mode"], "dryRun");
    assert_eq!(annotations["config-revision"], "abc123");
    let patch: Value = serde_json::from_str(annotations["patch"].as_str().unwrap_or_default()).expect("JSON patch");
    assert_eq!(patch[0]["path"], "/spec/nodeSelector");
}

#[test]
fn a_denial_is_forbidden_with_the_engines_message_and_warning() {
    let mut denied = outcome(Mode::Enforce, Decision::Denied);
    denied.message = Some("pod-director: group ci: nodeSelector[\"node-pool\"]: pod has gpu".to_owned());
    denied.warning = Some("pod-director[ci]: denied".to_owned());
    let response = &wire(&denied)["response"];
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 403);
    assert_eq!(response["status"]["reason"], "Forbidden");
    assert_contains(response["status"]["message"].as_str().unwrap_or_default(), "node-pool");
    assert_eq!(response["warnings"], json!(["pod-director[ci]: denied"]));
}

#[test]
fn responses_without_a_group_have_no_audit_annotations() {
    let response = &wire(&Outcome::new(Webhook::Mutate, Decision::Skipped))["response"];
    assert!(response.get("auditAnnotations").is_none());
    assert_eq!(response["allowed"], true);
}

#[test]
fn a_long_patch_is_summarised_in_the_audit_annotation() {
    let mut big = outcome(Mode::DryRun, Decision::WouldPatch);
    big.patch = Patch(
        (0..40)
            .map(|i| {
                PatchOperation::Add(AddOperation {
                    path: PointerBuf::from_tokens(["spec", "nodeSelector", &format!("example.com/key-{i}")]),
                    value: json!("x".repeat(40)),
                })
            })
            .collect(),
    );
    let annotations = audit_annotations(&big, "r");
    let patch = &annotations["patch"];
    assert!(patch.len() <= MAX_ANNOTATION_BYTES);
    assert!(
        patch.starts_with("40 operations: add /spec/nodeSelector/example.com~1key-0"),
        "{patch}"
    );
    assert!(patch.ends_with("… 30 more"), "{patch}");
}

#[test]
fn error_responses_are_well_formed_reviews() {
    let review = render_error(Some("u-1"), &AdmissionError::MissingObject);
    let value: Value = serde_json::from_slice(&to_wire(review).expect("serializes")).expect("JSON");
    assert_eq!(value["kind"], "AdmissionReview");
    assert_eq!(value["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(value["response"]["uid"], "u-1");
    assert_eq!(value["response"]["allowed"], false);
    assert_eq!(value["response"]["status"]["code"], 400);
    assert_eq!(value["response"]["status"]["message"], "request.object is missing");
}

pub(super) fn admission(namespaces: Arc<StaticNamespaces>) -> Admission {
    admission_on("{}", namespaces).0
}

#[tokio::test]
async fn an_unreachable_api_server_answers_503_so_the_failure_policy_applies() {
    let namespaces = Arc::new(StaticNamespaces::new());
    namespaces.set_unreachable(true);
    let (status, value) = answer(&admission(namespaces), Webhook::Mutate, &bytes(&review())).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(value["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_contains(
        value["response"]["status"]["message"].as_str().unwrap_or_default(),
        "team-ci",
    );
}

#[tokio::test]
async fn excluded_namespaces_are_decided_without_a_namespace_lookup() {
    let namespaces = Arc::new(StaticNamespaces::new());
    namespaces.set_unreachable(true);
    let body = with(review(), "/request/namespace", json!("kube-system"));
    let (status, _) = answer(&admission(namespaces), Webhook::Mutate, &bytes(&body)).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn an_update_at_mutate_is_admitted_untouched() {
    let body = with(review(), "/request/operation", json!("UPDATE"));
    let old = review().pointer("/request/object").cloned().unwrap_or_default();
    let body = with(body, "/request/oldObject", old);
    let admission = admission(Arc::new(StaticNamespaces::new()));
    let (status, value) = answer(&admission, Webhook::Mutate, &bytes(&body)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(value["response"]["allowed"], true);
    assert!(value["response"].get("patch").is_none());
}

/// An UPDATE without `oldObject`, and a CREATE with one, of `object` (a review to edit): the
/// API server sends neither, so each says so in a 400 review at every webhook that decides
/// `object`'s resource — never decided as the other operation (an UPDATE patched as a CREATE).
async fn is_refused_as_malformed(object: Value, webhooks: &[Webhook]) {
    let namespaces = Arc::new(StaticNamespaces::new());
    namespaces.insert(
        "team-ci",
        crate::cluster::Labels::from([("pod-director/group".to_owned(), "ci".to_owned())]),
    );
    let admission = admission(namespaces);
    let stored = object.pointer("/request/object").cloned().unwrap_or_default();
    let update_without_old = with(object.clone(), "/request/operation", json!("UPDATE"));
    let create_with_old = with(object, "/request/oldObject", stored);
    let kind = create_with_old["request"]["kind"]["kind"].clone();
    for webhook in webhooks {
        for (body, message) in [
            (
                &update_without_old,
                "request.oldObject is missing: an UPDATE is decided against the object it replaces",
            ),
            (
                &create_with_old,
                "request.oldObject is set on a CREATE: only an UPDATE replaces an object",
            ),
        ] {
            let (status, value) = answer(&admission, *webhook, &bytes(body)).await;
            let what = format!("{kind} {} at {webhook}", body["request"]["operation"]);
            assert_eq!(status, StatusCode::BAD_REQUEST, "{what}: {value}");
            let response = &value["response"];
            assert_eq!(response["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002", "{what}");
            assert_eq!(response["allowed"], false, "{what}: {value}");
            assert!(response.get("patch").is_none(), "{what}: never patched: {value}");
            assert_eq!(response["status"]["code"], 400, "{what}: {value}");
            assert_contains(response["status"]["message"].as_str().unwrap_or_default(), message);
        }
    }
}

#[tokio::test]
async fn a_pod_update_without_its_old_pod_or_a_create_with_one_gets_a_400_at_each_pod_webhook() {
    let webhooks = [Webhook::Mutate, Webhook::Validate, Webhook::ValidateReservation];
    is_refused_as_malformed(review(), &webhooks).await;
}

#[tokio::test]
async fn a_daemon_set_update_without_its_old_object_or_a_create_with_one_gets_a_400_at_mutate_and_validate() {
    let daemon_set = json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "team-ci"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
            "metadata": {"labels": {"app": "agent"}}, "spec": {"containers": [{"name": "a", "image": "a:1"}]}}},
    });
    let review = pod_director_testkit::fixtures::Review::daemon_set("team-ci", "CREATE", daemon_set).value();
    is_refused_as_malformed(review, &[Webhook::Mutate, Webhook::Validate]).await;
}

#[tokio::test]
async fn a_namespace_update_without_its_old_object_or_a_create_with_one_gets_a_400_at_validate_namespace() {
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "team-ci", "labels": {"pod-director/group": "ci"}}});
    let review = pod_director_testkit::fixtures::Review::namespace("CREATE", namespace).value();
    is_refused_as_malformed(review, &[Webhook::ValidateNamespace]).await;
}

/// A `pods/binding` CREATE as kube-apiserver sends it for the scheduler: the object is a Binding.
fn binding_review() -> pod_director_testkit::fixtures::Review {
    let binding = json!({
        "kind": "Binding", "apiVersion": "v1",
        "metadata": {"name": "web-7c9f8d-x2k4p", "namespace": "team-ci", "creationTimestamp": null},
        "target": {"kind": "Node", "name": "ci-1"},
    });
    pod_director_testkit::fixtures::Review::new(["", "v1", "pods"], ["", "v1", "Binding"], "team-ci", "CREATE", binding)
        .sub_resource("binding")
}

#[tokio::test]
async fn a_binding_is_admitted_untouched_at_mutate() {
    let enforce = "groups:\n  ci:\n    mode: enforce\n    nodeSelector: {node-pool: ci}\n";
    let namespaces = Arc::new(StaticNamespaces::new());
    namespaces.insert(
        "team-ci",
        crate::cluster::Labels::from([("pod-director/group".to_owned(), "ci".to_owned())]),
    );
    let (admission, _) = admission_on(enforce, namespaces);
    for (order, body) in binding_orders() {
        let (status, value) = answer(&admission, Webhook::Mutate, &body).await;
        assert_eq!(status, StatusCode::OK, "{order}: {value}");
        assert_eq!(value["response"]["allowed"], true, "{order}: {value}");
        assert!(value["response"].get("patch").is_none(), "{order}: {value}");
    }
}

/// The review with its request's members written in `order`, then the others in the fixture's.
/// (A `serde_json::Value` writes them sorted: `object` before `operation` and `resource`.)
fn in_member_order(review: &Value, order: &[&str]) -> Vec<u8> {
    let request = review["request"].as_object().cloned().unwrap_or_default();
    let mut members: Vec<String> = Vec::new();
    let mut write = |key: &str, value: &Value| {
        members.push(format!("{}:{}", Value::from(key), value));
    };
    for key in order {
        if let Some(value) = request.get(*key) {
            write(key, value);
        }
    }
    for (key, value) in &request {
        if !order.contains(&key.as_str()) {
            write(key, value);
        }
    }
    format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{{}}}}}"#,
        members.join(",")
    )
    .into_bytes()
}

/// A `pods/binding` review in the orders that matter: kube-apiserver's (`subResource` before
/// `object`), `resource` and `operation` before the object but `subResource` after it (the
/// object read as a pod, then contradicted), every member after the object, and sorted.
fn binding_orders() -> Vec<(&'static str, Vec<u8>)> {
    let review = binding_review();
    let value = review.value();
    vec![
        ("api server's", review.bytes()),
        (
            "object before subResource",
            in_member_order(
                &value,
                &["uid", "kind", "resource", "operation", "object", "subResource"],
            ),
        ),
        (
            "object first",
            in_member_order(&value, &["object", "uid", "resource", "subResource"]),
        ),
        ("sorted", bytes(&value)),
    ]
}

#[test]
fn a_binding_parses_as_the_same_request_whatever_its_member_order() {
    let orders = binding_orders();
    let text = String::from_utf8(orders[1].1.clone()).unwrap_or_default();
    let at = |key: &str| text.find(&format!("\"{key}\":")).unwrap_or(usize::MAX);
    assert!(at("resource") < at("object") && at("operation") < at("object") && at("object") < at("subResource"));
    let mut parsed = Vec::new();
    for (order, body) in &orders {
        let request = match parse(Webhook::Mutate, body) {
            Ok(parsed) => parsed.request,
            Err(rejected) => panic!("{order}: {}", rejected.error),
        };
        assert_eq!(request.sub_resource.as_deref(), Some("binding"), "{order}");
        parsed.push(format!("{request:?}"));
    }
    assert!(parsed.windows(2).all(|w| w[0] == w[1]), "{parsed:#?}");
}

#[test]
fn a_pod_read_before_a_later_subresource_is_decided_by_the_subresource() {
    // A pods/status UPDATE whose objects come before its subResource: read as pods, then skipped.
    let body = with(review(), "/request/operation", json!("UPDATE"));
    let old = review().pointer("/request/object").cloned().unwrap_or_default();
    let mut body = with(body, "/request/oldObject", old);
    body["request"]["subResource"] = json!("status");
    let order = [
        "uid",
        "kind",
        "resource",
        "operation",
        "object",
        "oldObject",
        "subResource",
    ];
    let parsed = parse(Webhook::Mutate, &in_member_order(&body, &order)).expect("parses");
    assert!(
        matches!(&parsed.subject, Reviewed::NotApplicable(why) if why == "subresource pods/status"),
        "{:?}",
        parsed.subject
    );
    // An invalid pod read before a later subResource is still named as the pod's error.
    let mut bad = review();
    bad["request"]["object"]["spec"]["affinity"] = json!({"nodeAffinity": "ci"});
    bad["request"]["subResource"] = json!("");
    let error = rejected(&in_member_order(
        &bad,
        &["uid", "kind", "resource", "operation", "object"],
    ))
    .error;
    assert_contains(
        &error.to_string(),
        "request.object is not a valid v1 Pod: spec.affinity: invalid type: string \"ci\"",
    );
}

mod log;
mod node;
mod qos;
mod requester;
