//! `session-prune events [--since SEQ] [--follow]`: journaled prune events as JSON lines (or
//! text), then, with `--follow`, new ones as other processes journal them. With
//! `--follow --url URL` it follows a running server's event stream instead (`remote`).
//!
//! The journal file admits one process at a time, so this command holds it only while it reads
//! a page (never while it writes output): it reopens it every poll interval, and a busy journal
//! just means trying again at the next poll. A process that crashed mid-prune leaves a pending
//! intent; when one is seen (no other process can be mid-prune while this one holds the
//! journal), recovery runs first, so the event of a prune that committed is not missed.

mod cursor_file;
mod remote;

use std::path::PathBuf;

use pruning_engine::{Journal, PrunedEvent};

use super::Outcome;
use crate::cli::config::Config;
use crate::output;
use crate::output::say;

/// Events read per journal visit.
const PAGE: usize = 1000;

/// Most polls in a row that `--follow` skips because the journal file looks unchanged.
const MAX_SKIPPED_POLLS: u32 = 20;

/// What one visit to the journal found.
enum Page {
    /// Events after the cursor were trimmed: the reader must reload; resume after `through`.
    Resync { first_kept: u64, through: u64 },
    /// Up to [`PAGE`] events after the cursor.
    Events(Vec<PrunedEvent>),
}

/// `events` flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print events with a sequence number greater than this (default 0: every event the
    /// journal keeps). With --url: where to start when no --cursor-file holds an id.
    #[arg(long, value_name = "SEQ")]
    since: Option<u64>,
    /// Keep running and print events as they are journaled.
    #[arg(long)]
    follow: bool,
    /// With --follow: how often to look for new events, in milliseconds.
    #[arg(
        long,
        default_value_t = 500,
        value_name = "MS",
        requires = "follow",
        conflicts_with = "url"
    )]
    poll_ms: u64,
    /// With --follow: follow the event stream of a running `serve` instead of the journal
    /// file, http://HOST:PORT/api/workspaces/ID/session-pruning/events (the password, if it
    /// has one, from SESSION_PRUNE_PASSWORD); it reconnects after every drop and prints
    /// exactly the events it missed.
    #[arg(long, value_name = "URL", requires = "follow")]
    url: Option<String>,
    /// With --url: keep the last event id, and the server's database id, in this file (read
    /// at start, replaced whole after each event), so that the client started again resumes
    /// where it stopped.
    #[arg(long, value_name = "FILE", requires = "url")]
    cursor_file: Option<PathBuf>,
}

impl Args {
    /// Whether the command reads a database and journal of this machine: not when it follows
    /// a server.
    pub fn uses_database(&self) -> bool {
        self.url.is_none()
    }
}

/// Prints events after `--since`; with `--follow`, keeps polling (at least every 10 ms), or,
/// with `--url`, follows the server's stream.
pub fn run(args: Args, config: &Config) -> anyhow::Result<Outcome> {
    if let Some(url) = &args.url {
        let remote = remote::Remote::new(url, args.cursor_file, args.since, config.json)?;
        return remote.run();
    }
    super::open::refuse_cut_short(config)?;
    let poll = std::time::Duration::from_millis(args.poll_ms.max(10));
    execute(config, args.since.unwrap_or(0), args.follow, poll)
}

