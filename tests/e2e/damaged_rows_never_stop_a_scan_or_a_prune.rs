//! Damaged rows in a real database (ids that are not text, text that is not UTF-8, snapshot
//! events that are not JSON, the same message in both generations, a session held by both
//! session tables) never stop a history scan, never make a page list a message twice, never
//! widen a scope, and never block the prune of a healthy message.

use crate::common;

use std::collections::BTreeSet;

use common::cli::{assert_exit, json, run};
use common::*;
use pruning_engine::history::history_with;
use pruning_engine::{HistoryRequest, HistoryResult, PruneResult, Purpose, Scope};

/// The fixture's V2 session and its first assistant message (read-only in OpenCode 1.18).
const V2_SESSION: &str = "ses_dd9925f43ffe2Is1MklYsLGbbU";
const V2_MESSAGE: &str = "msg_2266dabb2001y39t0IapYwvrbI";

/// Every page of a history scan; the message ids of the hits and the candidates.
fn scan(fx: &Fixture, request: HistoryRequest) -> (Vec<String>, Vec<(String, String)>) {
    let store = fx.store(0);
    let mut request = request;
    let (mut hits, mut candidates) = (Vec::new(), Vec::new());
    for _ in 0..1000 {
        let HistoryResult::Page(page) = history_with(&store, &request, ROWS_ONLY).unwrap().result
        else {
            panic!("blocked")
        };
        hits.extend(page.hits.into_iter().map(|h| h.message_id));
        candidates.extend(
            page.candidates
                .into_iter()
                .map(|c| (c.message_id, c.revision)),
        );
        match page.cursor {
            Some(cursor) => request.cursor = Some(cursor),
            None => return (hits, candidates),
        }
    }
    panic!("the scan does not end");
}

#[test]
fn ids_that_are_not_utf8_text_end_no_scan() {
    let fx = Fixture::new();
    let conn = fx.sql();
    for i in 0..40 {
        let blob = format!("msg_blob{i:02}").into_bytes();
        conn.execute(
            "INSERT INTO session_message VALUES (?1, ?2, 'user', ?3, 5000, 5000, '{\"text\":\"ALLMATCH\"}')",
            rusqlite::params![blob, V2_SESSION, 1000 + i],
        )
        .unwrap();
        conn.execute(
            &format!(
                "INSERT INTO session_message VALUES (CAST(x'6d73675f{:02x}ff' AS TEXT), ?1, 'user', ?2, 5001, 5001, '{{\"text\":\"ALLMATCH\"}}')",
                i
            ),
            rusqlite::params![V2_SESSION, 2000 + i],
        )
        .unwrap();
    }
    drop(conn);
    let request = HistoryRequest::new(
        Some(V2_SESSION.into()),
        "allmatch".into(),
        true,
        Purpose::Search,
        None,
    )
    .unwrap();
    let (hits, _) = scan(&fx, request);
    assert!(
        hits.is_empty(),
        "rows a request cannot name are not scanned: {hits:?}"
    );
}

#[test]
fn a_message_in_both_generations_is_one_candidate_of_the_writable_row() {
    let fx = Fixture::new();
    // A V1 copy of the read-only V2 message, under its id and session.
    fx.exec(&format!(
        "INSERT INTO message SELECT '{V2_MESSAGE}', '{V2_SESSION}', time_created, time_updated, data
           FROM message WHERE id = '{TURN5}';
         INSERT INTO part SELECT id || '_copy', '{V2_MESSAGE}', '{V2_SESSION}', time_created, time_updated, data
           FROM part WHERE message_id = '{TURN5}';"
    ));
    let request = prune_listing(V2_SESSION);
    let (_, candidates) = scan(&fx, request);
    let ids: Vec<&str> = candidates.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, vec![V2_MESSAGE]);
    // It is the V1 row's revision: a prune with it goes through.
    let engine = fx.engine_with(fx.store(0));
    let outcome = engine
        .prune(
            &pruning_engine::PruneRequest::all_technical(
                V2_SESSION.into(),
                V2_MESSAGE.into(),
                candidates[0].1.clone(),
            )
            .unwrap(),
        )
        .unwrap();
    assert!(
        matches!(outcome.result, PruneResult::Pruned { .. }),
        "{outcome:?}"
    );
}

#[test]
fn a_snapshot_that_is_not_json_stays_and_the_prune_goes_through() {
    let fx = Fixture::new();
    fx.exec(&format!(
        "UPDATE event SET data = substr(data, 1, 200) WHERE rowid = (SELECT rowid FROM event
           WHERE aggregate_id = '{MANY_TURNS}' AND type = 'message.part.updated.1'
             AND data LIKE '%{TURN5}%' LIMIT 1)"
    ));
    let out = run(
        &fx.db,
        &[
            "--json",
            "--quiet-period",
            "0",
            "clean",
            MANY_TURNS,
            "--keep-last-turns",
            "0",
            "--apply",
        ],
    );
    assert_exit(&out, 0);
    let report = json(&out);
    assert_eq!(report["pruned"], 10, "{report}");
    assert_eq!(report["blocked"], serde_json::json!({}));
    assert_eq!(fx.rows_containing("part", "TOOL_CANARY_T05"), 0);
}

#[test]
fn damaged_session_text_neither_breaks_the_listing_nor_widens_a_scope() {
    let fx = Fixture::new();
    fx.exec(
        "UPDATE session SET title = x'ff00' WHERE id = 'ses_dd9927d77ffeCzugJZ3vDGPMn9';
         UPDATE session SET directory = CAST(x'2f6574632fff' AS TEXT) WHERE id = 'ses_dd9927fe4ffeeLUb9gCpxbS0RI';",
    );
    let sessions = run(&fx.db, &["--json", "sessions"]);
    assert_exit(&sessions, 0);
    assert_eq!(json(&sessions).as_array().unwrap().len(), 10);
    let directory = json(&sessions)
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sessionID"] == MANY_TURNS)
        .unwrap()["directory"]
        .as_str()
        .unwrap()
        .to_string();
    let request = HistoryRequest::new(None, "canary".into(), true, Purpose::Search, None)
        .unwrap()
        .within(Scope {
            directory: Some(directory),
            ..Scope::default()
        });
    let store = fx.store(0);
    let HistoryResult::Page(_) = history_with(&store, &request, ROWS_ONLY).unwrap().result else {
        panic!("a damaged directory elsewhere blocked the scan")
    };
    let (hits, _) = scan(&fx, request);
    let sessions: BTreeSet<String> = {
        let conn = fx.sql();
        hits.iter()
            .map(|id| {
                conn.query_row(
                    "SELECT session_id FROM message WHERE id = ?1 UNION SELECT session_id FROM session_message WHERE id = ?1",
                    [id],
                    |r| r.get(0),
                )
                .unwrap()
            })
            .collect()
    };
    assert!(
        !sessions.contains("ses_dd9927fe4ffeeLUb9gCpxbS0RI"),
        "{sessions:?}"
    );
}

#[test]
fn refusal_words_from_the_database_reach_the_terminal_without_escapes() {
    let fx = Fixture::new();
    fx.exec(&format!(
        "UPDATE session SET directory = '/tmp/' || char(27) || ']0;pwn' || char(7) WHERE id = '{MANY_TURNS}'"
    ));
    let out = run(
        &fx.db,
        &["preview", MANY_TURNS, TURN5, "--directory", "/repo"],
    );
    assert_exit(&out, 3);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("outside /repo"), "{text}");
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}'),
        "{text:?}"
    );
}
