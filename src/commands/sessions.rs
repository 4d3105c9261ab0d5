//! `session-prune sessions`: every session with its sizes, largest first.

use super::{open_store, Outcome};
use crate::cli::config::Config;
use crate::output;
use crate::output::say;

/// `sessions` takes no flags of its own.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Lists sessions (read-only).
pub fn run(_args: Args, config: &Config) -> anyhow::Result<Outcome> {
    let store = open_store(config)?;
    super::require_opencode(&store, &config.db)?;
    let list = store.sessions()?;
    if config.json {
        output::json_document(&list)?;
        return Ok(Outcome::Done);
    }
    for service in pruning_opencode::services_holding(&config.db) {
        say!(
            "{} has the database open (`opencode service stop` stops it)",
            service.describe()
        )?;
    }
    // The column of OpenCode 1.x rows OpenCode 2 migrated, only where there are any.
    let migrated: u64 = list.iter().map(|s| s.migrated_v1_bytes).sum();
    let copy = |bytes: u64| {
        if migrated > 0 {
            format!(" {:>11}", output::bytes(bytes))
        } else {
            String::new()
        }
    };
    say!(
        "{:<32} {:>8} {:>11} {:>11}{}  title  [directory]",
        "session",
        "messages",
        "total",
        "prunable",
        if migrated > 0 {
            format!(" {:>11}", "1.x copy")
        } else {
            String::new()
        }
    )?;
    for s in &list {
        say!(
            "{:<32} {:>8} {:>11} {:>11}{}  {}  [{}]",
            s.session_id,
            s.messages,
            output::bytes(s.total_bytes),
            output::bytes(s.prunable_bytes),
            copy(s.migrated_v1_bytes),
            output::printable(&s.title),
            output::printable(&s.directory)
        )?;
    }
    let total: u64 = list.iter().map(|s| s.total_bytes).sum();
    let prunable: u64 = list.iter().map(|s| s.prunable_bytes).sum();
    say!(
        "{} session(s), {} in all, {} prunable (list a session's messages with `{} messages SESSION`)",
        list.len(),
        output::bytes(total),
        output::bytes(prunable),
        config.invocation
    )?;
    if migrated > 0 {
        say!(
            "{} is the copy of OpenCode 1.x history that OpenCode 2 made at its first start and \
             never reads again (`{} clean --all --migrated-v1` removes it)",
            output::bytes(migrated),
            config.invocation
        )?;
    }
    Ok(Outcome::Done)
}
