//! `session-prune clean (SESSION... | --all) [--apply]`: prune the technical parts of every
//! completed message a policy selects, one message per transaction, in batches that share their
//! journal writes and WAL sync (docs/ARCHITECTURE.md, "Bulk work"), through the engine's one write
//! path.
//! A dry run (the default) reads only. Progress goes to stderr: a bar on a terminal, a line
//! every few seconds otherwise, nothing with `--json`. Ctrl-C stops after the current transaction.
//!
//! This module runs the phases ([`execute`]); the flags and their validation are `args.rs`, the
//! copies (compaction, diffs) `copies.rs`, the walk over the messages `walk.rs`, the report and
//! its words `report.rs`, the progress line `progress.rs`.

mod args;
mod copies;
mod progress;
mod report;
mod turns;
mod upkeep;
mod walk;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use pruning_engine::Engine;
use pruning_opencode::{spill_folder, AutoVacuum, OpenCodeStore};

use super::{open_engine_unless_busy, open_store, Archiving, Outcome};
use crate::cli::config::Config;
use crate::cli::error::ConfigError;
use crate::output;
use args::validate;
pub use args::{every_session, Args, CleanConfig};
use progress::Progress;
use report::{print_report, BeforeCompaction, FileSize, Report, Status, UntilLiveSize};
pub use turns::{AtOnce, Turns};
pub use upkeep::run_upkeep;
use walk::{Pending, Walk};

/// Validates the flags (exit 2 on bad ones), then runs the clean: the input checked, the store
/// (and with `--apply` the engine) opened, the phases run ([`execute`]), the report printed.
pub fn run(args: Args, config: &Config) -> anyhow::Result<Outcome> {
    let clean = validate(args)?;
    let stop = stop_on_ctrl_c();
    check_input(config, &clean)?;
    let Some(opened) = Opened::open(config, &clean)? else {
        return Ok(Outcome::Blocked);
    };
    let report = execute(&opened, config, &clean, &stop, &AtOnce)?;
    if clean.quiet {
        if let Some(failure) = &report.first_failure {
            eprintln!("clean: {} prune(s) failed: {failure}", report.failed);
        }
    } else if config.json {
        output::json_document(&report)?;
    } else {
        print_report(&report, &clean, &config.invocation)?;
    }
    Ok(report.outcome(clean.apply))
}

/// Runs a clean's phases over what `opened` holds: the sessions' listings counted, the copies
/// taken, the messages walked (each planned, then checked by a dry run or queued for the
/// engine's batches, each batch in its turn of `turns`), the report finished. Progress goes to
/// stderr unless `--json` or `--quiet`.
fn execute(
    opened: &Opened,
    config: &Config,
    clean: &CleanConfig,
    stop: &AtomicBool,
    turns: &dyn Turns,
) -> anyhow::Result<Report> {
    let store = opened.store();
    let sessions = Listings::count(store, clean)?;
    let mut report = Report {
        status: if clean.apply {
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
        bytes: on_disk(&config.db),
        live_bytes: live_before,
        after_vacuum: live_before,
        live_after: None,
        auto_vacuum: store.auto_vacuum()?,
    };
    let now = pruning_engine::now_ms();
    let mut until = clean
        .until_live_size
        .map(|target| UntilLiveSize::new(target, live_before));
    let compacted = take_copies(
        opened,
        clean,
        stop,
        turns,
        config.json || clean.quiet,
        &sessions.ids,
        now,
        &mut report,
        &mut until,
    )?;
    let mut walk = Walk {
        store,
        engine: opened.engine.as_deref(),
        turns,
        clean,
        stop,
        compacted: &compacted,
        now,
        until,
        report,
        progress: Progress::new(config.json || clean.quiet, sessions.total, "messages"),
        pending: Pending::default(),
        spilled: Vec::new(),
    };
    walk.all(&sessions)?;
    let Walk {
        mut report,
        until,
        spilled,
        ..
    } = walk;
    finish(
        opened,
        config,
        clean,
        (stop, turns),
        &sessions,
        live_before,
        until,
        &spilled,
        &mut report,
    )?;
    Ok(report)
}

/// A flag Ctrl-C sets: the clean stops after the current transaction. A second Ctrl-C ends
/// the process at once (exit 130).
fn stop_on_ctrl_c() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let _ = ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
    });
    stop
}

