//! `session-prune window SESSION [--latest|--oldest|--around|--before|--after MESSAGE]`: at most
//! 200 messages of a session, oldest first, as `POST .../session-history/window` answers them
//! (`--json` prints the same bytes; read-only).

use pruning_engine::browse::{Target, WindowRequest, WindowResult};
use serde_json::Value;

use super::{open_reader, Outcome};
use crate::cli::config::Config;
use crate::output;
use crate::output::say;

/// `window` arguments: where the window lies (the newest messages by default).
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("target").args(["latest", "oldest", "around", "before", "after"])))]
pub struct Args {
    /// Session id (ses_...).
    session: String,
    /// The newest messages (the default).
    #[arg(long)]
    latest: bool,
    /// The oldest messages.
    #[arg(long)]
    oldest: bool,
    /// 80 messages before MESSAGE and 120 from it on.
    #[arg(long, value_name = "MESSAGE")]
    around: Option<String>,
    /// The window before MESSAGE: 184 messages before it and the 16 from it on (a window's
    /// `older` names it).
    #[arg(long, value_name = "MESSAGE")]
    before: Option<String>,
    /// The window after MESSAGE: the 16 up to it and 184 after it (a window's `newer` names
    /// it).
    #[arg(long, value_name = "MESSAGE")]
    after: Option<String>,
}

/// Validates the request (exit 2), then reads the window: exit 0, 3 when blocked
/// (`anchor_missing`, or a message or window over its size bound), 2 for an unknown session.
pub fn run(args: Args, config: &Config) -> anyhow::Result<Outcome> {
    let target = match (args.oldest, args.around, args.before, args.after) {
        (true, ..) => Target::Oldest {},
        (_, Some(message_id), ..) => Target::Around { message_id },
        (_, _, Some(message_id), _) => Target::Before { message_id },
        (.., Some(message_id)) => Target::After { message_id },
        _ => Target::Latest {},
    };
    let request = WindowRequest {
        session_id: args.session,
        target,
    }
    .validate()?;
    let result = open_reader(config, &request.session_id)?.window(&request)?;
    let ended = match result {
        WindowResult::Window { .. } => Outcome::Done,
        WindowResult::Blocked { .. } => Outcome::Blocked,
    };
    let printed = if config.json {
        output::json_compact(&result)
    } else {
        print_human(&config.invocation, &request, &result).map_err(Into::into)
    };
    output::unless_reader_gone(printed, ended)
}

fn print_human(
    invocation: &str,
    request: &WindowRequest,
    result: &WindowResult,
) -> std::io::Result<()> {
    let WindowResult::Window {
        messages,
        older,
        newer,
        ..
    } = result
    else {
        if let WindowResult::Blocked { reason } = result {
            say!("blocked: {reason}: {}", why(reason.as_str()))?;
        }
        return Ok(());
    };
    say!(
        "{:<32} {:<12} {:>15} {:>6}",
        "message",
        "type",
        "created (ms)",
        "parts"
    )?;
    for message in messages {
        // V1: {info, parts}; V2: the row with its `content`.
        let (info, parts) = match message.get("info") {
            Some(info) => (info, message.get("parts")),
            None => (message, message.get("content")),
        };
        let text = |value: Option<&Value>| value.and_then(Value::as_str).unwrap_or("").to_string();
        let kind = text(info.get("role").or_else(|| info.get("type")));
        let created = info
            .pointer("/time/created")
            .and_then(Value::as_i64)
            .map_or(String::new(), |t| t.to_string());
        let parts = parts.and_then(Value::as_array).map_or(0, Vec::len);
        say!(
            "{:<32} {:<12} {:>15} {:>6}",
            output::printable(&text(info.get("id"))),
            output::printable(&kind),
            created,
            parts
        )?;
    }
    let session = &request.session_id;
    say!("{} message(s)", messages.len())?;
    if let Some(Target::Before { message_id }) = older {
        say!("older: {invocation} window {session} --before {message_id}")?;
    }
    if let Some(Target::After { message_id }) = newer {
        say!("newer: {invocation} window {session} --after {message_id}")?;
    }
    Ok(())
}

/// A blocked window's reason in words.
fn why(reason: &str) -> &'static str {
    match reason {
        "anchor_missing" => "the message is not in this session, or a staged revert hides it",
        "unsupported_storage" => {
            "a message is over 16 MiB, the window over 24 MiB, or a row is not the JSON OpenCode writes"
        }
        _ => "the session could not be read",
    }
}
