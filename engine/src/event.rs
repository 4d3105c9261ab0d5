//! The announced event of a committed prune (or restore) and the journal as its replay source.
//!
//! An event is the journal's committed-event record seen through the contract: its data is
//! `{sessionID, messageID, revision}` (CodeNomad's `rpc.codenomad.session-pruning.pruned`, and
//! `...restored` for a restore), its `seq` is the journal sequence number (the replay cursor),
//! its `event_id` the receipt id.

use std::sync::Arc;

use pruning_events::{ReplaySource, Sequenced};
use pruning_journal::{CommittedEvent, Journal};
use serde::Serialize;
use uuid::Uuid;

use pruning_journal::EventKind;

use crate::contract::{PrunedEventData, PRUNED_EVENT_TYPE};
use crate::restore::RESTORED_EVENT_TYPE;

/// One committed prune or restore, as delivered to subscribers and printed by `session-prune
/// events`.
///
/// JSON shape: `{seq, id, type, data:{sessionID, messageID, revision}, removedCount,
/// committedAt}` with `committedAt` in ms since the Unix epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PrunedEvent {
    /// Journal sequence number: 1, 2, 3, ... in commit order.
    pub seq: u64,
    /// Event id: the receipt id. A retry re-announces the same id.
    pub id: Uuid,
    /// [`PRUNED_EVENT_TYPE`], or [`RESTORED_EVENT_TYPE`] for a restore.
    #[serde(rename = "type")]
    pub event_type: &'static str,
    /// The contract's event data.
    pub data: PrunedEventData,
    /// Parts removed by the prune (0 for a restore).
    #[serde(rename = "removedCount")]
    pub removed_count: u32,
    /// Commit time, ms since the Unix epoch.
    #[serde(rename = "committedAt")]
    pub committed_at_ms: i64,
}

impl From<CommittedEvent> for PrunedEvent {
    fn from(event: CommittedEvent) -> Self {
        Self {
            seq: event.seq,
            id: event.event_id,
            event_type: match event.kind {
                EventKind::Pruned => PRUNED_EVENT_TYPE,
                EventKind::Restored => RESTORED_EVENT_TYPE,
            },
            data: PrunedEventData {
                session_id: event.session_id,
                message_id: event.message_id,
                revision: event.revision,
            },
            removed_count: event.removed_count,
            committed_at_ms: event.committed_at_ms,
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
