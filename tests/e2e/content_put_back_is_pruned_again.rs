//! What a prune removed and that came back behind the engine's back (a sync, a backup put over
//! the rows while the receipts stayed) is not taken for an identical retry: the same clean
//! removes it again, with receipts of its own, and the audit holds again. Parts, superseded
//! snapshots and the file bodies of diffs alike.

use crate::common;

use common::cli::{assert_exit, document, run};
use common::*;

/// The session of the coding-work fixture every check here runs on.
const SESSION: &str = "ses_dccbb2954ffe0n64RVdJBmXc6p";

/// Puts the session's rows of `pristine` back over those of `fx`: every part and event row a
/// clean removed, and every message row as it was.
fn put_back(fx: &Fixture, pristine: &Fixture) {
    let conn = fx.sql();
    conn.execute(
        "ATTACH DATABASE ?1 AS pristine",
        [pristine.db.to_str().expect("path")],
    )
    .expect("attach");
    conn.execute_batch(&format!(
        "INSERT INTO main.event SELECT * FROM pristine.event
           WHERE aggregate_id = '{SESSION}' AND id NOT IN (SELECT id FROM main.event);
         INSERT INTO main.part SELECT * FROM pristine.part
           WHERE session_id = '{SESSION}' AND id NOT IN (SELECT id FROM main.part);
         UPDATE main.message SET data = (SELECT p.data FROM pristine.message p
                                         WHERE p.id = message.id)
           WHERE session_id = '{SESSION}';"
    ))
    .expect("put the rows back");
}

#[test]
fn the_same_clean_prunes_what_came_back_again() {
    let fx = Fixture::work();
    let pristine = Fixture::work();
    let clean = [
        "clean",
        SESSION,
        "--apply",
        "--diffs",
        "--keep-last-turns",
        "0",
    ];
    let first = document(&fx.db, &clean);
    assert_eq!(first["compaction"]["sessions"], 1, "{first}");
    let (pruned, diffs) = (first["pruned"].clone(), first["diffs"]["pruned"].clone());
    assert!(pruned.as_u64().unwrap() > 0 && diffs.as_u64().unwrap() > 0);
    let receipts = fx.scalar("SELECT count(*) FROM session_prune_receipt");

    put_back(&fx, &pristine);
    let audit = run(&fx.db, &["--json", "audit"]);
    assert_exit(&audit, 1);

    let again = document(&fx.db, &clean);
    assert_eq!(again["compaction"]["sessions"], 1, "{again}");
    assert_eq!(again["compaction"]["alreadyCompacted"], 0, "{again}");
    assert_eq!(again["pruned"], pruned, "{again}");
    assert_eq!(again["alreadyPruned"], 0, "{again}");
    assert_eq!(again["diffs"]["pruned"], diffs, "{again}");
    assert_eq!(again["diffs"]["alreadyPruned"], 0, "{again}");
    assert_eq!(
        fx.scalar("SELECT count(*) FROM session_prune_receipt"),
        receipts * 2,
        "a receipt of its own for each prune"
    );
    let audit = run(&fx.db, &["--json", "audit"]);
    assert_exit(&audit, 0);

    // A third run has nothing left: every receipt holds, the retries are identical ones.
    let third = document(&fx.db, &clean);
    assert_eq!(third["compaction"]["sessions"], 0, "{third}");
    assert_eq!(third["pruned"], 0, "{third}");
    assert_eq!(third["diffs"]["pruned"], 0, "{third}");
    assert_eq!(
        fx.scalar("SELECT count(*) FROM session_prune_receipt"),
        receipts * 2
    );
}
