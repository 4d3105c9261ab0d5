//! The revision of a message and the `bytes` of a part, byte-identical to CodeNomad's
//! JavaScript.
//!
//! Source: CodeNomad `revision.ts` and docs/ARCHITECTURE.md, "Revision". The revision is the
//! lowercase hex
//! SHA-256 of `JSON.stringify(canonical(content))`, where `canonical` sorts object keys by UTF-16
//! code units (JS `<`) and keeps array order. Because `canonical` builds JavaScript objects,
//! integer-like keys (`"0"`, `"9"`, `"10"`) still come first in numeric order, as in every
//! JavaScript object; the same holds for the stored order `JSON.parse` produces. `bytes` of a part is the UTF-8 length of
//! `JSON.stringify(part)` in stored key order (serde_json's `preserve_order` keeps it).
//!
//! `JSON.stringify` rules followed here: only `"`, `\` and control characters below U+0020 are
//! escaped (`\b \f \n \r \t` by name, the rest as lowercase `\u00xx`); everything else, non-ASCII
//! included, is written raw (see the private `escape` module). Numbers go through
//! an IEEE double and JavaScript's shortest round-trip formatting (`1.0` -> `1`, `1e21` ->
//! `1e+21`, `-0` -> `0`, via ryu-js).

use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};

/// Writes `value` as `JSON.stringify` would, with object keys in stored order.
pub fn stringify(value: &Value) -> String {
    let mut out = Vec::new();
    write_json(value, &mut out, KeyOrder::Stored);
    // Only whole UTF-8 strings and ASCII punctuation were written.
    String::from_utf8(out).unwrap_or_default()
}

/// Writes `value` as `JSON.stringify(canonical(value))`: object keys sorted by UTF-16 code units.
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::new();
    write_json(value, &mut out, KeyOrder::Utf16);
    String::from_utf8(out).unwrap_or_default()
}

/// Revision of a message content array (its parts in order): 64 lowercase hex characters.
///
/// The canonical JSON is streamed into the hash; it is never held in memory whole.
pub fn revision<'a>(content: impl IntoIterator<Item = &'a Value>) -> String {
    measure(content).revision
}

/// The revision of a content array and the `bytes` of each of its parts, in one pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Measured {
    /// Revision of the whole content (64 lowercase hex).
    pub revision: String,
    /// `bytes` of each part, in content order.
    pub bytes: Vec<u64>,
}

/// Hashes the canonical JSON of `content` and counts each part's length on the way.
///
/// A part's `bytes` is the length of `JSON.stringify(part)` in stored key order; key order does
/// not change a length, so the canonical text's length is the same number.
pub fn measure<'a>(content: impl IntoIterator<Item = &'a Value>) -> Measured {
    let mut sink = HashSink {
        hasher: Sha256::new(),
        written: 0,
        scratch: Vec::new(),
    };
    let mut bytes = Vec::new();
    sink.put(b"[");
    for (i, part) in content.into_iter().enumerate() {
        if i > 0 {
            sink.put(b",");
        }
        let before = sink.written;
        write_json(part, &mut sink, KeyOrder::Utf16);
        bytes.push(sink.written - before);
    }
    sink.put(b"]");
    Measured {
        revision: hex::encode(sink.hasher.finalize()),
        bytes,
    }
}

/// `bytes` of one part: UTF-8 length of `JSON.stringify(part)` in stored key order, counted
/// without building the text.
pub fn part_bytes(part: &Value) -> u64 {
    measure([part]).bytes.first().copied().unwrap_or(0)
}

/// The revision a diffs prune ([`crate::Selection::Diffs`]) is bound to: [`revision`] of the
/// entries of a user message's `summary.diffs`, in order (that of an empty list when the message
/// has none). The content revision of a user message does not cover its `summary`, so this one
/// does: a diffs prune planned against one list of diffs is a `conflict` against another.
pub fn diffs_revision(entries: &[Value]) -> String {
    revision(entries)
}

/// The revision a compaction ([`crate::Selection::SupersededSnapshots`]) is bound to: the
/// lowercase hex SHA-256 of the canonical JSON of `{"aggregateID": session_id, "seq": seq}`,
/// where `seq` is the session's `event_sequence.seq` (the seq of its newest event; `null` when
/// the session has no sequence row). Every event OpenCode appends moves it; a compaction
/// deletes events and appends none, so it leaves it as it was: every range of one session's
/// compaction is bound to the same revision.
pub fn event_log_revision(session_id: &str, seq: Option<i64>) -> String {
    let body = serde_json::json!({ "aggregateID": session_id, "seq": seq });
    sha256_hex(canonical_json(&body).as_bytes())
}

/// The revision a removal of migrated rows ([`crate::Selection::MigratedV1`]) is bound to: the
/// lowercase hex SHA-256 of the rows as stored, each row its id and its `data` text, each of
/// them as its byte length (8 bytes, little-endian) and its bytes, in the order given (the
/// store gives the `message` row first, then its `part` rows by id). Any change to a row, a
/// row more or a row less, is another revision; no rows at all is the revision of what is left
/// after the removal.
pub fn rows_revision<'a>(rows: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut hasher = Sha256::new();
    for (id, data) in rows {
        for field in [id, data] {
            hasher.update((field.len() as u64).to_le_bytes());
            hasher.update(field.as_bytes());
        }
    }
    hex::encode(hasher.finalize())
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[derive(Clone, Copy)]
enum KeyOrder {
    Stored,
    Utf16,
}

/// Where JSON text goes: a buffer, or a hash that counts what it was fed. Neither can fail.
trait Sink {
    fn put(&mut self, bytes: &[u8]);
    fn put_string(&mut self, s: &str);
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
    fn put_string(&mut self, s: &str) {
        escape_into(s, self);
    }
}

