//! The read side: previews and dry runs (no journal), committed events and receipts, and
//! subscriptions to the event stream.

use pruning_events::{Hub, Subscription};

use super::{now_ms, Engine};
use crate::audit::{AuditReport, AuditScope};
use crate::contract::{PreviewRequest, PreviewResult, PruneRequest, Refusal};
use crate::error::EngineError;
use crate::event::{JournalReplay, PrunedEvent};
use crate::receipt::Receipt;
use crate::store::{DryRun, SessionStore};

impl<S: SessionStore> Engine<S> {
    /// Previews a message: its revision and technical parts. Read-only; journals nothing.
    pub fn preview(&self, request: &PreviewRequest) -> Result<PreviewResult, EngineError> {
        Ok(preview(&self.store, request)?.result)
    }

    /// Subscribes to committed prune events after cursor `since` (0: from the first). Replays
    /// journaled events, then live ones; see [`Subscription::recv`] for lag and cancel safety.
    pub fn subscribe(&self, since: u64) -> Subscription<JournalReplay> {
        self.hub.subscribe(since)
    }

    /// The event hub, for subscribers that outlive a borrow of the engine (an HTTP event
    /// stream): [`Hub::subscribe`] there is [`Engine::subscribe`] here.
    pub fn hub(&self) -> Hub<JournalReplay> {
        self.hub.clone()
    }

    /// Up to `limit` journaled events after `since`, ascending (a one-shot replay).
    pub fn events_after(&self, since: u64, limit: usize) -> Result<Vec<PrunedEvent>, EngineError> {
        Ok(self
            .journal
            .events_after(since, limit)?
            .into_iter()
            .map(PrunedEvent::from)
            .collect())
    }

    /// Audits the receipts in `scope` against the database and this engine's journal; see
    /// [`crate::audit::audit`].
    ///
    /// Errors: the store's and the journal's reads.
    pub fn audit(&self, scope: AuditScope<'_>) -> Result<AuditReport, EngineError> {
        crate::audit::audit(&self.store, Some(self.journal()), scope)
    }

    /// The audit list: every receipt in the database, oldest first, optionally of one session.
    pub fn receipts(&self, session_id: Option<&str>) -> Result<Vec<Receipt>, EngineError> {
        Ok(self.store.receipts(session_id)?)
    }
}

/// What [`preview`] answers: the contract result and, when blocked, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviewOutcome {
    /// The contract answer.
    pub result: PreviewResult,
    /// The refusal with its explanation, when blocked.
    pub refusal: Option<Refusal>,
}

/// Previews a message through any store, without a journal (read-only commands need none).
pub fn preview<S: SessionStore>(
    store: &S,
    request: &PreviewRequest,
) -> Result<PreviewOutcome, EngineError> {
    Ok(match store.read_message(request)? {
        Err(refusal) => PreviewOutcome {
            result: PreviewResult::Blocked {
                reason: refusal.reason,
            },
            refusal: Some(refusal),
        },
        Ok(message) => {
            let live = store.live_mutation(&request.session_id, &request.message_id);
            let (result, refusal) = message.preview(live);
            PreviewOutcome { result, refusal }
        }
    })
}

/// Checks a prune without writing anything: the fence, the receipt lookup and the planner run
/// as in a real prune, in a read transaction. `Ok(Err(refusal))` is what the prune would refuse
/// now; an identical request that already committed is [`DryRun::AlreadyPruned`].
pub fn dry_run<S: SessionStore>(
    store: &S,
    request: &PruneRequest,
) -> Result<Result<DryRun, Refusal>, EngineError> {
    Ok(store.dry_run(request, now_ms())?)
}
