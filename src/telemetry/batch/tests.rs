use std::sync::{Arc, Mutex};

use serde_json::Value;
use tracing::{Subscriber, span};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt as _};

use super::*;
use crate::telemetry::JsonLayer;

#[test]
fn a_field_batch_records_its_values_in_one_pass_and_leaves_the_missing_ones_empty() {
    static BATCH: FieldBatch<3> = FieldBatch::new(["a", "b", "c"]);
    /// Counts the passes through the layers.
    struct Passes(Arc<Mutex<usize>>);
    impl<S: Subscriber> Layer<S> for Passes {
        fn on_record(&self, _: &span::Id, _: &span::Record<'_>, _: Context<'_, S>) {
            if let Ok(mut n) = self.0.lock() {
                *n += 1;
            }
        }
    }
    let buffer = pod_director_testkit::LogCapture::default();
    let passes = Arc::new(Mutex::new(0));
    let subscriber = tracing_subscriber::registry()
        .with(JsonLayer::new(buffer.clone()))
        .with(Passes(passes.clone()));
    tracing::subscriber::with_default(subscriber, || {
        let span = |name: &str| {
            let span = tracing::info_span!(
                "batch",
                a = tracing::field::Empty,
                b = tracing::field::Empty,
                c = tracing::field::Empty
            );
            BATCH.record(&span, [Some(&name), None, Some(&3_i64)]);
            span.in_scope(|| tracing::info!("x"));
        };
        span("first");
        span("second");
        // Another callsite with the same names: recorded field by field.
        let other = tracing::info_span!("other", a = tracing::field::Empty, c = tracing::field::Empty);
        BATCH.record(&other, [Some(&"third"), Some(&true), None]);
        other.in_scope(|| tracing::info!("y"));
    });
    let lines: Vec<Value> = buffer
        .text()
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is JSON"))
        .collect();
    assert_eq!(lines[0]["a"], "first");
    assert_eq!(lines[0]["c"], 3);
    assert!(lines[0].get("b").is_none(), "{}", lines[0]);
    assert_eq!(lines[1]["a"], "second");
    assert_eq!(lines[2]["a"], "third");
    assert!(lines[2].get("b").is_none(), "undeclared: {}", lines[2]);
    assert_eq!(
        passes.lock().map(|n| *n).unwrap_or_default(),
        3,
        "one pass per batch on its callsite"
    );
}
