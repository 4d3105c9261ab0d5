//! Retention of the event log: removing the oldest events the [`Retention`] policy allows,
//! and the tombstone (`trimmed_through` in meta) that keeps `last_seq` monotonic and tells a
//! replaying cursor that it missed removed events. Retention of resolved intents: refused and
//! abandoned intents older than the policy's time window are removed, with the request key
//! that points at them (`resolved_trimmed_before` in meta says how far that went).

use redb::ReadableTable;
use uuid::Uuid;

use super::{
    get_last_seq, get_trimmed_through, Journal, StorageResult, EVENTS, INTENTS, META,
    META_RESOLVED_TRIMMED_BEFORE, META_TRIMMED_THROUGH, REQUEST_KEYS,
};
use crate::codec;
use crate::error::{ReadError, WriteError};
use crate::record::{Intent, IntentState};
use crate::retention::Retention;

/// How much older than the policy's window an intent must be before an open writes to remove
/// it: 1 day, so that a steady stream of prunes costs that write about once a day, not at every
/// open.
const RESOLVED_SLACK_MS: i64 = 24 * 60 * 60 * 1000;

impl Journal {
    /// Removes the oldest events that `policy` allows to go at time `now_ms` (ms since epoch),
    /// in one durable write transaction, and records the highest removed seq as the tombstone
    /// ([`Journal::trimmed_through`]). Removal stops at the first event that must stay, so the
    /// removed seqs are always a prefix of the log. Intents are kept; an intent whose event was
    /// removed no longer short-circuits a retry ([`Journal::committed_event_for`] is `None`).
    /// Returns how many events were removed.
    ///
    /// Errors: [`WriteError::Poisoned`] / [`WriteError::Commit`]; [`WriteError::Codec`] /
    /// [`WriteError::Storage`] (nothing removed).
    pub fn apply_retention(&self, policy: &Retention, now_ms: i64) -> Result<u64, WriteError> {
        self.write(|txn| {
            let mut events = txn.open_table(EVENTS).storage()?;
            let mut meta = txn.open_table(META).storage()?;
            let last_seq = get_last_seq::<WriteError>(&events, &meta)?;
            let mut removed = 0u64;
            let mut through = get_trimmed_through::<WriteError>(&meta)?;
            loop {
                let oldest = match events.first().storage()? {
                    Some((_, value)) => codec::decode_event(value.value())?,
                    None => break,
                };
                if !policy.may_remove(oldest.seq, oldest.committed_at_ms, last_seq, now_ms) {
                    break;
                }
                events.remove(oldest.seq).storage()?;
                through = oldest.seq;
                removed += 1;
            }
            if removed > 0 {
                let value = codec::encode(&through)?;
                meta.insert(META_TRIMMED_THROUGH, value.as_slice())
                    .storage()?;
            }
            Ok(removed)
        })
    }

    /// The retention tombstone: the highest seq removed from the log, 0 when none was.
    /// Events `1..=trimmed_through()` are gone.
    ///
    /// Errors: [`ReadError::Codec`] / [`ReadError::Storage`].
    pub fn trimmed_through(&self) -> Result<u64, ReadError> {
        self.read(|txn| get_trimmed_through(&txn.open_table(META).storage()?))
    }

    /// Whether a subscriber whose cursor is `since` (last seq it saw, 0 for none) missed
    /// events that retention removed, and must resync instead of replaying:
    /// `since < trimmed_through()`.
    ///
    /// Errors: as [`Journal::trimmed_through`].
    pub fn cursor_needs_resync(&self, since: u64) -> Result<bool, ReadError> {
        Ok(since < self.trimmed_through()?)
    }

    /// Whether [`Journal::remove_resolved_intents`] at `now_ms` (ms since the epoch) has work
    /// worth a write: an intent not looked at yet is older than the policy's window by more
    /// than a day.
    ///
    /// Errors: [`ReadError::Codec`] / [`ReadError::Storage`].
    pub fn resolved_intents_due(&self, policy: &Retention, now_ms: i64) -> Result<bool, ReadError> {
        self.read(|txn| {
            let meta = txn.open_table(META).storage()?;
            let from = resolved_trimmed_before::<ReadError>(&meta)?;
            let until = now_ms
                .saturating_sub(policy.keep_for_ms)
                .saturating_sub(RESOLVED_SLACK_MS);
            if until <= from {
                return Ok(false);
            }
            let intents = txn.open_table(INTENTS).storage()?;
            let mut range = intents
                .range(first_id_at(from).into_bytes()..first_id_at(until).into_bytes())
                .storage()?;
            Ok(range.next().is_some())
        })
    }

