//! Kubernetes helpers: pods as the scenarios create them, a pod create that keeps
//! what kube-rs' typed API drops (HTTP status, `Warning` headers), waiting.

use std::time::Duration;

use http_body_util::BodyExt as _;
use k8s_openapi::api::core::v1::{Namespace, NodeSelectorTerm, Pod, ServiceAccount, Toleration};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::PATIENCE;

/// Image of every test pod: never pulled (no kubelet locally; Pending on kind).
pub const IMAGE: &str = "registry.invalid/pause:3";
/// Prefix of the tolerations the API server's DefaultTolerationSeconds plugin adds.
pub const BUILT_IN_TOLERATIONS: &str = "node.kubernetes.io/";

/// A plain pod: one container, no placement.
pub fn pod(name: &str) -> Pod {
    pod_from(json!({
        "metadata": {"name": name, "labels": {"app": "e2e"}},
        "spec": {"containers": [{"name": "app", "image": IMAGE}]}
    }))
}

/// A pod from its JSON.
pub fn pod_from(value: Value) -> Pod {
    serde_json::from_value(value).expect("a valid Pod")
}

/// The pod's tolerations except those the API server itself adds.
pub fn own_tolerations(pod: &Pod) -> Vec<Toleration> {
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|t| !t.key.as_deref().unwrap_or_default().starts_with(BUILT_IN_TOLERATIONS))
        .collect()
}

/// The pod's required node-affinity terms.
pub fn required_terms(pod: &Pod) -> Vec<NodeSelectorTerm> {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref())
        .map(|r| r.node_selector_terms.clone())
        .unwrap_or_default()
}

/// The answer to a pod create.
#[derive(Debug)]
pub struct Created {
    pub status: http::StatusCode,
    /// The stored (or, with dryRun, would-be stored) pod, or a `Status`.
    pub body: Value,
    /// The `Warning` headers' texts, in order.
    pub warnings: Vec<String>,
}

impl Created {
    /// The pod in the answer (panics when the create failed).
    pub fn pod(&self) -> Pod {
        assert!(
            self.status.is_success(),
            "the pod was not created: {} {}",
            self.status,
            self.body
        );
        serde_json::from_value(self.body.clone()).expect("the answer is a Pod")
    }

    /// The `Status` message of a failed create.
    pub fn error_message(&self) -> Option<&str> {
        (self.body["kind"] == "Status").then(|| self.body["message"].as_str().unwrap_or_default())
    }
}

/// The text of a `Warning: 299 - "text"` header (RFC 7234 quoting).
pub fn warning_text(header: &[u8]) -> String {
    let header = String::from_utf8_lossy(header);
    let quoted = match (header.find('"'), header.rfind('"')) {
        (Some(start), Some(end)) if end > start => &header[start + 1..end],
        _ => return header.into_owned(),
    };
    let mut text = String::with_capacity(quoted.len());
    let mut chars = quoted.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(escaped) = chars.next() {
                text.push(escaped);
            }
        } else {
            text.push(c);
        }
    }
    text
}

/// POST a pod, optionally with `dryRun=All`, through kube-rs' raw `Client::send`
/// (the typed API hides the `Warning` headers admission webhooks add).
pub async fn create_pod(client: &Client, namespace: &str, pod: &Pod, dry_run: bool) -> Created {
    let params = PostParams {
        dry_run,
        field_manager: None,
    };
    let request = kube::core::Request::new(format!("/api/v1/namespaces/{namespace}/pods"))
        .create(&params, serde_json::to_vec(pod).expect("a pod serializes"))
        .expect("a create request");
    let response = client
        .send(request.map(kube::client::Body::from))
        .await
        .unwrap_or_else(|e| panic!("POST pod to {namespace}: {e}"));
    let status = response.status();
    let warnings = response
        .headers()
        .get_all(http::header::WARNING)
        .iter()
        .map(|v| warning_text(v.as_bytes()))
        .collect();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("the answer's body")
        .to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
    Created { status, body, warnings }
}

/// Waits until ServiceAccount `namespace/name` exists (the controller-manager
/// creates `default` about a second after the namespace; pods need it).
pub async fn wait_for_service_account(client: &Client, namespace: &str, name: &str) {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let what = format!("ServiceAccount {namespace}/{name} (is the controller-manager running?)");
    eventually(&what, || async {
        match api.get_opt(name).await {
            Ok(found) => found,
            Err(e) => {
                println!("waiting for ServiceAccount {namespace}/{name}: {e}");
                None
            }
        }
    })
    .await;
}

/// Merge-patches `labels` (a `null` value removes the label) into namespace `name`.
pub async fn label_namespace(client: &Client, name: &str, labels: Value) -> Result<Namespace, kube::Error> {
    let patch = json!({"metadata": {"labels": labels}});
    Api::<Namespace>::all(client.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
}

/// A client acting as `user` in `groups` (none: only the user; the suite's admin may impersonate).
pub async fn impersonating(user: &str, groups: &[&str]) -> Client {
    let mut config = kube::Config::infer().await.expect("a kubeconfig");
    config.auth_info.impersonate = Some(user.to_owned());
    if !groups.is_empty() {
        config.auth_info.impersonate_groups = Some(groups.iter().map(|g| (*g).to_owned()).collect());
    }
    Client::try_from(config).expect("an impersonating client")
}

/// Polls `check` every 200 ms until it returns `Some`, for at most `PATIENCE`.
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {PATIENCE:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warning_headers_are_unquoted() {
        assert_eq!(
            warning_text(br#"299 - "pod-director ci: would set x""#),
            "pod-director ci: would set x"
        );
        assert_eq!(
            warning_text(br#"299 - "nodeSelector[\"pool\"]: missing""#),
            r#"nodeSelector["pool"]: missing"#
        );
        assert_eq!(warning_text("299 - \"cut…\"".as_bytes()), "cut…");
    }
}
