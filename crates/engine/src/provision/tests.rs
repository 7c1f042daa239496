use k8s_openapi::api::core::v1::Toleration;
use serde_json::json;

use super::*;
use crate::placement::PodSpec;

/// One of the requirement sets of Karpenter's compatibility table, on `key`.
fn named(name: &str, key: &str) -> Requirements {
    let (operator, values): (&str, &[&str]) = match name {
        "unconstrained" => return Requirements::default(),
        "exists" => ("Exists", &[]),
        "doesNotExist" => ("DoesNotExist", &[]),
        "inA" => ("In", &["A"]),
        "inB" => ("In", &["B"]),
        "inAB" => ("In", &["A", "B"]),
        "notInA" => ("NotIn", &["A"]),
        "in1" => ("In", &["1"]),
        "in9" => ("In", &["9"]),
        "in19" => ("In", &["1", "9"]),
        "notIn12" => ("NotIn", &["1", "2"]),
        "greaterThan1" => ("Gt", &["1"]),
        "greaterThan9" => ("Gt", &["9"]),
        "lessThan1" => ("Lt", &["1"]),
        "lessThan9" => ("Lt", &["9"]),
        other => panic!("requirement set {other} is not in the table"),
    };
    let mut r = Requirements::default();
    let values: Vec<String> = values.iter().map(|v| (*v).to_owned()).collect();
    r.add_expression(key, operator, &values).expect("a valid requirement");
    r
}

/// Every row of Karpenter's own `Compatible` table (requirements_test.go, v1.15.0) holds
/// here: on a well-known key, and — strict — on a custom key.
#[test]
fn karpenters_own_compatibility_table_holds() {
    let table = include_str!("karpenter_compatible.txt");
    let mut checked = 0;
    for line in table.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [section, pool, pod, expected] = fields[..] else {
            panic!("malformed row {line:?}")
        };
        let key = match section {
            "well-known" => "topology.kubernetes.io/zone",
            "custom" => "example.com/zone",
            other => panic!("section {other}"),
        };
        let got = named(pool, key).compatible(&named(pod, key));
        assert_eq!(got.is_ok(), expected == "ok", "{line}: {got:?}");
        checked += 1;
    }
    assert!(checked > 400, "the whole table is read: {checked} rows");
}

#[test]
fn every_operator_on_a_custom_key_the_nodepool_does_not_define() {
    let pool = Requirements::default();
    for (operator, values, ok) in [
        ("In", vec!["a"], false),
        ("Exists", vec![], false),
        ("Gt", vec!["3"], false),
        ("Lt", vec!["3"], false),
        ("NotIn", vec!["a"], true),
        ("DoesNotExist", vec![], true),
    ] {
        let mut pod = Requirements::default();
        let values: Vec<String> = values.into_iter().map(str::to_owned).collect();
        pod.add_expression("team", operator, &values).expect("valid");
        let got = pool.compatible(&pod);
        assert_eq!(got.is_ok(), ok, "{operator}: {got:?}");
        if let Err(why) = got {
            assert!(why.to_string().contains("does not define"), "{why}");
        }
    }
}

#[test]
fn gt_and_lt_bound_integer_values() {
    let mut pool = Requirements::default();
    pool.add_expression("cpu", "In", &["2".into(), "8".into()])
        .expect("valid");
    for (operator, value, ok) in [
        ("Gt", "4", true),
        ("Gt", "8", false),
        ("Lt", "2", false),
        ("Lt", "3", true),
    ] {
        let mut pod = Requirements::default();
        pod.add_expression("cpu", operator, &[value.to_owned()]).expect("valid");
        assert_eq!(pool.compatible(&pod).is_ok(), ok, "{operator} {value}");
    }
    let mut bad = Requirements::default();
    assert!(bad.add_expression("cpu", "Gt", &["many".into()]).is_err());
    assert!(bad.add_expression("cpu", "Gt", &[]).is_err());
    assert!(bad.add_expression("cpu", "Near", &[]).is_err());
}

#[test]
fn deprecated_keys_are_read_as_their_successors() {
    let mut pool = Requirements::default();
    pool.add_expression("kubernetes.io/arch", "In", &["arm64".into()])
        .expect("valid");
    let mut pod = Requirements::default();
    pod.add_labels([(&"beta.kubernetes.io/arch".to_owned(), &"amd64".to_owned())]);
    let got = pool.compatible(&pod);
    assert!(
        matches!(&got, Err(RequirementUnmet::Disjoint { key, .. }) if key == "kubernetes.io/arch"),
        "{got:?}"
    );
}

fn ready() -> serde_json::Value {
    json!({"conditions": [{"type": "Ready", "status": "True"}]})
}

