//! The phases of a clean that take the copies OpenCode keeps besides the parts, before any part
//! is pruned: each session's compaction (its superseded snapshots), then with `--diffs` the file
//! bodies in the summary diffs of the user messages before the kept turns. Each prune goes
//! through the engine's one write path in batches, as the parts' prunes do; a dry run asks the
//! store what each would do (docs/ARCHITECTURE.md, "Copies OpenCode keeps").

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pruning_engine::{Engine, PruneRequest};
use pruning_opencode::{OpenCodeStore, PlannedCopy};

use super::progress::Progress;
use super::report::{CompactionReport, CopyOutcome, DiffsReport, Report, UntilLiveSize};
use super::turns::Turns;

/// What the phases work with.
pub(super) struct Copies<'a> {
    /// The database.
    pub(super) store: &'a OpenCodeStore,
    /// The engine, with `--apply`; `None` for a dry run.
    pub(super) engine: Option<&'a Engine<OpenCodeStore>>,
    /// Where each batch waits for its turn.
    pub(super) turns: &'a dyn Turns,
    /// Set by Ctrl-C: stop after the current prune.
    pub(super) stop: &'a AtomicBool,
    /// Prunes per batch.
    pub(super) batch_size: usize,
    /// `--json`: no progress on stderr.
    pub(super) json: bool,
}

/// Which prunes of copies a phase counts into.
#[derive(Clone, Copy)]
enum Phase {
    Compaction,
    Diffs,
}