    /// Removes every refused or abandoned intent older than the policy's time window
    /// (`keep_for_ms` before `now_ms`, ms since the epoch), and its request key where that key
    /// points at it, in one durable write transaction. An intent's age is its id's time: intent
    /// ids are UUID v7, given when it is journaled (an intent whose id is another version has
    /// no age and stays). Pending and committed intents stay (a committed one answers retries
    /// while its event is kept, and its receipt names it). Each intent is looked at once: the
    /// next call starts where this one ended, or at the id of an intent resolved since whose
    /// time is earlier (made while the clock was behind). Returns how many intents were
    /// removed.
    ///
    /// Errors: [`WriteError::Poisoned`] / [`WriteError::Commit`]; [`WriteError::Codec`] /
    /// [`WriteError::Storage`] (nothing removed).
    pub fn remove_resolved_intents(
        &self,
        policy: &Retention,
        now_ms: i64,
    ) -> Result<u64, WriteError> {
        self.write(|txn| {
            let mut meta = txn.open_table(META).storage()?;
            let from = resolved_trimmed_before::<WriteError>(&meta)?;
            let until = now_ms.saturating_sub(policy.keep_for_ms);
            if until <= from {
                return Ok(0);
            }
            let mut intents = txn.open_table(INTENTS).storage()?;
            let mut keys = txn.open_table(REQUEST_KEYS).storage()?;
            let mut resolved: Vec<Intent> = Vec::new();
            for entry in intents
                .range(first_id_at(from).into_bytes()..first_id_at(until).into_bytes())
                .storage()?
            {
                let (_, value) = entry.storage()?;
                let intent: Intent = codec::decode_intent(value.value())?;
                // An id that is not a UUID v7 holds no time: its place in this range says
                // nothing of its age, so it stays.
                if id_time_ms(intent.intent_id).is_some()
                    && matches!(
                        intent.state,
                        IntentState::Refused { .. } | IntentState::Abandoned { .. }
                    )
                {
                    resolved.push(intent);
                }
            }
            for intent in &resolved {
                intents.remove(intent.intent_id.as_bytes()).storage()?;
                let points_here = keys
                    .get(&intent.request_key)
                    .storage()?
                    .is_some_and(|id| id.value() == *intent.intent_id.as_bytes());
                if points_here {
                    keys.remove(&intent.request_key).storage()?;
                }
            }
            let value = codec::encode(&until)?;
            meta.insert(META_RESOLVED_TRIMMED_BEFORE, value.as_slice())
                .storage()?;
            Ok(resolved.len() as u64)
        })
    }
}

/// Moves the mark of how far resolved intents were removed back to the time of `resolved`'s id
/// when that is earlier (an intent made while the clock was behind): the next removal then looks
/// at it in its turn instead of never. Runs in the write transaction that resolves it.
///
/// Errors: [`WriteError::Codec`] / [`WriteError::Storage`].
pub(super) fn keep_in_view(
    meta: &mut redb::Table<'_, &'static str, &'static [u8]>,
    resolved: Uuid,
) -> Result<(), WriteError> {
    let Some(made) = id_time_ms(resolved) else {
        return Ok(());
    };
    if made < resolved_trimmed_before::<WriteError>(meta)? {
        let value = codec::encode(&made)?;
        meta.insert(META_RESOLVED_TRIMMED_BEFORE, value.as_slice())
            .storage()?;
    }
    Ok(())
}

/// The time a UUID v7 was made, ms since the epoch; `None` for another version.
fn id_time_ms(id: Uuid) -> Option<i64> {
    if id.get_version_num() != 7 {
        return None;
    }
    let bytes = id.as_bytes();
    let mut ms = [0u8; 8];
    ms[2..].copy_from_slice(&bytes[..6]);
    i64::try_from(u64::from_be_bytes(ms)).ok()
}

/// How far resolved intents were removed: ms since the epoch (0 when never).
fn resolved_trimmed_before<E>(
    meta: &impl ReadableTable<&'static str, &'static [u8]>,
) -> Result<i64, E>
where
    E: From<redb::Error> + From<crate::error::CodecError>,
{
    match meta.get(META_RESOLVED_TRIMMED_BEFORE).storage()? {
        Some(value) => Ok(codec::decode(value.value())?),
        None => Ok(0),
    }
}

/// The smallest UUID v7 of millisecond `ms` (ms since the epoch; below 0 counts as 0): every
/// id made at or after `ms` sorts at or after it, every id made before sorts before.
fn first_id_at(ms: i64) -> Uuid {
    uuid::Builder::from_unix_timestamp_millis(u64::try_from(ms).unwrap_or(0), &[0; 10]).into_uuid()
}
