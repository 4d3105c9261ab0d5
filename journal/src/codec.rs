//! The record codec: every stored record value is one format-version byte followed by the
//! postcard encoding of the record.
//!
//! Decoding checks the version byte first and refuses anything but [`FORMAT_VERSION`] with
//! [`CodecError::UnknownFormatVersion`]: a record written by another format is an error, never
//! a guess. It also refuses trailing bytes after the value.
//!
//! Intents and events have a second record version, [`RECORD_VERSION`], written only by the
//! records that need it, so that a journal that never restored anything stays readable by a
//! build that reads version 1 alone: an intent whose selection is [`Selection::Restore`] (the
//! same layout as version 1, with that variant added at the end), and an event whose kind is
//! not [`EventKind::Pruned`] (version 1's fields, then `kind`). Version 3 adds variants at the
//! end of both enums, in the same layout: an intent whose selection is [`Selection::Diffs`] or
//! [`Selection::SupersededSnapshots`], and an event whose kind is [`EventKind::Compacted`], are
//! written as version 3, so that a build that reads versions 1 and 2 refuses them by their
//! version, never by a variant it cannot decode. Version 1 records read as before, their events
//! as `Pruned`.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::CodecError;
use crate::record::{CommittedEvent, EventKind, Intent, Selection};

/// The newest intent and event record version this build writes and reads.
pub const RECORD_VERSION: u8 = 5;

/// The record version that added [`Selection::SupersededSnapshotsIn`].
const RANGES_VERSION: u8 = 4;

/// The record version that added [`Selection::Diffs`], [`Selection::SupersededSnapshots`] and
/// [`EventKind::Compacted`].
const COPIES_VERSION: u8 = 3;

/// The record version that added [`Selection::Restore`] and [`EventKind::Restored`].
const RESTORE_VERSION: u8 = 2;

/// The record format this build writes and reads (the leading byte of every record value, and
/// the value of the journal's `format_version` meta entry).
pub const FORMAT_VERSION: u8 = 1;

/// Encodes `value` as `[FORMAT_VERSION] ++ postcard(value)`.
///
/// Errors: [`CodecError::Encode`] if postcard cannot serialize the value.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, CodecError> {
    postcard::to_extend(value, vec![FORMAT_VERSION]).map_err(CodecError::Encode)
}

/// Decodes bytes written by [`encode`].
///
/// Errors: [`CodecError::Empty`] for no bytes at all; [`CodecError::UnknownFormatVersion`] when
/// the first byte is not [`FORMAT_VERSION`]; [`CodecError::Decode`] when the rest is not a
/// valid postcard value of `T`; [`CodecError::TrailingBytes`] when bytes remain after it.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    let (&version, body) = bytes.split_first().ok_or(CodecError::Empty)?;
    check_version(version)?;
    let (value, rest) = postcard::take_from_bytes(body).map_err(CodecError::Decode)?;
    if rest.is_empty() {
        Ok(value)
    } else {
        Err(CodecError::TrailingBytes { count: rest.len() })
    }
}

/// Accepts exactly [`FORMAT_VERSION`].
///
/// Errors: [`CodecError::UnknownFormatVersion`] with `found = version`.
pub fn check_version(version: u8) -> Result<(), CodecError> {
    if version == FORMAT_VERSION {
        Ok(())
    } else {
        Err(CodecError::UnknownFormatVersion {
            found: version,
            supported: FORMAT_VERSION,
        })
    }
}

/// `[version] ++ postcard(value)`.
fn encode_as<T: Serialize>(version: u8, value: &T) -> Result<Vec<u8>, CodecError> {
    postcard::to_extend(value, vec![version]).map_err(CodecError::Encode)
}

/// The value after the version byte, refusing trailing bytes.
fn decode_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, CodecError> {
    let (value, rest) = postcard::take_from_bytes(body).map_err(CodecError::Decode)?;
    if rest.is_empty() {
        Ok(value)
    } else {
        Err(CodecError::TrailingBytes { count: rest.len() })
    }
}

/// The version byte of an intent or event record and the bytes after it.
fn split_record(bytes: &[u8]) -> Result<(u8, &[u8]), CodecError> {
    let (&version, body) = bytes.split_first().ok_or(CodecError::Empty)?;
    if version == 0 || version > RECORD_VERSION {
        return Err(CodecError::UnknownFormatVersion {
            found: version,
            supported: RECORD_VERSION,
        });
    }
    Ok((version, body))
}

