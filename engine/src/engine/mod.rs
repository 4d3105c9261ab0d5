//! The engine: the one order of every prune (validate, journal the intent, apply through the
//! store, mark it committed, announce the event), split the way the journal's store is:
//! `open` (binding, recovery, retention), `write` (prunes and batches), `read` (previews,
//! receipts, events). This file holds the engine's state and what the parts share.
//!
//! Source: docs/ARCHITECTURE.md, "The write path of one prune" (with recovery).

mod open;
mod read;
mod restore;
mod write;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use pruning_events::Hub;
use pruning_journal::{Commit, Journal};
use uuid::Uuid;

use crate::contract::{PruneResult, Refusal};
use crate::event::{JournalReplay, PrunedEvent};
use crate::receipt::Receipt;
use crate::store::SessionStore;

pub use open::{check_journal_binding, plan_journal_epoch, start_journal_epoch, EpochStarted};
pub use read::{dry_run, preview, PreviewOutcome};
pub use restore::{restorable, restore_dry_run, RestoreOutcome};

/// Capacity of the live event buffer per hub; a subscriber that falls further behind is caught up
/// from the journal.
const LIVE_CAPACITY: usize = 1024;

/// Version of this engine, recorded in every receipt.
pub const ENGINE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What [`Engine::prune`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PruneOutcome {
    /// The contract answer.
    pub result: PruneResult,
    /// The receipt, when pruned (now or by an earlier identical request).
    pub receipt: Option<Receipt>,
    /// The announced event, when pruned.
    pub event: Option<PrunedEvent>,
    /// The refusal with its explanation, when blocked.
    pub refusal: Option<Refusal>,
    /// The journaled intent, when one was recorded (an identical retry records none).
    pub intent_id: Option<Uuid>,
    /// True when an identical earlier request had already committed.
    pub retried: bool,
}

/// What recovery on open did with the intents left pending.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Intents whose receipt was found: marked committed, their events journaled.
    pub completed: Vec<Uuid>,
    /// Intents with no receipt: marked abandoned.
    pub abandoned: Vec<Uuid>,
}

/// The pruning engine over one store and its journal.
pub struct Engine<S: SessionStore> {
    store: S,
    journal: Arc<Journal>,
    /// Held by a prune or batch from its intents to its commit marks (one writer at a time).
    writer: std::sync::Mutex<()>,
    /// Set once an intent of this engine stays pending while its receipt may be in the
    /// database: commit marks are durable from then on (see `write::journal_commits`), and a
    /// request that comes again first resolves its pending intent (`write::resolve_pending`).
    unresolved: std::sync::atomic::AtomicBool,
    hub: Hub<JournalReplay>,
    database_id: String,
    /// The journal's epoch number (docs/ARCHITECTURE.md, "Journal epochs"): every write
    /// first checks that the database is still on it.
    journal_epoch: u64,
    recovery: Recovery,
}

impl<S: SessionStore> Engine<S> {
    /// What recovery did when this engine opened.
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The journal.
    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// The identity of the database this engine and its journal are bound to.
    pub fn database_id(&self) -> &str {
        &self.database_id
    }

    /// The journal epoch the database moved to, when it is no longer this engine's journal's
    /// (a new epoch started by another process while this one ran): a write must then be
    /// refused, since its event would be numbered in a journal the database no longer names.
    ///
    /// Errors: the store's read.
    fn journal_epoch_moved(&self) -> Result<Option<u64>, crate::EngineError> {
        let database = self.store.journal_epoch()?;
        Ok((database != self.journal_epoch).then_some(database))
    }
}

fn pruned_result(event: &PrunedEvent) -> PruneResult {
    PruneResult::Pruned {
        message_id: event.data.message_id.clone(),
        revision: event.data.revision.clone(),
        removed_count: event.removed_count,
    }
}

/// The commit mark of intent `intent_id` whose receipt is `receipt`: its event is of the
/// receipt's kind ([`Receipt::event_kind`]).
fn commit_of(intent_id: Uuid, receipt: &Receipt) -> Commit {
    Commit {
        intent_id,
        event_id: receipt.receipt_id,
        revision_after: receipt.revision_after.clone(),
        removed_count: receipt.removed_count,
        committed_at_ms: receipt.committed_at_ms,
        kind: receipt.event_kind(),
        receipt_digest: Some(receipt.digest()),
    }
}

/// Now in ms since the Unix epoch (0 if the clock is before 1970).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
