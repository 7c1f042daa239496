//! An in-process API server for the audit: a [`kube::Client`] whose requests never leave the
//! process, answered by generating the lists the audit sends page by page (`limit` / `continue`,
//! the token being the offset), so the audit's memory can be measured at any number of pods
//! without a cluster (`cargo bench --bench audit_memory`).
//!
//! The cluster it serves: `namespaces` namespaces `pd-audit-NNN` selecting the group `bench`, each
//! with `deployments` Deployments (one ReplicaSet each, owning the namespace's replicas),
//! [`PagedCluster::BARE_PODS`] bare pods, and `pods` pods in all spread evenly over the namespaces. Each pod is
//! as the API server sends a scheduled, running pod: two containers, status, managed fields
//! (≈ 4 KB of JSON). Deployment 0 of each namespace and every other bare pod ask for another pool
//! (enforce would refuse them); the rest lack the group's placement (enforce would patch them).

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::Full;
use serde_json::{Value, json};

/// Bare pods per namespace (each its own workload), whatever the pod count.
const BARE_PODS: usize = PagedCluster::BARE_PODS;

/// The shape of the generated cluster.
#[derive(Debug, Clone, Copy)]
pub struct PagedCluster {
    pub namespaces: usize,
    pub deployments: usize,
    /// Pods in all namespaces.
    pub pods: usize,
}

impl PagedCluster {
    /// Bare pods per namespace (each its own workload), whatever the pod count.
    pub const BARE_PODS: usize = 10;

    /// The configuration the generated cluster is audited with.
    pub const CONFIG: &str = "\
namespaceLabel: pod-director/group
groups:
  bench:
    mode: dryRun
    nodeSelector: {node-pool: bench}
    tolerations:
      - {key: dedicated, operator: Equal, value: bench, effect: NoSchedule}
";

    /// A client whose every request this cluster answers in-process.
    pub fn client(self) -> kube::Client {
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let answer = self.answer(request.uri());
            async move { Ok::<_, Infallible>(answer) }
        });
        kube::Client::new(service, "default")
    }

    fn pods_in(&self, namespace: usize) -> usize {
        let each = self.pods / self.namespaces.max(1);
        let rest = self.pods % self.namespaces.max(1);
        each + usize::from(namespace < rest)
    }

    fn answer(&self, uri: &http::Uri) -> http::Response<Full<Bytes>> {
        let query = |key: &str| {
            uri.query().into_iter().flat_map(|q| q.split('&')).find_map(|pair| {
                let (k, v) = pair.split_once('=')?;
                (k == key).then(|| v.to_owned())
            })
        };
        let limit = query("limit")
            .and_then(|l| l.parse::<usize>().ok())
            .unwrap_or(usize::MAX);
        let offset = query("continue").and_then(|c| c.parse::<usize>().ok()).unwrap_or(0);
        let parts: Vec<&str> = uri.path().trim_matches('/').split('/').collect();
        let listed = match parts.as_slice() {
            ["api", "v1", "namespaces"] => Some(("NamespaceList", "v1", self.namespaces + 1)),
            ["api", "v1", "namespaces", ns, "pods"] => namespace_index(ns).map(|n| ("PodList", "v1", self.pods_in(n))),
            ["apis", "apps", "v1", "namespaces", ns, "deployments"] => {
                namespace_index(ns).map(|_| ("DeploymentList", "apps/v1", self.deployments))
            }
            ["apis", "apps", "v1", "namespaces", ns, "replicasets"] => {
                namespace_index(ns).map(|_| ("ReplicaSetList", "apps/v1", self.deployments))
            }
            ["apis", "apps", "v1", "namespaces", _, "statefulsets" | "daemonsets"] => Some(("List", "apps/v1", 0)),
            ["apis", "batch", "v1", "namespaces", _, "jobs" | "cronjobs"] => Some(("List", "batch/v1", 0)),
            _ => None,
        };
        let Some((kind, api_version, total)) = listed else {
            let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "message": format!("the paged cluster does not serve {}", uri.path()), "reason": "NotFound", "code": 404});
            let mut response = http::Response::new(Full::new(Bytes::from(status.to_string())));
            *response.status_mut() = http::StatusCode::NOT_FOUND;
            return response;
        };
        let end = total.min(offset.saturating_add(limit));
        let mut body = format!(r#"{{"kind":"{kind}","apiVersion":"{api_version}","metadata":{{"resourceVersion":"7""#);
        if end < total {
            body.push_str(&format!(r#","continue":"{end}""#));
        }
        body.push_str(r#"},"items":["#);
        for i in offset..end {
            if i > offset {
                body.push(',');
            }
            let item = match parts.as_slice() {
                [.., "namespaces"] => namespace(i),
                [.., ns, "pods"] => self.pod(ns, i),
                [.., ns, "deployments"] => workload(ns, i, false),
                [.., ns, "replicasets"] => workload(ns, i, true),
                _ => Value::Null,
            };
            body.push_str(&item.to_string());
        }
        body.push_str("]}");
        http::Response::new(Full::new(Bytes::from(body)))
    }

    fn pod(&self, namespace: &str, i: usize) -> Value {
        let bare = i < BARE_PODS;
        let deployment = i % self.deployments.max(1);
        let (name, owners, refused) = if bare {
            (format!("debug-{i}"), json!([]), i.is_multiple_of(2))
        } else {
            (
                format!("web-{deployment}-5f7c9d-{i:06}"),
                json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("web-{deployment}-5f7c9d"),
                    "uid": format!("rs-{namespace}-{deployment}"), "controller": true, "blockOwnerDeletion": true}]),
                deployment == 0,
            )
        };
        let mut spec = pod_spec(refused);
        spec["nodeName"] = json!(format!("node-{:04}", i % 1000));
        spec["schedulerName"] = json!("default-scheduler");
        spec["serviceAccountName"] = json!("default");
        let conditions: Vec<Value> = ["Initialized", "Ready", "ContainersReady", "PodScheduled"]
            .iter()
            .map(|t| json!({"type": t, "status": "True", "lastTransitionTime": "2026-12-05T10:00:02Z", "lastProbeTime": null}))
            .collect();
        let containers: Vec<Value> = ["app", "sidecar"]
            .iter()
            .map(|c| {
                json!({"name": c, "ready": true, "restartCount": 0, "image": "registry.invalid/app:1.2.3",
                "imageID": "", "started": true, "state": {"running": {"startedAt": "2026-12-05T10:00:02Z"}}})
            })
            .collect();
        json!({
            "metadata": {
                "name": name, "namespace": namespace, "uid": format!("pod-{namespace}-{i}"),
                "resourceVersion": format!("{}", 1000 + i), "creationTimestamp": "2026-12-05T10:00:00Z",
                "labels": {"app": "web", "pod-template-hash": "5f7c9d", "team": "bench"},
                "ownerReferences": owners,
                "managedFields": [
                    {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                     "time": "2026-12-05T10:00:00Z", "fieldsType": "FieldsV1",
                     "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}},
                        "f:ownerReferences": {".": {}}}, "f:spec": {"f:containers": {}, "f:nodeSelector": {}}}},
                    {"manager": "kwok", "operation": "Update", "apiVersion": "v1", "subresource": "status",
                     "time": "2026-12-05T10:00:02Z", "fieldsType": "FieldsV1",
                     "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {}, "f:hostIP": {},
                        "f:phase": {}, "f:podIP": {}, "f:startTime": {}}}}
                ]
            },
            "spec": spec,
            "status": {
                "phase": "Running", "hostIP": "127.0.0.1", "podIP": format!("10.0.{}.{}", i / 250 % 250, i % 250),
                "startTime": "2026-12-05T10:00:01Z", "qosClass": "Burstable",
                "conditions": conditions,
                "containerStatuses": containers
            }
        })
    }
}

