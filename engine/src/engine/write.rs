//! The write path: one prune, and a batch of them with group commit (one journal write for
//! the intents, group transactions in the store, one store sync, one journal write for the
//! commit marks).

use pruning_journal::{Commit, Intent, IntentState, Resolution};
use uuid::Uuid;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{commit_of, now_ms, pruned_result, Engine, PruneOutcome};
use crate::contract::{PruneRequest, PruneResult};
use crate::error::{chain, EngineError, JournalError, StoreError};
use crate::event::PrunedEvent;
use crate::receipt::Receipt;
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
    /// the batch are journaled in one durable write, the messages are applied in group
    /// transactions ([`SessionStore::apply_group`]: each message whole or not at all) without
    /// waiting for durability, the store makes them durable once
    /// ([`SessionStore::make_durable`]), then the commits go into the journal in one write and
    /// the refusals in another. One result per request, in order, each as [`Engine::prune`]
    /// would give it; a refusal or an error of one request does not stop the others.
    ///
    /// A crash before the journal's commit write leaves the batch's intents pending: recovery
    /// completes those whose receipt the database kept and abandons the others.
    pub fn prune_many(&self, requests: &[PruneRequest]) -> Vec<Result<PruneOutcome, EngineError>> {
        self.prune_many_until(requests, &|| false)
    }

    /// [`Engine::prune_many`] that checks `stop` before each group transaction: once it
    /// returns true, the requests not yet applied answer [`EngineError::Interrupted`] (their
    /// intents are journaled as abandoned, nothing of them is written) and the ones applied
    /// are committed and journaled as usual (Ctrl-C stops after the current transaction, which
    /// a store bounds: 50 ms of the write lock for OpenCode's).
    pub fn prune_many_until(
        &self,
        requests: &[PruneRequest],
        stop: &dyn Fn() -> bool,
    ) -> Vec<Result<PruneOutcome, EngineError>> {
        self.run_batch(requests, Durability::Deferred, stop)
    }

    /// The one write path of [`Engine::prune`] and [`Engine::prune_many`], in named phases
    /// over a [`Batch`]: answer retries and repeats, journal the intents, apply each request,
    /// make the store durable, journal the commit marks, journal the refusals, answer.
    fn run_batch(
        &self,
        requests: &[PruneRequest],
        durability: Durability,
        stop: &dyn Fn() -> bool,
    ) -> Vec<Result<PruneOutcome, EngineError>> {
        // One batch at a time, from its intents to its commit marks: sequence numbers are then
        // given in intent order, which is what lets a commit mark wait for a later durable write
        // (see `journal_commits`).
        let _writing = self
            .writer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // A store that cannot be read here fails the batch's own reads and writes as well.
        if let Ok(Some(database)) = self.journal_epoch_moved() {
            let journal = self.journal_epoch;
            return requests
                .iter()
                .map(|_| Err(EngineError::JournalEpochMismatch { journal, database }))
                .collect();
        }
        let mut batch = self.classify(requests);
        if self.journal_intents(&mut batch) {
            if durability == Durability::Deferred {
                self.archive_ahead(&batch);
            }
            self.apply_each(&mut batch, durability, stop);
            if durability == Durability::Deferred {
                self.make_durable(&mut batch);
            }
            self.journal_commits(&mut batch);
            self.journal_resolutions(&mut batch);
        }
        self.answer(batch)
    }

    /// Phase 1: an identical request already committed is answered from the journal and the
    /// receipt (nothing written); a request repeated within the batch waits for its first
    /// occurrence; every other one is new.
    fn classify<'r>(&self, requests: &'r [PruneRequest]) -> Batch<'r> {
        let mut first_of: std::collections::HashMap<[u8; 32], usize> = Default::default();
        let mut slots = Vec::with_capacity(requests.len());
        for (index, request) in requests.iter().enumerate() {
            // The key the request has now: another than its first after a restore undid it.
            let key = match self.store.live_request_key(&request_key(request)) {
                Ok(key) => key,
                Err(error) => {
                    slots.push(Slot::answered(Err(error.into())));
                    continue;
                }
            };
            if let Some(&first) = first_of.get(&key) {
                slots.push(Slot::Repeat(first));
                continue;
            }
            first_of.insert(key, index);
            slots.push(match self.replay(&key) {
                Ok(Some(outcome)) => Slot::answered(Ok(outcome)),
                Ok(None) => Slot::New { request, key },
                Err(error) => Slot::answered(Err(error)),
            });
        }
        Batch {
            slots,
            resolutions: Vec::new(),
            refused: Vec::new(),
        }
    }

    /// Phase 2: the intents of every new request in one durable journal write. `false` when
    /// it failed: those requests are answered with the journal's error, nothing written.
    fn journal_intents(&self, batch: &mut Batch<'_>) -> bool {
        let intents: Vec<Intent> = batch
            .slots
            .iter()
            .filter_map(|slot| match slot {
                Slot::New { request, key } => Some(new_intent(request, *key)),
                _ => None,
            })
            .collect();
        if let Err(error) = self.journal.record_intents(&intents) {
            let shared = Arc::new(JournalError::from(error));
            for slot in &mut batch.slots {
                if matches!(slot, Slot::New { .. }) {
                    *slot = Slot::answered(Err(EngineError::Journal(shared.clone())));
                }
            }
            return false;
        }
        let mut intents = intents.into_iter();
        for slot in &mut batch.slots {
            if let Slot::New { request, key } = *slot {
                if let Some(intent) = intents.next() {
                    *slot = Slot::Journaled {
                        request,
                        key,
                        intent_id: intent.intent_id,
                        receipt_id: Uuid::now_v7(),
                    };
                }
            }
        }
        true
    }

    /// The store command of a journaled slot at `now` (ms since the Unix epoch); `None` for a
    /// slot in any other state.
    fn command_of<'a>(
        &'a self,
        slot: &Slot<'a>,
        now: i64,
        durability: Durability,
    ) -> Option<PruneCommand<'a>> {
        match *slot {
            Slot::Journaled {
                request,
                key,
                intent_id,
                receipt_id,
            } => Some(PruneCommand {
                request,
                intent_id,
                request_key: key,
                receipt_id,
                database_id: &self.database_id,
                now_ms: now,
                durability,
            }),
            _ => None,
        }
    }

    /// Phase 3a (deferred durability): the store may archive what the batch's prunes will
    /// remove ahead of them, in one sync ([`SessionStore::archive_ahead`]).
    fn archive_ahead(&self, batch: &Batch<'_>) {
        let now = now_ms();
        let commands: Vec<PruneCommand<'_>> = batch
            .slots
            .iter()
            .filter_map(|slot| self.command_of(slot, now, Durability::Deferred))
            .collect();
        if !commands.is_empty() {
            self.store.archive_ahead(&commands);
        }
    }

    /// Phase 3: the journaled requests, in order, until `stop` says to stop (the rest are
    /// abandoned, nothing of them written). One prune ([`Durability::Immediate`]) is applied
    /// alone; a batch's prunes go to the store in group transactions
    /// ([`SessionStore::apply_group`]), `stop` checked before each.
    fn apply_each(&self, batch: &mut Batch<'_>, durability: Durability, stop: &dyn Fn() -> bool) {
        let journaled: Vec<usize> = (0..batch.slots.len())
            .filter(|&index| matches!(batch.slots[index], Slot::Journaled { .. }))
            .collect();
        let mut next = 0;
        while next < journaled.len() {
            if stop() {
                for &index in &journaled[next..] {
                    if let Slot::Journaled { intent_id, .. } = batch.slots[index] {
                        batch.resolutions.push((
                            intent_id,
                            Resolution::Abandoned("interrupted before it was applied".into()),
                        ));
                        batch.slots[index] = Slot::answered(Err(EngineError::Interrupted));
                    }
                }
                return;
            }
            let now = now_ms();
            let commands: Vec<PruneCommand<'_>> = journaled[next..]
                .iter()
                .filter_map(|&index| self.command_of(&batch.slots[index], now, durability))
                .collect();
            let mut results = match durability {
                Durability::Immediate => vec![self.store.apply(&commands[0])],
                Durability::Deferred => self.store.apply_group(&commands),
            };
            results.truncate(commands.len());
            if results.is_empty() {
                // A store that took none would be asked again forever: the first is answered.
                results.push(Err(StoreError::Storage(
                    "the store applied none of the prunes it was given".into(),
                )));
            }
            for (command, applied) in commands.iter().zip(results) {
                let index = journaled[next];
                next += 1;
                batch.slots[index] = self.settle(batch, index, command.intent_id, applied);
            }
        }
    }

    /// The slot of a request after the store applied it: committed, refused (journaled as
    /// refused in phase 6), or failed (abandoned, except an outcome the store cannot tell,
    /// which stays pending for recovery).
    fn settle(
        &self,
        batch: &mut Batch<'_>,
        index: usize,
        intent_id: Uuid,
        applied: Result<Applied, StoreError>,
    ) -> Slot<'static> {
        match applied {
            Ok(Applied::Pruned { receipt, replayed }) => Slot::Committed {
                intent_id,
                receipt,
                replayed,
            },
            Ok(Applied::Refused(refusal)) => {
                batch.resolutions.push((
                    intent_id,
                    Resolution::Refused(refusal.reason.as_str().to_string()),
                ));
                batch.refused.push(index);
                Slot::answered(Ok(PruneOutcome {
                    result: PruneResult::Blocked {
                        reason: refusal.reason,
                    },
                    receipt: None,
                    event: None,
                    refusal: Some(refusal),
                    intent_id: Some(intent_id),
                    retried: false,
                }))
            }
            // The intent stays pending: recovery resolves it from the receipt, if any.
            Err(error @ StoreError::OutcomeUnknown(_)) => Slot::answered(Err(error.into())),
            Err(error) => {
                // The prune rolled back: nothing of it was written.
                batch
                    .resolutions
                    .push((intent_id, Resolution::Abandoned(error.to_string())));
                Slot::answered(Err(error.into()))
            }
        }
    }

    /// Phase 4 (deferred durability): one store sync for every commit of the batch. When it
    /// fails, whether they survive a power loss is unknown: their intents stay pending, and
    /// recovery decides from the receipts.
    fn make_durable(&self, batch: &mut Batch<'_>) {
        if !batch
            .slots
            .iter()
            .any(|slot| matches!(slot, Slot::Committed { .. }))
        {
            return;
        }
        if let Err(error) = self.store.make_durable() {
            let message = error.to_string();
            for slot in &mut batch.slots {
                if matches!(slot, Slot::Committed { .. }) {
                    *slot = Slot::answered(Err(StoreError::OutcomeUnknown(message.clone()).into()));
                }
            }
        }
    }

    /// Phase 5: the commit marks of the batch in one journal write, each with its event, then
    /// announced. When the write fails, the prunes stand in the database with their receipts:
    /// recovery on the next open journals them.
    ///
    /// The write does not wait for the disk (it becomes durable with the journal's next durable
    /// write or its close): the receipts are durable, and a crash before then leaves these
    /// intents pending, the newest of the journal, so recovery, which completes pending intents
    /// in intent order, gives each the sequence number it was announced with
    /// (docs/ARCHITECTURE.md, "Journal"). Once an intent of this engine stays pending with a
    /// receipt that may be in the database (its outcome unknown, or its commit mark failed),
    /// recovery could complete it before these: from then on the write is durable.
    fn journal_commits(&self, batch: &mut Batch<'_>) {
        let unknown = batch.slots.iter().any(|slot| {
            matches!(slot, Slot::Answered(answer)
                if matches!(**answer, Err(EngineError::Store(StoreError::OutcomeUnknown(_)))))
        });
        if unknown {
            self.unresolved.store(true, Ordering::SeqCst);
        }
        let commits: Vec<Commit> = batch
            .slots
            .iter()
            .filter_map(|slot| match slot {
                Slot::Committed {
                    intent_id, receipt, ..
                } => Some(commit_of(*intent_id, receipt)),
                _ => None,
            })
            .collect();
        if commits.is_empty() {
            return;
        }
        let written = if self.unresolved.load(Ordering::SeqCst) {
            self.journal.commit(&commits)
        } else {
            self.journal.commit_lazily(&commits)
        };
        match written {
            Ok(events) => {
                let mut events = events.into_iter();
                for slot in &mut batch.slots {
                    if !matches!(slot, Slot::Committed { .. }) {
                        continue;
                    }
                    let Some(event) = events.next() else { break };
                    let Slot::Committed {
                        intent_id,
                        receipt,
                        replayed,
                    } = std::mem::replace(slot, Slot::answered(Err(EngineError::Interrupted)))
                    else {
                        continue;
                    };
                    let event = PrunedEvent::from(event);
                    self.hub.publish(event.clone());
                    *slot = Slot::answered(Ok(PruneOutcome {
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
                self.unresolved.store(true, Ordering::SeqCst);
                let cause = chain(&error);
                for slot in &mut batch.slots {
                    if let Slot::Committed { receipt, .. } = slot {
                        let receipt = receipt.clone();
                        *slot = Slot::answered(Err(EngineError::CommittedNotJournaled {
                            receipt,
                            cause: cause.clone(),
                        }));
                    }
                }
            }
        }
    }

    /// Phase 6: the refusals and abandons of the batch in one journal write. A refusal that
    /// could not be journaled is answered with the journal's failure (an abandon's own error
    /// stands).
    fn journal_resolutions(&self, batch: &mut Batch<'_>) {
        if let Err(error) = self.journal.resolve_all(&batch.resolutions) {
            let shared = Arc::new(JournalError::from(error));
            for &index in &batch.refused {
                batch.slots[index] = Slot::answered(Err(EngineError::Journal(shared.clone())));
            }
        }
    }

    /// Phase 7: one answer per request, in order; a repeated request answers as a retry of its
    /// first occurrence (re-announcing its event).
    fn answer(&self, batch: Batch<'_>) -> Vec<Result<PruneOutcome, EngineError>> {
        let mut answers: Vec<Result<PruneOutcome, EngineError>> =
            Vec::with_capacity(batch.slots.len());
        for slot in batch.slots {
            let answer = match slot {
                Slot::Repeat(first) => match &answers[first] {
                    Ok(outcome) => {
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
                    Err(error) => Err(EngineError::SameRequestFailed(error.to_string())),
                },
                other => other.into_answer(),
            };
            answers.push(answer);
        }
        answers
    }

    /// The answer to an identical request that already committed: the journal's event,
    /// confirmed by the database's receipt (without it, a database restored from a backup, the
    /// request runs as a new one). Re-announces the event.
    fn replay(&self, key: &[u8; 32]) -> Result<Option<PruneOutcome>, EngineError> {
        if self.unresolved.load(Ordering::SeqCst) {
            self.resolve_pending(key)?;
        }
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

    /// Resolves the pending intent `key` points at, if any, as recovery would on the next open
    /// (docs/ARCHITECTURE.md, "Recovery"): committed, with its event, when the database holds its
    /// receipt; else abandoned. In a running engine only an intent whose outcome was unknown, or
    /// whose commit mark failed, stays pending (`unresolved` is set then). Resolving it
    /// before its request runs again keeps one prune to one event: a new intent of the same
    /// request would otherwise be committed with that receipt, or commit its own receipt, which
    /// the next open's recovery would give to the old intent as a second event.
    pub(super) fn resolve_pending(&self, key: &[u8; 32]) -> Result<(), EngineError> {
        let Some(intent) = self.journal.intent_by_request_key(key)? else {
            return Ok(());
        };
        if !intent.state.is_pending() {
            return Ok(());
        }
        match self.store.receipt_by_key(key)? {
            Some(receipt) if receipt.intent_id == intent.intent_id => {
                self.journal.commit(&[commit_of(intent.intent_id, &receipt)])?;
            }
            _ => self.journal.mark_abandoned(
                intent.intent_id,
                "resolved when its request came again: no receipt of its own in the database, the prune never committed",
            )?,
        }
        Ok(())
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
        selection: (&request.selection).into(),
        created_at_ms: now_ms(),
        state: IntentState::Pending,
    }
}

/// A batch on its way through the phases of [`Engine::run_batch`].
struct Batch<'r> {
    /// One per request, in order.
    slots: Vec<Slot<'r>>,
    /// Refusals and abandons to journal in one write (phase 6).
    resolutions: Vec<(Uuid, Resolution)>,
    /// The slots answered with a store refusal (their answer depends on phase 6).
    refused: Vec<usize>,
}

/// Where one request of a batch stands. Every state has the answer it gives if the batch ends
/// there ([`Slot::into_answer`]), so no request can be left without one.
enum Slot<'r> {
    /// Answered: a retry from the journal, a refusal, an error, a committed prune (boxed: an
    /// answer is much larger than the other states).
    Answered(Box<Result<PruneOutcome, EngineError>>),
    /// The same request as slot `.0`: answered as its retry.
    Repeat(usize),
    /// New, not journaled yet.
    New {
        request: &'r PruneRequest,
        key: [u8; 32],
    },
    /// Journaled, not applied yet; its receipt id is fixed (an archive entry written ahead
    /// names it).
    Journaled {
        request: &'r PruneRequest,
        key: [u8; 32],
        intent_id: Uuid,
        receipt_id: Uuid,
    },
    /// Committed in the store with its receipt; its commit mark is not journaled yet.
    Committed {
        intent_id: Uuid,
        receipt: Box<Receipt>,
        replayed: bool,
    },
}

impl Slot<'_> {
    /// An answered slot.
    fn answered(answer: Result<PruneOutcome, EngineError>) -> Self {
        Slot::Answered(Box::new(answer))
    }

    /// The answer of a request whose batch ends in this state: nothing written for one not
    /// yet applied (`Interrupted`); committed but not journaled for one the store committed.
    /// A repeat is answered by [`Engine::answer`], from its first occurrence.
    fn into_answer(self) -> Result<PruneOutcome, EngineError> {
        match self {
            Slot::Answered(answer) => *answer,
            Slot::New { .. } | Slot::Journaled { .. } | Slot::Repeat(_) => {
                Err(EngineError::Interrupted)
            }
            Slot::Committed { receipt, .. } => Err(EngineError::CommittedNotJournaled {
                receipt,
                cause: "the batch ended before its commit mark was journaled".into(),
            }),
        }
    }
}
