//! [`run`]: a clean's phases in their order. The copies first (each session's superseded
//! snapshots, the migrated 1.x rows, the shell output, the diffs), then the messages' technical
//! parts oldest first, then the spill files and the give back; each phase plans, and the mode
//! answers (docs/ARCHITECTURE.md, "The clean").

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use pruning_opencode::{spill_folder, AutoVacuum, CleanPolicy};

use crate::copies::Copies;
use crate::error::CleanError;
use crate::listings::Listings;
use crate::mode::{Batch, Mode};
use crate::progress::Progress;
use crate::report::{BeforeCompaction, FileSize, Report, Status, UntilLiveSize};
use crate::turns::{give_back, Turns};
use crate::walk::Walk;
use crate::Clean;

/// Runs `clean` in `mode`: the sessions' listings counted, the copies taken, the messages
/// walked (each planned, then answered by its dry run or applied in the engine's batches, each
/// batch in its turn of `turns`), the spill files and the give back, the figures measured at
/// the end. Stops after the current transaction once `stop` is set (the report says
/// `interrupted`); tells `progress` how far it is. The report's `firstFailure` is the failure's
/// own words: a caller that words causes for people replaces it.
///
/// A prune that fails is counted (`failed`, `firstFailure`), and the clean goes on; so does a
/// failure to remove spill files or to give pages back (the prunes stand).
///
/// Errors: [`CleanError`] when the database cannot be read (the prunes committed before stand).
pub fn run(
    mode: Mode<'_>,
    clean: &Clean,
    stop: &AtomicBool,
    turns: &dyn Turns,
    progress: &mut dyn Progress,
) -> Result<Report, CleanError> {
    let store = mode.store();
    let sessions = Listings::count(store, clean)?;
    let mut report = Report {
        status: if mode.applies() {
            Status::Cleaned
        } else {
            Status::DryRun
        },
        sessions: sessions.ids.len() as u64,
        kept_recent: sessions.kept,
        before_compaction: clean.before_compaction.then_some(BeforeCompaction {
            qualified: sessions.total,
            outside: sessions.outside,
        }),
        ..Report::default()
    };
    report.orphan_parts = sessions
        .ids
        .iter()
        .map(|id| store.orphan_parts(id))
        .sum::<Result<u64, _>>()?;
    let live_before = store.vacuum_needs()?.live_bytes;
    report.file = FileSize {
        bytes: on_disk(store.path()),
        live_bytes: live_before,
        after_vacuum: live_before,
        live_after: None,
        auto_vacuum: store.auto_vacuum()?,
    };
    let now = pruning_engine::now_ms();
    let mut until = clean
        .until_live_size
        .map(|target| UntilLiveSize::new(target, live_before));
    let mut copies = Copies {
        mode,
        turns,
        stop,
        batch_size: clean.batch_size,
        progress: &mut *progress,
    };
    let compacted = take_copies(
        &mut copies,
        clean,
        &sessions.ids,
        now,
        &mut report,
        &mut until,
    )?;
    let mut walk = Walk {
        batch: Batch::new(mode, turns, stop, clean.batch_size),
        clean,
        stop,
        compacted: &compacted,
        now,
        until,
        report,
        progress,
        spilled: Vec::new(),
    };
    walk.all(&sessions)?;
    let Walk {
        mut report,
        until,
        spilled,
        ..
    } = walk;
    let end = End {
        mode,
        clean,
        stop,
        turns,
    };
    end.finish(&sessions, live_before, until, &spilled, &mut report)?;
    Ok(report)
}

/// The copies first: they hold what OpenCode never reads again, and once they are gone a prune
/// of parts finds fewer snapshots (in a dry run: the sessions returned say where).
fn take_copies(
    copies: &mut Copies<'_>,
    clean: &Clean,
    session_ids: &[String],
    now: i64,
    report: &mut Report,
    until: &mut Option<UntilLiveSize>,
) -> Result<HashSet<String>, CleanError> {
    let compacted = if clean.compact {
        report.compaction = Some(Default::default());
        copies.compact(session_ids, report, until)?
    } else {
        HashSet::new()
    };
    let history = copies.mode.store().migrated_v1()?;
    report.migrated_history = (history.sessions > 0).then_some(history);
    if clean.migrated_v1 {
        report.migrated_v1 = Some(Default::default());
        copies.remove_migrated(session_ids, report, until)?;
    }
    if shell_in_policy(&clean.policy) {
        copies.empty_shell_outputs(
            session_ids,
            (clean.policy.keep_last_turns, clean.policy.older_than),
            now,
            report,
            until,
        )?;
    }
    if clean.diffs {
        report.diffs = Some(Default::default());
        copies.empty_diffs(session_ids, &clean.policy, now, report, until)?;
    }
    Ok(compacted)
}

