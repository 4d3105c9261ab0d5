//! `prune-batch --archive` archives each prune of the batch (its entries written ahead of the
//! transactions and synced once, docs/ARCHITECTURE.md, "Archive"): every receipt records its
//! entry hash, `archive stats` holds one entry per prune and no orphan, each prune restores,
//! and the part rows are then the fixture's again.

use crate::common;

use common::archive::{restore, unrestored};
use common::cli::{assert_exit, json, run, run_with_stdin};
use common::*;

#[test]
fn every_prune_of_a_batch_is_archived_and_restores() {
    let fx = Fixture::new();
    let parts_before = fx.scalar("SELECT count(*) FROM part");
    let out = run(
        &fx.db,
        &[
            "--json",
            "history",
            MANY_TURNS,
            "--purpose",
            "prune",
            "--all",
        ],
    );
    assert_exit(&out, 0);
    let body = out.stdout;
    let candidates: usize = String::from_utf8_lossy(&body)
        .lines()
        .map(|line| {
            serde_json::from_str::<serde_json::Value>(line).expect("a page")["candidates"]
                .as_array()
                .expect("candidates")
                .len()
        })
        .sum();
    assert_eq!(candidates, 10);
    let batch = run_with_stdin(
        &fx.db,
        &[
            "--json",
            "--quiet-period",
            "0",
            "prune-batch",
            MANY_TURNS,
            "--candidates",
            "-",
            "--archive",
        ],
        &body,
    );
    assert_exit(&batch, 0);
    assert_eq!(
        fx.scalar("SELECT count(*) FROM session_prune_receipt WHERE archive_hash IS NOT NULL"),
        10
    );
    let stats = run(&fx.db, &["--json", "archive", "stats"]);
    assert_exit(&stats, 0);
    let stats = json(&stats);
    assert_eq!(stats["entries"], 10, "{stats}");
    assert_eq!(stats["orphans"], 0, "{stats}");
    assert!(fx.scalar("SELECT count(*) FROM part") < parts_before);
    for receipt in unrestored(&fx.db) {
        assert_eq!(restore(&fx.db, &receipt, 0)["status"], "restored");
    }
    assert_eq!(fx.scalar("SELECT count(*) FROM part"), parts_before);
}
