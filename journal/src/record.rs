//! The record types the journal stores and hands out: [`Intent`] (with its [`Selection`] and
//! [`IntentState`]), [`CommittedEvent`], and the caller-supplied [`Commit`].
//!
//! These are plain data: encoding lives in `codec`, storage in `store`. Field order is part of
//! the on-disk format (postcard encodes fields positionally): changing it needs a new record
//! version (see `codec`: version 2 added [`Selection::Restore`] and [`CommittedEvent::kind`],
//! version 3 [`Selection::Diffs`], [`Selection::SupersededSnapshots`] and
//! [`EventKind::Compacted`], version 4 [`Selection::SupersededSnapshotsIn`], version 5
//! [`Selection::MigratedV1`] and [`Selection::ShellOutput`]).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Which parts of a message a prune selects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Selection {
    /// These part indexes (0-based positions in the message's part list), as requested.
    Indexes(Vec<u32>),
    /// Every technical part (tool calls with their outputs, reasoning) of the message.
    AllTechnical,
    /// Not a prune: the restore of the prune whose receipt id this is (its parts put back from
    /// the archive). Record version 2.
    Restore(Uuid),
    /// No part: the copies of file bodies a message keeps besides its parts (OpenCode's
    /// `summary.diffs`). Record version 3.
    Diffs,
    /// No message: the superseded snapshots of a session's event log (the intent's message id
    /// is empty). Record version 3; written by no build since ranges were added (read still).
    SupersededSnapshots,
    /// No message: the superseded snapshots of a session's event log whose `event.seq` lies in
    /// `first_seq..=last_seq` (the intent's message id is empty). Record version 4.
    SupersededSnapshotsIn {
        /// The lowest `event.seq` of the range.
        first_seq: i64,
        /// The highest `event.seq` of the range.
        last_seq: i64,
    },
    /// No part: every OpenCode 1.x row (its `message` row and its `part` rows) of a message
    /// OpenCode 2 migrated, a copy it never reads. Record version 5.
    MigratedV1,
    /// No part: the output an OpenCode 2 `shell` row keeps of a command the user ran. Record
    /// version 5.
    ShellOutput,
}

/// What a committed intent did, as its event announces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventKind {
    /// Parts were pruned.
    Pruned,
    /// A prune was undone: its parts were put back (record version 2).
    Restored,
    /// A session's superseded snapshots were deleted (record version 3): `removed_count`
    /// snapshots, `bytes_removed` bytes of row data.
    Compacted {
        /// Bytes of row data deleted.
        bytes_removed: u64,
    },
}

/// Where an intent stands. `Pending` is the only non-terminal state: an intent leaves it at
/// most once, and a terminal state never changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum IntentState {
    /// Journaled; the outcome in the store is not yet recorded here.
    Pending,
    /// The prune committed in the store; `seq` is its event's sequence number in the log,
    /// `committed_at_ms` the commit time in ms since the Unix epoch.
    Committed {
        /// Sequence number of the [`CommittedEvent`] announcing this prune.
        seq: u64,
        /// Commit time, ms since the Unix epoch.
        committed_at_ms: i64,
    },
    /// The store refused the prune and nothing changed (e.g. `"maintenance_required"`).
    Refused {
        /// Why, as a short machine-readable reason.
        reason: String,
    },
    /// The prune never reached the store, or recovery found no receipt for it
    /// (e.g. `"no receipt found on recovery"`, `"store busy"`).
    Abandoned {
        /// Why, as a short human-readable reason.
        reason: String,
    },
}

/// How a pending intent ends when it did not commit: the terminal states other than
/// [`IntentState::Committed`] (which only [`crate::Journal::commit`] writes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// The store refused the prune; nothing changed. `reason` is short and machine-readable.
    Refused(String),
    /// The prune never reached the store, or failed there; `reason` is for people.
    Abandoned(String),
}

impl From<Resolution> for IntentState {
    fn from(resolution: Resolution) -> Self {
        match resolution {
            Resolution::Refused(reason) => IntentState::Refused { reason },
            Resolution::Abandoned(reason) => IntentState::Abandoned { reason },
        }
    }
}

impl IntentState {
    /// `true` for [`IntentState::Pending`].
    pub fn is_pending(&self) -> bool {
        matches!(self, IntentState::Pending)
    }
}

/// One prune request, journaled before the store is touched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    /// Identity of this attempt (a UUID v7, so ids sort roughly by creation time).
    pub intent_id: Uuid,
    /// SHA-256 of the canonical request, computed by the caller; identical retries share it.
    pub request_key: [u8; 32],
    /// OpenCode session id (opaque here).
    pub session_id: String,
    /// OpenCode message id (opaque here).
    pub message_id: String,
    /// The revision the request was made against (64 lowercase hex chars; opaque here).
    pub revision: String,
    /// The parts the request selects.
    pub selection: Selection,
    /// When the intent was created, ms since the Unix epoch.
    pub created_at_ms: i64,
    /// Where the intent stands.
    pub state: IntentState,
}

/// One committed prune, as announced to subscribers.
///
/// `seq` is assigned by the journal: starting at 1, strictly increasing by 1, never reused
/// (not even after retention removed old events).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommittedEvent {
    /// Position in the event log (1-based).
    pub seq: u64,
    /// The receipt id in the store; stable across retries, so consumers dedupe by it.
    pub event_id: Uuid,
    /// The intent this prune resolved.
    pub intent_id: Uuid,
    /// OpenCode session id (copied from the intent).
    pub session_id: String,
    /// OpenCode message id (copied from the intent).
    pub message_id: String,
    /// The message's revision AFTER the prune.
    pub revision: String,
    /// How many parts the prune removed (0 for a restore).
    pub removed_count: u32,
    /// Commit time, ms since the Unix epoch.
    pub committed_at_ms: i64,
    /// What the intent did (`Pruned` for every record of version 1).
    pub kind: EventKind,
}

/// What the caller supplies to mark an intent committed; the journal assigns the `seq`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    /// The intent being resolved.
    pub intent_id: Uuid,
    /// The receipt id in the store (becomes [`CommittedEvent::event_id`]).
    pub event_id: Uuid,
    /// The message's revision after the prune.
    pub revision_after: String,
    /// How many parts the prune removed (0 for a restore).
    pub removed_count: u32,
    /// Commit time, ms since the Unix epoch.
    pub committed_at_ms: i64,
    /// What the intent did.
    pub kind: EventKind,
    /// A digest of the whole receipt the commit was made from, kept beside the event so that a
    /// receipt edited afterwards is found even when its other fields still agree with the
    /// event (the engine's `Receipt::digest`). `None` writes none.
    pub receipt_digest: Option<[u8; 32]>,
}

impl Commit {
    /// The event this commit produces for `intent` at sequence number `seq`.
    pub(crate) fn event_for(&self, intent: &Intent, seq: u64) -> CommittedEvent {
        CommittedEvent {
            seq,
            event_id: self.event_id,
            intent_id: intent.intent_id,
            session_id: intent.session_id.clone(),
            message_id: intent.message_id.clone(),
            revision: self.revision_after.clone(),
            removed_count: self.removed_count,
            committed_at_ms: self.committed_at_ms,
            kind: self.kind,
        }
    }
}
