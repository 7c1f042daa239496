use std::time::Duration;

use super::*;
use crate::cluster::audit::continuous::ScanResult;
use crate::cluster::nodes::NodeLookupResult;
use crate::cluster::webhooks::ReconcileResult;
use crate::server::{ConnectionTimeout, Rejection, ReloadResult};
use pod_director_engine::config::{Config, Mode};
use pod_director_engine::placement::{Decision, Outcome, Webhook};

fn outcome(group: Option<&str>, mode: Option<Mode>, decision: Decision) -> Outcome {
    let mut outcome = Outcome::new(Webhook::Mutate, decision);
    outcome.group = group.map(str::to_owned);
    outcome.mode = mode;
    outcome
}

#[test]
fn the_text_output_names_every_metric_with_its_labels() {
    let metrics = Metrics::register();
    metrics.admission.observe_decision(
        &outcome(Some("ci"), Some(Mode::DryRun), Decision::WouldPatch),
        Duration::from_millis(3),
    );
    metrics
        .admission
        .observe_decision(&outcome(None, None, Decision::Skipped), Duration::from_micros(200));
    metrics.reloads.config_reloaded(ReloadResult::Success);
    metrics.reloads.config_reloaded(ReloadResult::Error);
    metrics.reloads.tls_reloaded(ReloadResult::Success);
    metrics.namespaces.set_namespace_cache_size(42);
    metrics.orphans.set_orphaned_groups(&[("old".to_owned(), 3)].into());
    metrics.reconciles.webhook_reconciled(ReconcileResult::Patched);
    metrics.connections.connections_open().inc();
    metrics.connections.connection_rejected(Rejection::Limit);
    metrics.connections.connection_timed_out(ConnectionTimeout::Idle);
    let text = metrics.encode();
    for expected in [
        r#"pod_director_decisions_total{group="ci",mode="dryRun",decision="would_patch",webhook="mutate"} 1"#,
        r#"pod_director_decisions_total{group="",mode="",decision="skipped",webhook="mutate"} 1"#,
        r#"pod_director_admission_duration_seconds_bucket{le="0.005",webhook="mutate"} 2"#,
        r#"pod_director_admission_duration_seconds_count{webhook="mutate"} 2"#,
        r#"pod_director_config_reloads_total{result="success"} 1"#,
        r#"pod_director_config_reloads_total{result="error"} 1"#,
        r#"pod_director_tls_reloads_total{result="success"} 1"#,
        "pod_director_namespace_cache_size 42",
        r#"pod_director_orphaned_group_namespaces{group="old"} 3"#,
        r#"pod_director_webhook_reconciles_total{result="patched"} 1"#,
        "pod_director_connections_open 1",
        r#"pod_director_connections_rejected_total{reason="limit"} 1"#,
        r#"pod_director_connection_timeouts_total{timeout="idle"} 1"#,
        "pod_director_log_lines_dropped_total ",
        &format!(
            r#"pod_director_build_info{{version="{}"}} 1"#,
            env!("CARGO_PKG_VERSION")
        ),
        "# TYPE pod_director_admission_duration_seconds histogram",
        "# EOF",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
}

fn conflict(resolution: pod_director_engine::placement::Resolution) -> pod_director_engine::placement::Conflict {
    pod_director_engine::placement::Conflict {
        field: "nodeSelector[\"node-pool\"]".to_owned(),
        pod: "gpu".to_owned(),
        group: "ci".to_owned(),
        resolution,
    }
}

#[test]
fn the_whole_exposition_is_exactly_this() {
    let metrics = Metrics::register();
    let mut denied = outcome(Some("ci"), Some(Mode::DryRun), Decision::WouldDeny);
    denied.no_feasible_node = true;
    denied.alternative = Some("gpu".to_owned());
    denied.conflicts = vec![
        conflict(pod_director_engine::placement::Resolution::Rejected),
        conflict(pod_director_engine::placement::Resolution::Rejected),
    ];
    metrics.admission.observe_traced_decision(
        &denied,
        Duration::from_micros(1500),
        Some("4bf92f3577b34da6a3ce929d0e0e4736"),
    );
    metrics.reloads.config_reloaded(ReloadResult::Error);
    metrics.reloads.tls_reloaded(ReloadResult::Success);
    metrics.namespaces.set_namespace_cache_size(7);
    metrics.orphans.set_orphaned_groups(&[("gone".to_owned(), 2)].into());
    metrics.reconciles.webhook_reconciled(ReconcileResult::Unchanged);
    metrics.nodes.set_node_cache_size(5);
    metrics.nodes.node_looked_up(NodeLookupResult::NotFound);
    metrics.nodes.set_group_nodes(&[("gone".to_owned(), 9)]);
    // One group: the order of a family's samples is not defined.
    metrics.nodes.set_group_nodes(&[("ci".to_owned(), 3)]);
    metrics
        .nodes
        .set_group_provisioners(&[("ci".to_owned(), vec!["nodepool/ci".to_owned()])]);
    metrics.nodes.set_provisioners_read(&[std::sync::Arc::new(
        pod_director_engine::provision::Provisioner::karpenter(&serde_json::json!({"metadata": {"name": "ci"}})),
    )]);
    metrics.connections.connections_open().set(3);
    metrics.connections.connection_rejected(Rejection::ProbeLimit);
    metrics.connections.connection_timed_out(ConnectionTimeout::HeaderRead);
    metrics.audit.audit_scanned(ScanResult::Success);
    metrics.audit.set_audit_duration(Duration::from_millis(1500));
    let expected = EXPOSITION
        .replace("VERSION", env!("CARGO_PKG_VERSION"))
        .replace("DROPPED", &crate::telemetry::log_lines_dropped().get().to_string());
    assert_eq!(metrics.encode(), expected);
}

const EXPOSITION: &str = "\
# HELP pod_director_decisions Admission decisions by group, mode, decision and webhook.
# TYPE pod_director_decisions counter
pod_director_decisions_total{group=\"ci\",mode=\"dryRun\",decision=\"would_deny\",webhook=\"mutate\"} 1
# HELP pod_director_conflicts Conflicts between a pod's own placement and its group's, by group, mode, resolution and webhook.
# TYPE pod_director_conflicts counter
pod_director_conflicts_total{group=\"ci\",mode=\"dryRun\",resolution=\"rejected\",webhook=\"mutate\"} 2
# HELP pod_director_admission_duration_seconds Time from request received to response ready, by webhook.
# TYPE pod_director_admission_duration_seconds histogram
# UNIT pod_director_admission_duration_seconds seconds
pod_director_admission_duration_seconds_sum{webhook=\"mutate\"} 0.0015
pod_director_admission_duration_seconds_count{webhook=\"mutate\"} 1
pod_director_admission_duration_seconds_bucket{le=\"0.0005\",webhook=\"mutate\"} 0
pod_director_admission_duration_seconds_bucket{le=\"0.001\",webhook=\"mutate\"} 0
pod_director_admission_duration_seconds_bucket{le=\"0.0025\",webhook=\"mutate\"} 1 # {trace_id=\"4bf92f3577b34da6a3ce929d0e0e4736\"} 0.0015
pod_director_admission_duration_seconds_bucket{le=\"0.005\",webhook=\"mutate\"} 1
pod_director_admission_duration_seconds_bucket{le=\"0.01\",webhook=\"mutate\"} 1
pod_director_admission_duration_seconds_bucket{le=\"0.025\",webhook=\"mutate\"} 1
pod_director_admission_duration_seconds_bucket{le=\"0.05\",webhook=\"mutate\"} 1
pod_director_admission_duration_seconds_bucket{le=\"0.1\",webhook=\"mutate\"} 1
pod_director_admission_duration_seconds_bucket{le=\"0.25\",webhook=\"mutate\"} 1
pod_director_admission_duration_seconds_bucket{le=\"0.5\",webhook=\"mutate\"} 1
pod_director_admission_duration_seconds_bucket{le=\"1.0\",webhook=\"mutate\"} 1
pod_director_admission_duration_seconds_bucket{le=\"2.5\",webhook=\"mutate\"} 1
pod_director_admission_duration_seconds_bucket{le=\"5.0\",webhook=\"mutate\"} 1
pod_director_admission_duration_seconds_bucket{le=\"10.0\",webhook=\"mutate\"} 1
pod_director_admission_duration_seconds_bucket{le=\"+Inf\",webhook=\"mutate\"} 1
# HELP pod_director_no_feasible_node Decisions whose placed pod matches no node (placement only: resources not counted), by group, mode and webhook.
# TYPE pod_director_no_feasible_node counter
pod_director_no_feasible_node_total{group=\"ci\",mode=\"dryRun\",webhook=\"mutate\"} 1
# HELP pod_director_alternative_decisions Decisions of groups that offer alternatives, by group, chosen placement (an alternative's name or default), decision and webhook.
# TYPE pod_director_alternative_decisions counter
pod_director_alternative_decisions_total{group=\"ci\",alternative=\"gpu\",decision=\"would_deny\",webhook=\"mutate\"} 1
# HELP pod_director_config_reloads Configuration reload attempts by result.
# TYPE pod_director_config_reloads counter
pod_director_config_reloads_total{result=\"error\"} 1
# HELP pod_director_tls_reloads TLS certificate reload attempts by result.
# TYPE pod_director_tls_reloads counter
pod_director_tls_reloads_total{result=\"success\"} 1
# HELP pod_director_namespace_cache_size Namespaces held in the namespace cache.
# TYPE pod_director_namespace_cache_size gauge
pod_director_namespace_cache_size 7
# HELP pod_director_orphaned_group_namespaces Namespaces whose group label names a group the configuration does not define, by group.
# TYPE pod_director_orphaned_group_namespaces gauge
pod_director_orphaned_group_namespaces{group=\"gone\"} 2
# HELP pod_director_webhook_reconciles Reconciliations of the webhook configurations' namespaceSelectors with the live configuration, by result.
# TYPE pod_director_webhook_reconciles counter
pod_director_webhook_reconciles_total{result=\"unchanged\"} 1
# HELP pod_director_policy_groups Groups in enforce whose pods their admission policies enforce (enforceWith: policy) or check (webhookAndPolicy), handed over from the webhook.
# TYPE pod_director_policy_groups gauge
pod_director_policy_groups 0
# HELP pod_director_webhook_reconcile_yielded Fields of the webhook entries pod-director owns that the reconciler leaves to another writer now (it stopped re-asserting them).
# TYPE pod_director_webhook_reconcile_yielded gauge
pod_director_webhook_reconcile_yielded 0
# HELP pod_director_node_cache_size Nodes held in the Node cache.
# TYPE pod_director_node_cache_size gauge
pod_director_node_cache_size 5
# HELP pod_director_node_lookups Lookups of the node a pod names in spec.nodeName, by result.
# TYPE pod_director_node_lookups counter
pod_director_node_lookups_total{result=\"not_found\"} 1
# HELP pod_director_group_nodes Nodes that satisfy each group's own placement (nodeSelector, required node affinity, tolerated taints, not cordoned).
# TYPE pod_director_group_nodes gauge
pod_director_group_nodes{group=\"ci\"} 3
# HELP pod_director_group_provisioners Provisioners that could create a node for each group's own placement on demand (compatible Karpenter NodePools and Cluster API node groups, plus 1 when the group declares nodes.provisionedOnDemand).
# TYPE pod_director_group_provisioners gauge
pod_director_group_provisioners{group=\"ci\"} 1
# HELP pod_director_provisioners Provisioners read: Karpenter NodePools and Cluster API node groups (MachineDeployments, MachineSets the cluster-autoscaler scales).
# TYPE pod_director_provisioners gauge
pod_director_provisioners 1
# HELP pod_director_provisioners_usable Provisioners read that can create a node now (a NodePool Ready, not static or being deleted, limits not used up; a node group below its max size, able to scale from zero).
# TYPE pod_director_provisioners_usable gauge
pod_director_provisioners_usable 0
# HELP pod_director_connections_open Connections open on the admission port (accepted, not yet closed).
# TYPE pod_director_connections_open gauge
pod_director_connections_open 3
# HELP pod_director_connections_rejected Connections closed at accept, before the TLS handshake, by reason.
# TYPE pod_director_connections_rejected counter
pod_director_connections_rejected_total{reason=\"probe_limit\"} 1
# HELP pod_director_connection_timeouts Connections closed by a connection timer, by timer.
# TYPE pod_director_connection_timeouts counter
pod_director_connection_timeouts_total{timeout=\"header_read\"} 1
# HELP pod_director_audit_scans Continuous audit scans by result.
# TYPE pod_director_audit_scans counter
pod_director_audit_scans_total{result=\"success\"} 1
# HELP pod_director_audit_duration_seconds Duration of the latest continuous audit scan.
# TYPE pod_director_audit_duration_seconds gauge
# UNIT pod_director_audit_duration_seconds seconds
pod_director_audit_duration_seconds 1.5
# HELP pod_director_log_lines_dropped Log lines dropped because standard output did not keep up.
# TYPE pod_director_log_lines_dropped counter
pod_director_log_lines_dropped_total DROPPED
# HELP pod_director_build pod-director build information.
# TYPE pod_director_build info
pod_director_build_info{version=\"VERSION\"} 1
# EOF
";

#[test]
fn the_orphaned_group_gauge_follows_the_latest_count() {
    let metrics = Metrics::register();
    metrics
        .orphans
        .set_orphaned_groups(&[("old".to_owned(), 3), ("older".to_owned(), 1)].into());
    metrics.orphans.set_orphaned_groups(&[("old".to_owned(), 2)].into());
    let text = metrics.encode();
    assert!(
        text.contains(r#"pod_director_orphaned_group_namespaces{group="old"} 2"#),
        "{text}"
    );
    assert!(
        !text.contains("older"),
        "a group no namespace selects any more has no series: {text}"
    );
    metrics.orphans.set_orphaned_groups(&Default::default());
    assert!(!metrics.encode().contains("pod_director_orphaned_group_namespaces{"));
}

fn audited(group: &str, ready: bool) -> pod_director_engine::audit::Audit {
    let mut audit = pod_director_engine::audit::Audit::of(
        vec![pod_director_engine::audit::GroupAudit {
            group: group.to_owned(),
            mode: Mode::DryRun,
            namespaces: 2,
            pods: pod_director_engine::audit::Counts {
                compliant: 4,
                would_patch: 3,
                would_deny: 2,
                skipped: 1,
            },
            templates: pod_director_engine::audit::Counts {
                would_deny: 1,
                ..Default::default()
            },
            feasible_nodes: Some(0),
            provisionable_by: Vec::new(),
            not_provisionable_by: Vec::new(),
            would_deny: Default::default(),
            would_patch: Default::default(),
            no_feasible_node: Default::default(),
            workloads: Default::default(),
            alternatives: Default::default(),
            verdict: pod_director_engine::audit::Verdict {
                ready,
                blockers: if ready {
                    Vec::new()
                } else {
                    vec!["a".to_owned(), "b".to_owned()]
                },
                warnings: Vec::new(),
            },
        }],
        Vec::new(),
    );
    audit.nodes = Some(3);
    audit.elapsed = Duration::from_millis(5);
    audit
}

#[test]
fn the_audit_gauges_follow_the_latest_scan_and_disappear_when_cleared() {
    let metrics = Metrics::register();
    metrics.audit.set_audit(&audited("old", true));
    metrics.audit.set_audit(&audited("ci", false));
    let text = metrics.encode();
    for expected in [
        r#"pod_director_audit_pods{group="ci",decision="compliant"} 4"#,
        r#"pod_director_audit_pods{group="ci",decision="would_patch"} 3"#,
        r#"pod_director_audit_pods{group="ci",decision="would_deny"} 2"#,
        r#"pod_director_audit_pods{group="ci",decision="skipped"} 1"#,
        r#"pod_director_audit_templates{group="ci",decision="would_deny"} 1"#,
        r#"pod_director_group_ready{group="ci"} 0"#,
        r#"pod_director_group_blockers{group="ci"} 2"#,
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    assert!(
        !text.contains(r#"group="old""#),
        "a group the latest scan did not audit has no series: {text}"
    );
    metrics.audit.clear_audit();
    let text = metrics.encode();
    for family in [
        "pod_director_audit_pods{",
        "pod_director_group_ready{",
        "pod_director_group_blockers{",
    ] {
        assert!(!text.contains(family), "cleared: {text}");
    }
}

#[test]
fn a_decision_without_an_exported_span_has_no_exemplar() {
    let metrics = Metrics::register();
    metrics
        .admission
        .observe_decision(&outcome(None, None, Decision::Skipped), Duration::from_micros(200));
    let text = metrics.encode();
    assert!(!text.contains(" # {"), "{text}");
    assert!(
        !text.contains("pod_director_conflicts_total{"),
        "no conflict, no sample: {text}"
    );
}

fn config(yaml: &str) -> Config {
    Config::from_yaml(yaml, "test", Vec::new())
        .unwrap_or_else(|e| panic!("a valid test config: {e}"))
        .config
}

const TWO_GROUPS: &str = "namespaceLabel: pod-director/group
groups:
  ci: {mode: enforce, onConflict: override, nodeSelector: {pool: ci}}
  web: {nodeSelector: {pool: web}}
";

#[test]
fn every_series_a_group_can_produce_exists_at_zero_before_its_first_event() {
    let metrics = Metrics::register();
    metrics.initialise(&config(TWO_GROUPS));
    let text = metrics.encode();
    for sample in [
        r#"pod_director_decisions_total{group="ci",mode="enforce",decision="patched",webhook="mutate"} 0"#,
        r#"pod_director_decisions_total{group="ci",mode="enforce",decision="denied",webhook="validate"} 0"#,
        r#"pod_director_decisions_total{group="web",mode="dryRun",decision="would_patch",webhook="mutate"} 0"#,
        r#"pod_director_decisions_total{group="web",mode="dryRun",decision="noop",webhook="mutate"} 0"#,
        r#"pod_director_decisions_total{group="",mode="",decision="skipped",webhook="mutate"} 0"#,
        r#"pod_director_decisions_total{group="",mode="",decision="error",webhook="validate"} 0"#,
        r#"pod_director_decisions_total{group="web",mode="dryRun",decision="would_deny",webhook="validate-namespace"} 0"#,
        r#"pod_director_conflicts_total{group="ci",mode="enforce",resolution="overridden",webhook="mutate"} 0"#,
        r#"pod_director_conflicts_total{group="web",mode="dryRun",resolution="rejected",webhook="mutate"} 0"#,
        r#"pod_director_no_feasible_node_total{group="web",mode="dryRun",webhook="mutate"} 0"#,
        r#"pod_director_admission_duration_seconds_count{webhook="validate-namespace"} 0"#,
        r#"pod_director_config_reloads_total{result="error"} 0"#,
        r#"pod_director_tls_reloads_total{result="error"} 0"#,
        r#"pod_director_webhook_reconciles_total{result="error"} 0"#,
    ] {
        assert!(text.contains(sample), "missing {sample} in\n{text}");
    }
    for absent in [
        r#"group="web",mode="dryRun",decision="patched""#,
        r#"group="ci",mode="enforce",decision="would_patch""#,
        r#"group="ci",mode="enforce",resolution="rejected""#,
    ] {
        assert!(!text.contains(absent), "a series its mode never produces: {absent}");
    }
}

#[test]
fn a_group_flipped_to_enforce_gets_its_enforce_series_and_keeps_its_counts() {
    let metrics = Metrics::register();
    metrics.initialise(&config(TWO_GROUPS));
    metrics.admission.observe_decision(
        &outcome(Some("web"), Some(Mode::DryRun), Decision::WouldPatch),
        Duration::ZERO,
    );
    metrics.initialise(&config(&TWO_GROUPS.replace("web: {", "web: {mode: enforce, ")));
    let text = metrics.encode();
    assert!(
        text.contains(r#"{group="web",mode="enforce",decision="patched",webhook="mutate"} 0"#),
        "{text}"
    );
    assert!(
        text.contains(r#"{group="web",mode="dryRun",decision="would_patch",webhook="mutate"} 1"#),
        "{text}"
    );
}

#[test]
fn unknown_groups_that_namespaces_select_are_counted_from_zero() {
    let metrics = Metrics::register();
    metrics.admission.initialise_unknown_groups(["gone"]);
    let text = metrics.encode();
    for webhook in ["mutate", "validate"] {
        let sample = format!(
            r#"pod_director_decisions_total{{group="gone",mode="",decision="unknown_group",webhook="{webhook}"}} 0"#
        );
        assert!(text.contains(&sample), "missing {sample} in\n{text}");
    }
    let sample = r#"pod_director_no_feasible_node_total{group="gone",mode="",webhook="mutate"} 0"#;
    assert!(text.contains(sample), "missing {sample} in\n{text}");
}

#[test]
fn the_in_tree_gauges_count_the_holes_and_their_violating_pods_and_disappear_when_cleared() {
    use pod_director_engine::audit::in_tree::PluginState;
    use pod_director_engine::in_tree::Plugin;
    let config = config("groups: {}\n");
    let mut scan = pod_director_engine::audit::tally::Scan::new(&config, None, None);
    let meta = serde_json::from_value(serde_json::json!({"name": "tenant-a",
        "annotations": {"scheduler.alpha.kubernetes.io/node-selector": "pool=a"}}))
    .expect("metadata");
    scan.namespace(meta);
    scan.plugin(Plugin::PodNodeSelector, PluginState::Absent("declared".to_owned()));
    for name in scan.namespaces() {
        scan.enter(&name);
        let pod = serde_json::from_value(serde_json::json!({"metadata": {"name": "web", "namespace": name},
            "spec": {}}))
        .expect("a pod");
        scan.pod(pod);
    }
    let audit = scan.finish(Duration::ZERO);
    let metrics = Metrics::register();
    metrics.audit.set_audit(&audit);
    let text = metrics.encode();
    for expected in [
        "pod_director_in_tree_unenforced_namespaces 1",
        "pod_director_in_tree_ready 1",
        &format!(
            "pod_director_in_tree_violating_pods {}",
            audit.in_tree.namespaces["tenant-a"].violating_pods
        ),
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    metrics.audit.clear_audit();
    let text = metrics.encode();
    assert!(!text.contains("pod_director_in_tree_"), "cleared: {text}");
}
