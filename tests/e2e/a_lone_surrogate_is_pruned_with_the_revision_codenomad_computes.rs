//! A stored message whose JSON holds a lone UTF-16 surrogate escape (`"\ud800"`, what
//! JavaScript writes when it cuts a string inside a surrogate pair) is previewed and pruned like
//! any other, with the revision and `bytes` CodeNomad computes: node's `JSON.parse`, then
//! `JSON.stringify` of the canonical content and SHA-256 (a lone surrogate written `\ud800`,
//! lowercase hex). A V1 part and a V2 row, each holding one; what a V2 prune writes back keeps
//! the escape as it was.

use std::io::Write as _;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::common;
use common::cli::{assert_exit, json as output_json, prune_all, run};
use common::http::with_messages;
use common::v2::{V2Fixture, V2_SESSION};

const SESSION: &str = "ses_lone_surrogate";

/// Runs node on `script` with `input` on stdin; its stdout as JSON. Under `CI=true` a missing
/// node fails the test; elsewhere it is said and `None` returned.
fn node(script: &str, input: &str) -> Option<Value> {
    let child = Command::new("node")
        .arg("-e")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(error) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "node is needed to compute CodeNomad's revision: {error}"
            );
            eprintln!("skipped: node cannot be run ({error})");
            return None;
        }
    };
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("node");
    assert!(out.status.success(), "node failed");
    Some(serde_json::from_slice(&out.stdout).expect("node's answer"))
}

/// CodeNomad's revision and `bytes`, in JavaScript: `content` is an array of JSON texts (the
/// parts as stored) and `ids`, the ids to merge into each (`{id, sessionID, messageID}` for a
/// V1 part, nothing for a V2 item).
const CODENOMAD: &str = r#"
const crypto = require("crypto");
let text = "";
process.stdin.on("data", (chunk) => (text += chunk));
process.stdin.on("end", () => {
  const input = JSON.parse(text);
  const content = input.parts.map((part, i) => ({ ...JSON.parse(part), ...input.ids[i] }));
  const canonical = (v) => {
    if (Array.isArray(v)) return v.map(canonical);
    if (v && typeof v === "object") {
      const out = {};
      for (const key of Object.keys(v).sort()) out[key] = canonical(v[key]);
      return out;
    }
    return v;
  };
  const revision = crypto.createHash("sha256").update(JSON.stringify(canonical(content))).digest("hex");
  const bytes = content.map((part) => Buffer.byteLength(JSON.stringify(part)));
  process.stdout.write(JSON.stringify({ revision, bytes }));
});
"#;

/// `preview --json` of `message` in `session` of `db`.
fn preview(db: &std::path::Path, session: &str, message: &str) -> Value {
    let out = run(db, &["--json", "preview", session, message]);
    assert_exit(&out, 0);
    output_json(&out)
}

#[test]
fn a_v1_part_holding_a_lone_surrogate_is_previewed_and_pruned_as_codenomad_reads_it() {
    let (fx, messages) = with_messages(SESSION, 1);
    let message = &messages[0];
    // The tool output cut inside a surrogate pair, as JavaScript leaves it.
    fx.exec(&format!(
        "UPDATE part SET data = replace(data, '\"output\":\"', '\"output\":\"\\ud83d cut ') \
         WHERE message_id = '{message}' AND json_extract(data, '$.type') = 'tool'"
    ));
    let rows: Vec<(String, String)> = {
        let conn = fx.sql();
        let mut stmt = conn
            .prepare("SELECT id, data FROM part WHERE message_id = ?1 ORDER BY id")
            .unwrap();
        let rows = stmt
            .query_map([message], |row| Ok((row.get(0)?, row.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        rows
    };
    assert!(rows.iter().any(|(_, data)| data.contains("\\ud83d cut")));
    let input = json!({
        "parts": rows.iter().map(|(_, data)| data).collect::<Vec<_>>(),
        "ids": rows.iter().map(|(id, _)| json!({"id": id, "sessionID": SESSION, "messageID": message})).collect::<Vec<_>>(),
    });
    let Some(expected) = node(CODENOMAD, &input.to_string()) else {
        return;
    };
    let preview = preview(&fx.db, SESSION, message);
    assert_eq!(preview["status"], "preview", "{preview}");
    assert_eq!(preview["revision"], expected["revision"], "{preview}");
    let tool = &preview["parts"][0];
    assert_eq!(
        tool["bytes"],
        expected["bytes"][tool["index"].as_u64().unwrap() as usize]
    );

    assert_eq!(prune_all(&fx.db, SESSION, message)["status"], "pruned");
    assert_eq!(
        fx.scalar(&format!(
            "SELECT count(*) FROM part WHERE message_id = '{message}'"
        )),
        1,
        "the text part stays"
    );
}

#[test]
fn a_v2_row_holding_a_lone_surrogate_is_pruned_and_keeps_the_escape_elsewhere() {
    let fx = V2Fixture::new();
    // Items as stored: a reasoning and a text, each cut inside a surrogate pair.
    let reasoning = r#"{"type":"reasoning","id":"r1","text":"thinking \udc00 cut"}"#;
    let text = r#"{"type":"text","id":"t1","text":"answer \ud800"}"#;
    let data = format!(
        r#"{{"time":{{"created":5,"completed":6}},"agent":"build","model":{{"id":"fixture","providerID":"fixture"}},"content":[{reasoning},{text}],"finish":"stop"}}"#
    );
    fx.insert_message(V2_SESSION, "msg_v2_surrogate", "assistant", 9, &data);
    let input = json!({ "parts": [reasoning, text], "ids": [{}, {}] });
    let Some(expected) = node(CODENOMAD, &input.to_string()) else {
        return;
    };
    let preview = preview(&fx.db, V2_SESSION, "msg_v2_surrogate");
    assert_eq!(preview["status"], "preview", "{preview}");
    assert_eq!(preview["revision"], expected["revision"], "{preview}");
    assert_eq!(preview["parts"][0]["bytes"], expected["bytes"][0]);

    assert_eq!(
        prune_all(&fx.db, V2_SESSION, "msg_v2_surrogate")["status"],
        "pruned"
    );
    // The text item is written back with its escape, as JavaScript wrote it.
    let row = fx.row("msg_v2_surrogate");
    assert!(row.contains(r#""text":"answer \ud800""#), "{row}");
    assert!(!row.contains("thinking"), "{row}");
}
