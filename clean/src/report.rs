//! The report of a clean: what it counted (`clean --json` writes it whole, the server's upkeep
//! counts from it), and how each prune's [`Answer`] is counted into it, the same in a dry run
//! and an apply.

use std::collections::{BTreeMap, BTreeSet};

use pruning_engine::{AbandonedRun, Operation, Refusal};
use pruning_opencode::{AutoVacuum, SkipReason};
use serde::Serialize;

use crate::answer::{passes, Answer};

/// How a clean ended, as its report names it (`status`, and the first word of the text): the
/// name is [`Status::as_str`]'s, which `--json` writes too.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Status {
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
    pub fn as_str(self) -> &'static str {
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
pub struct Report {
    /// How it ended.
    pub status: Status,
    /// Sessions looked at.
    pub sessions: u64,
    /// Messages the policy looked at (assistant messages before the kept turns).
    pub considered: u64,
    /// Assistant messages in the last `--keep-last-turns` user turns, not looked at.
    pub kept_recent: u64,
    /// Messages pruned (with `--apply`) or that would be pruned.
    pub pruned: u64,
    /// Messages an identical earlier request had pruned (the same content and selection, as
    /// after an interrupted run): answered from the receipt, nothing written.
    pub already_pruned: u64,
    /// Messages with nothing the policy selects (a message pruned before has nothing left).
    pub nothing_to_prune: u64,
    /// Parts removed (or that would be).
    pub parts: u64,
    /// Bytes of row data removed (or, in a dry run, that would be): the part rows and their
    /// event snapshots, as the receipts count them.
    pub bytes: u64,
    /// With `--archive`: bytes written to the prune archive for the prunes that committed
    /// (their rows, compressed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archive_bytes: Option<u64>,
    /// Messages left alone, by reason (`oversize`, `malformed`, `incomplete`, ...).
    pub skipped: BTreeMap<SkipReason, u64>,
    /// Messages the prune refused, by contract reason (`maintenance_required`, `conflict`, ...).
    pub blocked: BTreeMap<&'static str, u64>,
    /// The words of the first refusal of each reason in `blocked`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub blocked_because: BTreeMap<&'static str, String>,
    /// Of the prunes, compactions and diffs prunes refused, those refused by a condition that
    /// passes ([`passes`]), by reason: run the clean again later. Present only when not empty;
    /// with `--apply`, the clean then exits 3.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub retry_later: BTreeMap<&'static str, u64>,
    /// Messages whose prune failed (storage or journal errors): each whole or not at all; nothing
    /// of them was written unless the failure was a commit whose outcome is unknown, which the
    /// next run's recovery settles from the receipts.
    pub failed: u64,
    /// Of `pruned`, messages committed in the database (with their receipts) whose commit
    /// marks could not be journaled: the next run's recovery journals them and announces their
    /// events. Present only when not 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub unjournaled: u64,
    /// The first failure, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_failure: Option<String>,
    /// Messages not reached because the clean was interrupted.
    pub not_reached: u64,
    /// Part rows of the sessions whose message row is missing (orphans), left alone.
    pub orphan_parts: u64,
    /// Spill files removed (in a dry run: that would be).
    pub spill_files_removed: u64,
    /// Bytes of spill files removed (in a dry run: that would be).
    pub spill_bytes_removed: u64,
    /// Runs OpenCode left incomplete whose sessions were pruned beside them (or would be): idle
    /// for at least `--abandoned-after`. Each counts once, however many of its session's
    /// messages were pruned.
    pub abandoned_runs: u64,
    /// The incomplete messages of those runs.
    #[serde(skip)]
    pub runs: BTreeSet<String>,
    /// With `--timings`: how long the clean's write transactions (and the dry runs that take
    /// the lock) held SQLite's write lock, which OpenCode waits up to 5 s for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_lock: Option<pruning_opencode::LockSummary>,
    /// With `--timings`: how long the integrity check took, and how long the clean waited for
    /// it (it runs beside the planning; no write begins before its `ok`). Set by the caller
    /// that started it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub integrity_check: Option<pruning_opencode::IntegrityTimes>,
    /// With `--before-compaction` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before_compaction: Option<BeforeCompaction>,
    /// With `--until-live-size` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until_live_size: Option<UntilLiveSize>,
    /// With `--until-file-size` only: the same figures, the file being its live data once its
    /// pages are given back; `liveAfter` is the file's size measured after the give back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until_file_size: Option<UntilLiveSize>,
    /// Each session's superseded snapshots, compacted before its messages are pruned (absent
    /// with `--no-compact`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction: Option<CompactionReport>,
    /// With `--diffs`: the file bodies in the summary diffs of the user messages before the
    /// kept turns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diffs: Option<DiffsReport>,
    /// The output OpenCode 2's `shell` rows keep of the commands the user ran, before the kept
    /// turns (absent where the file has no OpenCode 2 rows, or `--tools`/`--skip-tools` leave
    /// the shell out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shell_output: Option<ShellReport>,
    /// With `--migrated-v1`: the OpenCode 1.x rows of the sessions OpenCode 2 migrated.
    #[serde(rename = "migratedV1", skip_serializing_if = "Option::is_none")]
    pub migrated_v1: Option<MigratedReport>,
    /// The OpenCode 1.x history OpenCode 2 migrated, as the file held it when the clean began
    /// (absent where there is none): what `--migrated-v1` takes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migrated_history: Option<pruning_opencode::MigratedV1>,
    /// Bytes of row data removed (or that would be), by kind.
    pub bytes_by_kind: BytesByKind,
    /// The database file's size and what `vacuum` would leave of it.
    pub file: FileSize,
    /// With `--apply` on a file `vacuum --online-shrink` switched: the free pages given back to
    /// the disk after the prunes, while OpenCode runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub given_back: Option<pruning_opencode::GivenBack>,
}

