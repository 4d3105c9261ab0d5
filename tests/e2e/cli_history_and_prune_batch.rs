//! `session-prune history` and `prune-batch` end to end, the scope flags, and the listings over
//! a V2-only database: exact JSON shapes, exit codes (0 done, 2 bad input, 3 blocked), nothing
//! written by a dry run or a refusal.

use crate::common;

use common::cli::{assert_exit, assert_json_error, json, run, run_with_stdin};
use common::v2::{V2Fixture, V2_ASSISTANT, V2_SESSION};
use common::*;
use serde_json::Value;

fn keys(value: &Value) -> Vec<&str> {
    value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect()
}

/// Every page of `history --json ARGS --all`, one per line.
fn all_pages(fx: &Fixture, args: &[&str]) -> Vec<Value> {
    let mut full = vec!["--json", "history"];
    full.extend_from_slice(args);
    full.push("--all");
    let out = run(&fx.db, &full);
    assert_exit(&out, 0);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// A page ends after 32 rows or about 40 ms, whichever comes first, so these tests check what
/// the pages add up to, never where one ends.
#[test]
fn history_prints_the_contract_page_and_follows_its_cursor() {
    let fx = Fixture::new();
    let first = run(&fx.db, &["--json", "history", "--query", "tool_canary_t05"]);
    assert_exit(&first, 0);
    let page = json(&first);
    assert_eq!(
        keys(&page),
        vec![
            "status",
            "scanned",
            "tools",
            "reasoning",
            "skipped",
            "hits",
            "candidates",
            "cursor"
        ]
    );
    assert_eq!(page["status"], "page");
    let scanned = page["scanned"].as_u64().unwrap();
    assert!((1..=32).contains(&scanned), "{scanned}");

    // Following the cursor by hand reaches the same rows as --all: 68 V1 + 8 V2 messages.
    let mut by_hand = vec![page];
    while let Some(cursor) = by_hand.last().unwrap()["cursor"]
        .as_str()
        .map(str::to_string)
    {
        let next = run(
            &fx.db,
            &[
                "--json",
                "history",
                "--query",
                "tool_canary_t05",
                "--cursor",
                &cursor,
            ],
        );
        assert_exit(&next, 0);
        by_hand.push(json(&next));
    }
    let all = all_pages(&fx, &["--query", "tool_canary_t05"]);
    let total =
        |pages: &[Value]| -> u64 { pages.iter().map(|p| p["scanned"].as_u64().unwrap()).sum() };
    assert_eq!(total(&by_hand), 76);
    assert_eq!(total(&all), 76);
    let hits = |pages: &[Value]| -> Vec<Value> {
        pages
            .iter()
            .flat_map(|p| p["hits"].as_array().unwrap().clone())
            .collect()
    };
    assert_eq!(hits(&by_hand), hits(&all));
    let hits = hits(&all);
    // Turn 5's tool part holds the canary (the user's prompt names it too).
    let found: Vec<(&str, &str)> = hits
        .iter()
        .map(|h| {
            (
                h["messageID"].as_str().unwrap(),
                h["kind"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(found.contains(&(TURN5, "tool")), "{found:?}");
    for hit in &hits {
        assert_eq!(
            keys(hit),
            vec![
                "sessionID",
                "messageID",
                "role",
                "partIndex",
                "kind",
                "excerpt"
            ]
        );
        assert!(hit["excerpt"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("tool_canary_t05"));
    }
}

#[test]
fn history_bad_input_exits_2() {
    let fx = Fixture::new();
    let foreign = json(&run(&fx.db, &["--json", "history", "--query", "a"]))["cursor"]
        .as_str()
        .unwrap()
        .to_string();
    assert_json_error(
        &run(
            &fx.db,
            &["--json", "history", "--query", "b", "--cursor", &foreign],
        ),
        2,
        "another query, scope or database",
    );
    assert_json_error(
        &run(&fx.db, &["--json", "history", "--purpose", "prune"]),
        2,
        "needs a sessionID",
    );
    let long = "q".repeat(201);
    assert_json_error(
        &run(&fx.db, &["--json", "history", "--query", &long]),
        2,
        "query must be at most 200",
    );
}

#[test]
fn prune_batch_takes_the_candidates_history_lists_and_a_retry_prints_the_same_bytes() {
    let fx = Fixture::new();
    let pages = all_pages(&fx, &[MANY_TURNS, "--purpose", "prune"]);
    let candidates: Vec<Value> = pages
        .iter()
        .flat_map(|p| p["candidates"].as_array().unwrap().clone())
        .collect();
    assert_eq!(candidates.len(), 10, "one per completed turn with tools");
    // The pages as `history --all --json` printed them: JSON lines.
    let body: Vec<u8> = pages
        .iter()
        .flat_map(|p| {
            let mut line = serde_json::to_vec(p).unwrap();
            line.push(b'\n');
            line
        })
        .collect();

    let before = fx.file_digest();
    let dry = run_with_stdin(
        &fx.db,
        &[
            "--json",
            "prune-batch",
            MANY_TURNS,
            "--candidates",
            "-",
            "--dry-run",
        ],
        &body,
    );
    assert_exit(&dry, 0);
    let planned = json(&dry)["results"].as_array().unwrap().clone();
    assert_eq!(planned.len(), 10);
    for item in &planned {
        assert_eq!(item["result"]["status"], "dry-run", "{item}");
        assert_eq!(
            keys(&item["result"]),
            vec![
                "status",
                "messageID",
                "revision",
                "revisionAfter",
                "indexes",
                "removedCount",
                "bytes"
            ]
        );
    }
    assert_eq!(fx.file_digest(), before, "a dry run writes nothing");
    assert!(!fx.journal.exists());

    let args = ["--json", "prune-batch", MANY_TURNS, "--candidates", "-"];
    let first = run_with_stdin(&fx.db, &args, &body);
    assert_exit(&first, 0);
    let results = json(&first);
    assert_eq!(keys(&results), vec!["results"]);
    for (item, candidate) in results["results"]
        .as_array()
        .unwrap()
        .iter()
        .zip(&candidates)
    {
        assert_eq!(item["messageID"], candidate["messageID"]);
        assert_eq!(item["result"]["status"], "pruned", "{item}");
        assert_eq!(
            keys(&item["result"]),
            vec!["status", "messageID", "revision", "removedCount"]
        );
    }
    assert_eq!(fx.scalar("SELECT count(*) FROM session_prune_receipt"), 10);
    assert_eq!(fx.rows_containing("part", "TOOL_CANARY_T05"), 0);
    let again = run_with_stdin(&fx.db, &args, &body);
    assert_exit(&again, 0);
    assert_eq!(again.stdout, first.stdout);
    assert_eq!(fx.scalar("SELECT count(*) FROM session_prune_receipt"), 10);
}

#[test]
fn prune_batch_with_a_stale_candidate_exits_3_and_prunes_the_rest() {
    let fx = Fixture::new();
    let pages = all_pages(&fx, &[MANY_TURNS, "--purpose", "prune"]);
    let mut candidates: Vec<Value> = pages
        .iter()
        .flat_map(|p| p["candidates"].as_array().unwrap().clone())
        .take(2)
        .collect();
    candidates[1]["revision"] = Value::String("0".repeat(64));
    let body = serde_json::to_vec(&candidates).unwrap();
    let out = run_with_stdin(
        &fx.db,
        &["--json", "prune-batch", MANY_TURNS, "--candidates", "-"],
        &body,
    );
    assert_exit(&out, 3);
    let results = json(&out)["results"].clone();
    assert_eq!(results[0]["result"]["status"], "pruned");
    assert_eq!(
        results[1]["result"],
        serde_json::json!({"status": "blocked", "reason": "conflict"})
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("revision does not match"));
}

#[test]
fn prune_batch_bad_candidates_exit_2_and_write_nothing() {
    let fx = Fixture::new();
    let before = fx.file_digest();
    let cases: [(&str, &str); 4] = [
        (
            "{\"status\":\"blocked\",\"reason\":\"not_deletable\"}",
            "blocked history answer",
        ),
        (
            "{\"sessionID\":\"ses_other\",\"candidates\":[]}",
            "for session ses_other",
        ),
        (
            "[{\"messageID\":\"m\",\"revision\":\"x\",\"toolCount\":1,\"reasoningCount\":0}]",
            "revision must be 64",
        ),
        ("[{\"messageID\":\"m\"}]", "bad candidate"),
    ];
    for (body, words) in cases {
        let out = run_with_stdin(
            &fx.db,
            &["--json", "prune-batch", MANY_TURNS, "--candidates", "-"],
            body.as_bytes(),
        );
        assert_json_error(&out, 2, words);
    }
    assert_eq!(fx.file_digest(), before);
    assert!(!fx.journal.exists());
    // No candidates at all: nothing to do, and that is no error.
    let empty = run_with_stdin(
        &fx.db,
        &["--json", "prune-batch", MANY_TURNS, "--candidates", "-"],
        b"{\"status\":\"page\",\"candidates\":[]}",
    );
    assert_exit(&empty, 0);
    assert_eq!(json(&empty), serde_json::json!({"results": []}));
    assert!(!fx.journal.exists());
}

#[test]
fn scope_flags_refuse_a_session_elsewhere() {
    let fx = Fixture::new();
    let out = run(
        &fx.db,
        &[
            "--json",
            "preview",
            MANY_TURNS,
            TURN5,
            "--directory",
            "/elsewhere",
        ],
    );
    assert_exit(&out, 3);
    assert_eq!(
        json(&out),
        serde_json::json!({"status": "blocked", "reason": "not_deletable"})
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("outside the request's scope"));
    let revision = json(&run(&fx.db, &["--json", "preview", MANY_TURNS, TURN5]))["revision"]
        .as_str()
        .unwrap()
        .to_string();
    let before = fx.file_digest();
    let prune = run(
        &fx.db,
        &[
            "--json",
            "prune",
            MANY_TURNS,
            TURN5,
            "--revision",
            &revision,
            "--all-technical",
            "--project",
            "prj_elsewhere",
        ],
    );
    assert_exit(&prune, 3);
    assert_eq!(fx.file_digest(), before);
    assert_one_refused_intent(&fx.journal, pruning_engine::BlockedReason::NotDeletable);
}

#[test]
fn listings_cover_a_v2_only_database() {
    let fx = V2Fixture::new();
    let sessions = run(&fx.db, &["--json", "sessions"]);
    assert_exit(&sessions, 0);
    let list = json(&sessions);
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["sessionID"], V2_SESSION);
    assert_eq!(list[0]["messages"], 2);
    assert!(list[0]["prunableBytes"].as_u64().unwrap() > 0);
    let messages = json(&run(&fx.db, &["--json", "messages", V2_SESSION]));
    let rows: Vec<(&str, &str, u64, &str)> = messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["messageID"].as_str().unwrap(),
                m["role"].as_str().unwrap(),
                m["technicalParts"].as_u64().unwrap(),
                m["storage"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            ("msg_v2_fixture_user_000000001", "user", 0, "v2"),
            (V2_ASSISTANT, "assistant", 2, "v2"),
        ]
    );
}

/// Candidates of the many-turns session, as `history --purpose prune --all --json` lists them.
fn many_turns_candidates(fx: &Fixture) -> Vec<Value> {
    all_pages(fx, &[MANY_TURNS, "--purpose", "prune"])
        .iter()
        .flat_map(|p| p["candidates"].as_array().unwrap().clone())
        .collect()
}

#[test]
fn prune_batch_while_another_process_holds_the_journal_is_blocked() {
    let fx = Fixture::new();
    let candidates = many_turns_candidates(&fx);
    let held = pruning_engine::Journal::open(&fx.journal).unwrap();
    let before = fx.file_digest();
    let out = run_with_stdin(
        &fx.db,
        &["--json", "prune-batch", MANY_TURNS, "--candidates", "-"],
        &serde_json::to_vec(&candidates[..3]).unwrap(),
    );
    assert_exit(&out, 3);
    let blocked = serde_json::json!({"status": "blocked", "reason": "maintenance_required"});
    let results = json(&out)["results"].as_array().unwrap().clone();
    assert_eq!(results.len(), 3);
    assert!(results.iter().all(|item| item["result"] == blocked));
    assert_eq!(fx.file_digest(), before);
    assert_eq!(held.intents().unwrap().len(), 0);
}

#[test]
fn a_message_listed_twice_is_bad_input_even_across_batches() {
    let fx = Fixture::new();
    let mut candidates = many_turns_candidates(&fx);
    candidates.push(candidates[0].clone());
    let out = run_with_stdin(
        &fx.db,
        &["--json", "prune-batch", MANY_TURNS, "--candidates", "-"],
        &serde_json::to_vec(&candidates).unwrap(),
    );
    assert_json_error(&out, 2, "is listed twice");
    let batch_body = serde_json::json!({"sessionID": 5, "candidates": candidates[..1]});
    let out = run_with_stdin(
        &fx.db,
        &["--json", "prune-batch", MANY_TURNS, "--candidates", "-"],
        &serde_json::to_vec(&batch_body).unwrap(),
    );
    assert_json_error(&out, 2, "not a batch body");
    assert!(!fx.journal.exists());
}

#[test]
fn listings_survive_malformed_rows_and_odd_column_types() {
    let fx = Fixture::new();
    fx.exec(&format!(
        "UPDATE part SET data = '{{bad' WHERE id = (SELECT id FROM part WHERE session_id = '{MANY_TURNS}' LIMIT 1);
         UPDATE event SET data = '{{bad' WHERE rowid = (SELECT min(rowid) FROM event WHERE type = 'message.part.updated.1');
         UPDATE message SET time_created = 'abc' WHERE id = '{TURN5}';
         UPDATE session SET time_updated = 'x' WHERE id = '{MANY_TURNS}';"
    ));
    let sessions = run(&fx.db, &["--json", "sessions"]);
    assert_exit(&sessions, 0);
    assert_eq!(json(&sessions).as_array().unwrap().len(), 10);
    let messages = run(&fx.db, &["--json", "messages", MANY_TURNS]);
    assert_exit(&messages, 0);
    let list = json(&messages);
    let turn5 = list
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["messageID"] == TURN5)
        .unwrap();
    assert_eq!(
        turn5["timeCreated"], 0,
        "a time that is not a number reads as 0"
    );
    // History scans past both: the message with the odd time comes last, the bad part skips
    // its message.
    let pages = all_pages(&fx, &[MANY_TURNS, "--purpose", "stats"]);
    let scanned: u64 = pages.iter().map(|p| p["scanned"].as_u64().unwrap()).sum();
    let skipped: u64 = pages.iter().map(|p| p["skipped"].as_u64().unwrap()).sum();
    assert_eq!((scanned, skipped), (30, 1));
}
