//! The report of a clean: what it counted (`--json` writes it whole), how each prune's outcome
//! is counted, and the report in words.

use std::collections::{BTreeMap, BTreeSet};

use pruning_engine::{AbandonedRun, DryRun, EngineError, Operation, PruneResult};
use pruning_opencode::{AutoVacuum, SkipReason};
use serde::Serialize;

use super::CleanConfig;
use crate::output;
use crate::output::say;

/// How a clean ended, as its report names it (`status`, and the first word of the text): the
/// name is [`Status::as_str`]'s, which `--json` writes too.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum Status {
    /// `--apply` ran to the end.
    Cleaned,
    /// A dry run ran to the end.
    #[default]
    DryRun,
    /// Stopped by Ctrl-C.
    Interrupted,
}

impl Serialize for Status {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl Status {
    /// Its name in the report: `cleaned`, `dry-run` or `interrupted`.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Cleaned => "cleaned",
            Self::DryRun => "dry-run",
            Self::Interrupted => "interrupted",
        }
    }
}

/// The final report (`--json`), counts of messages unless named otherwise.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Report {
    /// How it ended.
    pub(super) status: Status,
    /// Sessions looked at.
    pub(super) sessions: u64,
    /// Messages the policy looked at (assistant messages before the kept turns).
    pub(super) considered: u64,
    /// Assistant messages in the last `--keep-last-turns` user turns, not looked at.
    pub(super) kept_recent: u64,
    /// Messages pruned (with `--apply`) or that would be pruned.
    pub(super) pruned: u64,
    /// Messages an identical earlier request had pruned (the same content and selection, as
    /// after an interrupted run): answered from the receipt, nothing written.
    pub(super) already_pruned: u64,
    /// Messages with nothing the policy selects (a message pruned before has nothing left).
    pub(super) nothing_to_prune: u64,
    /// Parts removed (or that would be).
    pub(super) parts: u64,
    /// Bytes of row data removed (or, in a dry run, that would be): the part rows and their
    /// event snapshots, as the receipts count them.
    pub(super) bytes: u64,
    /// With `--archive`: bytes written to the prune archive for the prunes that committed
    /// (their rows, compressed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) archive_bytes: Option<u64>,
    /// Messages left alone, by reason (`oversize`, `malformed`, `incomplete`, ...).
    pub(super) skipped: BTreeMap<SkipReason, u64>,
    /// Messages the prune refused, by contract reason (`maintenance_required`, `conflict`, ...).
    pub(super) blocked: BTreeMap<&'static str, u64>,
    /// The words of the first refusal of each reason in `blocked`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) blocked_because: BTreeMap<&'static str, String>,
    /// Of the prunes, compactions and diffs prunes refused, those refused by a condition that
    /// passes ([`passes`]), by reason: run the clean again later. Present only when not empty;
    /// with `--apply`, the clean then exits 3.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) retry_later: BTreeMap<&'static str, u64>,
    /// Messages whose prune failed (storage or journal errors): each whole or not at all; nothing
    /// of them was written unless the failure was a commit whose outcome is unknown, which the
    /// next run's recovery settles from the receipts.
    pub(super) failed: u64,
    /// Of `pruned`, messages committed in the database (with their receipts) whose commit
    /// marks could not be journaled: the next run's recovery journals them and announces their
    /// events. Present only when not 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub(super) unjournaled: u64,
    /// The first failure, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) first_failure: Option<String>,
    /// Messages not reached because the clean was interrupted.
    pub(super) not_reached: u64,
    /// Part rows of the sessions whose message row is missing (orphans), left alone.
    pub(super) orphan_parts: u64,
    /// Spill files removed (in a dry run: that would be).
    pub(super) spill_files_removed: u64,
    /// Bytes of spill files removed (in a dry run: that would be).
    pub(super) spill_bytes_removed: u64,
    /// Runs OpenCode left incomplete whose sessions were pruned beside them (or would be): idle
    /// for at least `--abandoned-after`. Each counts once, however many of its session's
    /// messages were pruned.
    pub(super) abandoned_runs: u64,
    /// The incomplete messages of those runs.
    #[serde(skip)]
    pub(super) runs: BTreeSet<String>,
    /// With `--timings`: how long the clean's write transactions (and the dry runs that take
    /// the lock) held SQLite's write lock, which OpenCode waits up to 5 s for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) write_lock: Option<pruning_opencode::LockSummary>,
    /// With `--before-compaction` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) before_compaction: Option<BeforeCompaction>,
    /// With `--until-live-size` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) until_live_size: Option<UntilLiveSize>,
    /// With `--until-file-size` only: the same figures, the file being its live data once its
    /// pages are given back; `liveAfter` is the file's size measured after the give back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) until_file_size: Option<UntilLiveSize>,
    /// Each session's superseded snapshots, compacted before its messages are pruned (absent
    /// with `--no-compact`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) compaction: Option<CompactionReport>,
    /// With `--diffs`: the file bodies in the summary diffs of the user messages before the
    /// kept turns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) diffs: Option<DiffsReport>,
    /// The output OpenCode 2's `shell` rows keep of the commands the user ran, before the kept
    /// turns (absent where the file has no OpenCode 2 rows, or `--tools`/`--skip-tools` leave
    /// the shell out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) shell_output: Option<ShellReport>,
    /// With `--migrated-v1`: the OpenCode 1.x rows of the sessions OpenCode 2 migrated.
    #[serde(rename = "migratedV1", skip_serializing_if = "Option::is_none")]
    pub(super) migrated_v1: Option<MigratedReport>,
    /// The OpenCode 1.x history OpenCode 2 migrated, as the file held it when the clean began
    /// (absent where there is none): what `--migrated-v1` takes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) migrated_history: Option<pruning_opencode::MigratedV1>,
    /// Bytes of row data removed (or that would be), by kind.
    pub(super) bytes_by_kind: BytesByKind,
    /// The database file's size and what `vacuum` would leave of it.
    pub(super) file: FileSize,
    /// With `--apply` on a file `vacuum --online-shrink` switched: the free pages given back to
    /// the disk after the prunes, while OpenCode runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) given_back: Option<pruning_opencode::GivenBack>,
}