/// Bytes of row data a clean removed (or would remove), by kind.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BytesByKind {
    /// The pruned tool and reasoning parts' rows (V1 `part.data`; V2, what the message rows
    /// shrink by).
    pub parts: u64,
    /// Their `message.part.updated.1` snapshots left after the compaction (the newest of each
    /// part, where the session was compacted).
    pub part_snapshots: u64,
    /// Superseded snapshots of every entity, deleted by the compactions.
    pub superseded_snapshots: u64,
    /// What the message rows and their newest snapshots shrink by when their diffs' file bodies
    /// are emptied.
    pub diffs: u64,
    /// The OpenCode 1.x message and part rows of the sessions OpenCode 2 migrated.
    #[serde(rename = "migratedV1")]
    pub migrated_v1: u64,
    /// What OpenCode 2's `shell` rows shrink by when their output is emptied.
    pub shell_output: u64,
}

impl BytesByKind {
    /// Every kind together.
    pub fn total(&self) -> u64 {
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
pub struct FileSize {
    /// The database file and its WAL on disk when the clean began.
    pub bytes: u64,
    /// The pages in use (what `vacuum` would leave) when the clean began.
    pub live_bytes: u64,
    /// An estimate of the file after `vacuum`: the pages in use when the clean began, less the
    /// row data it removed (or would remove). The same in a dry run and its apply. `vacuum` also
    /// frees the pages that held the rows' overflow and index entries and packs the pages that
    /// deletes left part full, so the file it leaves is smaller.
    pub after_vacuum: u64,
    /// With `--apply`: the pages in use after the clean (what `vacuum` would leave, but for the
    /// part-full pages it packs), measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live_after: Option<u64>,
    /// The file's `auto_vacuum` mode: `incremental` (switched by `vacuum --online-shrink`: an
    /// apply gives its freed pages back, and `afterVacuum` is what the file comes to without a
    /// `vacuum`), or `none`, OpenCode's (the file shrinks only at `vacuum`).
    pub auto_vacuum: AutoVacuum,
}

/// What the compactions took (or would take): counts of sessions unless named otherwise.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionReport {
    /// Sessions compacted (or that would be).
    pub sessions: u64,
    /// Snapshots deleted (or that would be), of every type.
    pub snapshots: u64,
    /// Of them, `message.part.updated.1` events.
    pub part_snapshots: u64,
    /// Of them, `message.updated.1` events.
    pub message_snapshots: u64,
    /// Of them, `session.updated.1` events.
    pub session_snapshots: u64,
    /// Bytes of row data deleted (or that would be).
    pub bytes: u64,
    /// Sessions an identical earlier compaction had compacted: answered from its receipt.
    pub already_compacted: u64,
    /// Sessions whose event log holds no superseded snapshot (or no event log at all).
    pub nothing_to_compact: u64,
    /// Sessions left alone, by reason (`read_only`: V2 sessions, read-only media).
    pub skipped: BTreeMap<SkipReason, u64>,
    /// Sessions whose compaction was refused, by contract reason.
    pub blocked: BTreeMap<&'static str, u64>,
    /// Of `blocked`, those whose cause passes by itself (see [`passes`]).
    #[serde(skip)]
    pub passing: BTreeMap<&'static str, u64>,
    /// Sessions not reached because the clean was interrupted.
    pub not_reached: u64,
}

/// What the diffs prunes took (or would take): counts of user messages unless named otherwise.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffsReport {
    /// User messages looked at (before the kept turns).
    pub considered: u64,
    /// User messages whose diffs were emptied (or would be).
    pub pruned: u64,
    /// Diff entries whose file bodies were emptied (or would be).
    pub entries: u64,
    /// Bytes the rows shrank by (or would).
    pub bytes: u64,
    /// User messages an identical earlier prune had emptied: answered from its receipt.
    pub already_pruned: u64,
    /// User messages whose diffs hold no file body.
    pub nothing_to_prune: u64,
    /// User messages left alone, by reason.
    pub skipped: BTreeMap<SkipReason, u64>,
    /// User messages whose prune was refused, by contract reason.
    pub blocked: BTreeMap<&'static str, u64>,
    /// Of `blocked`, those whose cause passes by itself (see [`passes`]).
    #[serde(skip)]
    pub passing: BTreeMap<&'static str, u64>,
    /// User messages not reached because the clean was interrupted.
    pub not_reached: u64,
}

