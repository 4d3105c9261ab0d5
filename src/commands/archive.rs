//! `session-prune archive stats` and `session-prune archive purge --older-than DURATION
//! [--dry-run]`: what the prune archive beside the database (`<database>.prune-archive`) holds,
//! and its retention. Both read the database only; `purge` rewrites the archive, and is refused
//! (exit 3, `maintenance_required`) while a process that archives prunes (`serve --archive`,
//! `clean --apply --archive`) holds it; `purge --dry-run` reads without its lock.

use std::time::Duration;

use pruning_opencode::{ArchiveStats, PurgeReport};

use super::{open_store, require_opencode, Outcome};
use crate::cli::config::Config;
use crate::cli::duration::{duration_flag, ANY_DURATION};
use crate::output;
use crate::output::say;

/// `archive` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

/// What to do with the archive.
#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Entries, bytes stored, compression ratio, oldest and newest entry (read-only).
    Stats,
    /// Remove the entries archived longer ago than --older-than, except that of each message's
    /// newest prune no restore undid (so the message's present state can still be undone), and the entries no
    /// receipt names. Their prunes can no longer be restored; `audit` counts them as purged.
    Purge {
        /// Entries archived at least this long ago: seconds (2592000) or a duration (30d, 12h).
        #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
        older_than: String,
        /// Count what would be removed; write nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// Validates the flags (exit 2 on bad ones), then runs the action.
pub fn run(args: Args, config: &Config) -> anyhow::Result<Outcome> {
    match args.action {
        Action::Stats => stats(config),
        Action::Purge {
            older_than,
            dry_run,
        } => {
            let age = duration_flag("--older-than", &older_than, ANY_DURATION)?;
            purge(config, age, dry_run)
        }
    }
}

fn stats(config: &Config) -> anyhow::Result<Outcome> {
    let store = open_store(config)?;
    require_opencode(&store, &config.db)?;
    let stats = store.archive_stats()?;
    if config.json {
        output::json_document(&stats)?;
    } else {
        print_stats(&stats)?;
    }
    Ok(Outcome::Done)
}

fn print_stats(stats: &ArchiveStats) -> std::io::Result<()> {
    if !stats.exists {
        if stats.named > 0 {
            say!(
                "no archive at {}, while {} receipt(s) name entries in it: it was moved or deleted; put it back from the backup taken with the database",
                stats.path.display(),
                stats.named
            )?;
        } else {
            say!(
                "no archive at {} (prunes made with --archive write one)",
                stats.path.display()
            )?;
        }
        return Ok(());
    }
    say!(
        "archive   {} ({})",
        stats.path.display(),
        output::bytes(stats.file_bytes)
    )?;
    say!(
        "entries   {} ({} of rows in {}, compression {:.1}x)",
        stats.entries,
        output::bytes(stats.raw_bytes),
        output::bytes(stats.stored_bytes),
        stats.compression_ratio
    )?;
    if let (Some(oldest), Some(newest)) = (stats.oldest_ms, stats.newest_ms) {
        say!("oldest    {}", time(oldest))?;
        say!("newest    {}", time(newest))?;
    }
    if stats.purged > 0 {
        say!("purged    {} entry(ies) so far", stats.purged)?;
    }
    if stats.orphans > 0 {
        say!(
            "orphans   {} entry(ies) of prunes that never committed (the next prune with --archive discards them)",
            stats.orphans
        )?;
    }
    if let Some(offset) = stats.unreadable_at {
        say!(
            "unreadable frames from byte {offset} on do not read: a torn append, which the next command with --archive cuts, unless a receipt's entry is there (then the archive is damaged: `audit` says which)"
        )?;
    }
    Ok(())
}

fn purge(config: &Config, age: Duration, dry_run: bool) -> anyhow::Result<Outcome> {
    let store = open_store(config)?;
    require_opencode(&store, &config.db)?;
    let now = pruning_engine::now_ms();
    let cutoff = now.saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX));
    let report = match store.purge_archive(cutoff, now, dry_run) {
        Ok(report) => report,
        Err(pruning_engine::StoreError::ArchiveBusy(detail)) => {
            let detail = output::printable(&detail);
            if config.json {
                output::json_document(&serde_json::json!({
                    "status": "blocked", "reason": "maintenance_required"
                }))?;
            }
            eprintln!("blocked: maintenance_required: {detail}; nothing was purged");
            return Ok(Outcome::Blocked);
        }
        Err(error) => return Err(error.into()),
    };
    if config.json {
        output::json_document(&report)?;
    } else {
        print_purge(&report)?;
    }
    Ok(Outcome::Done)
}

fn print_purge(report: &PurgeReport) -> std::io::Result<()> {
    if !report.exists {
        return say!("no archive: nothing to purge");
    }
    let verb = if report.status == "dry-run" {
        "would purge"
    } else {
        "purged"
    };
    say!(
        "{verb}: {} entry(ies), {} stored; kept {} old entry(ies) of the newest prune standing on their message",
        report.purged,
        output::bytes(report.purged_bytes),
        report.kept_newest
    )?;
    if report.orphans > 0 {
        say!(
            "{} entry(ies) of prunes that never committed {}",
            report.orphans,
            if report.status == "dry-run" {
                "would be dropped"
            } else {
                "dropped"
            }
        )?;
    }
    if report.status != "dry-run" {
        say!(
            "the archive shrank by {}",
            output::bytes(report.file_bytes_freed)
        )?;
    }
    Ok(())
}

/// A time in ms since the Unix epoch, as RFC 3339 UTC.
fn time(ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_seconds(at).to_string()
}