/// Bytes of row data a clean removed (or would remove), by kind.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct BytesByKind {
    /// The pruned tool and reasoning parts' rows (V1 `part.data`; V2, what the message rows
    /// shrink by).
    pub(super) parts: u64,
    /// Their `message.part.updated.1` snapshots left after the compaction (the newest of each
    /// part, where the session was compacted).
    pub(super) part_snapshots: u64,
    /// Superseded snapshots of every entity, deleted by the compactions.
    pub(super) superseded_snapshots: u64,
    /// What the message rows and their newest snapshots shrink by when their diffs' file bodies
    /// are emptied.
    pub(super) diffs: u64,
    /// The OpenCode 1.x message and part rows of the sessions OpenCode 2 migrated.
    #[serde(rename = "migratedV1")]
    pub(super) migrated_v1: u64,
    /// What OpenCode 2's `shell` rows shrink by when their output is emptied.
    pub(super) shell_output: u64,
}

impl BytesByKind {
    /// Every kind together.
    pub(super) fn total(&self) -> u64 {
        self.parts
            + self.part_snapshots
            + self.superseded_snapshots
            + self.diffs
            + self.migrated_v1
            + self.shell_output
    }
}

/// The database file's size and, after the clean, what `vacuum` (or, on a file switched to
/// online shrink, the clean itself) would leave of it (bytes).
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct FileSize {
    /// The database file and its WAL on disk when the clean began.
    pub(super) bytes: u64,
    /// The pages in use (what `vacuum` would leave) when the clean began.
    pub(super) live_bytes: u64,
    /// An estimate of the file after `vacuum`: the pages in use when the clean began, less the
    /// row data it removed (or would remove). The same in a dry run and its apply. `vacuum` also
    /// frees the pages that held the rows' overflow and index entries and packs the pages that
    /// deletes left part full, so the file it leaves is smaller.
    pub(super) after_vacuum: u64,
    /// With `--apply`: the pages in use after the clean (what `vacuum` would leave, but for the
    /// part-full pages it packs), measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) live_after: Option<u64>,
    /// The file's `auto_vacuum` mode: `incremental` (switched by `vacuum --online-shrink`: an
    /// apply gives its freed pages back, and `afterVacuum` is what the file comes to without a
    /// `vacuum`), or `none`, OpenCode's (the file shrinks only at `vacuum`).
    pub(super) auto_vacuum: AutoVacuum,
}

/// What the compactions took (or would take): counts of sessions unless named otherwise.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct CompactionReport {
    /// Sessions compacted (or that would be).
    pub(super) sessions: u64,
    /// Snapshots deleted (or that would be), of every type.
    pub(super) snapshots: u64,
    /// Of them, `message.part.updated.1` events.
    pub(super) part_snapshots: u64,
    /// Of them, `message.updated.1` events.
    pub(super) message_snapshots: u64,
    /// Of them, `session.updated.1` events.
    pub(super) session_snapshots: u64,
    /// Bytes of row data deleted (or that would be).
    pub(super) bytes: u64,
    /// Sessions an identical earlier compaction had compacted: answered from its receipt.
    pub(super) already_compacted: u64,
    /// Sessions whose event log holds no superseded snapshot (or no event log at all).
    pub(super) nothing_to_compact: u64,
    /// Sessions left alone, by reason (`read_only`: V2 sessions, read-only media).
    pub(super) skipped: BTreeMap<SkipReason, u64>,
    /// Sessions whose compaction was refused, by contract reason.
    pub(super) blocked: BTreeMap<&'static str, u64>,
    /// Of `blocked`, those whose cause passes by itself (see [`passes`]).
    #[serde(skip)]
    pub(super) passing: BTreeMap<&'static str, u64>,
    /// Sessions not reached because the clean was interrupted.
    pub(super) not_reached: u64,
}

/// What the diffs prunes took (or would take): counts of user messages unless named otherwise.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct DiffsReport {
    /// User messages looked at (before the kept turns).
    pub(super) considered: u64,
    /// User messages whose diffs were emptied (or would be).
    pub(super) pruned: u64,
    /// Diff entries whose file bodies were emptied (or would be).
    pub(super) entries: u64,
    /// Bytes the rows shrank by (or would).
    pub(super) bytes: u64,
    /// User messages an identical earlier prune had emptied: answered from its receipt.
    pub(super) already_pruned: u64,
    /// User messages whose diffs hold no file body.
    pub(super) nothing_to_prune: u64,
    /// User messages left alone, by reason.
    pub(super) skipped: BTreeMap<SkipReason, u64>,
    /// User messages whose prune was refused, by contract reason.
    pub(super) blocked: BTreeMap<&'static str, u64>,
    /// Of `blocked`, those whose cause passes by itself (see [`passes`]).
    #[serde(skip)]
    pub(super) passing: BTreeMap<&'static str, u64>,
    /// User messages not reached because the clean was interrupted.
    pub(super) not_reached: u64,
}

