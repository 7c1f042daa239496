use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use http::{Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};

use super::*;

#[test]
fn the_flag_takes_probe_none_or_a_list_of_plugins_and_names_them_when_wrong() {
    assert_eq!(parse("probe"), Ok(InTreePlugins::Probe));
    assert_eq!(parse("none"), Ok(InTreePlugins::Declared(Vec::new())));
    assert_eq!(
        parse("PodNodeSelector"),
        Ok(InTreePlugins::Declared(vec![Plugin::PodNodeSelector]))
    );
    assert_eq!(
        parse("PodTolerationRestriction, PodNodeSelector"),
        Ok(InTreePlugins::Declared(vec![
            Plugin::PodTolerationRestriction,
            Plugin::PodNodeSelector
        ]))
    );
    let wrong = parse("PodNodeSelector,podnodeselector").expect_err("refused");
    assert!(
        wrong.contains("\"podnodeselector\" is not an in-tree plugin")
            && wrong.contains("PodNodeSelector, PodTolerationRestriction"),
        "{wrong}"
    );
}

/// An "API server" answering every pod CREATE with `answer(namespace)`, recording the query strings.
fn server(answer: impl Fn(&str) -> (StatusCode, Value) + Send + Sync + 'static) -> (Client, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let answer = Arc::new(answer);
    let service = tower::service_fn(move |req: Request<Body>| {
        let (log, answer) = (log.clone(), answer.clone());
        async move {
            let path = req.uri().path().to_owned();
            log.lock().expect("not poisoned").push(format!(
                "{} {}?{}",
                req.method(),
                path,
                req.uri().query().unwrap_or("")
            ));
            let namespace = path.split('/').nth(4).unwrap_or_default().to_owned();
            let (code, body) = answer(&namespace);
            Response::builder()
                .status(code)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Body::from(serde_json::to_vec(&body).unwrap_or_default()))
        }
    });
    (Client::new(service, "default"), seen)
}

fn forbidden(message: &str) -> (StatusCode, Value) {
    (
        StatusCode::FORBIDDEN,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
               "message": message}),
    )
}

fn config() -> pod_director_engine::config::Config {
    pod_director_engine::testing::config("groups: {}\n")
}

fn namespace(name: &str, annotations: &[(&str, &str)]) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        name: Some(name.to_owned()),
        annotations: Some(
            annotations
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..Default::default()
    }
}

#[tokio::test]
async fn each_plugin_is_probed_once_by_a_dry_run_create_in_an_annotated_namespace_and_its_answer_read() {
    let (client, seen) = server(|namespace| match namespace {
        "team-a" => forbidden(
            "pods \"pod-director-in-tree-probe\" is forbidden: pod node label selector conflicts with its namespace \
             node label selector",
        ),
        _ => (
            StatusCode::CREATED,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pod-director-in-tree-probe"},
                   "spec": {"containers": [{"name": "probe", "image": "x"}], "tolerations": []}}),
        ),
    });
    let config = config();
    let mut scan = Scan::new(&config, None, None);
    scan.namespace(namespace(
        "team-a",
        &[("scheduler.alpha.kubernetes.io/node-selector", "pool=a")],
    ));
    scan.namespace(namespace(
        "team-b",
        &[("scheduler.alpha.kubernetes.io/tolerationsWhitelist", "[]")],
    ));
    scan.namespace(namespace(
        "team-c",
        &[("scheduler.alpha.kubernetes.io/node-selector", "pool=c")],
    ));
    detect(&client, &mut scan, &InTreePlugins::Probe, Duration::from_secs(5)).await;
    let audit = scan.finish(Duration::ZERO);
    let seen = seen.lock().expect("not poisoned").clone();
    assert_eq!(
        seen,
        [
            "POST /api/v1/namespaces/team-a/pods?&dryRun=All&fieldManager=pod-director-audit",
            "POST /api/v1/namespaces/team-b/pods?&dryRun=All&fieldManager=pod-director-audit",
        ]
    );
    assert!(matches!(
        audit.in_tree.plugins["PodNodeSelector"],
        PluginState::Running(_)
    ));
    assert!(matches!(
        audit.in_tree.plugins["PodTolerationRestriction"],
        PluginState::Absent(_)
    ));
    let holes: Vec<&str> = (audit.in_tree.namespaces.iter())
        .filter(|(_, ns)| ns.is_hole())
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(holes, ["team-b"]);
}

#[tokio::test]
async fn a_probe_rbac_refuses_leaves_the_plugin_unknown_and_its_namespaces_holes_that_say_why() {
    let (client, _) = server(|_| {
        forbidden(
            "pods is forbidden: User \"system:serviceaccount:pod-director:pod-director\" cannot create resource \
             \"pods\" in API group \"\" in the namespace \"team-a\"",
        )
    });
    let config = config();
    let mut scan = Scan::new(&config, None, None);
    scan.namespace(namespace(
        "team-a",
        &[("scheduler.alpha.kubernetes.io/node-selector", "pool=a")],
    ));
    detect(&client, &mut scan, &InTreePlugins::Probe, Duration::from_secs(5)).await;
    let audit = scan.finish(Duration::ZERO);
    let PluginState::Unknown(why) = &audit.in_tree.plugins["PodNodeSelector"] else {
        panic!("{:?}", audit.in_tree.plugins);
    };
    assert!(
        why.contains("cannot create resource \\\"pods\\\"") || why.contains("cannot create resource \"pods\""),
        "{why}"
    );
    assert!(audit.in_tree.namespaces["team-a"].is_hole());
}

#[tokio::test]
async fn declared_plugins_are_not_probed() {
    let (client, seen) = server(|_| (StatusCode::INTERNAL_SERVER_ERROR, json!({})));
    let config = config();
    let mut scan = Scan::new(&config, None, None);
    scan.namespace(namespace(
        "team-a",
        &[("scheduler.alpha.kubernetes.io/node-selector", "pool=a")],
    ));
    scan.namespace(namespace(
        "team-b",
        &[("scheduler.alpha.kubernetes.io/defaultTolerations", "[]")],
    ));
    let declared = parse("PodNodeSelector").expect("a list");
    detect(&client, &mut scan, &declared, Duration::from_secs(5)).await;
    let audit = scan.finish(Duration::ZERO);
    assert!(seen.lock().expect("not poisoned").is_empty());
    assert!(!audit.in_tree.namespaces["team-a"].is_hole());
    assert!(audit.in_tree.namespaces["team-b"].is_hole());
}
