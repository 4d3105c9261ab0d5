//! One run of `serve --auto-clean`: the phases of `clean --all --apply` (with the policy flags
//! `serve` was given) through the server's engine, each batch in the server's write turn, then
//! the archive's retention (`--archive-keep`); counted as the server announces a run.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use pruning_engine::Engine;
use pruning_opencode::OpenCodeStore;
use pruning_server::UpkeepCounts;

use super::report::{Report, Status};
use super::turns::Turns;
use super::{execute, CleanConfig, Opened};
use crate::cli::config::Config;
use crate::commands::diagnose::explain;

/// Runs the clean `clean` (a `clean --all --apply`) through `engine`, its batches in `turns`,
/// then purges the archive entries older than `archive_keep`, and counts what it did. Nothing is
/// printed.
///
/// Errors: a clean that could not run (the database unreadable), in words; a failed purge is
/// counted (`failed`, `firstFailure`), the prunes stand.
pub fn run_upkeep(
    engine: &Arc<Engine<OpenCodeStore>>,
    config: &Config,
    clean: &CleanConfig,
    archive_keep: Option<Duration>,
    stop: &AtomicBool,
    turns: &dyn Turns,
) -> Result<UpkeepCounts, String> {
    let opened = Opened {
        engine: Some(Arc::clone(engine)),
        dry: None,
    };
    let report =
        // In the words the command line would use: no raw SQLite message reaches the event.
        execute(&opened, config, clean, stop, turns).map_err(|error| explain(&format!("{error:#}"), config))?;
    let mut counts = counts(&report);
    // Stopped during the give back (which leaves the pages for the next run): interrupted too.
    counts.interrupted |= stop.load(std::sync::atomic::Ordering::SeqCst);
    counts.file_bytes = std::fs::metadata(&config.db).map_or(0, |meta| meta.len());
    if let (Some(keep), false) = (archive_keep, counts.interrupted) {
        let now = pruning_engine::now_ms();
        let cutoff = now.saturating_sub(i64::try_from(keep.as_millis()).unwrap_or(i64::MAX));
        let mut purged = None;
        turns.take(&mut || purged = Some(engine.store().purge_archive(cutoff, now, false)));
        match purged {
            Some(Ok(report)) => counts.archive_purged = report.purged,
            Some(Err(error)) => {
                counts.failed += 1;
                counts.first_failure.get_or_insert_with(|| {
                    explain(&format!("purging the archive: {error}"), config)
                });
            }
            None => {}
        }
    }
    Ok(counts)
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