/// Whether the policy takes the output of the commands a user ran in OpenCode 2's shell: unless
/// `--tools` names tools the shell is not among, or `--skip-tools` names it.
fn shell_in_policy(policy: &CleanPolicy) -> bool {
    let named = |list: &[String]| list.iter().any(|tool| tool == "shell" || tool == "bash");
    policy.tools.as_deref().is_none_or(named) && !named(&policy.skip_tools)
}

/// What the end of a clean works with.
struct End<'a> {
    mode: Mode<'a>,
    clean: &'a Clean,
    stop: &'a AtomicBool,
    turns: &'a dyn Turns,
}

impl End<'_> {
    /// After the walk: the figures measured at the end (write lock, archive bytes, the file
    /// after the clean, the size reached), an interruption, the spill files, the give back.
    ///
    /// Errors: the store's reads of the file's size; [`CleanError::EngineNotOpened`].
    fn finish(
        &self,
        sessions: &Listings,
        live_before: u64,
        until: Option<UntilLiveSize>,
        spilled: &[String],
        report: &mut Report,
    ) -> Result<(), CleanError> {
        let (clean, stop) = (self.clean, self.stop);
        if let Mode::Apply(writer) = self.mode {
            // Opened even when nothing was written: its journal recovered and the store's
            // integrity check answered, as before any write.
            writer.open()?;
        }
        let store = self.mode.store();
        let applies = self.mode.applies();
        if applies && store.archives_prunes() {
            report.archive_bytes = Some(store.archived_bytes());
        }
        report.file.after_vacuum = live_before.saturating_sub(report.bytes_by_kind.total());
        if applies {
            report.file.live_after = Some(store.vacuum_needs()?.live_bytes);
        }
        if stop.load(Ordering::SeqCst) {
            report.status = Status::Interrupted;
            report.not_reached = sessions.total.saturating_sub(report.considered);
        }
        if clean.spill_files && report.status != Status::Interrupted {
            // The apply removes every spill file no row names any more; its dry run counts
            // them: those no row names now, and those only the pruned parts name.
            let folder = spill_folder(store.path());
            let (done, doing) = if applies {
                (store.remove_unreferenced_spill_files(&folder), "removing")
            } else {
                (store.spill_files_to_remove(&folder, spilled), "reading")
            };
            match done {
                Ok((files, bytes)) => {
                    report.spill_files_removed = files;
                    report.spill_bytes_removed = bytes;
                }
                // The prunes stand; the report says what went wrong with the files.
                Err(error) => {
                    report.failed += 1;
                    report.first_failure.get_or_insert_with(|| {
                        format!("{doing} spill files in {}: {error}", folder.display())
                    });
                }
            }
        }
        if applies
            && report.status != Status::Interrupted
            && report.file.auto_vacuum == AutoVacuum::Incremental
        {
            // The pages the prunes freed go back to the disk while OpenCode runs; the prunes
            // stand whatever comes of it.
            match give_back(store, self.turns, stop) {
                Ok(given) => report.given_back = Some(given),
                Err(error) => {
                    report.failed += 1;
                    report
                        .first_failure
                        .get_or_insert_with(|| format!("giving free pages back: {error}"));
                }
            }
        }
        if let Some(mut until) = until {
            if clean.until_file {
                // The file after its pages were given back.
                until.live_after = report
                    .given_back
                    .as_ref()
                    .map(|given| given.file_bytes_after);
                report.until_file_size = Some(until);
            } else {
                until.live_after = report.file.live_after;
                report.until_live_size = Some(until);
            }
        }
        // Measured last: the give back's steps hold the lock too.
        if clean.timings {
            report.write_lock = Some(store.write_lock());
        }
        report.count_retry_later();
        Ok(())
    }
}

/// Bytes of the database file and its WAL on disk (0 for one that cannot be read).
fn on_disk(database: &Path) -> u64 {
    let mut wal = database.as_os_str().to_owned();
    wal.push("-wal");
    [database.as_os_str(), wal.as_os_str()]
        .iter()
        .map(|path| std::fs::metadata(path).map_or(0, |meta| meta.len()))
        .sum()
}
