//! The JSON log layer: one object per line, the fields of every enclosing span and of the
//! event flattened under their own names (see the module docs of `telemetry`).

use std::fmt;
use std::io::Write as _;

use tracing::field::{Field, Visit};
use tracing::span;
use tracing::{Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use super::JSON_FIELDS;

/// Named values, each already encoded as JSON text, in the order their names
/// were first set; setting a name again replaces the value. Values are encoded
/// once, when recorded, into one buffer (one allocation for a span's fields,
/// not one per field), and copied into each line as text.
#[derive(Debug, Default, Clone)]
struct Fields {
    /// Each name and where its JSON text is in `json`.
    names: Vec<(&'static str, std::ops::Range<usize>)>,
    json: Vec<u8>,
}

impl Fields {
    /// A buffer sized for a decision span's fields.
    fn with_capacity(names: usize, bytes: usize) -> Self {
        Self {
            names: Vec::with_capacity(names),
            json: Vec::with_capacity(bytes),
        }
    }

    /// Sets `name` to the JSON text `write` appends to the buffer. A replaced
    /// value's text stays in the buffer unused (values are rarely set twice).
    fn set(&mut self, name: &'static str, write: impl FnOnce(&mut Vec<u8>)) {
        let start = self.json.len();
        write(&mut self.json);
        let range = start..self.json.len();
        match self.names.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = range,
            None => self.names.push((name, range)),
        }
    }

    fn get(&self, name: &str) -> Option<&[u8]> {
        let (_, range) = self.names.iter().find(|(n, _)| *n == name)?;
        self.json.get(range.clone())
    }

    /// Every name with its JSON text.
    fn iter(&self) -> impl Iterator<Item = (&'static str, &[u8])> {
        self.names
            .iter()
            .map(|(name, range)| (*name, self.json.get(range.clone()).unwrap_or_default()))
    }

    fn insert(&mut self, field: &Field, write: impl FnOnce(&mut Vec<u8>)) {
        let name = field.name();
        // `otel.*` fields steer the exporter (span name, kind); they are not log fields.
        if !name.starts_with("otel.") {
            self.set(name, write);
        }
    }
}

/// `text` as a JSON string.
pub(super) fn json_string(text: &str) -> String {
    // Serializing a string cannot fail.
    serde_json::to_string(text).unwrap_or_else(|_| "null".to_owned())
}

/// Appends `text` as a JSON string.
fn write_json_string(out: &mut Vec<u8>, text: &str) {
    // Serializing a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, text);
}

/// Appends `text` as a JSON value when it is JSON (kept on one line), else as a string.
fn write_json_value(out: &mut Vec<u8>, text: &str) {
    if serde_json::from_str::<serde::de::IgnoredAny>(text).is_err() {
        return write_json_string(out, text);
    }
    if text.contains(['\n', '\r']) {
        // Valid JSON with line breaks between tokens: re-encoded compactly so the line stays one line.
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(value) => {
                let _ = serde_json::to_writer(&mut *out, &value);
            }
            Err(_) => write_json_string(out, text),
        }
        return;
    }
    out.extend_from_slice(text.trim().as_bytes());
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if JSON_FIELDS.contains(&field.name()) {
            self.insert(field, |out| write_json_value(out, value));
        } else {
            self.insert(field, |out| write_json_string(out, value));
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.insert(field, |out| {
            out.extend_from_slice(if value { b"true" } else { b"false" })
        });
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.insert(field, |out| {
            let _ = serde_json::to_writer(out, &value);
        });
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.insert(field, |out| {
            let _ = serde_json::to_writer(out, &value);
        });
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        // JSON has no NaN or infinity; serde_json writes them as null.
        self.insert(field, |out| {
            let _ = serde_json::to_writer(out, &value);
        });
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.record_str(field, &value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // `%value` arrives here too; its Debug is the Display text.
        self.record_str(field, &format!("{value:?}"));
    }
}

/// Writes each event as one flat JSON object (see the module docs).
pub struct JsonLayer<W> {
    make_writer: W,
}

impl<W> JsonLayer<W> {
    pub fn new(make_writer: W) -> Self {
        Self { make_writer }
    }
}

impl<S, W> Layer<S> for JsonLayer<W>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + 'static,
{
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            // Room for every field the span declares (a decision span's line is about 1.5 KB).
            let declared = attrs.metadata().fields().len();
            let mut fields = Fields::with_capacity(declared, declared * 40);
            attrs.record(&mut fields);
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<Fields>()
        {
            values.record(fields);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let meta = event.metadata();
        let mut own = Fields::with_capacity(4, 256);
        event.record(&mut own);
        // Enclosing spans' fields are read in place, under their extension guards.
        let spans: Vec<_> = ctx
            .event_scope(event)
            .map(|scope| scope.from_root().collect())
            .unwrap_or_default();
        let extensions: Vec<_> = spans.iter().map(|span| span.extensions()).collect();
        let sources: Vec<&Fields> = extensions
            .iter()
            .filter_map(|extensions| extensions.get::<Fields>())
            .chain([&own])
            .collect();

        // timestamp, level, target, message first; then span fields (outermost first), then the
        // event's. A name set again later replaces the earlier value in place.
        let mut entries: Vec<(&'static str, &[u8])> =
            Vec::with_capacity(sources.iter().map(|f| f.names.len()).sum::<usize>());
        for (at, fields) in sources.iter().enumerate() {
            for (name, json) in fields.iter() {
                if name == "message" {
                    continue;
                }
                // The first source's names are unique; later ones may repeat an earlier name.
                match (at > 0).then(|| entries.iter_mut().find(|(n, _)| *n == name)).flatten() {
                    Some(slot) => slot.1 = json,
                    None => entries.push((name, json)),
                }
            }
        }
        let size = entries.iter().map(|(n, v)| n.len() + v.len() + 4).sum::<usize>();
        let mut line = Vec::with_capacity(size + 160);
        line.extend_from_slice(b"{\"timestamp\":\"");
        let mut timestamp = String::with_capacity(32);
        if SystemTime
            .format_time(&mut tracing_subscriber::fmt::format::Writer::new(&mut timestamp))
            .is_ok()
        {
            line.extend_from_slice(timestamp.as_bytes());
        }
        line.extend_from_slice(b"\",\"level\":");
        write_json_string(&mut line, meta.level().as_str());
        line.extend_from_slice(b",\"target\":");
        write_json_string(&mut line, meta.target());
        if let Some(message) = own.get("message") {
            line.extend_from_slice(b",\"message\":");
            line.extend_from_slice(message);
        }
        for (name, json) in &entries {
            line.push(b',');
            // Field names are identifiers from the source; escaped all the same.
            write_json_string(&mut line, name);
            line.push(b':');
            line.extend_from_slice(json);
        }
        line.extend_from_slice(b"}\n");
        // A log line that cannot be written has nowhere else to go.
        let _ = self.make_writer.make_writer_for(meta).write_all(&line);
    }
}
