//! The session-pruning engine: the CodeNomad-compatible contract (`contract`, and the browsing
//! requests and answers in `browse`), the revision, the planner, scope, the request key, history
//! paging (`history`), batches (`batch`), restores (`restore`), receipts, the [`SessionStore`]
//! trait, the audit's journal side and report (`audit`), and the [`Engine`] that journals,
//! applies and announces every prune and restore (`engine`).
//!
//! Storage-specific code lives in the OpenCode store (`pruning-opencode`); the journal and the
//! event hub are their own crates. This crate knows the contract and the rules, not SQL.

#![warn(missing_docs)]

pub mod audit;
pub mod batch;
pub mod browse;
pub mod contract;
pub mod engine;
pub mod error;
mod escape;
pub mod event;
pub mod history;
pub mod lone_surrogates;
pub mod planner;
pub mod receipt;
pub mod request_key;
pub mod restore;
pub mod revision;
pub mod scope;
pub mod store;

pub use audit::{
    audit, ArchiveSummary, AuditReport, AuditScope, AwaitingRecovery, ChainSummary, ChangeKind,
    Discrepancy, DiscrepancyKind, EpochSummary, MessageChange, MissingSpillFile, StoreAudit,
};
pub use batch::{BatchItem, BatchOutcome, BatchResult, PruneBatchRequest, MAX_BATCH};
pub use contract::Refusal;
pub use contract::{
    BlockedReason, PartKind, PreviewPart, PreviewRequest, PreviewResult, PruneRequest, PruneResult,
    PrunedEventData, Selection, SeqRange, PRUNED_EVENT_TYPE,
};
pub use engine::{
    check_journal_binding, dry_run, now_ms, plan_journal_epoch, preview, restorable,
    restore_dry_run, start_journal_epoch, Engine, EpochStarted, PreviewOutcome, PruneOutcome,
    Recovery, RestoreOutcome, ENGINE_VERSION,
};
pub use error::{ContractError, EngineError, JournalError, StoreError};
pub use event::{CompactedEventData, JournalReplay, PrunedEvent, COMPACTED_EVENT_TYPE};
pub use history::{history, HistoryOutcome, HistoryRequest, HistoryResult, Purpose};
pub use planner::{PartClass, Plan, StoredMessage, StoredPart, ToolStatus, Unprunable};
pub use receipt::{
    AbandonedRun, Compacted, DiffsPruned, MigratedRemoved, Operation, Receipt, ShellOutputPruned,
};
pub use request_key::{after_restore, request_key, restore_key};
pub use restore::{RestoreRequest, RestoreResult, RESTORED_EVENT_TYPE};
pub use scope::{Ownership, Scope, GLOBAL_PROJECT};
pub use store::{
    Applied, DryRun, Durability, PruneCommand, ReceiptsHighWater, RestoreApplied, RestoreCommand,
    RestorePlan, SessionStore,
};

pub use pruning_events::{Delivery, Hub, RecvError, Subscription};
pub use pruning_journal::{Epoch, Intent, IntentState, Journal};
