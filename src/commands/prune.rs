//! `session-prune prune SESSION MESSAGE --revision REV (--indexes I,J | --all-technical)`:
//! journal, apply and announce one prune; `--dry-run` runs every check a prune runs (the session
//! fence, the receipt lookup, the planner) in a write transaction it rolls back, and writes
//! nothing (on read-only media it is refused, as the prune would be: docs/read-only-media.md).

use pruning_engine::{BlockedReason, DryRun, Plan, PruneOutcome, PruneRequest, PruneResult};
use serde::Serialize;

use super::{open_engine_unless_busy, open_store_for_writing, Archiving, Outcome};
use clap::ArgGroup;

use crate::cli::args::ScopeArgs;
use crate::cli::config::{scope, Config};
use crate::cli::error::ConfigError;
use crate::output;
use crate::output::say;

/// The `--dry-run --json` document: `{status:"dry-run", messageID, revision, revisionAfter,
/// indexes, removedCount, bytes}`; `bytes` is the row data the prune would free, counted as its
/// receipt will count it (the part rows and their event snapshots).
#[derive(Debug, Serialize)]
pub struct DryRunDocument<'a> {
    status: &'static str,
    #[serde(rename = "messageID")]
    message_id: &'a str,
    revision: String,
    #[serde(rename = "revisionAfter")]
    revision_after: String,
    indexes: Vec<usize>,
    #[serde(rename = "removedCount")]
    removed_count: usize,
    bytes: u64,
}

impl<'a> DryRunDocument<'a> {
    /// What a prune of `message_id` would do, from its plan and the bytes it would free.
    pub fn new(message_id: &'a str, plan: Plan, freed: u64) -> Self {
        Self {
            status: "dry-run",
            message_id,
            revision: plan.revision_before,
            revision_after: plan.revision_after,
            removed_count: plan.remove.len(),
            indexes: plan.remove,
            bytes: freed,
        }
    }
}

/// `prune` arguments.
#[derive(Debug, clap::Args)]
#[command(group(ArgGroup::new("selection").required(true).args(["indexes", "all_technical"])))]
pub struct Args {
    /// Session id (ses_...).
    session: String,
    /// Message id (msg_...).
    message: String,
    /// The revision printed by `preview` (64 hex characters).
    #[arg(long, value_name = "REV")]
    revision: String,
    /// Content indexes of the parts to remove, comma-separated (from `preview`).
    #[arg(long, value_name = "I,J,...", allow_hyphen_values = true)]
    indexes: Option<String>,
    /// Remove every tool and reasoning part of the message.
    #[arg(long)]
    all_technical: bool,
    /// Check the request against the message now and print what would be removed; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Keep the rows the prune removes in the archive beside the database
    /// (`<database>.prune-archive`), durable before the prune commits; its receipt records the
    /// entry's hash. The default once that archive exists.
    #[arg(long)]
    archive: bool,
    /// Do not archive, even where the database has an archive (then every prune is archived
    /// unless this is given: a prune that is not archived cannot be undone, nor can the
    /// earlier prunes of its message).
    #[arg(long, conflicts_with = "archive")]
    no_archive: bool,
    #[command(flatten)]
    scope: ScopeArgs,
}

/// Validates the request (exit 2 on a bad one), then prunes or plans it.
pub fn run(args: Args, config: &Config) -> anyhow::Result<Outcome> {
    let scope = scope(args.scope)?;
    let request = match args.indexes {
        Some(list) => {
            let indexes = parse_indexes(&list)?;
            PruneRequest::with_indexes(args.session, args.message, args.revision, &indexes)?
        }
        None => PruneRequest::all_technical(args.session, args.message, args.revision)?,
    };
    execute(
        config,
        &request.within(scope),
        args.dry_run,
        Archiving::chosen(config, args.archive, args.no_archive),
    )
}

/// Parses `0,2,5` (spaces allowed). An empty list is left for the contract to reject.
///
/// Errors: [`ConfigError::Index`] naming the first item that is not an integer.
fn parse_indexes(list: &str) -> Result<Vec<i64>, ConfigError> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<i64>()
                .map_err(|_| ConfigError::Index(s.to_string()))
        })
        .collect()
}