/// What emptying the output of OpenCode 2's `shell` rows took (or would take): counts of rows
/// unless named otherwise.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ShellReport {
    /// Rows looked at (before the kept turns).
    pub(super) considered: u64,
    /// Rows whose output was emptied (or would be).
    pub(super) emptied: u64,
    /// Bytes the rows shrank by (or would).
    pub(super) bytes: u64,
    /// Rows an identical earlier prune had emptied: answered from its receipt.
    pub(super) already_emptied: u64,
    /// Rows whose output is empty already.
    pub(super) nothing_to_empty: u64,
    /// Rows left alone, by reason.
    pub(super) skipped: BTreeMap<SkipReason, u64>,
    /// Rows whose prune was refused, by contract reason.
    pub(super) blocked: BTreeMap<&'static str, u64>,
    /// Of `blocked`, those whose cause passes by itself (see [`passes`]).
    #[serde(skip)]
    pub(super) passing: BTreeMap<&'static str, u64>,
    /// Rows not reached because the clean was interrupted.
    pub(super) not_reached: u64,
}

impl ShellReport {
    /// Counts one row's emptying.
    pub(super) fn count(&mut self, bytes_by_kind: &mut BytesByKind, outcome: CopyOutcome) {
        match outcome {
            CopyOutcome::Removed(operation, bytes) => {
                if let Operation::ShellOutput(_) = *operation {
                    self.emptied += 1;
                    self.bytes += bytes;
                    bytes_by_kind.shell_output += bytes;
                }
            }
            CopyOutcome::Already => self.already_emptied += 1,
            CopyOutcome::Nothing => self.nothing_to_empty += 1,
            CopyOutcome::Blocked(reason, passing) => {
                *self.blocked.entry(reason).or_default() += 1;
                if passing {
                    *self.passing.entry(reason).or_default() += 1;
                }
            }
            CopyOutcome::NotReached => self.not_reached += 1,
        }
    }
}

/// The shell lines of the report.
fn print_shell(shell: &ShellReport, apply: bool) -> std::io::Result<()> {
    if shell.considered == 0 {
        return Ok(());
    }
    say!(
        "shell output (OpenCode 2, commands the user ran; never sent to the model again): {} {} of {} row(s) looked at, {} of row data",
        if apply { "emptied" } else { "would empty" },
        shell.emptied,
        shell.considered,
        output::bytes(shell.bytes)
    )?;
    if shell.already_emptied > 0 {
        say!(
            "shell output already emptied by an identical request: {} row(s)",
            shell.already_emptied
        )?;
    }
    for (reason, count) in &shell.skipped {
        say!(
            "shell output skipped ({}): {count} row(s){}",
            reason.as_str(),
            explain(*reason)
        )?;
    }
    for (reason, count) in &shell.blocked {
        say!("shell output blocked ({reason}): {count} row(s)")?;
    }
    if shell.not_reached > 0 {
        say!(
            "shell output not reached (interrupted): {} row(s)",
            shell.not_reached
        )?;
    }
    Ok(())
}

/// What the removals of migrated 1.x rows took (or would take): counts of 1.x messages unless
/// named otherwise.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct MigratedReport {
    /// Sessions at least one of whose 1.x messages was removed (or would be).
    pub(super) sessions: u64,
    /// 1.x messages whose rows were removed (or would be).
    pub(super) messages: u64,
    /// Their part rows.
    pub(super) parts: u64,
    /// Bytes of row data removed (or that would be).
    pub(super) bytes: u64,
    /// Messages an identical earlier removal had removed: answered from its receipt.
    pub(super) already_removed: u64,
    /// Sessions left alone whole, by reason (`not_a_copy`, `read_only`).
    pub(super) skipped_sessions: BTreeMap<SkipReason, u64>,
    /// Messages left alone, by reason (`oversize`, `malformed`).
    pub(super) skipped: BTreeMap<SkipReason, u64>,
    /// Messages whose removal was refused, by contract reason.
    pub(super) blocked: BTreeMap<&'static str, u64>,
    /// Of `blocked`, those whose cause passes by itself (see [`passes`]).
    #[serde(skip)]
    pub(super) passing: BTreeMap<&'static str, u64>,
    /// Messages not reached because the clean was interrupted.
    pub(super) not_reached: u64,
    /// The sessions counted in `sessions`.
    #[serde(skip)]
    pub(super) seen: BTreeSet<String>,
}

impl MigratedReport {
    /// Counts one 1.x message's removal, of session `session_id`.
    pub(super) fn count(
        &mut self,
        bytes_by_kind: &mut BytesByKind,
        session_id: &str,
        outcome: CopyOutcome,
    ) {
        match outcome {
            CopyOutcome::Removed(operation, bytes) => {
                if let Operation::MigratedV1(removed) = *operation {
                    self.messages += 1;
                    self.parts += u64::from(removed.parts);
                    self.bytes += bytes;
                    bytes_by_kind.migrated_v1 += bytes;
                    if self.seen.insert(session_id.to_string()) {
                        self.sessions += 1;
                    }
                }
            }
            CopyOutcome::Already => self.already_removed += 1,
            CopyOutcome::Nothing => {}
            CopyOutcome::Blocked(reason, passing) => {
                *self.blocked.entry(reason).or_default() += 1;
                if passing {
                    *self.passing.entry(reason).or_default() += 1;
                }
            }
            CopyOutcome::NotReached => self.not_reached += 1,
        }
    }
}

