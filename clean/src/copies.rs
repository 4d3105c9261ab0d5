//! The phases of a clean that take the copies OpenCode keeps besides the parts, before any part
//! is pruned: each session's compaction (its superseded snapshots), then with `--migrated-v1`
//! the OpenCode 1.x rows of the sessions OpenCode 2 migrated, then with `--diffs` the file
//! bodies in the summary diffs of the user messages before the kept turns. Each prune goes
//! through the engine's one write path in batches, as the parts' prunes do; a dry run asks the
//! store what each would do (docs/ARCHITECTURE.md, "Copies OpenCode keeps").

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pruning_engine::{Compacted, Operation, PruneRequest, StoreError};
use pruning_opencode::{OpenCodeStore, PlannedCopy, SkipReason};

use crate::answer::Answer;
use crate::error::CleanError;
use crate::mode::{Batch, Mode};
use crate::progress::Progress;
use crate::report::{
    CompactionReport, CopyOutcome, DiffsReport, MigratedReport, Report, ShellReport, UntilLiveSize,
};
use crate::turns::Turns;

/// What the phases work with.
pub(crate) struct Copies<'a> {
    /// A dry run, or an apply through the engine.
    pub(crate) mode: Mode<'a>,
    /// Where each batch waits for its turn.
    pub(crate) turns: &'a dyn Turns,
    /// Set to stop after the current prune.
    pub(crate) stop: &'a AtomicBool,
    /// Prunes per batch.
    pub(crate) batch_size: usize,
    /// Where the progress goes.
    pub(crate) progress: &'a mut dyn Progress,
}

/// Which prunes of copies a phase counts into.
#[derive(Clone, Copy)]
enum Phase {
    /// Each session's superseded snapshots (counted by session).
    Compaction,
    /// The diffs' file bodies (counted by user message).
    Diffs,
    /// The migrated 1.x rows (counted by 1.x message).
    Migrated,
    /// The output of OpenCode 2's shell (counted by row).
    Shell,
}

impl Phase {
    /// What the phase's progress counts.
    fn unit(self) -> &'static str {
        match self {
            Self::Compaction => "sessions",
            Self::Diffs => "user messages",
            Self::Migrated => "1.x messages",
            Self::Shell => "shell rows",
        }
    }

    /// Counts one row the phase looked at (the migrated rows count none: their report counts
    /// what it removed).
    fn considered(self, report: &mut Report) {
        match self {
            Self::Diffs => diffs(report).considered += 1,
            Self::Shell => shell(report).considered += 1,
            Self::Compaction | Self::Migrated => {}
        }
    }

    /// Counts one row left alone for `reason`.
    fn skipped(self, report: &mut Report, reason: SkipReason) {
        let skipped = match self {
            Self::Compaction => &mut compaction(report).skipped,
            Self::Diffs => &mut diffs(report).skipped,
            Self::Migrated => &mut migrated(report).skipped,
            Self::Shell => &mut shell(report).skipped,
        };
        *skipped.entry(reason).or_default() += 1;
    }
}

