//! The orchestrator: validate, journal the intent, apply through the store, mark it committed,
//! announce the event. Also recovery of pending intents on open.
//!
//! Source: docs/ARCHITECTURE.md, "The write path of one prune" (with recovery).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use pruning_events::{Hub, Subscription};
use pruning_journal::{Commit, Intent, IntentState, Journal, Resolution, Retention};
use uuid::Uuid;

use crate::contract::Refusal;
use crate::contract::{PreviewRequest, PreviewResult, PruneRequest, PruneResult, Selection};
use crate::error::{EngineError, StoreError};
use crate::event::{JournalReplay, PrunedEvent};
use crate::request_key::request_key;
use crate::store::{Applied, DryRun, Durability, PruneCommand, Receipt, SessionStore};

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
    hub: Hub<JournalReplay>,
    database_id: String,
    recovery: Recovery,
}

impl<S: SessionStore> Engine<S> {
    /// Opens the engine: binds the journal to the database's identity and resolves every pending
    /// intent against the store's receipts.
    ///
    /// Binding: a database holding another id than the journal is
    /// [`EngineError::JournalMismatch`]; a database holding no id with a journal that has
    /// committed prunes is [`EngineError::UnknownDatabase`], and with one that has unresolved
    /// intents made elsewhere (the journal records where its database was last seen,
    /// [`SessionStore::location`]) [`EngineError::UnresolvedIntents`]. A new pair gets a fresh UUID v7
    /// identity, written to the database with its first prune.
    pub fn open(store: S, journal: Journal) -> Result<Self, EngineError> {
        let journal = Arc::new(journal);
        let database_id = identity(&store, &journal)?;
        journal.bind(&database_id).map_err(|e| match e {
            pruning_journal::BindError::Mismatch { bound, found } => {
                EngineError::JournalMismatch { bound, found }
            }
            other => journal_error(other),
        })?;
        if let Some(location) = store.location() {
            journal
                .record_database_location(&location)
                .map_err(journal_error)?;
        }
        let hub = Hub::new(Arc::new(JournalReplay::new(journal.clone())), LIVE_CAPACITY);
        let mut engine = Self {
            store,
            journal,
            hub,
            database_id,
            recovery: Recovery::default(),
        };
        engine.recovery = engine.recover()?;
        engine.trim_if_due()?;
        Ok(engine)
    }

    /// Opens the engine for reading only, on a journal opened read-only
    /// ([`Journal::open_read_only`], or an empty one in memory where there is no journal file):
    /// the binding is checked as [`Engine::open`] checks it, and nothing is written: no binding,
    /// no recovery (intents left pending stay so until a writable open), no retention. Reads,
    /// previews, history and event replay work; a prune through it fails before anything is
    /// written, since the journal refuses the intent ([`EngineError::Journal`]).
    ///
    /// Errors: as [`Engine::open`]'s binding errors, and the journal's read errors.
    pub fn open_read_only(store: S, journal: Journal) -> Result<Self, EngineError> {
        let journal = Arc::new(journal);
        let database_id = identity(&store, &journal)?;
        let hub = Hub::new(Arc::new(JournalReplay::new(journal.clone())), LIVE_CAPACITY);
        Ok(Self {
            store,
            journal,
            hub,
            database_id,
            recovery: Recovery::default(),
        })
    }

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

    /// Applies the journal's retention (docs/ARCHITECTURE.md, "Journal": keep at least the last
    /// 1,000,000 events or 30
    /// days) when its oldest event is due, so that an open with nothing to trim writes nothing.
    fn trim_if_due(&self) -> Result<(), EngineError> {
        let policy = Retention::default();
        let Some(first) = self.journal.first_seq().map_err(journal_error)? else {
            return Ok(());
        };
        let Some(oldest) = self.journal.event(first).map_err(journal_error)? else {
            return Ok(());
        };
        let last = self.journal.last_seq().map_err(journal_error)?;
        if policy.may_remove(oldest.seq, oldest.committed_at_ms, last, now_ms()) {
            self.journal
                .apply_retention(&policy, now_ms())
                .map_err(journal_error)?;
        }
        Ok(())
    }

