//! `explain --nodes`, end to end: the real binary reading Node manifests (and Karpenter
//! NodePools) and counting the nodes each pod can run on.

use std::path::{Path, PathBuf};
use std::process::Output;

use pod_director_testkit::assert_contains;
use pod_director_testkit::cli::*;

/// Node manifests: ci-1 (tainted for ci), ci-2 (cordoned), gpu-1 (tainted for GPUs).
const NODES: [&str; 3] = [
    "apiVersion: v1\nkind: Node\nmetadata: {name: ci-1, labels: {node-pool: ci}}\nspec:\n  taints: [{key: dedicated, value: ci, effect: NoSchedule}]\nstatus:\n  images: [{names: [nginx], sizeBytes: 1}]\n",
    "apiVersion: v1\nkind: Node\nmetadata: {name: ci-2, labels: {node-pool: ci}}\nspec: {unschedulable: true}\n",
    "apiVersion: v1\nkind: Node\nmetadata: {name: gpu-1, labels: {node-pool: gpu}}\nspec:\n  taints: [{key: nvidia.com/gpu, effect: NoSchedule}]\n",
];

/// What `explain --nodes` reads: a config with a ci group (enforce); a plain pod,
/// pods naming a node outside the group, one that does not exist and one of the
/// group; [`NODES`] as `kubectl get nodes -o yaml` prints them (one `List`).
struct NodesFixture {
    dir: tempfile::TempDir,
    config: PathBuf,
    manifests: PathBuf,
    list: PathBuf,
}

impl NodesFixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = write(
            dir.path(),
            "config.yaml",
            "groups:\n  ci:\n    mode: enforce\n    nodeSelector: {node-pool: ci}\n    tolerations: [{key: dedicated, operator: Equal, value: ci, effect: NoSchedule}]\n",
        );
        let pod = |name: &str, node: Option<&str>| {
            let node = node.map(|n| format!("\n  nodeName: {n}")).unwrap_or_default();
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: ci}}\nspec:{node}\n  containers: [{{name: app, image: nginx}}]\n"
            )
        };
        let manifests = [
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: ci, labels: {pod-director/group: ci}}\n".to_owned(),
            pod("plain", None),
            pod("on-gpu", Some("gpu-1")),
            pod("on-ghost", Some("ghost")),
            pod("on-ci", Some("ci-1")),
        ];
        let manifests = write(dir.path(), "manifests.yaml", &manifests.join("---\n"));
        let items: Vec<String> = NODES
            .iter()
            .map(|n| {
                n.lines()
                    .enumerate()
                    .map(|(i, l)| if i == 0 { format!("- {l}") } else { format!("  {l}") })
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .collect();
        let list = write(
            dir.path(),
            "nodes.yaml",
            &format!(
                "apiVersion: v1\nkind: List\nmetadata:\n  resourceVersion: \"\"\nitems:\n{}\n",
                items.join("\n")
            ),
        );
        Self {
            dir,
            config,
            manifests,
            list,
        }
    }

    /// `explain -o FORMAT`, with `--nodes NODES` when given.
    fn explain(&self, nodes: Option<&Path>, format: &str) -> Output {
        let mut extra = vec!["-o", format];
        if let Some(nodes) = nodes {
            extra.extend(["--nodes", nodes.to_str().unwrap()]);
        }
        explain(&self.config, &[&self.manifests], &extra)
    }
}

#[test]
fn explain_nodes_reads_the_list_kubectl_get_nodes_prints_and_counts_feasible_nodes() {
    let fixture = NodesFixture::new();
    let out = fixture.explain(Some(&fixture.list), "json");
    assert!(out.status.success(), "{}", stderr(&out));
    let reports = reports(&out);
    let plain = find(&reports, "plain");
    assert_eq!(
        plain["feasible_nodes"], 1,
        "ci-1 once tolerated; ci-2 is cordoned: {plain}"
    );
    assert_eq!(
        plain["feasible_nodes_before"], 0,
        "every node is tainted or cordoned: {plain}"
    );
    assert_eq!(plain["no_feasible_node"], false);

    let gpu = find(&reports, "on-gpu");
    assert_eq!(gpu["decision"], "denied", "{gpu}");
    let reason = field(gpu, "reason");
    assert_contains(
        reason,
        r#"node "gpu-1" is not a node of the group: nodeSelector node-pool=ci"#,
    );
    let ghost = find(&reports, "on-ghost");
    assert_eq!(ghost["decision"], "denied");
    assert!(field(ghost, "reason").contains("does not exist"), "{ghost}");
    assert_eq!(find(&reports, "on-ci")["decision"], "patched", "a node of the group");

    let text = stdout(&fixture.explain(Some(&fixture.list), "text"));
    assert!(text.lines().next().unwrap().ends_with("FEASIBLE"), "{text}");
    assert_contains(&text, "feasible nodes: 1 after the patch, 0 before");
    assert!(
        text.contains("resources, pod affinity and topology spread are not counted"),
        "the scope is said: {text}"
    );
}

