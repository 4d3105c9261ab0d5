//! The announced event of a committed prune (or restore, or compaction) and the journal as its
//! replay source.
//!
//! An event is the journal's committed-event record seen through the contract: its data is
//! `{sessionID, messageID, revision}` (CodeNomad's `rpc.codenomad.session-pruning.pruned`, and
//! `...restored` for a restore), or `{sessionID, snapshots, bytes}` for a compaction
//! (`...compacted`, this engine's own), its `seq` is the journal sequence number (the replay
//! cursor), its `event_id` the receipt id.

use std::sync::Arc;

use pruning_events::{ReplaySource, Sequenced};
use pruning_journal::{CommittedEvent, Journal};
use serde::Serialize;
use uuid::Uuid;

use pruning_journal::EventKind;

use crate::contract::{PrunedEventData, PRUNED_EVENT_TYPE};
use crate::restore::RESTORED_EVENT_TYPE;

/// The event type announced after every committed compaction (the superseded snapshots of a
/// session's event log deleted). It names no message: a UI holds no snapshot, so it drops
/// nothing of what it shows; a size it shows of the session goes down.
pub const COMPACTED_EVENT_TYPE: &str = "rpc.codenomad.session-pruning.compacted";

/// The data of a [`COMPACTED_EVENT_TYPE`] event: `{sessionID, snapshots, bytes}`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CompactedEventData {
    /// The compacted session.
    #[serde(rename = "sessionID")]
    pub session_id: String,
    /// Snapshot events deleted.
    pub snapshots: u32,
    /// Bytes of row data deleted.
    pub bytes: u64,
}

/// One committed prune, restore or compaction, as delivered to subscribers and printed by
/// `session-prune events`.
///
/// JSON shape: `{seq, id, type, data, removedCount, committedAt}` with `committedAt` in ms since
/// the Unix epoch and `data` what the event stream announces ([`PrunedEvent::announced_data`]):
/// `{sessionID, messageID, revision}`, or for a compaction `{sessionID, snapshots, bytes}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrunedEvent {
    /// Journal sequence number: 1, 2, 3, ... in commit order.
    pub seq: u64,
    /// Event id: the receipt id. A retry re-announces the same id.
    pub id: Uuid,
    /// [`PRUNED_EVENT_TYPE`], [`RESTORED_EVENT_TYPE`] for a restore, [`COMPACTED_EVENT_TYPE`]
    /// for a compaction.
    pub event_type: &'static str,
    /// The journal's record of what the event names: for a compaction, its session, an empty
    /// message id and the event log's revision.
    pub data: PrunedEventData,
    /// Parts removed by the prune (0 for a restore; the snapshots deleted, for a compaction).
    pub removed_count: u32,
    /// Commit time, ms since the Unix epoch.
    pub committed_at_ms: i64,
    /// A compaction's bytes of row data deleted; `None` for every other event.
    pub bytes_removed: Option<u64>,
}

impl Serialize for PrunedEvent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut event = serializer.serialize_struct("PrunedEvent", 6)?;
        event.serialize_field("seq", &self.seq)?;
        event.serialize_field("id", &self.id)?;
        event.serialize_field("type", self.event_type)?;
        event.serialize_field("data", &self.announced_data())?;
        event.serialize_field("removedCount", &self.removed_count)?;
        event.serialize_field("committedAt", &self.committed_at_ms)?;
        event.end()
    }
}

impl PrunedEvent {
    /// Whether this announces a compaction.
    pub fn is_compaction(&self) -> bool {
        self.event_type == COMPACTED_EVENT_TYPE
    }

    /// The data the event stream carries: [`PrunedEventData`] for a prune or a restore,
    /// [`CompactedEventData`] for a compaction.
    pub fn announced_data(&self) -> serde_json::Value {
        let value = match self.bytes_removed {
            Some(bytes) if self.is_compaction() => serde_json::to_value(CompactedEventData {
                session_id: self.data.session_id.clone(),
                snapshots: self.removed_count,
                bytes,
            }),
            _ => serde_json::to_value(&self.data),
        };
        // Strings and numbers only: these always serialize.
        value.unwrap_or_default()
    }
}

impl From<CommittedEvent> for PrunedEvent {
    fn from(event: CommittedEvent) -> Self {
        let (event_type, bytes_removed) = match event.kind {
            EventKind::Pruned => (PRUNED_EVENT_TYPE, None),
            EventKind::Restored => (RESTORED_EVENT_TYPE, None),
            EventKind::Compacted { bytes_removed } => (COMPACTED_EVENT_TYPE, Some(bytes_removed)),
        };
        Self {
            seq: event.seq,
            id: event.event_id,
            event_type,
            data: PrunedEventData {
                session_id: event.session_id,
                message_id: event.message_id,
                revision: event.revision,
            },
            removed_count: event.removed_count,
            committed_at_ms: event.committed_at_ms,
            bytes_removed,
        }
    }
}

impl Sequenced for PrunedEvent {
    fn seq(&self) -> u64 {
        self.seq
    }
}

/// The journal's event log as the hub's replay source.
#[derive(Debug, Clone)]
pub struct JournalReplay {
    journal: Arc<Journal>,
}

impl JournalReplay {
    /// Wraps a journal.
    pub fn new(journal: Arc<Journal>) -> Self {
        Self { journal }
    }
}

impl ReplaySource for JournalReplay {
    type Event = PrunedEvent;
    type Error = pruning_journal::ReadError;

    fn events_after(&self, since: u64, limit: usize) -> Result<Vec<PrunedEvent>, Self::Error> {
        Ok(self
            .journal
            .events_after(since, limit)?
            .into_iter()
            .map(PrunedEvent::from)
            .collect())
    }

    fn first_seq(&self) -> Result<Option<u64>, Self::Error> {
        self.journal.first_seq()
    }

    fn last_seq(&self) -> Result<Option<u64>, Self::Error> {
        let last = self.journal.last_seq()?;
        Ok((last > 0).then_some(last))
    }
}
