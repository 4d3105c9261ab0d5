//! A message pruned twice is restored newest prune first (docs/ARCHITECTURE.md, "Restore"): the
//! older prune's restore is a `conflict` naming the newer receipt, with nothing journaled; once
//! the newer one is restored, the older one restores. A restore answered again after the message
//! was pruned again since is a `conflict` too: its event would announce a revision the message no
//! longer has, so it is not announced again.

use crate::common;

use common::archive::{prune_archived, restore, revision};
use common::cli::{assert_exit, json, run};
use common::*;
use serde_json::json;

#[test]
fn the_older_prune_waits_for_the_newer_one_to_be_restored() {
    let fx = Fixture::new();
    let original = revision(&fx.db, MANY_TURNS, TURN5);
    let older = prune_archived(&fx.db, MANY_TURNS, TURN5, Some("1"));
    let newer = prune_archived(&fx.db, MANY_TURNS, TURN5, Some("1"));
    assert_ne!(older, newer);
    let (db, journal) = (fx.file_digest(), fx.journal_digest());
    for dry in [true, false] {
        let mut args = vec!["--json", "--quiet-period", "0", "restore", older.as_str()];
        if dry {
            args.push("--dry-run");
        }
        let out = run(&fx.db, &args);
        assert_exit(&out, 3);
        assert_eq!(
            json(&out),
            json!({ "status": "blocked", "reason": "conflict" })
        );
        let words = String::from_utf8_lossy(&out.stderr);
        assert!(
            words.contains(&format!("pruned again since, by receipt {newer}")),
            "{words}"
        );
    }
    assert_eq!((fx.file_digest(), fx.journal_digest()), (db, journal));

    assert_eq!(restore(&fx.db, &newer, 0)["status"], "restored");
    let answer = restore(&fx.db, &older, 0);
    assert_eq!(answer["revision"], original);
    assert_eq!(revision(&fx.db, MANY_TURNS, TURN5), original);
}

#[test]
fn a_restore_is_not_answered_again_once_the_message_was_pruned_again() {
    let fx = Fixture::new();
    let first = prune_archived(&fx.db, MANY_TURNS, TURN5, None);
    let restored = restore(&fx.db, &first, 0);
    let dry = run(&fx.db, &["--json", "restore", &first, "--dry-run"]);
    assert_exit(&dry, 0);
    assert_eq!(
        json(&dry),
        json!({
            "status": "already-restored", "receiptID": restored["receiptID"],
            "sessionID": MANY_TURNS, "messageID": TURN5, "revision": restored["revision"]
        })
    );
    let again = prune_archived(&fx.db, MANY_TURNS, TURN5, None);
    let events_before = run(&fx.db, &["--json", "events", "--since", "0"]).stdout;
    let out = run(
        &fx.db,
        &["--json", "--quiet-period", "0", "restore", &first],
    );
    assert_exit(&out, 3);
    assert_eq!(
        json(&out),
        json!({ "status": "blocked", "reason": "conflict" })
    );
    let words = String::from_utf8_lossy(&out.stderr);
    assert!(words.contains(&again), "{words}");
    // Nothing was announced or journaled: the event log is as it was.
    assert_eq!(
        run(&fx.db, &["--json", "events", "--since", "0"]).stdout,
        events_before
    );
    // The newest prune restores.
    assert_eq!(restore(&fx.db, &again, 0)["status"], "restored");
}
