//! A small mutating admission webhook served by the test process itself, over
//! HTTPS with a certificate from a CA of its own, to play "another webhook" that
//! changes pods after pod-director.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

use pod_director_testkit::pki::Pki;

/// Given the pod (as JSON), the JSON Patch to answer with (`None`: no change).
pub type Handler = Arc<dyn Fn(&Value) -> Option<Value> + Send + Sync>;

/// A running test webhook; stops on drop.
pub struct Stub {
    /// `https://HOST:PORT`
    pub url: String,
    pub ca_pem: String,
    calls: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Stub {
    /// Serves `handler` on `host` (an address of this machine the API server can reach).
    pub async fn start(host: IpAddr, handler: Handler) -> Stub {
        let (ca_pem, acceptor) = tls(host);
        let listener = TcpListener::bind(SocketAddr::new(host, 0))
            .await
            .unwrap_or_else(|e| panic!("the test webhook cannot listen on {host}: {e}"));
        let addr = listener.local_addr().expect("bound address");
        let calls = Arc::new(Mutex::new(Vec::new()));
        let seen = calls.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let (acceptor, handler, seen) = (acceptor.clone(), handler.clone(), seen.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else { return };
                    let service = service_fn(move |request: http::Request<hyper::body::Incoming>| {
                        let (handler, seen) = (handler.clone(), seen.clone());
                        async move {
                            let body = request
                                .into_body()
                                .collect()
                                .await
                                .map(|b| b.to_bytes())
                                .unwrap_or_default();
                            let answer = review(&body, &handler, &seen);
                            Ok::<_, Infallible>(
                                http::Response::builder()
                                    .header(http::header::CONTENT_TYPE, "application/json")
                                    .body(Full::new(Bytes::from(answer)))
                                    .expect("a response"),
                            )
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        Stub {
            url: format!("https://{addr}"),
            ca_pem,
            calls,
            task,
        }
    }

    /// The names of the pods it was asked about, in order.
    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A MutatingWebhookConfiguration calling this webhook for pods created in
    /// `namespace`. Mutating webhooks are called in the order of their
    /// configurations' names: name it to sort after pod-director's.
    pub fn configuration(&self, name: &str, namespace: &str, reinvocation: &str) -> MutatingWebhookConfiguration {
        serde_json::from_value(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{
                "name": format!("{name}.e2e.pod-director.io"),
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "timeoutSeconds": 5,
                "failurePolicy": "Fail",
                "reinvocationPolicy": reinvocation,
                "clientConfig": {
                    "url": format!("{}/mutate", self.url),
                    "caBundle": base64::engine::general_purpose::STANDARD.encode(&self.ca_pem),
                },
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "rules": [{
                    "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                    "resources": ["pods"], "scope": "Namespaced",
                }],
            }],
        }))
        .expect("a valid MutatingWebhookConfiguration")
    }
}

impl Drop for Stub {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Answers one AdmissionReview body.
fn review(body: &[u8], handler: &Handler, seen: &Mutex<Vec<String>>) -> Vec<u8> {
    let review: AdmissionReview<DynamicObject> = match serde_json::from_slice(body) {
        Ok(review) => review,
        Err(e) => return to_wire(AdmissionResponse::invalid(e)),
    };
    let request: AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(request) => request,
        Err(e) => return to_wire(AdmissionResponse::invalid(e)),
    };
    seen.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(request.name.clone());
    let mut response = AdmissionResponse::from(&request);
    let object = request
        .object
        .as_ref()
        .and_then(|o| serde_json::to_value(o).ok())
        .unwrap_or(Value::Null);
    if let Some(patch) = handler(&object) {
        let patch: json_patch::Patch = serde_json::from_value(patch).expect("the handler returns a JSON Patch");
        response = response.with_patch(patch).expect("the patch serializes");
    }
    to_wire(response)
}

/// The review of `response`, serialized as pod-director does it: `response.patch` as base64 (kube-rs#1781).
fn to_wire(response: AdmissionResponse) -> Vec<u8> {
    pod_director::admission::to_wire(response.into_review()).expect("the review serializes")
}

/// A CA of its own and a serving certificate for `host`: (CA PEM, acceptor).
fn tls(host: IpAddr) -> (String, TlsAcceptor) {
    let ca = Pki::named("pod-director e2e test webhook CA");
    let leaf = ca.leaf_for("pod-director e2e test webhook", &[&host.to_string()]);
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(pod_director::server::tls_provider())
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der.into()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf.key_der)),
        )
        .expect("a TLS server config");
    (ca.ca_pem(), TlsAcceptor::from(Arc::new(config)))
}
