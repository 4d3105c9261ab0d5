//! Opening the engine: the binding between the journal and the database (the rules live in
//! [`identity`]), recovery of intents left pending, and the journal's retention.

use std::sync::Arc;

use pruning_events::Hub;
use pruning_journal::{Journal, Retention};
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
            other => other.into(),
        })?;
        if let Some(location) = store.location() {
            journal.record_database_location(&location)?;
        }
        let hub = Hub::new(Arc::new(JournalReplay::new(journal.clone())), LIVE_CAPACITY);
        let mut engine = Self {
            store,
            journal,
            writer: std::sync::Mutex::new(()),
            unresolved: std::sync::atomic::AtomicBool::new(false),
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
            writer: std::sync::Mutex::new(()),
            unresolved: std::sync::atomic::AtomicBool::new(false),
            hub,
            database_id,
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

/// Every slot filled by [`Engine::run_batch`]; an empty one (which no path leaves) reads as a
/// journal failure rather than a panic.
/// The identity the journal and the database share, by the binding rules of [`Engine::open`]:
/// the journal's, the database's, or a new UUID v7 for a new pair.
fn identity<S: SessionStore>(store: &S, journal: &Journal) -> Result<String, EngineError> {
    let bound = journal.bound_database()?;
    let stored = store.database_id()?;
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
        (None, Some(found)) => found,
        (None, None) => Uuid::now_v7().to_string(),
    };
    Ok(database_id)
}
