//! The restore path: the compensating event of one archived prune, in the same order as a
//! prune (docs/ARCHITECTURE.md, "Restore"): an identical retry is answered from the journal and
//! the receipt; otherwise the intent is journaled durably, the store puts the rows back in one
//! transaction with the restore's receipt, the intent is marked committed with its event, and
//! the event (`rpc.codenomad.session-pruning.restored`) is announced.

use std::sync::atomic::Ordering;

use pruning_journal::{Intent, IntentState, Resolution, Selection};
use uuid::Uuid;

use super::{commit_of, now_ms, Engine};
use crate::contract::{BlockedReason, Refusal};
use crate::error::{EngineError, StoreError};
use crate::event::PrunedEvent;
use crate::receipt::Receipt;
use crate::request_key::restore_key;
use crate::restore::{RestoreRequest, RestoreResult};
use crate::store::{RestoreApplied, RestoreCommand, RestorePlan, SessionStore};

/// What [`Engine::restore`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreOutcome {
    /// The contract answer.
    pub result: RestoreResult,
    /// The restore's receipt, when restored (now or by an earlier identical request).
    pub receipt: Option<Receipt>,
    /// The announced event, when restored.
    pub event: Option<PrunedEvent>,
    /// The refusal with its explanation, when blocked.
    pub refusal: Option<Refusal>,
    /// The journaled intent, when one was recorded (an identical retry, or a receipt that is
    /// not a prune's, records none).
    pub intent_id: Option<Uuid>,
    /// True when an identical earlier request had already committed.
    pub retried: bool,
}

impl RestoreOutcome {
    fn blocked(refusal: Refusal, intent_id: Option<Uuid>) -> Self {
        Self {
            result: RestoreResult::Blocked {
                reason: refusal.reason,
            },
            receipt: None,
            event: None,
            refusal: Some(refusal),
            intent_id,
            retried: false,
        }
    }

    fn restored(
        receipt: Receipt,
        event: PrunedEvent,
        intent_id: Option<Uuid>,
        retried: bool,
    ) -> Self {
        Self {
            result: RestoreResult::restored(
                receipt.receipt_id,
                &event.data,
                receipt.part_ids.len() as u32,
            ),
            receipt: Some(receipt),
            event: Some(event),
            refusal: None,
            intent_id,
            retried,
        }
    }
}

impl<S: SessionStore> Engine<S> {
    /// Restores the prune whose receipt is `request.receipt_id`: puts back exactly the rows it
    /// removed, from the prune archive, when the message's revision is still the one the prune
    /// left (`conflict` otherwise), journaled and announced like a prune.
    ///
    /// An identical earlier restore that committed returns the same receipt and re-announces
    /// the same event, writing nothing. A receipt that is not known, is a restore's, or is of a
    /// prune that was not archived, is refused (`not_deletable`) before anything is journaled;
    /// every other refusal is journaled as refused and leaves the database unchanged.
    ///
    /// Errors: as [`Engine::prune`].
    pub fn restore(&self, request: &RestoreRequest) -> Result<RestoreOutcome, EngineError> {
        let _writing = self
            .writer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(database) = self.journal_epoch_moved()? {
            return Err(EngineError::JournalEpochMismatch {
                journal: self.journal_epoch,
                database,
            });
        }
        let key = restore_key(request.receipt_id);
        if self.unresolved.load(Ordering::SeqCst) {
            self.resolve_pending(&key)?;
        }
        if let Some(event) = self.journal.committed_event_for(&key)? {
            if let Some(receipt) = self.store.receipt_by_key(&key)? {
                // A retry answers as the restore did, unless the message was pruned again
                // since: its event would announce a revision the message no longer has.
                if let Some(refusal) = pruned_since(&self.store, &receipt)? {
                    return Ok(RestoreOutcome::blocked(refusal, None));
                }
                let event = PrunedEvent::from(event);
                self.hub.republish(event.clone());
                return Ok(RestoreOutcome::restored(receipt, event, None, true));
            }
        }
        let pruned = match self.pruned_receipt(request.receipt_id)? {
            Ok(pruned) => pruned,
            Err(refusal) => return Ok(RestoreOutcome::blocked(refusal, None)),
        };
        let intent = Intent {
            intent_id: Uuid::now_v7(),
            request_key: key,
            session_id: pruned.session_id.clone(),
            message_id: pruned.message_id.clone(),
            revision: pruned.revision_after.clone(),
            selection: Selection::Restore(request.receipt_id),
            created_at_ms: now_ms(),
            state: IntentState::Pending,
        };
        self.journal.record_intents(std::slice::from_ref(&intent))?;
        let intent_id = intent.intent_id;
        let command = RestoreCommand {
            request,
            intent_id,
            request_key: key,
            receipt_id: Uuid::now_v7(),
            database_id: &self.database_id,
            now_ms: now_ms(),
        };
        match self.store.restore(&command) {
            Ok(RestoreApplied::Restored { receipt, replayed }) => {
                let commit = commit_of(intent_id, &receipt);
                let written = if self.unresolved.load(Ordering::SeqCst) {
                    self.journal.commit(&[commit])
                } else {
                    self.journal.commit_lazily(&[commit])
                };
                let event = match written {
                    Ok(mut events) => events.pop().map(PrunedEvent::from),
                    Err(error) => {
                        self.unresolved.store(true, Ordering::SeqCst);
                        return Err(EngineError::CommittedNotJournaled {
                            receipt,
                            cause: crate::error::chain(&error),
                        });
                    }
                };
                let event = event.ok_or(EngineError::Internal("a commit of one gave no event"))?;
                self.hub.publish(event.clone());
                Ok(RestoreOutcome::restored(
                    *receipt,
                    event,
                    Some(intent_id),
                    replayed,
                ))
            }
            Ok(RestoreApplied::Refused(refusal)) => {
                self.journal.resolve_all(&[(
                    intent_id,
                    Resolution::Refused(refusal.reason.as_str().to_string()),
                )])?;
                Ok(RestoreOutcome::blocked(refusal, Some(intent_id)))
            }
            Err(error @ StoreError::OutcomeUnknown(_)) => {
                self.unresolved.store(true, Ordering::SeqCst);
                Err(error.into())
            }
            Err(error) => {
                // The transaction rolled back: nothing was written.
                let _ = self
                    .journal
                    .resolve_all(&[(intent_id, Resolution::Abandoned(error.to_string()))]);
                Err(error.into())
            }
        }
    }