/// One prune of a copy, as a dry run found it or the engine answered it: what its receipt (or
/// plan) removes, an identical earlier one's, nothing to take, a refusal, or a failure.
pub(super) enum CopyOutcome {
    /// Removed now (or would be), with what it removed.
    Removed(Box<Operation>, u64),
    /// An identical earlier prune had: answered from its receipt.
    Already,
    /// Nothing to take (`not_deletable`: nothing superseded, no body to empty).
    Nothing,
    /// Refused for another reason; whether its cause passes by itself ([`passes`]).
    Blocked(&'static str, bool),
    /// Not applied: the clean was interrupted first.
    NotReached,
}

impl CopyOutcome {
    /// What a dry run found.
    pub(super) fn of_dry_run(found: Result<DryRun, pruning_engine::Refusal>) -> Self {
        match found {
            Ok(DryRun::Plan { plan, .. }) => match plan.operation {
                Some(operation) => Self::Removed(Box::new(operation), plan.bytes),
                None => Self::Nothing,
            },
            Ok(DryRun::AlreadyPruned(_)) => Self::Already,
            Err(refusal) => Self::refused(&refusal),
        }
    }

    /// What the engine answered; a failure is counted in `report` (`failed`, `unjournaled`)
    /// and returned as what the receipt removed, or as not reached.
    pub(super) fn of_answer(
        report: &mut Report,
        result: Result<pruning_engine::PruneOutcome, EngineError>,
    ) -> Self {
        match result {
            Ok(outcome) => match (outcome.result, outcome.receipt) {
                (PruneResult::Pruned { .. }, _) if outcome.retried => Self::Already,
                (PruneResult::Pruned { .. }, Some(receipt)) => match receipt.operation {
                    Some(operation) => Self::Removed(Box::new(operation), receipt.bytes_removed),
                    None => Self::Nothing,
                },
                (PruneResult::Pruned { .. }, None) => Self::Nothing,
                (PruneResult::Blocked { reason }, _) => Self::refused(
                    &outcome
                        .refusal
                        .unwrap_or_else(|| pruning_engine::Refusal::new(reason, "")),
                ),
            },
            Err(EngineError::Interrupted) => Self::NotReached,
            Err(EngineError::CommittedNotJournaled { receipt, cause }) => {
                report.unjournaled += 1;
                report.first_failure.get_or_insert_with(|| {
                    format!("the journal could not record committed prunes: {cause}")
                });
                match receipt.operation {
                    Some(operation) => Self::Removed(Box::new(operation), receipt.bytes_removed),
                    None => Self::Nothing,
                }
            }
            Err(error) => {
                report.failed += 1;
                report
                    .first_failure
                    .get_or_insert_with(|| error.to_string());
                Self::NotReached
            }
        }
    }

    fn refused(refusal: &pruning_engine::Refusal) -> Self {
        match refusal.reason {
            pruning_engine::BlockedReason::NotDeletable => Self::Nothing,
            other => Self::Blocked(other.as_str(), passes(refusal)),
        }
    }
}

impl CompactionReport {
    /// Counts one session's compaction.
    pub(super) fn count(&mut self, bytes_by_kind: &mut BytesByKind, outcome: CopyOutcome) {
        match outcome {
            CopyOutcome::Removed(operation, bytes) => {
                if let Operation::Compaction(compacted) = *operation {
                    self.sessions += 1;
                    self.part_snapshots += u64::from(compacted.part_snapshots);
                    self.message_snapshots += u64::from(compacted.message_snapshots);
                    self.session_snapshots += u64::from(compacted.session_snapshots);
                    self.snapshots += u64::from(compacted.total());
                    self.bytes += bytes;
                    bytes_by_kind.superseded_snapshots += bytes;
                }
            }
            CopyOutcome::Already => self.already_compacted += 1,
            CopyOutcome::Nothing => self.nothing_to_compact += 1,
            CopyOutcome::Blocked(reason, passing) => {
                *self.blocked.entry(reason).or_default() += 1;
                if passing {
                    *self.passing.entry(reason).or_default() += 1;
                }
            }
            CopyOutcome::NotReached => self.not_reached += 1,
        }
    }
}

impl DiffsReport {
    /// Counts one user message's diffs prune.
    pub(super) fn count(&mut self, bytes_by_kind: &mut BytesByKind, outcome: CopyOutcome) {
        match outcome {
            CopyOutcome::Removed(operation, bytes) => {
                if let Operation::Diffs(diffs) = *operation {
                    self.pruned += 1;
                    self.entries += u64::from(diffs.entries);
                    self.bytes += bytes;
                    bytes_by_kind.diffs += bytes;
                }
            }
            CopyOutcome::Already => self.already_pruned += 1,
            CopyOutcome::Nothing => self.nothing_to_prune += 1,
            CopyOutcome::Blocked(reason, passing) => {
                *self.blocked.entry(reason).or_default() += 1;
                if passing {
                    *self.passing.entry(reason).or_default() += 1;
                }
            }
            CopyOutcome::NotReached => self.not_reached += 1,
        }
    }
}

/// `--until-live-size`: the target, the database's live data before, and the estimate the clean
/// stops by (bytes). The estimate is the live data before less the row data each prune frees
/// that its dry run says would commit, counted when the prune is planned (the apply runs the
/// same dry run), so that the dry run stops where the apply does.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct UntilLiveSize {
    /// The target: live data at most this, in bytes.
    pub(super) target: u64,
    /// Pages in use times the page size before the clean, in bytes.
    pub(super) live_before: u64,
    /// `live_before` less the row data of every prune that would commit, in bytes.
    pub(super) estimate_after: u64,
    /// Whether the estimate reached the target; false when the policies left too little.
    pub(super) reached: bool,
    /// With `--apply`: the live data measured after the clean, in bytes (the freed pages are
    /// not exactly the row data; `vacuum` gives them back).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) live_after: Option<u64>,
}