fn gpu_pool() -> serde_json::Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "gpu"},
        "spec": {
            "template": {
                "metadata": {"labels": {"pool": "gpu"}},
                "spec": {
                    "requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                        {"key": "team", "operator": "Exists"}
                    ],
                    "taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
                    "startupTaints": [{"key": "warming", "effect": "NoSchedule"}],
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
                }
            },
            "limits": {"cpu": "100", "memory": "400Gi"}
        },
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "resources": {"cpu": "8", "memory": "32Gi"}}
    })
}

fn spec(value: serde_json::Value) -> PodSpec {
    serde_json::from_value(value).expect("a PodSpec")
}

fn gpu_pod() -> PodSpec {
    spec(json!({
        "containers": [],
        "nodeSelector": {"pool": "gpu"},
        "tolerations": [{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]
    }))
}

#[test]
fn a_pod_that_selects_the_template_labels_and_tolerates_the_taints_is_provisionable() {
    let pool = Provisioner::karpenter(&gpu_pool());
    assert_eq!(pool.unusable, None);
    let pod = gpu_pod();
    assert_eq!(pool.compatible(&Placement::of_spec(&pod)), Ok(()));
    assert_eq!(
        provisioners([&pool], &Placement::of_spec(&pod)),
        vec![Box::from("nodepool/gpu")]
    );
    // The NodePool's own name label is one of its requirements.
    let named = spec(
        json!({"containers": [], "nodeSelector": {"pool": "gpu", "karpenter.sh/nodepool": "cpu"},
        "tolerations": [{"key": "gpu", "operator": "Exists"}]}),
    );
    let got = pool.compatible(&Placement::of_spec(&named));
    assert!(
        matches!(&got, Err(Incompatible::Requirement(RequirementUnmet::Disjoint { key, .. })) if key == NODEPOOL_LABEL),
        "{got:?}"
    );
}

#[test]
fn a_taint_of_the_template_must_be_tolerated_but_startup_taints_need_not() {
    let pool = Provisioner::karpenter(&gpu_pool());
    let mut pod = gpu_pod();
    pod.tolerations = Some(Vec::new());
    let got = pool.compatible(&Placement::of_spec(&pod));
    assert!(
        matches!(&got, Err(Incompatible::Taint(t)) if &*t.key == "gpu"),
        "{got:?}"
    );
    assert_eq!(
        got.map_err(|e| e.to_string()),
        Err("taint gpu=true:NoSchedule is not tolerated".to_owned())
    );
    // A PreferNoSchedule taint of the template counts too (Karpenter's Taints.Tolerates checks every effect).
    let mut soft = gpu_pool();
    soft["spec"]["template"]["spec"]["taints"] = json!([{"key": "soft", "effect": "PreferNoSchedule"}]);
    let got = Provisioner::karpenter(&soft).compatible(&Placement::of_spec(&gpu_pod()));
    assert!(matches!(got, Err(Incompatible::Taint(_))), "{got:?}");
    let tolerating: Vec<Toleration> = serde_json::from_value(json!([{"operator": "Exists"}])).expect("tolerations");
    pod.tolerations = Some(tolerating);
    assert_eq!(
        Provisioner::karpenter(&soft).compatible(&Placement::of_spec(&pod)),
        Ok(())
    );
}

#[test]
fn a_custom_label_the_nodepool_does_not_define_fails_and_names_the_key() {
    let pool = Provisioner::karpenter(&gpu_pool());
    let mut pod = gpu_pod();
    pod.node_selector
        .get_or_insert_with(Default::default)
        .insert("disk".into(), "ssd".into());
    let got = pool.compatible(&Placement::of_spec(&pod)).map_err(|e| e.to_string());
    assert_eq!(
        got,
        Err(
            "the pod requires label disk In [ssd], which the NodePool does not define \
             (add it to spec.template.metadata.labels or spec.template.spec.requirements)"
                .to_owned()
        )
    );
    // A well-known key may be undefined …
    let zoned = spec(
        json!({"containers": [], "nodeSelector": {"pool": "gpu", "topology.kubernetes.io/zone": "z1"},
        "tolerations": [{"key": "gpu", "operator": "Exists"}]}),
    );
    assert_eq!(pool.compatible(&Placement::of_spec(&zoned)), Ok(()));
    // … but must intersect when defined.
    let spot = spec(
        json!({"containers": [], "nodeSelector": {"pool": "gpu", "karpenter.sh/capacity-type": "spot"},
        "tolerations": [{"key": "gpu", "operator": "Exists"}]}),
    );
    assert_eq!(
        pool.compatible(&Placement::of_spec(&spot)).map_err(|e| e.to_string()),
        Err(
            "the pod requires label karpenter.sh/capacity-type In [spot]; the NodePool offers In [on-demand]"
                .to_owned()
        )
    );
}

#[test]
fn any_term_of_the_required_node_affinity_may_be_met() {
    let pool = Provisioner::karpenter(&gpu_pool());
    let pod = spec(json!({
        "containers": [],
        "tolerations": [{"key": "gpu", "operator": "Exists"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["cpu"]}]},
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]},
                                  {"key": "team", "operator": "In", "values": ["ml"]}]}
        ]}}}
    }));
    assert_eq!(pool.compatible(&Placement::of_spec(&pod)), Ok(()));
    let named = spec(json!({
        "containers": [],
        "tolerations": [{"key": "gpu", "operator": "Exists"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
        ]}}}
    }));
    assert!(matches!(
        pool.compatible(&Placement::of_spec(&named)),
        Err(Incompatible::Requirement(RequirementUnmet::NoNewNode(_)))
    ));
}

