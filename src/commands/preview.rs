//! `session-prune preview SESSION MESSAGE`: the CodeNomad-compatible preview (read-only; no
//! journal is opened).

use pruning_engine::{PreviewRequest, PreviewResult, Refusal};

use super::{open_store, Outcome};
use crate::cli::args::ScopeArgs;
use crate::cli::config::{scope, Config};
use crate::output;
use crate::output::say;

/// `preview` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id (ses_...).
    session: String,
    /// Message id (msg_...).
    message: String,
    #[command(flatten)]
    scope: ScopeArgs,
}

/// Validates the request (exit 2 on a bad one), then previews the message.
pub fn run(args: Args, config: &Config) -> anyhow::Result<Outcome> {
    let request = PreviewRequest::new(args.session, args.message)?.within(scope(args.scope)?);
    execute(config, &request)
}

/// Previews one message.
pub fn execute(config: &Config, request: &PreviewRequest) -> anyhow::Result<Outcome> {
    let store = open_store(config)?;
    super::refuse_rowless(&store, &config.db)?;
    let outcome = pruning_engine::preview(&store, request)?;
    let result = outcome.result;
    let ended = match result {
        PreviewResult::Preview { .. } => Outcome::Done,
        PreviewResult::Blocked { .. } => Outcome::Blocked,
    };
    let printed = if config.json {
        // The words first: they reach stderr even when stdout's reader is gone.
        if let Some(refusal) = &outcome.refusal {
            eprintln!(
                "blocked: {}: {}",
                refusal.reason,
                output::printable(&refusal.detail)
            );
        }
        output::json_document(&result)
    } else {
        print_human(
            &config.invocation,
            request,
            &result,
            outcome.refusal.as_ref(),
        )
        .map_err(Into::into)
    };
    output::unless_reader_gone(printed, ended)
}

/// Prints a preview for people; `invocation` starts the suggested prune command.
pub fn print_human(
    invocation: &str,
    request: &PreviewRequest,
    result: &PreviewResult,
    refusal: Option<&Refusal>,
) -> std::io::Result<()> {
    match result {
        PreviewResult::Blocked { reason } => {
            let detail = refusal.map(|r| r.detail.as_str()).unwrap_or("");
            say!("blocked: {reason}: {}", output::printable(detail))?;
        }
        PreviewResult::Preview {
            revision,
            live_mutation,
            parts,
        } => {
            say!("message   {}", request.message_id)?;
            say!("revision  {revision}")?;
            say!(
                "writable  {}",
                if *live_mutation {
                    "yes (this storage accepts prunes; whether OpenCode is using the session is \
                     checked when you prune, or with prune --dry-run)"
                } else {
                    "no (prunes cannot be written where this message is stored: read-only \
                     media, or an OpenCode 2 row in the session table OpenCode 1.17 to 1.19 share)"
                }
            )?;
            if parts.is_empty() {
                say!("no tool or reasoning parts: nothing to prune")?;
                return Ok(());
            }
            say!("{:>6}  {:<9} {:>10}", "index", "type", "bytes")?;
            for part in parts {
                let kind = match part.kind {
                    pruning_engine::PartKind::Tool => "tool",
                    pruning_engine::PartKind::Reasoning => "reasoning",
                };
                say!("{:>6}  {:<9} {:>10}", part.index, kind, part.bytes)?;
            }
            let total: u64 = parts.iter().map(|p| p.bytes).sum();
            let indexes: Vec<String> = parts.iter().map(|p| p.index.to_string()).collect();
            say!("{} part(s), {} in all", parts.len(), output::bytes(total))?;
            // A command that would be refused is not suggested.
            if *live_mutation {
                say!(
                    "to prune: {invocation} prune {} {} --revision {revision} --indexes {}",
                    request.session_id,
                    request.message_id,
                    indexes.join(",")
                )?;
            }
        }
    }
    Ok(())
}
