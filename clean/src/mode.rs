//! [`Mode`], a dry run or an apply, which the caller decides once, and the [`Batch`] every phase
//! hands its planned prunes to: where the two modes answer. In a dry run the batch answers each
//! prune at once with what its dry run found; with an apply it queues them and, when the phase
//! says, applies them through the engine's group commit in the clean's turn. Either way each
//! answer reaches the phase as an [`Answer`], counted by the same code. Besides the batch, only
//! what an apply alone does or measures reads the mode (the snapshot share of a prune's bytes in
//! `walk.rs`, the end's figures in `run.rs`): docs/ARCHITECTURE.md, "The clean".

use std::sync::atomic::{AtomicBool, Ordering};

use pruning_engine::{Engine, EngineError, PruneOutcome, PruneRequest};
use pruning_opencode::OpenCodeStore;

use crate::answer::Answer;
use crate::error::CleanError;
use crate::turns::Turns;

/// How many whole batches a clean plans ahead while its engine is not ready to write (its
/// store's integrity check still running beside the planning): the requests are small (ids
/// and indexes), 32 batches of 1,000 a few MB.
const AHEAD_BATCHES: usize = 32;

/// How a clean's prunes are answered.
#[derive(Clone, Copy)]
pub enum Mode<'a> {
    /// Only read: each planned prune is checked as it would be made (the fence, the receipt
    /// lookup, the planner, in a transaction rolled back), and nothing is written.
    DryRun(&'a OpenCodeStore),
    /// Applied through the engine's one write path (intent journaled, transaction with its
    /// receipt, event announced), in batches.
    Apply(&'a dyn Writer),
}

/// Where an apply writes: an engine, open from the start (the server's) or opened by its
/// caller over the store the clean reads at the clean's first write, once the store's
/// integrity check running beside the planning has answered `ok` (the command line's:
/// docs/ARCHITECTURE.md, "Sound files").
pub trait Writer {
    /// The database the clean reads (and the engine writes).
    fn store(&self) -> &OpenCodeStore;

    /// Whether [`Self::open`] would answer without waiting.
    fn ready(&self) -> bool;

    /// Opens the engine if it is not open yet (waiting for the integrity check first).
    ///
    /// Errors: [`CleanError::EngineNotOpened`] when it cannot be opened (the file is damaged,
    /// the journal is held or refused); the caller keeps why.
    fn open(&self) -> Result<(), CleanError>;

    /// [`Engine::prune_many_until`] of the open engine; nothing (an empty answer) before
    /// [`Self::open`] succeeded.
    fn prune_many_until(
        &self,
        requests: &[PruneRequest],
        stop: &dyn Fn() -> bool,
    ) -> Vec<Result<PruneOutcome, EngineError>>;
}

impl Writer for Engine<OpenCodeStore> {
    fn store(&self) -> &OpenCodeStore {
        Engine::store(self)
    }

    fn ready(&self) -> bool {
        true
    }

    fn open(&self) -> Result<(), CleanError> {
        Ok(())
    }

    fn prune_many_until(
        &self,
        requests: &[PruneRequest],
        stop: &dyn Fn() -> bool,
    ) -> Vec<Result<PruneOutcome, EngineError>> {
        Engine::prune_many_until(self, requests, stop)
    }
}

impl<'a> Mode<'a> {
    /// The database the clean reads.
    pub fn store(&self) -> &'a OpenCodeStore {
        match self {
            Self::DryRun(store) => store,
            Self::Apply(writer) => writer.store(),
        }
    }

    /// Whether the clean writes.
    pub fn applies(&self) -> bool {
        matches!(self, Self::Apply(_))
    }
}

/// Where a phase hands its planned prunes, each with a tag of the phase's own (what it needs to
/// count the answer: a session, a share of the bytes); the answers come back with their
/// request and tag, in the order the prunes were planned.
pub(crate) struct Batch<'a, T> {
    mode: Mode<'a>,
    turns: &'a dyn Turns,
    stop: &'a AtomicBool,
    /// Prunes per group commit.
    size: usize,
    queued: Vec<PruneRequest>,
    tags: Vec<T>,
}