    /// The receipt of the prune a restore names, or why it cannot be restored (see
    /// [`restorable`]).
    fn pruned_receipt(&self, receipt_id: Uuid) -> Result<Result<Receipt, Refusal>, EngineError> {
        restorable(&self.store, receipt_id)
    }
}

/// The receipts of the rows `receipt` names, oldest commit first: those of its message, and of
/// the same copy of it (a removal of the OpenCode 1.x rows OpenCode 2 migrated names the same
/// message as the prunes of OpenCode 2's copy, but not the same rows).
fn receipts_of_message<S: SessionStore>(
    store: &S,
    receipt: &Receipt,
) -> Result<Vec<Receipt>, EngineError> {
    Ok(store
        .receipts(Some(&receipt.session_id))?
        .into_iter()
        .filter(|r| {
            r.message_id == receipt.message_id && r.is_migrated_v1() == receipt.is_migrated_v1()
        })
        .collect())
}

/// Why the restore whose receipt is `restored` cannot be answered again: the message has a
/// newer receipt (it was pruned again since), `conflict`; `None` when the restore is still the
/// message's newest receipt.
///
/// Errors: [`EngineError::Store`].
fn pruned_since<S: SessionStore>(
    store: &S,
    restored: &Receipt,
) -> Result<Option<Refusal>, EngineError> {
    let receipts = receipts_of_message(store, restored)?;
    let newer = receipts
        .iter()
        .skip_while(|r| r.receipt_id != restored.receipt_id)
        .skip(1)
        .last();
    Ok(newer.map(|newer| {
        Refusal::new(
            BlockedReason::Conflict,
            format!(
                "the prune was restored (receipt {}), and the message was changed again since \
                 (receipt {}): restore the newest standing prune instead",
                restored.receipt_id, newer.receipt_id
            ),
        )
    }))
}

/// Why the prune with receipt `pruned` cannot be restored now because of the engine's own later
/// receipts of its message: a later prune stands on top of it (restores undo prunes newest
/// first), `conflict` naming the one to restore first; `None` when it is the newest standing
/// prune of its message.
///
/// Errors: [`EngineError::Store`].
fn undone_first<S: SessionStore>(
    store: &S,
    pruned: &Receipt,
) -> Result<Option<Refusal>, EngineError> {
    let mut standing: Vec<Uuid> = Vec::new();
    for receipt in receipts_of_message(store, pruned)? {
        match receipt.restores {
            Some(undone) => standing.retain(|id| *id != undone),
            None => standing.push(receipt.receipt_id),
        }
    }
    Ok(match standing.last() {
        Some(top) if *top != pruned.receipt_id && standing.contains(&pruned.receipt_id) => {
            Some(Refusal::new(
                BlockedReason::Conflict,
                format!(
                    "the message was pruned again since, by receipt {top}: restore that one \
                     first (restores undo a message's prunes newest first)"
                ),
            ))
        }
        _ => None,
    })
}

/// What [`Engine::restore`] would do now on `store`, writing nothing (the store's checks, then
/// a roll back): the plan, or why it would be refused.
///
/// Errors: [`EngineError::Store`].
pub fn restore_dry_run<S: SessionStore>(
    store: &S,
    request: &RestoreRequest,
) -> Result<Result<RestorePlan, Refusal>, EngineError> {
    if let Err(refusal) = restorable(store, request.receipt_id)? {
        return Ok(Err(refusal));
    }
    Ok(store.restore_dry_run(request, now_ms())?)
}

/// The receipt of the prune a restore of `receipt_id` names, read from `store` (read-only), or
/// why it cannot be restored: unknown, the receipt of a restore, or of a prune that was not
/// archived (`not_deletable`), or a later prune of its message stands on top of it
/// (`conflict`, naming it: restores undo a message's prunes newest first). [`Engine::restore`] checks this before journaling anything; a
/// caller can check it without opening the journal.
///
/// Errors: [`EngineError::Store`].
pub fn restorable<S: SessionStore>(
    store: &S,
    receipt_id: Uuid,
) -> Result<Result<Receipt, Refusal>, EngineError> {
    {
        Ok(match store.receipt(receipt_id)? {
            None => Err(Refusal::new(
                BlockedReason::NotDeletable,
                format!("no receipt {receipt_id} in this database (`receipts` lists them)"),
            )),
            Some(receipt) if receipt.is_restore() => Err(Refusal::new(
                BlockedReason::NotDeletable,
                format!(
                    "receipt {receipt_id} is a restore's; restore names the receipt of a prune"
                ),
            )),
            Some(receipt) if receipt.archive_hash.is_none() => Err(Refusal::new(
                BlockedReason::NotDeletable,
                format!(
                    "the prune of receipt {receipt_id} was not archived: only prunes made with \
                     --archive can be restored"
                ),
            )),
            Some(receipt) => match undone_first(store, &receipt)? {
                Some(refusal) => Err(refusal),
                None => Ok(receipt),
            },
        })
    }
}
