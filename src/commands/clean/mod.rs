//! `session-prune clean (SESSION... | --all) [--apply]`: prune the technical parts of every
//! completed message a policy selects, one message per transaction, in batches that share their
//! journal writes and WAL sync (docs/ARCHITECTURE.md, "Bulk work"), through the engine's one write
//! path.
//! A dry run (the default) reads only. Progress goes to stderr: a bar on a terminal, a line
//! every few seconds otherwise, nothing with `--json`. Ctrl-C stops after the current transaction.

mod copies;
mod progress;
mod report;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pruning_adapters::opencode::{spill_folder, CleanPolicy, OpenCodeStore, Planned};
use pruning_engine::{DryRun, Engine, PreviewRequest, PruneRequest, Selection};

use super::{open_engine_unless_busy, open_store, Outcome};
use crate::cli::config::Config;
use crate::cli::duration::{duration_flag, ANY_DURATION};
use crate::cli::error::ConfigError;
use crate::output;
use progress::Progress;
use report::{dry, print_report, tally, BeforeCompaction, FileSize, Report, UntilLiveSize};

/// `clean` arguments.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["sessions", "all"])))]
pub struct Args {
    /// Session ids (ses_...).
    sessions: Vec<String>,
    /// Every session of the database.
    #[arg(long)]
    all: bool,
    /// Do it (without this flag, only report what would be removed).
    #[arg(long)]
    apply: bool,
    /// Only report what would be removed: what `clean` does without `--apply` (accepted for
    /// symmetry with `prune --dry-run`).
    #[arg(long, conflicts_with = "apply")]
    dry_run: bool,
    /// Also report how long the clean held SQLite's write lock, which OpenCode waits up to 5 s
    /// for (`writeLock`: transactions, p50, p99 and longest in ms). Measured, so it differs
    /// from run to run; without it the report is the same for the same database.
    #[arg(long)]
    timings: bool,
    /// Only messages completed at least this long ago: seconds (604800) or a duration (7d,
    /// 12h, 30m).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    older_than: Option<String>,
    /// Never touch the last N user turns of a session (OpenCode's own prune keeps 2).
    #[arg(long, default_value_t = 2, value_name = "N")]
    keep_last_turns: u32,
    /// Of tool parts, only those of these tools (comma-separated tool names; reasoning parts
    /// are governed by --no-reasoning).
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    tools: Option<Vec<String>>,
    /// Never tool parts of these tools (default: skill, as OpenCode keeps it; pass an empty
    /// value to skip none).
    #[arg(
        long,
        value_name = "A,B",
        value_delimiter = ',',
        default_value = "skill"
    )]
    skip_tools: Vec<String>,
    /// Only parts of at least this many bytes.
    #[arg(long, default_value_t = 0, value_name = "BYTES")]
    min_bytes: u64,
    /// Leave reasoning parts alone.
    #[arg(long)]
    no_reasoning: bool,
    /// Only messages older than the session's last completed compaction: OpenCode no longer
    /// sends them to the model, so pruning them cannot change its next request. A session
    /// without a compaction has none.
    #[arg(long)]
    before_compaction: bool,
    /// Prune the oldest completed messages first, across sessions, until the database's live
    /// data (the pages in use: what `vacuum` would leave) is at most SIZE (2GB, 500MiB, or
    /// bytes); every other policy still applies.
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
    until_live_size: Option<String>,
    /// Leave the event log as it is: by default each session's superseded snapshots (full copies
    /// of a part, message or session that a newer snapshot of the same one replaces; OpenCode
    /// never reads them again) are deleted first, with a receipt, as a prune is.
    #[arg(long)]
    no_compact: bool,
    /// Also empty the file bodies (`patch`, and `before`/`after` in older releases) in the
    /// summary diffs of the user messages before the kept turns, keeping their file names,
    /// counts and status: OpenCode rewrites the whole list after every step of a turn.
    #[arg(long)]
    diffs: bool,
    /// Also remove the spill files (`<data>/tool-output/tool_*`) that no remaining row names: those
    /// of the pruned tool parts, and any an earlier clean or a killed run left.
    #[arg(long)]
    include_spill_files: bool,
    /// Keep the rows each prune removes in the archive beside the database
    /// (`<database>.prune-archive`), durable before the prunes commit; the report gives the
    /// archive bytes written beside the bytes freed.
    #[arg(long, requires = "apply")]
    archive: bool,
    /// Messages per batch: their intents share one journal write, their commits one WAL sync.
    #[arg(long, default_value_t = 256, value_name = "N")]
    batch_size: usize,
    /// Wait this long after each batch (for testing interruption).
    #[arg(long, hide = true, default_value_t = 0, value_name = "MS")]
    pause_ms: u64,
    /// Most messages whose listings are kept from the count to the walk (for testing the walk
    /// that reads them again).
    #[arg(long, hide = true, default_value_t = MAX_KEPT_IDS, value_name = "N")]
    listing_budget: u64,
}