/// Prunes (or plans) one message.
pub fn execute(
    config: &Config,
    request: &PruneRequest,
    dry_run: bool,
    archiving: Archiving,
) -> anyhow::Result<Outcome> {
    if dry_run {
        return plan(config, request);
    }
    let engine = match open_engine_unless_busy(config, archiving, super::Soundness::Required)? {
        Ok(engine) => engine,
        Err(detail) => return busy(config, &detail),
    };
    let outcome = engine.prune(request)?;
    let ended = match outcome.result {
        PruneResult::Pruned { .. } => Outcome::Done,
        PruneResult::Blocked { .. } => Outcome::Blocked,
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
        output::json_document(&outcome.result)
    } else {
        print_human(&outcome).map_err(Into::into)
    };
    output::unless_reader_gone(printed, ended)
}

fn plan(config: &Config, request: &PruneRequest) -> anyhow::Result<Outcome> {
    if let Err(detail) = super::check_binding_unless_busy(config)? {
        return busy(config, &detail);
    }
    let store = open_store_for_writing(config)?;
    let plan = match pruning_engine::dry_run(&store, request)? {
        Err(refusal) => {
            if config.json {
                output::json_document(&PruneResult::Blocked {
                    reason: refusal.reason,
                })?;
                eprintln!(
                    "blocked: {}: {}",
                    refusal.reason,
                    output::printable(&refusal.detail)
                );
            } else {
                say!(
                    "dry run: would be blocked: {}: {}",
                    refusal.reason,
                    output::printable(&refusal.detail)
                )?;
            }
            return Ok(Outcome::Blocked);
        }
        Ok(DryRun::AlreadyPruned(receipt)) => {
            let result = PruneResult::Pruned {
                message_id: receipt.message_id.clone(),
                revision: receipt.revision_after.clone(),
                removed_count: receipt.removed_count,
            };
            if config.json {
                output::json_document(&result)?;
            } else {
                say!(
                    "dry run: already pruned by an identical request (receipt {}); a prune would return it",
                    receipt.receipt_id
                )?;
            }
            return Ok(Outcome::Done);
        }
        Ok(DryRun::Plan { plan, .. }) => plan,
    };
    let freed = store.freed_bytes(
        &request.session_id,
        &request.message_id,
        &plan.remove,
        plan.bytes,
    )?;
    let doc = DryRunDocument::new(&request.message_id, plan, freed);
    if config.json {
        output::json_document(&doc)?;
    } else {
        let indexes: Vec<String> = doc.indexes.iter().map(|i| i.to_string()).collect();
        say!(
            "dry run: would remove {} part(s) [{}], {} of row data (the parts and their event snapshots), from {}; nothing written",
            doc.removed_count,
            indexes.join(","),
            output::bytes(doc.bytes),
            doc.message_id
        )?;
        say!(
            "the session checks passed now; revision after would be {}",
            doc.revision_after
        )?;
    }
    Ok(Outcome::Done)
}

/// Another prune holds the journal: nothing was journaled or written.
fn busy(config: &Config, detail: &str) -> anyhow::Result<Outcome> {
    let blocked = PruneResult::Blocked {
        reason: BlockedReason::MaintenanceRequired,
    };
    if config.json {
        output::json_document(&blocked)?;
        eprintln!("blocked: maintenance_required: {detail}");
    } else {
        say!("blocked: maintenance_required: {detail}")?;
    }
    Ok(Outcome::Blocked)
}

/// Prints a prune outcome for people.
pub fn print_human(outcome: &PruneOutcome) -> std::io::Result<()> {
    match (&outcome.result, &outcome.refusal) {
        (PruneResult::Blocked { reason }, refusal) => {
            let detail = refusal.as_ref().map(|r| r.detail.as_str()).unwrap_or("");
            say!("blocked: {reason}: {}", output::printable(detail))?;
            say!("nothing was changed; the intent is journaled as refused")?;
        }
        (
            PruneResult::Pruned {
                message_id,
                revision,
                removed_count,
            },
            _,
        ) => {
            if outcome.retried {
                say!(
                    "already pruned by an identical request: same receipt, event announced again"
                )?;
            }
            say!("pruned    {message_id}: {removed_count} part(s) removed")?;
            say!("revision  {revision}")?;
            if let Some(receipt) = &outcome.receipt {
                say!(
                    "receipt   {} ({} of row data freed: the parts and their event snapshots)",
                    receipt.receipt_id,
                    output::bytes(receipt.bytes_removed)
                )?;
                if receipt.archive_hash.is_some() {
                    say!(
                        "archived  the removed rows; `session-prune restore {}` puts them back",
                        receipt.receipt_id
                    )?;
                }
            }
            if let Some(event) = &outcome.event {
                say!("event     #{} {} {}", event.seq, event.event_type, event.id)?;
            }
        }
    }
    Ok(())
}
