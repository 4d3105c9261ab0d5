//! `archive purge` keeps the entry of each message's present state, so that the message can
//! still be undone whatever the cutoff: the entry of the prune whose result the message holds.
//! After a restore, that is the prune before the restored one, not the restore's receipt.

use crate::common;

use common::archive::{prune_archived, restore_out, revision};
use common::cli::{assert_exit, json, run};
use common::*;

#[test]
fn a_purge_after_a_restore_keeps_the_entry_of_the_prune_the_message_now_shows() {
    let fx = Fixture::new();
    let original = revision(&fx.db, MANY_TURNS, TURN5);
    // Two prunes of one message: its reasoning (index 1), then its tool (index 1 again, the
    // reasoning gone).
    let first = prune_archived(&fx.db, MANY_TURNS, TURN5, Some("1"));
    let after_first = revision(&fx.db, MANY_TURNS, TURN5);
    let second = prune_archived(&fx.db, MANY_TURNS, TURN5, Some("1"));
    assert_exit(&restore_out(&fx.db, &second), 0);
    assert_eq!(revision(&fx.db, MANY_TURNS, TURN5), after_first);

    // The message shows the first prune's result: its entry is what undoing it needs.
    let purge = run(&fx.db, &["--json", "archive", "purge", "--older-than", "0"]);
    assert_exit(&purge, 0);
    let report = json(&purge);
    assert_eq!(
        report["purged"], 1,
        "only the restored prune's entry goes: {report}"
    );
    assert_eq!(report["keptNewest"], 1, "{report}");

    let undo = restore_out(&fx.db, &first);
    assert_exit(&undo, 0);
    assert_eq!(json(&undo)["status"], "restored");
    assert_eq!(revision(&fx.db, MANY_TURNS, TURN5), original);
}
