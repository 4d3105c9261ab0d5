//! `session-prune demo`: the whole flow on a copy of a small database written by real OpenCode
//! 1.18.34 (tests/fixtures/opencode-1.18.34, built into the binary): sessions, preview, prune,
//! identical retry (same receipt), events replay, receipts. Each step is printed; with `--json`
//! each step is one JSON line `{"step": NAME, ...}`.

use anyhow::{bail, Context};
use pruning_engine::{Engine, Journal, PreviewRequest, PreviewResult, PruneRequest, PruneResult};
use pruning_opencode::{OpenCodeStore, StoreOptions};
use serde_json::json;

use super::{preview, prune, Outcome};
use crate::cli::config::Config;
use crate::output;
use crate::output::say;

/// The fixture database, as OpenCode 1.18.34 wrote it.
const FIXTURE: &[u8] = include_bytes!("../../tests/fixtures/opencode-1.18.34/opencode.db");

/// `demo` flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Keep the demo's temporary folder and print its path.
    #[arg(long)]
    keep: bool,
}

/// Runs the demo in a temporary folder (the global `--db` and `--journal` are not used).
pub fn run(Args { keep }: Args, config: &Config) -> anyhow::Result<Outcome> {
    let json = config.json;
    let dir = tempfile::Builder::new()
        .prefix("session-prune-demo-")
        .tempdir()?;
    let db = dir.path().join("opencode.db");
    let journal_path = dir.path().join("opencode.db.prune-journal");
    std::fs::write(&db, FIXTURE).context("writing the demo database")?;
    let step = |name: &str, text: String, data: serde_json::Value| -> anyhow::Result<()> {
        if json {
            output::json_line(&json!({ "step": name, "data": data }))
        } else {
            say!("\n== {name}\n{text}")?;
            Ok(())
        }
    };
    step(
        "setup",
        format!(
            "copied a database made by OpenCode 1.18.34 to {}",
            db.display()
        ),
        json!({ "db": db, "journal": journal_path }),
    )?;

    let engine = Engine::open(
        OpenCodeStore::open(&db, StoreOptions::default())?,
        Journal::open(&journal_path)?,
    )?;
    let list = engine.store().sessions()?;
    let mut text = String::new();
    for s in list.iter().take(6) {
        text.push_str(&format!(
            "{}  {:>4} messages  {:>9} total  {:>9} prunable  {}\n",
            s.session_id,
            s.messages,
            output::bytes(s.total_bytes),
            output::bytes(s.prunable_bytes),
            output::printable(&s.title)
        ));
    }
    text.push_str(&format!(
        "({} largest of {} sessions)",
        list.len().min(6),
        list.len()
    ));
    step("sessions", text, serde_json::to_value(&list)?)?;

    // The session with the most prunable bytes, its largest completed message.
    let mut by_prunable = list.clone();
    by_prunable.sort_by_key(|s| std::cmp::Reverse(s.prunable_bytes));
    let mut target = None;
    for s in &by_prunable {
        let mut candidates = engine.store().prunable_messages(&s.session_id)?;
        // Only messages this storage accepts prunes of (OpenCode 1.18's V2 rows are read-only).
        candidates.retain(|c| {
            pruning_engine::SessionStore::live_mutation(
                engine.store(),
                &s.session_id,
                &c.message_id,
            )
        });
        candidates.sort_by_key(|c| std::cmp::Reverse(c.technical_bytes));
        if let Some(c) = candidates.into_iter().next() {
            target = Some((s.session_id.clone(), c.message_id));
            break;
        }
    }
    let Some((session_id, message_id)) = target else {
        bail!("the demo database has no prunable message")
    };

    let preview_request = PreviewRequest::new(session_id.clone(), message_id.clone())?;
    let previewed = engine.preview(&preview_request)?;
    let (revision, indexes) = match &previewed {
        PreviewResult::Preview {
            revision, parts, ..
        } => (
            revision.clone(),
            parts.iter().map(|p| i64::from(p.index)).collect::<Vec<_>>(),
        ),
        PreviewResult::Blocked { reason } => {
            bail!("the demo message cannot be previewed: {reason}")
        }
    };
    if !json {
        say!("\n== preview")?;
        preview::print_human(
            &format!("session-prune --db {}", db.display()),
            &preview_request,
            &previewed,
            None,
        )?;
    } else {
        step("preview", String::new(), serde_json::to_value(&previewed)?)?;
    }

    let request =
        PruneRequest::with_indexes(session_id.clone(), message_id.clone(), revision, &indexes)?;
    let first = engine.prune(&request)?;
    if !matches!(first.result, PruneResult::Pruned { .. }) {
        bail!("the demo prune was refused: {:?}", first.refusal);
    }
    if json {
        step(
            "prune",
            String::new(),
            json!({ "result": first.result, "receipt": first.receipt }),
        )?;
    } else {
        say!("\n== prune")?;
        prune::print_human(&first)?;
    }

    let retry = engine.prune(&request)?;
    let same = retry.receipt.as_ref().map(|r| r.receipt_id)
        == first.receipt.as_ref().map(|r| r.receipt_id)
        && retry.result == first.result;
    if json {
        step(
            "retry",
            String::new(),
            json!({ "result": retry.result, "sameReceipt": same, "event": retry.event }),
        )?;
    } else {
        say!("\n== identical retry")?;
        prune::print_human(&retry)?;
        say!(
            "same result and receipt as the first prune: {}",
            if same { "yes" } else { "NO" }
        )?;
    }
    if !same {
        bail!("the retry did not return the same receipt");
    }

    let events = engine.events_after(0, 100)?;
    let mut text = String::new();
    for e in &events {
        text.push_str(&format!(
            "#{} {} {} {} revision {}\n",
            e.seq, e.event_type, e.data.session_id, e.data.message_id, e.data.revision
        ));
    }
    step("events", text, serde_json::to_value(&events)?)?;

    let receipts = engine.receipts(None)?;
    let mut text = String::new();
    for r in &receipts {
        text.push_str(&format!(
            "{} {} removed {} part(s), {} freed, intent {}\n",
            r.receipt_id,
            r.message_id,
            r.removed_count,
            output::bytes(r.bytes_removed),
            r.intent_id
        ));
    }
    step("receipts", text, serde_json::to_value(&receipts)?)?;

    drop(engine);
    if keep {
        let path = dir.keep();
        step(
            "kept",
            format!("the demo folder is kept at {}", path.display()),
            json!({ "dir": path }),
        )?;
    }
    Ok(Outcome::Done)
}
