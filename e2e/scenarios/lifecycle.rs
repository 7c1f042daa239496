//! pod-director's life: a namespace it has not seen yet, config reload, certificate
//! rotation, and being down.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::json;

use crate::fixtures::{Placement, workload};
use crate::harness::k8s::pod_from;
use crate::harness::{Env, Options, Target, certs, notice};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_created_right_after_its_namespace_is_placed_through_a_live_lookup() {
    // Locally, pod-director's connection to the API server gets 400 ms of latency
    // each way: the new namespace's watch event reaches its cache well after the
    // API server asks about the namespace's first pod, so the answer must come
    // from the live GET (a cache miss), whatever the timing of the machine.
    let latency = Duration::from_millis(400);
    let env = Env::start_with(
        "fresh",
        Options {
            api_latency: Some(latency),
            ..Options::default()
        },
    )
    .await;
    let ns = env.create_namespace(Some("e2e-enforce")).await;
    // The pod may not wait for the controller-manager's "default" ServiceAccount.
    env.create_service_account(&ns, "e2e").await;
    let mut pod = workload("first");
    pod.spec.as_mut().expect("a spec").service_account_name = Some("e2e".to_owned());
    env.create_admitted_pod(&ns, &pod).await;

    let stored = env.get_pod(&ns, "first").await;
    assert_eq!(
        Placement::of(&stored),
        Placement::enforced(),
        "the group was known at once"
    );
    let mutate = env.decision(&ns, "first", "mutate").await;
    assert_eq!(mutate.decision(), "patched");
    assert_eq!(mutate.text("placement.group"), "e2e-enforce");

    if env.settings.target == Target::Local {
        let misses = env
            .logs
            .messages("namespace not cached yet, reading it from the API server")
            .await;
        assert!(
            misses.iter().any(|l| l["namespace"] == ns.as_str()),
            "pod-director read namespace {ns} live (cache miss); {}",
            env.log_hint()
        );
    } else {
        notice("NOTE fresh namespace in cluster mode: placement checked; the cache miss is not forced there");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_reload_flips_a_group_to_enforce_without_a_restart() {
    let Some(mut env) = Env::start_local(
        "reload",
        "edits pod-director's config file (on a cluster: a ConfigMap update, synced by the kubelet within a minute)",
    )
    .await
    else {
        return;
    };
    let ns = env.namespace(Some("e2e-dryrun")).await;

    env.create_admitted_pod(&ns, &workload("before")).await;
    assert_eq!(Placement::of(&env.get_pod(&ns, "before").await), Placement::submitted());
    let before = env.decision(&ns, "before", "mutate").await;
    assert_eq!(before.decision(), "would_patch");
    let old_revision = before.text("config.revision").to_owned();

    let pid = env.pod_director().pid();
    env.edit_config(|c| c["groups"]["e2e-dryrun"]["mode"] = json!("enforce"));
    let new_revision = env.reloaded_from(&old_revision).await;
    assert_ne!(new_revision, old_revision);

    env.create_admitted_pod(&ns, &workload("after")).await;
    assert_eq!(Placement::of(&env.get_pod(&ns, "after").await), Placement::enforced());
    let after = env.decision(&ns, "after", "mutate").await;
    assert_eq!(after.decision(), "patched");
    assert_eq!(after.text("placement.mode"), "enforce");
    assert_eq!(after.text("config.revision"), new_revision);
    assert_eq!(after.patch(), before.patch(), "enforce applies what dryRun announced");
    assert!(env.pod_director().is_running(), "no restart");
    assert_eq!(env.pod_director().pid(), pid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotating_the_serving_certificate_during_pod_creation_loses_no_request() {
    let Some(mut env) = Env::start_local(
        "rotate",
        "swaps pod-director's certificate files (on a cluster, cert-manager renews the Secret)",
    )
    .await
    else {
        return;
    };
    let ns = env.namespace(Some("e2e-enforce")).await;
    let webhook_dir = env.settings.state_dir.clone().expect("a state dir").join("webhook");
    let ca = std::fs::read(webhook_dir.join("ca.crt")).expect("the webhook CA");

    // Two clients creating pods back to back in an enforce group (failurePolicy
    // Fail: a failed TLS handshake would fail a create).
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for writer in 0..2 {
        let (client, ns, stop) = (env.client.clone(), ns.clone(), stop.clone());
        writers.push(tokio::spawn(async move {
            let mut results = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let name = format!("load-{writer}-{i}");
                let created = crate::harness::k8s::create_pod(&client, &ns, &workload(&name), false).await;
                results.push((name, created.status, created.error_message().map(str::to_owned)));
                i += 1;
            }
            results
        }));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;

    let rotated = certs::issue(&webhook_dir, "pod-director-e2e-webhook-rotated");
    env.pod_director().write_tls(&rotated.cert, &rotated.key);
    env.logged("serving certificate reloaded", |_| true).await;
    let served = served_certificate(env.pod_director().addr, &ca).await;
    assert_eq!(
        served,
        certs::first_der(&rotated.cert),
        "new handshakes get the new certificate"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::SeqCst);

    let mut results = Vec::new();
    for writer in writers {
        results.extend(writer.await.expect("the writer finished"));
    }
    let failed: Vec<_> = results.iter().filter(|(_, status, _)| !status.is_success()).collect();
    assert!(failed.is_empty(), "creates failed during rotation: {failed:?}");
    assert!(results.len() >= 10, "only {} pods created", results.len());
    let pods = env.pods(&ns).list(&Default::default()).await.expect("pods listed");
    let load: Vec<_> = pods
        .items
        .iter()
        .filter(|p| p.metadata.name.as_deref().is_some_and(|n| n.starts_with("load-")))
        .collect();
    assert_eq!(load.len(), results.len());
    for pod in load {
        assert_eq!(
            Placement::of(pod),
            Placement::enforced(),
            "{:?} was placed",
            pod.metadata.name
        );
    }
    println!("{} pods created while rotating, none lost", results.len());
}

/// The certificate pod-director presents to a new TLS connection.
async fn served_certificate(addr: std::net::SocketAddr, ca_pem: &[u8]) -> Vec<u8> {
    let client = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem).expect("the CA"))
        .tls_info(true)
        .pool_max_idle_per_host(0)
        .build()
        .expect("an HTTPS client");
    let response = client
        .get(format!("https://{addr}/mutate"))
        .send()
        .await
        .expect("an HTTPS answer from pod-director");
    response
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|info| info.peer_certificate())
        .expect("the peer certificate")
        .to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_pod_director_down_dry_run_pods_are_admitted_and_enforce_pods_refused() {
    let Some(mut env) = Env::start_local(
        "down",
        "stops pod-director (on a cluster: scale the Deployment to 0; scripts/chart-test.sh outage does)",
    )
    .await
    else {
        return;
    };
    let dry = env.namespace(Some("e2e-dryrun")).await;
    let enforced = env.namespace(Some("e2e-enforce")).await;
    env.pod_director().stop();

    let created = env.create_admitted_pod(&dry, &workload("web")).await;
    assert_eq!(
        Placement::of(&created.pod()),
        Placement::submitted(),
        "failurePolicy Ignore: admitted, untouched"
    );

    let refused = env.create_pod(&enforced, &workload("web")).await;
    assert_eq!(
        refused.status,
        http::StatusCode::INTERNAL_SERVER_ERROR,
        "failurePolicy Fail: {refused:?}"
    );
    env.assert_failed_calling(&refused, "enforce");
    assert!(env.pods(&enforced).get_opt("web").await.expect("GET pod").is_none());

    // Not even a dry run gets through.
    let dry_run = env
        .create_pod_dry_run(
            &enforced,
            &pod_from(json!({"metadata": {"name": "probe"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})),
        )
        .await;
    assert_eq!(dry_run.status, http::StatusCode::INTERNAL_SERVER_ERROR, "{dry_run:?}");
}