impl<'a> Copies<'a> {
    fn store(&self) -> &'a OpenCodeStore {
        self.mode.store()
    }

    fn batch<T>(&self) -> Batch<'a, T> {
        Batch::new(self.mode, self.turns, self.stop, self.batch_size)
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Compacts every session of `sessions` (in a dry run: says what compacting would take),
    /// counting into `report` and, with `--until-live-size`, into `until`. A session's
    /// compaction is several requests, one per range of its event log; the report counts
    /// sessions, each once its requests are all answered ([`Merged`]). Returns the sessions
    /// whose compaction would commit in a dry run (their prunes then find only the snapshots it
    /// leaves); empty with `--apply`, where the compactions are done before any prune plans.
    ///
    /// Errors: the store's reads.
    pub(crate) fn compact(
        &mut self,
        sessions: &[String],
        report: &mut Report,
        until: &mut Option<UntilLiveSize>,
    ) -> Result<HashSet<String>, CleanError> {
        let mut compacted = HashSet::new();
        self.progress
            .phase(Phase::Compaction.unit(), sessions.len() as u64);
        let mut batch = self.batch();
        let mut merged: HashMap<String, Merged> = HashMap::new();
        // Each answer merged into its session's.
        let answered = |request: &PruneRequest,
                        answer: Answer,
                        report: &mut Report,
                        merged: &mut HashMap<String, Merged>| {
            let outcome = CopyOutcome::of(report, answer);
            merged
                .entry(request.session_id.clone())
                .or_default()
                .answer(outcome);
        };
        for (done, session_id) in sessions.iter().enumerate() {
            if self.stopped() {
                count_not_reached(report, Phase::Compaction, (sessions.len() - done) as u64);
                break;
            }
            // --until-live-size: the target is reached, nothing more is taken.
            if until.as_ref().is_some_and(UntilLiveSize::reached) {
                break;
            }
            match self.store().clean_compaction(session_id)? {
                PlannedCopy::Prune(requests) => {
                    for request in requests {
                        if until.as_ref().is_some_and(UntilLiveSize::reached) {
                            break;
                        }
                        merged.entry(session_id.clone()).or_default().asked += 1;
                        let checked = self.check(&batch, &request, until)?;
                        batch.offer(request, (), checked, &mut |request, (), answer| {
                            answered(request, answer, report, &mut merged)
                        })?;
                    }
                    let session = merged.entry(session_id.clone()).or_default();
                    session.planned = true;
                    if session.is_whole() && session.removed.is_some() {
                        compacted.insert(session_id.clone());
                    }
                }
                PlannedCopy::Nothing => {
                    count(report, Phase::Compaction, session_id, CopyOutcome::Nothing)
                }
                PlannedCopy::Skipped { reason, .. } => {
                    Phase::Compaction.skipped(report, reason);
                }
            }
            if batch.is_full() {
                batch.apply(&mut |request, (), answer| {
                    answered(request, answer, report, &mut merged)
                })?;
            }
            count_whole(report, &mut merged);
            self.progress.update(done as u64 + 1, report.freed_bytes());
        }
        batch.apply(&mut |request, (), answer| answered(request, answer, report, &mut merged))?;
        count_whole(report, &mut merged);
        self.progress.finish();
        Ok(compacted)
    }

    /// Empties the file bodies of the summary diffs of the user messages before the last
    /// `keep_last_turns` turns of every session of `sessions` (with `older_than`, only those
    /// created at least that long before `now_ms`, ms since the Unix epoch); in a dry run, says
    /// what it would take. Counts into `report` and `until`.
    ///
    /// Errors: the store's reads.
    pub(crate) fn empty_diffs(
        &mut self,
        sessions: &[String],
        policy: &pruning_opencode::CleanPolicy,
        now_ms: i64,
        report: &mut Report,
        until: &mut Option<UntilLiveSize>,
    ) -> Result<(), CleanError> {
        let mut candidates = Vec::new();
        for session_id in sessions {
            let ids = self.store().clean_diffs_candidates(
                session_id,
                policy.keep_last_turns,
                policy.older_than,
                now_ms,
            )?;
            candidates.extend(ids.into_iter().map(|id| (session_id.clone(), id)));
        }
        let include_restored = policy.include_restored;
        self.each(
            Phase::Diffs,
            candidates,
            report,
            until,
            &mut |store, session_id, message_id| {
                store.clean_diffs(session_id, &message_id, include_restored)
            },
        )
    }

    /// Removes the OpenCode 1.x rows of every session of `sessions` that OpenCode 2 migrated,
    /// message by message (in a dry run: says what it would take), counting into `report` and
    /// `until`.
    ///
    /// Errors: the store's reads.
    pub(crate) fn remove_migrated(
        &mut self,
        sessions: &[String],
        report: &mut Report,
        until: &mut Option<UntilLiveSize>,
    ) -> Result<(), CleanError> {
        let mut planned = Vec::new();
        for session_id in sessions {
            match self.store().clean_migrated(session_id)? {
                PlannedCopy::Prune(messages) => {
                    planned.extend(messages.into_iter().map(|m| (session_id.clone(), m)));
                }
                PlannedCopy::Nothing => {}
                PlannedCopy::Skipped { reason, .. } => {
                    *migrated(report).skipped_sessions.entry(reason).or_default() += 1;
                }
            }
        }
        self.each(
            Phase::Migrated,
            planned,
            report,
            until,
            &mut |_, _, message| Ok(message),
        )
    }

    /// Empties the output OpenCode 2's `shell` rows of every session of `sessions` keep (the
    /// commands the user ran, before the last `keep_last_turns` turns; with `older_than`, only
    /// those at least that long before `now_ms`, ms since the Unix epoch); in a dry run, says
    /// what it would take. Counts into `report` and `until`.
    ///
    /// Errors: the store's reads.
    pub(crate) fn empty_shell_outputs(
        &mut self,
        sessions: &[String],
        (keep_last_turns, older_than): (u32, Option<Duration>),
        now_ms: i64,
        report: &mut Report,
        until: &mut Option<UntilLiveSize>,
    ) -> Result<(), CleanError> {
        let mut planned = Vec::new();
        for session_id in sessions {
            let rows = self.store().clean_shell_outputs(
                session_id,
                keep_last_turns,
                older_than,
                now_ms,
            )?;
            planned.extend(rows.into_iter().map(|row| (session_id.clone(), row)));
        }
        self.each(Phase::Shell, planned, report, until, &mut |_, _, row| {
            Ok(row)
        })
    }

    /// The loop of a phase that takes one row at a time (the diffs, the migrated rows, the
    /// shell output): each of `items` (its session and what `plan` makes of it: a prune, nothing
    /// to take, or a reason to leave it) in order, until the clean is stopped (the rest counted
    /// not reached) or the size reached; each prune handed to the batch, each answer counted
    /// into the phase's report.
    ///
    /// Errors: the store's reads.
    fn each<I>(
        &mut self,
        phase: Phase,
        items: Vec<(String, I)>,
        report: &mut Report,
        until: &mut Option<UntilLiveSize>,
        plan: &mut dyn FnMut(&OpenCodeStore, &str, I) -> Result<PlannedCopy, StoreError>,
    ) -> Result<(), CleanError> {
        let total = items.len() as u64;
        self.progress.phase(phase.unit(), total);
        let mut batch = self.batch();
        let answered = |request: &PruneRequest, answer: Answer, report: &mut Report| {
            let outcome = CopyOutcome::of(report, answer);
            count(report, phase, &request.session_id, outcome);
        };
        for (done, (session_id, item)) in items.into_iter().enumerate() {
            if self.stopped() {
                count_not_reached(report, phase, total - done as u64);
                break;
            }
            if until.as_ref().is_some_and(UntilLiveSize::reached) {
                break;
            }
            phase.considered(report);
            match plan(self.store(), &session_id, item)? {
                PlannedCopy::Prune(request) => {
                    let checked = self.check(&batch, &request, until)?;
                    batch.offer(request, (), checked, &mut |request, (), answer| {
                        answered(request, answer, report)
                    })?;
                }
                PlannedCopy::Nothing => count(report, phase, &session_id, CopyOutcome::Nothing),
                PlannedCopy::Skipped { reason, .. } => phase.skipped(report, reason),
            }
            if batch.is_full() {
                batch.apply(&mut |request, (), answer| answered(request, answer, report))?;
            }
            self.progress.update(done as u64 + 1, report.freed_bytes());
        }
        batch.apply(&mut |request, (), answer| answered(request, answer, report))?;
        self.progress.finish();
        Ok(())
    }

    /// One planned prune of a copy, checked by its dry run where the batch needs it (a dry run's
    /// answer; with `--until-live-size` the apply's too): what it would remove counts toward the
    /// target, so that the dry run stops where the apply does.
    ///
    /// Errors: the dry run's reads.
    fn check<T>(
        &self,
        batch: &Batch<'_, T>,
        request: &PruneRequest,
        until: &mut Option<UntilLiveSize>,
    ) -> Result<Option<Answer>, CleanError> {
        if !batch.checks(until.is_some()) {
            return Ok(None);
        }
        let answer = Answer::of_dry_run(pruning_engine::dry_run(self.store(), request)?);
        if let (Answer::Removed(removal), Some(until)) = (&answer, until.as_mut()) {
            // Only what would be removed counts toward the target; the apply answers the rest.
            if removal.operation.is_some() {
                until.planned(removal.bytes);
            }
        }
        Ok(Some(answer))
    }
}

