//! History pages: 257 messages come back 32 rows at a time with no skip and no repeat; rows
//! appended mid-scan neither shift the cursor nor extend the scan; a cursor only resumes the
//! query and scope it was made for; both storage generations are scanned in one order.

use crate::common;

use common::ROWS_ONLY;

use std::collections::HashSet;

use common::v2::{V2Fixture, V2_SESSION};
use pruning_engine::history::{history_with, HistoryPage};
use pruning_engine::{ContractError, EngineError, HistoryRequest, HistoryResult, Purpose, Scope};
use pruning_opencode::{OpenCodeStore, StoreOptions};

/// The V2 fixture's session grown to 257 messages: user and assistant turns, one per ms.
fn session_of_257() -> V2Fixture {
    let fx = V2Fixture::new();
    for seq in 3..=257 {
        let (kind, data) = if seq % 2 == 1 {
            (
                "user",
                format!(r#"{{"time":{{"created":{seq}}},"text":"question {seq}"}}"#),
            )
        } else {
            (
                "assistant",
                format!(
                    r#"{{"time":{{"created":{seq},"completed":{seq}}},"content":[{{"type":"text","id":"t","text":"answer {seq}"}}]}}"#
                ),
            )
        };
        fx.insert_message(V2_SESSION, &format!("msg_{seq:04}"), kind, seq, &data);
    }
    fx
}

fn store(db: &std::path::Path) -> OpenCodeStore {
    OpenCodeStore::open(db, StoreOptions::default()).unwrap()
}

fn page(store: &OpenCodeStore, request: &HistoryRequest) -> HistoryPage {
    match history_with(store, request, ROWS_ONLY).unwrap().result {
        HistoryResult::Page(page) => page,
        other => panic!("{other:?}"),
    }
}

fn stats(session: Option<&str>, cursor: Option<String>) -> HistoryRequest {
    HistoryRequest::new(
        session.map(str::to_string),
        String::new(),
        true,
        Purpose::Stats,
        cursor,
    )
    .unwrap()
}

/// Every message id of the session, in the scan's order (time_created, then id).
fn all_ids(fx: &V2Fixture) -> Vec<String> {
    let conn = fx.sql();
    let mut stmt = conn
        .prepare("SELECT id FROM session_message ORDER BY time_created, id")
        .unwrap();
    let ids = stmt.query_map([], |r| r.get(0)).unwrap();
    ids.collect::<Result<_, _>>().unwrap()
}

/// Runs a scan to its end and returns the hit message ids of each page; `between(n)` runs after
/// page `n`. The query must hit every row, so hits stand for the rows scanned.
fn scanned_ids(
    store: &OpenCodeStore,
    first: HistoryRequest,
    between: impl Fn(usize),
) -> Vec<Vec<String>> {
    let mut pages = Vec::new();
    let mut request = first;
    loop {
        let page = page(store, &request);
        pages.push(
            page.hits
                .iter()
                .map(|h| h.message_id.clone())
                .collect::<Vec<_>>(),
        );
        assert_eq!(page.hits.len() as u32, page.scanned, "every row hits");
        between(pages.len());
        match page.cursor {
            Some(cursor) => request.cursor = Some(cursor),
            None => return pages,
        }
    }
}

/// A search that hits every row of the session: each text holds an `e` ("question", "answer",
/// "Please", "Reasoning").
fn every_row(session: &str) -> HistoryRequest {
    HistoryRequest::new(
        Some(session.into()),
        "e".into(),
        true,
        Purpose::Search,
        None,
    )
    .unwrap()
}

#[test]
fn two_hundred_fifty_seven_messages_page_32_at_a_time_without_skip_or_repeat() {
    let fx = session_of_257();
    let store = store(&fx.db);
    let pages = scanned_ids(&store, every_row(V2_SESSION), |_| {});
    let sizes: Vec<usize> = pages.iter().map(Vec::len).collect();
    assert_eq!(sizes, vec![32, 32, 32, 32, 32, 32, 32, 32, 1]);
    let seen: Vec<String> = pages.into_iter().flatten().collect();
    assert_eq!(seen, all_ids(&fx), "every message once, in order");
}

#[test]
fn rows_appended_mid_scan_do_not_shift_the_cursor() {
    let fx = session_of_257();
    let original = all_ids(&fx);
    let store = store(&fx.db);
    let pages = scanned_ids(&store, every_row(V2_SESSION), |done| {
        if done == 2 {
            // A new turn after the horizon, and a row stamped before the cursor (a clock that
            // went back): neither belongs to the scan that already passed them.
            fx.insert_message(
                V2_SESSION,
                "msg_appended_late",
                "user",
                10_000,
                r#"{"time":{"created":10000},"text":"late question"}"#,
            );
            fx.insert_message(
                V2_SESSION,
                "msg_appended_early",
                "user",
                -1,
                r#"{"time":{"created":0},"text":"early question"}"#,
            );
        }
    });
    let seen: Vec<String> = pages.into_iter().flatten().collect();
    assert_eq!(seen, original);
    // A new scan sees them both.
    let again: HashSet<String> = scanned_ids(&store, every_row(V2_SESSION), |_| {})
        .into_iter()
        .flatten()
        .collect();
    assert!(again.contains("msg_appended_late") && again.contains("msg_appended_early"));
    assert_eq!(again.len(), 259);
}

#[test]
fn stats_count_every_row_once_across_pages() {
    let fx = session_of_257();
    let store = store(&fx.db);
    let mut request = stats(Some(V2_SESSION), None);
    let (mut scanned, mut tools, mut reasoning, mut pages) = (0, 0, 0, 0);
    loop {
        let page = page(&store, &request);
        assert!(page.hits.is_empty() && page.candidates.is_empty());
        scanned += page.scanned;
        tools += page.tools;
        reasoning += page.reasoning;
        pages += 1;
        match page.cursor {
            Some(cursor) => request.cursor = Some(cursor),
            None => break,
        }
    }
    // The fixture's first assistant message holds one reasoning and one tool part.
    assert_eq!((scanned, tools, reasoning, pages), (257, 1, 1, 9));
}

#[test]
fn a_cursor_resumes_only_its_own_query_and_scope() {
    let fx = session_of_257();
    let store = store(&fx.db);
    let first = page(&store, &every_row(V2_SESSION));
    let cursor = first.cursor.expect("more pages");
    let foreign = |request: HistoryRequest| {
        let request = HistoryRequest {
            cursor: Some(cursor.clone()),
            ..request
        };
        match history_with(&store, &request, ROWS_ONLY) {
            Err(EngineError::Contract(ContractError::Cursor { detail })) => detail,
            other => panic!("{other:?}"),
        }
    };
    let other_query = HistoryRequest::new(
        Some(V2_SESSION.into()),
        "E".into(),
        true,
        Purpose::Search,
        None,
    )
    .unwrap();
    assert!(foreign(other_query).contains("another query, scope or database"));
    let other_scope = every_row(V2_SESSION).within(Scope {
        directory: Some("/work".into()),
        ..Scope::default()
    });
    assert!(foreign(other_scope).contains("another query, scope or database"));
    assert!(foreign(stats(Some(V2_SESSION), None)).contains("another query, scope or database"));
    let mut damaged = cursor.clone();
    damaged.push('0');
    let request = HistoryRequest {
        cursor: Some(damaged),
        ..every_row(V2_SESSION)
    };
    assert!(matches!(
        history_with(&store, &request, ROWS_ONLY),
        Err(EngineError::Contract(ContractError::Cursor { .. }))
    ));
}

#[test]
fn both_generations_are_scanned_in_one_order() {
    let fx = common::Fixture::new();
    let store = fx.store(0);
    let mut request = stats(None, None);
    let (mut scanned, mut skipped) = (0, 0);
    loop {
        let page = page(&store, &request);
        scanned += page.scanned;
        skipped += page.skipped;
        match page.cursor {
            Some(cursor) => request.cursor = Some(cursor),
            None => break,
        }
    }
    let v1 = fx.scalar("SELECT count(*) FROM message");
    let v2 = fx.scalar("SELECT count(*) FROM session_message");
    assert_eq!((v1, v2), (68, 8));
    assert_eq!(i64::from(scanned), v1 + v2);
    // The two runs killed mid-turn left one incomplete assistant message each.
    assert_eq!(skipped, 2);
}

#[test]
fn rows_without_an_integer_time_come_last_and_once() {
    let fx = session_of_257();
    for (id, time) in [
        ("msg_untimed_b", "'abc'"),
        ("msg_untimed_a", "1.5"),
        ("msg_untimed_c", "x'00'"),
    ] {
        fx.exec(&format!(
            "INSERT INTO session_message VALUES ('{id}', '{V2_SESSION}', 'user', 0 - length('{id}') * 1000 - unicode(substr('{id}', -1)), {time}, 1,
               '{{\"time\":{{\"created\":1}},\"text\":\"untimed question\"}}')"
        ));
    }
    let store = store(&fx.db);
    let seen: Vec<String> = scanned_ids(&store, every_row(V2_SESSION), |_| {})
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(seen.len(), 260);
    let timed: Vec<String> = all_ids(&fx)
        .into_iter()
        .filter(|id| !id.starts_with("msg_untimed"))
        .collect();
    assert_eq!(&seen[..257], &timed[..]);
    assert_eq!(
        &seen[257..],
        ["msg_untimed_a", "msg_untimed_b", "msg_untimed_c"]
    );
}
