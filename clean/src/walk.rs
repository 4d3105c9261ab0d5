//! The walk over a clean's messages: each planned by the clean policy, checked by its dry run
//! where the mode needs it ([`Batch::checks`]), and handed to the batch: answered at once in a
//! dry run, applied in the engine's batches with an apply.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

use pruning_engine::{DryRun, PruneRequest, Selection, SessionStore};
use pruning_opencode::{OpenCodeStore, Planned};

use crate::answer::Answer;
use crate::error::CleanError;
use crate::listings::Listings;
use crate::mode::Batch;
use crate::progress::Progress;
use crate::report::{Report, UntilLiveSize};
use crate::Clean;

/// The walk over the messages: each planned by the clean policy, then handed to the batch
/// (whose queue fills across sessions: a database of many small sessions still gets batches of
/// `batch_size` messages).
pub(crate) struct Walk<'a> {
    /// Where the planned prunes go, each tagged with the bytes of the part snapshots it removes.
    pub(crate) batch: Batch<'a, u64>,
    pub(crate) clean: &'a Clean,
    pub(crate) stop: &'a AtomicBool,
    /// The sessions a compaction took first (in a dry run: would take).
    pub(crate) compacted: &'a HashSet<String>,
    pub(crate) now: i64,
    pub(crate) until: Option<UntilLiveSize>,
    pub(crate) report: Report,
    pub(crate) progress: &'a mut dyn Progress,
    /// The spill files the dry run's prunes point at, once per part.
    pub(crate) spilled: Vec<String>,
}

impl<'a> Walk<'a> {
    /// The database the walk reads: the mode's (an apply's engine's once it is open).
    fn store(&self) -> &'a OpenCodeStore {
        self.batch.mode().store()
    }

    /// Walks every message of `sessions`: oldest first across sessions with
    /// `--until-live-size` (a time that is not a number sorts last), else session by session;
    /// then applies the last batch, unless stopped (its messages were planned, never applied:
    /// not reached).
    ///
    /// Errors: the store's reads.
    pub(crate) fn all(&mut self, sessions: &Listings) -> Result<(), CleanError> {
        self.progress.phase("messages", sessions.total);
        if self.clean.until_live_size.is_some() {
            let mut order: Vec<(Option<i64>, &str, &str)> = sessions
                .ids
                .iter()
                .zip(&sessions.kept_listings)
                .flat_map(|(session_id, listing)| {
                    let times = listing.times.iter().copied();
                    times
                        .zip(&listing.ids)
                        .map(move |(time, id)| (time, session_id.as_str(), id.as_str()))
                })
                .collect();
            order.sort_by_key(|&(time, session, id)| (time.is_none(), time, session, id));
            for (_, session_id, message_id) in order {
                if !self.visit(session_id, message_id)? {
                    break;
                }
            }
        } else if sessions.read_again {
            'sessions: for session_id in &sessions.ids {
                let listing = Listings::listing_of(self.store(), self.clean, session_id)?;
                for message_id in &listing.ids {
                    if !self.visit(session_id, message_id)? {
                        break 'sessions;
                    }
                }
            }
        } else {
            'kept: for (session_id, listing) in sessions.ids.iter().zip(&sessions.kept_listings) {
                for message_id in &listing.ids {
                    if !self.visit(session_id, message_id)? {
                        break 'kept;
                    }
                }
            }
        }
        if self.stop.load(Ordering::SeqCst) {
            self.report.considered -= self.batch.discard() as u64;
        } else {
            let report = &mut self.report;
            self.batch
                .apply(&mut |_, snapshots, answer| report.count_prune(answer, snapshots))?;
        }
        self.progress.finish();
        Ok(())
    }

    /// One message; `false` ends the walk (stopped, or the size reached).
    fn visit(&mut self, session_id: &str, message_id: &str) -> Result<bool, CleanError> {
        if self.stop.load(Ordering::SeqCst) {
            return Ok(false);
        }
        if self.until.as_ref().is_some_and(UntilLiveSize::reached) {
            return Ok(false);
        }
        self.report.considered += 1;
        match self
            .store()
            .clean_plan(session_id, message_id, &self.clean.policy, self.now)?
        {
            Planned::Nothing => self.report.nothing_to_prune += 1,
            Planned::Skipped { reason, .. } => {
                *self.report.skipped.entry(reason).or_default() += 1;
            }
            Planned::Prune {
                request,
                spill_files,
                ..
            } => self.planned(session_id, message_id, request, spill_files)?,
        }
        if self.batch.is_full() {
            let report = &mut self.report;
            self.batch
                .apply(&mut |_, snapshots, answer| report.count_prune(answer, snapshots))?;
            if !self.clean.pause.is_zero() {
                std::thread::sleep(self.clean.pause);
            }
        }
        self.progress
            .update(self.report.considered, self.report.freed_bytes());
        Ok(true)
    }

    /// A prune the policy planned, checked by its dry run where the batch needs it
    /// ([`predict`]); with `--until-live-size` only a prune that would commit counts toward the
    /// size, in both modes. In a dry run the session's compaction has not deleted the superseded
    /// snapshots of these parts yet; with an apply it has.
    fn planned(
        &mut self,
        session_id: &str,
        message_id: &str,
        request: PruneRequest,
        spill_files: Vec<String>,
    ) -> Result<(), CleanError> {
        let checked = if self.batch.checks(self.until.is_some()) {
            let after_compaction = !self.batch.applies() && self.compacted.contains(session_id);
            let predicted = predict(
                self.store(),
                &request,
                after_compaction,
                pruning_engine::now_ms(),
            )?;
            if let (Some(until), Answer::Removed(removal)) = (&mut self.until, &predicted.answer) {
                until.planned(removal.bytes);
            }
            Some(predicted)
        } else {
            None
        };
        // The snapshots' bytes, to tell them from the part rows in the receipt's count.
        let snapshots = match &checked {
            Some(predicted) if matches!(predicted.answer, Answer::Removed(_)) => {
                predicted.snapshots
            }
            _ if self.batch.applies() => {
                let indexes = request_indexes(&request);
                self.store()
                    .freed(session_id, message_id, &indexes, 0, false)?
                    .snapshots
            }
            _ => 0,
        };
        if !self.batch.applies() && checked.as_ref().is_some_and(|p| p.answer.is_removed()) {
            self.spilled.extend(spill_files);
        }
        let report = &mut self.report;
        self.batch.offer(
            request,
            snapshots,
            checked.map(|predicted| predicted.answer),
            &mut |_, snapshots, answer| report.count_prune(answer, snapshots),
        )
    }
}

