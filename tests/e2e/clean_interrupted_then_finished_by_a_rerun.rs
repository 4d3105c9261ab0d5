//! Ctrl-C (SIGINT) stops a clean after the message it is on: every message committed so far
//! (and every session compacted before them) has exactly one receipt and one journaled event,
//! the report says what was not reached, and running the same clean again finishes the rest
//! without touching the done ones.

use crate::common;

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use pruning_engine::Journal;
use serde_json::Value;

fn receipts(fx: &Fixture) -> Vec<String> {
    let Ok(conn) =
        rusqlite::Connection::open_with_flags(&fx.db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    else {
        return Vec::new();
    };
    // A compaction's receipt names its session and no message.
    let Ok(mut stmt) =
        conn.prepare("SELECT session_id || '/' || message_id FROM session_prune_receipt")
    else {
        return Vec::new();
    };
    let rows = stmt.query_map([], |r| r.get(0)).unwrap();
    rows.map(Result::unwrap).collect()
}

const CLEAN: [&str; 7] = [
    "--json",
    "clean",
    "--all",
    "--keep-last-turns",
    "0",
    "--apply",
    "--batch-size",
];

#[test]
fn sigint_stops_after_the_current_message_and_a_rerun_finishes() {
    let fx = Fixture::new();
    let mut args: Vec<&str> = CLEAN.to_vec();
    args.extend(["1", "--pause-ms", "300"]);
    let child = crate::common::cli::session_prune()
        .arg("--db")
        .arg(&fx.db)
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while receipts(&fx).len() < 2 {
        assert!(started.elapsed() < Duration::from_secs(60), "no progress");
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["status"], "interrupted");
    let done = receipts(&fx);
    let pruned = report["pruned"].as_u64().unwrap() as usize;
    // The compactions come first: the interrupt may stop them or the prunes after them.
    let compacted = report["compaction"]["sessions"].as_u64().unwrap() as usize;
    assert_eq!(done.len(), pruned + compacted, "{report}");
    assert!((2..21 + 10).contains(&done.len()), "{report}");
    let not_reached = report["notReached"].as_u64().unwrap()
        + report["compaction"]["notReached"].as_u64().unwrap();
    assert!(not_reached > 0, "{report}");

    // One journaled event per receipt, none for what was not reached.
    let journal = Journal::open(&fx.journal).unwrap();
    let events = journal.events_after(0, 1000).unwrap();
    let announced: BTreeSet<String> = events
        .iter()
        .map(|e| format!("{}/{}", e.session_id, e.message_id))
        .collect();
    assert_eq!(events.len(), done.len());
    assert_eq!(announced, done.iter().cloned().collect());
    assert!(journal.pending_intents().unwrap().is_empty());
    drop(journal);

    // The same clean again finishes the rest.
    let mut args: Vec<&str> = CLEAN.to_vec();
    args.push("256");
    let rerun = common::cli::run(&fx.db, &args);
    common::cli::assert_exit(&rerun, 0);
    let report: Value = serde_json::from_slice(&rerun.stdout).unwrap();
    assert_eq!(report["status"], "cleaned");
    assert_eq!(report["pruned"].as_u64().unwrap() as usize, 21 - pruned);
    // The rerun compacts the sessions the first run did not reach.
    let compacted = compacted + report["compaction"]["sessions"].as_u64().unwrap() as usize;
    assert!(compacted > 0, "{report}");
    let all = receipts(&fx);
    assert_eq!(all.len(), 21 + compacted);
    assert_eq!(
        all.iter().collect::<BTreeSet<_>>().len(),
        21 + compacted,
        "one receipt per message and per compacted session"
    );
    let journal = Journal::open(&fx.journal).unwrap();
    assert_eq!(journal.events_after(0, 1000).unwrap().len(), 21 + compacted);
}
