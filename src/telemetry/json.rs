//! The JSON log layer: one object per line, the fields of every enclosing span and of the
//! event flattened under their own names (see the module docs of `telemetry`).

use std::fmt;
use std::io::Write as _;

use tracing::field::{Field, Visit};
use tracing::span;
use tracing::{Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::fmt::MakeWriter;
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

/// Appends `text` as a JSON string, byte for byte as serde_json writes it: `"` and `\\` escaped
/// with a backslash, control characters as `\\b`, `\\t`, `\\n`, `\\f`, `\\r` or `\\u00xx`,
/// everything else (UTF-8 included) as it is. The runs between escapes are found eight bytes at a
/// time and copied whole: log lines and responses are mostly such runs.
pub(crate) fn write_json_string(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    while let Some(at) = next_escape(bytes, start) {
        out.extend_from_slice(&bytes[start..at]);
        let byte = bytes[at];
        let short = match byte {
            b'"' => b'"',
            b'\\' => b'\\',
            0x08 => b'b',
            b'\t' => b't',
            b'\n' => b'n',
            0x0c => b'f',
            b'\r' => b'r',
            _ => 0,
        };
        if short == 0 {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 0xf)],
            ]);
        } else {
            out.extend_from_slice(&[b'\\', short]);
        }
        start = at + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// The first byte at or after `from` that a JSON string escapes (`"`, `\\`, below 0x20).
fn next_escape(bytes: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = u64::MAX / 255;
    const HIGH: u64 = ONES << 7;
    let rest = bytes.get(from..)?;
    let mut chunks = rest.chunks_exact(8);
    let mut at = from;
    for chunk in &mut chunks {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let word = u64::from_le_bytes(word);
        // A byte's high bit is set in each mask where that byte is below 0x20, a quote or a backslash
        // (bytes of 0x80 and above never are: `& !word`).
        let control = word.wrapping_sub(ONES * 0x20);
        let quote = (word ^ (ONES * u64::from(b'"'))).wrapping_sub(ONES) & !(word ^ (ONES * u64::from(b'"')));
        let backslash = (word ^ (ONES * u64::from(b'\\'))).wrapping_sub(ONES) & !(word ^ (ONES * u64::from(b'\\')));
        let found = ((control & !word) | quote | backslash) & HIGH;
        if found != 0 {
            // The lowest flagged byte is exact; flags above it may be borrows, and are not read.
            return Some(at + found.trailing_zeros() as usize / 8);
        }
        at += 8;
    }
    let tail = chunks.remainder();
    tail.iter()
        .position(|&b| b < 0x20 || b == b'"' || b == b'\\')
        .map(|i| at + i)
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
            // Room for what a decision span sets (about 20 of its 33 fields, 400 bytes of values),
            // below the 1 KB from which glibc's malloc takes its slow path.
            let declared = attrs.metadata().fields().len();
            let mut fields = Fields::with_capacity(declared.min(24), declared * 24);
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
        // A log line that cannot be written has nowhere else to go.
        let write = |line: &mut Vec<u8>| {
            line.clear();
            write_line(line, meta, &own, &sources);
            let _ = self.make_writer.make_writer_for(meta).write_all(line);
        };
        let reused = LINE.try_with(|cell| match cell.try_borrow_mut() {
            Ok(mut line) => {
                write(&mut line);
                // A rare huge line does not stay allocated.
                if line.capacity() > LINE_KEPT_BYTES {
                    *line = Vec::new();
                }
                true
            }
            Err(_) => false,
        });
        // After the thread's buffer is gone (an event from another thread-local's destructor),
        // or were it ever in use, the line gets a buffer of its own: never a panic.
        if reused != Ok(true) {
            write(&mut Vec::new());
        }
    }
}

thread_local! {
    /// Each thread's line buffer, reused: a decision line is over 1 KB, a size the
    /// allocator serves slowly, and the writer copies the line anyway.
    static LINE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The most a thread's line buffer keeps between lines.
const LINE_KEPT_BYTES: usize = 64 * 1024;

/// timestamp, level, target, message first; then the fields of `sources` (enclosing spans
/// outermost first, then the event's own): each name where it first appears, with the value
/// of the last source that sets it.
fn write_line(line: &mut Vec<u8>, meta: &tracing::Metadata<'_>, own: &Fields, sources: &[&Fields]) {
    line.extend_from_slice(b"{\"timestamp\":\"");
    write_timestamp(line, std::time::SystemTime::now());
    line.extend_from_slice(b"\",\"level\":");
    write_json_string(line, meta.level().as_str());
    line.extend_from_slice(b",\"target\":");
    write_json_string(line, meta.target());
    if let Some(message) = own.get("message") {
        line.extend_from_slice(b",\"message\":");
        line.extend_from_slice(message);
    }
    for (at, fields) in sources.iter().enumerate() {
        for (name, json) in fields.iter() {
            let earlier = sources[..at].iter().any(|f| f.get(name).is_some());
            if name == "message" || earlier {
                continue;
            }
            let json = sources[at + 1..].iter().rev().find_map(|f| f.get(name)).unwrap_or(json);
            line.push(b',');
            // Field names are identifiers from the source; escaped all the same.
            write_json_string(line, name);
            line.push(b':');
            line.extend_from_slice(json);
        }
    }
    line.extend_from_slice(b"}\n");
}

/// Appends `at` as RFC 3339 in UTC with microseconds (`2026-12-01T14:25:13.123456Z`), as
/// tracing-subscriber's `SystemTime` writes it.
pub(super) fn write_timestamp(out: &mut Vec<u8>, at: std::time::SystemTime) {
    let since = at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days, for days since 1970-01-01 (never negative here).
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    let mut digits = |value: u64, width: usize, after: u8| {
        let start = out.len();
        let mut value = value;
        for _ in 0..width {
            out.push(b'0' + (value % 10) as u8);
            value /= 10;
        }
        out[start..].reverse();
        if after != 0 {
            out.push(after);
        }
    };
    digits(year, 4, b'-');
    digits(month, 2, b'-');
    digits(day, 2, b'T');
    digits(rem / 3600, 2, b':');
    digits(rem % 3600 / 60, 2, b':');
    digits(rem % 60, 2, b'.');
    digits(u64::from(since.subsec_micros()), 6, b'Z');
}
