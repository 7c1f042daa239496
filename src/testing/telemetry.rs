//! Runs real admission reviews through the production subscriber layers (the
//! OpenTelemetry layer with an in-memory exporter, the JSON log layer into a
//! buffer) and hands back what they emitted: exported spans, log lines and the
//! metrics text.

use std::sync::{Arc, Mutex};

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use pod_director_engine::placement::Webhook;
use pod_director_testkit::fixtures::{Review, replica_set_pod};
use pod_director_testkit::{LogCapture, node};
use serde_json::{Value, json};
use tracing_subscriber::layer::SubscriberExt as _;

use crate::cluster::Nodes;
use crate::telemetry::{self, DECISION_TARGET, JsonLayer};
use crate::testing::StaticNodes;

/// The configuration the reviews run against: one group per mode and conflict
/// policy, and `bulky`, whose patch is larger than a span attribute may be.
pub fn config() -> String {
    let bulky: Vec<String> = (0..40)
        .map(|i| format!("      example.com/feature-{i:02}: enabled-on-this-node-pool-{i:02}"))
        .collect();
    format!(
        "{CONFIG}  bulky:\n    mode: dryRun\n    nodeSelector:\n{}\n",
        bulky.join("\n")
    )
}

const CONFIG: &str = r#"
groups:
  shadow:
    mode: dryRun
    nodeSelector: {node-pool: ci, kubernetes.io/os: linux}
    tolerations:
      - {key: dedicated, operator: Equal, value: ci, effect: NoSchedule}
    reserve: {}
  strict:
    mode: enforce
    onConflict: reject
    nodeSelector: {node-pool: ci}
  lenient:
    mode: warn
    onConflict: override
    nodeSelector: {node-pool: ci}
"#;

/// Namespace → group label value (`unknown` names no defined group).
pub const NAMESPACES: &[(&str, &str)] = &[
    ("team-shadow", "shadow"),
    ("team-strict", "strict"),
    ("team-lenient", "lenient"),
    ("team-typo", "shaddow"),
    ("team-bulky", "bulky"),
];

/// The cluster's nodes: one ci node (tainted for ci), one general node. Groups
/// `shadow` finds 1 feasible node; `strict` and `lenient` (no toleration) find none.
pub fn nodes() -> StaticNodes {
    let nodes = StaticNodes::new();
    let linux = |pool| [("node-pool", pool), ("kubernetes.io/os", "linux")];
    nodes.insert(node("ci-1", &linux("ci"), &[("dedicated", "ci", "NoSchedule")], false));
    nodes.insert(node("general-1", &linux("general"), &[], false));
    nodes
}

/// Collects exported spans and the resource attributes they are exported with.
#[derive(Debug, Clone, Default)]
pub struct Exported {
    spans: Arc<Mutex<Vec<SpanData>>>,
    resource: Arc<Mutex<Vec<String>>>,
}

impl SpanExporter for Exported {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        if let Ok(mut spans) = self.spans.lock() {
            spans.extend(batch);
        }
        Ok(())
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        if let Ok(mut keys) = self.resource.lock() {
            *keys = resource.iter().map(|(k, _)| k.to_string()).collect();
        }
    }
}

/// One request to review.
pub struct Request {
    pub webhook: Webhook,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

impl Request {
    pub fn mutate(body: Value) -> Self {
        Self {
            webhook: Webhook::Mutate,
            headers: http::HeaderMap::new(),
            body: serde_json::to_vec(&body).unwrap_or_default(),
        }
    }

    pub fn validate(body: Value) -> Self {
        Self {
            webhook: Webhook::Validate,
            ..Self::mutate(body)
        }
    }

    pub fn reservation(body: Value) -> Self {
        Self {
            webhook: Webhook::ValidateReservation,
            ..Self::mutate(body)
        }
    }

    pub fn namespace_guard(body: Value) -> Self {
        Self {
            webhook: Webhook::ValidateNamespace,
            ..Self::mutate(body)
        }
    }

    pub fn raw(webhook: Webhook, body: &[u8]) -> Self {
        Self {
            webhook,
            headers: http::HeaderMap::new(),
            body: body.to_vec(),
        }
    }