/// Encodes an intent: version 1, 2 when its selection is a restore, 3 when it selects diffs or
/// every superseded snapshot of a session, 4 when it selects those of one range, 5 when it
/// selects the OpenCode 1.x rows of a message OpenCode 2 migrated or a `shell` row's output.
///
/// Errors: [`CodecError::Encode`].
pub fn encode_intent(intent: &Intent) -> Result<Vec<u8>, CodecError> {
    let version = match intent.selection {
        Selection::MigratedV1 | Selection::ShellOutput => RECORD_VERSION,
        Selection::SupersededSnapshotsIn { .. } => RANGES_VERSION,
        Selection::Diffs | Selection::SupersededSnapshots => COPIES_VERSION,
        Selection::Restore(_) => RESTORE_VERSION,
        Selection::Indexes(_) | Selection::AllTechnical => FORMAT_VERSION,
    };
    encode_as(version, intent)
}

/// Decodes an intent of version 1 to 5 (one layout, with variants added at the end).
///
/// Errors: as [`decode`], with versions 1 to 5 known.
pub fn decode_intent(bytes: &[u8]) -> Result<Intent, CodecError> {
    let (_, body) = split_record(bytes)?;
    decode_body(body)
}

/// Version 1's event: [`CommittedEvent`] without its kind (always a prune).
#[derive(Serialize, Deserialize)]
struct EventV1 {
    seq: u64,
    event_id: Uuid,
    intent_id: Uuid,
    session_id: String,
    message_id: String,
    revision: String,
    removed_count: u32,
    committed_at_ms: i64,
}

/// Encodes an event: version 1 for a prune's, 2 for a restore's, 3 for a compaction's.
///
/// Errors: [`CodecError::Encode`].
pub fn encode_event(event: &CommittedEvent) -> Result<Vec<u8>, CodecError> {
    match event.kind {
        EventKind::Pruned => encode_as(
            FORMAT_VERSION,
            &EventV1 {
                seq: event.seq,
                event_id: event.event_id,
                intent_id: event.intent_id,
                session_id: event.session_id.clone(),
                message_id: event.message_id.clone(),
                revision: event.revision.clone(),
                removed_count: event.removed_count,
                committed_at_ms: event.committed_at_ms,
            },
        ),
        EventKind::Restored => encode_as(RESTORE_VERSION, event),
        EventKind::Compacted { .. } => encode_as(COPIES_VERSION, event),
    }
}

/// Decodes an event of version 1 (a prune's), 2 or 3 (one layout, with a kind added at the
/// end of [`EventKind`]); no event is written as version 4 or 5, and one read so decodes as
/// 3's.
///
/// Errors: as [`decode`], with versions 1 to 5 known.
pub fn decode_event(bytes: &[u8]) -> Result<CommittedEvent, CodecError> {
    let (version, body) = split_record(bytes)?;
    if version >= RESTORE_VERSION {
        return decode_body(body);
    }
    let v1: EventV1 = decode_body(body)?;
    Ok(CommittedEvent {
        seq: v1.seq,
        event_id: v1.event_id,
        intent_id: v1.intent_id,
        session_id: v1.session_id,
        message_id: v1.message_id,
        revision: v1.revision,
        removed_count: v1.removed_count,
        committed_at_ms: v1.committed_at_ms,
        kind: EventKind::Pruned,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_with_leading_version_byte() {
        let bytes = encode(&(7u64, String::from("x"))).unwrap();
        assert_eq!(bytes[0], FORMAT_VERSION);
        let back: (u64, String) = decode(&bytes).unwrap();
        assert_eq!(back, (7, String::from("x")));
    }

    #[test]
    fn refuses_unknown_version_empty_and_trailing_bytes() {
        let mut bytes = encode(&5u32).unwrap();
        bytes[0] = 2;
        assert_eq!(
            decode::<u32>(&bytes),
            Err(CodecError::UnknownFormatVersion {
                found: 2,
                supported: FORMAT_VERSION
            })
        );
        assert_eq!(decode::<u32>(&[]), Err(CodecError::Empty));
        let mut bytes = encode(&5u32).unwrap();
        bytes.extend_from_slice(&[0, 0]);
        assert_eq!(
            decode::<u32>(&bytes),
            Err(CodecError::TrailingBytes { count: 2 })
        );
    }
}
