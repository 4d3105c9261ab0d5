//! One run of the upkeep (`serve --auto-clean`): the clean of every session through the
//! server's engine (`pruning_clean::run`, as `clean --all --apply` runs it), each batch and each
//! slice of its give back in the server's write turn, then the archive's retention
//! (`--archive-keep`); counted as the server announces a run (docs/ARCHITECTURE.md, "Upkeep in
//! the server").

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pruning_clean::{Clean, Mode, Report, Silent, Status, Turns};
use pruning_engine::Engine;
use pruning_opencode::OpenCodeStore;

use serde::Serialize;

/// How long one turn of a run's give back may hold the server's write turn: as long as the
/// prune-batch route's own give back.
const GIVE_BACK_SLICE: Duration = Duration::from_millis(250);

/// Runs `clean` through `engine`, its batches in `turn` (the server's write turn), then purges
/// the archive entries older than `archive_keep` (`None`: none), and counts what it did. Stops
/// after the current batch once `stop` is set. Nothing is printed.
///
/// Errors: a clean that could not run (the database unreadable), in the words of `explain`
/// (`UpkeepOptions::explain`); a failed purge is counted (`failed`, `firstFailure`), the prunes
/// stand.
pub(crate) fn run(
    engine: &Engine<OpenCodeStore>,
    (clean, archive_keep): (&Clean, Option<Duration>),
    explain: &dyn Fn(&str) -> String,
    turn: &(dyn Fn(&mut dyn FnMut()) + Sync),
    stop: &AtomicBool,
) -> Result<UpkeepCounts, String> {
    let turns = ServerTurns(turn);
    let mut report = pruning_clean::run(Mode::Apply(engine), clean, stop, &turns, &mut Silent)
        // In the words the command line would use: no raw SQLite message reaches the event.
        .map_err(|error| explain(&with_causes(&error)))?;
    if let Some(failure) = report.first_failure.take() {
        report.first_failure = Some(explain(&failure));
    }
    let mut counts = counts(&report);
    // Stopped during the give back (which leaves the pages for the next run): interrupted too.
    counts.interrupted |= stop.load(Ordering::SeqCst);
    counts.file_bytes = std::fs::metadata(engine.store().path()).map_or(0, |meta| meta.len());
    if let (Some(keep), false) = (archive_keep, counts.interrupted) {
        let now = pruning_engine::now_ms();
        let cutoff = now.saturating_sub(i64::try_from(keep.as_millis()).unwrap_or(i64::MAX));
        let mut purged = None;
        turns.take(&mut || purged = Some(engine.store().purge_archive(cutoff, now, false)));
        match purged {
            Some(Ok(report)) => counts.archive_purged = report.purged,
            Some(Err(error)) => {
                counts.failed += 1;
                counts
                    .first_failure
                    .get_or_insert_with(|| explain(&format!("purging the archive: {error}")));
            }
            None => {}
        }
    }
    Ok(counts)
}

/// An error's words followed by its causes', each after `: `.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut words = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        words.push_str(": ");
        words.push_str(&next.to_string());
        cause = next.source();
    }
    words
}

/// The server's write turn, as the clean's batches take it.
struct ServerTurns<'a>(&'a (dyn Fn(&mut dyn FnMut()) + Sync));

impl Turns for ServerTurns<'_> {
    fn take(&self, work: &mut dyn FnMut()) {
        (self.0)(work);
    }

    fn give_back_slice(&self) -> Option<Duration> {
        Some(GIVE_BACK_SLICE)
    }
}

/// What one run did, counted as `clean --json` counts it (counts of messages unless named
/// otherwise; bytes of row data).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpkeepCounts {
    /// Sessions looked at.
    pub sessions: u64,
    /// Messages pruned (their tool and reasoning parts).
    pub pruned: u64,
    /// User messages whose summary diffs' file bodies were emptied (`--diffs`).
    pub diffs: u64,
    /// Messages refused by the fence or the store (`maintenance_required`, ...): the next run
    /// tries them again when the refusal passes.
    pub blocked: u64,
    /// Of `blocked`, those refused by a condition that passes (OpenCode was using the session).
    pub retry_later: u64,
    /// Messages whose prune failed.
    pub failed: u64,
    /// Snapshots the compactions deleted.
    pub snapshots: u64,
    /// Bytes of row data removed: the parts, their snapshots, the superseded snapshots, the
    /// diffs' file bodies.
    pub bytes: u64,
    /// Bytes of free pages given back to the file system (0 on a file not switched by `vacuum
    /// --online-shrink`).
    pub bytes_given_back: u64,
    /// The database file's size after the run, bytes (its WAL not counted).
    pub file_bytes: u64,
    /// Archive entries purged by the retention (`--archive-keep`).
    pub archive_purged: u64,
    /// Whether the run stopped early (paused, or the server stopping).
    pub interrupted: bool,
    /// The first failure, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_failure: Option<String>,
}

/// A clean's report as an upkeep run counts it.
fn counts(report: &Report) -> UpkeepCounts {
    UpkeepCounts {
        sessions: report.sessions,
        pruned: report.pruned,
        diffs: report.diffs.as_ref().map_or(0, |diffs| diffs.pruned),
        blocked: report.blocked.values().sum(),
        retry_later: report.retry_later.values().sum(),
        failed: report.failed,
        snapshots: report
            .compaction
            .as_ref()
            .map_or(0, |compaction| compaction.snapshots),
        bytes: report.bytes_by_kind.total(),
        bytes_given_back: report.given_back.as_ref().map_or(0, |given| given.bytes),
        file_bytes: 0,
        archive_purged: 0,
        interrupted: report.status == Status::Interrupted,
        first_failure: report.first_failure.clone(),
    }
}
