//! The `SessionStore` trait: what the engine needs from the storage of OpenCode sessions (one
//! store may hold several storage generations), and the command and answer types that cross it
//! (the receipt is in `receipt`).
//!
//! A store owns all I/O on the OpenCode database. It reads messages for the planner and applies a
//! prune in one transaction: fence, receipt lookup, read, plan, revision compare, write, receipt
//! insert (docs/ARCHITECTURE.md, "The write path of one prune", step 4).

use std::ops::ControlFlow;

use uuid::Uuid;

use crate::audit::{AuditScope, StoreAudit};
use crate::contract::{BlockedReason, PreviewRequest, PruneRequest, Refusal};
use crate::error::StoreError;
use crate::history::scan::{HistoryScan, ScanEnd, ScannedMessage};
use crate::planner::{Plan, StoredMessage};
use crate::receipt::{AbandonedRun, Receipt};
use crate::restore::RestoreRequest;

/// Everything a store needs to apply one journaled prune intent.
#[derive(Debug, Clone)]
pub struct PruneCommand<'a> {
    /// The validated request.
    pub request: &'a PruneRequest,
    /// The journaled intent.
    pub intent_id: Uuid,
    /// SHA-256 of the canonical request.
    pub request_key: [u8; 32],
    /// Id for the receipt if this prune commits.
    pub receipt_id: Uuid,
    /// The identity the journal is bound to; the store records it on first write and refuses a
    /// database that holds another.
    pub database_id: &'a str,
    /// Now, ms since the Unix epoch.
    pub now_ms: i64,
    /// Whether the commit must be durable when `apply` returns.
    pub durability: Durability,
}

/// When a committed prune must be durable (docs/ARCHITECTURE.md, "Bulk work": the last transaction
/// of a
/// batch makes the batch durable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Durable when [`SessionStore::apply`] returns (one prune).
    Immediate,
    /// May be durable only after the next [`SessionStore::make_durable`] (a batch: the engine
    /// calls it once, before journaling the batch's commits).
    Deferred,
}

/// The outcome of [`SessionStore::apply`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The prune committed, or an identical one had (`replayed`): `receipt` is its receipt.
    Pruned {
        /// The receipt row.
        receipt: Box<Receipt>,
        /// True when the receipt already existed and nothing was written now.
        replayed: bool,
    },
    /// Refused; nothing was written.
    Refused(Refusal),
}

/// What a prune would do now, from [`SessionStore::dry_run`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DryRun {
    /// The prune would remove these parts.
    Plan {
        /// The planner's decision.
        plan: Plan,
        /// The abandoned run the fence would admit the prune beside (idle until the dry run),
        /// as the receipt would record it.
        abandoned_run: Option<AbandonedRun>,
    },
    /// An identical request already committed: a prune would return this receipt.
    AlreadyPruned(Box<Receipt>),
}

/// Everything a store needs to apply one journaled restore intent.
#[derive(Debug, Clone)]
pub struct RestoreCommand<'a> {
    /// The request.
    pub request: &'a RestoreRequest,
    /// The journaled intent.
    pub intent_id: Uuid,
    /// The restore's request key ([`crate::restore_key`]).
    pub request_key: [u8; 32],
    /// Id for the restore's receipt if it commits.
    pub receipt_id: Uuid,
    /// The identity the journal is bound to (as [`PruneCommand::database_id`]).
    pub database_id: &'a str,
    /// Now, ms since the Unix epoch.
    pub now_ms: i64,
}

/// The outcome of [`SessionStore::restore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreApplied {
    /// The restore committed, or an identical one had (`replayed`): `receipt` is its receipt.
    Restored {
        /// The restore's receipt.
        receipt: Box<Receipt>,
        /// True when the receipt already existed and nothing was written now.
        replayed: bool,
    },
    /// Refused; nothing was written.
    Refused(Refusal),
}

