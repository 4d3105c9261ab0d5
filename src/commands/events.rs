//! `session-prune events [--since SEQ] [--follow]`: journaled prune events as JSON lines (or
//! text), then, with `--follow`, new ones as other processes journal them.
//!
//! The journal file admits one process at a time, so this command holds it only while it reads
//! a page (never while it writes output): it reopens it every poll interval, and a busy journal
//! just means trying again at the next poll. A process that crashed mid-prune leaves a pending
//! intent; when one is seen (no other process can be mid-prune while this one holds the
//! journal), recovery runs first, so the event of a prune that committed is not missed.

use pruning_engine::{Journal, PrunedEvent};

use super::Outcome;
use crate::cli::config::Config;
use crate::output;

/// Events read per journal visit.
const PAGE: usize = 1000;

/// What one visit to the journal found.
enum Page {
    /// Events after the cursor were trimmed: the reader must reload; resume after `through`.
    Resync { first_kept: u64, through: u64 },
    /// Up to [`PAGE`] events after the cursor.
    Events(Vec<PrunedEvent>),
}

/// Prints events after `since`; with `follow`, keeps polling.
pub fn run(
    config: &Config,
    since: u64,
    follow: bool,
    poll: std::time::Duration,
) -> anyhow::Result<Outcome> {
    if !config.journal.exists() && !follow {
        anyhow::bail!(
            "no journal at {}: nothing has been pruned with it yet (or pass --journal PATH)",
            config.journal.display()
        );
    }
    check_binding(config)?;
    let mut cursor = since;
    loop {
        match read_page(config, cursor) {
            Ok(Some(Page::Resync {
                first_kept,
                through,
            })) => {
                print_resync(cursor, first_kept, config.json)?;
                cursor = through;
                continue;
            }
            Ok(Some(Page::Events(events))) => {
                let full = events.len() == PAGE;
                for event in &events {
                    print_event(event, config.json)?;
                    cursor = event.seq;
                }
                if full {
                    continue;
                }
            }
            Ok(None) => {}
            Err(error) if follow && super::journal_busy(&error) => {}
            Err(error) => return Err(error),
        }
        if !follow {
            return Ok(Outcome::Done);
        }
        std::thread::sleep(poll);
    }
}

/// Refuses to show the events of a journal bound to another database than `--db`'s.
fn check_binding(config: &Config) -> anyhow::Result<()> {
    if !config.journal.exists() || !config.db.is_file() {
        return Ok(());
    }
    let bound = Journal::open(&config.journal)?.bound_database()?;
    let found = pruning_engine::SessionStore::database_id(&super::open_store(config)?)?;
    if let (Some(bound), Some(found)) = (bound, found) {
        if bound != found {
            return Err(pruning_engine::EngineError::JournalMismatch { bound, found }.into());
        }
    }
    Ok(())
}

/// One visit: recover pending intents if any, then read a page. `None` when there is no journal.
fn read_page(config: &Config, cursor: u64) -> anyhow::Result<Option<Page>> {
    if !config.journal.exists() {
        return Ok(None);
    }
    let journal = Journal::open(&config.journal)?;
    if !journal.pending_intents()?.is_empty() && config.db.is_file() {
        drop(journal);
        // Opening the engine resolves them against the database, then releases everything.
        drop(super::open_engine(config)?);
        return read_page_from(&Journal::open(&config.journal)?, cursor).map(Some);
    }
    read_page_from(&journal, cursor).map(Some)
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
        println!(
            "resync: events after #{cursor} are no longer kept (the oldest kept is #{first_kept}); reload everything"
        );
        Ok(())
    }
}

fn print_event(event: &PrunedEvent, json: bool) -> anyhow::Result<()> {
    if json {
        return output::json_line(event);
    }
    println!(
        "#{} {} {} session {} message {} revision {} removed {} id {}",
        event.seq,
        output::time(event.committed_at_ms),
        event.event_type,
        event.data.session_id,
        event.data.message_id,
        event.data.revision,
        event.removed_count,
        event.id
    );
    Ok(())
}
