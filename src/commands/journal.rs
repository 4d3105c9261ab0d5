//! `session-prune journal new-epoch [--dry-run]`: a new journal for a database whose journal
//! was lost (deleted, emptied), started from its receipts (docs/ARCHITECTURE.md, "Journal
//! epochs"). Every command that writes refuses such a database until the journal is put back
//! or a new epoch begins. Exit 0 started (or planned), 2 when there is nothing to start: a
//! journal file that is not empty is where the new one would go (it is never written over), the
//! journal beside the database is not empty while `--journal` names another, or the database
//! has no receipt; 3 while another process holds the journal's file.

use pruning_engine::{plan_journal_epoch, start_journal_epoch, EngineError, EpochStarted};
use pruning_journal::EpochError;
use serde_json::json;

use super::{open_store_for_writing, require_opencode, Outcome};
use crate::cli::config::Config;
use crate::output;
use crate::output::say;

/// `journal` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

/// What to do with the journal.
#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Start a new journal for a database whose journal was lost (deleted or emptied), from the
    /// receipts the database holds: its events are numbered after the highest number theirs
    /// can have had, so no number is given twice, and a subscriber whose cursor is older
    /// receives a `resync`. The receipts of the earlier epochs keep no journal (`audit` checks
    /// them against the database and the receipt chain). Only where no journal file is, or an
    /// empty one: put a journal that was moved aside back instead, when you have it.
    NewEpoch {
        /// Say what would be started; write nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// Nothing to start: the journal's path holds a file that is not empty, or the database has
/// no receipt (exit 2: nothing was written).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NothingToStart(String);

/// Runs the action.
pub fn run(args: Args, config: &Config) -> anyhow::Result<Outcome> {
    match args.action {
        Action::NewEpoch { dry_run } => new_epoch(config, dry_run),
    }
}

fn new_epoch(config: &Config, dry_run: bool) -> anyhow::Result<Outcome> {
    // One start at a time in the journal's folder: a second waits, then finds the journal the
    // first made and changes nothing.
    let _one_at_a_time = lock_folder_of(&config.journal)?;
    if let Some(held) = journal_held(config) {
        return blocked(config, &held);
    }
    refuse_another_journal_beside(config)?;
    let store = open_store_for_writing(config)?;
    require_opencode(&store, &config.db)?;
    let path = &config.journal;
    let started = if dry_run {
        let occupied = std::fs::metadata(path).is_ok_and(|found| found.len() > 0);
        if occupied {
            return Err(in_place(config).into());
        }
        plan_journal_epoch(&store).map_err(|error| explain(error, config))?
    } else {
        match start_journal_epoch(&store, path) {
            Ok((journal, started)) => {
                drop(journal);
                started
            }
            // Another writer (OpenCode) holds the database's write lock: the epoch did not move.
            Err(EngineError::Store(busy)) if is_busy(&busy) => {
                return blocked(
                    config,
                    &format!(
                        "{} is being written by another process (OpenCode, say): nothing was \
                         changed; run this again in a moment",
                        config.db.display()
                    ),
                );
            }
            Err(error) => return Err(explain(error, config)),
        }
    };
    report(config, &started, dry_run)?;
    Ok(Outcome::Done)
}

/// Says the start is blocked (exit 3, nothing written): `detail` on stderr and, with `--json`,
/// `{status: "blocked", reason: "maintenance_required", detail}`.
fn blocked(config: &Config, detail: &str) -> anyhow::Result<Outcome> {
    if config.json {
        output::json_document(&json!({
            "status": "blocked", "reason": "maintenance_required", "detail": detail,
        }))?;
    }
    eprintln!("blocked: {detail}");
    Ok(Outcome::Blocked)
}

/// Whether a store error, or one of its causes, is SQLite's for a database another connection
/// holds (`SQLITE_BUSY`: "database is locked"; `SQLITE_LOCKED`: "database table is locked").
fn is_busy(error: &pruning_engine::StoreError) -> bool {
    let mut cause: Option<&dyn std::error::Error> = Some(error);
    while let Some(found) = cause {
        let words = found.to_string().to_ascii_lowercase();
        if words.contains("database is locked") || words.contains("database table is locked") {
            return true;
        }
        cause = found.source();
    }
    false
}

/// An exclusive lock (`flock`) on the folder of `journal`, held until the value is dropped,
/// taken by every start of a journal epoch there: two at once would both plan from the same
/// database, and the second would move its epoch past the journal the first made.
///
/// Errors: the folder cannot be opened or locked.
fn lock_folder_of(journal: &std::path::Path) -> anyhow::Result<std::fs::File> {
    let folder = match journal.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => std::path::Path::new("."),
    };
    let handle = std::fs::File::open(folder).map_err(|error| {
        anyhow::anyhow!(
            "cannot open the journal's folder {}: {error}",
            folder.display()
        )
    })?;
    rustix::fs::flock(&handle, rustix::fs::FlockOperation::LockExclusive).map_err(|error| {
        anyhow::anyhow!(
            "cannot lock the journal's folder {}: {error}",
            folder.display()
        )
    })?;
    Ok(handle)
}