impl UntilLiveSize {
    pub(super) fn new(target: u64, live_before: u64) -> Self {
        Self {
            target,
            live_before,
            estimate_after: live_before,
            reached: live_before <= target,
            live_after: None,
        }
    }

    /// Counts a planned prune that frees `bytes` of row data.
    pub(super) fn planned(&mut self, bytes: u64) {
        self.estimate_after = self.estimate_after.saturating_sub(bytes);
        self.reached = self.estimate_after <= self.target;
    }

    pub(super) fn reached(&self) -> bool {
        self.reached
    }
}

/// What `--before-compaction` let through, in assistant messages before the kept turns.
#[derive(Debug, Default, Serialize)]
pub(super) struct BeforeCompaction {
    /// Older than their session's last completed compaction: looked at.
    pub(super) qualified: u64,
    /// Not older (or in a session without a compaction): left alone.
    pub(super) outside: u64,
}

impl Report {
    /// The process outcome of a clean that ended with this report: interrupted (130), a
    /// failure (1), with `--apply` a prune refused by a condition that passes (3: a script
    /// running `clean --apply && vacuum` learns that part of the work waits for a run to
    /// come), else done (0).
    pub(super) fn outcome(&self, apply: bool) -> super::Outcome {
        if self.status == Status::Interrupted {
            super::Outcome::Interrupted
        } else if self.failed > 0 || self.unjournaled > 0 {
            super::Outcome::Failed
        } else if apply && !self.retry_later.is_empty() {
            super::Outcome::Blocked
        } else {
            super::Outcome::Done
        }
    }

    /// Counts a prune of parts whose receipt removed `bytes`, `snapshots` of them the part
    /// snapshots'.
    fn by_kind(&mut self, bytes: u64, snapshots: u64) {
        let snapshots = snapshots.min(bytes);
        self.bytes_by_kind.part_snapshots += snapshots;
        self.bytes_by_kind.parts += bytes - snapshots;
    }

    /// Bytes of row data removed so far (or that would be), of every kind.
    pub(super) fn freed_bytes(&self) -> u64 {
        self.bytes_by_kind.total()
    }

    /// Counts the abandoned run a prune was admitted beside, once per run.
    pub(super) fn admitted(&mut self, run: Option<&AbandonedRun>) {
        if let Some(run) = run {
            self.runs.insert(run.message_id.clone());
            self.abandoned_runs = self.runs.len() as u64;
        }
    }
}

/// Whether a refusal's cause passes by itself, so that the same clean later may prune what it
/// refused now: OpenCode using the session (a run, the quiet period, its write lock) or another
/// process holding the journal (`maintenance_required`), or OpenCode writing the message after
/// the clean read it (`conflict`); not a refusal the fence marks lasting (`--abandoned-after
/// never`, a time that is not a number). docs/ARCHITECTURE.md, "Contract".
pub(super) fn passes(refusal: &pruning_engine::Refusal) -> bool {
    use pruning_engine::BlockedReason::{Conflict, MaintenanceRequired};
    matches!(refusal.reason, MaintenanceRequired | Conflict) && !refusal.lasting
}

impl Report {
    /// Counts one refused prune of parts, keeping the words of the first of its reason.
    fn refused(&mut self, refusal: &pruning_engine::Refusal) {
        let reason = refusal.reason.as_str();
        *self.blocked.entry(reason).or_default() += 1;
        self.blocked_because
            .entry(reason)
            .or_insert_with(|| refusal.detail.clone());
        if passes(refusal) {
            *self.retry_later.entry(reason).or_default() += 1;
        }
    }

    /// Adds the compactions', the diffs prunes' and the removals' passing refusals to [`Report::retry_later`]
    /// (the prunes of parts count theirs as they are answered). Called once, at the end.
    pub(super) fn count_retry_later(&mut self) {
        let copies = self
            .compaction
            .iter()
            .flat_map(|c| &c.passing)
            .chain(self.diffs.iter().flat_map(|d| &d.passing))
            .chain(self.migrated_v1.iter().flat_map(|m| &m.passing))
            .chain(self.shell_output.iter().flat_map(|s| &s.passing));
        for (reason, count) in copies {
            *self.retry_later.entry(reason).or_default() += count;
        }
    }
}

