//! pod-director run as the chart's ServiceAccount (local mode): the chart's ClusterRole and
//! ClusterRoleBinding rendered with the scenario's `--set`s and applied, and a kubeconfig that
//! impersonates the ServiceAccount, so that every request the server makes is authorized by
//! exactly the RBAC the chart grants — a grant it lacks fails the scenario, not a review.

use std::path::{Path, PathBuf};

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::Kubeconfig;

use super::k8s::eventually;
use super::{Settings, apply_json, chart, ensure_namespace};

/// The chart's ServiceAccount as a user name.
pub fn service_account_user(settings: &Settings) -> String {
    format!("system:serviceaccount:{}:{}", settings.namespace, settings.fullname)
}

/// Applies the chart's RBAC (rendered with `sets`: a ClusterRole and a ClusterRoleBinding, both named
/// `settings.fullname`) and waits until the authorizer grants it.
pub async fn apply_chart_rbac(client: &Client, settings: &Settings, sets: &[String]) {
    ensure_namespace(client, &settings.namespace).await;
    for object in chart::render_rbac_with(settings, sets) {
        match object["kind"].as_str() {
            Some("ClusterRole") => apply_json(Api::<ClusterRole>::all(client.clone()), object).await,
            Some("ClusterRoleBinding") => apply_json(Api::<ClusterRoleBinding>::all(client.clone()), object).await,
            other => panic!("unexpected object in the chart's rbac.yaml: {other:?}"),
        }
    }
    let user = service_account_user(settings);
    eventually("the authorizer to see the chart's ClusterRole", || async {
        allowed(client, &user, "", "namespaces", "watch").await.then_some(())
    })
    .await;
}

/// Deletes the ClusterRoleBinding and ClusterRole named `name` (what [`apply_chart_rbac`] applied).
pub async fn delete_chart_rbac(client: &Client, name: &str) {
    let dp = DeleteParams::default();
    let _ = Api::<ClusterRoleBinding>::all(client.clone()).delete(name, &dp).await;
    let _ = Api::<ClusterRole>::all(client.clone()).delete(name, &dp).await;
}

async fn allowed(client: &Client, user: &str, group: &str, resource: &str, verb: &str) -> bool {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.to_owned()),
            groups: Some(vec![
                "system:serviceaccounts".to_owned(),
                "system:authenticated".to_owned(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                group: Some(group.to_owned()),
                resource: Some(resource.to_owned()),
                verb: Some(verb.to_owned()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .expect("a SubjectAccessReview")
        .status
        .is_some_and(|s| s.allowed)
}

/// A copy of `kubeconfig` (in `dir`) whose current user impersonates `user` (`as:`), with the groups
/// a ServiceAccount's token would carry.
pub fn impersonating(kubeconfig: &Path, user: &str, namespace: &str, dir: &Path, tag: &str) -> PathBuf {
    let mut config = Kubeconfig::read_from(kubeconfig).expect("a readable kubeconfig");
    let context_name = config.current_context.clone().expect("a current context");
    let user_name = config
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.user.clone())
        .expect("the current context names a user")
        .unwrap_or_default();
    for named in &mut config.auth_infos {
        if named.name == user_name
            && let Some(auth) = named.auth_info.as_mut()
        {
            auth.impersonate = Some(user.to_owned());
            auth.impersonate_groups = Some(vec![
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".to_owned(),
            ]);
        }
    }
    let path = dir.join(format!("kubeconfig-{tag}"));
    std::fs::write(&path, serde_json::to_vec(&config).expect("kubeconfig serializes")).expect("kubeconfig written");
    path
}
