//! `archive purge` keeps the entry of each message's present state: the entry of the prune
//! whose result the message holds (docs/ARCHITECTURE.md, "Archive", "Retention"). Which prune
//! that is follows from the order the receipts were committed in, and the wall clock may step
//! back between two prunes of one message (set by hand or by NTP): the second prune, the one
//! the message now shows, then carries the earlier time. The purge must still keep its entry,
//! so that the message can be undone.

use crate::common;

use common::archive::{prune_archived, restore_out, revision};
use common::cli::{assert_exit, json, run};
use common::*;
use pruning_engine::{Applied, Durability, PruneCommand, SessionStore};

#[test]
fn a_purge_keeps_the_entry_of_the_prune_made_after_the_clock_stepped_back() {
    let fx = Fixture::new();
    // The first prune removes turn 5's reasoning (index 1), at the clock's time.
    let first = prune_archived(&fx.db, MANY_TURNS, TURN5, Some("1"));
    let after_first = revision(&fx.db, MANY_TURNS, TURN5);
    let first_at = receipts(&fx)
        .into_iter()
        .find(|r| r.receipt_id.to_string() == first)
        .expect("first receipt")
        .committed_at_ms;

    // The clock steps back 5 s; the second prune removes its tool (index 1, the reasoning gone),
    // archived like any prune made with --archive (its intent journaled; the next open's
    // recovery journals its commit).
    let engine = fx.engine();
    let database_id = engine.database_id().to_string();
    drop(engine);
    let req = request(MANY_TURNS, TURN5, &after_first, &[1]);
    let intent = pending_intent(&req);
    pruning_engine::Journal::open(&fx.journal)
        .expect("journal")
        .record_intent(&intent)
        .expect("intent");
    let store = fx.store(0);
    store.archive_prunes().expect("archive");
    let applied = store
        .apply(&PruneCommand {
            request: &req,
            intent_id: intent.intent_id,
            request_key: intent.request_key,
            receipt_id: uuid::Uuid::now_v7(),
            database_id: &database_id,
            now_ms: first_at - 5_000,
            durability: Durability::Immediate,
        })
        .expect("second prune");
    let Applied::Pruned { receipt, .. } = applied else {
        panic!("{applied:?}");
    };
    drop(store);
    let second = receipt.receipt_id.to_string();
    assert_ne!(revision(&fx.db, MANY_TURNS, TURN5), after_first);

    // Both entries are older than the cutoff; the message shows the second prune's result.
    let purge = run(&fx.db, &["--json", "archive", "purge", "--older-than", "0"]);
    assert_exit(&purge, 0);
    let report = json(&purge);
    assert_eq!(report["purged"], 1, "{report}");
    assert_eq!(report["keptNewest"], 1, "{report}");

    // Undoing the message's present state needs the second prune's entry.
    let undo = restore_out(&fx.db, &second);
    assert_exit(&undo, 0);
    assert_eq!(json(&undo)["status"], "restored", "{}", json(&undo));
    assert_eq!(revision(&fx.db, MANY_TURNS, TURN5), after_first);
    // And the first prune's entry, no longer the present state's, is the one purged.
    let undo_first = restore_out(&fx.db, &first);
    assert_eq!(
        json(&undo_first)["status"],
        "blocked",
        "{}",
        json(&undo_first)
    );
}