/// Prints events after `since`; with `follow`, keeps polling.
fn execute(
    config: &Config,
    since: u64,
    follow: bool,
    poll: std::time::Duration,
) -> anyhow::Result<Outcome> {
    if !config.journal.exists() && !follow {
        eprintln!(
            "no journal at {}: nothing has been pruned with it yet (or pass --journal PATH)",
            config.journal.display()
        );
        return Ok(Outcome::Done);
    }
    match super::check_binding(config) {
        Err(error) if !follow && super::journal_busy(&error) => return busy(&error, config.json),
        other => other?,
    }
    let mut cursor = since;
    let mut seen: Option<(std::time::SystemTime, u64)> = None;
    let mut skipped = 0;
    loop {
        // Skip polls in which nobody changed the file since this command last read all of it
        // (it opens the journal read-only, so only writers move the stamp). A write in the same
        // clock tick as that read would look like no change, so every `MAX_SKIPPED_POLLS`-th
        // poll reads anyway.
        if follow && seen.is_some() && stamp(&config.journal) == seen && skipped < MAX_SKIPPED_POLLS
        {
            skipped += 1;
            std::thread::sleep(poll);
            continue;
        }
        skipped = 0;
        let page = read_page(config, cursor);
        seen = stamp(&config.journal);
        match page {
            Ok(Some(Page::Resync {
                first_kept,
                through,
            })) => {
                print_resync(cursor, first_kept, config.json)?;
                cursor = through;
                seen = None;
                continue;
            }
            Ok(Some(Page::Events(events))) => {
                let full = events.len() == PAGE;
                for event in &events {
                    print_event(event, config.json)?;
                    cursor = event.seq;
                }
                if full {
                    seen = None;
                    continue;
                }
            }
            Ok(None) => {}
            Err(error) if follow && super::journal_busy(&error) => seen = None,
            Err(error) if super::journal_busy(&error) => return busy(&error, config.json),
            Err(error) => return Err(error),
        }
        if !follow {
            return Ok(Outcome::Done);
        }
        std::thread::sleep(poll);
    }
}

/// Reports the journal held by another process (exit 3: nothing was read).
fn busy(error: &anyhow::Error, json: bool) -> anyhow::Result<Outcome> {
    let detail = super::busy_detail(error);
    eprintln!("blocked: {detail}");
    if json {
        output::json_line(&serde_json::json!({
            "status": "blocked",
            "reason": "maintenance_required",
        }))?;
    }
    Ok(Outcome::Blocked)
}

/// Modification time and length of the journal file, if it exists.
fn stamp(path: &std::path::Path) -> Option<(std::time::SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

/// One visit: recover pending intents if any, then read a page. `None` when there is no journal.
fn read_page(config: &Config, cursor: u64) -> anyhow::Result<Option<Page>> {
    let Some(journal) = super::open_journal_for_reading(&config.journal)? else {
        return Ok(None);
    };
    if !journal.pending_intents()?.is_empty() && config.db.is_file() && writable(&config.journal) {
        drop(journal);
        // Opening the engine resolves them against the database, then releases everything.
        drop(super::open_engine(
            config,
            super::Archiving::Off,
            super::Soundness::Reported,
        )?);
        return read_page_from(&Journal::open(&config.journal)?, cursor).map(Some);
    }
    read_page_from(&journal, cursor).map(Some)
}

/// Whether this process may write `path` (a pending intent is resolved only then; on read-only
/// media the events already journaled are read as they are).
fn writable(path: &std::path::Path) -> bool {
    std::fs::OpenOptions::new().append(true).open(path).is_ok()
}

fn read_page_from(journal: &Journal, cursor: u64) -> anyhow::Result<Page> {
    if journal.cursor_needs_resync(cursor)? {
        return Ok(Page::Resync {
            first_kept: journal.first_seq()?.unwrap_or(0),
            through: journal.trimmed_through()?,
        });
    }
    let events = journal.events_after(cursor, PAGE)?;
    Ok(Page::Events(
        events.into_iter().map(PrunedEvent::from).collect(),
    ))
}

fn print_resync(cursor: u64, first_kept: u64, json: bool) -> anyhow::Result<()> {
    if json {
        output::json_line(&serde_json::json!({ "type": "resync", "firstKept": first_kept }))
    } else {
        say!(
            "resync: events after #{cursor} are no longer kept (the oldest kept is #{first_kept}); reload everything"
        )?;
        Ok(())
    }
}

fn print_event(event: &PrunedEvent, json: bool) -> anyhow::Result<()> {
    if json {
        return output::json_line(event);
    }
    if let Some(bytes) = event.bytes_removed {
        say!(
            "#{} {} {} session {} snapshots {} bytes {} id {}",
            event.seq,
            output::time(event.committed_at_ms),
            event.event_type,
            output::printable(&event.data.session_id),
            event.removed_count,
            bytes,
            event.id
        )?;
        return Ok(());
    }
    say!(
        "#{} {} {} session {} message {} revision {} removed {} id {}",
        event.seq,
        output::time(event.committed_at_ms),
        event.event_type,
        output::printable(&event.data.session_id),
        output::printable(&event.data.message_id),
        event.data.revision,
        event.removed_count,
        event.id
    )?;
    Ok(())
}
