//! History scans walk session by session, in session id order, and within a session by
//! `time_created`, then id, then storage generation (docs/ARCHITECTURE.md, "History scans"): in
//! V1, in V2, and in a database holding both; pages of any size join up across session
//! boundaries; rows appended mid-scan, in a session already visited or one still to come, are
//! never visited and never shift the cursor; a scope's sessions come in the same order; a
//! message table without row numbers is refused in words; a cursor of the earlier time-ordered
//! scan is bad input (exit 2, HTTP 400).

use crate::common;

use common::app::App;
use common::cli::{assert_json_error, run};
use common::http::parse;
use common::v2::{V2Fixture, V2_SESSION};
use common::Fixture;
use pruning_engine::history::{history_with, Cursor, PageLimits, Position};
use pruning_engine::{
    BlockedReason, ContractError, EngineError, HistoryRequest, HistoryResult, Purpose, Scope,
};
use rusqlite::{params, Connection};
use serde_json::json;

/// Pages of `rows` rows with no time budget to end them early.
fn rows(rows: usize) -> PageLimits {
    PageLimits {
        rows,
        time_budget: std::time::Duration::from_secs(3600),
    }
}

/// A search of every session that hits every row added here (each says "entry").
fn every_entry() -> HistoryRequest {
    HistoryRequest::new(None, "entry".into(), true, Purpose::Search, None).unwrap()
}

/// Adds session `id` unless it exists: to `session` (a copy of the fixture's many-turns
/// session row) where the database has that table, else to `session_v2`.
fn session(conn: &Connection, id: &str) {
    let shared: bool = conn
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'session'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let sql = if shared {
        "INSERT OR IGNORE INTO session (id, project_id, slug, directory, title, version, time_created, time_updated)
         SELECT ?1, project_id, slug, directory, 'walk', version, time_created, time_updated
         FROM session WHERE id = ?2"
    } else {
        "INSERT OR IGNORE INTO session_v2 (id, project_id, slug, directory, title, version, time_created, time_updated)
         VALUES (?1, 'prj', 'walk', '/work', 'walk', '2.0.0', 1, 1)"
    };
    let mut stmt = conn.prepare(sql).unwrap();
    if shared {
        stmt.execute(params![id, common::MANY_TURNS]).unwrap();
    } else {
        stmt.execute(params![id]).unwrap();
    }
}

/// Adds a V1 user message `id` of `session` created at `time`, with one text part.
fn v1(conn: &Connection, session_id: &str, id: &str, time: i64) {
    session(conn, session_id);
    let session = session_id;
    let data = format!(r#"{{"role":"user","time":{{"created":{time}}}}}"#);
    conn.execute(
        "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?3, ?4)",
        params![id, session, time, data],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data)
         VALUES ('prt_' || ?1, ?1, ?2, ?3, ?3, '{\"type\":\"text\",\"text\":\"an entry\"}')",
        params![id, session, time],
    )
    .unwrap();
}

/// Adds a V2 user message `id` of `session` created at `time` (the session's next `seq`).
fn v2(conn: &Connection, session_id: &str, id: &str, time: i64) {
    session(conn, session_id);
    let session = session_id;
    let data = format!(r#"{{"time":{{"created":{time}}},"text":"an entry"}}"#);
    conn.execute(
        "INSERT INTO session_message (id, session_id, type, seq, time_created, time_updated, data)
         VALUES (?1, ?2, 'user',
           (SELECT coalesce(max(seq), 0) + 1 FROM session_message WHERE session_id = ?2), ?3, ?3, ?4)",
        params![id, session, time, data],
    )
    .unwrap();
}

/// Every page of a scan: the `(sessionID, messageID)` of each page's hits; `between(n)` runs
/// after page `n`.
fn pages_of(
    store: &pruning_opencode::OpenCodeStore,
    first: HistoryRequest,
    limits: PageLimits,
    between: impl Fn(usize),
) -> Vec<Vec<(String, String)>> {
    let mut pages = Vec::new();
    let mut request = first;
    for _ in 0..1000 {
        let HistoryResult::Page(page) = history_with(store, &request, limits).unwrap().result
        else {
            panic!("blocked")
        };
        assert_eq!(page.hits.len() as u32, page.scanned, "every row hits");
        assert!(page.scanned as usize <= limits.rows);
        pages.push(
            page.hits
                .into_iter()
                .map(|h| (h.session_id, h.message_id))
                .collect(),
        );
        between(pages.len());
        match page.cursor {
            Some(cursor) => request.cursor = Some(cursor),
            None => return pages,
        }
    }
    panic!("the scan does not end");
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(s, m)| (s.to_string(), m.to_string()))
        .collect()
}

