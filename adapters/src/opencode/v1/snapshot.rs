//! Which part a `message.part.updated.1` snapshot names: its `data`'s `$.part.id`, read as
//! SQLite's `json_extract` reads it, so that every snapshot SQLite (and so every query of the
//! database) sees as a copy of a part is deleted with that part. `JSON.stringify` never writes
//! what would make the two readings differ, but a damaged or hand-edited row can: a key repeated
//! in an object (SQLite takes the first), or a key holding a lone UTF-16 surrogate escape (valid
//! JSON, which a reader decoding keys as UTF-8 rejects). Source: docs/ARCHITECTURE.md, "Storage
//! generations" (V1: every snapshot of a pruned part is deleted).
//!
//! Only the keys on the way to `part.id` and that one value are decoded; every other value is
//! checked as JSON and skipped.
//!
//! [`named`] reads what a compaction's survey needs of any snapshot (its entity, and a part
//! snapshot's message) the same way, in one pass, and says when only SQLite can tell.

use std::fmt;
use std::marker::PhantomData;

use rusqlite::types::ValueRef;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// `$.part.id` of a snapshot's `data`: `None` when the value is not text holding one JSON
/// value, or that value has no `part` object whose `id` is a string (such a snapshot names no
/// part).
pub fn part_id(data: ValueRef<'_>) -> Option<String> {
    let ValueRef::Text(bytes) = data else {
        return None;
    };
    if nested_too_deep(bytes) {
        return None;
    }
    serde_json::from_slice::<PartId>(bytes).ok()?.0
}

/// How deep SQLite's JSON parser nests arrays and objects: text nested deeper is not JSON to
/// it (`JSON_MAX_DEPTH` of SQLite's `json.c`), while `serde_json` skips a value it ignores at
/// any depth.
const SQLITE_JSON_MAX_DEPTH: usize = 1000;

/// Whether `bytes` nest arrays and objects deeper than [`SQLITE_JSON_MAX_DEPTH`] outside
/// strings. Inside a string it jumps from one quote or backslash to the next (`memchr`), so the
/// scan costs little next to the parse.
fn nested_too_deep(bytes: &[u8]) -> bool {
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

/// A JSON value read for `$.part.id`.
struct PartId(Option<String>);

/// A JSON value read for `$.id`.
struct Id(Option<String>);

impl<'de> Deserialize<'de> for PartId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let part = deserializer.deserialize_any(Member::<Id>::named(b"part"))?;
        Ok(PartId(part.and_then(|id| id.0)))
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let id = deserializer.deserialize_any(Member::<serde_json::Value>::named(b"id"))?;
        Ok(Id(id.and_then(|value| value.as_str().map(String::from))))
    }
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
        while let Some(matches) = map.next_key_seed(KeyIs(self.key))? {
            if matches && found.is_none() {
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

/// Reads an object key as its decoded bytes (a lone surrogate escape is kept, not refused) and
/// tells whether it is `.0`.
struct KeyIs(&'static [u8]);

impl<'de> DeserializeSeed<'de> for KeyIs {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_bytes(self)
    }
}

impl<'de> Visitor<'de> for KeyIs {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_bytes<E: de::Error>(self, key: &[u8]) -> Result<bool, E> {
        Ok(self.0 == key)
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<bool, E> {
        self.visit_bytes(key.as_bytes())
    }
}

/// What a snapshot's `data` names, read in one pass: the entity (`$.part.id` of a part
/// snapshot, `$.info.id` of the others) and, of a part snapshot, its message
/// (`$.part.messageID`), each `None` where SQLite's `json_extract` would give no text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Named {
    /// The entity's id.
    pub(crate) entity: Option<String>,
    /// The message a part snapshot names.
    pub(crate) message: Option<String>,
}

/// [`Named`] of `data` (a snapshot of a part when `of_part`, else of a message or session), or
/// `None` when this reading cannot be sure it answers as SQLite's `json_valid` and
/// `json_extract` would, so that the caller asks SQLite (`super::compact::entity_sql`): data
/// that is not text, text that is not strict JSON (RFC 8259) as `serde_json` reads it (a lone
/// surrogate, a number out of range, nesting past 128, JSON5), an id that is an object or an
/// array (`json_extract` answers those as JSON text) or text holding U+0000. Everything it does
/// answer, it answers as SQLite: strict JSON is JSON to SQLite, names are compared decoded, and
/// the first of repeated names counts.
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

/// The members of the object holding the id that [`named`] reads.
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
    /// A string, decoded.
    Text(String),
    /// A number, `true`, `false` or `null`: SQL gives no text for it.
    Scalar,
    /// An object or an array: SQL gives its JSON text, which only SQLite spells.
    Nested,
}

impl Field {
    /// The text SQL would give, `Some(None)` for no text, `None` when only SQLite can tell.
    fn text(self) -> Option<Option<String>> {
        match self {
            Self::Absent | Self::Scalar => Some(None),
            Self::Text(text) if text.contains('\0') => None,
            Self::Text(text) => Some(Some(text)),
            Self::Nested => None,
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

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Field, E> {
        Ok(Field::Text(text.to_string()))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Field, A::Error> {
        IgnoredAny.visit_map(map)?;
        Ok(Field::Nested)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Field, A::Error> {
        IgnoredAny.visit_seq(seq)?;
        Ok(Field::Nested)
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

/// Reads an object key as its decoded bytes and tells which of `.0` it is, if any.
struct KeyOf(&'static [&'static [u8]]);

impl<'de> DeserializeSeed<'de> for KeyOf {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_bytes(self)
    }
}

impl<'de> Visitor<'de> for KeyOf {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_bytes<E: de::Error>(self, key: &[u8]) -> Result<Self::Value, E> {
        Ok(self.0.iter().position(|name| *name == key))
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Self::Value, E> {
        self.visit_bytes(key.as_bytes())
    }
}
