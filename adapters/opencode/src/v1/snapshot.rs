//! What a snapshot event names, read from its `data` in one pass: the entity (`$.part.id` of a
//! `message.part.updated.1` snapshot, `$.info.id` of the others) and, of a part snapshot, its
//! message (`$.part.messageID`). The rule is SQLite's: `json_extract` of data `json_valid` calls
//! JSON (`super::compact::entity_sql`), so that every snapshot SQLite (and so every query of the
//! database, `stats` and the restore's check among them) sees as a copy is the one a compaction
//! or a prune deletes. Source: docs/ARCHITECTURE.md, "Copies OpenCode keeps".
//!
//! [`named`] answers only where it is sure to answer as SQLite would, and leaves everything else
//! to SQLite (`super::compact::named` asks it): `JSON.stringify` never writes what would make the
//! two readings differ, but a damaged or hand-edited row can. What it leaves: text that is not
//! strict JSON (RFC 8259) as `serde_json` reads it, nesting past SQLite's depth, an object key
//! holding an escape or a control character on the way to the id (SQLite compares escaped names
//! its own way: up to a decoded U+0000, reading malformed UTF-8 leniently; it calls a raw control
//! character JSON5), an id or message id that holds an escape, or is an object or an array
//! (`json_extract` answers those as JSON text).
//!
//! Only the keys on the way to the ids and those values are decoded; every other value is
//! checked as JSON and skipped.

use std::fmt;
use std::marker::PhantomData;

use rusqlite::types::ValueRef;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// How deep SQLite's JSON parser nests arrays and objects: text nested deeper is not JSON to
/// it (`JSON_MAX_DEPTH` of SQLite's `json.c`), while `serde_json` skips a value it ignores at
/// any depth.
const SQLITE_JSON_MAX_DEPTH: usize = 1000;

/// What a snapshot's `data` names, each `None` where SQLite's `json_extract` gives no text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Named {
    /// The entity's id.
    pub(crate) entity: Option<String>,
    /// The message a part snapshot names (`None` for the other kinds).
    pub(crate) message: Option<String>,
}

/// [`Named`] of `data` (a part snapshot's when `of_part`, else a message's or a session's), or
/// `None` when this reading cannot be sure it answers as SQLite's `json_valid` and
/// `json_extract` would (see the module's docs): the caller then asks SQLite.
pub(crate) fn named(data: ValueRef<'_>, of_part: bool) -> Option<Named> {
    let ValueRef::Text(bytes) = data else {
        return None;
    };
    if nested_too_deep(bytes) {
        return None;
    }
    let holder: &'static [u8] = if of_part { b"part" } else { b"info" };
    let mut json = serde_json::Deserializer::from_slice(bytes);
    let read = (&mut json)
        .deserialize_any(Member::<Holder>::named(holder))
        .ok()?;
    json.end().ok()?;
    let holder = read.unwrap_or_default();
    let message = if of_part {
        holder.message
    } else {
        Field::Absent
    };
    Some(Named {
        entity: holder.id.text()?,
        message: message.text()?,
    })
}