/// Why the journal may still be in use: another process holds the file at its path open (a
/// `serve` whose journal was deleted or emptied under it goes on numbering events in it), or
/// another `session-prune` has the database open (its journal may be at another path, or moved
/// away). The command is then blocked (exit 3, nothing written) until that process stops.
fn journal_held(config: &Config) -> Option<String> {
    let mut holders = pruning_opencode::holding_path(&config.journal);
    holders.extend(pruning_opencode::holders_named(&config.db, "session-prune"));
    holders.sort_unstable();
    holders.dedup();
    if holders.is_empty() {
        return None;
    }
    let named: Vec<String> = holders
        .iter()
        .map(|pid| format!("{} (pid {pid})", pruning_opencode::process_named(*pid)))
        .collect();
    Some(format!(
        "{} or its database is held open by {}: a process that holds a journal goes on \
         numbering events in it, deleted, emptied or moved or not. Nothing was changed; stop it \
         (a `serve`: Ctrl-C or SIGTERM) and run this again",
        config.journal.display(),
        named.join(", ")
    ))
}

/// Refuses a `--journal` that names another path while the journal beside the database holds
/// something: that one may be the journal that was not lost.
///
/// Errors: [`NothingToStart`] (exit 2).
fn refuse_another_journal_beside(config: &Config) -> Result<(), NothingToStart> {
    let beside = crate::cli::config::default_journal(&config.db);
    let beside_holds = std::fs::metadata(&beside).is_ok_and(|found| found.len() > 0);
    if beside != config.journal && beside_holds {
        return Err(NothingToStart(format!(
            "the journal beside the database, {}, is not empty: it may be the journal this \
             database was pruned with. Nothing was changed; name it with --journal to use it, or \
             move it aside if it is not this database's",
            beside.display()
        )));
    }
    Ok(())
}

/// The engine's refusals that mean there is nothing to start, in words that say why.
fn explain(error: EngineError, config: &Config) -> anyhow::Error {
    match error {
        EngineError::NothingJournaled => NothingToStart(format!(
            "{} holds no receipt: there is no journal history to continue (the first prune \
             creates the journal)",
            config.db.display()
        ))
        .into(),
        EngineError::Journal(cause)
            if matches!(
                *cause,
                pruning_engine::JournalError::Epoch(EpochError::Occupied { .. })
            ) =>
        {
            in_place(config).into()
        }
        EngineError::JournalEpochRaced { epoch } => NothingToStart(format!(
            "another start of a journal epoch came first: {} is on journal epoch {epoch} now. \
             Nothing was changed; use the journal that start made",
            config.db.display()
        ))
        .into(),
        other => other.into(),
    }
}

/// The refusal for a journal path that holds a file that is not empty.
fn in_place(config: &Config) -> NothingToStart {
    NothingToStart(format!(
        "{} is not empty, and a journal is never written over: if it is this database's journal \
         there is nothing to start; if it is not (another database's, or damaged), move it aside \
         and run this again",
        config.journal.display()
    ))
}

fn report(config: &Config, started: &EpochStarted, dry_run: bool) -> anyhow::Result<()> {
    if config.json {
        return output::json_document(&json!({
            "status": if dry_run { "planned" } else { "started" },
            "journal": config.journal.display().to_string(),
            "databaseID": started.database_id,
            "epoch": started.epoch.number,
            "afterSeq": started.epoch.after_seq,
            "receipts": started.receipts,
        }));
    }
    say!(
        "{} journal epoch {} at {}: its events are numbered after #{}; the {} receipt(s) of the \
         epochs before keep no journal (`audit` checks them without one), and an event stream \
         whose cursor is older receives a resync",
        if dry_run { "would start" } else { "started" },
        started.epoch.number,
        config.journal.display(),
        started.epoch.after_seq,
        started.receipts
    )?;
    Ok(())
}
