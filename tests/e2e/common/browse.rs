//! Sessions grown for the browsing tests: copies of the fixture's real messages (a V1 turn with
//! its parts, a V2 assistant row) appended after the last message of a session, as OpenCode
//! appends them, and the browsing routes called on the test router.
#![allow(dead_code)]

use rusqlite::{params, Connection};
use serde_json::{json, Value};

use super::app::App;
use super::http::WORKSPACE;

/// The fixture's V2 session (`session_message` rows in the shared `session` table).
pub const V2_SESSION: &str = "ses_dd9925f43ffe2Is1MklYsLGbbU";
/// Its assistant message with a reasoning item and a `bash` tool item.
pub const V2_TOOL_MESSAGE: &str = "msg_2266dabb2001y39t0IapYwvrbI";

/// The id of the `n`th appended message: after every id OpenCode minted in the fixture.
pub fn grown_id(n: usize) -> String {
    format!("msg_zz{n:08}")
}

/// Appends `count` copies of V1 message `model` (with its parts) to `session`, each 1 ms after
/// the session's last message; returns their ids, oldest first.
pub fn append_v1(conn: &Connection, session: &str, model: &str, count: usize) -> Vec<String> {
    let start: i64 = conn
        .query_row(
            "SELECT max(time_created) FROM message WHERE session_id = ?1",
            [session],
            |r| r.get(0),
        )
        .expect("last message time");
    let first = grown_so_far(conn, "message");
    let tx = conn.unchecked_transaction().expect("begin");
    let mut ids = Vec::with_capacity(count);
    for i in 0..count {
        let id = grown_id(first + i);
        let time = start + 1 + i as i64;
        tx.execute(
            "INSERT INTO message (id, session_id, time_created, time_updated, data)
             SELECT ?1, session_id, ?2, ?2, data FROM message WHERE id = ?3",
            params![id, time, model],
        )
        .expect("copy message");
        tx.execute(
            "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data)
             SELECT 'prt_zz' || ?1 || substr(id, 4), ?1, session_id, ?2, ?2, data
             FROM part WHERE message_id = ?3",
            params![id, time, model],
        )
        .expect("copy parts");
        ids.push(id);
    }
    tx.commit().expect("commit");
    ids
}

/// Appends `count` copies of V2 row `model` to its session, with the next sequence numbers;
/// returns their ids, oldest first.
pub fn append_v2(conn: &Connection, model: &str, count: usize) -> Vec<String> {
    let (session, last): (String, i64) = conn
        .query_row(
            "SELECT session_id, (SELECT max(seq) FROM session_message s WHERE s.session_id = m.session_id)
             FROM session_message m WHERE id = ?1",
            [model],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("model row");
    let first = grown_so_far(conn, "session_message");
    let tx = conn.unchecked_transaction().expect("begin");
    let mut ids = Vec::with_capacity(count);
    for i in 0..count {
        let id = grown_id(first + i);
        let seq = last + 1 + i as i64;
        tx.execute(
            "INSERT INTO session_message (id, session_id, type, seq, time_created, time_updated, data)
             SELECT ?1, session_id, type, ?2, time_created + ?2, time_updated + ?2, data
             FROM session_message WHERE id = ?3",
            params![id, seq, model],
        )
        .expect("copy row");
        ids.push(id);
    }
    tx.commit().expect("commit");
    let _ = session;
    ids
}

/// Messages appended so far to `table`.
fn grown_so_far(conn: &Connection, table: &str) -> usize {
    let sql = format!("SELECT count(*) FROM {table} WHERE id LIKE 'msg_zz%'");
    let count: i64 = conn
        .query_row(&sql, [], |r| r.get(0))
        .expect("grown so far");
    usize::try_from(count).expect("a count")
}

/// Every visible message id of a V1 session in `(time_created, id)` order.
pub fn v1_ids(conn: &Connection, session: &str) -> Vec<String> {
    let mut stmt = conn
        .prepare("SELECT id FROM message WHERE session_id = ?1 ORDER BY time_created, id")
        .expect("prepare");
    stmt.query_map([session], |r| r.get(0))
        .expect("ids")
        .collect::<Result<_, _>>()
        .expect("ids")
}

/// Every message id of a V2 session by `seq`.
pub fn v2_ids(conn: &Connection, session: &str) -> Vec<String> {
    let mut stmt = conn
        .prepare("SELECT id FROM session_message WHERE session_id = ?1 ORDER BY seq")
        .expect("prepare");
    stmt.query_map([session], |r| r.get(0))
        .expect("ids")
        .collect::<Result<_, _>>()
        .expect("ids")
}

/// The route `POST /api/workspaces/work/session-history/{method}`.
pub fn history_route(method: &str) -> String {
    format!("/api/workspaces/{WORKSPACE}/session-history/{method}")
}

/// `POST .../session-history/{method}` with `body`: the status and the answer as JSON.
pub fn call(app: &App, method: &str, body: &Value) -> (u16, Value) {
    let (status, text) = app.post(&history_route(method), &body.to_string());
    let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    (status, value)
}

/// A window of `session` at `target`; panics unless the answer is a window.
pub fn window(app: &App, session: &str, target: Value) -> Value {
    let (status, answer) = call(
        app,
        "window",
        &json!({"sessionID": session, "target": target}),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["status"], "window", "{answer}");
    answer
}

/// The id of a window message: V2 `id`, V1 `info.id`.
pub fn message_id(message: &Value) -> String {
    message
        .get("info")
        .map_or(&message["id"], |info| &info["id"])
        .as_str()
        .expect("a message id")
        .to_string()
}

/// The ids of a window's messages.
pub fn window_ids(answer: &Value) -> Vec<String> {
    answer["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(message_id)
        .collect()
}
