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
    serde_json::from_slice::<PartId>(bytes).ok()?.0
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