/// The real 1.18.34 fixture (V1 and V2 tables) emptied of messages.
fn both_generations() -> Fixture {
    let fx = Fixture::new();
    fx.exec("DELETE FROM part; DELETE FROM message; DELETE FROM session_message;");
    fx
}

/// Rows of both generations whose times, ids and sessions each sort differently; `msg_same` is
/// held by both generations (a database upgraded in place).
fn mixed_rows(fx: &Fixture) {
    let conn = fx.sql();
    v1(&conn, "ses_b", "msg_b1", 10);
    v1(&conn, "ses_b", "msg_b2", 5);
    v1(&conn, "ses_a", "msg_a1", 30);
    v1(&conn, "ses_c", "msg_c1", 1);
    v1(&conn, "ses_a", "msg_same", 20);
    v2(&conn, "ses_a", "msg_a2", 25);
    v2(&conn, "ses_a", "msg_same", 20);
    v2(&conn, "ses_d", "msg_d1", 0);
    v2(&conn, "ses_b", "msg_b3", 7);
}

/// [`mixed_rows`] in scan order: sessions by id; in a session by time, id, generation.
const MIXED_ORDER: [(&str, &str); 9] = [
    ("ses_a", "msg_same"),
    ("ses_a", "msg_same"),
    ("ses_a", "msg_a2"),
    ("ses_a", "msg_a1"),
    ("ses_b", "msg_b2"),
    ("ses_b", "msg_b3"),
    ("ses_b", "msg_b1"),
    ("ses_c", "msg_c1"),
    ("ses_d", "msg_d1"),
];

#[test]
fn v1_rows_come_session_by_session_then_by_time_and_id() {
    let fx = both_generations();
    fx.exec("DROP TABLE session_message");
    let conn = fx.sql();
    v1(&conn, "ses_b", "msg_1", 50);
    v1(&conn, "ses_b", "msg_9", 10);
    v1(&conn, "ses_b", "msg_5", 10);
    v1(&conn, "ses_a", "msg_7", 40);
    v1(&conn, "ses_a", "msg_3", 60);
    v1(&conn, "ses_c", "msg_2", 5);
    drop(conn);
    let store = fx.store(0);
    let seen: Vec<(String, String)> = pages_of(&store, every_entry(), rows(32), |_| {})
        .into_iter()
        .flatten()
        .collect();
    // By time alone it would be msg_2, msg_5, msg_9, msg_7, msg_1, msg_3.
    assert_eq!(
        seen,
        pairs(&[
            ("ses_a", "msg_7"),
            ("ses_a", "msg_3"),
            ("ses_b", "msg_5"),
            ("ses_b", "msg_9"),
            ("ses_b", "msg_1"),
            ("ses_c", "msg_2"),
        ])
    );
}

#[test]
fn v2_rows_come_session_by_session_then_by_time_and_id() {
    let fx = V2Fixture::new();
    let conn = fx.sql();
    v2(&conn, "ses_b", "msg_1", 50);
    v2(&conn, "ses_b", "msg_9", 10);
    v2(&conn, "ses_b", "msg_5", 10);
    v2(&conn, "ses_a", "msg_7", 40);
    v2(&conn, "ses_a", "msg_3", 60);
    v2(&conn, "ses_c", "msg_2", 5);
    drop(conn);
    let store =
        pruning_opencode::OpenCodeStore::open(&fx.db, pruning_opencode::StoreOptions::default())
            .unwrap();
    // The fixture's own session holds no "entry": its two rows are scanned, without a hit.
    let request = every_entry();
    let HistoryResult::Page(page) = history_with(&store, &request, rows(32)).unwrap().result else {
        panic!("blocked")
    };
    let seen: Vec<(&str, &str)> = page
        .hits
        .iter()
        .map(|h| (h.session_id.as_str(), h.message_id.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("ses_a", "msg_7"),
            ("ses_a", "msg_3"),
            ("ses_b", "msg_5"),
            ("ses_b", "msg_9"),
            ("ses_b", "msg_1"),
            ("ses_c", "msg_2"),
        ]
    );
    assert_eq!((page.scanned, page.cursor), (8, None));
    // Its rows come after ses_c's: a search that hits them sees them last.
    let fixture_rows = HistoryRequest::new(None, "e".into(), false, Purpose::Search, None).unwrap();
    let HistoryResult::Page(page) = history_with(&store, &fixture_rows, rows(32))
        .unwrap()
        .result
    else {
        panic!("blocked")
    };
    let sessions: Vec<&str> = page.hits.iter().map(|h| h.session_id.as_str()).collect();
    assert_eq!(
        sessions,
        ["ses_a", "ses_a", "ses_b", "ses_b", "ses_b", "ses_c", V2_SESSION, V2_SESSION]
    );
}

