//! `session-prune prune-batch SESSION --candidates FILE`: CodeNomad's `pruneBatch`. Every
//! technical part of each candidate is pruned whole or not at all (under its own savepoint of a
//! group transaction), with its own receipt and event; one candidate's refusal does not stop the others. `--json` prints
//! `{results:[{messageID, result}]}` with each result in the `prune` shape. `--dry-run` checks
//! each candidate as a prune would and writes nothing; its results are in the
//! `prune --dry-run` shape (`{status:"dry-run", ...}`), blocked, or pruned when an identical
//! prune already committed.

use std::path::PathBuf;

use pruning_engine::history::HistoryCandidate;
use pruning_engine::{
    BatchItem, BatchResult, BlockedReason, DryRun, EngineError, PruneBatchRequest, PruneRequest,
    PruneResult, MAX_BATCH,
};
use pruning_opencode::AutoVacuum;
use serde::Serialize;

use super::prune::DryRunDocument;
use super::{open_engine_unless_busy, open_store_for_writing, Archiving, Outcome};
use crate::cli::args::ScopeArgs;
use crate::cli::config::{scope, Config};
use crate::cli::error::ConfigError;
use crate::output;
use crate::output::say;

/// `prune-batch` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id (ses_...).
    session: String,
    /// JSON file of candidates (`-` for stdin): the output of `history SESSION --purpose prune
    /// --json` (with --all: one page per line), a batch body `{sessionID, candidates}`, or a
    /// bare array of `{messageID, revision, toolCount, reasoningCount}`. Taken 16 at a time.
    #[arg(long, value_name = "FILE")]
    candidates: PathBuf,
    /// Check each candidate as a prune would and print what would be removed; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Keep the rows each prune removes in the archive beside the database
    /// (`<database>.prune-archive`), durable before the prunes commit. The default once that
    /// archive exists.
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

