//! `clean`'s flags, and their validation into a [`CleanConfig`] (exit 2 on a bad one, before
//! anything is opened).

use std::time::Duration;

use pruning_clean::{Clean, BATCH_SIZE, MAX_KEPT_IDS};
use pruning_engine::PreviewRequest;
use pruning_opencode::CleanPolicy;

use crate::cli::duration::{duration_flag, ANY_DURATION};
use crate::cli::error::ConfigError;

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
    /// for (`writeLock`: transactions, p50, p99 and longest in ms), and how long the integrity
    /// check took beside the planning and how long the clean waited for it (`integrityCheck`:
    /// checkMs, waitedMs, overlapped). Measured, so it differs from run to run; without it the
    /// report is the same for the same database.
    #[arg(long)]
    timings: bool,
    /// Print nothing (no report, no progress) unless a prune failed: then one line on stderr.
    /// For cron and timers, which read the exit code: 0 done, 3 some prune refused for now
    /// (the next run retries it), 1 a failure
    #[arg(long)]
    quiet: bool,
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
    /// Prune the oldest completed messages first, across sessions, until the database file is
    /// at most SIZE once the clean has given its freed pages back (a file switched by `vacuum
    /// --online-shrink`); every other policy still applies. The report says the size reached
    /// and, when short of SIZE, why
    #[arg(
        long,
        value_name = "SIZE",
        allow_hyphen_values = true,
        conflicts_with = "until_live_size"
    )]
    until_file_size: Option<String>,
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
    /// Also remove the OpenCode 1.x rows of the sessions OpenCode 2 migrated (it copied them at
    /// its first start and never reads them again), where OpenCode 2 holds a copy of every
    /// message of the session: message by message, each with its receipt (and, with
    /// `--archive`, restorable).
    #[arg(long)]
    migrated_v1: bool,
    /// Also remove the spill files (`<data>/tool-output/tool_*` of OpenCode 1.x,
    /// `<data>/shell/<project>/sh_*.out` of OpenCode 2) that no remaining row names: those of
    /// the pruned tool parts, and any an earlier clean or a killed run left.
    #[arg(long)]
    include_spill_files: bool,
    /// Also prune the messages (and empty the diffs) a person put back with `restore` and no
    /// prune took since; by default a clean leaves them alone, as it never takes back what a
    /// person put back.
    #[arg(long)]
    include_restored: bool,
    /// Keep the rows each prune removes in the archive beside the database
    /// (`<database>.prune-archive`), durable before the prunes commit; the report gives the
    /// archive bytes written beside the bytes freed. The default once that archive exists.
    /// The archive keeps rows, not spill files: with --include-spill-files a restore puts back
    /// the rows (the output OpenCode kept in them), not the files.
    #[arg(long, requires = "apply")]
    archive: bool,
    /// Do not archive, even where the database has an archive (then every prune is archived
    /// unless this is given: a prune that is not archived cannot be undone, nor can the
    /// earlier prunes of its message).
    #[arg(long, conflicts_with = "archive")]
    no_archive: bool,
    /// Messages per batch: their intents share one journal write, their commits one WAL sync.
    #[arg(long, default_value_t = BATCH_SIZE, value_name = "N")]
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

/// A validated `clean`: the clean it asks for, and what the command line adds around it.
#[derive(Debug, Clone)]
pub struct CleanConfig {
    /// Write (else: a dry run).
    pub apply: bool,
    /// The clean: policy, phases, target, batch.
    pub clean: Clean,
    /// Archive what each prune removes (`--archive`).
    pub archive: bool,
    /// Never archive (`--no-archive`), even where the database has an archive.
    pub no_archive: bool,
    /// Print nothing unless a prune failed (`--quiet`).
    pub quiet: bool,
}

pub(super) fn validate(args: Args) -> Result<CleanConfig, ConfigError> {
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
    let clean = Clean {
        sessions: (!args.all).then_some(sessions),
        timings: args.timings,
        policy: CleanPolicy {
            older_than,
            keep_last_turns: args.keep_last_turns,
            tools: args.tools.map(names),
            skip_tools: names(args.skip_tools),
            min_bytes: args.min_bytes,
            reasoning: !args.no_reasoning,
            include_restored: args.include_restored,
        },
        spill_files: args.include_spill_files,
        compact: !args.no_compact,
        diffs: args.diffs,
        migrated_v1: args.migrated_v1,
        before_compaction: args.before_compaction,
        until_live_size: match (args.until_live_size, args.until_file_size.as_ref()) {
            (None, None) => None,
            (Some(text), _) => Some(size_flag("--until-live-size", &text)?),
            (None, Some(text)) => Some(size_flag("--until-file-size", text)?),
        },
        until_file: args.until_file_size.is_some(),
        batch_size: args.batch_size,
        pause: Duration::from_millis(args.pause_ms),
        listing_budget: args.listing_budget,
    };
    Ok(CleanConfig {
        apply: args.apply,
        clean,
        archive: args.archive,
        no_archive: args.no_archive,
        quiet: args.quiet,
    })
}

/// A size flag's bytes (see [`whole_bytes`]).
///
/// Errors: [`ConfigError::Size`], naming `flag`.
pub fn size_flag(flag: &'static str, text: &str) -> Result<u64, ConfigError> {
    whole_bytes(text).map_err(|problem| ConfigError::Size {
        flag,
        value: text.to_string(),
        problem,
    })
}
