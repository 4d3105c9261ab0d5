//! The revision of a message and the `bytes` of a part, byte-identical to CodeNomad's
//! JavaScript.
//!
//! Source: CodeNomad `revision.ts` and DESIGN.md "Revision". The revision is the lowercase hex
//! SHA-256 of `JSON.stringify(canonical(content))`, where `canonical` sorts object keys by UTF-16
//! code units (JS `<`) and keeps array order. `bytes` of a part is the UTF-8 length of
//! `JSON.stringify(part)` in stored key order (serde_json's `preserve_order` keeps it).
//!
//! `JSON.stringify` rules copied here: only `"`, `\` and control characters below U+0020 are
//! escaped (`\b \f \n \r \t` by name, the rest as lowercase `\u00xx`); everything else, non-ASCII
//! included, is written raw. Numbers go through an IEEE double and JavaScript's shortest
//! round-trip formatting (`1.0` -> `1`, `1e21` -> `1e+21`, `-0` -> `0`).

use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};

/// Writes `value` as `JSON.stringify` would, with object keys in stored order.
pub fn stringify(value: &Value) -> String {
    let mut out = String::new();
    write_value(value, &mut out, KeyOrder::Stored);
    out
}

/// Writes `value` as `JSON.stringify(canonical(value))`: object keys sorted by UTF-16 code units.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_value(value, &mut out, KeyOrder::Utf16);
    out
}

/// Revision of a message content array (its parts in order): 64 lowercase hex characters.
pub fn revision<'a>(content: impl IntoIterator<Item = &'a Value>) -> String {
    let mut out = String::from("[");
    for (i, part) in content.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_value(part, &mut out, KeyOrder::Utf16);
    }
    out.push(']');
    sha256_hex(out.as_bytes())
}

/// `bytes` of one part: UTF-8 length of `JSON.stringify(part)` in stored key order.
pub fn part_bytes(part: &Value) -> u64 {
    stringify(part).len() as u64
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

fn write_value(value: &Value, out: &mut String, order: KeyOrder) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(item, out, order);
            }
            out.push(']');
        }
        Value::Object(map) => write_object(map, out, order),
    }
}

fn write_object(map: &Map<String, Value>, out: &mut String, order: KeyOrder) {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    if let KeyOrder::Utf16 = order {
        entries.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
    }
    out.push('{');
    for (i, (key, item)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(key, out);
        out.push(':');
        write_value(item, out, order);
    }
    out.push('}');
}

fn write_number(n: &Number, out: &mut String) {
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
        out.push_str("null");
        return;
    }
    if double == 0.0 {
        out.push('0');
        return;
    }
    let mut buffer = ryu_js::Buffer::new();
    out.push_str(buffer.format_finite(double));
}

fn write_string(s: &str, out: &mut String) {
    out.push('"');
    let mut start = 0;
    for (i, byte) in s.bytes().enumerate() {
        let escape: Option<&str> = match byte {
            b'"' => Some("\\\""),
            b'\\' => Some("\\\\"),
            0x08 => Some("\\b"),
            0x0c => Some("\\f"),
            b'\n' => Some("\\n"),
            b'\r' => Some("\\r"),
            b'\t' => Some("\\t"),
            0x00..=0x1f => None,
            _ => continue,
        };
        out.push_str(&s[start..i]);
        match escape {
            Some(text) => out.push_str(text),
            None => {
                out.push_str("\\u00");
                out.push(char::from(HEX[usize::from(byte >> 4)]));
                out.push(char::from(HEX[usize::from(byte & 0xf)]));
            }
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

const HEX: &[u8; 16] = b"0123456789abcdef";

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