/// What a restore would put back now, from [`SessionStore::restore_dry_run`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestorePlan {
    /// The receipt of the prune it undoes.
    pub pruned: Receipt,
    /// Rows it puts back, over every table.
    pub rows: usize,
    /// Bytes of those rows' `data`.
    pub bytes: u64,
    /// An identical restore already committed with this receipt (then nothing would be
    /// written).
    pub already: Option<Receipt>,
}

/// What [`SessionStore::receipts_high_water`] finds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiptsHighWater {
    /// Receipts in the database.
    pub receipts: u64,
    /// The highest sequence number their events may have had: at least `receipts`.
    pub seq: u64,
}

/// A storage generation of OpenCode, seen by the engine.
///
/// Implementations are synchronous; the engine calls them from whatever thread it runs on.
pub trait SessionStore: Send + Sync {
    /// Where the database is (its canonical path, say), recorded in the journal so that
    /// unresolved intents are only resolved against the database they were made for. `None`
    /// when the store cannot tell.
    fn location(&self) -> Option<String> {
        None
    }

    /// The database identity recorded by an earlier prune, if any (read-only).
    fn database_id(&self) -> Result<Option<String>, StoreError>;

    /// The number of the journal epoch the database is on (docs/ARCHITECTURE.md, "Journal
    /// epochs"): 1 until [`SessionStore::set_journal_epoch`] records another (read-only).
    fn journal_epoch(&self) -> Result<u64, StoreError>;

    /// Moves the database from journal epoch `epoch - 1` to `epoch`, durably, in one write
    /// transaction: `true` when it moved, `false` (nothing written) when the database is on
    /// another epoch by then (another start came first).
    fn set_journal_epoch(&self, epoch: u64) -> Result<bool, StoreError>;

    /// How many receipts the database holds, and the highest sequence number the events of
    /// its receipts may have had: each committed prune has one receipt and one event, numbered
    /// in the order the receipts were made (read-only).
    fn receipts_high_water(&self) -> Result<ReceiptsHighWater, StoreError>;

    /// Reads a message for preview, read-only. `Ok(Err(refusal))` when the message cannot be read
    /// as prunable content (missing, or its session outside `request.scope`: `not_deletable`;
    /// over 16 MiB or unknown storage: `unsupported_storage` or `not_deletable` as the store
    /// documents).
    fn read_message(
        &self,
        request: &PreviewRequest,
    ) -> Result<Result<StoredMessage, Refusal>, StoreError>;

    /// Whether prunes of this message can be written here (the preview's `liveMutation`).
    fn live_mutation(&self, session_id: &str, message_id: &str) -> bool;