/// Bad input, before anything is opened for writing or a journal made: a file that is not
/// OpenCode's, or a session it does not hold (exit 2).
fn check_input(config: &Config, clean: &CleanConfig) -> anyhow::Result<()> {
    if clean.quiet && config.json {
        return Err(ConfigError::QuietJson.into());
    }
    let reader = open_store(config)?;
    super::require_opencode(&reader, &config.db)?;
    for id in clean.sessions.iter().flatten() {
        if !reader.session_exists(id)? {
            return Err(super::UnknownSession(id.clone()).into());
        }
    }
    if clean.until_file && reader.auto_vacuum()? != AutoVacuum::Incremental {
        return Err(ConfigError::NotShrinking(config.db.display().to_string()).into());
    }
    Ok(())
}

/// What a clean works on: with `--apply` the engine (which holds the store), for a dry run a
/// store of its own.
struct Opened {
    engine: Option<Arc<Engine<OpenCodeStore>>>,
    dry: Option<OpenCodeStore>,
}

impl Opened {
    /// Opens them; `None` when another process holds the journal (said on stderr, and with
    /// `--json` as the blocked document: exit 3, nothing done).
    fn open(config: &Config, clean: &CleanConfig) -> anyhow::Result<Option<Self>> {
        let archiving = Archiving::chosen(config, clean.archive, clean.no_archive);
        let opened = if clean.apply {
            match open_engine_unless_busy(config, archiving, super::Soundness::Required)? {
                Ok(engine) => Self {
                    engine: Some(Arc::new(engine)),
                    dry: None,
                },
                Err(detail) => {
                    if config.json {
                        output::json_document(&serde_json::json!({
                            "status": "blocked", "reason": "maintenance_required"
                        }))?;
                    }
                    if !clean.quiet {
                        eprintln!("blocked: maintenance_required: {detail}; nothing was done");
                    }
                    return Ok(None);
                }
            }
        } else {
            if let (Err(detail), false) = (super::check_binding_unless_busy(config)?, clean.quiet) {
                eprintln!(
                    "note: {detail}. The dry run goes on; --apply would be refused \
                     (maintenance_required) while the journal is held"
                );
            }
            Self {
                engine: None,
                dry: Some(Self::dry_store(config)?),
            }
        };
        let store = opened.store();
        if let (Some(cause), false) = (store.media_read_only(), clean.quiet) {
            eprintln!(
                "note: {} cannot be written ({cause}): its messages are counted as skipped \
                 (read_only), and --apply would be refused",
                config.db.display()
            );
        }
        Ok(Some(opened))
    }

    /// A dry run's store: writable where it can be, so that a write lock another process holds
    /// is reported as the apply would meet it; read-only media get a read-only dry run.
    fn dry_store(config: &Config) -> anyhow::Result<OpenCodeStore> {
        match super::open_store_for_writing(config) {
            Ok(store) => Ok(store),
            Err(error)
                if matches!(
                    error.downcast_ref::<pruning_engine::StoreError>(),
                    Some(pruning_engine::StoreError::ReadOnly { .. })
                ) =>
            {
                open_store(config)
            }
            Err(error) => Err(error),
        }
    }

    fn store(&self) -> &OpenCodeStore {
        match (&self.engine, &self.dry) {
            (Some(engine), _) => engine.store(),
            (None, Some(store)) => store,
            (None, None) => unreachable!("a clean opens the engine or a store"),
        }
    }
}

/// The sessions a clean walks and their listings, counted first: the progress line's total, the
/// kept and outside-compaction counts. The listings are kept for the walk while they hold at
/// most `listing_budget` messages; beyond that they are dropped and the walk reads each
/// session's listing again, so that memory does not grow with the database. With
/// `--until-live-size`, which orders messages across sessions, every listing is kept.
struct Listings {
    ids: Vec<String>,
    kept_listings: Vec<pruning_opencode::Listing>,
    read_again: bool,
    /// Messages the walk looks at.
    total: u64,
    /// Assistant messages left to the kept turns.
    kept: u64,
    /// Of `total`, those not older than their session's last compaction.
    outside: u64,
}

impl Listings {
    fn count(store: &OpenCodeStore, clean: &CleanConfig) -> anyhow::Result<Self> {
        let ids = match &clean.sessions {
            None => store.clean_sessions()?,
            // Each was found by `check_input`.
            Some(ids) => ids.clone(),
        };
        let mut listings = Self {
            ids: Vec::new(),
            kept_listings: Vec::new(),
            read_again: false,
            total: 0,
            kept: 0,
            outside: 0,
        };
        for id in &ids {
            let listing = Self::listing_of(store, clean, id)?;
            listings.total += listing.ids.len() as u64;
            listings.kept += listing.kept;
            listings.outside += listing.after_compaction;
            if clean.until_live_size.is_none() && listings.total > clean.listing_budget {
                listings.read_again = true;
                listings.kept_listings = Vec::new();
            }
            if !listings.read_again {
                listings.kept_listings.push(listing);
            }
        }
        listings.ids = ids;
        Ok(listings)
    }