#[test]
fn a_nodepool_karpenter_would_not_use_is_unusable_and_says_why() {
    let cases = [
        (
            json!({"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "NodeClassNotReady"}]}}),
            "not Ready (Ready=False: NodeClassNotReady)",
        ),
        (json!({"status": {}}), "not Ready (no Ready condition in its status)"),
        (
            json!({"status": {"conditions": [{"type": "Ready", "status": "True"}], "resources": {"cpu": "100", "memory": "1Gi"}}}),
            "limits exhausted: cpu 100 used of 100 (spec.limits)",
        ),
        (
            json!({"status": {"conditions": [{"type": "Ready", "status": "True"}], "resources": {"memory": "401Gi"}}}),
            "limits exhausted: memory 401Gi used of 400Gi (spec.limits)",
        ),
        (
            json!({"metadata": {"name": "gpu", "deletionTimestamp": "2026-12-01T00:00:00Z"}}),
            "being deleted",
        ),
        (
            json!({"spec": {"replicas": 3}}),
            "static (spec.replicas): Karpenter does not provision it on demand",
        ),
    ];
    for (overlay, why) in cases {
        let mut object = gpu_pool();
        for part in ["metadata", "status"] {
            if let Some(v) = overlay.get(part) {
                object[part] = v.clone();
            }
        }
        if let Some(replicas) = overlay.pointer("/spec/replicas") {
            object["spec"]["replicas"] = replicas.clone();
        }
        let pool = Provisioner::karpenter(&object);
        assert_eq!(pool.unusable.as_ref().map(ToString::to_string).as_deref(), Some(why));
        assert!(
            provisioners([&pool], &Placement::of_spec(&gpu_pod())).is_empty(),
            "{why}"
        );
    }
    let mut headroom = gpu_pool();
    headroom["status"] = ready();
    headroom["status"]["resources"] = json!({"cpu": "99500m", "memory": 429_496_729_599_u64});
    assert_eq!(
        Provisioner::karpenter(&headroom).unusable,
        None,
        "limits not yet reached"
    );
}

#[test]
fn an_object_that_is_not_a_nodepool_is_unusable_not_a_panic() {
    for object in [
        json!({"metadata": {"name": "x"}, "spec": {"template": "nope"}}),
        json!({"metadata": {"name": "x"}, "spec": {"limits": {"cpu": "lots"}}, "status": ready()}),
        json!({"metadata": {"name": "x"}, "spec": {"template": {"spec": {"requirements": [
            {"key": "cpu", "operator": "Gt", "values": ["two"]}]}}}, "status": ready()}),
        json!(42),
    ] {
        let pool = Provisioner::karpenter(&object);
        assert!(
            matches!(pool.unusable, Some(Unusable::Invalid(_))),
            "{object}: {:?}",
            pool.unusable
        );
    }
}

#[test]
fn quantities_parse_like_kubernetes_quantities() {
    for (text, value) in [
        ("100", 100.0),
        ("1.5", 1.5),
        ("500m", 0.5),
        ("64Gi", 68_719_476_736.0),
        ("1k", 1000.0),
        ("1e3", 1000.0),
        ("2M", 2e6),
    ] {
        assert_eq!(quantity(&json!(text)), Some(value), "{text}");
    }
    assert_eq!(quantity(&json!(7)), Some(7.0));
    for bad in ["", "Gi", "lots", "1..2x", "NaN", "inf"] {
        assert_eq!(quantity(&json!(bad)), None, "{bad}");
    }
}

fn machine_deployment(annotations: serde_json::Value, replicas: u64) -> serde_json::Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
        "metadata": {"name": "gpu-md", "namespace": "fleet", "annotations": annotations},
        "spec": {
            "replicas": replicas,
            "template": {
                "metadata": {"labels": {"node-role.kubernetes.io/gpu": "", "app": "not-propagated"}},
                "spec": {"taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule", "propagation": "Always"}]}
            }
        }
    })
}

