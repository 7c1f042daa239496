//! The fields of a pod's QoS class (the in-tree plugins'): read at the webhooks that decide by
//! them only, in the object's one pass, and never an error when they lack the API's shape.

use serde_json::json;

use super::super::*;
use super::{bytes, pod_object};
use pod_director_engine::decision::Write;
use pod_director_testkit::fixtures::Review;

#[test]
fn the_qos_class_s_fields_are_read_for_the_in_tree_webhooks_only() {
    let mut object = pod_object();
    object["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "100m"}});
    object["status"] = json!({"qosClass": "Burstable"});
    for body in [
        Review::pod("CREATE", object.clone()).bytes(),
        bytes(&Review::pod("CREATE", object.clone()).value()),
    ] {
        for webhook in [
            Webhook::Mutate,
            Webhook::Validate,
            Webhook::ValidateReservation,
            Webhook::MutateInTree,
        ] {
            let parsed = parse(webhook, &body).expect("parses");
            let Reviewed::Pod(Write::Create(pod)) = parsed.subject else {
                panic!("expected a pod CREATE");
            };
            let read = matches!(webhook, Webhook::MutateInTree);
            let spec = pod.spec.as_ref().expect("a spec");
            assert_eq!(spec.containers.is_some(), read, "{webhook:?}");
            assert_eq!(pod.status_qos_class.is_some(), read, "{webhook:?}");
            assert_eq!(pod_director_engine::in_tree::best_effort(&pod), !read, "{webhook:?}");
        }
    }
}

#[test]
fn qos_fields_without_the_api_s_shape_are_read_as_none_and_the_rest_of_the_pod_as_ever() {
    let mut object = pod_object();
    object["spec"]["containers"] = json!("nginx");
    object["spec"]["resources"] = json!({"requests": "cpu"});
    object["spec"]["nodeSelector"] = json!({"pool": "ci"});
    object["status"] = json!({"qosClass": ["Burstable"]});
    let review = Review::pod("CREATE", object.clone());
    // The object decoded in the review's pass (the API server's order), and kept raw then decoded.
    for body in [review.bytes(), bytes(&review.value())] {
        let parsed = parse(Webhook::MutateInTree, &body).expect("parses");
        let Reviewed::Pod(Write::Create(pod)) = parsed.subject else {
            panic!("expected a pod CREATE");
        };
        let spec = pod.spec.as_ref().expect("a spec");
        assert_eq!((&spec.containers, &spec.resources), (&None, &None));
        assert_eq!(pod.status_qos_class, None);
        assert_eq!(spec.node_selector.as_ref().map(|s| s["pool"].as_str()), Some("ci"));
    }
    // A placement field of the wrong type is still refused, naming it, after the second reading.
    let mut wrong = object;
    wrong["spec"]["tolerations"] = json!("all");
    let wrong = Review::pod("CREATE", wrong);
    for body in [wrong.bytes(), bytes(&wrong.value())] {
        let rejected = parse(Webhook::MutateInTree, &body).expect_err("refused");
        assert!(
            matches!(&rejected.error, AdmissionError::InvalidObject { field: "object", at, .. } if at == "spec.tolerations"),
            "{:?}",
            rejected.error
        );
    }
}
