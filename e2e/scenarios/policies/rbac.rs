//! The chart's RBAC for admission policies, asked of the real authorizer as the chart's
//! ServiceAccount: nothing while `webhook.admissionPolicies` is off (the default); when on, a
//! read-only list, and writes only to the objects named for the configured groups — another
//! team's policies, or a policy under another name, stay out of reach. (That the server needs
//! no more is shown by the other scenarios of this module, which run it with exactly this RBAC.)

use crate::harness::identity::{apply_chart_rbac, delete_chart_rbac};
use crate::harness::k8s::eventually;
use crate::harness::{ADMISSION_POLICY_KINDS, Env};

const GROUP: &str = "admissionregistration.k8s.io";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_s_rbac_lets_the_server_write_only_the_admission_policies_named_for_its_groups() {
    let Some(env) = Env::start_local("policy-rbac", "applies the chart's RBAC rendered with other values").await else {
        return;
    };
    let may = |verb: &'static str, plural: &'static str, name: Option<&'static str>| {
        let env = &env;
        async move { env.service_account_may(GROUP, plural, verb, None, name).await }
    };
    let own = Some("pod-director-e2e-policy-reject");
    let other = Some("someone-elses-policy");

    apply_chart_rbac(&env.client, &env.settings, &[]).await;
    for (_, plural) in ADMISSION_POLICY_KINDS {
        for verb in ["list", "watch", "create"] {
            assert!(!may(verb, plural, None).await, "off by default: no {verb} on {plural}");
        }
        for verb in ["get", "create", "patch", "delete"] {
            assert!(
                !may(verb, plural, own).await,
                "off by default: no {verb} on {plural}/{own:?}"
            );
        }
    }

    apply_chart_rbac(
        &env.client,
        &env.settings,
        &["webhook.admissionPolicies=true".to_owned()],
    )
    .await;
    eventually("the authorizer to see the admission policy grants", || async {
        may("list", ADMISSION_POLICY_KINDS[0].1, None).await.then_some(())
    })
    .await;
    for (_, plural) in ADMISSION_POLICY_KINDS {
        assert!(may("list", plural, None).await, "list {plural}");
        // Server-side apply of a missing object is also authorized as `create` of that name.
        for verb in ["get", "create", "patch", "delete"] {
            assert!(may(verb, plural, own).await, "{verb} {plural}/{own:?}");
        }
        for verb in ["get", "create", "patch", "update", "delete"] {
            assert!(!may(verb, plural, other).await, "no {verb} on {plural}/{other:?}");
        }
        // A plain create names no object: never allowed, nor writes to every object at once.
        for verb in ["create", "deletecollection", "update", "patch"] {
            assert!(!may(verb, plural, None).await, "no {verb} on every {plural}");
        }
    }
    delete_chart_rbac(&env.client, &env.settings.fullname).await;
}
