//! `session-prune messages SESSION`: the messages of a session with their technical parts, to
//! find what to preview.

use super::{open_store, Outcome};
use crate::cli::config::Config;
use crate::output;
use crate::output::say;

/// `messages` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id (ses_...).
    session: String,
}

/// Lists the messages of one session (read-only), oldest first.
pub fn run(Args { session }: Args, config: &Config) -> anyhow::Result<Outcome> {
    let session = session.as_str();
    let store = open_store(config)?;
    super::require_opencode(&store, &config.db)?;
    if !store.session_exists(session)? {
        return Err(super::UnknownSession(session.to_string()).into());
    }
    let list = store.messages(session)?;
    if config.json {
        output::json_document(&list)?;
        return Ok(Outcome::Done);
    }
    if list.is_empty() {
        say!("session {session} has no messages")?;
        return Ok(Outcome::Done);
    }
    say!(
        "{:<32} {:<9} {:<10} {:>5} {:>9} {:>11}  storage",
        "message",
        "role",
        "state",
        "parts",
        "technical",
        "bytes"
    )?;
    for m in &list {
        let state = match (m.role.as_str(), m.completed) {
            ("assistant", true) => "complete",
            ("assistant", false) => "running?",
            _ => "",
        };
        say!(
            "{:<32} {:<9} {:<10} {:>5} {:>9} {:>11}  {}",
            output::printable(&m.message_id),
            output::printable(&m.role),
            state,
            m.parts,
            m.technical_parts,
            output::bytes(m.technical_bytes),
            m.storage
        )?;
    }
    // Completed assistant messages with technical parts, split by whether a prune of them can
    // be written where they are stored.
    let mut prunable = 0;
    let mut read_only: Option<(usize, String)> = None;
    for m in list
        .iter()
        .filter(|m| m.role == "assistant" && m.completed && m.technical_parts > 0)
    {
        match store.read_only_reason(session, &m.message_id) {
            None => prunable += 1,
            Some(why) => {
                let (count, _) = read_only.get_or_insert((0, why));
                *count += 1;
            }
        }
    }
    say!("{} message(s), {prunable} with tool or reasoning parts to prune (preview one with `{} preview {session} MESSAGE`)", list.len(), config.invocation)?;
    if let Some((count, why)) = read_only {
        say!("{count} with tool or reasoning parts cannot be pruned where they are stored: {why}")?;
    }
    Ok(Outcome::Done)
}