/// Reads and validates the candidates (exit 2 on bad ones), then runs their batches.
pub fn run(args: Args, config: &Config) -> anyhow::Result<Outcome> {
    let scope = scope(args.scope)?;
    let path = args.candidates.display().to_string();
    let bad = |detail: String| ConfigError::Candidates {
        path: path.clone(),
        detail,
    };
    let text = if path == "-" {
        std::io::read_to_string(std::io::stdin()).map_err(|e| bad(e.to_string()))?
    } else {
        std::fs::read_to_string(&args.candidates).map_err(|e| bad(e.to_string()))?
    };
    let candidates = parse_candidates(&text, &args.session).map_err(bad)?;
    let batches = candidates
        .chunks(MAX_BATCH)
        .map(|chunk| {
            PruneBatchRequest::new(args.session.clone(), chunk.to_vec())
                .map(|batch| batch.within(scope.clone()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let archiving = Archiving::chosen(config, args.archive, args.no_archive);
    execute(config, &batches, args.dry_run, archiving)
}

/// A batch body as a file may hold it: `{sessionID, candidates}` and nothing else.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchBody {
    #[serde(rename = "sessionID")]
    session_id: String,
    candidates: Vec<HistoryCandidate>,
}

/// Candidates from history pages (one document, or JSON lines from `history --all --json`), a
/// batch body or a bare array. A batch body for another session, a blocked page, or a message
/// listed twice is refused. No candidates at all is not an error: there is nothing to prune.
fn parse_candidates(text: &str, session: &str) -> Result<Vec<HistoryCandidate>, String> {
    let documents: Vec<serde_json::Value> = match serde_json::from_str(text) {
        Ok(value) => vec![value],
        Err(whole) => text
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()
            .map_err(|_| format!("not JSON: {whole}"))?,
    };
    let mut candidates: Vec<HistoryCandidate> = Vec::new();
    for value in documents {
        let mut page = candidates_of(value, session)?;
        candidates.append(&mut page);
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(twice) = candidates.iter().find(|c| !seen.insert(&c.message_id)) {
        return Err(format!("message {} is listed twice", twice.message_id));
    }
    Ok(candidates)
}

/// The candidates of one JSON document.
fn candidates_of(value: serde_json::Value, session: &str) -> Result<Vec<HistoryCandidate>, String> {
    let bad = |e: serde_json::Error| format!("bad candidate: {e}");
    match value {
        serde_json::Value::Array(_) => serde_json::from_value(value).map_err(bad),
        serde_json::Value::Object(mut page) if page.contains_key("status") => {
            match page.get("status").and_then(|v| v.as_str()) {
                Some("page") => {}
                Some("blocked") => {
                    let reason = page.get("reason").and_then(|v| v.as_str()).unwrap_or("?");
                    return Err(format!(
                        "the input is a blocked history answer ({reason}), not a page of candidates"
                    ));
                }
                _ => return Err("the input is not a history page (status is not \"page\")".into()),
            }
            let list = page.remove("candidates").ok_or(
                "no `candidates` key (expected the output of `history SESSION --purpose prune --json`)",
            )?;
            serde_json::from_value(list).map_err(bad)
        }
        serde_json::Value::Object(_) => {
            let body: BatchBody = serde_json::from_value(value)
                .map_err(|e| format!("not a batch body {{sessionID, candidates}}: {e}"))?;
            if body.session_id != session {
                return Err(format!(
                    "the candidates are for session {}, not {session}",
                    body.session_id
                ));
            }
            Ok(body.candidates)
        }
        _ => Err("expected a JSON object or array".into()),
    }
}

/// Runs the batches in order.
fn execute(
    config: &Config,
    batches: &[PruneBatchRequest],
    dry_run: bool,
    archiving: Archiving,
) -> anyhow::Result<Outcome> {
    if batches.is_empty() {
        if config.json {
            output::json_document(&BatchResult {
                results: Vec::new(),
            })?;
        } else {
            say!("no candidates: nothing to prune")?;
        }
        return Ok(Outcome::Done);
    }
    if dry_run {
        plan(config, batches)
    } else {
        prune(config, batches, archiving)
    }
}

/// Prints one candidate's line: on stdout for people, on stderr beside a JSON document when it
/// says why a candidate was refused.
fn report(config: &Config, message_id: &str, line: &str, refused: bool) -> std::io::Result<()> {
    if !config.json {
        say!("{message_id} {line}")?;
    } else if refused {
        eprintln!("{message_id} {line}");
    }
    Ok(())
}

fn prune(
    config: &Config,
    batches: &[PruneBatchRequest],
    archiving: Archiving,
) -> anyhow::Result<Outcome> {
    let engine = match open_engine_unless_busy(config, archiving, super::Soundness::Required)? {
        Ok(engine) => engine,
        Err(detail) => return all_blocked(config, batches, &detail),
    };
    let mut results = Vec::new();
    let (mut pruned, mut again, mut bytes) = (0, 0, 0u64);
    let mut unjournaled: Option<String> = None;
    for batch in batches {
        let outcome = engine.prune_batch(batch);
        for (item, (_, done)) in outcome.result().results.into_iter().zip(&outcome.items) {
            let line = match done {
                Err(EngineError::CommittedNotJournaled { receipt, cause }) => {
                    pruned += 1;
                    unjournaled = Some(cause.clone());
                    bytes += receipt.bytes_removed;
                    format!(
                        "pruned: {} part(s) removed, {} of row data freed, revision {}; not yet journaled: the next run announces its event",
                        receipt.removed_count,
                        output::bytes(receipt.bytes_removed),
                        receipt.revision_after
                    )
                }
                Err(error) => blocked_line(BlockedReason::Unavailable, &format!("{error}")),
                Ok(done) if done.retried => {
                    again += 1;
                    "already pruned by an identical request: same receipt, event announced again"
                        .to_string()
                }
                Ok(done) => match &done.result {
                    PruneResult::Pruned {
                        removed_count,
                        revision,
                        ..
                    } => {
                        pruned += 1;
                        let freed = done.receipt.as_ref().map_or(0, |r| r.bytes_removed);
                        bytes += freed;
                        format!(
                            "pruned: {removed_count} part(s) removed, {} of row data freed, revision {revision}",
                            output::bytes(freed)
                        )
                    }
                    PruneResult::Blocked { reason } => {
                        let why = done.refusal.as_ref().map_or("", |r| r.detail.as_str());
                        blocked_line(*reason, why)
                    }
                },
            };
            let refused = matches!(item.result, PruneResult::Blocked { .. });
            report(config, &item.message_id, &line, refused)?;
            results.push(item);
        }
    }
    let blocked = results.len() - pruned - again;
    // On a file switched by `vacuum --online-shrink`, the pages the prunes freed go back to the
    // disk now, while OpenCode runs; the prunes stand whatever comes of it.
    let store = engine.store();
    let given = if pruned > 0 && store.auto_vacuum()? == AutoVacuum::Incremental {
        Some(store.give_back_pages(&|| false))
    } else {
        None
    };
    if config.json {
        output::json_document(&BatchResult { results })?;
    } else {
        say!(
            "{} candidate(s): {pruned} pruned ({} of row data freed), {again} already pruned, {blocked} blocked",
            pruned + again + blocked,
            output::bytes(bytes)
        )?;
        match &given {
            Some(Ok(given)) => say!(
                "given back: {} of free pages to the disk in {} step(s) of at most 50 ms; the file: {} -> {}",
                output::bytes(given.bytes),
                given.steps,
                output::bytes(given.file_bytes_before),
                output::bytes(given.file_bytes_after)
            )?,
            Some(Err(_)) => {}
            None if pruned > 0 => say!("the file shrinks only after VACUUM (with OpenCode stopped); SQLite reuses the freed pages meanwhile")?,
            None => {}
        }
    }
    if let Some(Err(error)) = given {
        eprintln!(
            "error: {}",
            super::diagnose::explain(&format!("giving free pages back: {error}"), config)
        );
        return Ok(Outcome::Failed);
    }
    if let Some(cause) = unjournaled {
        eprintln!(
            "error: {}",
            super::diagnose::explain(
                &format!("the journal could not record committed prunes: {cause}"),
                config
            )
        );
        return Ok(Outcome::Failed);
    }
    Ok(if blocked == 0 {
        Outcome::Done
    } else {
        Outcome::Blocked
    })
}

/// Every candidate refused as `maintenance_required` with `detail`: nothing was journaled.
fn all_blocked(
    config: &Config,
    batches: &[PruneBatchRequest],
    detail: &str,
) -> anyhow::Result<Outcome> {
    let reason = BlockedReason::MaintenanceRequired;
    let results: Vec<BatchItem> = batches
        .iter()
        .flat_map(|batch| &batch.candidates)
        .map(|candidate| BatchItem {
            message_id: candidate.message_id.clone(),
            result: PruneResult::Blocked { reason },
        })
        .collect();
    if config.json {
        output::json_document(&BatchResult { results })?;
        eprintln!("blocked: {reason}: {detail}");
    } else {
        say!("blocked: {reason}: {detail}")?;
        say!("nothing was changed; run the batch again")?;
    }
    Ok(Outcome::Blocked)
}

/// One dry-run answer: `{messageID, result}` with the result in the `prune --dry-run` shape.
#[derive(Debug, Serialize)]
struct PlannedItem<'a> {
    #[serde(rename = "messageID")]
    message_id: &'a str,
    result: serde_json::Value,
}

#[derive(Debug, Serialize)]
struct PlannedBatch<'a> {
    results: Vec<PlannedItem<'a>>,
}

fn plan(config: &Config, batches: &[PruneBatchRequest]) -> anyhow::Result<Outcome> {
    if let Err(detail) = super::check_binding_unless_busy(config)? {
        return all_blocked(config, batches, &detail);
    }
    let store = open_store_for_writing(config)?;
    let mut results = Vec::new();
    let (mut would, mut already, mut blocked, mut bytes) = (0, 0, 0, 0u64);
    for batch in batches {
        for candidate in &batch.candidates {
            let id = candidate.message_id.as_str();
            let request = PruneRequest::all_technical(
                batch.session_id.clone(),
                candidate.message_id.clone(),
                candidate.revision.clone(),
            )?
            .within(batch.scope.clone());
            let (result, line, refused) = match pruning_engine::dry_run(&store, &request)? {
                Err(refusal) => {
                    blocked += 1;
                    let result = PruneResult::Blocked {
                        reason: refusal.reason,
                    };
                    (
                        serde_json::to_value(result)?,
                        blocked_line(refusal.reason, &refusal.detail),
                        true,
                    )
                }
                Ok(DryRun::AlreadyPruned(receipt)) => {
                    already += 1;
                    let result = PruneResult::Pruned {
                        message_id: receipt.message_id.clone(),
                        revision: receipt.revision_after.clone(),
                        removed_count: receipt.removed_count,
                    };
                    let line = format!("already pruned (receipt {})", receipt.receipt_id);
                    (serde_json::to_value(result)?, line, false)
                }
                Ok(DryRun::Plan { plan, .. }) => {
                    would += 1;
                    let freed =
                        store.freed_bytes(&batch.session_id, id, &plan.remove, plan.bytes)?;
                    bytes += freed;
                    let line = format!(
                        "would remove {} part(s), {} of row data",
                        plan.remove.len(),
                        output::bytes(freed)
                    );
                    let doc = DryRunDocument::new(id, plan, freed);
                    (serde_json::to_value(doc)?, line, false)
                }
            };
            report(config, id, &line, refused)?;
            results.push(PlannedItem {
                message_id: id,
                result,
            });
        }
    }
    if config.json {
        output::json_document(&PlannedBatch { results })?;
    } else {
        say!(
            "dry run, nothing written: {would} would be pruned ({} of row data), {already} already pruned, {blocked} would be blocked",
            output::bytes(bytes)
        )?;
    }
    Ok(if blocked == 0 {
        Outcome::Done
    } else {
        Outcome::Blocked
    })
}

fn blocked_line(reason: BlockedReason, why: &str) -> String {
    let hint = match reason {
        BlockedReason::Conflict => {
            " (the message changed: list fresh candidates with history --purpose prune)"
        }
        _ => "",
    };
    format!("blocked: {reason}: {}{hint}", output::printable(why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conflict_line_says_how_to_get_fresh_candidates() {
        assert!(
            blocked_line(BlockedReason::Conflict, "changed").contains("history --purpose prune")
        );
        assert_eq!(
            blocked_line(BlockedReason::NotDeletable, "gone"),
            "blocked: not_deletable: gone"
        );
    }
}