    pub fn with_traceparent(mut self, traceparent: &'static str) -> Self {
        self.headers
            .insert("traceparent", http::HeaderValue::from_static(traceparent));
        self
    }
}

/// What the reviews emitted.
pub struct Emitted {
    pub spans: Vec<SpanData>,
    /// Keys of the resource attributes the spans are exported with.
    pub resource: Vec<String>,
    /// Every JSON log line.
    pub lines: Vec<Value>,
    pub metrics: String,
}

impl Emitted {
    /// The decision log lines, in order.
    pub fn decisions(&self) -> Vec<&Value> {
        self.lines.iter().filter(|l| l["target"] == DECISION_TARGET).collect()
    }
}

/// Reviews `requests` in order, one after the other.
pub fn review(requests: Vec<Request>) -> Emitted {
    let (admission, metrics) = crate::testing::admission(&config(), NAMESPACES);
    let admission = admission.with_nodes(Arc::new(Nodes::new(Arc::new(nodes()))), metrics.nodes.clone());
    let exported = Exported::default();
    let captured = LogCapture::default();
    let provider = telemetry::provider_builder()
        .with_simple_exporter(exported.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(telemetry::otel_layer(&provider))
        .with(JsonLayer::new(captured.clone()));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    tracing::subscriber::with_default(subscriber, || {
        for request in &requests {
            runtime.block_on(admission.review(request.webhook, &request.headers, &request.body));
        }
    });
    let _ = provider.shutdown();
    let text = captured.text();
    Emitted {
        spans: exported.spans.lock().map(|s| s.clone()).unwrap_or_default(),
        resource: exported.resource.lock().map(|r| r.clone()).unwrap_or_default(),
        lines: text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("log line is not JSON ({e}): {l}")))
            .collect(),
        metrics: metrics.encode(),
    }
}

/// A pod CREATE AdmissionReview as kube-apiserver sends it: a ReplicaSet's pod with `spec`.
pub fn pod_create(uid: &str, namespace: &str, spec: Value) -> Value {
    let mut pod = replica_set_pod(namespace);
    pod["spec"] = spec;
    Review::pod("CREATE", pod).uid(uid).value()
}

/// A plain pod spec with one container.
pub fn spec() -> Value {
    json!({"containers": [{"name": "web", "image": "nginx:1.27"}]})
}

/// A representative mix: would-patch, conflict (denied, overridden), unknown
/// group, skipped (excluded namespace and not applicable), validate, error.
pub fn representative_requests() -> Vec<Request> {
    let conflicting =
        json!({"containers": [{"name": "web", "image": "nginx:1.27"}], "nodeSelector": {"node-pool": "gpu"}});
    let mut delete = pod_create("uid-delete", "team-shadow", spec());
    delete["request"]["operation"] = json!("DELETE");
    // At /validate the pod has its generated name.
    let mut validate = pod_create("uid-validate", "team-shadow", spec());
    validate["request"]["name"] = json!("web-7c9f8d-x2x4k");
    validate["request"]["object"]["metadata"]["name"] = json!("web-7c9f8d-x2x4k");
    vec![
        Request::mutate(pod_create("uid-would-patch", "team-shadow", spec())),
        Request::mutate(pod_create("uid-denied", "team-strict", conflicting.clone())),
        Request::mutate(pod_create("uid-overridden", "team-lenient", conflicting)),
        Request::mutate(pod_create("uid-unknown", "team-typo", spec())),
        Request::mutate(pod_create("uid-excluded", "kube-system", spec())),
        Request::mutate(delete),
        Request::validate(validate),
        Request::namespace_guard(namespace_relabel("uid-relabel", "team-strict", "shadow")),
        // Another group's pod with the wildcard toleration: an intruder of shadow's reservation.
        Request::reservation(pod_create(
            "uid-intruder",
            "team-strict",
            json!({"containers": [{"name": "web", "image": "nginx:1.27"}], "tolerations": [{"operator": "Exists"}]}),
        )),
        Request::raw(Webhook::Mutate, b"{\"kind\":\"AdmissionReview\""),
    ]
}

/// A namespace UPDATE by a tenant moving `namespace` to group `to`, as kube-apiserver sends it.
pub fn namespace_relabel(uid: &str, namespace: &str, to: &str) -> Value {
    let object = |group: &str| {
        json!({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": namespace,
            "labels": {"kubernetes.io/metadata.name": namespace, "pod-director/group": group}}})
    };
    Review::namespace("UPDATE", object(to))
        .uid(uid)
        .old(object("strict"))
        .user_info(json!({"username": "alice", "uid": "a1", "groups": ["system:authenticated"]}))
        .value()
}
