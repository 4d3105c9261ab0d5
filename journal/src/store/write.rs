//! Durable writes of intents and their outcomes: recording new intents, committing them (which
//! assigns event sequence numbers and appends the events), refusing or abandoning them, and
//! appending events rebuilt from the store's receipts. Each call is one write transaction.

use redb::{Durability, Table, WriteTransaction};
use uuid::Uuid;

use super::{
    get_intent, get_last_seq, Journal, StorageResult, EVENTS, INTENTS, META, PENDING,
    RECEIPT_DIGESTS, REQUEST_KEYS,
};
use crate::codec;
use crate::error::WriteError;
use crate::record::{Commit, CommittedEvent, Intent, IntentState, Resolution, Selection};

impl Journal {
    /// Durably records new intents, all in ONE write transaction with immediate durability
    /// (group commit: a batch costs one fsync). Each intent must be in state
    /// [`IntentState::Pending`]; each also becomes the latest intent of its `request_key`.
    /// An empty slice writes nothing.
    ///
    /// Errors (nothing of the batch is recorded): [`WriteError::DuplicateIntent`] when an
    /// `intent_id` is already stored or repeats within the batch; [`WriteError::NotPending`]
    /// when an intent is offered in another state; [`WriteError::Poisoned`] /
    /// [`WriteError::Commit`] (see [`Journal`]); [`WriteError::Storage`] /
    /// [`WriteError::Codec`].
    pub fn record_intents(&self, intents: &[Intent]) -> Result<(), WriteError> {
        self.refuse_if_poisoned::<WriteError>()?;
        if intents.is_empty() {
            return Ok(());
        }
        self.write(|txn| {
            let mut tables = WriteTables::open(txn)?;
            for intent in intents {
                if !intent.state.is_pending() {
                    return Err(WriteError::NotPending {
                        intent_id: intent.intent_id,
                        state: intent.state.clone(),
                    });
                }
                if tables.intent(intent.intent_id)?.is_some() {
                    return Err(WriteError::DuplicateIntent {
                        intent_id: intent.intent_id,
                    });
                }
                tables.put_intent(intent)?;
                tables.point_request_key(intent)?;
            }
            Ok(())
        })
    }

    /// [`Journal::record_intents`] with one intent.
    pub fn record_intent(&self, intent: &Intent) -> Result<(), WriteError> {
        self.record_intents(std::slice::from_ref(intent))
    }

    /// Marks intents committed and appends one [`CommittedEvent`] each, with the next sequence
    /// numbers in the order given, all in ONE durable write transaction. Returns the events in
    /// the order given. An empty slice writes nothing and returns no events.
    ///
    /// Errors (nothing of the batch is written, no seq is consumed):
    /// [`WriteError::UnknownIntent`]; [`WriteError::NotPending`] with the intent's current
    /// state (also when the same intent appears twice in the batch);
    /// [`WriteError::SequenceExhausted`]; [`WriteError::Poisoned`] / [`WriteError::Commit`];
    /// [`WriteError::Storage`] / [`WriteError::Codec`].
    pub fn commit(&self, commits: &[Commit]) -> Result<Vec<CommittedEvent>, WriteError> {
        self.commit_with(commits, Durability::Immediate)
    }

    /// [`Journal::commit`] without waiting for the disk: the commit marks and events are
    /// visible to every reader of this handle at once and become durable with the handle's
    /// next durable write or its close; a crash before either loses them (and only them: the
    /// writes lost are always the newest), leaving their intents pending for recovery. Costs no
    /// fsync. Errors as [`Journal::commit`].
    ///
    /// Source: docs/ARCHITECTURE.md, "Journal" (why an event may be announced before its
    /// commit mark is durable, and keeps its sequence number after a crash).
    pub fn commit_lazily(&self, commits: &[Commit]) -> Result<Vec<CommittedEvent>, WriteError> {
        self.commit_with(commits, Durability::None)
    }