/// Counts what a dry run of one planned prune found.
pub(super) fn dry(report: &mut Report, found: Result<DryRun, pruning_engine::Refusal>) {
    match found {
        Ok(DryRun::Plan {
            plan,
            abandoned_run,
        }) => {
            report.pruned += 1;
            report.parts += plan.remove.len() as u64;
            report.admitted(abandoned_run.as_ref());
        }
        Ok(DryRun::AlreadyPruned(_)) => report.already_pruned += 1,
        Err(refusal) => report.refused(&refusal),
    }
}

/// Counts one prune of parts the engine answered; `snapshots` is the bytes of the part
/// snapshots it removes (the rest of its receipt's count is the part rows').
pub(super) fn tally(
    report: &mut Report,
    result: Result<pruning_engine::PruneOutcome, EngineError>,
    snapshots: u64,
) {
    match result {
        Ok(outcome) => match outcome.result {
            PruneResult::Pruned { .. } if outcome.retried => report.already_pruned += 1,
            PruneResult::Pruned { removed_count, .. } => {
                report.pruned += 1;
                report.parts += u64::from(removed_count);
                if let Some(receipt) = &outcome.receipt {
                    report.bytes += receipt.bytes_removed;
                    report.by_kind(receipt.bytes_removed, snapshots);
                    report.admitted(receipt.abandoned_run.as_ref());
                }
            }
            PruneResult::Blocked { reason } => match &outcome.refusal {
                Some(refusal) => report.refused(refusal),
                None => *report.blocked.entry(reason.as_str()).or_default() += 1,
            },
        },
        // Not reached: counted with the messages never looked at.
        Err(EngineError::Interrupted) => report.considered -= 1,
        // Committed with its receipt: pruned, though its event waits for the next run.
        Err(EngineError::CommittedNotJournaled { receipt, cause }) => {
            report.pruned += 1;
            report.admitted(receipt.abandoned_run.as_ref());
            report.unjournaled += 1;
            report.parts += u64::from(receipt.removed_count);
            report.bytes += receipt.bytes_removed;
            report.by_kind(receipt.bytes_removed, snapshots);
            report.first_failure.get_or_insert_with(|| {
                format!("the journal could not record committed prunes: {cause}")
            });
        }
        Err(error) => {
            report.failed += 1;
            report
                .first_failure
                .get_or_insert_with(|| error.to_string());
        }
    }
}

/// The compaction lines of the report.
fn print_compaction(compaction: &CompactionReport, apply: bool) -> std::io::Result<()> {
    say!(
        "{}: {} session(s), {} superseded snapshot(s) ({} of parts, {} of messages, {} of sessions), {} of row data",
        if apply { "compacted" } else { "would compact" },
        compaction.sessions,
        compaction.snapshots,
        compaction.part_snapshots,
        compaction.message_snapshots,
        compaction.session_snapshots,
        output::bytes(compaction.bytes)
    )?;
    if compaction.already_compacted > 0 {
        say!(
            "already compacted by an identical request: {} session(s)",
            compaction.already_compacted
        )?;
    }
    say!(
        "nothing to compact: {} session(s)",
        compaction.nothing_to_compact
    )?;
    for (reason, count) in &compaction.skipped {
        say!(
            "compaction skipped ({}): {count} session(s){}",
            reason.as_str(),
            explain(*reason)
        )?;
    }
    for (reason, count) in &compaction.blocked {
        say!("compaction blocked ({reason}): {count} session(s)")?;
    }
    if compaction.not_reached > 0 {
        say!(
            "compaction not reached (interrupted): {} session(s)",
            compaction.not_reached
        )?;
    }
    Ok(())
}

/// The diffs lines of the report.
fn print_diffs(diffs: &DiffsReport, apply: bool) -> std::io::Result<()> {
    say!(
        "diffs: {} {} file bod(ies) in {} of {} user message(s) looked at, {} of row data",
        if apply { "emptied" } else { "would empty" },
        diffs.entries,
        diffs.pruned,
        diffs.considered,
        output::bytes(diffs.bytes)
    )?;
    if diffs.already_pruned > 0 {
        say!(
            "diffs already emptied by an identical request: {} user message(s)",
            diffs.already_pruned
        )?;
    }
    for (reason, count) in &diffs.skipped {
        say!(
            "diffs skipped ({}): {count} user message(s){}",
            reason.as_str(),
            explain(*reason)
        )?;
    }
    for (reason, count) in &diffs.blocked {
        say!("diffs blocked ({reason}): {count} user message(s)")?;
    }
    if diffs.not_reached > 0 {
        say!(
            "diffs not reached (interrupted): {} user message(s)",
            diffs.not_reached
        )?;
    }
    Ok(())
}

