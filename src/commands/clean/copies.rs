//! The phases of a clean that take the copies OpenCode keeps besides the parts, before any part
//! is pruned: each session's compaction (its superseded snapshots), then with `--migrated-v1`
//! the OpenCode 1.x rows of the sessions OpenCode 2 migrated, then with `--diffs` the file
//! bodies in the summary diffs of the user messages before the kept turns. Each prune goes
//! through the engine's one write path in batches, as the parts' prunes do; a dry run asks the
//! store what each would do (docs/ARCHITECTURE.md, "Copies OpenCode keeps").

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pruning_engine::{Compacted, Engine, EngineError, Operation, PruneOutcome, PruneRequest};
use pruning_opencode::{OpenCodeStore, PlannedCopy};

use super::progress::Progress;
use super::report::{
    CompactionReport, CopyOutcome, DiffsReport, MigratedReport, Report, ShellReport, UntilLiveSize,
};
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
    Shell,
}

impl Copies<'_> {
    /// Compacts every session of `sessions` (in a dry run: says what compacting would take),
    /// counting into `report` and, with `--until-live-size`, into `until`. A session's
    /// compaction is several requests, one per range of its event log; the report counts
    /// sessions, each once its requests are all answered ([`Merged`]). Returns the sessions
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
        let mut merged: HashMap<String, Merged> = HashMap::new();
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
                PlannedCopy::Prune(requests) => {
                    let session = merged.entry(session_id.clone()).or_default();
                    for request in requests {
                        if until.as_ref().is_some_and(UntilLiveSize::reached) {
                            break;
                        }
                        session.asked += 1;
                        if let Some(outcome) = self.plan(request, &mut batch, until)? {
                            if let (CopyOutcome::Removed(_, bytes), Some(until)) =
                                (&outcome, until.as_mut())
                            {
                                until.planned(*bytes);
                            }
                            session.answer(outcome);
                        }
                    }
                    session.planned = true;
                    if session.is_whole() && session.removed.is_some() {
                        compacted.insert(session_id.clone());
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
                self.apply_compactions(&mut batch, report, &mut merged);
            }
            count_whole(report, &mut merged);
            progress.update(done as u64 + 1, report);
        }
        self.apply_compactions(&mut batch, report, &mut merged);
        count_whole(report, &mut merged);
        progress.finish();
        Ok(compacted)
    }

    /// Applies a batch of compaction requests ([`Self::apply_batch`]), each answer merged into
    /// its session's.
    fn apply_compactions(
        &self,
        batch: &mut Vec<PruneRequest>,
        report: &mut Report,
        merged: &mut HashMap<String, Merged>,
    ) {
        self.apply_batch(batch, &mut |request, result| {
            let outcome = CopyOutcome::of_answer(report, result);
            merged
                .entry(request.session_id.clone())
                .or_default()
                .answer(outcome);
        });
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
        policy: &pruning_opencode::CleanPolicy,
        now_ms: i64,
        report: &mut Report,
        until: &mut Option<UntilLiveSize>,
    ) -> anyhow::Result<()> {
        let mut candidates: Vec<(String, Vec<String>)> = Vec::with_capacity(sessions.len());
        let mut total = 0u64;
        for session_id in sessions {
            let ids = self.store.clean_diffs_candidates(
                session_id,
                policy.keep_last_turns,
                policy.older_than,
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
                match self
                    .store
                    .clean_diffs(session_id, message_id, policy.include_restored)?
                {
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

    /// Removes the OpenCode 1.x rows of every session of `sessions` that OpenCode 2 migrated,
    /// message by message (in a dry run: says what it would take), counting into `report` and
    /// `until`.
    ///
    /// Errors: the store's reads.
    pub(super) fn remove_migrated(
        &self,
        sessions: &[String],
        report: &mut Report,
        until: &mut Option<UntilLiveSize>,
    ) -> anyhow::Result<()> {
        let mut planned = Vec::new();
        let mut total = 0u64;
        for session_id in sessions {
            match self.store.clean_migrated(session_id)? {
                PlannedCopy::Prune(messages) => {
                    total += messages.len() as u64;
                    planned.push((session_id.clone(), messages));
                }
                PlannedCopy::Nothing => {}
                PlannedCopy::Skipped { reason, .. } => {
                    *migrated(report).skipped_sessions.entry(reason).or_default() += 1;
                }
            }
        }
        let mut progress = Progress::new(self.json, total, "1.x messages");
        let mut batch = Vec::new();
        let mut done = 0u64;
        for (session_id, messages) in planned {
            for message in messages {
                if self.stop.load(Ordering::SeqCst) {
                    migrated(report).not_reached += total - done;
                    self.apply_migrated(&mut batch, report);
                    progress.finish();
                    return Ok(());
                }
                if until.as_ref().is_some_and(UntilLiveSize::reached) {
                    break;
                }
                done += 1;
                match message {
                    PlannedCopy::Prune(request) => {
                        if let Some(outcome) = self.plan(request, &mut batch, until)? {
                            if let (CopyOutcome::Removed(_, bytes), Some(until)) =
                                (&outcome, until.as_mut())
                            {
                                until.planned(*bytes);
                            }
                            let bytes_by_kind = &mut report.bytes_by_kind;
                            report
                                .migrated_v1
                                .get_or_insert_with(MigratedReport::default)
                                .count(bytes_by_kind, &session_id, outcome);
                        }
                    }
                    PlannedCopy::Nothing => {}
                    PlannedCopy::Skipped { reason, .. } => {
                        *migrated(report).skipped.entry(reason).or_default() += 1;
                    }
                }
                if batch.len() >= self.batch_size {
                    self.apply_migrated(&mut batch, report);
                }
                progress.update(done, report);
            }
        }
        self.apply_migrated(&mut batch, report);
        progress.finish();
        Ok(())
    }

    /// Applies a batch of removals of migrated rows ([`Self::apply_batch`]), each answer
    /// counted for its session.
    fn apply_migrated(&self, batch: &mut Vec<PruneRequest>, report: &mut Report) {
        self.apply_batch(batch, &mut |request, result| {
            let outcome = CopyOutcome::of_answer(report, result);
            let bytes_by_kind = &mut report.bytes_by_kind;
            report
                .migrated_v1
                .get_or_insert_with(MigratedReport::default)
                .count(bytes_by_kind, &request.session_id, outcome);
        });
    }

    /// Empties the output OpenCode 2's `shell` rows of every session of `sessions` keep (the
    /// commands the user ran, before the last `keep_last_turns` turns; with `older_than`, only
    /// those at least that long before `now_ms`, ms since the Unix epoch); in a dry run, says
    /// what it would take. Counts into `report` and `until`.
    ///
    /// Errors: the store's reads.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn empty_shell_outputs(
        &self,
        sessions: &[String],
        keep_last_turns: u32,
        older_than: Option<Duration>,
        now_ms: i64,
        report: &mut Report,
        until: &mut Option<UntilLiveSize>,
    ) -> anyhow::Result<()> {
        let mut planned = Vec::new();
        for session_id in sessions {
            planned.extend(self.store.clean_shell_outputs(
                session_id,
                keep_last_turns,
                older_than,
                now_ms,
            )?);
        }
        let total = planned.len() as u64;
        let mut progress = Progress::new(self.json, total, "shell rows");
        let mut batch = Vec::new();
        for (done, row) in planned.into_iter().enumerate() {
            if self.stop.load(Ordering::SeqCst) {
                count_not_reached(report, Phase::Shell, (total - done as u64) as usize);
                break;
            }
            if until.as_ref().is_some_and(UntilLiveSize::reached) {
                break;
            }
            shell(report).considered += 1;
            match row {
                PlannedCopy::Prune(request) => {
                    if let Some(outcome) = self.plan(request, &mut batch, until)? {
                        count(report, until, Phase::Shell, outcome);
                    }
                }
                PlannedCopy::Nothing => count(report, until, Phase::Shell, CopyOutcome::Nothing),
                PlannedCopy::Skipped { reason, .. } => {
                    *shell(report).skipped.entry(reason).or_default() += 1;
                }
            }
            if batch.len() >= self.batch_size {
                self.apply(&mut batch, report, Phase::Shell);
            }
            progress.update(done as u64 + 1, report);
        }
        self.apply(&mut batch, report, Phase::Shell);
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
        self.apply_batch(batch, &mut |_, result| {
            let outcome = CopyOutcome::of_answer(report, result);
            count(report, &mut None, phase, outcome);
        });
    }

    /// Applies the batch through the engine's group commit, in the clean's turn, handing each
    /// request's answer to `answered` in order, and empties it; nothing in a dry run.
    fn apply_batch(
        &self,
        batch: &mut Vec<PruneRequest>,
        answered: &mut dyn FnMut(&PruneRequest, Result<PruneOutcome, EngineError>),
    ) {
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
        for (request, result) in batch.iter().zip(results) {
            answered(request, result);
        }
        batch.clear();
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
                count(report, &mut None, Phase::Compaction, outcome);
            }
        }
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
        Phase::Shell => report
            .shell_output
            .get_or_insert_with(ShellReport::default)
            .count(bytes_by_kind, outcome),
    }
}

/// Counts `n` prunes of the phase as not reached (the clean was interrupted).
fn count_not_reached(report: &mut Report, phase: Phase, n: usize) {
    match phase {
        Phase::Compaction => compaction(report).not_reached += n as u64,
        Phase::Diffs => diffs(report).not_reached += n as u64,
        Phase::Shell => shell(report).not_reached += n as u64,
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