#[test]
fn both_generations_merge_within_each_session() {
    let fx = both_generations();
    mixed_rows(&fx);
    let store = fx.store(0);
    let seen: Vec<(String, String)> = pages_of(&store, every_entry(), rows(32), |_| {})
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(seen, pairs(&MIXED_ORDER));
}

#[test]
fn pages_of_every_size_join_up_across_session_boundaries() {
    let fx = both_generations();
    mixed_rows(&fx);
    let store = fx.store(0);
    for size in 1..=10 {
        let pages = pages_of(&store, every_entry(), rows(size), |_| {});
        let expected: Vec<Vec<(String, String)>> = pairs(&MIXED_ORDER)
            .chunks(size)
            .map(<[_]>::to_vec)
            .collect();
        assert_eq!(pages, expected, "pages of {size}");
    }
}

#[test]
fn a_scope_walks_its_sessions_in_id_order_past_those_outside_it() {
    let fx = both_generations();
    mixed_rows(&fx);
    // ses_b moves elsewhere; a session outside the scope sorts first, one between.
    let conn = fx.sql();
    v1(&conn, "ses_0", "msg_elsewhere_0", 1);
    v2(&conn, "ses_bb", "msg_elsewhere_bb", 1);
    conn.execute_batch(
        "UPDATE session SET directory = '/elsewhere' WHERE id IN ('ses_0', 'ses_b', 'ses_bb')",
    )
    .unwrap();
    let directory: String = conn
        .query_row(
            "SELECT directory FROM session WHERE id = ?1",
            [common::MANY_TURNS],
            |r| r.get(0),
        )
        .unwrap();
    drop(conn);
    let store = fx.store(0);
    let scoped = every_entry().within(Scope {
        directory: Some(directory),
        ..Scope::default()
    });
    let inside: Vec<(String, String)> = pairs(&MIXED_ORDER)
        .into_iter()
        .filter(|(session, _)| session != "ses_b")
        .collect();
    assert_eq!(inside.len(), 6);
    for size in 1..=7 {
        let pages = pages_of(&store, scoped.clone(), rows(size), |_| {});
        let expected: Vec<Vec<(String, String)>> = inside.chunks(size).map(<[_]>::to_vec).collect();
        assert_eq!(pages, expected, "pages of {size}");
    }
}

#[test]
fn the_real_fixtures_rows_come_in_the_documented_order() {
    let fx = Fixture::new();
    let expected: Vec<Position> = {
        let conn = fx.sql();
        let mut stmt = conn
            .prepare(
                "SELECT session_id, time_created, id, 1 FROM message
                 UNION ALL SELECT session_id, time_created, id, 2 FROM session_message
                 ORDER BY 1, 2, 3, 4",
            )
            .unwrap();
        let rows = stmt
            .query_map([], |r| {
                Ok(Position {
                    session_id: r.get(0)?,
                    time_created: r.get(1)?,
                    message_id: r.get(2)?,
                    generation: r.get(3)?,
                })
            })
            .unwrap();
        rows.collect::<Result<_, _>>().unwrap()
    };
    assert_eq!(expected.len(), 76);
    // Pages of one row: each page's cursor names the row it visited, until the last page.
    let store = fx.store(0);
    let request = HistoryRequest::new(None, String::new(), true, Purpose::Stats, None).unwrap();
    let location = pruning_engine::SessionStore::location(&store);
    let mut visited = Vec::new();
    let mut next = request.clone();
    let mut scanned = 0;
    loop {
        let HistoryResult::Page(page) = history_with(&store, &next, rows(1)).unwrap().result else {
            panic!("blocked")
        };
        scanned += page.scanned;
        let Some(cursor) = page.cursor else { break };
        visited.push(
            Cursor::decode(&cursor, &request, location.as_deref())
                .unwrap()
                .after,
        );
        next.cursor = Some(cursor);
    }
    assert_eq!(scanned, 76);
    assert_eq!(visited, expected[..75]);
}