/// The lines of the report on the OpenCode 1.x history OpenCode 2 migrated: what
/// `--migrated-v1` removed (or would), or, without it, what there is to remove.
fn print_migrated(report: &Report, apply: bool, invocation: &str) -> std::io::Result<()> {
    let Some(migrated) = &report.migrated_v1 else {
        if let Some(history) = report.migrated_history {
            say!(
                "OpenCode 1.x history that OpenCode 2 migrated and never reads: {} session(s), {} \
                 (`{invocation} clean --all --migrated-v1` shows what removing it would take)",
                history.sessions,
                output::bytes(history.bytes())
            )?;
        }
        return Ok(());
    };
    say!(
        "migrated 1.x rows: {} {} message(s) ({} part(s)) of {} session(s), {} of row data",
        if apply { "removed" } else { "would remove" },
        migrated.messages,
        migrated.parts,
        migrated.sessions,
        output::bytes(migrated.bytes)
    )?;
    if migrated.already_removed > 0 {
        say!(
            "migrated 1.x rows already removed by an identical request: {} message(s)",
            migrated.already_removed
        )?;
    }
    for (reason, count) in &migrated.skipped_sessions {
        say!(
            "migrated 1.x rows skipped ({}): {count} session(s){}",
            reason.as_str(),
            explain(*reason)
        )?;
    }
    for (reason, count) in &migrated.skipped {
        say!(
            "migrated 1.x rows skipped ({}): {count} message(s){}",
            reason.as_str(),
            explain(*reason)
        )?;
    }
    for (reason, count) in &migrated.blocked {
        say!("migrated 1.x rows blocked ({reason}): {count} message(s)")?;
    }
    if migrated.not_reached > 0 {
        say!(
            "migrated 1.x rows not reached (interrupted): {} message(s)",
            migrated.not_reached
        )?;
    }
    Ok(())
}

/// What a skip reason means, for people (after its name, in the text report).
fn explain(reason: SkipReason) -> &'static str {
    match reason {
        SkipReason::ReadOnly => {
            " - stored where prunes are not written: read-only media, or OpenCode 2 rows in the session table OpenCode 1.17 to 1.19 share"
        }
        SkipReason::NotACopy => {
            " - OpenCode 2 holds no copy of some of its 1.x messages: its migration did not finish, or a 1.x wrote to the session since"
        }
        SkipReason::Incomplete => " - no time.completed: a run is writing it, or was killed",
        SkipReason::Unplaceable => " - a time that is not a number, or an id no request can name",
        SkipReason::NotStringified => {
            " - JSON, but not as OpenCode writes it: emptying its diffs would rewrite more than them"
        }
        SkipReason::TooRecent => " - completed within --older-than",
        SkipReason::Restored => {
            " - put back by `restore`: a clean leaves it (prune it by name, or --include-restored)"
        }
        SkipReason::Oversize
        | SkipReason::Malformed
        | SkipReason::RunningTool
        | SkipReason::UnknownPart => "",
    }
}