fn scaled(extra: serde_json::Value) -> serde_json::Value {
    let mut a = json!({
        NODE_GROUP_MIN_SIZE: "0", NODE_GROUP_MAX_SIZE: "5",
        "capacity.cluster-autoscaler.kubernetes.io/cpu": "8",
        "capacity.cluster-autoscaler.kubernetes.io/memory": "32G",
        "capacity.cluster-autoscaler.kubernetes.io/labels": "pool=gpu, zone = a",
        "capacity.cluster-autoscaler.kubernetes.io/taints": "dedicated=gpu:NoSchedule"
    });
    if let (Some(a), Some(extra)) = (a.as_object_mut(), extra.as_object()) {
        a.extend(extra.clone());
    }
    a
}

#[test]
fn a_cluster_api_node_group_provisions_the_node_its_annotations_and_template_describe() {
    let group =
        Provisioner::node_group("MachineDeployment", &machine_deployment(scaled(json!({})), 0)).expect("a node group");
    assert_eq!(&*group.name, "machinedeployment/fleet/gpu-md");
    assert_eq!(group.unusable, None);
    let fits = spec(json!({
        "containers": [],
        "nodeSelector": {"pool": "gpu", "zone": "a", "kubernetes.io/os": "linux", "node-role.kubernetes.io/gpu": ""},
        "tolerations": [{"key": "gpu", "operator": "Exists"}, {"key": "dedicated", "operator": "Equal", "value": "gpu"}]
    }));
    assert_eq!(group.compatible(&Placement::of_spec(&fits)), Ok(()));
    // The template's own labels are not propagated (only node-role.kubernetes.io/ and the like are).
    let mut app = fits.clone();
    app.node_selector
        .get_or_insert_with(Default::default)
        .insert("app".into(), "not-propagated".into());
    let got = group.compatible(&Placement::of_spec(&app)).map_err(|e| e.to_string());
    assert_eq!(
        got,
        Err(
            "the node it would add does not fit: nodeSelector app=not-propagated: the node has no label app".to_owned()
        )
    );
    // The template's taint and the annotation's taint must both be tolerated.
    let mut untolerated = fits.clone();
    untolerated.tolerations =
        Some(serde_json::from_value(json!([{"key": "gpu", "operator": "Exists"}])).expect("tolerations"));
    let got = group
        .compatible(&Placement::of_spec(&untolerated))
        .map_err(|e| e.to_string());
    assert_eq!(
        got,
        Err("the node it would add does not fit: taint dedicated=gpu:NoSchedule is not tolerated".to_owned())
    );
    // The autoscaler's default architecture.
    let mut arm = fits.clone();
    arm.node_selector
        .get_or_insert_with(Default::default)
        .insert("kubernetes.io/arch".into(), "arm64".into());
    assert!(group.compatible(&Placement::of_spec(&arm)).is_err());
}

#[test]
fn a_node_group_that_cannot_grow_is_unusable_and_says_why() {
    let at_max =
        Provisioner::node_group("MachineDeployment", &machine_deployment(scaled(json!({})), 5)).expect("a node group");
    assert_eq!(at_max.unusable, Some(Unusable::AtMaxSize { replicas: 5, max: 5 }));
    assert_eq!(
        at_max.unusable.as_ref().map(ToString::to_string).as_deref(),
        Some("at its max size (5 of 5 replicas)")
    );
    let mut unsized_ = scaled(json!({}));
    unsized_
        .as_object_mut()
        .expect("an object")
        .remove("capacity.cluster-autoscaler.kubernetes.io/memory");
    let group =
        Provisioner::node_group("MachineDeployment", &machine_deployment(unsized_.clone(), 0)).expect("a node group");
    assert_eq!(group.unusable, Some(Unusable::NoScaleFromZero));
    let running = Provisioner::node_group("MachineDeployment", &machine_deployment(unsized_, 1)).expect("a node group");
    assert_eq!(running.unusable, None, "with a node already, the autoscaler copies it");
    for (annotation, bad) in [
        ("capacity.cluster-autoscaler.kubernetes.io/labels", "pool"),
        (
            "capacity.cluster-autoscaler.kubernetes.io/taints",
            "dedicated=gpu:Sometimes",
        ),
        (NODE_GROUP_MAX_SIZE, "five"),
    ] {
        let group = Provisioner::node_group("MachineSet", &machine_deployment(scaled(json!({annotation: bad})), 0))
            .expect("a node group");
        assert!(
            matches!(group.unusable, Some(Unusable::Invalid(_))),
            "{annotation}: {:?}",
            group.unusable
        );
    }
    // Without both size annotations it is no node group at all.
    let mut unscaled = scaled(json!({}));
    unscaled.as_object_mut().expect("an object").remove(NODE_GROUP_MIN_SIZE);
    assert_eq!(
        Provisioner::node_group("MachineDeployment", &machine_deployment(unscaled, 0)),
        None
    );
}
