use std::collections::BTreeMap;

use serde_json::json;

use super::*;

fn decode(value: serde_json::Value) -> Result<Pod, (String, String)> {
    read(value, true)
}

/// The pod of `value` as a raw object is read (`wire::pod`), its QoS class's fields read when
/// `qos` says so.
fn read(value: serde_json::Value, qos: bool) -> Result<Pod, (String, String)> {
    let text = value.to_string();
    let raw: &RawValue = serde_json::from_str(&text).map_err(|e| (String::new(), e.to_string()))?;
    let reading = super::super::Reading::new(qos);
    super::super::pod(raw, &reading).map_err(|e| (reading.trail.path(), e.to_string()))
}

#[test]
fn only_the_placement_fields_are_read_and_everything_else_is_skipped() {
    let pod = decode(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "generateName": "web-", "namespace": "a", "labels": {"app": "web"},
            "annotations": {"x": "y"}, "uid": 7, "managedFields": [{"weird": true}],
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "u"}]},
        "spec": {"containers": {"not": "a list, and not read"}, "nodeName": "n1",
            "nodeSelector": {"pool": "ci"}, "tolerations": [{"key": "k", "operator": "Exists"}],
            "affinity": {"nodeAffinity": {}}, "volumes": 3},
        "status": "anything"
    }))
    .expect("decodes");
    assert_eq!(pod.metadata.name.as_deref(), Some("web"));
    assert_eq!(pod.metadata.generate_name.as_deref(), Some("web-"));
    assert_eq!(pod.metadata.namespace.as_deref(), Some("a"));
    assert_eq!(
        pod.metadata.labels,
        Some(BTreeMap::from([("app".into(), "web".into())]))
    );
    assert_eq!(
        pod.metadata.annotations,
        Some(BTreeMap::from([("x".into(), "y".into())]))
    );
    assert_eq!(pod.metadata.owner_references.as_deref().map(<[_]>::len), Some(1));
    let spec = pod.spec.expect("a spec");
    assert_eq!(spec.node_name.as_deref(), Some("n1"));
    assert_eq!(spec.node_selector, Some(BTreeMap::from([("pool".into(), "ci".into())])));
    assert_eq!(spec.tolerations.as_deref().map(<[_]>::len), Some(1));
    assert!(spec.affinity.is_some_and(|a| a.node_affinity.is_some()));
}

#[test]
fn a_placement_field_of_the_wrong_type_is_refused_with_its_path() {
    for (pod, path) in [
        (json!({"spec": {"tolerations": {"key": "k"}}}), "spec.tolerations"),
        (
            json!({"spec": {"tolerations": [{"tolerationSeconds": "x"}]}}),
            "spec.tolerations",
        ),
        (json!({"spec": {"nodeSelector": {"a": 1}}}), "spec.nodeSelector"),
        (json!({"spec": {"affinity": []}}), "spec.affinity"),
        (json!({"spec": {"nodeName": 5}}), "spec.nodeName"),
        (json!({"metadata": {"labels": []}}), "metadata.labels"),
        (
            json!({"metadata": {"annotations": {"a": null}}}),
            "metadata.annotations",
        ),
        (
            json!({"metadata": {"ownerReferences": [{"kind": "X", "controller": "yes"}]}}),
            "metadata.ownerReferences",
        ),
        (json!({"metadata": "x"}), "metadata"),
        (json!({"spec": 3}), "spec"),
        (json!({"kind": "Deployment"}), "kind"),
        (json!({"apiVersion": "apps/v1"}), "apiVersion"),
    ] {
        let (at, message) = decode(pod.clone()).expect_err("refused");
        assert_eq!(at, path, "{pod}: {message}");
    }
    let (_, message) = decode(json!({"kind": "Deployment"})).expect_err("refused");
    assert!(message.contains("expected \"Pod\""), "{message}");
}

#[test]
fn a_pod_without_spec_or_metadata_decodes_with_none_and_defaults() {
    let pod = decode(json!({"metadata": null, "spec": null})).expect("decodes");
    assert_eq!(pod, Pod::default());
    assert!(decode(json!({})).expect("decodes").spec.is_none());
}

#[test]
fn a_daemon_set_is_read_as_its_template() {
    let text = json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
            "metadata": {"labels": {"app": "agent"}},
            "spec": {"containers": [], "tolerations": [{"operator": "Exists"}]}}}
    })
    .to_string();
    let trail = Trail::default();
    let pod = DaemonSetSeed { trail: &trail }
        .deserialize(&mut serde_json::Deserializer::from_str(&text))
        .expect("decodes");
    assert_eq!(pod.metadata.labels.map(|l| l.len()), Some(1));
    assert_eq!(pod.spec.and_then(|s| s.tolerations).map(|t| t.len()), Some(1));
    let wrong = json!({"spec": {"template": {"spec": {"tolerations": 1}}}}).to_string();
    let err = DaemonSetSeed { trail: &trail }
        .deserialize(&mut serde_json::Deserializer::from_str(&wrong))
        .expect_err("refused");
    assert_eq!(trail.path(), "spec.template.spec.tolerations", "{err}");
}

#[test]
fn the_qos_fields_are_read_when_they_have_the_api_s_shape_and_skipped_otherwise() {
    let pod = decode(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "100m"}}}],
            "initContainers": [{"name": "i"}], "resources": {"limits": {"memory": "1Gi"}}},
        "status": {"qosClass": "Burstable", "phase": "Pending"}
    }))
    .expect("decodes");
    assert_eq!(pod.status_qos_class.as_deref(), Some("Burstable"));
    let spec = pod.spec.expect("a spec");
    let requests = spec
        .containers
        .as_ref()
        .and_then(|c| c[0].resources.as_ref())
        .and_then(|r| r.requests.as_ref());
    assert_eq!(requests.map(|r| r["cpu"].0.as_str()), Some("100m"));
    assert_eq!(spec.init_containers.map(|c| c.len()), Some(1));
    assert!(spec.resources.is_some_and(|r| r.limits.is_some()));
    let odd = decode(json!({"spec": {"containers": "nginx"}, "status": 3})).expect("decodes");
    assert_eq!(odd.spec.and_then(|s| s.containers), None);
    assert_eq!(odd.status_qos_class, None);
}

#[test]
fn the_qos_fields_are_skipped_unread_where_no_webhook_decides_by_them() {
    let pod = read(
        json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
                "initContainers": [{"name": "i"}], "resources": {"limits": {"memory": "1Gi"}},
                "nodeSelector": {"pool": "ci"}},
            "status": {"qosClass": "Burstable"}
        }),
        false,
    )
    .expect("decodes");
    assert_eq!(pod.status_qos_class, None);
    let spec = pod.spec.expect("a spec");
    assert_eq!(
        (spec.containers, spec.init_containers, spec.resources),
        (None, None, None)
    );
    assert_eq!(spec.node_selector.map(|s| s.len()), Some(1));
}