    fn recover(&self) -> Result<Recovery, EngineError> {
        let mut recovery = Recovery::default();
        let pending = self.journal.pending_intents().map_err(journal_error)?;
        for intent in pending {
            match self.store.receipt_by_key(&intent.request_key)? {
                Some(receipt) => {
                    let commit = Commit {
                        intent_id: intent.intent_id,
                        event_id: receipt.receipt_id,
                        revision_after: receipt.revision_after.clone(),
                        removed_count: receipt.removed_count,
                        committed_at_ms: receipt.committed_at_ms,
                    };
                    self.journal.commit(&[commit]).map_err(journal_error)?;
                    recovery.completed.push(intent.intent_id);
                }
                None => {
                    self.journal
                        .mark_abandoned(
                            intent.intent_id,
                            "recovered on open: no receipt in the database, the prune never committed",
                        )
                        .map_err(journal_error)?;
                    recovery.abandoned.push(intent.intent_id);
                }
            }
        }
        Ok(recovery)
    }

    /// Previews a message: its revision and technical parts. Read-only; journals nothing.
    pub fn preview(&self, request: &PreviewRequest) -> Result<PreviewResult, EngineError> {
        Ok(preview(&self.store, request)?.result)
    }

    /// Prunes parts of one message: journal the intent durably, apply it in one store
    /// transaction with its receipt, mark it committed with its event, announce the event.
    ///
    /// An identical earlier request that committed (per the journal, confirmed by the
    /// database's receipt) returns the same result and receipt and re-announces the same event
    /// (same id and seq) without writing anything; without the receipt (a database restored
    /// from a backup) it runs as a new prune. A refusal is journaled as refused with its reason
    /// and leaves the database unchanged.
    ///
    /// Errors: the store failed ([`EngineError::Store`]; the intent is marked abandoned, except
    /// for [`StoreError::OutcomeUnknown`], which leaves it pending for recovery) or the journal
    /// failed ([`EngineError::Journal`]; a committed prune is completed by recovery on the next
    /// open).
    pub fn prune(&self, request: &PruneRequest) -> Result<PruneOutcome, EngineError> {
        self.run_batch(
            std::slice::from_ref(request),
            Durability::Immediate,
            &|| false,
        )
        .pop()
        .unwrap_or_else(|| Err(EngineError::Journal("a batch of one gave no result".into())))
    }

    /// Prunes many messages with group commit (docs/ARCHITECTURE.md, "Bulk work"): the intents of
    /// the
    /// batch are journaled in one durable write, each message is applied in its own store
    /// transaction without waiting for durability, the store makes them durable once
    /// ([`SessionStore::make_durable`]), then the commits go into the journal in one write and
    /// the refusals in another. One result per request, in order, each as [`Engine::prune`]
    /// would give it; a refusal or an error of one request does not stop the others.
    ///
    /// A crash before the journal's commit write leaves the batch's intents pending: recovery
    /// completes those whose receipt the database kept and abandons the others.
    pub fn prune_many(&self, requests: &[PruneRequest]) -> Vec<Result<PruneOutcome, EngineError>> {
        self.prune_many_until(requests, &|| false)
    }

    /// [`Engine::prune_many`] that checks `stop` before applying each request: once it
    /// returns true, the requests not yet applied answer [`EngineError::Interrupted`] (their
    /// intents are journaled as abandoned, nothing of them is written) and the ones applied
    /// are committed and journaled as usual (Ctrl-C stops after the current message).
    pub fn prune_many_until(
        &self,
        requests: &[PruneRequest],
        stop: &dyn Fn() -> bool,
    ) -> Vec<Result<PruneOutcome, EngineError>> {
        self.run_batch(requests, Durability::Deferred, stop)
    }

