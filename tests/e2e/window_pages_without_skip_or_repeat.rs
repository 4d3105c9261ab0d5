//! `window` over V1 and V2 sessions of hundreds of messages: each window is exactly the slice
//! of the session its target names (at most 200; around: 80 before, 120 from the anchor);
//! following `older` from the newest window, and `newer` from the oldest, visits every
//! message in order with no skip and no repeat beyond the 16 a page overlaps, while messages
//! are appended; a staged revert hides the tail; a gone anchor is `anchor_missing`.

use serde_json::{json, Value};

use crate::common::app::App;
use crate::common::browse::{
    append_v1, append_v2, call, v1_ids, v2_ids, window, window_ids, V2_SESSION, V2_TOOL_MESSAGE,
};
use crate::common::{Fixture, MANY_TURNS, TURN1};

/// Follows `older` from the newest window to the oldest; appends `grow` messages (with
/// `append`) after the first step. Returns the ids seen, each once, oldest first.
fn walk_older(app: &App, session: &str, mut grown: impl FnMut()) -> Vec<String> {
    let mut answer = window(app, session, json!({"kind": "latest"}));
    assert_eq!(answer["latest"], true);
    let mut seen: Vec<String> = window_ids(&answer);
    grown();
    while let Some(older) = answer["older"].as_object().cloned() {
        assert_eq!(older["kind"], "before");
        let anchor = older["messageID"].as_str().unwrap().to_string();
        answer = window(app, session, Value::Object(older));
        let ids = window_ids(&answer);
        assert!(ids.len() <= 200);
        let at = ids
            .iter()
            .position(|id| *id == anchor)
            .expect("the anchor is in its window");
        assert_eq!(
            &ids[at..],
            &seen[..ids.len() - at],
            "a page repeats exactly its overlap"
        );
        let mut older_ids = ids[..at].to_vec();
        older_ids.extend(seen);
        seen = older_ids;
    }
    seen
}

/// Follows `newer` from the oldest window to the newest. Returns the ids seen, each once.
fn walk_newer(app: &App, session: &str) -> Vec<String> {
    let mut answer = window(app, session, json!({"kind": "oldest"}));
    assert_eq!(answer["older"], Value::Null);
    let mut seen = window_ids(&answer);
    while let Some(newer) = answer["newer"].as_object().cloned() {
        assert_eq!(answer["latest"], false);
        let anchor = newer["messageID"].as_str().unwrap().to_string();
        answer = window(app, session, Value::Object(newer));
        let ids = window_ids(&answer);
        let at = ids
            .iter()
            .position(|id| *id == anchor)
            .expect("the anchor is in its window");
        assert_eq!(
            &ids[..=at],
            &seen[seen.len() - at - 1..],
            "the overlap is exact"
        );
        seen.extend_from_slice(&ids[at + 1..]);
    }
    assert_eq!(answer["latest"], true);
    seen
}

fn check_slices(app: &App, session: &str, all: &[String]) {
    let n = all.len();
    let latest = window(app, session, json!({"kind": "latest"}));
    assert_eq!(window_ids(&latest), all[n - 200..]);
    assert_eq!(latest["resume"], json!({"kind": "latest"}));
    assert_eq!(
        latest["older"],
        json!({"kind": "before", "messageID": all[n - 200]})
    );
    assert_eq!(latest["newer"], Value::Null);
    let oldest = window(app, session, json!({"kind": "oldest"}));
    assert_eq!(window_ids(&oldest), all[..200]);
    assert_eq!(
        oldest["newer"],
        json!({"kind": "after", "messageID": all[199]})
    );
    assert_eq!(oldest["latest"], false);
    let i = 250;
    let around = window(app, session, json!({"kind": "around", "messageID": all[i]}));
    assert_eq!(window_ids(&around), all[i - 80..(i + 120).min(n)]);
    let before = window(app, session, json!({"kind": "before", "messageID": all[i]}));
    assert_eq!(window_ids(&before), all[i - 184..i + 16]);
    let after = window(app, session, json!({"kind": "after", "messageID": all[i]}));
    assert_eq!(window_ids(&after), all[i - 15..(i + 185).min(n)]);
    let near_start = window(app, session, json!({"kind": "around", "messageID": all[3]}));
    assert_eq!(window_ids(&near_start), all[..123]);
    assert_eq!(near_start["older"], Value::Null);
}

