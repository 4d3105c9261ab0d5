//! Retention of the event log: removing the oldest events the [`Retention`] policy allows,
//! and the tombstone (`trimmed_through` in meta) that keeps `last_seq` monotonic and tells a
//! replaying cursor that it missed removed events.

use redb::ReadableTable;

use super::{
    get_last_seq, get_trimmed_through, Journal, StorageResult, EVENTS, META, META_TRIMMED_THROUGH,
};
use crate::codec;
use crate::error::{ReadError, WriteError};
use crate::record::CommittedEvent;
use crate::retention::Retention;

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
                    Some((_, value)) => codec::decode::<CommittedEvent>(value.value())?,
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
}