fn namespace_index(name: &str) -> Option<usize> {
    name.strip_prefix("pd-audit-")?.parse().ok()
}

fn namespace(i: usize) -> Value {
    if i == 0 {
        return json!({"metadata": {"name": "kube-system", "uid": "ns-kube-system"}});
    }
    let name = format!("pd-audit-{:03}", i - 1);
    json!({"metadata": {"name": name, "uid": format!("ns-{name}"), "labels": {"pod-director/group": "bench"}}})
}

fn pod_spec(refused: bool) -> Value {
    let env: Vec<Value> = (0..8)
        .map(|i| json!({"name": format!("SETTING_{i}"), "value": format!("value-{i}-of-a-typical-setting")}))
        .collect();
    let container = |name: &str| {
        json!({
            "name": name, "image": "registry.invalid/app:1.2.3", "imagePullPolicy": "IfNotPresent",
            "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
            "env": env,
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080, "scheme": "HTTP"}, "periodSeconds": 5},
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
        })
    };
    let mut spec = json!({"containers": [container("app"), container("sidecar")], "restartPolicy": "Always",
        "dnsPolicy": "ClusterFirst", "terminationGracePeriodSeconds": 30});
    if refused {
        spec["nodeSelector"] = json!({"node-pool": "elsewhere"});
    }
    spec
}

/// Deployment `i` of `namespace`, or its ReplicaSet (owned by it).
fn workload(namespace: &str, i: usize, replica_set: bool) -> Value {
    let deployment = format!("web-{i}");
    let (name, uid, owners) = if replica_set {
        (
            format!("{deployment}-5f7c9d"),
            format!("rs-{namespace}-{i}"),
            json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment,
                "uid": format!("deploy-{namespace}-{i}"), "controller": true}]),
        )
    } else {
        (deployment.clone(), format!("deploy-{namespace}-{i}"), json!([]))
    };
    json!({
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "ownerReferences": owners},
        "spec": {
            "selector": {"matchLabels": {"app": "web", "deployment": deployment}},
            "template": {"metadata": {"labels": {"app": "web", "deployment": deployment}}, "spec": pod_spec(i == 0)}
        }
    })
}
