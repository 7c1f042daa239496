//! Bad or oddly sent requests over real TLS: each bad one gets a well-formed AdmissionReview
//! error (400/503) or a precise 4xx, promptly; a valid review gets the same answer however it
//! is chunked; and the server keeps serving.

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt as _;
use pod_director::testing::harness::{Harness, Options};
use pod_director_testkit::fixtures::{pod_create, with, without};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const CONFIG: &str = "groups:\n  ci:\n    mode: enforce\n    nodeSelector: {node-pool: ci}\n";
const LIMIT: u64 = 64 * 1024;

fn valid() -> Value {
    pod_create("u-valid", "ns")
}

fn json_bytes(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

/// A request body sent chunked (no Content-Length), from a stream of chunks.
fn streamed(chunks: impl futures::Stream<Item = Bytes> + Send + Sync + 'static) -> reqwest::Body {
    let frames = chunks.map(|chunk| Ok::<_, std::io::Error>(hyper::body::Frame::data(chunk)));
    reqwest::Body::wrap(http_body_util::StreamBody::new(frames))
}

enum Body {
    Bytes(Vec<u8>),
    /// Sent chunked, without Content-Length.
    Stream(Vec<u8>),
    /// One chunk, then the client stalls forever.
    Stall,
}

struct Case {
    name: &'static str,
    method: Method,
    path: &'static str,
    content_type: Option<&'static str>,
    body: Body,
    status: StatusCode,
    /// Text the error message must contain.
    says: &'static str,
}

fn case(name: &'static str, body: Vec<u8>, status: StatusCode, says: &'static str) -> Case {
    Case {
        name,
        method: Method::POST,
        path: "/mutate",
        content_type: Some("application/json"),
        body: Body::Bytes(body),
        status,
        says,
    }
}

/// A POST /mutate answered 400 with a message containing `says`.
fn bad(name: &'static str, body: Vec<u8>, says: &'static str) -> Case {
    case(name, body, StatusCode::BAD_REQUEST, says)
}

/// The valid review with the value at `pointer` replaced, as bytes.
fn valid_with(pointer: &str, new: Value) -> Vec<u8> {
    json_bytes(&with(valid(), pointer, new))
}

/// The valid review without `parent`'s `key`, as bytes.
fn valid_without(parent: &str, key: &str) -> Vec<u8> {
    json_bytes(&without(valid(), parent, key))
}

fn cases() -> Vec<Case> {
    let mut huge = valid();
    huge["request"]["object"]["metadata"]["annotations"] = json!({"big": "x".repeat(LIMIT as usize)});
    let huge = json_bytes(&huge);
    let deep = format!(
        r#"{{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{{"uid":"u","object":{{"spec":{{"x":{}{}}}}}}}}}"#,
        "[".repeat(20_000),
        "]".repeat(20_000)
    )
    .into_bytes();
    let valid_bytes = json_bytes(&valid());
    let mut non_utf8 = valid_bytes.clone();
    let at = non_utf8.windows(5).position(|w| w == b"nginx").unwrap_or(0);
    non_utf8[at] = 0xff;
    let not_a_review = "not an AdmissionReview";
    let mut wrong_type = valid();
    wrong_type["request"]["object"]["spec"]["tolerations"] = json!({"key": "dedicated"});
    vec![
        bad("empty body", Vec::new(), "empty"),
        bad("not JSON", b"kind: AdmissionReview".to_vec(), not_a_review),
        bad("a JSON array", b"[1,2,3]".to_vec(), not_a_review),
        bad("JSON null", b"null".to_vec(), not_a_review),
        bad("a JSON string", b"\"AdmissionReview\"".to_vec(), not_a_review),
        bad(
            "wrong kind",
            valid_with("/kind", json!("Pod")),
            "expected \"AdmissionReview\"",
        ),
        bad(
            "admission.k8s.io/v1beta1",
            valid_with("/apiVersion", json!("admission.k8s.io/v1beta1")),
            "only \"admission.k8s.io/v1\"",
        ),
        bad("no request", valid_without("", "request"), "no request"),
        bad("no uid", valid_without("/request", "uid"), "uid"),
        bad("empty uid", valid_with("/request/uid", json!("")), "uid is empty"),
        bad("no object", valid_without("/request", "object"), "object is missing"),
        bad(
            "no namespace",
            valid_without("/request", "namespace"),
            "namespace is missing",
        ),
        bad(
            "a Deployment object on the pods resource",
            valid_with("/request/object/kind", json!("Deployment")),
            "not a valid v1 Pod",
        ),
        bad(
            "a pod with a placement field of the wrong type",
            json_bytes(&wrong_type),
            "not a valid v1 Pod: spec.tolerations: invalid type: map",
        ),
        bad(
            "an unknown operation",
            valid_with("/request/operation", json!("PATCH")),
            not_a_review,
        ),
        bad("truncated JSON", valid_bytes[..valid_bytes.len() / 2].to_vec(), "EOF"),
        bad("deeply nested JSON", deep, "is not an AdmissionReview"),
        bad("bytes that are not UTF-8", non_utf8, not_a_review),
        case(
            "a body over the limit",
            huge.clone(),
            StatusCode::PAYLOAD_TOO_LARGE,
            "exceeds 65536 bytes",
        ),
        Case {
            body: Body::Stream(huge),
            ..case(
                "a chunked body over the limit",
                Vec::new(),
                StatusCode::PAYLOAD_TOO_LARGE,
                "exceeds 65536 bytes",
            )
        },
        Case {
            content_type: Some("text/plain"),
            ..case(
                "a text/plain body",
                json_bytes(&valid()),
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "not JSON",
            )
        },
        Case {
            method: Method::GET,
            body: Body::Bytes(Vec::new()),
            ..case(
                "GET instead of POST",
                Vec::new(),
                StatusCode::METHOD_NOT_ALLOWED,
                "method not allowed",
            )
        },
        Case {
            method: Method::PUT,
            ..case(
                "PUT instead of POST",
                json_bytes(&valid()),
                StatusCode::METHOD_NOT_ALLOWED,
                "method not allowed",
            )
        },
        Case {
            path: "/mutating",
            ..case(
                "an unknown path",
                json_bytes(&valid()),
                StatusCode::NOT_FOUND,
                "no such endpoint",
            )
        },
        Case {
            path: "/mutate/extra",
            ..case(
                "a path below an endpoint",
                json_bytes(&valid()),
                StatusCode::NOT_FOUND,
                "no such endpoint",
            )
        },
        Case {
            body: Body::Stall,
            ..case(
                "a client that stops sending its body",
                Vec::new(),
                StatusCode::SERVICE_UNAVAILABLE,
                "--request-timeout",
            )
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_bad_request_gets_a_clear_error_and_never_a_hang() {
    let options = Options {
        max_body_bytes: LIMIT,
        request_timeout: Duration::from_millis(500),
        ..Options::default()
    };
    let harness = Harness::start_with(CONFIG, options, None).await;
    harness.label("ns", "ci");
    let cases = cases();
    assert!(cases.len() >= 15);
    for case in cases {
        let name = case.name;
        let mut request = harness
            .client
            .request(case.method.clone(), format!("{}{}", harness.base, case.path));
        if let Some(content_type) = case.content_type {
            request = request.header("content-type", content_type);
        }
        request = match case.body {
            Body::Bytes(bytes) => request.body(bytes),
            Body::Stream(bytes) => {
                let chunks: Vec<Bytes> = bytes.chunks(8192).map(Bytes::copy_from_slice).collect();
                request.body(streamed(futures::stream::iter(chunks)))
            }
            Body::Stall => {
                let first = futures::stream::iter([Bytes::from_static(b"{\"kind\":")]);
                request.body(streamed(first.chain(futures::stream::pending())))
            }
        };
        let started = Instant::now();
        let response = request
            .send()
            .await
            .unwrap_or_else(|e| panic!("{name}: no response: {e}"));
        let status = response.status();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let text = response.text().await.unwrap_or_default();
        assert!(started.elapsed() < Duration::from_secs(3), "{name}: answered promptly");
        assert_eq!(status, case.status, "{name}: {text}");
        let message = if content_type.starts_with("application/json") {
            let review: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: JSON body: {e}"));
            assert_eq!(review["kind"], "AdmissionReview", "{name}");
            assert_eq!(review["apiVersion"], "admission.k8s.io/v1", "{name}");
            assert_eq!(review["response"]["allowed"], false, "{name}");
            assert_eq!(review["response"]["status"]["code"], status.as_u16(), "{name}");
            review["response"]["status"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        } else {
            text
        };
        assert!(
            message.contains(case.says),
            "{name}: {message:?} should say {:?}",
            case.says
        );
    }

    // Still serving.
    let (status, body) = harness.post("/mutate", &valid()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["response"]["allowed"], true);
    harness.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_whose_unread_fields_have_the_wrong_type_is_decided_like_any_other() {
    let harness = Harness::start(CONFIG).await;
    harness.label("ns", "ci");
    let mut body = valid();
    body["request"]["object"]["spec"]["containers"] = json!({"name": "web"});
    body["request"]["object"]["status"] = json!("Running");
    let (status, response) = harness.post("/mutate", &body).await;
    assert_eq!(status, StatusCode::OK, "{response}");
    assert_eq!(response["response"]["allowed"], true);
    assert_eq!(
        response["response"]["auditAnnotations"]["decision"], "patched",
        "{response}"
    );
    harness.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_that_are_not_pod_creates_are_admitted_untouched() {
    let harness = Harness::start(CONFIG).await;
    harness.label("ns", "ci");
    let deployments = with(
        valid(),
        "/request/resource",
        json!({"group": "apps", "version": "v1", "resource": "deployments"}),
    );
    let mut status_subresource = valid();
    status_subresource["request"]["subResource"] = json!("status");
    let delete = with(valid(), "/request/operation", json!("DELETE"));
    for (name, body) in [
        ("a Deployment", deployments),
        ("the status subresource", status_subresource),
        ("a DELETE", delete),
    ] {
        let (status, response) = harness.post("/mutate", &body).await;
        assert_eq!(status, StatusCode::OK, "{name}");
        assert_eq!(response["response"]["allowed"], true, "{name}");
        assert_eq!(response["response"]["uid"], "u-valid", "{name}");
        assert!(response["response"].get("patch").is_none(), "{name}");
    }
    harness.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_sent_in_many_small_chunks_is_decided_as_if_sent_whole() {
    let harness = Harness::start(CONFIG).await;
    harness.label("ns", "ci");
    let (status, whole) = harness.post("/mutate", &valid()).await;
    assert_eq!(status, StatusCode::OK, "{whole}");
    assert!(
        whole["response"]["patch"].is_string(),
        "the enforce group patches: {whole}"
    );
    // Chunks of 7 bytes split keys, strings and escapes across chunk boundaries.
    let bytes = json_bytes(&valid());
    let chunks: Vec<Bytes> = bytes.chunks(7).map(Bytes::copy_from_slice).collect();
    assert!(chunks.len() > 100, "{} chunks", chunks.len());
    let response = harness
        .client
        .post(format!("{}/mutate", harness.base))
        .header("content-type", "application/json")
        .body(streamed(futures::stream::iter(chunks)))
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), StatusCode::OK);
    let chunked: Value = serde_json::from_slice(&response.bytes().await.expect("body read")).expect("JSON review");
    assert_eq!(chunked, whole, "the same answer, patch and annotations included");
    harness.server.shutdown().await;
}
