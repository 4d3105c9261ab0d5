//! `clean --until-live-size SIZE` prunes completed messages oldest first across sessions, with
//! every other policy, until the database's live data (pages in use) is estimated at most SIZE;
//! its dry run stops where its apply does, and it says when the policies leave too little.

use crate::common;

use common::cli::{assert_exit, json, run};
use common::Fixture;

/// `clean --all --no-compact --keep-last-turns 0 --until-live-size SIZE --json`, dry run or
/// applied: the parts alone, oldest first (the compaction that comes first is
/// `clean_compacts_superseded_snapshots_first`'s).
pub(crate) fn clean(fx: &Fixture, size: &str, apply: bool) -> serde_json::Value {
    let mut args = vec![
        "--json",
        "clean",
        "--all",
        "--no-compact",
        "--keep-last-turns",
        "0",
        "--until-live-size",
        size,
    ];
    if apply {
        args.push("--apply");
    }
    json(&run(&fx.db, &args))
}

/// Live data of the fixture, bytes: pages in use times the page size.
fn live(fx: &Fixture) -> i64 {
    fx.scalar(
        "SELECT (SELECT page_count FROM pragma_page_count()) \
              - (SELECT freelist_count FROM pragma_freelist_count())",
    ) * fx.scalar("SELECT page_size FROM pragma_page_size()")
}

#[test]
fn the_oldest_messages_go_first_and_the_dry_run_stops_where_the_apply_does() {
    let fx = Fixture::new();
    let before = live(&fx);
    let target = before - 500_000;
    let size = target.to_string();
    let dry = clean(&fx, &size, false);
    let applied = clean(&fx, &size, true);
    for key in ["considered", "pruned", "parts", "bytes"] {
        assert_eq!(dry[key], applied[key], "{key}");
    }
    let until = &applied["untilLiveSize"];
    assert_eq!(until["target"], target);
    assert_eq!(until["liveBefore"], before);
    assert_eq!(until["reached"], true);
    assert_eq!(
        dry["untilLiveSize"]["estimateAfter"],
        until["estimateAfter"]
    );
    let estimate = until["estimateAfter"].as_i64().unwrap();
    assert!(estimate <= target, "{until}");
    // It stopped as soon as the estimate reached the target: without the last prune it had not.
    let pruned = applied["pruned"].as_i64().unwrap();
    assert!(pruned > 0 && estimate + 500_000 <= before, "{applied}");
    assert_eq!(until["liveAfter"], live(&fx));
    // Oldest first: no message left prunable is older than one pruned.
    let newest_pruned = fx.scalar(
        "SELECT max(m.time_created) FROM message m JOIN session_prune_receipt r ON r.message_id = m.id",
    );
    let oldest_left = fx.scalar(
        "SELECT coalesce(min(m.time_created), 9223372036854775807) FROM message m \
         WHERE json_extract(m.data, '$.role') = 'assistant' \
           AND json_type(m.data, '$.time.completed') IS NOT NULL \
           AND m.id NOT IN (SELECT message_id FROM session_prune_receipt) \
           AND EXISTS (SELECT 1 FROM part p WHERE p.message_id = m.id \
                 AND json_extract(p.data, '$.type') IN ('tool', 'reasoning'))",
    );
    assert!(
        newest_pruned <= oldest_left,
        "{newest_pruned} > {oldest_left}"
    );
    assert_eq!(
        fx.scalar("SELECT count(*) FROM session_prune_receipt"),
        pruned
    );
}

#[test]
fn a_target_the_database_already_meets_prunes_nothing() {
    let fx = Fixture::new();
    let digest = fx.file_digest();
    let applied = clean(&fx, "1GiB", true);
    assert_eq!(applied["considered"], 0, "{applied}");
    assert_eq!(applied["untilLiveSize"]["reached"], true);
    assert_eq!(applied["untilLiveSize"]["estimateAfter"], live(&fx));
    assert_eq!(fx.file_digest(), digest);
}

#[test]
fn a_target_the_policies_cannot_reach_prunes_all_they_allow_and_says_so() {
    let fx = Fixture::new();
    let everything = json(&run(
        &fx.db,
        &["--json", "clean", "--all", "--keep-last-turns", "0"],
    ));
    let applied = clean(&fx, "1000", true);
    assert_eq!(applied["untilLiveSize"]["reached"], false, "{applied}");
    assert_eq!(applied["pruned"], everything["pruned"]);
    let text = run(
        &fx.db,
        &[
            "clean",
            "--all",
            "--keep-last-turns",
            "0",
            "--until-live-size",
            "1kB",
        ],
    );
    assert_exit(&text, 0);
    assert!(String::from_utf8_lossy(&text.stdout).contains("the policies leave too little"));
}

#[test]
fn an_unreadable_size_is_bad_input_and_changes_nothing() {
    let fx = Fixture::new();
    let digest = fx.file_digest();
    for size in ["lots", "", "-5MB", "2 parsecs"] {
        let out = run(
            &fx.db,
            &["clean", "--all", "--until-live-size", size, "--apply"],
        );
        assert_exit(&out, 2);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--until-live-size"), "{size}: {err}");
    }
    let out = run(&fx.db, &["clean", "--all", "--until-live-size", "lots"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).lines().next(),
        Some("error: --until-live-size lots: not a size (a size such as 2GB, 500MiB or 1000000 bytes)")
    );
    assert_eq!(fx.file_digest(), digest);
    assert!(!fx.has_table("session_prune_receipt"));
}
