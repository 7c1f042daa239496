//! pod-director's JSON log lines: captured from the local process's standard
//! output, or read from the release's pods (cluster mode).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams, LogParams};
use serde_json::Value;

/// The target of pod-director's one-per-decision log line.
pub const DECISION_TARGET: &str = "pod_director::decision";

/// Log lines collected so far (shared with the thread reading the process's stdout).
#[derive(Debug, Clone, Default)]
pub struct Lines(Arc<Mutex<Vec<Value>>>);

impl Lines {
    pub fn push(&self, line: Value) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    }

    pub fn snapshot(&self) -> Vec<Value> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Where pod-director's log lines come from.
pub enum LogSource {
    Local(Lines),
    /// The pods of a Helm release.
    Pods(Box<PodLogs>),
}

/// The logs of a release's pods, since `since`.
pub struct PodLogs {
    api: Api<Pod>,
    selector: String,
    since: Instant,
}

impl LogSource {
    pub fn pods(client: &Client, namespace: &str, release: &str) -> Self {
        LogSource::Pods(Box::new(PodLogs {
            api: Api::namespaced(client.clone(), namespace),
            selector: format!("app.kubernetes.io/instance={release}"),
            since: Instant::now(),
        }))
    }

    /// Every JSON log line so far.
    pub async fn lines(&self) -> Vec<Value> {
        match self {
            LogSource::Local(lines) => lines.snapshot(),
            LogSource::Pods(pods) => {
                let PodLogs { api, selector, since } = pods.as_ref();
                let pods = api
                    .list(&ListParams::default().labels(selector))
                    .await
                    .unwrap_or_else(|e| panic!("listing pod-director's pods ({selector}): {e}"));
                let params = LogParams {
                    since_seconds: Some(since.elapsed().as_secs() as i64 + 5),
                    ..LogParams::default()
                };
                let mut lines = Vec::new();
                for pod in pods {
                    let name = pod.metadata.name.unwrap_or_default();
                    let text = api
                        .logs(&name, &params)
                        .await
                        .unwrap_or_else(|e| panic!("logs of pod-director pod {name}: {e}"));
                    lines.extend(text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()));
                }
                lines
            }
        }
    }

    /// The decision lines so far.
    pub async fn decisions(&self) -> Vec<Decision> {
        self.lines()
            .await
            .into_iter()
            .filter(|l| l["target"] == DECISION_TARGET)
            .map(Decision)
            .collect()
    }

    /// Lines with this `message`.
    pub async fn messages(&self, message: &str) -> Vec<Value> {
        self.lines()
            .await
            .into_iter()
            .filter(|l| l["message"] == message)
            .collect()
    }
}

/// One decision log line.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision(pub Value);

impl Decision {
    /// Whether this is the decision for pod `namespace/name` at `webhook` (mutate|validate).
    pub fn is(&self, namespace: &str, name: &str, webhook: &str) -> bool {
        self.str("admission.request.namespace") == Some(namespace)
            && self.str("admission.request.name") == Some(name)
            && self.str("webhook") == Some(webhook)
    }

    /// A field of the line.
    pub fn get(&self, field: &str) -> &Value {
        &self.0[field]
    }

    /// A string field of the line.
    pub fn str(&self, field: &str) -> Option<&str> {
        self.0.get(field).and_then(Value::as_str)
    }

    /// A string field that must be there.
    pub fn text(&self, field: &str) -> &str {
        self.str(field)
            .unwrap_or_else(|| panic!("the decision line has no string {field}: {}", self.0))
    }

    /// `placement.decision`.
    pub fn decision(&self) -> &str {
        self.text("placement.decision")
    }

    /// `placement.patch.json`: the (would-be) patch, a JSON array.
    pub fn patch(&self) -> &Value {
        let patch = self.get("placement.patch.json");
        assert!(patch.is_array(), "placement.patch.json is not an array: {}", self.0);
        patch
    }
}
