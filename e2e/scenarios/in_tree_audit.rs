//! The silent hole on a real API server: a namespace carrying PodNodeSelector's annotation on a
//! cluster whose API server runs neither in-tree plugin (`e2e/cluster.sh` enables
//! NodeRestriction only), its pods admitted whatever the annotation says. `pod-director audit`
//! probes the API server (a dry-run pod CREATE, nothing stored), finds PodNodeSelector not
//! running, and names the namespace as a hole with its pods decided as the plugin would decide
//! their re-creation (one lacking the selector patched, one conflicting refused); declared running
//! (`--in-tree-plugins PodNodeSelector`), the same namespace is enforced and no hole.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use crate::audit::{audit, config_file};
use crate::harness::Env;
use crate::harness::k8s::{IMAGE, pod_from};
use crate::harness::process::binary;

/// The node label the namespace's annotation selects.
const POOL: &str = "e2e.pod-director.io/in-tree-pool";

fn pod(name: &str, selector: Value) -> k8s_openapi::api::core::v1::Pod {
    pod_from(json!({"metadata": {"name": name},
                    "spec": {"containers": [{"name": "app", "image": IMAGE}], "nodeSelector": selector}}))
}

/// The audit's entry for namespace `ns` among the in-tree rule's namespaces.
fn annotated<'a>(report: &'a Value, ns: &str) -> &'a Value {
    report["in_tree"]["namespaces"]
        .as_array()
        .and_then(|all| all.iter().find(|n| n["namespace"] == ns))
        .unwrap_or_else(|| panic!("namespace {ns} among the in-tree rule's: {report:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_annotated_namespace_nothing_enforces_is_reported_as_a_hole_and_the_probe_stores_nothing() {
    let env = Env::start("intree-audit").await;
    let ns = env.namespace(None).await;
    let annotation = format!("{POOL}=a");
    Api::<Namespace>::all(env.client.clone())
        .patch(
            &ns,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"scheduler.alpha.kubernetes.io/node-selector": annotation}}}),
            ),
        )
        .await
        .expect("namespace annotated");
    // Admitted as they are: no plugin runs, pod-director's compatibility is off.
    env.create_admitted_pod(&ns, &pod("lacks", json!({}))).await;
    env.create_admitted_pod(&ns, &pod("conflicts", json!({POOL: "b"})))
        .await;
    env.create_admitted_pod(&ns, &pod("complies", json!({POOL: "a"}))).await;
    let stored = env.get_pod(&ns, "lacks").await;
    assert_eq!(
        stored.spec.and_then(|s| s.node_selector),
        None,
        "the API server ignores the annotation"
    );

    let config = config_file(&env);
    let (code, report) = audit(config.path(), &[]).await;
    assert_eq!(code, 0, "{report:#}");
    let in_tree = &report["in_tree"];
    assert_eq!(in_tree["mode"], "off", "{report:#}");
    assert_eq!(in_tree["plugins"]["PodNodeSelector"]["state"], "absent", "{report:#}");
    let how = in_tree["plugins"]["PodNodeSelector"]["how"]
        .as_str()
        .unwrap_or_default();
    assert!(how.contains("was admitted"), "the dry-run probe was admitted: {how}");
    let hole = annotated(&report, &ns);
    assert_eq!(hole["hole"], true, "{hole:#}");
    assert_eq!(hole["unenforced"], json!(["PodNodeSelector"]), "{hole:#}");
    assert_eq!(hole["pods"], 3, "{hole:#}");
    assert_eq!(hole["violating_pods"], 2, "lacks and conflicts: {hole:#}");
    // The cluster-wide counts also hold the annotated namespaces other scenarios leave (those
    // not yet deleted): this namespace's share is read from the findings that name it.
    let in_namespace = |list: &str| {
        (in_tree[list].as_array().into_iter().flatten())
            .filter(|f| f["namespace"] == ns.as_str())
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(in_namespace("would_patch").len(), 1, "{report:#}");
    assert_eq!(in_namespace("would_deny").len(), 1, "{report:#}");
    let finding = |list: &str, workload: &str| {
        (in_namespace(list).into_iter())
            .find(|f| f["workload"] == workload)
            .unwrap_or_else(|| panic!("{workload} among {list}: {report:#}"))
    };
    let patched = finding("would_patch", "Pod/lacks");
    assert!(
        patched["reason"].as_str().unwrap_or_default().contains(&annotation),
        "the namespace's selector set: {patched:#}"
    );
    let refused = finding("would_deny", "Pod/conflicts");
    assert!(
        refused["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("pod node label selector conflicts with its namespace node label selector"),
        "PodNodeSelector's refusal: {refused:#}"
    );
    assert!(
        env.pods(&ns)
            .get_opt("pod-director-in-tree-probe")
            .await
            .expect("a GET")
            .is_none(),
        "the probe is a dry run: nothing stored"
    );
    let warnings = in_tree["warnings"].as_array().expect("warnings");
    assert!(
        warnings.iter().any(|w| w.as_str().is_some_and(|w| w.contains(&ns)
            && w.contains("no admission plugin enforces on this cluster (inTreePlugins is off)")
            && w.contains("2 running pods there violate them"))),
        "{warnings:?}"
    );

    // The text report (docs/src/audit.md shows it): the hole, its pods, the workloads behind them.
    let config_path = config.path().to_owned();
    let text = tokio::task::spawn_blocking(move || {
        std::process::Command::new(binary())
            .args(["audit", "--quiet", "--request-timeout", "10s", "--config"])
            .arg(config_path)
            .output()
    })
    .await
    .expect("joined")
    .expect("pod-director audit runs");
    let text = String::from_utf8_lossy(&text.stdout);
    eprintln!("{text}");
    assert!(
        text.contains(&format!(
            "hole: {ns}: {}={annotation}: enforced by nothing; 2 of 3 running pods violate",
            "scheduler.alpha.kubernetes.io/node-selector"
        )),
        "{text}"
    );

    // Declared running: the namespace is enforced, and nothing is probed.
    let (_, declared) = audit(config.path(), &["--in-tree-plugins", "PodNodeSelector"]).await;
    let enforced = annotated(&declared, &ns);
    assert_eq!(enforced["hole"], false, "{enforced:#}");
    assert_eq!(enforced["enforced_by"], json!(["PodNodeSelector"]));
    assert_eq!(
        declared["in_tree"]["plugins"]["PodNodeSelector"],
        json!({"state": "running", "how": "declared: --in-tree-plugins"})
    );
}