    fn listing_of(
        store: &OpenCodeStore,
        clean: &CleanConfig,
        session_id: &str,
    ) -> Result<pruning_opencode::Listing, pruning_engine::StoreError> {
        store.clean_listing_before(
            session_id,
            clean.policy.keep_last_turns,
            clean.before_compaction,
        )
    }
}

/// The copies first: they hold what OpenCode never reads again, and once they are gone a prune
/// of parts finds fewer snapshots (in a dry run: the sessions returned say where).
#[allow(clippy::too_many_arguments)]
fn take_copies(
    opened: &Opened,
    clean: &CleanConfig,
    stop: &AtomicBool,
    turns: &dyn Turns,
    json: bool,
    session_ids: &[String],
    now: i64,
    report: &mut Report,
    until: &mut Option<UntilLiveSize>,
) -> anyhow::Result<HashSet<String>> {
    let copies = copies::Copies {
        store: opened.store(),
        engine: opened.engine.as_deref(),
        turns,
        stop,
        batch_size: clean.batch_size,
        json,
    };
    let compacted = if clean.compact {
        report.compaction = Some(Default::default());
        copies.compact(session_ids, report, until)?
    } else {
        HashSet::new()
    };
    let history = opened.store().migrated_v1()?;
    report.migrated_history = (history.sessions > 0).then_some(history);
    if clean.migrated_v1 {
        report.migrated_v1 = Some(Default::default());
        copies.remove_migrated(session_ids, report, until)?;
    }
    if shell_in_policy(&clean.policy) {
        copies.empty_shell_outputs(
            session_ids,
            clean.policy.keep_last_turns,
            clean.policy.older_than,
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
fn shell_in_policy(policy: &pruning_opencode::CleanPolicy) -> bool {
    let named = |list: &[String]| list.iter().any(|tool| tool == "shell" || tool == "bash");
    policy.tools.as_deref().is_none_or(named) && !named(&policy.skip_tools)
}

/// After the walk: the figures measured at the end (write lock, archive bytes, the file after
/// the clean, the size reached), an interruption, and the spill files.
#[allow(clippy::too_many_arguments)]
fn finish(
    opened: &Opened,
    config: &Config,
    clean: &CleanConfig,
    (stop, turns): (&AtomicBool, &dyn Turns),
    sessions: &Listings,
    live_before: u64,
    until: Option<UntilLiveSize>,
    spilled: &[String],
    report: &mut Report,
) -> anyhow::Result<()> {
    let store = opened.store();
    if let Some(engine) = opened
        .engine
        .as_ref()
        .filter(|engine| engine.store().archives_prunes())
    {
        report.archive_bytes = Some(engine.store().archived_bytes());
    }
    report.file.after_vacuum = live_before.saturating_sub(report.bytes_by_kind.total());
    if clean.apply {
        report.file.live_after = Some(store.vacuum_needs()?.live_bytes);
    }
    if stop.load(Ordering::SeqCst) {
        report.status = Status::Interrupted;
        report.not_reached = sessions.total.saturating_sub(report.considered);
    }
    if clean.spill_files && report.status != Status::Interrupted {
        // The apply removes every spill file no row names any more; its dry run counts them:
        // those no row names now, and those only the pruned parts name.
        let folder = spill_folder(&config.db);
        let (done, doing) = if clean.apply {
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
    if clean.apply
        && report.status != Status::Interrupted
        && report.file.auto_vacuum == AutoVacuum::Incremental
    {
        // The pages the prunes freed go back to the disk while OpenCode runs; the prunes stand
        // whatever comes of it.
        match turns::give_back(store, turns, stop) {
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
    if let Some(failure) = report.first_failure.take() {
        report.first_failure = Some(super::diagnose::explain(&failure, config));
    }
    report.count_retry_later();
    Ok(())
}

/// Bytes of the database file and its WAL on disk (0 for one that cannot be read).
fn on_disk(database: &std::path::Path) -> u64 {
    let mut wal = database.as_os_str().to_owned();
    wal.push("-wal");
    [database.as_os_str(), wal.as_os_str()]
        .iter()
        .map(|path| std::fs::metadata(path).map_or(0, |meta| meta.len()))
        .sum()
}