/// What a dry run says one prune of parts would do, counted as its receipt will count it.
pub(crate) struct Predicted {
    /// The answer; a removal's bytes are the part rows' and their snapshots' together.
    pub(crate) answer: Answer,
    /// Of a removal's bytes, the part snapshots' (0 otherwise).
    pub(crate) snapshots: u64,
}

/// The dry run of one prune of parts, its bytes counted as the receipt will count them: the
/// part rows, and their snapshots (with `after_compaction`, only those a compaction of the
/// session leaves). A clean's dry run, its apply with `--until-live-size`, and the plan of one
/// session ([`crate::plan_session`]) all predict through it.
///
/// `now_ms` (ms since the Unix epoch) is the time the fence judges by.
///
/// Errors: the dry run's and the sizes' reads.
pub(crate) fn predict(
    store: &OpenCodeStore,
    request: &PruneRequest,
    after_compaction: bool,
    now_ms: i64,
) -> Result<Predicted, CleanError> {
    let found = store.dry_run(request, now_ms)?;
    let freed = match &found {
        Ok(DryRun::Plan { plan, .. }) => Some(store.freed(
            &request.session_id,
            &request.message_id,
            &plan.remove,
            plan.bytes,
            after_compaction,
        )?),
        _ => None,
    };
    let mut answer = Answer::of_dry_run(found);
    let snapshots = match (&mut answer, freed) {
        (Answer::Removed(removal), Some(freed)) => {
            removal.bytes = freed.total();
            freed.snapshots
        }
        _ => 0,
    };
    Ok(Predicted { answer, snapshots })
}

/// The indexes a prune of parts selects (none for any other prune).
fn request_indexes(request: &PruneRequest) -> Vec<usize> {
    match &request.selection {
        Selection::Indexes(indexes) => indexes.iter().map(|&i| i as usize).collect(),
        _ => Vec::new(),
    }
}
