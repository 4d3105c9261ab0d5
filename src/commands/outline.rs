//! `session-prune outline SESSION [--after SEQ] [--cursor AFTER:THROUGH]`: one entry per
//! message (sequence number, type, tool and reasoning parts, first tool), a page of up to
//! 16,384, as `POST .../session-history/outline` answers it (`--json` prints the same bytes;
//! read-only).

use pruning_engine::browse::{OutlineCursor, OutlineRequest, OutlineResult};

use super::{open_reader, Outcome};
use crate::cli::config::Config;
use crate::cli::error::ConfigError;
use crate::output;
use crate::output::say;

/// `outline` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id (ses_...).
    session: String,
    /// Start after this sequence number (-1, the default: from the start).
    #[arg(long, value_name = "SEQ", default_value_t = -1, allow_negative_numbers = true)]
    after: i64,
    /// Go on with a scan: the `cursor` a page printed, as AFTER:THROUGH.
    #[arg(long, value_name = "AFTER:THROUGH", conflicts_with = "after")]
    cursor: Option<String>,
}

/// Validates the request (exit 2), then reads one page: exit 0, 2 for an unknown session.
pub fn run(args: Args, config: &Config) -> anyhow::Result<Outcome> {
    let cursor = args.cursor.as_deref().map(parse_cursor).transpose()?;
    let request = OutlineRequest {
        session_id: args.session,
        cursor,
        after: args.after,
        known: Vec::new(),
    }
    .validate()?;
    let result = open_reader(config, &request.session_id)?.outline(&request)?;
    let ended = match result {
        OutlineResult::Outline { .. } => Outcome::Done,
        OutlineResult::Blocked { .. } => Outcome::Blocked,
    };
    let printed = if config.json {
        output::json_compact(&result)
    } else {
        print_human(&config.invocation, &request.session_id, &result).map_err(Into::into)
    };
    output::unless_reader_gone(printed, ended)
}

/// `AFTER:THROUGH`, two sequence numbers.
fn parse_cursor(text: &str) -> Result<OutlineCursor, ConfigError> {
    let parsed = text
        .split_once(':')
        .and_then(|(a, t)| Some((a.parse().ok()?, t.parse().ok()?)));
    match parsed {
        Some((after, through)) => Ok(OutlineCursor { after, through }),
        None => Err(ConfigError::OutlineCursor(text.to_string())),
    }
}

fn print_human(invocation: &str, session: &str, result: &OutlineResult) -> std::io::Result<()> {
    let OutlineResult::Outline {
        entries,
        total,
        cursor,
        ..
    } = result
    else {
        if let OutlineResult::Blocked { reason } = result {
            say!("blocked: {reason}: the session could not be read as OpenCode writes it")?;
        }
        return Ok(());
    };
    say!(
        "{:>7} {:<32} {:<12} {:>5} {:>9}  first tool",
        "seq",
        "message",
        "type",
        "tools",
        "reasoning"
    )?;
    for entry in entries {
        say!(
            "{:>7} {:<32} {:<12} {:>5} {:>9}  {}",
            entry.seq,
            output::printable(&entry.id),
            output::printable(&entry.kind),
            entry.tools,
            entry.reasoning,
            output::printable(entry.tool_name.as_deref().unwrap_or(""))
        )?;
    }
    say!("{} of {total} message(s)", entries.len())?;
    if let Some(cursor) = cursor {
        say!(
            "more: {invocation} outline {session} --cursor {}:{}",
            cursor.after,
            cursor.through
        )?;
    }
    Ok(())
}
