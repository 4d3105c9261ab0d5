//! `session-prune audit [--session ID]`: checks every receipt against the database and the
//! journal (read-only: no write, no fsync). Exit 0 when everything holds, 1 with a report of
//! every discrepancy, 3 when another process (a prune, `serve`) holds the journal.
//! docs/ARCHITECTURE.md, "Audit", says what is checked.

use pruning_engine::{AuditReport, AuditScope, DiscrepancyKind, Engine};

use super::{open_journal_for_reading, open_store, Outcome};
use crate::cli::config::Config;
use crate::cli::error::ConfigError;
use crate::output;
use crate::output::say;

/// `audit` flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only the receipts and events of this session (the receipt chain is always checked whole).
    #[arg(long, value_name = "ID")]
    session: Option<String>,
}

/// Audits, prints the report, and exits 0 when it holds, 1 otherwise.
pub fn run(Args { session }: Args, config: &Config) -> anyhow::Result<Outcome> {
    if session.as_deref().is_some_and(|id| id.trim().is_empty()) {
        return Err(ConfigError::EmptyScope("--session").into());
    }
    let scope = match session.as_deref() {
        Some(id) => AuditScope::Session(id),
        None => AuditScope::All,
    };
    // A file too damaged to be read is the audit's finding, not its failure.
    let audited = match super::open::refuse_cut_short(config) {
        Ok(()) => audited(config, scope),
        Err(damaged) => Err(damaged.into()),
    };
    let report = match audited {
        Ok(Ok(report)) => report,
        Ok(Err(busy_journal)) => return busy(&busy_journal, config.json),
        Err(error) => match damage_of(&error)
            .or_else(|| super::diagnose::damage_in_words(&format!("{error:#}"), config))
        {
            Some(detail) => AuditReport::of_a_damaged_database(detail),
            None => return Err(error),
        },
    };
    if config.json {
        output::json_document(&report)?;
    } else {
        print(&report)?;
    }
    Ok(if report.ok {
        Outcome::Done
    } else {
        Outcome::Failed
    })
}

/// Reports the journal held by another process (exit 3: nothing was checked): the audit cannot
/// vouch for receipts without their second witness, and `serve` answers `GET .../audit`.
/// The audit of `scope`, or `Ok(Err(..))` when another process holds the journal.
fn audited(
    config: &Config,
    scope: AuditScope<'_>,
) -> anyhow::Result<Result<AuditReport, anyhow::Error>> {
    let store = open_store(config)?;
    super::require_opencode(&store, &config.db)?;
    let journal = match open_journal_for_reading(&config.journal) {
        Ok(journal) => journal,
        Err(error) if super::journal_busy(&error) => return Ok(Err(error)),
        Err(error) => return Err(error),
    };
    Ok(Ok(match journal {
        // Opened read-only, with the engine's binding check: a journal of another database is
        // refused, as every command refuses it.
        Some(journal) => Engine::open_read_only(store, journal)?.audit(scope)?,
        None => pruning_engine::audit(&store, None, scope)?,
    }))
}

/// What a store's refusal of a damaged file says (docs/ARCHITECTURE.md, "Sound files"), when
/// that is what `error` is.
fn damage_of(error: &anyhow::Error) -> Option<String> {
    use pruning_engine::{EngineError, StoreError};
    error.chain().find_map(|cause| {
        let store = cause.downcast_ref::<StoreError>().or_else(|| {
            match cause.downcast_ref::<EngineError>() {
                Some(EngineError::Store(store)) => Some(store),
                _ => None,
            }
        });
        match store {
            Some(StoreError::Damaged { detail, .. }) => Some(detail.clone()),
            _ => None,
        }
    })
}

fn busy(error: &anyhow::Error, json: bool) -> anyhow::Result<Outcome> {
    let detail = super::busy_detail(error);
    eprintln!("blocked: {detail} (a running `serve` audits with GET /api/workspaces/{{id}}/session-pruning/audit)");
    if json {
        output::json_line(&serde_json::json!({
            "status": "blocked",
            "reason": "maintenance_required",
        }))?;
    }
    Ok(Outcome::Blocked)
}

