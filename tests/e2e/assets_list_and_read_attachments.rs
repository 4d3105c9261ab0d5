//! `assets` and `assetRead`: a session's file attachments (V1 `file` parts and tool parts'
//! `state.attachments`, V2 tool items' file content), newest message first, 64 a page with a
//! cursor bound to the session and its staged revert; an attachment is read back only as the
//! embedded `data:` URI its digest names.

use serde_json::{json, Value};

use crate::common::app::App;
use crate::common::browse::{call, v1_ids, V2_SESSION, V2_TOOL_MESSAGE};
use crate::common::{Fixture, MANY_TURNS, TURN1};
use sha2::{Digest, Sha256};

const PNG: &str = "data:image/png;base64,iVBORw0KGgo=";
const JPEG: &str = "data:image/jpeg;base64,/9j/4AAQ";

fn digest(uri: &str) -> String {
    hex::encode(Sha256::digest(uri.as_bytes()))
}

#[test]
fn v1_attachments_are_listed_newest_first_and_read_by_digest() {
    let fx = Fixture::new();
    let conn = fx.sql();
    let first = v1_ids(&conn, MANY_TURNS)[0].clone();
    conn.execute(
        "UPDATE part SET data = json_set(data, '$.state.attachments', json(?1))
         WHERE message_id = ?2 AND json_extract(data, '$.type') = 'tool'",
        [
            json!([
                {"type": "file", "mime": "image/png", "url": PNG, "filename": "a.png"},
                {"type": "file", "mime": "text/plain", "url": "file:///tmp/x.txt", "filename": ""},
                {"type": "file", "mime": "text/plain; charset=utf-8", "url": "data:text/plain;base64,YQ=="},
            ])
            .to_string(),
            TURN1.to_string(),
        ],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data)
         VALUES ('prt_zzzz_file', ?1, ?2, 0, 0, ?3)",
        [
            first.clone(),
            MANY_TURNS.to_string(),
            json!({"type": "file", "mime": "image/jpeg", "url": JPEG}).to_string(),
        ],
    )
    .unwrap();
    let before = fx.file_digest();
    let app = App::start(&fx);
    let (status, page) = call(&app, "assets", &json!({"sessionID": MANY_TURNS}));
    assert_eq!(status, 200);
    assert_eq!(
        page,
        json!({"status": "page", "cursor": null, "entries": [
            {"target": {"messageID": TURN1, "part": 2, "index": 0, "digest": digest(PNG)},
             "name": "a.png", "tool": "bash", "mime": "image/png", "available": true},
            {"target": {"messageID": TURN1, "part": 2, "index": 1, "digest": digest("file:///tmp/x.txt")},
             "name": "bash · 2", "tool": "bash", "mime": "text/plain", "available": false},
            {"target": {"messageID": first, "part": 1, "index": 0, "digest": digest(JPEG)},
             "name": "file · 1", "tool": "", "mime": "image/jpeg", "available": true},
        ]})
    );
    let read = |target: &Value| {
        call(
            &app,
            "assetRead",
            &json!({"sessionID": MANY_TURNS, "target": target}),
        )
    };
    let entries = page["entries"].as_array().unwrap();
    assert_eq!(
        read(&entries[0]["target"]),
        (
            200,
            json!({"status": "asset", "uri": PNG, "mime": "image/png"})
        )
    );
    assert_eq!(
        read(&entries[2]["target"]),
        (
            200,
            json!({"status": "asset", "uri": JPEG, "mime": "image/jpeg"})
        )
    );
    let unavailable = json!({"status": "blocked", "reason": "unavailable"});
    assert_eq!(
        read(&entries[1]["target"]),
        (200, unavailable.clone()),
        "not embedded"
    );
    let mut wrong = entries[0]["target"].clone();
    wrong["digest"] = json!(digest(JPEG));
    assert_eq!(
        read(&wrong),
        (200, unavailable.clone()),
        "another file's digest"
    );
    wrong = entries[0]["target"].clone();
    wrong["index"] = json!(7);
    assert_eq!(read(&wrong), (200, unavailable));
    wrong["messageID"] = json!("msg_nowhere");
    assert_eq!(
        read(&wrong),
        (200, json!({"status": "blocked", "reason": "missing"}))
    );
    drop(app);
    assert_eq!(fx.file_digest(), before);
}

