//! Recording several fields of a span in one pass through the subscriber's layers.

use std::sync::OnceLock;

use tracing::field::Field;

/// Fields of one span callsite recorded together: one pass through the
/// subscriber's layers for all of them, where each `Span::record` is one pass
/// per field. The fields are looked up by name once, on the first span.
pub struct FieldBatch<const N: usize> {
    names: [&'static str; N],
    fields: OnceLock<Option<[Field; N]>>,
}

impl<const N: usize> FieldBatch<N> {
    pub const fn new(names: [&'static str; N]) -> Self {
        Self {
            names,
            fields: OnceLock::new(),
        }
    }

    /// Records `values[i]` as field `names[i]` of `span` (`None`: left as it is).
    pub fn record(&self, span: &tracing::Span, values: [Option<&dyn tracing::Value>; N]) {
        let Some(meta) = span.metadata() else {
            return;
        };
        let fields = self.fields.get_or_init(|| {
            let found: Option<Vec<Field>> = self.names.iter().map(|name| meta.fields().field(name)).collect();
            found.and_then(|found| found.try_into().ok())
        });
        match fields {
            // The span of the callsite the fields were looked up on (one callsite per batch).
            Some(fields) if fields.iter().all(|f| f.callsite() == meta.callsite()) => {
                let pairs: [(&Field, Option<&dyn tracing::Value>); N] =
                    std::array::from_fn(|i| (&fields[i], values[i]));
                span.record_all(&meta.fields().value_set(&pairs));
            }
            // Another callsite, or a name it does not declare: field by field (undeclared ones are ignored).
            _ => {
                for (name, value) in self.names.iter().zip(values) {
                    if let Some(value) = value {
                        span.record(*name, value);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
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
}