/// A SHA-256 fed whole escaped strings at a time (escaped into `scratch` first: one hash update
/// per string instead of one per escaped run).
struct HashSink {
    hasher: Sha256,
    written: u64,
    scratch: Vec<u8>,
}

impl Sink for HashSink {
    fn put(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
        self.written += bytes.len() as u64;
    }
    fn put_string(&mut self, s: &str) {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        escape_into(s, &mut scratch);
        self.put(&scratch);
        self.scratch = scratch;
    }
}

use crate::escape::escape_into;

fn write_json(value: &Value, out: &mut impl Sink, order: KeyOrder) {
    match value {
        Value::Null => out.put(b"null"),
        Value::Bool(true) => out.put(b"true"),
        Value::Bool(false) => out.put(b"false"),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => out.put_string(s),
        Value::Array(items) => {
            out.put(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.put(b",");
                }
                write_json(item, out, order);
            }
            out.put(b"]");
        }
        Value::Object(map) => write_object(map, out, order),
    }
}

fn write_object(map: &Map<String, Value>, out: &mut impl Sink, order: KeyOrder) {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    match order {
        // A JavaScript object lists integer-like keys first, in numeric order, whatever order
        // they were created in; `canonical` creates the others in sorted order.
        KeyOrder::Utf16 => entries.sort_by(|a, b| match (array_index(a.0), array_index(b.0)) {
            (Some(x), Some(y)) => x.cmp(&y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => a.0.encode_utf16().cmp(b.0.encode_utf16()),
        }),
        // `JSON.parse` creates keys in text order, and the object still lists integer-like keys
        // first (a stable sort keeps the rest in text order).
        KeyOrder::Stored => entries.sort_by_key(|(key, _)| match array_index(key) {
            Some(index) => (0, index),
            None => (1, 0),
        }),
    }
    out.put(b"{");
    for (i, (key, item)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.put(b",");
        }
        out.put_string(key);
        out.put(b":");
        write_json(item, out, order);
    }
    out.put(b"}");
}

/// The value of an ECMAScript array index key (`"0"`, `"1"`, ... `"4294967294"`, written
/// without a sign or leading zero), which JavaScript objects list before every other key.
fn array_index(key: &str) -> Option<u32> {
    let bytes = key.as_bytes();
    let canonical_digits = !bytes.is_empty()
        && bytes.len() <= 10
        && bytes.iter().all(u8::is_ascii_digit)
        && (bytes[0] != b'0' || bytes.len() == 1);
    if !canonical_digits {
        return None;
    }
    key.parse::<u64>()
        .ok()
        .filter(|&n| n < u64::from(u32::MAX))
        .map(|n| n as u32)
}

fn write_number(n: &Number, out: &mut impl Sink) {
    // JavaScript holds every JSON number as a double: integers above 2^53 lose precision exactly
    // as `JSON.parse` would lose it (round to nearest, ties to even).
    let double = if let Some(i) = n.as_i64() {
        i as f64
    } else if let Some(u) = n.as_u64() {
        u as f64
    } else {
        n.as_f64().unwrap_or(f64::NAN)
    };
    if !double.is_finite() {
        // JSON.stringify writes NaN and Infinity as null; JSON text cannot hold them anyway.
        out.put(b"null");
    } else if double == 0.0 {
        // Covers -0, which JavaScript prints as 0.
        out.put(b"0");
    } else {
        let mut buffer = ryu_js::Buffer::new();
        out.put(buffer.format_finite(double).as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn numbers_format_as_javascript_does() {
        let v = parse(
            r#"[1.0, 1e21, -0, 0.1, 9007199254740993, 1.5e-7, 123456789012345680000, -2.5, 1e300]"#,
        );
        assert_eq!(
            stringify(&v),
            "[1,1e+21,0,0.1,9007199254740992,1.5e-7,123456789012345680000,-2.5,1e+300]"
        );
    }

    #[test]
    fn strings_escape_only_what_javascript_escapes() {
        let v = json!("q\"b\\\u{8}\u{c}\n\r\t\u{1}\u{1f}\u{7f}é😀\u{2028}/");
        assert_eq!(
            stringify(&v),
            "\"q\\\"b\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\u{7f}é😀\u{2028}/\""
        );
    }

    #[test]
    fn canonical_sorts_keys_by_utf16_code_units() {
        // In UTF-8, U+FF61 (EF BD A1) sorts before U+1F600 (F0 9F 98 80); in UTF-16 the emoji's
        // high surrogate 0xD83D sorts before 0xFF61, so JavaScript puts the emoji first.
        let v = parse(r#"{"｡":1,"😀":2,"b":{"z":1,"a":[{"y":1,"x":2}]},"B":0}"#);
        assert_eq!(
            canonical_json(&v),
            r#"{"B":0,"b":{"a":[{"x":2,"y":1}],"z":1},"😀":2,"｡":1}"#
        );
        assert_eq!(
            stringify(&v),
            r#"{"｡":1,"😀":2,"b":{"z":1,"a":[{"y":1,"x":2}]},"B":0}"#
        );
    }

    #[test]
    fn revision_ignores_key_order_but_not_array_order() {
        let a = vec![parse(r#"{"type":"text","text":"é"}"#)];
        let b = vec![parse(r#"{"text":"é","type":"text"}"#)];
        assert_eq!(revision(&a), revision(&b));
        let c = vec![parse(r#"{"a":1}"#), parse(r#"{"b":1}"#)];
        let d = vec![parse(r#"{"b":1}"#), parse(r#"{"a":1}"#)];
        assert_ne!(revision(&c), revision(&d));
        // sha256("[]")
        assert_eq!(
            revision(&Vec::new()),
            "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"
        );
    }
}