/// `text` as a number of bytes, read by `bytesize` (`2GB`, `1.1GiB`, `500 MiB`, `1000000`),
/// rounded down to a whole byte. A fraction of a plain byte (`1.5`, `1.5B`) or an amount beyond
/// 2^64 - 1 is an error, not rounded or capped.
fn whole_bytes(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let unreadable = |_| "not a size".to_string();
    let size: bytesize::ByteSize = text.parse().map_err(unreadable)?;
    // bytesize rounds and saturates: the amount it read, computed again, tells.
    let digits = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let unit = format!("1{}", unit.trim())
        .parse::<bytesize::ByteSize>()
        .map_err(unreadable)?
        .as_u64();
    let number = number
        .parse::<f64>()
        .map_err(|_| "not a size".to_string())?;
    if unit == 1 && number.fract() != 0.0 {
        return Err(format!("{number} is not a whole number of bytes"));
    }
    if number * unit as f64 >= u64::MAX as f64 {
        return Err("larger than 2^64 - 1 bytes".into());
    }
    Ok(size.as_u64())
}

/// A validated `clean`.
#[derive(Debug, Clone)]
pub struct CleanConfig {
    /// The sessions, or `None` for every session.
    pub sessions: Option<Vec<String>>,
    /// Write (else: a dry run).
    pub apply: bool,
    /// What to prune.
    pub policy: CleanPolicy,
    /// Remove unreferenced spill files of pruned parts.
    pub spill_files: bool,
    /// Compact each session's event log first (`--no-compact` turns it off).
    pub compact: bool,
    /// Empty the file bodies of the summary diffs before the kept turns (`--diffs`).
    pub diffs: bool,
    /// Only messages older than each session's last completed compaction.
    pub before_compaction: bool,
    /// Oldest first across sessions, until the live data is at most this many bytes.
    pub until_live_size: Option<u64>,
    /// Archive what each prune removes (`--archive`).
    pub archive: bool,
    /// Report the write lock's holds (`--timings`).
    pub timings: bool,
    /// Messages per batch (1 or more).
    pub batch_size: usize,
    /// Wait after each batch (a test seam for interruption).
    pub pause: Duration,
    /// Most messages whose listings are kept from the count to the walk ([`MAX_KEPT_IDS`]
    /// unless a test sets it).
    pub listing_budget: u64,
}

fn validate(args: Args) -> Result<CleanConfig, ConfigError> {
    let older_than = match args.older_than {
        None => None,
        Some(text) => Some(duration_flag("--older-than", &text, ANY_DURATION)?),
    };
    if args.batch_size == 0 {
        return Err(ConfigError::BatchSize);
    }
    if args.include_spill_files && args.archive {
        return Err(ConfigError::SpillFilesWithArchive);
    }
    let names = |list: Vec<String>| -> Vec<String> {
        list.into_iter()
            .map(|name| name.trim().to_string())
            .filter(|name| !name.is_empty())
            .collect()
    };
    for session in &args.sessions {
        PreviewRequest::new(session.clone(), "m".into())?;
    }
    let mut sessions = args.sessions;
    let mut seen = std::collections::HashSet::new();
    sessions.retain(|id| seen.insert(id.clone()));
    Ok(CleanConfig {
        sessions: (!args.all).then_some(sessions),
        apply: args.apply,
        timings: args.timings,
        policy: CleanPolicy {
            older_than,
            keep_last_turns: args.keep_last_turns,
            tools: args.tools.map(names),
            skip_tools: names(args.skip_tools),
            min_bytes: args.min_bytes,
            reasoning: !args.no_reasoning,
        },
        spill_files: args.include_spill_files,
        compact: !args.no_compact,
        diffs: args.diffs,
        before_compaction: args.before_compaction,
        until_live_size: match args.until_live_size {
            None => None,
            Some(text) => Some(whole_bytes(&text).map_err(|problem| ConfigError::Size {
                flag: "--until-live-size",
                value: text.clone(),
                problem,
            })?),
        },
        archive: args.archive,
        batch_size: args.batch_size,
        pause: Duration::from_millis(args.pause_ms),
        listing_budget: args.listing_budget,
    })
}