/// The answers of one session's compaction requests so far, merged into what the report counts
/// of the session: compacted when any request removed snapshots (their counts and bytes
/// summed), and besides that blocked when any was refused, so that a clean that leaves part of
/// a session says so; otherwise not reached, already compacted, or nothing, in that order.
#[derive(Default)]
struct Merged {
    /// Requests made of the session (planned into a batch or answered by a dry run).
    asked: usize,
    /// Whether every request of the session has been made.
    planned: bool,
    /// Answers merged so far.
    answered: usize,
    /// What the requests that removed snapshots removed, and their bytes.
    removed: Option<(Compacted, u64)>,
    /// The first refusal.
    blocked: Option<CopyOutcome>,
    /// Whether a request was not reached (the clean was interrupted).
    not_reached: bool,
    /// Whether a request was answered from the receipt of an identical earlier one.
    already: bool,
}

impl Merged {
    /// Merges one request's answer.
    fn answer(&mut self, outcome: CopyOutcome) {
        self.answered += 1;
        match outcome {
            CopyOutcome::Removed(operation, bytes) => {
                let Operation::Compaction(compacted) = *operation else {
                    return;
                };
                let (sum, sum_bytes) = self.removed.get_or_insert_with(Default::default);
                sum.part_snapshots += compacted.part_snapshots;
                sum.message_snapshots += compacted.message_snapshots;
                sum.session_snapshots += compacted.session_snapshots;
                sum.event_ids.extend(compacted.event_ids);
                *sum_bytes += bytes;
            }
            CopyOutcome::Blocked(..) => {
                self.blocked.get_or_insert(outcome);
            }
            CopyOutcome::NotReached => self.not_reached = true,
            CopyOutcome::Already => self.already = true,
            CopyOutcome::Nothing => {}
        }
    }