    fn commit_with(
        &self,
        commits: &[Commit],
        durability: Durability,
    ) -> Result<Vec<CommittedEvent>, WriteError> {
        self.refuse_if_poisoned::<WriteError>()?;
        if commits.is_empty() {
            return Ok(Vec::new());
        }
        self.write_with(durability, |txn| {
            let mut tables = WriteTables::open(txn)?;
            let mut seq = tables.last_seq()?;
            let mut events = Vec::with_capacity(commits.len());
            for commit in commits {
                let intent = tables.pending_intent(commit.intent_id)?;
                seq = next(seq)?;
                events.push(tables.append(intent, commit, seq)?);
            }
            Ok(events)
        })
    }

    /// Durably marks a pending intent [`IntentState::Refused`] with `reason`
    /// (e.g. `"maintenance_required"`).
    ///
    /// Errors: [`WriteError::UnknownIntent`]; [`WriteError::NotPending`] with the current
    /// state; [`WriteError::Poisoned`] / [`WriteError::Commit`]; [`WriteError::Storage`] /
    /// [`WriteError::Codec`].
    pub fn mark_refused(&self, intent_id: Uuid, reason: &str) -> Result<(), WriteError> {
        self.resolve_all(&[(intent_id, Resolution::Refused(reason.to_owned()))])
    }

    /// Durably marks a pending intent [`IntentState::Abandoned`] with `reason`
    /// (e.g. `"no receipt found on recovery"`, `"store busy"`). Errors as
    /// [`Journal::mark_refused`].
    pub fn mark_abandoned(&self, intent_id: Uuid, reason: &str) -> Result<(), WriteError> {
        self.resolve_all(&[(intent_id, Resolution::Abandoned(reason.to_owned()))])
    }

    /// Durably moves pending intents to their resolutions, all in ONE write transaction (the
    /// refusals of a batch cost one fsync). An empty slice writes nothing. A resolved intent
    /// keeps its ids, revision, request key and reason, not its index list (stored empty).
    ///
    /// Errors (nothing of the batch is written): [`WriteError::UnknownIntent`];
    /// [`WriteError::NotPending`] with the current state (also when an intent repeats in the
    /// batch); [`WriteError::Poisoned`] / [`WriteError::Commit`]; [`WriteError::Storage`] /
    /// [`WriteError::Codec`].
    pub fn resolve_all(&self, resolutions: &[(Uuid, Resolution)]) -> Result<(), WriteError> {
        self.refuse_if_poisoned::<WriteError>()?;
        if resolutions.is_empty() {
            return Ok(());
        }
        self.write(|txn| {
            let mut tables = WriteTables::open(txn)?;
            for (intent_id, resolution) in resolutions {
                let mut intent = tables.pending_intent(*intent_id)?;
                intent.state = resolution.clone().into();
                // Nothing reads a resolved intent's index list again (only a pending intent is
                // applied, only a committed one answers a retry), and it can hold 100,001
                // indexes: refusals repeated without end must not grow the journal by that.
                if let Selection::Indexes(indexes) = &mut intent.selection {
                    *indexes = Vec::new();
                }
                tables.put_intent(&intent)?;
                super::trim::keep_in_view(&mut tables.meta, intent.intent_id)?;
            }
            Ok(())
        })
    }

    /// Appends already-known events during a rebuild from the store's receipts
    /// (`session-prune journal rebuild`), in ONE durable write transaction: for each pair, in
    /// the order given, the next seq is assigned, the event is appended, and the intent is
    /// stored in state [`IntentState::Committed`] (the given `state` is replaced; an intent
    /// already stored must still be pending, and is overwritten) and becomes the latest
    /// intent of its `request_key`. Returns the appended events in order (so their number is
    /// the number appended).
    ///
    /// Errors (nothing of the batch is written): [`WriteError::IntentMismatch`] when a
    /// commit names another intent than its pair; [`WriteError::NotPending`] when the intent
    /// is already stored with a terminal state (also when it repeats within the batch);
    /// [`WriteError::SequenceExhausted`]; [`WriteError::Poisoned`] / [`WriteError::Commit`];
    /// [`WriteError::Storage`] / [`WriteError::Codec`].
    pub fn append_rebuilt(
        &self,
        rebuilt: &[(Intent, Commit)],
    ) -> Result<Vec<CommittedEvent>, WriteError> {
        self.refuse_if_poisoned::<WriteError>()?;
        if rebuilt.is_empty() {
            return Ok(Vec::new());
        }
        self.write(|txn| {
            let mut tables = WriteTables::open(txn)?;
            let mut seq = tables.last_seq()?;
            let mut events = Vec::with_capacity(rebuilt.len());
            for (intent, commit) in rebuilt {
                if commit.intent_id != intent.intent_id {
                    return Err(WriteError::IntentMismatch {
                        intent_id: intent.intent_id,
                        commit_intent_id: commit.intent_id,
                    });
                }
                if let Some(stored) = tables.intent(intent.intent_id)? {
                    if !stored.state.is_pending() {
                        return Err(WriteError::NotPending {
                            intent_id: stored.intent_id,
                            state: stored.state,
                        });
                    }
                }
                tables.point_request_key(intent)?;
                seq = next(seq)?;
                events.push(tables.append(intent.clone(), commit, seq)?);
            }
            Ok(events)
        })
    }
}

