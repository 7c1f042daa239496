use serde_json::json;

use super::*;

#[test]
fn a_full_pod_and_a_template_convert_to_the_same_placement_fields() {
    let full: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c"}], "nodeSelector": {"pool": "ci"}}
    }))
    .expect("a Pod");
    let lean = Pod::from(&full);
    assert_eq!(lean.metadata.name.as_deref(), Some("web"));
    assert_eq!(
        lean.spec.as_ref().and_then(|s| s.node_selector.clone()),
        Some(BTreeMap::from([("pool".into(), "ci".into())]))
    );
    let template = PodTemplateSpec {
        metadata: Some(full.metadata.clone()),
        spec: full.spec.clone(),
    };
    assert_eq!(Pod::from_template(&template), lean);
    let decoded: Pod = serde_json::from_value(serde_json::to_value(&full).expect("JSON")).expect("decodes");
    assert_eq!(decoded, lean);
}