    /// The one write path of [`Engine::prune`] and [`Engine::prune_many`].
    fn run_batch(
        &self,
        requests: &[PruneRequest],
        durability: Durability,
        stop: &dyn Fn() -> bool,
    ) -> Vec<Result<PruneOutcome, EngineError>> {
        let mut results: Vec<Option<Result<PruneOutcome, EngineError>>> =
            requests.iter().map(|_| None).collect();
        // Identical retries answer from the journal and the receipt, writing nothing.
        let mut fresh = Vec::new();
        // A request repeated within the batch is answered as a retry of its first occurrence
        // once the batch is done: `(slot, slot of the first)`.
        let mut repeats = Vec::new();
        let mut first_of: std::collections::HashMap<[u8; 32], usize> = Default::default();
        for (slot, request) in requests.iter().enumerate() {
            let key = request_key(request);
            if let Some(&first) = first_of.get(&key) {
                repeats.push((slot, first));
                continue;
            }
            first_of.insert(key, slot);
            match self.replay(&key) {
                Ok(Some(outcome)) => results[slot] = Some(Ok(outcome)),
                Ok(None) => fresh.push((slot, request, key)),
                Err(error) => results[slot] = Some(Err(error)),
            }
        }
        let intents: Vec<Intent> = fresh
            .iter()
            .map(|(_, request, key)| new_intent(request, *key))
            .collect();
        if let Err(error) = self.journal.record_intents(&intents) {
            let message = with_causes(&error);
            for (slot, _, _) in &fresh {
                results[*slot] = Some(Err(EngineError::Journal(message.clone())));
            }
            return finish(results);
        }

        let mut committed = Vec::new();
        let mut resolutions = Vec::new();
        let mut stopped = false;
        for ((slot, request, key), intent) in fresh.iter().zip(&intents) {
            stopped = stopped || stop();
            if stopped {
                resolutions.push((
                    intent.intent_id,
                    Resolution::Abandoned("interrupted before it was applied".into()),
                ));
                results[*slot] = Some(Err(EngineError::Interrupted));
                continue;
            }
            let command = PruneCommand {
                request,
                intent_id: intent.intent_id,
                request_key: *key,
                receipt_id: Uuid::now_v7(),
                database_id: &self.database_id,
                now_ms: now_ms(),
                durability,
            };
            match self.store.apply(&command) {
                Ok(Applied::Pruned { receipt, replayed }) => {
                    committed.push((*slot, intent.intent_id, receipt, replayed));
                }
                Ok(Applied::Refused(refusal)) => {
                    resolutions.push((
                        intent.intent_id,
                        Resolution::Refused(refusal.reason.as_str().to_string()),
                    ));
                    results[*slot] = Some(Ok(PruneOutcome {
                        result: PruneResult::Blocked {
                            reason: refusal.reason,
                        },
                        receipt: None,
                        event: None,
                        refusal: Some(refusal),
                        intent_id: Some(intent.intent_id),
                        retried: false,
                    }));
                }
                // The intent stays pending: recovery resolves it from the receipt, if any.
                Err(error @ StoreError::OutcomeUnknown(_)) => {
                    results[*slot] = Some(Err(error.into()));
                }
                Err(error) => {
                    // The transaction rolled back: nothing was written.
                    resolutions.push((intent.intent_id, Resolution::Abandoned(error.to_string())));
                    results[*slot] = Some(Err(error.into()));
                }
            }
        }

        if !committed.is_empty() && durability == Durability::Deferred {
            if let Err(error) = self.store.make_durable() {
                // Whether the batch survives a power loss is unknown: its intents stay
                // pending, and recovery decides from the receipts.
                let message = error.to_string();
                for (slot, _, _, _) in &committed {
                    results[*slot] = Some(Err(StoreError::OutcomeUnknown(message.clone()).into()));
                }
                committed.clear();
            }
        }
        let commits: Vec<Commit> = committed
            .iter()
            .map(|(_, intent_id, receipt, _)| Commit {
                intent_id: *intent_id,
                event_id: receipt.receipt_id,
                revision_after: receipt.revision_after.clone(),
                removed_count: receipt.removed_count,
                committed_at_ms: receipt.committed_at_ms,
            })
            .collect();
        match self.journal.commit(&commits) {
            Ok(events) => {
                for ((slot, intent_id, receipt, replayed), event) in
                    committed.into_iter().zip(events)
                {
                    let event = PrunedEvent::from(event);
                    self.hub.publish(event.clone());
                    results[slot] = Some(Ok(PruneOutcome {
                        result: pruned_result(&event),
                        receipt: Some(*receipt),
                        event: Some(event),
                        refusal: None,
                        intent_id: Some(intent_id),
                        retried: replayed,
                    }));
                }
            }
            Err(error) => {
                // Committed in the database: recovery on the next open journals them.
                let cause = with_causes(&error);
                for (slot, _, receipt, _) in committed {
                    results[slot] = Some(Err(EngineError::CommittedNotJournaled {
                        receipt,
                        cause: cause.clone(),
                    }));
                }
            }
        }
        if let Err(error) = self.journal.resolve_all(&resolutions) {
            // A refusal that could not be journaled is reported as the journal's failure (an
            // abandon's own error stands).
            let message = with_causes(&error);
            for (slot, _, _) in &fresh {
                if let Some(Ok(outcome)) = &results[*slot] {
                    if outcome.refusal.is_some() {
                        results[*slot] = Some(Err(EngineError::Journal(message.clone())));
                    }
                }
            }
        }
        for (slot, first) in repeats {
            results[slot] = Some(match &results[first] {
                Some(Ok(outcome)) => {
                    if let Some(event) = &outcome.event {
                        self.hub.republish(event.clone());
                    }
                    Ok(PruneOutcome {
                        intent_id: None,
                        // A pruned first occurrence makes this a retry of it.
                        retried: outcome.receipt.is_some(),
                        ..outcome.clone()
                    })
                }
                Some(Err(error)) => Err(EngineError::Journal(format!(
                    "the same request earlier in the batch failed: {error}"
                ))),
                None => Err(EngineError::Journal("no outcome was recorded".into())),
            });
        }
        finish(results)
    }

