//! Opening the engine: the binding between the journal and the database (the rules live in
//! [`identity`]), recovery of intents left pending, and the journal's retention.

use std::sync::Arc;

use pruning_events::Hub;
use std::path::Path;

use pruning_journal::{Epoch, Journal, Retention};
use uuid::Uuid;

use super::{commit_of, now_ms, Engine, Recovery, LIVE_CAPACITY};
use crate::error::EngineError;
use crate::event::JournalReplay;
use crate::store::SessionStore;

impl<S: SessionStore> Engine<S> {
    /// Opens the engine: binds the journal to the database's identity and resolves every pending
    /// intent against the store's receipts.
    ///
    /// Binding: a database holding another id than the journal is
    /// [`EngineError::JournalMismatch`]; a database holding an id (it has receipts) with a new
    /// journal is [`EngineError::JournalMissing`] (the journal that numbered their events is
    /// gone: `start_journal_epoch` begins another); a journal of another epoch than the
    /// database's is [`EngineError::JournalEpochMismatch`]; a database holding no id with a
    /// journal that has
    /// committed prunes is [`EngineError::UnknownDatabase`], and with one that has unresolved
    /// intents made elsewhere (the journal records where its database was last seen,
    /// [`SessionStore::location`]) [`EngineError::UnresolvedIntents`]. A new pair gets a fresh UUID v7
    /// identity, written to the database with its first prune.
    pub fn open(store: S, journal: Journal) -> Result<Self, EngineError> {
        let journal = Arc::new(journal);
        let database_id = identity(&store, &journal, Use::Writing)?;
        journal.bind(&database_id).map_err(|e| match e {
            pruning_journal::BindError::Mismatch { bound, found } => {
                EngineError::JournalMismatch { bound, found }
            }
            other => other.into(),
        })?;
        if let Some(location) = store.location() {
            journal.record_database_location(&location)?;
        }
        let journal_epoch = journal.epoch()?.number;
        let hub = Hub::new(Arc::new(JournalReplay::new(journal.clone())), LIVE_CAPACITY);
        let mut engine = Self {
            store,
            journal,
            writer: std::sync::Mutex::new(()),
            unresolved: std::sync::atomic::AtomicBool::new(false),
            hub,
            database_id,
            journal_epoch,
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
    /// A journal that is not bound yet (no journal file: an empty one in memory) reads as the
    /// database's, with no event.
    ///
    /// Errors: as [`Engine::open`]'s binding errors but [`EngineError::JournalMissing`], and the
    /// journal's read errors.
    pub fn open_read_only(store: S, journal: Journal) -> Result<Self, EngineError> {
        let journal = Arc::new(journal);
        let database_id = identity(&store, &journal, Use::Reading)?;
        let journal_epoch = journal.epoch()?.number;
        let hub = Hub::new(Arc::new(JournalReplay::new(journal.clone())), LIVE_CAPACITY);
        Ok(Self {
            store,
            journal,
            writer: std::sync::Mutex::new(()),
            unresolved: std::sync::atomic::AtomicBool::new(false),
            hub,
            database_id,
            journal_epoch,
            recovery: Recovery::default(),
        })
    }

    /// Applies the journal's retention (docs/ARCHITECTURE.md, "Journal": keep at least the last
    /// 1,000,000 events or 30 days; refused and abandoned intents for 30 days) when it is due,
    /// so that an open with nothing to remove writes nothing.
    fn trim_if_due(&self) -> Result<(), EngineError> {
        let policy = Retention::default();
        let now = now_ms();
        if self.journal.resolved_intents_due(&policy, now)? {
            self.journal.remove_resolved_intents(&policy, now)?;
        }
        let Some(first) = self.journal.first_seq()? else {
            return Ok(());
        };
        let Some(oldest) = self.journal.event(first)? else {
            return Ok(());
        };
        let last = self.journal.last_seq()?;
        if policy.may_remove(oldest.seq, oldest.committed_at_ms, last, now) {
            self.journal.apply_retention(&policy, now)?;
        }
        Ok(())
    }

    fn recover(&self) -> Result<Recovery, EngineError> {
        let mut recovery = Recovery::default();
        let pending = self.journal.pending_intents()?;
        for intent in pending {
            match self.store.receipt_by_key(&intent.request_key)? {
                Some(receipt) => {
                    self.journal
                        .commit(&[commit_of(intent.intent_id, &receipt)])?;
                    recovery.completed.push(intent.intent_id);
                }
                None => {
                    self.journal.mark_abandoned(
                        intent.intent_id,
                        "recovered on open: no receipt in the database, the prune never committed",
                    )?;
                    recovery.abandoned.push(intent.intent_id);
                }
            }
        }
        Ok(recovery)
    }
}

/// What the engine is opened for: a writing open binds a new journal and so must not take one
/// for a database whose journal was lost; a reading open of a database without a journal file
/// reads it with an empty one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Use {
    Writing,
    Reading,
}

/// The identity the journal and the database share, by the binding rules of [`Engine::open`]:
/// the journal's, the database's, or a new UUID v7 for a new pair; and the two on one epoch.
fn identity<S: SessionStore>(
    store: &S,
    journal: &Journal,
    purpose: Use,
) -> Result<String, EngineError> {
    let bound = journal.bound_database()?;
    let stored = store.database_id()?;
    if bound.is_some() {
        let (journal_epoch, database_epoch) = (journal.epoch()?.number, store.journal_epoch()?);
        if journal_epoch != database_epoch {
            return Err(EngineError::JournalEpochMismatch {
                journal: journal_epoch,
                database: database_epoch,
            });
        }
    }
    let database_id = match (bound, stored) {
        (Some(bound), Some(found)) if bound != found => {
            return Err(EngineError::JournalMismatch { bound, found })
        }
        (Some(bound), Some(_)) => bound,
        // A journal that has seen committed prunes belongs to a database that holds its
        // identity; one without any may still adopt this database.
        (Some(bound), None) => {
            if journal.last_seq()? > 0 {
                return Err(EngineError::UnknownDatabase { bound });
            }
            // Pending intents may have committed in the database the journal was used with;
            // resolving them against this one could abandon a prune that happened.
            let pending = journal.pending_intents()?.len();
            let seen_here =
                store.location().is_some() && journal.database_location()? == store.location();
            if pending > 0 && !seen_here {
                return Err(EngineError::UnresolvedIntents { bound, pending });
            }
            bound
        }
        // The database has receipts, and the journal that numbered their events is not this
        // one: binding it would number new events from 1 again.
        (None, Some(found)) if purpose == Use::Writing => {
            return Err(EngineError::JournalMissing {
                database_id: found,
                receipts: store.receipts_high_water()?.receipts,
            })
        }
        (None, Some(found)) => found,
        (None, None) => Uuid::now_v7().to_string(),
    };
    Ok(database_id)
}

/// Checks that `journal` may be used to write to the database of `store`, by the binding
/// rules of [`Engine::open`], without writing anything: for a journal opened read-only before a
/// writable open, which would write to the file (redb's open mark) even when the binding is
/// then refused.
///
/// Errors: as [`Engine::open`]'s binding errors, and the journal's read errors.
pub fn check_journal_binding<S: SessionStore>(
    store: &S,
    journal: &Journal,
) -> Result<(), EngineError> {
    identity(store, journal, Use::Writing).map(|_| ())
}

/// The journal epoch a call to [`start_journal_epoch`] began.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochStarted {
    /// The database the journal is bound to.
    pub database_id: String,
    /// The new epoch: its number, and the sequence number its first event follows.
    pub epoch: Epoch,
    /// The receipts the database holds, made in the epochs before.
    pub receipts: u64,
}

