//! Queries: intents by id and by request key, the identical-retry short-circuit, the replay
//! cursor over the event log, and the recovery input (pending intents). Each query reads one
//! consistent snapshot and never changes the file.

use std::ops::Bound;

use redb::{ReadTransaction, ReadableTable};
use uuid::Uuid;

use super::{
    get_event, get_intent, get_last_seq, Journal, StorageResult, EVENTS, INTENTS, META, PENDING,
    RECEIPT_DIGESTS, REQUEST_KEYS,
};
use crate::codec;
use crate::error::ReadError;
use crate::record::{CommittedEvent, Intent, IntentState};

impl Journal {
    /// The intent stored under `id`, if any.
    ///
    /// Errors: [`ReadError::Codec`] for an undecodable record (e.g.
    /// `CodecError::UnknownFormatVersion`); [`ReadError::Storage`].
    pub fn intent(&self, id: Uuid) -> Result<Option<Intent>, ReadError> {
        self.read(|txn| {
            let intents = txn.open_table(INTENTS).storage()?;
            get_intent(&intents, id)
        })
    }

    /// The most recent intent recorded with this `request_key`, if any.
    ///
    /// Errors: [`ReadError::MissingIntent`] when the key names an intent that is not stored;
    /// otherwise as [`Journal::intent`].
    pub fn intent_by_request_key(&self, key: &[u8; 32]) -> Result<Option<Intent>, ReadError> {
        self.read(|txn| latest_intent(txn, key))
    }

    /// The committed event for `key` when its latest intent is
    /// [`IntentState::Committed`]: the identical-retry short-circuit (same event id and seq
    /// as the first time). `None` when there is no intent for the key, the latest one is not
    /// committed, or its event was already removed by retention.
    ///
    /// Errors: as [`Journal::intent_by_request_key`].
    pub fn committed_event_for(&self, key: &[u8; 32]) -> Result<Option<CommittedEvent>, ReadError> {
        self.read(|txn| match latest_intent(txn, key)? {
            Some(Intent {
                state: IntentState::Committed { seq, .. },
                ..
            }) => get_event(&txn.open_table(EVENTS).storage()?, seq),
            _ => Ok(None),
        })
    }

    /// The digest of the receipt event `event_id`'s commit was made from
    /// ([`crate::Commit::receipt_digest`]), if one was written: `None` for a commit made
    /// without one, by a build that wrote none, or for an unknown event.
    ///
    /// Errors: [`ReadError::Storage`].
    pub fn receipt_digest(&self, event_id: Uuid) -> Result<Option<[u8; 32]>, ReadError> {
        self.read(|txn| {
            let digests = match txn.open_table(RECEIPT_DIGESTS) {
                Ok(table) => table,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
                Err(error) => return Err(ReadError::from(redb::Error::from(error))),
            };
            Ok(digests
                .get(event_id.as_bytes())
                .storage()?
                .map(|value| value.value()))
        })
    }

    /// The event with sequence number `seq`, if it is still kept.
    ///
    /// Errors: as [`Journal::intent`].
    pub fn event(&self, seq: u64) -> Result<Option<CommittedEvent>, ReadError> {
        self.read(|txn| get_event(&txn.open_table(EVENTS).storage()?, seq))
    }