/// The report in words: a summary line, then each discrepancy and each change, one per line.
fn print(report: &AuditReport) -> std::io::Result<()> {
    let verdict = if report.ok {
        "everything holds".to_string()
    } else {
        format!("{} discrepancy(ies)", report.discrepancies.len())
    };
    say!(
        "audit: {} receipt(s) of {} message(s), {} journal event(s), a receipt chain of {}: {verdict}",
        report.receipts,
        report.messages,
        report.events,
        report.chain.length,
    )?;
    if let Some(epoch) = report.journal_epoch.filter(|epoch| epoch.number > 1) {
        say!(
            "  journal epoch {}: events numbered after #{}; {} receipt(s) of the epochs before checked without a journal (theirs was lost)",
            epoch.number,
            epoch.after_seq,
            epoch.earlier_receipts
        )?;
    }
    if report.archive.checked > 0 || report.archive.purged > 0 {
        say!(
            "  archive: {} entry(ies) read back and hashed, {} purged on purpose",
            report.archive.checked,
            report.archive.purged
        )?;
    }
    for discrepancy in &report.discrepancies {
        say!("  discrepancy: {}", output::printable(&discrepancy.detail))?;
    }
    let mut advised: Vec<&str> = Vec::new();
    for discrepancy in &report.discrepancies {
        let advice = remedy(discrepancy.kind);
        if !advised.contains(&advice) {
            advised.push(advice);
        }
    }
    for advice in advised {
        say!("  what to do: {advice}")?;
    }
    if !report.changed_since.is_empty() {
        say!(
            "{} pruned message(s) changed since their newest receipt (not a discrepancy):",
            report.changed_since.len()
        )?;
        for change in &report.changed_since {
            say!("  {}", output::printable(&change.detail))?;
        }
    }
    if !report.awaiting_recovery.is_empty() {
        say!(
            "{} committed prune(s) awaiting recovery (not a discrepancy):",
            report.awaiting_recovery.len()
        )?;
        for pending in &report.awaiting_recovery {
            say!("  {}", pending.detail)?;
        }
    }
    if !report.missing_spill_files.is_empty() {
        say!(
            "{} part(s) name a spill file that is not in tool-output/ (not a discrepancy: OpenCode \
             removes spill files after 7 days; a part `restore` put back after a clean with \
             --include-spill-files removed its file is one too; its output was cut there):",
            report.missing_spill_files.len()
        )?;
        for missing in report.missing_spill_files.iter().take(MISSING_SHOWN) {
            say!(
                "  part {} of session {}: {}",
                output::printable(&missing.part_id),
                output::printable(&missing.session_id),
                output::printable(&missing.file)
            )?;
        }
        if report.missing_spill_files.len() > MISSING_SHOWN {
            say!(
                "  and {} more (--json lists them all)",
                report.missing_spill_files.len() - MISSING_SHOWN
            )?;
        }
    }
    Ok(())
}

/// Parts with a missing spill file the text report lists by name (`--json` lists them all).
const MISSING_SHOWN: usize = 20;

/// What a person can do about a discrepancy of `kind`, in words (one sentence per family of
/// kinds; docs/ARCHITECTURE.md, "Audit").
fn remedy(kind: DiscrepancyKind) -> &'static str {
    match kind {
        DiscrepancyKind::ReceiptEdited
        | DiscrepancyKind::ReceiptInconsistent
        | DiscrepancyKind::ReceiptMissing
        | DiscrepancyKind::ReceiptUnchained
        | DiscrepancyKind::ReceiptUnreadable => {
            "the receipt table was changed outside session-prune: restore session_prune_receipt \
             and session_prune_meta from a copy of the database taken after its last prune (the \
             journal still lists every committed prune: `session-prune events`)"
        }
        DiscrepancyKind::DatabaseDamaged => {
            "the database file is damaged: no prune, restore, compaction or vacuum runs on it. \
             Stop OpenCode and keep a copy of the file with its -wal; when only indexes are out \
             of step, rebuild them (sqlite3 opencode.db REINDEX), otherwise recover the copy \
             into a new file (sqlite3 opencode.db .recover | sqlite3 recovered.db) and audit that"
        }
        DiscrepancyKind::PartBack => {
            "a pruned part is back (a restored backup or a sync wrote it): `clean --apply` prunes \
             it again while its message is still prunable"
        }
        DiscrepancyKind::SnapshotBack => {
            "a snapshot event a prune or a compaction removed is back in table event (a restored \
             backup or a sync wrote it): `clean --apply` compacts it again where it is \
             superseded, and prunes a part whose rows came back with it; a snapshot of a part \
             pruned for good stays until the database is restored from a copy taken after the \
             prune"
        }
        DiscrepancyKind::ContentBack => {
            "what a prune removed is back in its message (an item of a V2 message, or the file \
             bodies of a user message's diffs; a restored backup or a sync wrote it): \
             `clean --apply` prunes it again (with `--diffs` for the bodies)"
        }
        DiscrepancyKind::ArchiveMissing | DiscrepancyKind::ArchiveDamaged => {
            "the prune archive (<database>.prune-archive) lost or damaged entries, so those \
             prunes cannot be restored: put back the archive from a backup taken with the \
             database (the pruned rows themselves are gone from the database either way)"
        }
        // The journal's side, and any kind added later.
        _ => {
            "the journal and the database disagree: check that --journal names this database's \
             own journal; a copy of the database, or a backup restored without its journal, \
             holds receipts another journal never saw (back the two files up together)"
        }
    }
}
