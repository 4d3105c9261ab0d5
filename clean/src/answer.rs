//! One prune's answer, whichever mode gave it: what a dry run found, or what the engine answered
//! when the prune was applied. Both modes hand the report this one type, so that a dry run and
//! its apply are counted by the same code (docs/ARCHITECTURE.md, "The clean").

use pruning_engine::{
    AbandonedRun, BlockedReason, DryRun, EngineError, Operation, PruneOutcome, PruneResult, Refusal,
};

/// One prune's answer.
#[derive(Debug)]
pub enum Answer {
    /// Removed now (or, in a dry run, would be).
    Removed(Removal),
    /// Committed in the database with its receipt, but its commit mark could not be journaled
    /// (the cause, in words): removed; the next run's recovery journals it and announces its
    /// event.
    Unjournaled(Removal, String),
    /// An identical earlier prune had: answered from its receipt, nothing written.
    Already,
    /// Refused, with the refusal's reason and words.
    Refused(Refusal),
    /// Refused, with a reason and no words (an engine answer without its refusal).
    Blocked(BlockedReason),
    /// Not applied: the clean was interrupted first.
    NotReached,
    /// Failed (a storage or journal error, in words): whole or not at all; where a commit may
    /// have taken effect, the next run's recovery tells from the receipts.
    Failed(String),
}

/// What a prune removed (or would remove), as its receipt counts it.
#[derive(Debug)]
pub struct Removal {
    /// What it removed besides parts (a compaction, a diffs prune, a removal of migrated rows,
    /// an emptied shell output); `None` for a prune of parts.
    pub operation: Option<Operation>,
    /// Parts removed (the receipt's `removedCount`).
    pub parts: u64,
    /// Bytes of row data removed (the receipt's `bytesRemoved`).
    pub bytes: u64,
    /// The run OpenCode left incomplete that the prune was admitted beside, if any.
    pub abandoned_run: Option<AbandonedRun>,
}

impl Answer {
    /// Whether it removed something (or would).
    pub fn is_removed(&self) -> bool {
        matches!(self, Self::Removed(_) | Self::Unjournaled(..))
    }

    /// What a dry run found: its plan as a removal of `plan.bytes`, the receipt of an identical
    /// earlier prune, or the refusal.
    pub fn of_dry_run(found: Result<DryRun, Refusal>) -> Self {
        match found {
            Ok(DryRun::Plan {
                plan,
                abandoned_run,
            }) => Self::Removed(Removal {
                operation: plan.operation,
                parts: plan.remove.len() as u64,
                bytes: plan.bytes,
                abandoned_run,
            }),
            Ok(DryRun::AlreadyPruned(_)) => Self::Already,
            Err(refusal) => Self::Refused(refusal),
        }
    }

    /// What the engine answered an applied prune.
    pub fn of_engine(result: Result<PruneOutcome, EngineError>) -> Self {
        match result {
            Ok(outcome) => match outcome.result {
                PruneResult::Pruned { .. } if outcome.retried => Self::Already,
                PruneResult::Pruned { removed_count, .. } => {
                    let receipt = outcome.receipt;
                    let (operation, bytes, abandoned_run) = match receipt {
                        Some(receipt) => (
                            receipt.operation,
                            receipt.bytes_removed,
                            receipt.abandoned_run,
                        ),
                        None => (None, 0, None),
                    };
                    Self::Removed(Removal {
                        operation,
                        parts: u64::from(removed_count),
                        bytes,
                        abandoned_run,
                    })
                }
                PruneResult::Blocked { reason } => match outcome.refusal {
                    Some(refusal) => Self::Refused(refusal),
                    None => Self::Blocked(reason),
                },
            },
            Err(EngineError::Interrupted) => Self::NotReached,
            Err(EngineError::CommittedNotJournaled { receipt, cause }) => Self::Unjournaled(
                Removal {
                    operation: receipt.operation,
                    parts: u64::from(receipt.removed_count),
                    bytes: receipt.bytes_removed,
                    abandoned_run: receipt.abandoned_run,
                },
                cause,
            ),
            Err(error) => Self::Failed(error.to_string()),
        }
    }
}

/// Whether a refusal's cause passes by itself, so that the same clean later may prune what it
/// refused now: OpenCode using the session (a run, the quiet period, its write lock) or another
/// process holding the journal (`maintenance_required`), or OpenCode writing the message after
/// the clean read it (`conflict`); not a refusal the fence marks lasting (`--abandoned-after
/// never`, a time that is not a number). docs/ARCHITECTURE.md, "Contract".
pub fn passes(refusal: &Refusal) -> bool {
    use pruning_engine::BlockedReason::{Conflict, MaintenanceRequired};
    matches!(refusal.reason, MaintenanceRequired | Conflict) && !refusal.lasting
}