pub(super) fn print_report(
    report: &Report,
    clean: &CleanConfig,
    invocation: &str,
) -> std::io::Result<()> {
    let verb = if clean.apply { "pruned" } else { "would prune" };
    say!(
        "{}: {} session(s), {} assistant message(s) looked at, and {} more left alone in the last {} turn(s)",
        report.status.as_str(),
        report.sessions,
        report.considered,
        report.kept_recent,
        clean.policy.keep_last_turns
    )?;
    let bytes_what = if clean.apply {
        "of row data removed (parts and their event snapshots)"
    } else {
        "of row data (parts and their event snapshots)"
    };
    say!(
        "{verb}: {} message(s), {} part(s), {} {bytes_what}",
        report.pruned,
        report.parts,
        output::bytes(report.bytes)
    )?;
    if let Some(compaction) = &report.compaction {
        print_compaction(compaction, clean.apply)?;
    }
    if let Some(diffs) = &report.diffs {
        print_diffs(diffs, clean.apply)?;
    }
    if let Some(shell) = &report.shell_output {
        print_shell(shell, clean.apply)?;
    }
    print_migrated(report, clean.apply, invocation)?;
    if let Some(lock) = report.write_lock.filter(|lock| lock.transactions > 0) {
        say!(
            "write lock: held by {} transaction(s), p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (OpenCode waits up to 5 s for it)",
            lock.transactions,
            lock.p50_ms,
            lock.p99_ms,
            lock.max_ms
        )?;
    }
    let kinds = &report.bytes_by_kind;
    let mut more = String::new();
    if report.shell_output.is_some() {
        more.push_str(&format!(
            ", {} of shell output",
            output::bytes(kinds.shell_output)
        ));
    }
    if report.migrated_v1.is_some() {
        more.push_str(&format!(
            ", {} of migrated 1.x rows",
            output::bytes(kinds.migrated_v1)
        ));
    }
    say!(
        "by kind: {} of parts, {} of their snapshots, {} of superseded snapshots, {} of diffs{more} ({} in all)",
        output::bytes(kinds.parts),
        output::bytes(kinds.part_snapshots),
        output::bytes(kinds.superseded_snapshots),
        output::bytes(kinds.diffs),
        output::bytes(kinds.total())
    )?;
    print_file(report)?;
    if let Some(archived) = report.archive_bytes {
        say!(
            "archived: {} written to the prune archive for them (their rows, compressed; `restore RECEIPT` puts one back)",
            output::bytes(archived)
        )?;
    }
    if report.already_pruned > 0 {
        say!(
            "already pruned by an identical request: {}",
            report.already_pruned
        )?;
    }
    if report.abandoned_runs > 0 {
        say!(
            "beside runs OpenCode left incomplete (idle for --abandoned-after; their own messages are left alone): {} run(s)",
            report.abandoned_runs
        )?;
    }
    if let Some(until) = &report.until_file_size {
        let measured = until
            .live_after
            .map(|after| format!(", {} measured", output::bytes(after)))
            .unwrap_or_default();
        let short = match (&report.given_back, until.reached) {
            (Some(given), _) if given.left_pages > 0 => format!(
                "; {} free page(s) are still in the file ({}): the next clean gives them back",
                given.left_pages,
                given.stopped.as_deref().unwrap_or("stopped")
            ),
            (_, false) => "; the policies leave too little to reach the target".to_string(),
            (_, true) => match until.live_after {
                Some(after) if after > until.target => format!(
                    "; {} over it: the rows freed left part-full pages, which stay; the same clean again takes more",
                    output::bytes(after - until.target)
                ),
                _ => String::new(),
            },
        };
        say!(
            "file size: {} of pages in use before, about {} after its pages are given back{measured} (target {}){short}",
            output::bytes(until.live_before),
            output::bytes(until.estimate_after),
            output::bytes(until.target),
        )?;
    }
    if let Some(until) = &report.until_live_size {
        let measured = until
            .live_after
            .map(|after| format!(", {} measured", output::bytes(after)))
            .unwrap_or_default();
        say!(
            "live data: {} before, about {} after{measured} (target {}){}",
            output::bytes(until.live_before),
            output::bytes(until.estimate_after),
            output::bytes(until.target),
            if until.reached {
                ""
            } else {
                "; the policies leave too little to reach the target"
            }
        )?;
    }
    if let Some(before) = &report.before_compaction {
        say!(
            "older than their session's last compaction: {} message(s) looked at, {} newer left alone",
            before.qualified,
            before.outside
        )?;
    }
    say!("nothing to prune: {} message(s)", report.nothing_to_prune)?;
    for (reason, count) in &report.skipped {
        say!(
            "skipped ({}): {count} message(s){}",
            reason.as_str(),
            explain(*reason)
        )?;
    }
    for (reason, count) in &report.blocked {
        match report.blocked_because.get(reason) {
            Some(why) => say!(
                "blocked ({reason}): {count} message(s); the first: {}",
                output::printable(why)
            )?,
            None => say!("blocked ({reason}): {count} message(s)")?,
        }
    }
    if report.unjournaled > 0 {
        say!(
            "of those, {} committed with their receipts but not yet journaled: the next run journals them and announces their events",
            report.unjournaled
        )?;
    }
    if report.failed > 0 || report.unjournaled > 0 {
        say!(
            "failed: {} message(s) (each whole or not at all: where a commit may have taken effect, the next run's recovery tells from the receipts); first failure: {}",
            report.failed,
            report.first_failure.as_deref().unwrap_or("")
        )?;
    }
    if report.not_reached > 0 {
        say!(
            "not reached (interrupted): {} message(s); run the same clean again to finish",
            report.not_reached
        )?;
    }
    if report.orphan_parts > 0 {
        say!(
            "orphan parts (no message row), left alone: {}",
            report.orphan_parts
        )?;
    }
    if report.spill_files_removed > 0 {
        say!(
            "spill files {}: {} ({})",
            if clean.apply {
                "removed"
            } else {
                "that would be removed"
            },
            report.spill_files_removed,
            output::bytes(report.spill_bytes_removed)
        )?;
    }
    if !report.retry_later.is_empty() {
        let counts: Vec<String> = report
            .retry_later
            .iter()
            .map(|(reason, count)| format!("{reason} {count}"))
            .collect();
        say!(
            "blocked by conditions that pass ({}): run it again later{}",
            counts.join(", "),
            if clean.apply {
                " (exit 3); what committed stays committed"
            } else {
                ""
            }
        )?;
    }
    if !clean.apply {
        say!("dry run: nothing written; add --apply to do it")?;
    } else if report.freed_bytes() > 0 && report.given_back.is_none() {
        say!(
            "the file shrinks only after `{invocation} vacuum` (with OpenCode stopped); `{invocation} vacuum --online-shrink`, once, makes every clean give the pages it frees back while OpenCode runs"
        )?;
    }
    Ok(())
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The file's lines: its size, what it comes to, and what the online shrink gave back.
fn print_file(report: &Report) -> std::io::Result<()> {
    let file = &report.file;
    let shrinks = file.auto_vacuum == AutoVacuum::Incremental;
    match (file.live_after, &report.given_back) {
        (Some(_), Some(given)) => {
            say!(
                "given back: {} of free pages to the disk in {} step(s) of at most 50 ms, while OpenCode may run; the file: {} -> {}",
                output::bytes(given.bytes),
                given.steps,
                output::bytes(given.file_bytes_before),
                output::bytes(given.file_bytes_after)
            )?;
            if let Some(why) = &given.stopped {
                say!(
                    "given back: {} free page(s) left ({why}): the next clean gives them back",
                    given.left_pages
                )?;
            }
        }
        (Some(live), None) => say!(
            "file: {}; {} of pages in use now, what `vacuum` leaves at most",
            output::bytes(file.bytes),
            output::bytes(live)
        )?,
        (None, _) if shrinks => say!(
            "file: {}; about {} once the clean gives its pages back (an estimate: the pages in use, less the row data the clean would remove; online shrink is on, no `vacuum` needed)",
            output::bytes(file.bytes),
            output::bytes(file.after_vacuum)
        )?,
        (None, _) => say!(
            "file: {}; at most about {} after `vacuum` (an estimate: the pages in use, less the row data the clean would remove)",
            output::bytes(file.bytes),
            output::bytes(file.after_vacuum)
        )?,
    }
    Ok(())
}