impl Copies<'_> {
    /// Compacts every session of `sessions` (in a dry run: says what compacting would take),
    /// counting into `report` and, with `--until-live-size`, into `until`. Returns the sessions
    /// whose compaction would commit in a dry run (their prunes then find only the snapshots it
    /// leaves); empty with `--apply`, where the compactions are done before any prune plans.
    ///
    /// Errors: the store's reads.
    pub(super) fn compact(
        &self,
        sessions: &[String],
        report: &mut Report,
        until: &mut Option<UntilLiveSize>,
    ) -> anyhow::Result<HashSet<String>> {
        let mut compacted = HashSet::new();
        let mut progress = Progress::new(self.json, sessions.len() as u64, "sessions");
        let mut batch = Vec::new();
        for (done, session_id) in sessions.iter().enumerate() {
            if self.stop.load(Ordering::SeqCst) {
                count_not_reached(report, Phase::Compaction, sessions.len() - done);
                break;
            }
            // --until-live-size: the target is reached, nothing more is taken.
            if until.as_ref().is_some_and(UntilLiveSize::reached) {
                break;
            }
            match self.store.clean_compaction(session_id)? {
                PlannedCopy::Prune(request) => {
                    if let Some(outcome) = self.plan(request, &mut batch, until)? {
                        if matches!(outcome, CopyOutcome::Removed(..)) {
                            compacted.insert(session_id.clone());
                        }
                        count(report, until, Phase::Compaction, outcome);
                    }
                }
                PlannedCopy::Nothing => {
                    count(report, until, Phase::Compaction, CopyOutcome::Nothing)
                }
                PlannedCopy::Skipped { reason, .. } => {
                    *compaction(report).skipped.entry(reason).or_default() += 1;
                }
            }
            if batch.len() >= self.batch_size {
                self.apply(&mut batch, report, Phase::Compaction);
            }
            progress.update(done as u64 + 1, report);
        }
        self.apply(&mut batch, report, Phase::Compaction);
        progress.finish();
        Ok(compacted)
    }

    /// Empties the file bodies of the summary diffs of the user messages before the last
    /// `keep_last_turns` turns of every session of `sessions` (with `older_than`, only those
    /// created at least that long before `now_ms`, ms since the Unix epoch); in a dry run, says
    /// what it would take. Counts into `report` and `until`.
    ///
    /// Errors: the store's reads.
    pub(super) fn empty_diffs(
        &self,
        sessions: &[String],
        keep_last_turns: u32,
        older_than: Option<Duration>,
        now_ms: i64,
        report: &mut Report,
        until: &mut Option<UntilLiveSize>,
    ) -> anyhow::Result<()> {
        let mut candidates: Vec<(String, Vec<String>)> = Vec::with_capacity(sessions.len());
        let mut total = 0u64;
        for session_id in sessions {
            let ids = self.store.clean_diffs_candidates(
                session_id,
                keep_last_turns,
                older_than,
                now_ms,
            )?;
            total += ids.len() as u64;
            candidates.push((session_id.clone(), ids));
        }
        let mut progress = Progress::new(self.json, total, "user messages");
        let mut batch = Vec::new();
        let mut done = 0u64;
        for (session_id, ids) in &candidates {
            for message_id in ids {
                if self.stop.load(Ordering::SeqCst) {
                    count_not_reached(report, Phase::Diffs, (total - done) as usize);
                    self.apply(&mut batch, report, Phase::Diffs);
                    progress.finish();
                    return Ok(());
                }
                if until.as_ref().is_some_and(UntilLiveSize::reached) {
                    break;
                }
                done += 1;
                diffs(report).considered += 1;
                match self.store.clean_diffs(session_id, message_id)? {
                    PlannedCopy::Prune(request) => {
                        if let Some(outcome) = self.plan(request, &mut batch, until)? {
                            count(report, until, Phase::Diffs, outcome);
                        }
                    }
                    PlannedCopy::Nothing => {
                        count(report, until, Phase::Diffs, CopyOutcome::Nothing)
                    }
                    PlannedCopy::Skipped { reason, .. } => {
                        *diffs(report).skipped.entry(reason).or_default() += 1;
                    }
                }
                if batch.len() >= self.batch_size {
                    self.apply(&mut batch, report, Phase::Diffs);
                }
                progress.update(done, report);
            }
        }
        self.apply(&mut batch, report, Phase::Diffs);
        progress.finish();
        Ok(())
    }

    /// One planned prune of a copy: a dry run answers it now with what it would do; with
    /// `--apply` it joins the batch (answered when the batch is applied), and with
    /// `--until-live-size` it is checked first as the dry run checks it and counted toward the
    /// target when it would remove something, so that the dry run stops where the apply does.
    ///
    /// Errors: the store's reads.
    fn plan(
        &self,
        request: PruneRequest,
        batch: &mut Vec<PruneRequest>,
        until: &mut Option<UntilLiveSize>,
    ) -> anyhow::Result<Option<CopyOutcome>> {
        if self.engine.is_none() {
            let found = pruning_engine::dry_run(self.store, &request)?;
            return Ok(Some(CopyOutcome::of_dry_run(found)));
        }
        if let Some(until) = until.as_mut() {
            // Only what would be removed counts toward the target; the apply answers the rest.
            let found = pruning_engine::dry_run(self.store, &request)?;
            if let CopyOutcome::Removed(_, bytes) = CopyOutcome::of_dry_run(found) {
                until.planned(bytes);
            }
        }
        batch.push(request);
        Ok(None)
    }

    /// Applies the batch through the engine's group commit (nothing in a dry run) and counts
    /// the outcomes (with `--until-live-size` they were counted toward the target when
    /// planned).
    fn apply(&self, batch: &mut Vec<PruneRequest>, report: &mut Report, phase: Phase) {
        let Some(engine) = self.engine else {
            return;
        };
        if batch.is_empty() {
            return;
        }
        let stopped = || self.stop.load(Ordering::SeqCst);
        let mut results = Vec::new();
        self.turns
            .take(&mut || results = engine.prune_many_until(batch, &stopped));
        for result in results {
            let outcome = CopyOutcome::of_answer(report, result);
            count(report, &mut None, phase, outcome);
        }
        batch.clear();
    }
}

/// Counts one outcome into its phase's report and, when it removes something, into `until`.
fn count(
    report: &mut Report,
    until: &mut Option<UntilLiveSize>,
    phase: Phase,
    outcome: CopyOutcome,
) {
    if let (CopyOutcome::Removed(_, bytes), Some(until)) = (&outcome, until.as_mut()) {
        until.planned(*bytes);
    }
    let bytes_by_kind = &mut report.bytes_by_kind;
    match phase {
        Phase::Compaction => report
            .compaction
            .get_or_insert_with(CompactionReport::default)
            .count(bytes_by_kind, outcome),
        Phase::Diffs => report
            .diffs
            .get_or_insert_with(DiffsReport::default)
            .count(bytes_by_kind, outcome),
    }
}

/// Counts `n` prunes of the phase as not reached (the clean was interrupted).
fn count_not_reached(report: &mut Report, phase: Phase, n: usize) {
    match phase {
        Phase::Compaction => compaction(report).not_reached += n as u64,
        Phase::Diffs => diffs(report).not_reached += n as u64,
    }
}

fn compaction(report: &mut Report) -> &mut CompactionReport {
    report
        .compaction
        .get_or_insert_with(CompactionReport::default)
}

fn diffs(report: &mut Report) -> &mut DiffsReport {
    report.diffs.get_or_insert_with(DiffsReport::default)
}
