//! The decision log line and span: one line per review, with exactly the documented fields.

use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use serde_json::{Value, json};

use super::super::*;
use super::*;
use crate::telemetry::DECISION_TARGET;
use crate::testing::StaticNamespaces;
use pod_director_engine::testing::with;
use pod_director_testkit::json_pointers;

/// `/mutate` of `body` on an empty configuration, under `layer` alone.
fn review_under(layer: impl tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync, body: &Value) {
    use tracing_subscriber::layer::SubscriberExt as _;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        let admission = admission(Arc::new(StaticNamespaces::new()));
        runtime.block_on(admission.review(Webhook::Mutate, &http::HeaderMap::new(), &bytes(body)));
    });
}

#[test]
fn each_review_writes_one_decision_line_with_the_documented_fields() {
    let captured = pod_director_testkit::LogCapture::default();
    review_under(
        telemetry::JsonLayer::new(captured.clone()),
        &with(review(), "/request/dryRun", json!(true)),
    );
    let text = captured.text();
    let decisions: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["target"] == DECISION_TARGET)
        .collect();
    assert_eq!(decisions.len(), 1, "{text}");
    let line = &decisions[0];
    assert_eq!(line["message"], "admission decision");
    assert_eq!(line["webhook"], "mutate");
    assert_eq!(line["admission.request.uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_eq!(line["admission.request.operation"], "CREATE");
    assert_eq!(line["admission.request.dryrun"], true);
    assert_eq!(line["admission.request.namespace"], "team-ci");
    assert_eq!(line["admission.object.generate_name"], "web-7c9f8d-");
    assert_eq!(line["admission.object.owner.kind"], "ReplicaSet");
    assert_eq!(line["admission.object.owner.name"], "web-7c9f8d");
    assert!(line["placement.decision"].is_string());
    assert!(line["placement.patch.json"].is_array(), "patch is real JSON: {line}");
    assert!(line["placement.patch.paths"].is_array());
    assert!(line["placement.patch.op_count"].is_u64());
    assert!(line["config.revision"].is_string());
    assert!(line["latency_ms"].is_f64());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic_the_decoder(body in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let _ = parse(Webhook::Mutate, &body);
    }

    #[test]
    fn any_single_field_replaced_in_a_real_review_is_parsed_or_rejected_cleanly(
        index in 0usize..64,
        replacement in prop_oneof![
            Just(Value::Null), Just(json!(0)), Just(json!(-1)), Just(json!("")), Just(json!("x")),
            Just(json!([])), Just(json!({})), Just(json!(true)), Just(json!(1.5e300)),
        ],
    ) {
        let mut body = review();
        let pointers = json_pointers(&body);
        let pointer = &pointers[index % pointers.len()];
        if let Some(slot) = body.pointer_mut(pointer) {
            *slot = replacement;
        }
        match parse(Webhook::Mutate, &bytes(&body)) {
            Ok(parsed) => prop_assert!(!parsed.request.uid.is_empty()),
            Err(rejected) => {
                let review = render_error(rejected.uid.as_deref(), &rejected.error);
                prop_assert!(to_wire(review).is_ok());
            }
        }
    }

    #[test]
    fn truncated_reviews_are_rejected(cut in 1usize..1500) {
        let body = bytes(&review());
        let cut = cut.min(body.len() - 1);
        prop_assert!(parse(Webhook::Mutate, &body[..cut]).is_err());
    }
}

/// Names of the fields declared by the decision span and the decision event.
#[derive(Clone, Default)]
struct Declared(Arc<Mutex<Vec<String>>>);

impl Declared {
    fn push(&self, fields: &tracing::field::FieldSet) {
        if let Ok(mut names) = self.0.lock() {
            names.extend(fields.iter().map(|f| f.name().to_owned()));
        }
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Declared {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _: &tracing::span::Id,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if attrs.metadata().target() == DECISION_TARGET {
            self.push(attrs.metadata().fields());
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().target() == DECISION_TARGET {
            self.push(event.metadata().fields());
        }
    }
}

#[test]
fn the_documented_decision_fields_are_exactly_the_declared_ones() {
    let declared = Declared::default();
    review_under(declared.clone(), &review());
    let mut names: Vec<String> = declared
        .0
        .lock()
        .map(|n| n.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n != "message" && !n.starts_with("otel."))
        .collect();
    names.sort();
    names.dedup();
    let mut documented: Vec<String> = telemetry::DECISION_FIELDS.iter().map(|s| (*s).to_owned()).collect();
    documented.sort();
    assert_eq!(names, documented);
}
