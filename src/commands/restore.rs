//! `session-prune restore RECEIPT [--dry-run]`: undo one archived prune. The rows it removed go
//! back exactly, from the archive beside the database, in one transaction with a receipt of the
//! restore, journaled and announced (`rpc.codenomad.session-pruning.restored`) like a prune.
//! Exit 0 restored, 3 blocked (`conflict` when the message changed since the prune), 2 bad input.
//! `--dry-run` runs every check and puts the rows back in a transaction it rolls back.

use pruning_engine::{BlockedReason, RestoreOutcome, RestorePlan, RestoreRequest, RestoreResult};
use serde::Serialize;
use uuid::Uuid;

use super::{open_engine_unless_busy, open_store, open_store_for_writing, Archiving, Outcome};
use crate::cli::config::Config;
use crate::cli::error::ConfigError;
use crate::output;
use crate::output::say;

/// `restore` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The receipt id of the prune to undo (from `receipts`); the prune must have been made
    /// with --archive.
    receipt: String,
    /// Check the restore now (the message unchanged since the prune, its archive entry whole)
    /// and print what would be put back; write nothing.
    #[arg(long)]
    dry_run: bool,
}

/// The `--dry-run --json` document: `{status:"dry-run", receiptID, sessionID, messageID,
/// revisionAfter, restoredCount, rows, bytes}`; `rows` and `bytes` count every row put back
/// (parts and their event snapshots, or the V2 message row) and their `data`. A prune already
/// restored gives `{status:"already-restored", receiptID (the restore's), sessionID, messageID,
/// revision}`.
#[derive(Debug, Serialize)]
struct DryRunDocument<'a> {
    status: &'static str,
    #[serde(rename = "receiptID")]
    receipt_id: Uuid,
    #[serde(rename = "sessionID")]
    session_id: &'a str,
    #[serde(rename = "messageID")]
    message_id: &'a str,
    #[serde(rename = "revisionAfter")]
    revision_after: &'a str,
    #[serde(rename = "restoredCount")]
    restored_count: usize,
    rows: usize,
    bytes: u64,
}

/// Validates the receipt id (exit 2 on a bad one), then restores or checks.
pub fn run(args: Args, config: &Config) -> anyhow::Result<Outcome> {
    let receipt_id = Uuid::parse_str(args.receipt.trim())
        .map_err(|_| ConfigError::ReceiptId(args.receipt.clone()))?;
    let request = RestoreRequest::new(receipt_id);
    {
        use pruning_engine::SessionStore as _;
        if open_store(config)?.receipt(receipt_id)?.is_none() {
            return Err(super::UnknownReceipt(receipt_id).into());
        }
    }
    if args.dry_run {
        return plan(config, &request);
    }
    // A receipt that cannot be restored is refused without opening the journal.
    {
        let store = open_store(config)?;
        if let Err(refusal) = pruning_engine::restorable(&store, receipt_id)? {
            return blocked(config, refusal.reason, &refusal.detail);
        }
    }
    let engine = match open_engine_unless_busy(config, Archiving::Off, super::Soundness::Required)?
    {
        Ok(engine) => engine,
        Err(detail) => return blocked(config, BlockedReason::MaintenanceRequired, &detail),
    };
    let outcome = engine.restore(&request)?;
    let ended = match outcome.result {
        RestoreResult::Restored { .. } => Outcome::Done,
        RestoreResult::Blocked { .. } => Outcome::Blocked,
    };
    let printed = if config.json {
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

fn plan(config: &Config, request: &RestoreRequest) -> anyhow::Result<Outcome> {
    if let Err(detail) = super::check_binding_unless_busy(config)? {
        return blocked(config, BlockedReason::MaintenanceRequired, &detail);
    }
    let store = open_store_for_writing(config)?;
    let plan: RestorePlan = match pruning_engine::restore_dry_run(&store, request)? {
        Ok(plan) => plan,
        Err(refusal) => return blocked(config, refusal.reason, &refusal.detail),
    };
    if let Some(already) = &plan.already {
        if config.json {
            output::json_document(&serde_json::json!({
                "status": "already-restored",
                "receiptID": already.receipt_id,
                "sessionID": already.session_id,
                "messageID": already.message_id,
                "revision": already.revision_after,
            }))?;
        } else {
            say!(
                "dry run: already restored (receipt {}); a restore would return it",
                already.receipt_id
            )?;
        }
        return Ok(Outcome::Done);
    }
    let doc = DryRunDocument {
        status: "dry-run",
        receipt_id: request.receipt_id,
        session_id: &plan.pruned.session_id,
        message_id: &plan.pruned.message_id,
        revision_after: &plan.pruned.revision_before,
        restored_count: plan.pruned.part_ids.len(),
        rows: plan.rows,
        bytes: plan.bytes,
    };
    if config.json {
        output::json_document(&doc)?;
    } else {
        say!(
            "dry run: would put back {} of {} ({} row(s), {} of row data); nothing written",
            output::removed(&plan.pruned),
            output::subject(&plan.pruned),
            doc.rows,
            output::bytes(doc.bytes)
        )?;
        if plan.pruned.is_compaction() {
            say!("every snapshot would still be superseded by a newer one of what it holds")?;
        } else {
            say!(
                "the message is unchanged since the prune; revision after would be {}",
                doc.revision_after
            )?;
        }
    }
    Ok(Outcome::Done)
}

/// Refused before or without a transaction: nothing was journaled or written.
fn blocked(config: &Config, reason: BlockedReason, detail: &str) -> anyhow::Result<Outcome> {
    let detail = output::printable(detail);
    if config.json {
        output::json_document(&RestoreResult::Blocked { reason })?;
        eprintln!("blocked: {reason}: {detail}");
    } else {
        say!("blocked: {reason}: {detail}")?;
    }
    Ok(Outcome::Blocked)
}

/// Prints a restore outcome for people.
fn print_human(outcome: &RestoreOutcome) -> std::io::Result<()> {
    match &outcome.result {
        RestoreResult::Blocked { reason } => {
            let detail = outcome.refusal.as_ref().map_or("", |r| r.detail.as_str());
            say!("blocked: {reason}: {}", output::printable(detail))?;
            if outcome.intent_id.is_some() {
                say!("nothing was changed; the intent is journaled as refused")?;
            } else {
                say!("nothing was changed")?;
            }
        }
        RestoreResult::Restored {
            receipt_id,
            message_id,
            revision,
            restored_count,
            ..
        } => {
            if outcome.retried {
                say!(
                    "already restored by an identical request: same receipt, event announced again"
                )?;
            }
            match &outcome.receipt {
                Some(receipt) => say!(
                    "restored  {}: {} put back",
                    output::subject(receipt),
                    output::removed(receipt)
                )?,
                None => say!("restored  {message_id}: {restored_count} part(s) put back")?,
            }
            say!("revision  {revision}")?;
            say!("receipt   {receipt_id}")?;
            if let Some(event) = &outcome.event {
                say!("event     #{} {} {}", event.seq, event.event_type, event.id)?;
            }
        }
    }
    Ok(())
}