/// The sequence number after `seq`.
fn next(seq: u64) -> Result<u64, WriteError> {
    seq.checked_add(1).ok_or(WriteError::SequenceExhausted)
}

/// The tables a write needs, open in one write transaction.
struct WriteTables<'txn> {
    intents: Table<'txn, [u8; 16], &'static [u8]>,
    request_keys: Table<'txn, [u8; 32], [u8; 16]>,
    events: Table<'txn, u64, &'static [u8]>,
    meta: Table<'txn, &'static str, &'static [u8]>,
    pending: Table<'txn, [u8; 16], ()>,
    digests: Table<'txn, [u8; 16], [u8; 32]>,
}

impl<'txn> WriteTables<'txn> {
    fn open(txn: &'txn WriteTransaction) -> Result<Self, redb::Error> {
        Ok(WriteTables {
            intents: txn.open_table(INTENTS).storage()?,
            request_keys: txn.open_table(REQUEST_KEYS).storage()?,
            events: txn.open_table(EVENTS).storage()?,
            meta: txn.open_table(META).storage()?,
            pending: txn.open_table(PENDING).storage()?,
            digests: txn.open_table(RECEIPT_DIGESTS).storage()?,
        })
    }

    fn intent(&self, intent_id: Uuid) -> Result<Option<Intent>, WriteError> {
        get_intent(&self.intents, intent_id)
    }

    /// The stored intent `intent_id`, which must be pending.
    fn pending_intent(&self, intent_id: Uuid) -> Result<Intent, WriteError> {
        let intent = self
            .intent(intent_id)?
            .ok_or(WriteError::UnknownIntent { intent_id })?;
        if intent.state.is_pending() {
            Ok(intent)
        } else {
            Err(WriteError::NotPending {
                intent_id,
                state: intent.state,
            })
        }
    }

    fn last_seq(&self) -> Result<u64, WriteError> {
        get_last_seq(&self.events, &self.meta)
    }

    /// Stores `intent` and keeps the pending index in step with its state.
    fn put_intent(&mut self, intent: &Intent) -> Result<(), WriteError> {
        let key = *intent.intent_id.as_bytes();
        let value = codec::encode_intent(intent)?;
        self.intents.insert(key, value.as_slice()).storage()?;
        if intent.state.is_pending() {
            self.pending.insert(key, ()).storage()?;
        } else {
            self.pending.remove(key).storage()?;
        }
        Ok(())
    }

    /// Makes `intent` the latest intent of its request key.
    fn point_request_key(&mut self, intent: &Intent) -> Result<(), WriteError> {
        self.request_keys
            .insert(intent.request_key, intent.intent_id.as_bytes())
            .storage()?;
        Ok(())
    }

    /// Marks `intent` committed at `seq` and appends the event of `commit`.
    fn append(
        &mut self,
        mut intent: Intent,
        commit: &Commit,
        seq: u64,
    ) -> Result<CommittedEvent, WriteError> {
        let event = commit.event_for(&intent, seq);
        intent.state = IntentState::Committed {
            seq,
            committed_at_ms: commit.committed_at_ms,
        };
        self.put_intent(&intent)?;
        let value = codec::encode_event(&event)?;
        self.events.insert(seq, value.as_slice()).storage()?;
        if let Some(digest) = commit.receipt_digest {
            self.digests
                .insert(commit.event_id.as_bytes(), digest)
                .storage()?;
        }
        Ok(event)
    }
}
