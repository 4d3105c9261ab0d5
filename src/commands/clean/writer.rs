//! The engine a clean with `--apply` writes through, opened at its first write over the store
//! the clean reads: the clean opens the store, starts the integrity check beside it
//! ([`OpenCodeStore::check_sound_beside`]) and surveys and plans with it while the check reads
//! on its own thread and connection; the first batch waits for the check's `ok`, then the
//! engine (the journal with its recovery, the archive) is opened over the same store, so what
//! the planning learnt serves the writes, and nothing is journaled or written before
//! (docs/ARCHITECTURE.md, "Sound files").

use std::cell::{OnceCell, RefCell};

use pruning_clean::CleanError;
use pruning_engine::{Engine, EngineError, PruneOutcome, PruneRequest};
use pruning_opencode::OpenCodeStore;

use super::super::{journal_busy, open_engine_over, Archiving};
use crate::cli::config::Config;

/// Why the engine was not opened.
pub(super) enum NotOpened {
    /// Another process holds the journal: the clean is blocked (`maintenance_required`).
    Busy(anyhow::Error),
    /// The file is not sound, the journal is refused, or the open failed otherwise.
    Failed(anyhow::Error),
}

/// A clean's engine over `store`, opened when its first write is due.
pub(super) struct LaterEngine<'s> {
    config: &'s Config,
    archiving: Archiving,
    /// The store the clean reads; its integrity check runs beside.
    store: &'s OpenCodeStore,
    engine: OnceCell<Engine<&'s OpenCodeStore>>,
    /// Why the engine could not be opened, once it was tried.
    failure: RefCell<Option<NotOpened>>,
}

impl<'s> LaterEngine<'s> {
    /// The engine to be opened over `store` (whose integrity check the caller started).
    pub(super) fn new(config: &'s Config, archiving: Archiving, store: &'s OpenCodeStore) -> Self {
        Self {
            config,
            archiving,
            store,
            engine: OnceCell::new(),
            failure: RefCell::new(None),
        }
    }

    /// Why the engine could not be opened (after the clean answered
    /// [`CleanError::EngineNotOpened`]).
    pub(super) fn failure(&self) -> Option<NotOpened> {
        self.failure.borrow_mut().take()
    }
}

impl pruning_clean::Writer for LaterEngine<'_> {
    fn store(&self) -> &OpenCodeStore {
        self.store
    }

    fn ready(&self) -> bool {
        self.engine.get().is_some() || self.store.sound_check_answered()
    }

    fn open(&self) -> Result<(), CleanError> {
        if self.engine.get().is_some() {
            return Ok(());
        }
        if self.failure.borrow().is_some() {
            return Err(CleanError::EngineNotOpened);
        }
        match open_engine_over(self.config, self.archiving, self.store) {
            Ok(engine) => {
                let _ = self.engine.set(engine);
                Ok(())
            }
            Err(error) => {
                let failure = if journal_busy(&error) {
                    NotOpened::Busy(error)
                } else {
                    NotOpened::Failed(error)
                };
                *self.failure.borrow_mut() = Some(failure);
                Err(CleanError::EngineNotOpened)
            }
        }
    }

    fn prune_many_until(
        &self,
        requests: &[PruneRequest],
        stop: &dyn Fn() -> bool,
    ) -> Vec<Result<PruneOutcome, EngineError>> {
        self.engine
            .get()
            .map(|engine| engine.prune_many_until(requests, stop))
            .unwrap_or_default()
    }
}