/// Whether `bytes` nest arrays and objects deeper than [`SQLITE_JSON_MAX_DEPTH`] outside
/// strings. Text holding no more opening brackets than that depth cannot nest past it, and
/// counting them is one pass the compiler vectorizes, which never stops (a snapshot of shell
/// output holds an escape every line, where a walk from quote to quote would stop at each). Text
/// holding more is walked: inside a string from one quote or backslash to the next (`memchr`).
fn nested_too_deep(bytes: &[u8]) -> bool {
    if openings(bytes) <= SQLITE_JSON_MAX_DEPTH {
        return false;
    }
    let mut depth = 0usize;
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        at += 1;
        match byte {
            b'"' => loop {
                let Some(found) = memchr::memchr2(b'"', b'\\', &bytes[at.min(bytes.len())..])
                else {
                    return false;
                };
                at += found + 1;
                if bytes[at - 1] == b'"' {
                    break;
                }
                // A backslash: the byte it escapes is no quote.
                at += 1;
            },
            b'[' | b'{' => {
                depth += 1;
                if depth > SQLITE_JSON_MAX_DEPTH {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// How many `[` and `{` bytes `bytes` holds. They are the bytes that are `{` once bit 0x20 is
/// set; each run of at most 255 bytes is counted in a byte, which the compiler vectorizes.
fn openings(bytes: &[u8]) -> usize {
    bytes
        .chunks(255)
        .map(|run| {
            let found = run
                .iter()
                .fold(0u8, |found, &byte| found + u8::from(byte | 0x20 == b'{'));
            usize::from(found)
        })
        .sum()
}

/// Visits a JSON value for one member of an object: the member whose key is `key` read as `T`
/// (the first one when the key repeats); `None` when the value is not an object or has no such
/// key.
struct Member<T> {
    key: &'static [u8],
    value: PhantomData<T>,
}

impl<T> Member<T> {
    fn named(key: &'static [u8]) -> Self {
        Self {
            key,
            value: PhantomData,
        }
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for Member<T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key_seed(KeyOf(&[self.key]))? {
            if key.is_some() && found.is_none() {
                found = Some(map.next_value::<T>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// The members of the object holding the ids that [`named`] reads.
#[derive(Default)]
struct Holder {
    id: Field,
    message: Field,
}

impl<'de> Deserialize<'de> for Holder {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(HolderVisitor)
    }
}

struct HolderVisitor;

impl<'de> Visitor<'de> for HolderVisitor {
    type Value = Holder;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Holder, A::Error> {
        let mut holder = Holder::default();
        while let Some(key) = map.next_key_seed(KeyOf(&[b"id", b"messageID"]))? {
            let slot = match key {
                Some(0) => &mut holder.id,
                Some(_) => &mut holder.message,
                None => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            if matches!(slot, Field::Absent) {
                *slot = map.next_value::<Field>()?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(holder)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Holder, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Holder::default())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Holder, E> {
        Ok(Holder::default())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Holder, E> {
        Ok(Holder::default())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Holder, E> {
        Ok(Holder::default())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Holder, E> {
        Ok(Holder::default())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Holder, E> {
        Ok(Holder::default())
    }

    fn visit_unit<E: de::Error>(self) -> Result<Holder, E> {
        Ok(Holder::default())
    }
}

/// One member's value as [`named`] needs it.
#[derive(Default)]
enum Field {
    /// No such member (SQL NULL).
    #[default]
    Absent,
    /// A string without escapes.
    Text(String),
    /// A number, `true`, `false` or `null`: SQL gives no text for it.
    Scalar,
    /// A string with escapes, an object or an array: only SQLite can say what text it gives.
    Unsure,
}

impl Field {
    /// The text SQL would give, `Some(None)` for no text, `None` when only SQLite can tell.
    fn text(self) -> Option<Option<String>> {
        match self {
            Self::Absent | Self::Scalar => Some(None),
            Self::Text(text) => Some(Some(text)),
            Self::Unsure => None,
        }
    }
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(FieldVisitor)
    }
}

struct FieldVisitor;

impl<'de> Visitor<'de> for FieldVisitor {
    type Value = Field;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    /// A string read straight from the text: it held no escape (`serde_json` borrows those).
    fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Field, E> {
        Ok(Field::Text(text.to_string()))
    }

    /// A string `serde_json` had to decode: it held an escape.
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Field, E> {
        Ok(Field::Unsure)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Field, A::Error> {
        IgnoredAny.visit_map(map)?;
        Ok(Field::Unsure)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Field, A::Error> {
        IgnoredAny.visit_seq(seq)?;
        Ok(Field::Unsure)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Field, E> {
        Ok(Field::Scalar)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Field, E> {
        Ok(Field::Scalar)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Field, E> {
        Ok(Field::Scalar)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Field, E> {
        Ok(Field::Scalar)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Field, E> {
        Ok(Field::Scalar)
    }
}

/// Reads an object key and tells which of `.0` it is, if any. A key that holds an escape or a
/// control character is an error, so that [`named`] leaves the row to SQLite (see the module's
/// docs): only a key read straight from the text, as SQLite compares a name without escapes
/// (byte for byte), is compared here.
struct KeyOf<'k>(&'k [&'static [u8]]);

impl<'de> DeserializeSeed<'de> for KeyOf<'_> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_bytes(self)
    }
}

impl<'de> Visitor<'de> for KeyOf<'_> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_bytes<E: de::Error>(self, key: &'de [u8]) -> Result<Self::Value, E> {
        if key.iter().any(|&byte| byte < 0x20) {
            return Err(E::custom("a control character in a key"));
        }
        Ok(self.0.iter().position(|name| *name == key))
    }

    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<Self::Value, E> {
        Err(E::custom("an escape in a key"))
    }

    fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<Self::Value, E> {
        self.visit_borrowed_bytes(key.as_bytes())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Err(E::custom("an escape in a key"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Of every byte value, only `[` and `{` are openings, counted past runs of 255 bytes.
    #[test]
    fn openings_count_the_opening_brackets_and_nothing_else() {
        let every_byte: Vec<u8> = (0..=255u8).collect();
        assert_eq!(openings(&every_byte), 2);
        let many = format!("{}{}", "[{".repeat(600), "x]}".repeat(100));
        assert_eq!(openings(many.as_bytes()), 1_200);
    }
}