impl<'a, T> Batch<'a, T> {
    pub(crate) fn new(
        mode: Mode<'a>,
        turns: &'a dyn Turns,
        stop: &'a AtomicBool,
        size: usize,
    ) -> Self {
        Self {
            mode,
            turns,
            stop,
            size,
            queued: Vec::new(),
            tags: Vec::new(),
        }
    }

    /// Whether the prunes are applied (else: a dry run).
    pub(crate) fn applies(&self) -> bool {
        self.mode.applies()
    }

    /// Whether a planned prune must be checked by its dry run before it is handed over: always
    /// in a dry run (the check is its answer), and with an apply when `counting` toward a size
    /// (only what would commit counts, and the dry run must stop where the apply does).
    pub(crate) fn checks(&self, counting: bool) -> bool {
        !self.mode.applies() || counting
    }

    /// Hands over one planned prune. In a dry run it is answered now, with `checked` (its dry
    /// run's answer, as the phase counts it) or else its dry run; with an apply it is queued,
    /// answered when the batch is applied ([`Self::apply`]).
    ///
    /// Errors: the dry run's reads.
    pub(crate) fn offer(
        &mut self,
        request: PruneRequest,
        tag: T,
        checked: Option<Answer>,
        answered: &mut dyn FnMut(&PruneRequest, T, Answer),
    ) -> Result<(), CleanError> {
        match self.mode {
            Mode::DryRun(store) => {
                let answer = match checked {
                    Some(answer) => answer,
                    None => Answer::of_dry_run(pruning_engine::dry_run(store, &request)?),
                };
                answered(&request, tag, answer);
            }
            Mode::Apply(_) => {
                self.queued.push(request);
                self.tags.push(tag);
            }
        }
        Ok(())
    }

    /// The clean's mode.
    pub(crate) fn mode(&self) -> Mode<'a> {
        self.mode
    }

    /// Whether the queue is to be applied now: it holds a whole batch and the engine is ready
    /// to write; while it is not, planning goes on, up to [`AHEAD_BATCHES`] batches and as
    /// long as the store keeps what it planned for the writes.
    pub(crate) fn is_full(&self) -> bool {
        let queued = self.queued.len();
        let ahead = match self.mode {
            Mode::Apply(writer) => !writer.ready() && writer.store().keeps_more_plans(),
            Mode::DryRun(_) => false,
        };
        queued >= self.size && (!ahead || queued >= self.size.saturating_mul(AHEAD_BATCHES))
    }

    /// Applies the queued prunes through the engine's group commit, a batch at a time, each
    /// in the clean's turn, stopping before the next once the clean is stopped; hands each
    /// answer to `answered` in order and empties the queue. Nothing in a dry run, whose queue
    /// is always empty.
    ///
    /// Errors: [`CleanError::EngineNotOpened`] (nothing of the queue was applied).
    pub(crate) fn apply(
        &mut self,
        answered: &mut dyn FnMut(&PruneRequest, T, Answer),
    ) -> Result<(), CleanError> {
        let Mode::Apply(writer) = self.mode else {
            return Ok(());
        };
        if self.queued.is_empty() {
            return Ok(());
        }
        writer.open()?;
        let stop = self.stop;
        let stopped = || stop.load(Ordering::SeqCst);
        let mut tags = std::mem::take(&mut self.tags).into_iter();
        for queued in self.queued.chunks(self.size.max(1)) {
            if stopped() {
                break;
            }
            let mut results = Vec::new();
            self.turns
                .take(&mut || results = writer.prune_many_until(queued, &stopped));
            let whole = results.len() == queued.len();
            for ((request, tag), result) in queued.iter().zip(tags.by_ref()).zip(results) {
                answered(request, tag, Answer::of_engine(result));
            }
            if !whole {
                break;
            }
        }
        self.queued.clear();
        Ok(())
    }

    /// Lets go of the queued prunes without applying them (the clean was stopped); how many.
    pub(crate) fn discard(&mut self) -> usize {
        let queued = self.queued.len();
        self.queued.clear();
        self.tags.clear();
        queued
    }
}