/// Validates the flags (exit 2 on bad ones), then runs the clean.
pub fn run(args: Args, config: &Config) -> anyhow::Result<Outcome> {
    let clean = validate(args)?;
    execute(config, &clean)
}

/// Runs a clean.
fn execute(config: &Config, clean: &CleanConfig) -> anyhow::Result<Outcome> {
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        // A second Ctrl-C ends the process at once.
        let _ = ctrlc::set_handler(move || {
            if stop.swap(true, Ordering::SeqCst) {
                std::process::exit(130);
            }
        });
    }
    // Nothing is opened for writing, and no journal made, beside a file that is not OpenCode's
    // or for a session it does not hold (bad input: exit 2).
    {
        let reader = open_store(config)?;
        super::require_opencode(&reader, &config.db)?;
        for id in clean.sessions.iter().flatten() {
            if !reader.session_exists(id)? {
                return Err(super::UnknownSession(id.clone()).into());
            }
        }
    }
    let engine = if clean.apply {
        match open_engine_unless_busy(config, clean.archive.into(), super::Soundness::Required)? {
            Ok(engine) => Some(engine),
            Err(detail) => {
                if config.json {
                    output::json_document(&serde_json::json!({
                        "status": "blocked", "reason": "maintenance_required"
                    }))?;
                }
                eprintln!("blocked: maintenance_required: {detail}; nothing was done");
                return Ok(Outcome::Blocked);
            }
        }
    } else {
        if let Err(detail) = super::check_binding_unless_busy(config)? {
            eprintln!(
                "note: {detail}. The dry run goes on; --apply would be refused \
                 (maintenance_required) while the journal is held"
            );
        }
        None
    };
    let own_store;
    let store: &OpenCodeStore = match &engine {
        Some(engine) => engine.store(),
        None => {
            // Writable where it can be, so that a write lock another process holds is reported
            // as the apply would meet it; read-only media get a read-only dry run.
            own_store = match super::open_store_for_writing(config) {
                Ok(store) => store,
                Err(error)
                    if matches!(
                        error.downcast_ref::<pruning_engine::StoreError>(),
                        Some(pruning_engine::StoreError::ReadOnly { .. })
                    ) =>
                {
                    open_store(config)?
                }
                Err(error) => return Err(error),
            };
            &own_store
        }
    };
    if let Some(cause) = store.media_read_only() {
        eprintln!(
            "note: {} cannot be written ({cause}): its messages are counted as skipped \
             (read_only), and --apply would be refused",
            config.db.display()
        );
    }
    let session_ids = match &clean.sessions {
        None => store.clean_sessions()?,
        // Each was found above.
        Some(ids) => ids.clone(),
    };
    // The totals first (the progress line's, the kept and outside-compaction counts). The
    // listings are kept for the walk while they hold at most `listing_budget` messages; beyond
    // that they are dropped and the walk reads each session's listing again, so that memory
    // does not grow with the database. With --until-live-size, which orders messages across
    // sessions, every listing is kept.
    let listing_of = |id: &str| {
        store.clean_listing_before(id, clean.policy.keep_last_turns, clean.before_compaction)
    };
    let (mut total, mut kept, mut outside) = (0u64, 0u64, 0u64);
    let mut kept_listings = Vec::new();
    let mut read_again = false;
    for id in &session_ids {
        let listing = listing_of(id)?;
        total += listing.ids.len() as u64;
        kept += listing.kept;
        outside += listing.after_compaction;
        if clean.until_live_size.is_none() && total > clean.listing_budget {
            read_again = true;
            kept_listings = Vec::new();
        }
        if !read_again {
            kept_listings.push(listing);
        }
    }
    let mut report = Report {
        status: if clean.apply { "cleaned" } else { "dry-run" },
        sessions: session_ids.len() as u64,
        kept_recent: kept,
        before_compaction: clean.before_compaction.then_some(BeforeCompaction {
            qualified: total,
            outside,
        }),
        ..Report::default()
    };
    report.orphan_parts = session_ids
        .iter()
        .map(|id| store.orphan_parts(id))
        .sum::<Result<u64, _>>()?;
    let live_before = store.vacuum_needs()?.live_bytes;
    report.file = FileSize {
        bytes: on_disk(&config.db),
        live_bytes: live_before,
        after_vacuum: live_before,
        live_after: None,
    };
    let now = pruning_engine::now_ms();
    let mut until = clean
        .until_live_size
        .map(|target| UntilLiveSize::new(target, live_before));
    // The copies first: they hold what OpenCode never reads again, and once they are gone a
    // prune of parts finds fewer snapshots (in a dry run: `compacted` says where).
    let copies = copies::Copies {
        store,
        engine: engine.as_ref(),
        stop: &stop,
        batch_size: clean.batch_size,
        json: config.json,
    };
    let compacted = if clean.compact {
        report.compaction = Some(Default::default());
        copies.compact(&session_ids, &mut report, &mut until)?
    } else {
        HashSet::new()
    };
    if clean.diffs {
        report.diffs = Some(Default::default());
        copies.empty_diffs(
            &session_ids,
            clean.policy.keep_last_turns,
            clean.policy.older_than,
            now,
            &mut report,
            &mut until,
        )?;
    }
    let mut progress = Progress::new(config.json, total, "messages");
    // Batches fill across sessions: a database of many small sessions still gets batches of
    // `batch_size` messages.
    let mut pending = Pending::default();
    // The spill files the dry run's prunes point at, once per part.
    let mut spilled: Vec<String> = Vec::new();
    // One message of the walk; `false` ends the walk (stopped, or the size reached).
    let mut visit = |session_id: &str, message_id: &str| -> anyhow::Result<bool> {
        if stop.load(Ordering::SeqCst) {
            return Ok(false);
        }
        if until.as_ref().is_some_and(UntilLiveSize::reached) {
            return Ok(false);
        }
        report.considered += 1;
        match store.clean_plan(session_id, message_id, &clean.policy, now)? {
            Planned::Nothing => report.nothing_to_prune += 1,
            Planned::Skipped { reason, .. } => {
                *report.skipped.entry(reason.as_str()).or_default() += 1;
            }
            Planned::Prune {
                request,
                spill_files,
                ..
            } => {
                // A dry run checks what the prune would check, in a transaction it rolls
                // back. With --until-live-size the apply runs it too: only a prune that
                // would commit counts toward the size, in both.
                // In a dry run the session's compaction has not deleted the superseded
                // snapshots of these parts yet; with --apply it has.
                let after_compaction = engine.is_none() && compacted.contains(session_id);
                let checked = if engine.is_none() || until.is_some() {
                    let found = pruning_engine::dry_run(store, &request)?;
                    let freed = match &found {
                        Ok(DryRun::Plan { plan, .. }) => Some(store.freed(
                            session_id,
                            message_id,
                            &plan.remove,
                            plan.bytes,
                            after_compaction,
                        )?),
                        _ => None,
                    };
                    if let (Some(until), Some(freed)) = (&mut until, &freed) {
                        until.planned(freed.total());
                    }
                    Some((found, freed))
                } else {
                    None
                };
                if engine.is_some() {
                    // The snapshots' bytes, to tell them from the part rows in the receipt's
                    // count.
                    let snapshots = match &checked {
                        Some((_, Some(freed))) => freed.snapshots,
                        _ => {
                            let indexes = request_indexes(&request);
                            store
                                .freed(session_id, message_id, &indexes, 0, false)?
                                .snapshots
                        }
                    };
                    pending.requests.push(request);
                    pending.snapshot_bytes.push(snapshots);
                } else if let Some((found, freed)) = checked {
                    if let Some(freed) = freed {
                        report.bytes += freed.total();
                        report.bytes_by_kind.parts += freed.parts;
                        report.bytes_by_kind.part_snapshots += freed.snapshots;
                        spilled.extend(spill_files);
                    }
                    dry(&mut report, found);
                }
            }
        }
        if let Some(engine) = &engine {
            if pending.requests.len() >= clean.batch_size {
                pending.apply(engine, &stop, &mut report);
                if !clean.pause.is_zero() {
                    std::thread::sleep(clean.pause);
                }
            }
        }
        progress.update(report.considered, &report);
        Ok(true)
    };
    if clean.until_live_size.is_some() {
        // Oldest first across sessions; a time that is not a number sorts last.
        let mut order: Vec<(Option<i64>, &str, &str)> = session_ids
            .iter()
            .zip(&kept_listings)
            .flat_map(|(session_id, listing)| {
                let times = listing.times.iter().copied();
                times
                    .zip(&listing.ids)
                    .map(move |(time, id)| (time, session_id.as_str(), id.as_str()))
            })
            .collect();
        order.sort_by_key(|&(time, session, id)| (time.is_none(), time, session, id));
        for (_, session_id, message_id) in order {
            if !visit(session_id, message_id)? {
                break;
            }
        }
    } else if read_again {
        // Session by session, each listing read again.
        'sessions: for session_id in &session_ids {
            for message_id in &listing_of(session_id)?.ids {
                if !visit(session_id, message_id)? {
                    break 'sessions;
                }
            }
        }
    } else {
        // Session by session.
        'kept: for (session_id, listing) in session_ids.iter().zip(&kept_listings) {
            for message_id in &listing.ids {
                if !visit(session_id, message_id)? {
                    break 'kept;
                }
            }
        }
    }
    if let Some(engine) = &engine {
        if stop.load(Ordering::SeqCst) {
            // Planned, never applied: not reached.
            report.considered -= pending.requests.len() as u64;
        } else {
            pending.apply(engine, &stop, &mut report);
        }
    }
    progress.finish();
    if clean.timings {
        report.write_lock = Some(store.write_lock());
    }
    if clean.archive {
        report.archive_bytes = engine
            .as_ref()
            .map(|engine| engine.store().archived_bytes());
    }
    report.file.after_vacuum = live_before.saturating_sub(report.bytes_by_kind.total());
    if clean.apply {
        report.file.live_after = Some(store.vacuum_needs()?.live_bytes);
    }
    if let Some(mut until) = until {
        until.live_after = report.file.live_after;
        report.until_live_size = Some(until);
    }
    if stop.load(Ordering::SeqCst) {
        report.status = "interrupted";
        report.not_reached = total.saturating_sub(report.considered);
    }
    if clean.spill_files && report.status != "interrupted" {
        // The apply removes every spill file no row names any more; its dry run counts them:
        // those no row names now, and those only the pruned parts name.
        let folder = spill_folder(&config.db);
        let (done, doing) = if clean.apply {
            (store.remove_unreferenced_spill_files(&folder), "removing")
        } else {
            (store.spill_files_to_remove(&folder, &spilled), "reading")
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
    if let Some(failure) = report.first_failure.take() {
        report.first_failure = Some(super::diagnose::explain(&failure, config));
    }
    report.count_retry_later();
    if config.json {
        output::json_document(&report)?;
    } else {
        print_report(&report, clean, &config.invocation)?;
    }
    Ok(if report.status == "interrupted" {
        Outcome::Interrupted
    } else if report.failed > 0 || report.unjournaled > 0 {
        Outcome::Failed
    } else if clean.apply && !report.retry_later.is_empty() {
        // A script (`clean --apply && vacuum`) learns that part of the work waits for a run
        // to come: exit 3.
        Outcome::Blocked
    } else {
        Outcome::Done
    })
}

/// Planned prunes waiting for their batch.
#[derive(Debug, Default)]
struct Pending {
    requests: Vec<PruneRequest>,
    /// Of each request, the bytes of the part snapshots it removes (the rest of its receipt's
    /// count is the part rows', or a V2 row's).
    snapshot_bytes: Vec<u64>,
}

impl Pending {
    /// Applies the batch through the engine's group commit and counts the outcomes.
    fn apply(&mut self, engine: &Engine<OpenCodeStore>, stop: &AtomicBool, report: &mut Report) {
        let stopped = || stop.load(Ordering::SeqCst);
        let results = engine.prune_many_until(&self.requests, &stopped);
        for (result, snapshots) in results.into_iter().zip(&self.snapshot_bytes) {
            tally(report, result, *snapshots);
        }
        self.requests.clear();
        self.snapshot_bytes.clear();
    }
}

/// The indexes a prune of parts selects (none for any other prune).
fn request_indexes(request: &PruneRequest) -> Vec<usize> {
    match &request.selection {
        Selection::Indexes(indexes) => indexes.iter().map(|&i| i as usize).collect(),
        _ => Vec::new(),
    }
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

/// Most messages whose listings a clean keeps from its count to its walk (about 10 MB of ids);
/// a larger clean reads each session's listing again as it walks it.
const MAX_KEPT_IDS: u64 = 100_000;