    /// Applies a prune in one transaction with its receipt. Refusals leave the database
    /// unchanged. A receipt already stored under the same request key is returned unchanged.
    fn apply(&self, command: &PruneCommand<'_>) -> Result<Applied, StoreError>;

    /// Applies the first commands of `commands` (all [`Durability::Deferred`], of one batch) in
    /// one store transaction, each as [`SessionStore::apply`] would apply it alone: its content
    /// change and its receipt together, a refusal or an error of one rolling back that prune
    /// alone (docs/ARCHITECTURE.md, "Group transactions"). The store decides how many fit (a
    /// store that bounds how long it holds its write lock stops adding prunes when that budget
    /// is spent) and returns one result per command it took, in order: at least one when
    /// `commands` is not empty, none when it is. The engine calls it again with the rest.
    ///
    /// A failure of the transaction's commit is every taken prune's: [`StoreError::OutcomeUnknown`]
    /// for each one that wrote, or the refusal of a commit that was rolled back. The default takes
    /// one command and applies it alone.
    fn apply_group(&self, commands: &[PruneCommand<'_>]) -> Vec<Result<Applied, StoreError>> {
        commands
            .first()
            .map(|command| vec![self.apply(command)])
            .unwrap_or_default()
    }

    /// Runs everything a prune runs before it writes (write lock, fence, receipt lookup, read,
    /// planner), then rolls back: nothing is written. `now_ms` is ms since the Unix epoch.
    fn dry_run(
        &self,
        request: &PruneRequest,
        now_ms: i64,
    ) -> Result<Result<DryRun, Refusal>, StoreError>;

    /// Called by a batch before its prunes are applied, with their commands (their receipt ids
    /// fixed): a store that archives what prunes remove writes their entries ahead, durable in
    /// one sync, so that each prune need not wait for its own (docs/ARCHITECTURE.md, "Archive").
    /// Nothing here may change what a prune does; a failure shows when the prune is applied.
    /// The default does nothing.
    fn archive_ahead(&self, commands: &[PruneCommand<'_>]) {
        let _ = commands;
    }

    /// Makes every prune this store committed with [`Durability::Deferred`] durable. The
    /// default does nothing (a store whose commits are always durable).
    ///
    /// Errors: the sync failed; whether those prunes survive a power loss is unknown
    /// ([`StoreError::OutcomeUnknown`]).
    fn make_durable(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// The receipt stored under a request key, if any (read-only).
    fn receipt_by_key(&self, request_key: &[u8; 32]) -> Result<Option<Receipt>, StoreError>;

    /// The receipt with this id, if any (read-only). The default looks through
    /// [`SessionStore::receipts`].
    fn receipt(&self, receipt_id: Uuid) -> Result<Option<Receipt>, StoreError> {
        Ok(self
            .receipts(None)?
            .into_iter()
            .find(|r| r.receipt_id == receipt_id))
    }

    /// The key a prune request with key `request_key` ([`crate::request_key()`]) has now: the
    /// same key, or, while the receipt under it was undone by a restore, the
    /// [`crate::after_restore`] key of that receipt, followed as far as it goes (read-only).
    /// The default, for a store that cannot restore, is the key itself.
    fn live_request_key(&self, request_key: &[u8; 32]) -> Result<[u8; 32], StoreError> {
        Ok(*request_key)
    }

    /// Applies a restore in one transaction with its receipt: the prune's receipt is checked
    /// (known, a prune's, archived, in the request's scope), the fence passes, the message's
    /// revision is still the one the prune left, and the archived rows go back exactly.
    /// Refusals leave the database unchanged; a restore receipt already stored under the same
    /// request key is returned unchanged. The default refuses (`unsupported_storage`).
    fn restore(&self, command: &RestoreCommand<'_>) -> Result<RestoreApplied, StoreError> {
        let _ = command;
        Ok(RestoreApplied::Refused(Refusal::new(
            BlockedReason::UnsupportedStorage,
            "this store cannot restore prunes",
        )))
    }

    /// Runs every check of [`SessionStore::restore`] and reads the archived rows, then rolls
    /// back: nothing is written. `now_ms` is ms since the Unix epoch. The default refuses
    /// (`unsupported_storage`).
    fn restore_dry_run(
        &self,
        request: &RestoreRequest,
        now_ms: i64,
    ) -> Result<Result<RestorePlan, Refusal>, StoreError> {
        let _ = (request, now_ms);
        Ok(Err(Refusal::new(
            BlockedReason::UnsupportedStorage,
            "this store cannot restore prunes",
        )))
    }

    /// All receipts, oldest commit first, optionally of one session (read-only).
    fn receipts(&self, session_id: Option<&str>) -> Result<Vec<Receipt>, StoreError>;

    /// Visits the rows of `scan` in [`crate::history::Position`] order, read-only and from one
    /// snapshot, calling `visit` for each until it breaks or `scan.limit` rows were visited.
    /// Refusals: the named session is missing or outside `scan.scope` (`not_deletable`); the
    /// store keeps no history it can scan (`unsupported_storage`, the default).
    fn scan_history(
        &self,
        scan: &HistoryScan<'_>,
        visit: &mut dyn FnMut(ScannedMessage) -> ControlFlow<()>,
    ) -> Result<Result<ScanEnd, Refusal>, StoreError> {
        let _ = (scan, visit);
        Ok(Err(Refusal::new(
            BlockedReason::UnsupportedStorage,
            "this store cannot scan history",
        )))
    }

    /// The store's side of the audit of the receipts in `scope`, read-only: the receipt chain, and each receipt against the rows it removed and the
    /// message it pruned (docs/ARCHITECTURE.md, "Audit"). The default, for a store that keeps no
    /// receipt chain, checks nothing and lists [`SessionStore::receipts`].
    ///
    /// Errors: the store could not be read.
    fn audit(&self, scope: AuditScope<'_>) -> Result<StoreAudit, StoreError> {
        let all = self.receipts(None)?;
        Ok(StoreAudit {
            all_receipt_ids: all.iter().map(|r| r.receipt_id).collect(),
            receipts: all
                .into_iter()
                .filter(|r| scope.admits(&r.session_id))
                .collect(),
            ..StoreAudit::default()
        })
    }
}

/// A store is a store through a shared reference too: an engine over `&S` writes through a
/// store its caller keeps and reads beside it (a clean plans with the store, then opens the
/// engine over it at its first write). Every method is the referenced store's.
impl<S: SessionStore + ?Sized> SessionStore for &S {
    fn location(&self) -> Option<String> {
        (**self).location()
    }

    fn database_id(&self) -> Result<Option<String>, StoreError> {
        (**self).database_id()
    }

    fn journal_epoch(&self) -> Result<u64, StoreError> {
        (**self).journal_epoch()
    }

    fn set_journal_epoch(&self, epoch: u64) -> Result<bool, StoreError> {
        (**self).set_journal_epoch(epoch)
    }

    fn receipts_high_water(&self) -> Result<ReceiptsHighWater, StoreError> {
        (**self).receipts_high_water()
    }

    fn read_message(
        &self,
        request: &PreviewRequest,
    ) -> Result<Result<StoredMessage, Refusal>, StoreError> {
        (**self).read_message(request)
    }

    fn live_mutation(&self, session_id: &str, message_id: &str) -> bool {
        (**self).live_mutation(session_id, message_id)
    }

    fn apply(&self, command: &PruneCommand<'_>) -> Result<Applied, StoreError> {
        (**self).apply(command)
    }

    fn apply_group(&self, commands: &[PruneCommand<'_>]) -> Vec<Result<Applied, StoreError>> {
        (**self).apply_group(commands)
    }

    fn dry_run(
        &self,
        request: &PruneRequest,
        now_ms: i64,
    ) -> Result<Result<DryRun, Refusal>, StoreError> {
        (**self).dry_run(request, now_ms)
    }

    fn archive_ahead(&self, commands: &[PruneCommand<'_>]) {
        (**self).archive_ahead(commands)
    }

    fn make_durable(&self) -> Result<(), StoreError> {
        (**self).make_durable()
    }

    fn receipt_by_key(&self, request_key: &[u8; 32]) -> Result<Option<Receipt>, StoreError> {
        (**self).receipt_by_key(request_key)
    }

    fn receipt(&self, receipt_id: Uuid) -> Result<Option<Receipt>, StoreError> {
        (**self).receipt(receipt_id)
    }

    fn live_request_key(&self, request_key: &[u8; 32]) -> Result<[u8; 32], StoreError> {
        (**self).live_request_key(request_key)
    }

    fn restore(&self, command: &RestoreCommand<'_>) -> Result<RestoreApplied, StoreError> {
        (**self).restore(command)
    }

    fn restore_dry_run(
        &self,
        request: &RestoreRequest,
        now_ms: i64,
    ) -> Result<Result<RestorePlan, Refusal>, StoreError> {
        (**self).restore_dry_run(request, now_ms)
    }

    fn receipts(&self, session_id: Option<&str>) -> Result<Vec<Receipt>, StoreError> {
        (**self).receipts(session_id)
    }

    fn scan_history(
        &self,
        scan: &HistoryScan<'_>,
        visit: &mut dyn FnMut(ScannedMessage) -> ControlFlow<()>,
    ) -> Result<Result<ScanEnd, Refusal>, StoreError> {
        (**self).scan_history(scan, visit)
    }

    fn audit(&self, scope: AuditScope<'_>) -> Result<StoreAudit, StoreError> {
        (**self).audit(scope)
    }
}
