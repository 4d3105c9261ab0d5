//! The write path: one prune, and a batch of them with group commit (one journal write for
//! the intents, one store sync, one journal write for the commit marks).

use pruning_journal::{Commit, Intent, IntentState, Resolution};
use uuid::Uuid;

use std::sync::Arc;

use super::{now_ms, pruned_result, Engine, PruneOutcome};
use crate::contract::{PruneRequest, PruneResult, Selection};
use crate::error::{chain, EngineError, JournalError, StoreError};
use crate::event::PrunedEvent;
use crate::request_key::request_key;
use crate::store::{Applied, Durability, PruneCommand, SessionStore};

impl<S: SessionStore> Engine<S> {
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
        .unwrap_or(Err(EngineError::Internal("a batch of one gave no result")))
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
            let shared = Arc::new(JournalError::from(error));
            for (slot, _, _) in &fresh {
                results[*slot] = Some(Err(EngineError::Journal(shared.clone())));
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
                let cause = chain(&error);
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
            let shared = Arc::new(JournalError::from(error));
            for (slot, _, _) in &fresh {
                if let Some(Ok(outcome)) = &results[*slot] {
                    if outcome.refusal.is_some() {
                        results[*slot] = Some(Err(EngineError::Journal(shared.clone())));
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
                Some(Err(error)) => Err(EngineError::SameRequestFailed(error.to_string())),
                None => Err(EngineError::Internal("no outcome was recorded")),
            });
        }
        finish(results)
    }

    /// The answer to an identical request that already committed: the journal's event,
    /// confirmed by the database's receipt (without it, a database restored from a backup, the
    /// request runs as a new one). Re-announces the event.
    fn replay(&self, key: &[u8; 32]) -> Result<Option<PruneOutcome>, EngineError> {
        let Some(event) = self.journal.committed_event_for(key)? else {
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

fn finish(
    results: Vec<Option<Result<PruneOutcome, EngineError>>>,
) -> Vec<Result<PruneOutcome, EngineError>> {
    results
        .into_iter()
        .map(|slot| slot.unwrap_or(Err(EngineError::Internal("no outcome was recorded"))))
        .collect()
}