/// What [`start_journal_epoch`] would begin, without writing anything: the next epoch number
/// after the database's and the high-water mark of its receipts.
///
/// Errors: [`EngineError::NothingJournaled`] for a database without receipts; the store's.
pub fn plan_journal_epoch<S: SessionStore>(store: &S) -> Result<EpochStarted, EngineError> {
    let database_id = store.database_id()?.ok_or(EngineError::NothingJournaled)?;
    let high_water = store.receipts_high_water()?;
    Ok(EpochStarted {
        database_id,
        epoch: Epoch {
            number: store.journal_epoch()? + 1,
            after_seq: high_water.seq,
        },
        receipts: high_water.receipts,
    })
}

/// Begins a new journal epoch for a database whose journal was lost (docs/ARCHITECTURE.md,
/// "Journal epochs"): the database records the next epoch number, then a new journal at `path`
/// is made for it ([`Journal::create_epoch`]), bound to the database and numbering its events
/// after the highest its receipts may have had, so that no number is given twice and a
/// subscriber whose cursor is older resyncs. Returns the new journal, to open the engine with.
///
/// The database is written first: a failure after it leaves a database on an epoch with no
/// journal, which is refused as a lost journal and which another call begins again (with the
/// number after).
///
/// Errors: [`EngineError::NothingJournaled`] for a database without receipts; the journal's
/// [`pruning_journal::EpochError::Occupied`] when `path` holds a file that is not empty
/// (nothing is written, in the database either); the store's.
pub fn start_journal_epoch<S: SessionStore>(
    store: &S,
    path: &Path,
) -> Result<(Journal, EpochStarted), EngineError> {
    let planned = plan_journal_epoch(store)?;
    let occupied = std::fs::metadata(path).is_ok_and(|found| !found.is_file() || found.len() > 0);
    if occupied {
        return Err(pruning_journal::EpochError::Occupied {
            path: path.to_path_buf(),
        }
        .into());
    }
    if !store.set_journal_epoch(planned.epoch.number)? {
        return Err(EngineError::JournalEpochRaced {
            epoch: store.journal_epoch()?,
        });
    }
    let journal = Journal::create_epoch(path, &planned.database_id, planned.epoch)?;
    Ok((journal, planned))
}