    /// The replay cursor: up to `limit` events with `seq > since`, ascending. Pass the last
    /// seq seen (0 for "from the beginning") and page on with the last seq returned; an empty
    /// result means the cursor is at the end. Events removed by retention are skipped: use
    /// [`Journal::cursor_needs_resync`] to detect that.
    ///
    /// Errors: as [`Journal::intent`].
    pub fn events_after(&self, since: u64, limit: usize) -> Result<Vec<CommittedEvent>, ReadError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        self.read(|txn| {
            let events = txn.open_table(EVENTS).storage()?;
            let range = events
                .range::<u64>((Bound::Excluded(since), Bound::Unbounded))
                .storage()?;
            let mut page = Vec::with_capacity(limit.min(1024));
            for entry in range.take(limit) {
                let (_, value) = entry.storage()?;
                page.push(codec::decode_event(value.value())?);
            }
            Ok(page)
        })
    }

    /// The highest seq assigned so far; 0 when no event was ever committed. Never decreases,
    /// not even when retention removed every event.
    ///
    /// Errors: as [`Journal::intent`].
    pub fn last_seq(&self) -> Result<u64, ReadError> {
        self.read(|txn| {
            let events = txn.open_table(EVENTS).storage()?;
            let meta = txn.open_table(META).storage()?;
            get_last_seq(&events, &meta)
        })
    }

    /// The lowest seq still kept. Seqs start at 1, so this is never `Some(0)`: `Some(1)` means
    /// nothing was ever removed; `None` means the log holds no event, either because none was
    /// committed yet (`last_seq() == 0`) or because retention removed all of them
    /// (`trimmed_through() == last_seq()`). A cursor older than what is kept needs a resync:
    /// see [`Journal::cursor_needs_resync`].
    ///
    /// Errors: [`ReadError::Storage`].
    pub fn first_seq(&self) -> Result<Option<u64>, ReadError> {
        self.read(|txn| {
            let events = txn.open_table(EVENTS).storage()?;
            let first = events.first().storage()?;
            Ok(first.map(|(seq, _)| seq.value()))
        })
    }

    /// Every intent still pending, in intent id order: the input of recovery on open, which
    /// completes them in the order they were made (ids are UUID v7, given in order within a
    /// process even when the wall clock steps back, unlike `created_at_ms`; see
    /// docs/ARCHITECTURE.md, "Sequence numbers after a crash").
    ///
    /// Errors: [`ReadError::MissingIntent`] when the pending index names an intent that is
    /// not stored; otherwise as [`Journal::intent`].
    pub fn pending_intents(&self) -> Result<Vec<Intent>, ReadError> {
        self.read(|txn| {
            let pending = txn.open_table(PENDING).storage()?;
            let intents = txn.open_table(INTENTS).storage()?;
            let mut found = Vec::new();
            for entry in pending.iter().storage()? {
                let (key, _) = entry.storage()?;
                let intent_id = Uuid::from_bytes(key.value());
                let intent = get_intent::<ReadError>(&intents, intent_id)?
                    .ok_or(ReadError::MissingIntent { intent_id })?;
                found.push(intent);
            }
            // The pending index is keyed by intent id: `found` is in intent id order already.
            Ok(found)
        })
    }

    /// Every intent in any state, oldest first (by `created_at_ms`, then `intent_id`), for
    /// audit and tests.
    ///
    /// Errors: as [`Journal::intent`].
    pub fn intents(&self) -> Result<Vec<Intent>, ReadError> {
        self.read(|txn| {
            let intents = txn.open_table(INTENTS).storage()?;
            let mut found = Vec::new();
            for entry in intents.iter().storage()? {
                let (_, value) = entry.storage()?;
                found.push(codec::decode_intent(value.value())?);
            }
            sort_oldest_first(&mut found);
            Ok(found)
        })
    }
}

/// The intent `key` points at, if any.
fn latest_intent(txn: &ReadTransaction, key: &[u8; 32]) -> Result<Option<Intent>, ReadError> {
    let request_keys = txn.open_table(REQUEST_KEYS).storage()?;
    let Some(id) = request_keys.get(key).storage()? else {
        return Ok(None);
    };
    let intent_id = Uuid::from_bytes(id.value());
    let intents = txn.open_table(INTENTS).storage()?;
    match get_intent::<ReadError>(&intents, intent_id)? {
        Some(intent) => Ok(Some(intent)),
        None => Err(ReadError::MissingIntent { intent_id }),
    }
}

/// Orders intents by creation time (ms since epoch), ties by id.
fn sort_oldest_first(intents: &mut [Intent]) {
    intents.sort_by_key(|intent| (intent.created_at_ms, intent.intent_id));
}
