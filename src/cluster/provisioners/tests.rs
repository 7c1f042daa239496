use std::time::Duration;

use http::{Request, Response, StatusCode};
use kube::client::Body;
use serde_json::json;

use super::*;

/// An "API server" that serves karpenter.sh/v1 NodePools but fails every list of them (500).
fn failing_lists() -> Client {
    let service = tower::service_fn(|req: Request<Body>| async move {
        let (code, body) = if req.uri().path() == "/apis/karpenter.sh/v1" {
            (
                StatusCode::OK,
                json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "karpenter.sh/v1",
                           "resources": [{"name": "nodepools", "singularName": "nodepool", "namespaced": false,
                                          "kind": "NodePool", "verbs": ["get", "list", "watch"]}]}),
            )
        } else {
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "InternalError",
                           "code": 500, "message": "conversion webhook unavailable"}),
            )
        };
        Response::builder()
            .status(code)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Body::from(serde_json::to_vec(&body).unwrap_or_default()))
    });
    Client::new(service, "default")
}

#[tokio::test]
async fn a_source_whose_lists_fail_does_not_hold_readiness() {
    let store = Arc::new(ProvisionerStore::new());
    store.expect(1);
    let task = tokio::spawn(follow(
        SOURCES[0],
        failing_lists(),
        store.clone(),
        Duration::from_secs(60),
    ));
    let started = std::time::Instant::now();
    while !store.is_ready() && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    task.abort();
    assert!(store.is_ready(), "ready although every list fails");
    assert!(store.is_empty(), "counting none");
}
