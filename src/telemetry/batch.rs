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
mod tests;