    /// The answer to an identical request that already committed: the journal's event,
    /// confirmed by the database's receipt (without it, a database restored from a backup, the
    /// request runs as a new one). Re-announces the event.
    fn replay(&self, key: &[u8; 32]) -> Result<Option<PruneOutcome>, EngineError> {
        let Some(event) = self
            .journal
            .committed_event_for(key)
            .map_err(journal_error)?
        else {
            return Ok(None);
        };
        let Some(receipt) = self.store.receipt_by_key(key)? else {
            return Ok(None);
        };
        let event = PrunedEvent::from(event);
        self.hub.republish(event.clone());
        Ok(Some(PruneOutcome {
            result: pruned_result(&event),
            receipt: Some(receipt),
            event: Some(event),
            refusal: None,
            intent_id: None,
            retried: true,
        }))
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
            .events_after(since, limit)
            .map_err(journal_error)?
            .into_iter()
            .map(PrunedEvent::from)
            .collect())
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

/// A new pending intent for `request`.
fn new_intent(request: &PruneRequest, key: [u8; 32]) -> Intent {
    Intent {
        intent_id: Uuid::now_v7(),
        request_key: key,
        session_id: request.session_id.clone(),
        message_id: request.message_id.clone(),
        revision: request.revision.clone(),
        selection: match &request.selection {
            Selection::Indexes(indexes) => pruning_journal::Selection::Indexes(indexes.clone()),
            Selection::AllTechnical => pruning_journal::Selection::AllTechnical,
        },
        created_at_ms: now_ms(),
        state: IntentState::Pending,
    }
}

/// Every slot filled by [`Engine::run_batch`]; an empty one (which no path leaves) reads as a
/// journal failure rather than a panic.
/// The identity the journal and the database share, by the binding rules of [`Engine::open`]:
/// the journal's, the database's, or a new UUID v7 for a new pair.
fn identity<S: SessionStore>(store: &S, journal: &Journal) -> Result<String, EngineError> {
    let bound = journal.bound_database().map_err(journal_error)?;
    let stored = store.database_id()?;
    let database_id = match (bound, stored) {
        (Some(bound), Some(found)) if bound != found => {
            return Err(EngineError::JournalMismatch { bound, found })
        }
        (Some(bound), Some(_)) => bound,
        // A journal that has seen committed prunes belongs to a database that holds its
        // identity; one without any may still adopt this database.
        (Some(bound), None) => {
            if journal.last_seq().map_err(journal_error)? > 0 {
                return Err(EngineError::UnknownDatabase { bound });
            }
            // Pending intents may have committed in the database the journal was used with;
            // resolving them against this one could abandon a prune that happened.
            let pending = journal.pending_intents().map_err(journal_error)?.len();
            let seen_here = store.location().is_some()
                && journal.database_location().map_err(journal_error)? == store.location();
            if pending > 0 && !seen_here {
                return Err(EngineError::UnresolvedIntents { bound, pending });
            }
            bound
        }
        (None, Some(found)) => found,
        (None, None) => Uuid::now_v7().to_string(),
    };
    Ok(database_id)
}

fn finish(
    results: Vec<Option<Result<PruneOutcome, EngineError>>>,
) -> Vec<Result<PruneOutcome, EngineError>> {
    results
        .into_iter()
        .map(|slot| {
            slot.unwrap_or_else(|| Err(EngineError::Journal("no outcome was recorded".into())))
        })
        .collect()
}

fn pruned_result(event: &PrunedEvent) -> PruneResult {
    PruneResult::Pruned {
        message_id: event.data.message_id.clone(),
        revision: event.data.revision.clone(),
        removed_count: event.removed_count,
    }
}

fn journal_error(error: impl std::error::Error) -> EngineError {
    EngineError::Journal(with_causes(&error))
}

/// `error: cause: cause...`: the journal's errors keep the I/O failure (a full disk, a
/// read-only file) in their sources, which a person must see.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let words = cause.to_string();
        if !text.contains(&words) {
            text.push_str(": ");
            text.push_str(&words);
        }
        source = cause.source();
    }
    text
}

/// Now in ms since the Unix epoch (0 if the clock is before 1970).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