    /// Whether every request of the session was made and answered.
    fn is_whole(&self) -> bool {
        self.planned && self.answered == self.asked
    }

    /// What the report counts of the session: one or two outcomes (see [`Merged`]).
    fn outcomes(self) -> Vec<CopyOutcome> {
        let removed = self.removed.map(|(compacted, bytes)| {
            CopyOutcome::Removed(Box::new(Operation::Compaction(compacted)), bytes)
        });
        let besides = match (self.blocked, self.not_reached) {
            (Some(blocked), _) => Some(blocked),
            (None, true) => Some(CopyOutcome::NotReached),
            (None, false) if removed.is_some() => None,
            (None, false) if self.already => Some(CopyOutcome::Already),
            (None, false) => Some(CopyOutcome::Nothing),
        };
        removed.into_iter().chain(besides).collect()
    }
}

/// Counts into `report` every session of `merged` whose requests are all answered, and lets
/// go of it.
fn count_whole(report: &mut Report, merged: &mut HashMap<String, Merged>) {
    let whole: Vec<String> = merged
        .iter()
        .filter(|(_, session)| session.is_whole())
        .map(|(id, _)| id.clone())
        .collect();
    for id in whole {
        if let Some(session) = merged.remove(&id) {
            for outcome in session.outcomes() {
                count(report, Phase::Compaction, &id, outcome);
            }
        }
    }
}

/// Counts one outcome of session `session_id` into its phase's report (what it counts toward
/// `--until-live-size` was counted when it was checked).
fn count(report: &mut Report, phase: Phase, session_id: &str, outcome: CopyOutcome) {
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
        Phase::Migrated => report
            .migrated_v1
            .get_or_insert_with(MigratedReport::default)
            .count(bytes_by_kind, session_id, outcome),
        Phase::Shell => report
            .shell_output
            .get_or_insert_with(ShellReport::default)
            .count(bytes_by_kind, outcome),
    }
}

/// Counts `n` prunes of the phase as not reached (the clean was interrupted).
fn count_not_reached(report: &mut Report, phase: Phase, n: u64) {
    match phase {
        Phase::Compaction => compaction(report).not_reached += n,
        Phase::Diffs => diffs(report).not_reached += n,
        Phase::Migrated => migrated(report).not_reached += n,
        Phase::Shell => shell(report).not_reached += n,
    }
}

fn shell(report: &mut Report) -> &mut ShellReport {
    report.shell_output.get_or_insert_with(ShellReport::default)
}

fn compaction(report: &mut Report) -> &mut CompactionReport {
    report
        .compaction
        .get_or_insert_with(CompactionReport::default)
}

fn migrated(report: &mut Report) -> &mut MigratedReport {
    report
        .migrated_v1
        .get_or_insert_with(MigratedReport::default)
}

fn diffs(report: &mut Report) -> &mut DiffsReport {
    report.diffs.get_or_insert_with(DiffsReport::default)
}