#[test]
fn v1_windows_are_exact_slices_and_walk_every_message_once() {
    let fx = Fixture::new();
    let conn = fx.sql();
    append_v1(&conn, MANY_TURNS, TURN1, 470);
    let all = v1_ids(&conn, MANY_TURNS);
    assert_eq!(all.len(), 500);
    let app = App::start(&fx);
    check_slices(&app, MANY_TURNS, &all);

    let mut appended = Vec::new();
    let seen = walk_older(&app, MANY_TURNS, || {
        appended = append_v1(&conn, MANY_TURNS, TURN1, 5);
    });
    assert_eq!(seen, all, "older pages from the first latest window");
    let mut now = all.clone();
    now.extend(appended);
    assert_eq!(
        walk_newer(&app, MANY_TURNS),
        now,
        "newer pages reach the appended"
    );

    // One V1 message as OpenCode's API answers it.
    let first = &window(
        &app,
        MANY_TURNS,
        json!({"kind": "around", "messageID": TURN1}),
    )["messages"];
    let turn = first
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["info"]["id"] == TURN1)
        .unwrap();
    assert_eq!(turn["info"]["sessionID"], MANY_TURNS);
    assert_eq!(turn["info"]["role"], "assistant");
    let parts = turn["parts"].as_array().unwrap();
    let stored: i64 = fx.scalar(&format!(
        "SELECT count(*) FROM part WHERE message_id = '{TURN1}'"
    ));
    assert_eq!(parts.len() as i64, stored);
    for part in parts {
        assert_eq!(part["messageID"], TURN1);
        assert_eq!(part["sessionID"], MANY_TURNS);
        assert!(part["id"].as_str().unwrap().starts_with("prt_"));
    }
}

#[test]
fn v2_windows_are_exact_slices_and_walk_every_message_once() {
    let fx = Fixture::new();
    let conn = fx.sql();
    append_v2(&conn, V2_TOOL_MESSAGE, 300);
    let all = v2_ids(&conn, V2_SESSION);
    assert_eq!(all.len(), 308);
    let app = App::start(&fx);
    check_slices(&app, V2_SESSION, &all);
    let mut appended = Vec::new();
    let seen = walk_older(&app, V2_SESSION, || {
        appended = append_v2(&conn, V2_TOOL_MESSAGE, 3);
    });
    assert_eq!(seen, all);
    let mut now = all.clone();
    now.extend(appended);
    assert_eq!(walk_newer(&app, V2_SESSION), now);

    // A V2 message is the stored row with its id and type.
    let answer = window(
        &app,
        V2_SESSION,
        json!({"kind": "around", "messageID": V2_TOOL_MESSAGE}),
    );
    let message = answer["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == V2_TOOL_MESSAGE)
        .unwrap()
        .clone();
    let data: String = conn
        .query_row(
            "SELECT data FROM session_message WHERE id = ?1",
            [V2_TOOL_MESSAGE],
            |r| r.get(0),
        )
        .unwrap();
    let mut expected: serde_json::Map<String, Value> = serde_json::from_str(&data).unwrap();
    expected.insert("id".into(), json!(V2_TOOL_MESSAGE));
    expected.insert("type".into(), json!("assistant"));
    assert_eq!(message, Value::Object(expected));
}

#[test]
fn a_staged_revert_hides_the_tail_and_a_gone_anchor_is_anchor_missing() {
    let fx = Fixture::new();
    let conn = fx.sql();
    append_v1(&conn, MANY_TURNS, TURN1, 270);
    let all = v1_ids(&conn, MANY_TURNS);
    conn.execute(
        "UPDATE session SET revert = json_object('messageID', ?1) WHERE id = ?2",
        [&all[250], MANY_TURNS],
    )
    .unwrap();
    append_v2(&conn, V2_TOOL_MESSAGE, 10);
    let v2_all = v2_ids(&conn, V2_SESSION);
    conn.execute(
        "UPDATE session SET revert = json_object('messageID', ?1, 'partID', 'prt_x') WHERE id = ?2",
        [&v2_all[12], V2_SESSION],
    )
    .unwrap();
    let before = fx.file_digest();
    let app = App::start(&fx);

    let latest = window(&app, MANY_TURNS, json!({"kind": "latest"}));
    assert_eq!(window_ids(&latest), all[50..250]);
    assert_eq!(latest["latest"], true);
    let v2_latest = window(&app, V2_SESSION, json!({"kind": "latest"}));
    assert_eq!(window_ids(&v2_latest), v2_all[..12]);

    for (session, anchor) in [
        (MANY_TURNS, all[250].as_str()),
        (MANY_TURNS, all[260].as_str()),
        (MANY_TURNS, "msg_nowhere"),
        (MANY_TURNS, V2_TOOL_MESSAGE),
        (V2_SESSION, v2_all[12].as_str()),
        (V2_SESSION, TURN1),
    ] {
        for kind in ["around", "before", "after"] {
            let (status, answer) = call(
                &app,
                "window",
                &json!({"sessionID": session, "target": {"kind": kind, "messageID": anchor}}),
            );
            assert_eq!(
                (status, answer),
                (
                    200,
                    json!({"status": "blocked", "reason": "anchor_missing"})
                ),
                "{session} {kind} {anchor}"
            );
        }
    }
    drop(app);
    assert_eq!(fx.file_digest(), before, "browsing wrote nothing");
}
