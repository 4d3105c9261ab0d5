//! `session-prune clean (SESSION... | --all) [--apply]`: prune the technical parts of every
//! completed message a policy selects, one message per transaction, in batches that share their
//! journal writes and WAL sync (docs/ARCHITECTURE.md, "Bulk work"), through the engine's one write
//! path.
//! A dry run (the default) reads only. Progress goes to stderr: a bar on a terminal, a line
//! every few seconds otherwise, nothing with `--json`. Ctrl-C stops after the current message.

use std::collections::{BTreeMap, BTreeSet};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use pruning_adapters::opencode::{spill_folder, CleanPolicy, OpenCodeStore, Planned};
use pruning_engine::{
    AbandonedRun, DryRun, Engine, EngineError, PreviewRequest, PruneRequest, PruneResult,
};
use serde::Serialize;

use super::{open_engine_unless_busy, open_store, Outcome};
use crate::cli::config::Config;
use crate::cli::duration::{duration_flag, ANY_DURATION};
use crate::cli::error::ConfigError;
use crate::output;
use crate::output::say;

/// The final report (`--json`), counts of messages unless named otherwise.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    /// `cleaned`, `dry-run` or `interrupted`.
    status: &'static str,
    /// Sessions looked at.
    sessions: u64,
    /// Messages the policy looked at (assistant messages before the kept turns).
    considered: u64,
    /// Assistant messages in the last `--keep-last-turns` user turns, not looked at.
    kept_recent: u64,
    /// Messages pruned (with `--apply`) or that would be pruned.
    pruned: u64,
    /// Messages an identical earlier request had pruned (the same content and selection, as
    /// after an interrupted run): answered from the receipt, nothing written.
    already_pruned: u64,
    /// Messages with nothing the policy selects (a message pruned before has nothing left).
    nothing_to_prune: u64,
    /// Parts removed (or that would be).
    parts: u64,
    /// Bytes of row data removed (or, in a dry run, that would be): the part rows and their
    /// event snapshots, as the receipts count them.
    bytes: u64,
    /// With `--archive`: bytes written to the prune archive for the prunes that committed
    /// (their rows, compressed).
    #[serde(skip_serializing_if = "Option::is_none")]
    archive_bytes: Option<u64>,
    /// Messages left alone, by reason (`oversize`, `malformed`, `incomplete`, ...).
    skipped: BTreeMap<&'static str, u64>,
    /// Messages the prune refused, by contract reason (`maintenance_required`, `conflict`, ...).
    blocked: BTreeMap<&'static str, u64>,
    /// Messages whose prune failed (storage or journal errors): nothing of them was written.
    failed: u64,
    /// Of `pruned`, messages committed in the database (with their receipts) whose commit
    /// marks could not be journaled: the next run's recovery journals them and announces their
    /// events. Present only when not 0.
    #[serde(skip_serializing_if = "is_zero")]
    unjournaled: u64,
    /// The first failure, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    first_failure: Option<String>,
    /// Messages not reached because the clean was interrupted.
    not_reached: u64,
    /// Part rows of the sessions whose message row is missing (orphans), left alone.
    orphan_parts: u64,
    /// Spill files removed (in a dry run: that would be).
    spill_files_removed: u64,
    /// Bytes of spill files removed (in a dry run: that would be).
    spill_bytes_removed: u64,
    /// Runs OpenCode left incomplete whose sessions were pruned beside them (or would be): idle
    /// for at least `--abandoned-after`. Each counts once, however many of its session's
    /// messages were pruned.
    abandoned_runs: u64,
    /// The incomplete messages of those runs.
    #[serde(skip)]
    runs: BTreeSet<String>,
    /// With `--before-compaction` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    before_compaction: Option<BeforeCompaction>,
    /// With `--until-live-size` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    until_live_size: Option<UntilLiveSize>,
}

/// `--until-live-size`: the target, the database's live data before, and the estimate the clean
/// stops by (bytes). The estimate is the live data before less the row data each prune frees
/// that its dry run says would commit, counted when the prune is planned (the apply runs the
/// same dry run), so that the dry run stops where the apply does.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct UntilLiveSize {
    /// The target: live data at most this, in bytes.
    target: u64,
    /// Pages in use times the page size before the clean, in bytes.
    live_before: u64,
    /// `live_before` less the row data of every prune that would commit, in bytes.
    estimate_after: u64,
    /// Whether the estimate reached the target; false when the policies left too little.
    reached: bool,
    /// With `--apply`: the live data measured after the clean, in bytes (the freed pages are
    /// not exactly the row data; `vacuum` gives them back).
    #[serde(skip_serializing_if = "Option::is_none")]
    live_after: Option<u64>,
}

