//! `session-prune events [--since SEQ] [--follow]`: journaled prune events as JSON lines (or
//! text), then, with `--follow`, new ones as other processes journal them.
//!
//! The journal file admits one process at a time, so `--follow` holds it only while it reads:
//! it reopens it every poll interval, and a prune in another process waits at most that long.

use std::path::Path;

use pruning_engine::{Journal, PrunedEvent};

use super::Outcome;
use crate::cli::config::Config;
use crate::output;

/// Events read per journal visit.
const PAGE: usize = 1000;

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
    let mut cursor = since;
    loop {
        cursor = print_after(&config.journal, cursor, config.json)?;
        if !follow {
            return Ok(Outcome::Done);
        }
        std::thread::sleep(poll);
    }
}

/// Prints every journaled event after `cursor`; returns the new cursor.
fn print_after(path: &Path, mut cursor: u64, json: bool) -> anyhow::Result<u64> {
    if !path.exists() {
        return Ok(cursor);
    }
    let journal = Journal::open(path)?;
    if journal.cursor_needs_resync(cursor)? {
        // Events after the cursor were removed by retention: the reader must reload its state.
        let first_kept = journal.first_seq()?.unwrap_or(0);
        if json {
            output::json_line(&serde_json::json!({ "type": "resync", "firstKept": first_kept }))?;
        } else {
            println!("resync: events after #{cursor} are no longer kept (the oldest kept is #{first_kept}); reload everything");
        }
        cursor = journal.trimmed_through()?;
    }
    loop {
        let page = journal.events_after(cursor, PAGE)?;
        for event in page.iter().cloned().map(PrunedEvent::from) {
            cursor = event.seq;
            if json {
                output::json_line(&event)?;
            } else {
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
            }
        }
        if page.len() < PAGE {
            return Ok(cursor);
        }
    }
}
