//! `clean --all --diffs --apply` on the coding-work fixture makes exactly the prune requests it
//! made before the clean became a crate of its own: the request keys of its receipts, in the
//! order they committed, are those recorded in
//! `tests/fixtures/opencode-1.18.34-work/clean-request-keys.txt` (one per line). A request key
//! is the SHA-256 of the request (session, message, revision, selection), so the same keys are
//! the same compactions, diffs prunes and prunes of parts, in the same order.

use crate::common;

use common::cli::{assert_exit, run};
use common::*;

#[test]
fn the_same_receipts_in_the_same_order() {
    let recorded = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/opencode-1.18.34-work/clean-request-keys.txt"),
    )
    .expect("the recorded keys");
    let recorded: Vec<&str> = recorded.lines().collect();
    assert_eq!(recorded.len(), 108);
    let fx = Fixture::work();
    let out = run(
        &fx.db,
        &[
            "--json",
            "--quiet-period",
            "0",
            "clean",
            "--all",
            "--diffs",
            "--apply",
        ],
    );
    assert_exit(&out, 0);
    let conn = fx.sql();
    let mut stmt = conn
        .prepare("SELECT request_key FROM session_prune_receipt ORDER BY rowid")
        .expect("select");
    let keys: Vec<String> = stmt
        .query_map([], |row| row.get(0))
        .expect("query")
        .map(Result::unwrap)
        .collect();
    assert_eq!(keys, recorded);
}
