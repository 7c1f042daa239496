//! Jaeger's HTTP query API (`/api/traces`): where the tracing e2e reads the
//! traces that pod-director exported through the OpenTelemetry Collector.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use super::PATIENCE;
use super::k8s::eventually;

/// A Jaeger v2 query API, e.g. `http://127.0.0.1:16686`.
pub struct Jaeger {
    pub query: String,
    http: reqwest::Client,
}

impl Jaeger {
    pub fn new(query: &str) -> Self {
        Self {
            query: query.trim_end_matches('/').to_owned(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .expect("an HTTP client"),
        }
    }

    /// Waits until the query API answers.
    pub async fn wait_ready(&self) {
        let url = format!("{}/api/services", self.query);
        eventually(&format!("Jaeger's query API {url} to answer"), || async {
            let response = self.http.get(&url).send().await.ok()?;
            response.status().is_success().then_some(())
        })
        .await;
    }

    /// `GET /api/traces/{id}`: the trace, once Jaeger has it.
    pub async fn trace(&self, trace_id: &str) -> Option<Value> {
        let response = self
            .http
            .get(format!("{}/api/traces/{trace_id}", self.query))
            .send()
            .await
            .ok()?;
        if !response.status().is_success() {
            return None;
        }
        let body: Value = response.json().await.ok()?;
        body["data"].as_array()?.first().cloned()
    }

    /// `GET /api/traces?service=…&tags=…`: up to `limit` traces with a span carrying all
    /// `tags` (`{"key": "value", …}`).
    pub async fn search(&self, service: &str, tags: &Value, limit: usize) -> Vec<Value> {
        let Ok(response) = self
            .http
            .get(format!("{}/api/traces", self.query))
            .query(&[
                ("service", service),
                ("tags", &tags.to_string()),
                ("lookback", "1h"),
                ("limit", &limit.to_string()),
            ])
            .send()
            .await
        else {
            return Vec::new();
        };
        let body: Value = response.json().await.unwrap_or_default();
        body["data"].as_array().cloned().unwrap_or_default()
    }

    /// Waits until `done(trace)` holds for the trace `trace_id`, and returns it.
    pub async fn wait_for_trace(&self, trace_id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        // The collector's tail sampling holds a trace for its decision_wait (10 s) first.
        let deadline = tokio::time::Instant::now() + PATIENCE + Duration::from_secs(15);
        let mut last = None;
        loop {
            if let Some(trace) = self.trace(trace_id).await {
                if done(&trace) {
                    return trace;
                }
                last = Some(trace);
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "Jaeger never showed {what} in trace {trace_id}; last seen: {}",
                last.map(|t| serde_json::to_string_pretty(&t).unwrap_or_default())
                    .unwrap_or_else(|| "no such trace".to_owned())
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// The spans of a Jaeger trace with their process's service name.
pub fn spans(trace: &Value) -> Vec<(String, &Value)> {
    trace["spans"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|span| {
            let process = span["processID"].as_str().unwrap_or_default();
            let service = trace["processes"][process]["serviceName"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            (service, span)
        })
        .collect()
}

/// A span's (or a process's) tags as `key → (type, value)`.
pub fn tags(span: &Value) -> BTreeMap<String, (String, Value)> {
    span["tags"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| {
            Some((
                t["key"].as_str()?.to_owned(),
                (t["type"].as_str().unwrap_or_default().to_owned(), t["value"].clone()),
            ))
        })
        .collect()
}

/// The value of tag `key` (panics, listing the tags, when there is none).
pub fn tag<'a>(tags: &'a BTreeMap<String, (String, Value)>, key: &str) -> &'a Value {
    tags.get(key)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("the span has no tag {key}; tags: {tags:?}"))
}
