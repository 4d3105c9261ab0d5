//! The browsing routes' answers and bounds on the real fixture: `outlinePreview` excerpts of a
//! V1 and a V2 message (at most 4,096 characters; unknown, repeated and foreign ids left out;
//! 1 to 12 ids), `window`'s 16 MiB message and 24 MiB window bounds, `GET .../sessions` paged
//! by session id with no skip or repeat while sessions are created, and the CLI's `--json`
//! printing the HTTP answer's bytes. No read changes the database.

use serde_json::{json, Value};

use crate::common::app::App;
use crate::common::browse::{append_v1, call, window, V2_SESSION, V2_TOOL_MESSAGE};
use crate::common::cli;
use crate::common::http::WORKSPACE;
use crate::common::{Fixture, MANY_TURNS, TURN1};

/// `**NAME**`, the title and the output of a V1 tool part, as an excerpt joins them.
fn v1_tool_excerpt(part: &Value) -> String {
    let state = &part["state"];
    let text = format!(
        "**{}**\n\n{}\n\n{}",
        part["tool"].as_str().unwrap(),
        state["title"].as_str().unwrap(),
        state["output"].as_str().unwrap()
    );
    text.chars().take(4096).collect()
}

#[test]
fn previews_are_bounded_excerpts_of_visible_messages() {
    let fx = Fixture::new();
    let conn = fx.sql();
    let tool: String = conn
        .query_row(
            "SELECT data FROM part WHERE message_id = ?1 AND data LIKE '%\"type\":\"tool\"%'",
            [TURN1],
            |r| r.get(0),
        )
        .unwrap();
    let expected_tools = v1_tool_excerpt(&serde_json::from_str(&tool).unwrap());
    assert_eq!(
        expected_tools.chars().count(),
        4096,
        "the fixture's output is long"
    );
    let reply: (String, String) = conn
        .query_row(
            "SELECT m.id, json_extract(p.data, '$.text') FROM message m JOIN part p ON p.message_id = m.id
             WHERE m.session_id = ?1 AND json_extract(p.data, '$.type') = 'text'
               AND json_extract(p.data, '$.synthetic') IS NULL
             ORDER BY m.time_created LIMIT 1",
            [MANY_TURNS],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let v2_item: Value = conn
        .query_row(
            "SELECT j.value FROM session_message, json_each(data, '$.content') j
             WHERE session_message.id = ?1 AND json_extract(j.value, '$.type') = 'tool'",
            [V2_TOOL_MESSAGE],
            |r| r.get::<_, String>(0),
        )
        .map(|text| serde_json::from_str(&text).unwrap())
        .unwrap();
    let before = fx.file_digest();
    let app = App::start(&fx);

    let (status, answer) = call(
        &app,
        "outlinePreview",
        &json!({"sessionID": MANY_TURNS, "messageIDs": [TURN1, "msg_nowhere", reply.0, TURN1, V2_TOOL_MESSAGE]}),
    );
    assert_eq!(status, 200);
    assert_eq!(
        answer,
        json!({"status": "previews", "entries": [
            {"id": TURN1, "text": "", "tools": expected_tools},
            {"id": reply.0, "text": reply.1, "tools": ""},
        ]})
    );

    let mut v2_tools = vec![format!("**{}**", v2_item["name"].as_str().unwrap())];
    if let Some(title) = v2_item["state"]["title"].as_str() {
        v2_tools.push(title.to_string());
    }
    for block in v2_item["state"]["content"].as_array().unwrap() {
        if block["type"] == "text" {
            v2_tools.push(block["text"].as_str().unwrap().to_string());
        }
    }
    let v2_tools: String = v2_tools.join("\n\n").chars().take(4096).collect();
    let (_, answer) = call(
        &app,
        "outlinePreview",
        &json!({"sessionID": V2_SESSION, "messageIDs": [V2_TOOL_MESSAGE]}),
    );
    assert_eq!(answer["entries"][0]["tools"], v2_tools);
    assert_eq!(answer["entries"][0]["text"], "");

    for count in [0, 13] {
        let ids: Vec<String> = (0..count).map(|i| format!("msg_{i}")).collect();
        let (status, answer) = call(
            &app,
            "outlinePreview",
            &json!({"sessionID": MANY_TURNS, "messageIDs": ids}),
        );
        assert_eq!(
            (status, answer["field"].clone()),
            (400, json!("messageIDs")),
            "{answer}"
        );
    }
    drop(app);
    assert_eq!(fx.file_digest(), before);
}

#[test]
fn windows_refuse_a_message_over_16_mib_and_a_window_over_24_mib() {
    let fx = Fixture::new();
    let conn = fx.sql();
    let ids = append_v1(&conn, MANY_TURNS, TURN1, 3);
    let inflate = |id: &str, mib: usize| {
        conn.execute(
            "UPDATE part SET data = json_set(data, '$.state.output', ?1)
             WHERE message_id = ?2 AND json_extract(data, '$.type') = 'tool'",
            rusqlite::params!["x".repeat(mib * 1024 * 1024), id],
        )
        .unwrap();
    };
    inflate(&ids[0], 13);
    inflate(&ids[2], 12);
    let app = App::start(&fx);
    let blocked = json!({"status": "blocked", "reason": "unsupported_storage"});
    let latest = json!({"sessionID": MANY_TURNS, "target": {"kind": "latest"}});
    assert_eq!(
        call(&app, "window", &latest),
        (200, blocked.clone()),
        "25 MiB in one window"
    );
    inflate(&ids[2], 10);
    let fits = window(&app, MANY_TURNS, json!({"kind": "latest"}));
    assert_eq!(
        fits["messages"].as_array().unwrap().len(),
        33,
        "23 MiB in this one"
    );
    inflate(&ids[1], 17);
    let around =
        json!({"sessionID": MANY_TURNS, "target": {"kind": "around", "messageID": ids[1]}});
    assert_eq!(
        call(&app, "window", &around),
        (200, blocked),
        "one message over 16 MiB"
    );
    // Outlines and excerpts still answer; the big message's excerpt is empty.
    let (_, outline) = call(&app, "outline", &json!({"sessionID": MANY_TURNS}));
    assert_eq!(outline["total"], 33);
    let (_, previews) = call(
        &app,
        "outlinePreview",
        &json!({"sessionID": MANY_TURNS, "messageIDs": [ids[1]]}),
    );
    assert_eq!(
        previews,
        json!({"status": "previews", "entries": [{"id": ids[1], "text": "", "tools": ""}]})
    );
}

#[test]
fn sessions_page_by_id_without_skip_or_repeat() {
    let fx = Fixture::new();
    let conn = fx.sql();
    let copy = |id: &str, directory: &str| {
        conn.execute(
            "INSERT INTO session (id, project_id, parent_id, slug, directory, title, version,
               time_created, time_updated)
             SELECT ?1, project_id, NULL, slug, ?2, 'copy ' || ?1, version, time_created, time_updated
             FROM session WHERE id = ?3",
            [id, directory, MANY_TURNS],
        )
        .unwrap();
    };
    for i in 0..240 {
        copy(&format!("ses_copy{i:04}"), "/tmp/oc-cache/run/work/sub");
    }
    for i in 0..7 {
        copy(&format!("ses_away{i:04}"), "/elsewhere");
    }
    let mut expected: Vec<String> = {
        let mut stmt = conn
            .prepare(
                "SELECT id FROM session WHERE directory LIKE '/tmp/oc-cache/run/work%' ORDER BY id",
            )
            .unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert_eq!(expected.len(), 250);
    let app = App::start(&fx);
    let path = format!("/api/workspaces/{WORKSPACE}/sessions");
    let mut seen: Vec<String> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = Vec::new();
    loop {
        let url = match &cursor {
            Some(c) => format!("{path}?cursor={c}"),
            None => path.clone(),
        };
        let (status, body) = app.get(&url);
        assert_eq!(status, 200, "{body}");
        let page: Value = serde_json::from_str(&body).unwrap();
        let sessions = page["sessions"].as_array().unwrap();
        pages.push(sessions.len());
        for session in sessions {
            if session["sessionID"] == MANY_TURNS {
                assert_eq!(
                    (session["storage"].clone(), session["messages"].clone()),
                    (json!("v1"), json!(30))
                );
                assert!(
                    session["totalBytes"].as_u64().unwrap() > 700_000,
                    "{session}"
                );
            }
            if session["sessionID"] == V2_SESSION {
                assert_eq!(session["storage"], "v2");
            }
        }
        seen.extend(
            sessions
                .iter()
                .map(|s| s["sessionID"].as_str().unwrap().to_string()),
        );
        if pages.len() == 1 {
            // Created while the pages are read: one sorts before the cursor, one after.
            copy("ses_0000new", "/tmp/oc-cache/run/work");
            copy("ses_zzzznew", "/tmp/oc-cache/run/work");
            expected.push("ses_zzzznew".into());
            let first = &sessions[0];
            for key in [
                "title",
                "directory",
                "projectID",
                "workspaceID",
                "messages",
                "totalBytes",
                "prunableBytes",
                "timeUpdated",
                "timeCreated",
                "storage",
            ] {
                assert!(first.get(key).is_some(), "{key}: {first}");
            }
        }
        match page["cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    assert_eq!(pages, [100, 100, 51]);
    assert_eq!(seen, expected);
    assert!(seen.iter().any(|id| id == V2_SESSION));
    let (status, _) = app.get(&format!("{path}?cursor=a&cursor=b"));
    assert_eq!(status, 400);
}

#[test]
fn the_cli_prints_the_http_answer_bytes() {
    let fx = Fixture::new();
    let app = App::start(&fx);
    for (args, method, body) in [
        (
            vec!["--json", "window", MANY_TURNS, "--around", TURN1],
            "window",
            json!({"sessionID": MANY_TURNS, "target": {"kind": "around", "messageID": TURN1}}),
        ),
        (
            vec!["--json", "window", V2_SESSION, "--oldest"],
            "window",
            json!({"sessionID": V2_SESSION, "target": {"kind": "oldest"}}),
        ),
        (
            vec!["--json", "outline", MANY_TURNS, "--after", "3"],
            "outline",
            json!({"sessionID": MANY_TURNS, "after": 3}),
        ),
        (
            vec!["--json", "window", MANY_TURNS, "--after", "msg_gone"],
            "window",
            json!({"sessionID": MANY_TURNS, "target": {"kind": "after", "messageID": "msg_gone"}}),
        ),
    ] {
        let out = cli::run(&fx.db, &args);
        let blocked = method == "window" && args.contains(&"msg_gone");
        cli::assert_exit(&out, if blocked { 3 } else { 0 });
        let (status, http) = app.post(
            &crate::common::browse::history_route(method),
            &body.to_string(),
        );
        assert_eq!(status, 200);
        assert_eq!(String::from_utf8(out.stdout).unwrap(), http, "{args:?}");
    }
    let unknown = cli::run(&fx.db, &["window", "ses_nowhere"]);
    cli::assert_exit(&unknown, 2);
    let bad = cli::run(&fx.db, &["outline", MANY_TURNS, "--cursor", "x"]);
    cli::assert_exit(&bad, 2);
    let text = cli::run(&fx.db, &["window", MANY_TURNS, "--oldest"]);
    cli::assert_exit(&text, 0);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains(TURN1) && text.contains("30 message(s)"),
        "{text}"
    );
}
