//! `session-prune prune-batch SESSION --candidates FILE`: CodeNomad's `pruneBatch`. Every
//! technical part of each candidate is pruned in its own transaction, with its own receipt and
//! event; one candidate's refusal does not stop the others. `--json` prints
//! `{results:[{messageID, result}]}`. `--dry-run` checks each candidate as a prune would and
//! writes nothing.

use pruning_engine::{
    BatchItem, BatchResult, BlockedReason, DryRun, PruneBatchRequest, PruneRequest, PruneResult,
};

use super::{open_engine, open_store, Outcome};
use crate::cli::config::Config;
use crate::output;

/// Runs the batches in order.
pub fn run(
    config: &Config,
    batches: &[PruneBatchRequest],
    dry_run: bool,
) -> anyhow::Result<Outcome> {
    let mut results = Vec::new();
    if dry_run {
        super::check_binding(config)?;
        let store = open_store(config)?;
        for batch in batches {
            for candidate in &batch.candidates {
                let request = PruneRequest::all_technical(
                    batch.session_id.clone(),
                    candidate.message_id.clone(),
                    candidate.revision.clone(),
                )?
                .within(batch.scope.clone());
                let (result, line) = match pruning_engine::dry_run(&store, &request)? {
                    Err(refusal) => (
                        PruneResult::Blocked {
                            reason: refusal.reason,
                        },
                        format!("would be blocked: {}: {}", refusal.reason, refusal.detail),
                    ),
                    Ok(DryRun::AlreadyPruned(receipt)) => (
                        PruneResult::Pruned {
                            message_id: receipt.message_id.clone(),
                            revision: receipt.revision_after.clone(),
                            removed_count: receipt.removed_count,
                        },
                        format!("already pruned (receipt {})", receipt.receipt_id),
                    ),
                    Ok(DryRun::Plan(plan)) => (
                        PruneResult::Pruned {
                            message_id: candidate.message_id.clone(),
                            revision: plan.revision_after.clone(),
                            removed_count: plan.remove.len() as u32,
                        },
                        format!(
                            "would remove {} part(s), {}",
                            plan.remove.len(),
                            output::bytes(plan.bytes)
                        ),
                    ),
                };
                if !config.json {
                    println!("{} {line}", candidate.message_id);
                }
                results.push(BatchItem {
                    message_id: candidate.message_id.clone(),
                    result,
                });
            }
        }
        if !config.json {
            println!("dry run: nothing written");
        }
    } else {
        let engine = open_engine(config)?;
        for batch in batches {
            let outcome = engine.prune_batch(batch);
            for (item, (_, detail)) in outcome.result().results.into_iter().zip(&outcome.items) {
                let why = match detail {
                    Ok(done) => done.refusal.as_ref().map(|r| r.detail.clone()),
                    Err(error) => Some(format!("{error}")),
                };
                let line = describe(&item.result, why.as_deref());
                if !config.json {
                    println!("{} {line}", item.message_id);
                } else if why.is_some() {
                    // The JSON document carries only the contract's reason; say why on stderr.
                    eprintln!("{} {line}", item.message_id);
                }
                results.push(item);
            }
        }
    }
    let blocked = results
        .iter()
        .filter(|item| matches!(item.result, PruneResult::Blocked { .. }))
        .count();
    if config.json {
        output::json_document(&BatchResult { results })?;
    } else {
        println!(
            "{} candidate(s): {} pruned, {blocked} blocked",
            results.len(),
            results.len() - blocked
        );
    }
    Ok(if blocked == 0 {
        Outcome::Done
    } else {
        Outcome::Blocked
    })
}

fn describe(result: &PruneResult, why: Option<&str>) -> String {
    match result {
        PruneResult::Pruned {
            revision,
            removed_count,
            ..
        } => format!("pruned: {removed_count} part(s) removed, revision {revision}"),
        PruneResult::Blocked { reason } => {
            let hint = match reason {
                BlockedReason::Conflict => {
                    " (run history --purpose prune again for fresh revisions)"
                }
                _ => "",
            };
            format!("blocked: {reason}: {}{hint}", why.unwrap_or(""))
        }
    }
}