#[test]
fn rows_appended_mid_scan_are_not_visited_wherever_they_land() {
    let fx = both_generations();
    mixed_rows(&fx);
    let store = fx.store(0);
    let pages = pages_of(&store, every_entry(), rows(2), |done| {
        if done != 3 {
            return;
        }
        // The cursor is inside ses_b (after msg_b2, msg_b3). New rows: after the cursor in the
        // session being visited, in a session already visited, in sessions still to come
        // (stamped before everything, as a clock set back would), and in new sessions before,
        // between and after the others, in both generations.
        let conn = fx.sql();
        v1(&conn, "ses_b", "msg_b_late", 1_000);
        v2(&conn, "ses_b", "msg_b_late_v2", 1_001);
        v1(&conn, "ses_a", "msg_a_late", 1_000);
        v1(&conn, "ses_c", "msg_c_early", -1);
        v2(&conn, "ses_d", "msg_d_early", -1);
        v2(&conn, "ses_0", "msg_new_first", 1_000);
        v1(&conn, "ses_bb", "msg_new_between", 1_000);
        v2(&conn, "ses_z", "msg_new_last", 1_000);
    });
    let expected: Vec<Vec<(String, String)>> =
        pairs(&MIXED_ORDER).chunks(2).map(<[_]>::to_vec).collect();
    assert_eq!(pages, expected);
    // A new scan sees them all, each in its place.
    let again: Vec<(String, String)> = pages_of(&store, every_entry(), rows(32), |_| {})
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(
        again,
        pairs(&[
            ("ses_0", "msg_new_first"),
            ("ses_a", "msg_same"),
            ("ses_a", "msg_same"),
            ("ses_a", "msg_a2"),
            ("ses_a", "msg_a1"),
            ("ses_a", "msg_a_late"),
            ("ses_b", "msg_b2"),
            ("ses_b", "msg_b3"),
            ("ses_b", "msg_b1"),
            ("ses_b", "msg_b_late"),
            ("ses_b", "msg_b_late_v2"),
            ("ses_bb", "msg_new_between"),
            ("ses_c", "msg_c_early"),
            ("ses_c", "msg_c1"),
            ("ses_d", "msg_d_early"),
            ("ses_d", "msg_d1"),
            ("ses_z", "msg_new_last"),
        ])
    );
}

#[test]
fn a_message_table_without_row_numbers_is_refused_in_words() {
    let fx = V2Fixture::new();
    fx.exec(
        "CREATE TABLE numbered_not (id text PRIMARY KEY, session_id text NOT NULL, type text NOT NULL,
           seq integer NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL,
           data text NOT NULL) WITHOUT ROWID;
         INSERT INTO numbered_not SELECT * FROM session_message;
         DROP TABLE session_message;
         ALTER TABLE numbered_not RENAME TO session_message;",
    );
    let store =
        pruning_opencode::OpenCodeStore::open(&fx.db, pruning_opencode::StoreOptions::default())
            .unwrap();
    let outcome = history_with(&store, &every_entry(), rows(32)).unwrap();
    assert_eq!(
        outcome.result,
        HistoryResult::Blocked {
            reason: BlockedReason::UnsupportedStorage
        }
    );
    assert_eq!(
        outcome.refusal.unwrap().detail,
        "the session_message table is declared WITHOUT ROWID, which OpenCode never does: a history scan could not tell the rows appended after it began"
    );
}

/// A cursor as the time-ordered scan wrote it: `h1.<binding>.<horizon>.<after>`, positions
/// `<time>_<generation>_<hex of the message id>`.
const TIME_ORDERED_CURSOR: &str = "h1.e546c93a54a7aa01727eeff47cc5855f.1795941055465_1_6d73675f32323636646262653930303139646758595246304f646b326166.1795941038676_1_6d73675f3232363664376135343030314576";

const TIME_ORDERED_WORDS: &str = "a cursor of the earlier time-ordered scan, which pages no longer follow (they go session by session now); start again without a cursor";

#[test]
fn a_cursor_of_the_time_ordered_scan_is_bad_input() {
    let fx = Fixture::new();
    let store = fx.store(0);
    let request = HistoryRequest::new(
        None,
        String::new(),
        true,
        Purpose::Stats,
        Some(TIME_ORDERED_CURSOR.into()),
    )
    .unwrap();
    match history_with(&store, &request, rows(32)) {
        Err(EngineError::Contract(ContractError::Cursor { detail })) => {
            assert_eq!(detail, TIME_ORDERED_WORDS)
        }
        other => panic!("{other:?}"),
    }
    assert_json_error(
        &run(
            &fx.db,
            &[
                "--json",
                "history",
                "--purpose",
                "stats",
                "--cursor",
                TIME_ORDERED_CURSOR,
            ],
        ),
        2,
        TIME_ORDERED_WORDS,
    );
    let app = App::start(&fx);
    let (status, body) = app.post(
        &app.route("history"),
        &json!({ "purpose": "stats", "cursor": TIME_ORDERED_CURSOR }).to_string(),
    );
    assert_eq!(status, 400, "{body}");
    let doc = parse(&body);
    assert_eq!(doc["field"], "cursor", "{doc}");
    assert!(
        doc["error"].as_str().unwrap().contains(TIME_ORDERED_WORDS),
        "{doc}"
    );
}
