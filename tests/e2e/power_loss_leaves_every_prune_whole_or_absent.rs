//! A power cut at any sync point of a prune, a batch, a clean (with its compactions and diffs
//! prunes, archived), a restore, and recovery itself, with the writes since each file's last
//! sync lost, kept, or torn: after recovery no receipt lacks its journaled intent, no message
//! is half pruned, receipts and journal events agree one to one, no sequence number names two
//! events, and every event the journal held durably before the cut is still there with its
//! number (`common::power_loss` says how the files are rebuilt).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::common;

use common::cli::{json, run};
use common::power_loss::{record, Kept, Recording};
use common::*;
use serde_json::Value;

/// Torn variants tried at each sync point, besides "nothing kept" and "everything kept".
const TORN: u64 = 12;

/// The part ids of the database.
fn parts(db: &Path) -> BTreeSet<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn.prepare("SELECT id FROM part").unwrap();
    let ids = stmt
        .query_map([], |row| row.get::<_, String>(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    ids
}

/// The events the journal beside `db` holds, `seq -> event id`, and its pending intents,
/// read as they are (after redb's own repair of an unclosed file, on a copy), without our
/// recovery.
fn durable_events(db: &Path) -> Result<(BTreeMap<u64, String>, usize), String> {
    let journal = db.with_extension("db.prune-journal");
    if !journal.exists() {
        return Ok((BTreeMap::new(), 0));
    }
    let copy = db.with_extension("db.journal-copy");
    std::fs::copy(&journal, &copy).unwrap();
    let read = std::panic::catch_unwind(|| {
        pruning_engine::Journal::open(&copy).map(|journal| {
            let pending = journal.pending_intents().map_err(|e| e.to_string())?.len();
            journal
                .events_after(0, usize::MAX)
                .map(|events| {
                    let events = events
                        .into_iter()
                        .map(|e| (e.seq, e.event_id.to_string()))
                        .collect::<BTreeMap<_, _>>();
                    (events, pending)
                })
                .map_err(|error| error.to_string())
        })
    });
    let size = std::fs::metadata(&journal).map_or(0, |m| m.len());
    let events = match read {
        Ok(Ok(Ok(events))) => Ok(events),
        Ok(Ok(Err(error))) => Err(format!(
            "the journal at the cut ({size} bytes) does not read: {error}"
        )),
        Ok(Err(error)) => Err(format!(
            "the journal at the cut ({size} bytes) does not open: {error}"
        )),
        Err(_) => Err(format!(
            "reading the journal at the cut ({size} bytes) panics inside redb"
        )),
    };
    let _ = std::fs::remove_file(&copy);
    events
}

/// Recovers the state in `dir` (one read of the events, which resolves pending intents) and
/// checks every invariant; `baseline` are the part ids before any prune (those of the database
/// the run started from and those its standing receipts had removed). Returns what does not
/// hold, in words.
fn violations(dir: &Path, baseline: &BTreeSet<String>) -> (Vec<String>, Progress) {
    let db = dir.join("opencode.db");
    let mut wrong = Vec::new();
    let (seen, pending) = match durable_events(&db) {
        Ok(found) => found,
        Err(error) => {
            wrong.push(error);
            (BTreeMap::new(), 0)
        }
    };

    let out = run(&db, &["--quiet-period", "0", "--json", "events"]);
    if out.status.code() != Some(0) {
        let failed = format!(
            "recovery (events) exited {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        return (vec![failed], (0, 0, pending));
    }
    let mut after = BTreeMap::new();
    let mut ids = BTreeSet::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let event: Value = serde_json::from_str(line).unwrap();
        let seq = event["seq"].as_u64().unwrap();
        let id = event["id"].as_str().unwrap_or_default().to_string();
        if after.insert(seq, id.clone()).is_some() {
            wrong.push(format!("sequence number {seq} names two events"));
        }
        if !ids.insert(id.clone()) {
            wrong.push(format!("event {id} is journaled twice"));
        }
    }
    for (seq, id) in &seen {
        if after.get(seq) != Some(id) {
            wrong.push(format!(
                "event {seq} ({id}), durable before the cut, is gone or renumbered"
            ));
        }
    }
    let audit = run(&db, &["--json", "audit"]);
    let report = json(&audit);
    if report["ok"] != true || audit.status.code() != Some(0) {
        wrong.push(format!(
            "the audit does not hold: {}",
            report["discrepancies"]
        ));
    }
    if report["awaitingRecovery"]
        .as_array()
        .is_some_and(|a| !a.is_empty())
    {
        wrong.push(format!(
            "still awaiting recovery: {}",
            report["awaitingRecovery"]
        ));
    }
    // Every part is there but those the standing receipts removed: no message is half pruned.
    let receipts = json(&run(&db, &["--json", "receipts"]));
    let receipts = receipts.as_array().cloned().unwrap_or_default();
    let undone: BTreeSet<String> = receipts
        .iter()
        .filter_map(|r| r["restores"].as_str().map(str::to_string))
        .collect();
    let removed: BTreeSet<String> = receipts
        .iter()
        .filter(|r| r["restores"].is_null())
        .filter(|r| !undone.contains(r["receiptID"].as_str().unwrap()))
        .flat_map(|r| r["partIDs"].as_array().cloned().unwrap_or_default())
        .map(|id| id.as_str().unwrap().to_string())
        .collect();
    let now = parts(&db);
    let gone: BTreeSet<String> = baseline.difference(&now).cloned().collect();
    if gone != removed {
        wrong.push(format!(
            "parts gone without a receipt: {:?}; receipted but present: {:?}",
            gone.difference(&removed).collect::<Vec<_>>(),
            removed.difference(&gone).collect::<Vec<_>>()
        ));
    }
    if now.difference(baseline).next().is_some() {
        wrong.push("parts appeared that the run never had".into());
    }
    if receipts.len() != after.len() {
        wrong.push(format!(
            "{} receipt(s) but {} journaled event(s)",
            receipts.len(),
            after.len()
        ));
    }
    (wrong, (receipts.len(), after.len(), pending))
}

/// How far a cut state had got: receipts after recovery, journaled events after recovery,
/// intents pending before it.
type Progress = (usize, usize, usize);

/// Every cut of `recording` (each sync point and the end; nothing, everything and
/// [`TORN`] torn subsets kept), each checked; returns the states tried and the violations.
fn every_cut(
    recording: &Recording,
    folder: &Path,
    baseline: &BTreeSet<String>,
    what: &str,
) -> (usize, Vec<String>) {
    let mut tried = 0;
    let mut wrong = Vec::new();
    let mut progress = BTreeSet::new();
    for point in 0..=recording.sync_points() {
        let kinds = [Kept::Nothing, Kept::Everything]
            .into_iter()
            .chain((1..=TORN).map(Kept::Torn));
        for kept in kinds {
            recording.cut(point, kept, folder);
            tried += 1;
            let (found, reached) = violations(folder, baseline);
            progress.insert(reached);
            for violation in found {
                wrong.push(format!(
                    "{what}, cut before sync {point}, {kept:?}: {violation}"
                ));
            }
        }
    }
    // The cuts land on both sides of the run's steps: not every state got as far.
    if progress.len() < 2 {
        wrong.push(format!(
            "every cut of {what} got as far ({progress:?}): no cut fell between its steps"
        ));
    }
    (tried, wrong)
}

/// Records `args` (after `--db DB --quiet-period 0`) on `fx`, expecting `code`, and checks
/// every cut of it; leaves the run's end state in place and returns the states tried and the
/// recording (`None` without strace, which only CI requires).
fn cut_everywhere(
    fx: &Fixture,
    args: &[&str],
    code: i32,
    what: &str,
) -> (usize, Option<Recording>) {
    let strace = common::strace::strace("to record the writes and syncs a power cut may lose");
    let Some(strace) = strace else {
        return (0, None);
    };
    let baseline = baseline(&fx.db);
    let folder = fx.db.parent().unwrap();
    let mut all = vec![
        "--db".to_string(),
        fx.db.display().to_string(),
        "--quiet-period".into(),
        "0".into(),
    ];
    all.extend(args.iter().map(|a| a.to_string()));
    let (recording, exit) = record(strace, folder, &all);
    assert_eq!(exit, code, "{what} exited {exit}");
    assert!(recording.sync_points() > 0, "{what} synced nothing");
    let (tried, wrong) = every_cut(&recording, folder, &baseline, what);
    // The run's own end state again, for what the caller does next.
    recording.cut(recording.sync_points(), Kept::Everything, folder);
    assert!(
        wrong.is_empty(),
        "{} violation(s):\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    eprintln!(
        "{what}: {} sync point(s), {tried} crash state(s), 0 violations",
        recording.sync_points()
    );
    (tried, Some(recording))
}

/// The part ids of `db` with those its standing receipts removed: every part before any prune.
fn baseline(db: &Path) -> BTreeSet<String> {
    let mut all = parts(db);
    let receipts = json(&run(db, &["--json", "receipts"]));
    let receipts = receipts.as_array().cloned().unwrap_or_default();
    let undone: BTreeSet<&str> = receipts
        .iter()
        .filter_map(|r| r["restores"].as_str())
        .collect();
    for receipt in &receipts {
        if receipt["restores"].is_null() && !undone.contains(receipt["receiptID"].as_str().unwrap())
        {
            for id in receipt["partIDs"].as_array().unwrap() {
                all.insert(id.as_str().unwrap().to_string());
            }
        }
    }
    all
}

/// The fixture folded into its file (no WAL), as a database at rest before a run.
fn at_rest(fx: &Fixture) {
    fx.exec("PRAGMA wal_checkpoint(TRUNCATE)");
}

#[test]
fn a_clean_with_compaction_diffs_and_archive_and_its_recovery_survive_a_power_cut_anywhere() {
    let fx = Fixture::work();
    at_rest(&fx);
    let (mut tried, recording) = cut_everywhere(
        &fx,
        &[
            "clean",
            "--all",
            "--keep-last-turns",
            "0",
            "--diffs",
            "--apply",
            "--archive",
            "--batch-size",
            "8",
        ],
        0,
        "clean",
    );
    let Some(recording) = recording else {
        return;
    };
    // Recovery itself: from a cut that left intents for it to resolve, its run cut everywhere.
    let folder = fx.db.parent().unwrap();
    let mut recovered = false;
    for point in (1..recording.sync_points()).rev() {
        recording.cut(point, Kept::Everything, folder);
        let pending = pruning_engine::Journal::open(&fx.journal)
            .unwrap()
            .pending_intents()
            .unwrap()
            .len();
        if pending > 0 {
            tried += cut_everywhere(&fx, &["events", "--json"], 0, "recovery").0;
            recovered = true;
            break;
        }
    }
    assert!(recovered, "no cut of the clean left intents to recover");
    assert!(tried >= 1000, "{tried} states");
}

#[test]
fn a_prune_a_batch_and_a_restore_survive_a_power_cut_anywhere() {
    let fx = Fixture::new();
    // Something to restore, archived and at rest before the runs.
    common::archive::clean_archived(&fx.db, &[MANY_TURNS]);
    at_rest(&fx);
    let receipt = common::archive::unrestored(&fx.db)[0].clone();
    let mut tried = cut_everywhere(&fx, &["restore", &receipt], 0, "restore").0;
    // A prune of one message.
    let other = "ses_dd9927d77ffeCzugJZ3vDGPMn9";
    let history = run(&fx.db, &["--json", "history", other, "--purpose", "prune"]);
    let candidates: Value = json(&history);
    let message = candidates["candidates"][0]["messageID"]
        .as_str()
        .unwrap()
        .to_string();
    let revision = candidates["candidates"][0]["revision"]
        .as_str()
        .unwrap()
        .to_string();
    tried += cut_everywhere(
        &fx,
        &[
            "prune",
            other,
            &message,
            "--revision",
            &revision,
            "--all-technical",
        ],
        0,
        "prune",
    )
    .0;
    // A batch of the rest of that session.
    let history = run(&fx.db, &["--json", "history", other, "--purpose", "prune"]);
    let candidates = String::from_utf8_lossy(&history.stdout).into_owned();
    let file = fx.db.parent().unwrap().join("candidates.trace");
    std::fs::write(&file, candidates).unwrap();
    tried += cut_everywhere(
        &fx,
        &["prune-batch", other, "--candidates", file.to_str().unwrap()],
        0,
        "prune-batch",
    )
    .0;
    assert!(tried == 0 || tried >= 300, "{tried} states");
}
