//! `session-prune receipts [--session ID]`: the audit list of committed prunes, from the receipt
//! table in the OpenCode database (the authority; the journal only mirrors it).

use super::{open_store, Outcome};
use crate::cli::config::Config;
use crate::cli::error::ConfigError;
use crate::output;
use crate::output::say;
use pruning_engine::SessionStore;

/// `receipts` flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only receipts of this session.
    #[arg(long, value_name = "ID")]
    session: Option<String>,
}

/// Lists receipts, oldest first.
pub fn run(Args { session }: Args, config: &Config) -> anyhow::Result<Outcome> {
    if session.as_deref().is_some_and(|id| id.trim().is_empty()) {
        return Err(ConfigError::EmptyScope("--session").into());
    }
    let session = session.as_deref();
    let store = open_store(config)?;
    let receipts = store.receipts(session)?;
    if config.json {
        output::json_document(&receipts)?;
        return Ok(Outcome::Done);
    }
    if receipts.is_empty() {
        match session {
            Some(id) => say!("no receipts for session {id}: nothing of it has been pruned")?,
            None => say!("no receipts: nothing has been pruned in this database")?,
        }
    }
    let restored: std::collections::HashMap<uuid::Uuid, uuid::Uuid> = receipts
        .iter()
        .filter_map(|r| r.restores.map(|undone| (undone, r.receipt_id)))
        .collect();
    for r in &receipts {
        let what = match r.restores {
            Some(pruned) => format!("restored {} of receipt {pruned}", output::removed(r)),
            None => format!(
                "removed {}, {}{}",
                output::removed(r),
                output::bytes(r.bytes_removed),
                match (restored.get(&r.receipt_id), &r.archive_hash) {
                    (Some(by), _) => format!(", restored by receipt {by}"),
                    (None, Some(_)) => ", archived".to_string(),
                    (None, None) => String::new(),
                }
            ),
        };
        say!(
            "{}  {}  {} / {}  {what}  receipt {}",
            output::time(r.committed_at_ms),
            r.engine_version,
            output::printable(&r.session_id),
            output::printable(&r.message_id),
            r.receipt_id
        )?;
        say!("    revision {} -> {}", r.revision_before, r.revision_after)?;
    }
    Ok(Outcome::Done)
}