/// What emptying the output of OpenCode 2's `shell` rows took (or would take): counts of rows
/// unless named otherwise.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShellReport {
    /// Rows looked at (before the kept turns).
    pub considered: u64,
    /// Rows whose output was emptied (or would be).
    pub emptied: u64,
    /// Bytes the rows shrank by (or would).
    pub bytes: u64,
    /// Rows an identical earlier prune had emptied: answered from its receipt.
    pub already_emptied: u64,
    /// Rows whose output is empty already.
    pub nothing_to_empty: u64,
    /// Rows left alone, by reason.
    pub skipped: BTreeMap<SkipReason, u64>,
    /// Rows whose prune was refused, by contract reason.
    pub blocked: BTreeMap<&'static str, u64>,
    /// Of `blocked`, those whose cause passes by itself (see [`passes`]).
    #[serde(skip)]
    pub passing: BTreeMap<&'static str, u64>,
    /// Rows not reached because the clean was interrupted.
    pub not_reached: u64,
}

impl ShellReport {
    /// Counts one row's emptying.
    pub(crate) fn count(&mut self, bytes_by_kind: &mut BytesByKind, outcome: CopyOutcome) {
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

/// What the removals of migrated 1.x rows took (or would take): counts of 1.x messages unless
/// named otherwise.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MigratedReport {
    /// Sessions at least one of whose 1.x messages was removed (or would be).
    pub sessions: u64,
    /// 1.x messages whose rows were removed (or would be).
    pub messages: u64,
    /// Their part rows.
    pub parts: u64,
    /// Bytes of row data removed (or that would be).
    pub bytes: u64,
    /// Messages an identical earlier removal had removed: answered from its receipt.
    pub already_removed: u64,
    /// Sessions left alone whole, by reason (`not_a_copy`, `read_only`).
    pub skipped_sessions: BTreeMap<SkipReason, u64>,
    /// Messages left alone, by reason (`oversize`, `malformed`).
    pub skipped: BTreeMap<SkipReason, u64>,
    /// Messages whose removal was refused, by contract reason.
    pub blocked: BTreeMap<&'static str, u64>,
    /// Of `blocked`, those whose cause passes by itself (see [`passes`]).
    #[serde(skip)]
    pub passing: BTreeMap<&'static str, u64>,
    /// Messages not reached because the clean was interrupted.
    pub not_reached: u64,
    /// The sessions counted in `sessions`.
    #[serde(skip)]
    pub seen: BTreeSet<String>,
}

impl MigratedReport {
    /// Counts one 1.x message's removal, of session `session_id`.
    pub(crate) fn count(
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
pub enum CopyOutcome {
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
    /// The outcome of one prune of a copy: its answer, a failure or an unjournaled commit also
    /// counted in `report` (`failed`, `unjournaled`, `firstFailure`).
    pub(crate) fn of(report: &mut Report, answer: Answer) -> Self {
        match answer {
            Answer::Removed(removal) => Self::removed(removal),
            Answer::Unjournaled(removal, cause) => {
                report.unjournaled += 1;
                report.first_failure.get_or_insert_with(|| {
                    format!("the journal could not record committed prunes: {cause}")
                });
                Self::removed(removal)
            }
            Answer::Already => Self::Already,
            Answer::Refused(refusal) => Self::refused(&refusal),
            Answer::Blocked(reason) => Self::refused(&Refusal::new(reason, "")),
            Answer::NotReached => Self::NotReached,
            Answer::Failed(failure) => {
                report.failed += 1;
                report.first_failure.get_or_insert(failure);
                Self::NotReached
            }
        }
    }

    fn removed(removal: crate::answer::Removal) -> Self {
        match removal.operation {
            Some(operation) => Self::Removed(Box::new(operation), removal.bytes),
            None => Self::Nothing,
        }
    }

    fn refused(refusal: &Refusal) -> Self {
        match refusal.reason {
            pruning_engine::BlockedReason::NotDeletable => Self::Nothing,
            other => Self::Blocked(other.as_str(), passes(refusal)),
        }
    }
}

impl CompactionReport {
    /// Counts one session's compaction.
    pub(crate) fn count(&mut self, bytes_by_kind: &mut BytesByKind, outcome: CopyOutcome) {
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
    pub(crate) fn count(&mut self, bytes_by_kind: &mut BytesByKind, outcome: CopyOutcome) {
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
pub struct UntilLiveSize {
    /// The target: live data at most this, in bytes.
    pub target: u64,
    /// Pages in use times the page size before the clean, in bytes.
    pub live_before: u64,
    /// `live_before` less the row data of every prune that would commit, in bytes.
    pub estimate_after: u64,
    /// Whether the estimate reached the target; false when the policies left too little.
    pub reached: bool,
    /// With `--apply`: the live data measured after the clean, in bytes (the freed pages are
    /// not exactly the row data; `vacuum` gives them back).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live_after: Option<u64>,
}

impl UntilLiveSize {
    pub(crate) fn new(target: u64, live_before: u64) -> Self {
        Self {
            target,
            live_before,
            estimate_after: live_before,
            reached: live_before <= target,
            live_after: None,
        }
    }

    /// Counts a planned prune that frees `bytes` of row data.
    pub(crate) fn planned(&mut self, bytes: u64) {
        self.estimate_after = self.estimate_after.saturating_sub(bytes);
        self.reached = self.estimate_after <= self.target;
    }

    pub(crate) fn reached(&self) -> bool {
        self.reached
    }
}

/// What `--before-compaction` let through, in assistant messages before the kept turns.
#[derive(Debug, Default, Serialize)]
pub struct BeforeCompaction {
    /// Older than their session's last completed compaction: looked at.
    pub qualified: u64,
    /// Not older (or in a session without a compaction): left alone.
    pub outside: u64,
}

impl Report {
    /// Counts a prune of parts whose receipt removed `bytes`, `snapshots` of them the part
    /// snapshots'.
    fn by_kind(&mut self, bytes: u64, snapshots: u64) {
        let snapshots = snapshots.min(bytes);
        self.bytes_by_kind.part_snapshots += snapshots;
        self.bytes_by_kind.parts += bytes - snapshots;
    }

    /// Bytes of row data removed so far (or that would be), of every kind.
    pub fn freed_bytes(&self) -> u64 {
        self.bytes_by_kind.total()
    }

    /// Counts the abandoned run a prune was admitted beside, once per run.
    fn admitted(&mut self, run: Option<&AbandonedRun>) {
        if let Some(run) = run {
            self.runs.insert(run.message_id.clone());
            self.abandoned_runs = self.runs.len() as u64;
        }
    }

    /// Counts one refused prune of parts, keeping the words of the first of its reason.
    fn refused(&mut self, refusal: &Refusal) {
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
    pub(crate) fn count_retry_later(&mut self) {
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

impl Report {
    /// Counts one prune of parts; `snapshots` is the bytes of the part snapshots it removes
    /// (the rest of its bytes are the part rows', or a V2 row's).
    pub(crate) fn count_prune(&mut self, answer: Answer, snapshots: u64) {
        match answer {
            Answer::Removed(removal) => self.pruned(&removal, snapshots),
            // Committed with its receipt: pruned, though its event waits for the next run.
            Answer::Unjournaled(removal, cause) => {
                self.pruned(&removal, snapshots);
                self.unjournaled += 1;
                self.first_failure.get_or_insert_with(|| {
                    format!("the journal could not record committed prunes: {cause}")
                });
            }
            Answer::Already => self.already_pruned += 1,
            Answer::Refused(refusal) => self.refused(&refusal),
            Answer::Blocked(reason) => *self.blocked.entry(reason.as_str()).or_default() += 1,
            // Not reached: counted with the messages never looked at.
            Answer::NotReached => self.considered -= 1,
            Answer::Failed(failure) => {
                self.failed += 1;
                self.first_failure.get_or_insert(failure);
            }
        }
    }

    /// Counts a prune of parts that removed (or would remove) `removal`.
    fn pruned(&mut self, removal: &crate::answer::Removal, snapshots: u64) {
        self.pruned += 1;
        self.parts += removal.parts;
        self.bytes += removal.bytes;
        self.by_kind(removal.bytes, snapshots);
        self.admitted(removal.abandoned_run.as_ref());
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