impl UntilLiveSize {
    fn new(target: u64, live_before: u64) -> Self {
        Self {
            target,
            live_before,
            estimate_after: live_before,
            reached: live_before <= target,
            live_after: None,
        }
    }

    /// Counts a planned prune that frees `bytes` of row data.
    fn planned(&mut self, bytes: u64) {
        self.estimate_after = self.estimate_after.saturating_sub(bytes);
        self.reached = self.estimate_after <= self.target;
    }

    fn reached(&self) -> bool {
        self.reached
    }
}

/// What `--before-compaction` let through, in assistant messages before the kept turns.
#[derive(Debug, Default, Serialize)]
struct BeforeCompaction {
    /// Older than their session's last completed compaction: looked at.
    qualified: u64,
    /// Not older (or in a session without a compaction): left alone.
    outside: u64,
}

impl Report {
    /// Counts the abandoned run a prune was admitted beside, once per run.
    fn admitted(&mut self, run: Option<&AbandonedRun>) {
        if let Some(run) = run {
            self.runs.insert(run.message_id.clone());
            self.abandoned_runs = self.runs.len() as u64;
        }
    }
}

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
    /// Only messages older than each session's last completed compaction.
    pub before_compaction: bool,
    /// Oldest first across sessions, until the live data is at most this many bytes.
    pub until_live_size: Option<u64>,
    /// Archive what each prune removes (`--archive`).
    pub archive: bool,
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
        policy: CleanPolicy {
            older_than,
            keep_last_turns: args.keep_last_turns,
            tools: args.tools.map(names),
            skip_tools: names(args.skip_tools),
            min_bytes: args.min_bytes,
            reasoning: !args.no_reasoning,
        },
        spill_files: args.include_spill_files,
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
        match open_engine_unless_busy(config, clean.archive.into())? {
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
    let mut progress = Progress::new(config.json, total);
    let now = pruning_engine::now_ms();
    // Batches fill across sessions: a database of many small sessions still gets batches of
    // `batch_size` messages.
    let mut pending = Pending::default();
    // The spill files the dry run's prunes point at, once per part.
    let mut spilled: Vec<String> = Vec::new();
    let mut until = match clean.until_live_size {
        Some(target) => Some(UntilLiveSize::new(target, store.vacuum_needs()?.live_bytes)),
        None => None,
    };
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
                let checked = if engine.is_none() || until.is_some() {
                    let found = pruning_engine::dry_run(store, &request)?;
                    let freed = match &found {
                        Ok(DryRun::Plan { plan, .. }) => Some(store.freed_bytes(
                            session_id,
                            message_id,
                            &plan.remove,
                            plan.bytes,
                        )?),
                        _ => None,
                    };
                    if let (Some(until), Some(freed)) = (&mut until, freed) {
                        until.planned(freed);
                    }
                    Some((found, freed))
                } else {
                    None
                };
                if engine.is_some() {
                    pending.requests.push(request);
                } else if let Some((found, freed)) = checked {
                    if let Some(freed) = freed {
                        report.bytes += freed;
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
    if clean.archive {
        report.archive_bytes = engine
            .as_ref()
            .map(|engine| engine.store().archived_bytes());
    }
    if let Some(mut until) = until {
        if clean.apply {
            until.live_after = Some(store.vacuum_needs()?.live_bytes);
        }
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
    if config.json {
        output::json_document(&report)?;
    } else {
        print_report(&report, clean, &config.invocation)?;
    }
    Ok(if report.status == "interrupted" {
        Outcome::Interrupted
    } else if report.failed > 0 || report.unjournaled > 0 {
        Outcome::Failed
    } else {
        Outcome::Done
    })
}

/// Counts what a dry run of one planned prune found.
fn dry(report: &mut Report, found: Result<DryRun, pruning_engine::Refusal>) {
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
        Err(refusal) => *report.blocked.entry(refusal.reason.as_str()).or_default() += 1,
    }
}

/// Planned prunes waiting for their batch.
#[derive(Debug, Default)]
struct Pending {
    requests: Vec<PruneRequest>,
}

impl Pending {
    /// Applies the batch through the engine's group commit and counts the outcomes.
    fn apply(&mut self, engine: &Engine<OpenCodeStore>, stop: &AtomicBool, report: &mut Report) {
        let stopped = || stop.load(Ordering::SeqCst);
        for result in engine.prune_many_until(&self.requests, &stopped) {
            tally(report, result);
        }
        self.requests.clear();
    }
}

fn tally(report: &mut Report, result: Result<pruning_engine::PruneOutcome, EngineError>) {
    match result {
        Ok(outcome) => match outcome.result {
            PruneResult::Pruned { .. } if outcome.retried => report.already_pruned += 1,
            PruneResult::Pruned { removed_count, .. } => {
                report.pruned += 1;
                report.parts += u64::from(removed_count);
                if let Some(receipt) = &outcome.receipt {
                    report.bytes += receipt.bytes_removed;
                    report.admitted(receipt.abandoned_run.as_ref());
                }
            }
            PruneResult::Blocked { reason } => {
                *report.blocked.entry(reason.as_str()).or_default() += 1;
            }
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

/// What a skip reason means, for people.
fn explain(reason: &str) -> &'static str {
    match reason {
        "read_only" => {
            " - stored where prunes are not written: read-only media, or V2 rows in OpenCode 1.18's shared session table"
        }
        "incomplete" => " - no time.completed: a run is writing it, or was killed",
        "unplaceable" => " - a time that is not a number, or an id no request can name",
        "too_recent" => " - completed within --older-than",
        _ => "",
    }
}

fn print_report(report: &Report, clean: &CleanConfig, invocation: &str) -> std::io::Result<()> {
    let verb = if clean.apply { "pruned" } else { "would prune" };
    say!(
        "{}: {} session(s), {} assistant message(s) looked at, {} left to the last {} turn(s)",
        report.status,
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
        say!("skipped ({reason}): {count} message(s){}", explain(reason))?;
    }
    for (reason, count) in &report.blocked {
        say!("blocked ({reason}): {count} message(s)")?;
    }
    if report.unjournaled > 0 {
        say!(
            "of those, {} committed with their receipts but not yet journaled: the next run journals them and announces their events",
            report.unjournaled
        )?;
    }
    if report.failed > 0 || report.unjournaled > 0 {
        say!(
            "failed: {} message(s) (nothing of them was written); first failure: {}",
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
    if !clean.apply {
        say!("dry run: nothing written; add --apply to do it")?;
    } else if report.pruned > 0 {
        say!("the file shrinks only after `{invocation} vacuum` (with OpenCode stopped)")?;
    }
    Ok(())
}

/// Most messages whose listings a clean keeps from its count to its walk (about 10 MB of ids);
/// a larger clean reads each session's listing again as it walks it.
const MAX_KEPT_IDS: u64 = 100_000;

/// Progress on stderr: a bar on a terminal, a line every 5 s otherwise, nothing for `--json`.
struct Progress {
    bar: Option<ProgressBar>,
    plain: bool,
    total: u64,
    done: u64,
    started: Instant,
    last_line: Instant,
}

impl Progress {
    fn new(json: bool, total: u64) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let bar = (!json && terminal).then(|| {
            let bar = ProgressBar::new(total);
            if let Ok(style) = ProgressStyle::with_template(
                "{bar:30} {pos}/{len} messages  {msg}  {per_sec}  ETA {eta}",
            ) {
                bar.set_style(style);
            }
            bar
        });
        Self {
            bar,
            plain: !json && !terminal,
            total,
            done: 0,
            started: Instant::now(),
            last_line: Instant::now(),
        }
    }

    /// `done` messages of the total are done.
    fn update(&mut self, done: u64, report: &Report) {
        self.done = done.min(self.total);
        let freed = format!("{} freed", output::bytes(report.bytes));
        if let Some(bar) = &self.bar {
            bar.set_position(self.done);
            bar.set_message(freed);
        } else if self.plain && self.last_line.elapsed() >= Duration::from_secs(5) {
            self.last_line = Instant::now();
            let rate = self.done as f64 / self.started.elapsed().as_secs_f64().max(0.001);
            eprintln!(
                "{}/{} messages, {freed}, {rate:.0} messages/s",
                self.done, self.total
            );
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