#[test]
fn v2_pages_of_64_go_on_by_cursor_bound_to_the_session_and_its_revert() {
    let fx = Fixture::new();
    let conn = fx.sql();
    let files: Vec<Value> = (0..100)
        .map(|i| json!({"type": "file", "uri": format!("data:image/png;base64,{:04}", i), "mime": "image/png", "name": format!("f{i}.png")}))
        .collect();
    conn.execute(
        "UPDATE session_message SET data = json_set(data, '$.content[1].state.content', json(?1))
         WHERE id = ?2",
        [Value::Array(files).to_string(), V2_TOOL_MESSAGE.to_string()],
    )
    .unwrap();
    let tool_position: i64 = fx.scalar(&format!(
        "SELECT j.key FROM session_message, json_each(data, '$.content') j
         WHERE session_message.id = '{V2_TOOL_MESSAGE}' AND json_extract(j.value, '$.type') = 'tool'"
    ));
    assert_eq!(tool_position, 1, "the fixture's tool item is the second");
    // A newer assistant row that is not JSON and one over 16 MiB are passed over.
    fx.exec(
        "UPDATE session_message SET data = '{not json' WHERE id = 'msg_2266daec50019gPHQTrfVoYXFE';
         UPDATE session_message SET data = json_set(data, '$.pad', printf('%.*c', 17000000, 'x'))
           WHERE id = 'msg_2266db3a7001wo06SAVu5RsRxM';",
    );
    let app = App::start(&fx);
    let (_, first) = call(&app, "assets", &json!({"sessionID": V2_SESSION}));
    let entries = first["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 64);
    let cursor = first["cursor"].as_str().unwrap().to_string();
    let (_, second) = call(
        &app,
        "assets",
        &json!({"sessionID": V2_SESSION, "cursor": cursor}),
    );
    assert_eq!(second["cursor"], Value::Null);
    let names: Vec<String> = entries
        .iter()
        .chain(second["entries"].as_array().unwrap())
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        (0..100).map(|i| format!("f{i}.png")).collect::<Vec<_>>()
    );
    assert_eq!(entries[5]["target"]["part"], 1);
    assert_eq!(entries[5]["target"]["index"], 5);
    assert_eq!(entries[5]["tool"], "bash");

    // A user row is no attachment's message, as the listing has it.
    let user = json!({"sessionID": V2_SESSION, "target": {"messageID": "msg_2266da8cc001Zv9E1JnOMflhi9", "part": 0, "index": 0, "digest": "0".repeat(64)}});
    assert_eq!(
        call(&app, "assetRead", &user),
        (200, json!({"status": "blocked", "reason": "missing"}))
    );
    let conflict = json!({"status": "blocked", "reason": "conflict"});
    let elsewhere = json!({"sessionID": MANY_TURNS, "cursor": cursor});
    assert_eq!(call(&app, "assets", &elsewhere), (200, conflict.clone()));
    fx.exec(&format!(
        "UPDATE session SET revert = json_object('messageID', '{V2_TOOL_MESSAGE}') WHERE id = '{V2_SESSION}'"
    ));
    let again = json!({"sessionID": V2_SESSION, "cursor": cursor});
    assert_eq!(call(&app, "assets", &again), (200, conflict));
    let (_, hidden) = call(&app, "assets", &json!({"sessionID": V2_SESSION}));
    assert_eq!(
        hidden,
        json!({"status": "page", "entries": [], "cursor": null})
    );
    let garbage = json!({"sessionID": V2_SESSION, "cursor": "not-a-cursor"});
    assert_eq!(
        call(&app, "assets", &garbage),
        (
            200,
            json!({"status": "blocked", "reason": "unsupported_storage"})
        )
    );
}