#[test]
fn explain_nodes_reads_a_directory_of_node_manifests_like_the_list() {
    let fixture = NodesFixture::new();
    let nodes = fixture.dir.path().join("nodes");
    std::fs::create_dir(&nodes).unwrap();
    for (i, node) in NODES.iter().enumerate() {
        write(&nodes, &format!("node-{i}.yaml"), node);
    }
    let from_dir = stdout(&fixture.explain(Some(&nodes), "json"));
    let from_list = stdout(&fixture.explain(Some(&fixture.list), "json"));
    assert_contains(&from_dir, "\"feasible_nodes\": 1");
    assert_eq!(from_dir, from_list);
}

#[test]
fn without_nodes_explain_leaves_the_counts_out_and_says_node_name_is_not_checked() {
    let fixture = NodesFixture::new();
    let out = fixture.explain(None, "json");
    assert!(out.status.success(), "{}", stderr(&out));
    let reports = reports(&out);
    let plain = find(&reports, "plain");
    assert!(plain.get("feasible_nodes").is_none(), "absent, not 0: {plain}");
    assert!(plain.get("feasible_nodes_before").is_none());
    let gpu = find(&reports, "on-gpu");
    assert_eq!(gpu["decision"], "patched");
    assert!(
        field(gpu, "reason").contains("spec.nodeName gpu-1 not checked: pass --nodes"),
        "{gpu}"
    );
    let text = stdout(&fixture.explain(None, "text"));
    assert!(!text.contains("FEASIBLE"), "{text}");
}

#[test]
fn explain_nodes_refuses_what_is_not_a_node() {
    let fixture = NodesFixture::new();
    let out = fixture.explain(Some(&fixture.manifests), "json");
    assert_eq!(out.status.code(), Some(2));
    assert_contains(
        &stderr(&out),
        "--nodes reads Node manifests and provisioners (NodePool karpenter.sh/v1, MachineDeployment and MachineSet \
         cluster.x-k8s.io); this is a Namespace (v1)",
    );
}

/// A Karpenter NodePool manifest (Ready) whose nodes carry `label` and `taint`.
fn node_pool(name: &str, label: &str, taint: &str) -> String {
    format!(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: {name}}}\nspec:\n  template:\n    metadata: {{labels: {{node-pool: {label}}}}}\n    spec:\n      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n      requirements: [{{key: kubernetes.io/arch, operator: In, values: [amd64]}}]\n      taints: [{{key: {taint}, value: ci, effect: NoSchedule}}]\nstatus:\n  conditions: [{{type: Ready, status: \"True\"}}]\n"
    )
}

#[test]
fn explain_nodes_counts_a_compatible_nodepool_as_a_provisioner_when_no_node_fits() {
    let fixture = NodesFixture::new();
    // Only the gpu node: the ci group's pool has no node now.
    let gpu = write(fixture.dir.path(), "gpu.yaml", NODES[2]);
    let pools = [
        node_pool("ci-pool", "ci", "dedicated"),
        node_pool("other-pool", "ci", "other"),
    ];
    let pools = write(fixture.dir.path(), "nodepools.yaml", &pools.join("---\n"));
    // The plain pod's report, with the gpu node and these provisioners.
    let plain_with = |provisioners: &Path| {
        let nodes = [
            "--nodes",
            gpu.to_str().unwrap(),
            "--nodes",
            provisioners.to_str().unwrap(),
        ];
        let out = explain(
            &fixture.config,
            &[&fixture.manifests],
            &[&["-o", "json"], &nodes[..]].concat(),
        );
        assert!(out.status.success(), "{}", stderr(&out));
        find(&reports(&out), "plain").clone()
    };
    let plain = plain_with(&pools);
    assert_eq!(plain["feasible_nodes"], 0, "{plain}");
    assert_eq!(plain["no_feasible_node"], false, "{plain}");
    assert_eq!(
        plain["provisionable_by"],
        serde_json::json!(["nodepool/ci-pool"]),
        "{plain}"
    );
    let text = stdout(&explain(
        &fixture.config,
        &[&fixture.manifests],
        &["--nodes", gpu.to_str().unwrap(), "--nodes", pools.to_str().unwrap()],
    ));
    assert_contains(&text, "none now, provisioned on demand by nodepool/ci-pool");

    // No compatible NodePool: no provisioner, no feasible node.
    let other = write(
        fixture.dir.path(),
        "other.yaml",
        &node_pool("other-pool", "ci", "other"),
    );
    let plain = plain_with(&other);
    assert_eq!(plain["no_feasible_node"], true, "{plain}");
    assert_eq!(plain.get("provisionable_by"), None, "{plain}");

    // A NodePool that cannot be read is refused, naming it.
    let broken = write(
        fixture.dir.path(),
        "broken.yaml",
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: broken}\nspec: {limits: {cpu: lots}}\n",
    );
    let out = explain(
        &fixture.config,
        &[&fixture.manifests],
        &["--nodes", broken.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2));
    assert_contains(
        &stderr(&out),
        "cannot read NodePool broken: spec.limits.cpu: \"lots\" is not a quantity",
    );
}
