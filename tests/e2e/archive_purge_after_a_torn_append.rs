//! A process killed while it appended an entry leaves a torn frame at the end of the archive:
//! an entry no receipt names, which the next command that archives cuts (docs/ARCHITECTURE.md,
//! "Archive", "Recovery"). `archive purge` after such a crash is no different: the torn tail
//! holds nothing a receipt needs, so the purge goes on (cutting it), and it never calls the
//! archive damaged nor says to move it aside, which would take every entry away from the
//! restores that need them.

use crate::common;

use std::io::Write;

use common::archive::{archive_path, audit_report, prune_archived, restore_out, revision};
use common::cli::{assert_exit, json, run};
use common::*;

#[test]
fn a_purge_after_a_torn_append_purges_and_cuts_the_torn_frame() {
    let fx = Fixture::new();
    let archive = archive_path(&fx);
    let first = prune_archived(&fx.db, MANY_TURNS, TURN5, Some("1"));
    let after_first = revision(&fx.db, MANY_TURNS, TURN5);
    let first_end = std::fs::metadata(&archive).expect("archive").len();
    let second = prune_archived(&fx.db, MANY_TURNS, TURN5, Some("1"));
    let whole = std::fs::read(&archive).expect("archive");

    // A third append torn by a crash: the first half of a frame, its prune never committed.
    let frame = &whole[first_end as usize..];
    std::fs::OpenOptions::new()
        .append(true)
        .open(&archive)
        .expect("archive")
        .write_all(&frame[..frame.len() / 2])
        .expect("torn frame");
    let (code, report) = audit_report(&fx.db);
    assert_eq!(code, 0, "no receipt names the torn frame: {report}");

    let purge = run(&fx.db, &["--json", "archive", "purge", "--older-than", "0"]);
    assert_exit(&purge, 0);
    let report = json(&purge);
    assert_eq!(report["purged"], 1, "{report}");
    assert_eq!(report["keptNewest"], 1, "{report}");
    let stats = run(&fx.db, &["--json", "archive", "stats"]);
    assert_exit(&stats, 0);
    assert_eq!(json(&stats)["unreadableAt"], serde_json::Value::Null);

    // The message's present state is still undone from the purged archive.
    let undo = restore_out(&fx.db, &second);
    assert_exit(&undo, 0);
    assert_eq!(revision(&fx.db, MANY_TURNS, TURN5), after_first);
    assert_ne!(first, second);
}
