//! The version matrix, diffs half: each OpenCode release (1.2.27, 1.3.2, 1.14.48, 1.15.13,
//! 1.17.19, 1.18.34, 1.19.5), on the database it wrote, takes two turns that edit a file of its work
//! tree (through its bash tool), records the turns' `summary.diffs`, and reverts the first turn.
//! Then `clean --diffs` empties the file bodies of those diffs, and the same release lists and
//! exports the session, reverts the same turn with the same result (the file as it was, the
//! same `revert` of the session), takes it back and continues the session.
//!
//! Binaries: `support/binary.rs` ([`opencode_real::binary_of`]); without one a test prints
//! `SKIPPED` and why and returns, except under `CI=true`, where it fails.

use crate::common::cli::document;
use crate::opencode_real;

use std::path::Path;
use std::time::Duration;

use opencode_real::{http, query_value, Layout, MockModel, OpenCode, Server};
use rusqlite::Connection;
use serde_json::{json, Value};

const TIMEOUT: Duration = Duration::from_secs(90);
/// The work tree's file the turns edit.
const FILE: &str = "README.txt";

/// `METHOD /session/{session}/{route}?directory=WORK` with `body`: the answer's JSON (200).
fn call(env: &OpenCode, server: &Server, method: &str, route: &str, body: &Value) -> Value {
    let path = format!(
        "{route}?directory={}",
        query_value(env.work_dir().to_str().expect("UTF-8 path"))
    );
    let answer = http(server.url(), method, &path, Some(body), TIMEOUT)
        .unwrap_or_else(|e| panic!("{method} {path}: {e}\n{}", server.log()));
    assert_eq!(
        answer.status,
        200,
        "{method} {path}: {}\n{}",
        answer.body,
        server.log()
    );
    answer.json()
}

/// A turn whose bash call appends `line` to [`FILE`]; returns the user message's id.
fn edit_turn(env: &OpenCode, server: &Server, session: &str, line: &str) -> String {
    let text = format!("Append a line. [[bash:printf '{line}\\n' >> {FILE}]]");
    let body = json!({
        "parts": [{"type": "text", "text": text}],
        "model": env.layout().prompt_model(),
    });
    let reply = call(
        env,
        server,
        "POST",
        &format!("/session/{session}/message"),
        &body,
    );
    assert_eq!(reply["info"]["finish"], "stop", "{reply}");
    reply["info"]["parentID"]
        .as_str()
        .expect("the reply names its user message")
        .to_string()
}

/// The `summary.diffs` of a message row.
fn diffs_of(db: &Path, message: &str) -> Value {
    let conn = Connection::open(db).expect("open");
    let data: String = conn
        .query_row("SELECT data FROM message WHERE id = ?1", [message], |r| {
            r.get(0)
        })
        .expect("the message row");
    let value: Value = serde_json::from_str(&data).expect("JSON");
    value["summary"]["diffs"].clone()
}

/// Whether some entry of `diffs` holds a file body.
fn holds_a_body(diffs: &Value) -> bool {
    diffs.as_array().is_some_and(|list| {
        list.iter().any(|entry| {
            ["patch", "before", "after"]
                .iter()
                .any(|key| entry[key].as_str().is_some_and(|body| !body.is_empty()))
        })
    })
}

/// Reverts the turn of `message`; returns the file's content then and the session's `revert`,
/// and takes the revert back (the file as it was after both turns).
fn revert_and_back(
    env: &OpenCode,
    server: &Server,
    session: &str,
    message: &str,
) -> (String, Value) {
    let edited = std::fs::read_to_string(env.work_dir().join(FILE)).expect("the file");
    let reverted = call(
        env,
        server,
        "POST",
        &format!("/session/{session}/revert"),
        &json!({ "messageID": message }),
    );
    let file = std::fs::read_to_string(env.work_dir().join(FILE)).expect("the file");
    call(
        env,
        server,
        "POST",
        &format!("/session/{session}/unrevert"),
        &json!({}),
    );
    assert_eq!(
        std::fs::read_to_string(env.work_dir().join(FILE)).expect("the file"),
        edited,
        "unrevert puts the edits back"
    );
    (file, reverted["revert"].clone())
}

/// What a release does with a turn whose edit its bash tool made (measured): from 1.14 on it
/// records the file in the user message's `summary.diffs` (a `patch` with the whole file) and
/// its revert puts the file back; 1.2 and 1.3 record no diff for it, and their revert leaves
/// the file as it is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tracks {
    /// Records the diff and reverts the file.
    BashEdits,
    /// Neither.
    Nothing,
}

fn release_reverts_after_diffs_prune(fixture: &str, version: &str, tracks: Tracks) {
    let Some(bin) = opencode_real::binary_of(version) else {
        return;
    };
    let source = opencode_real::workspace()
        .join("tests/fixtures")
        .join(fixture);
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(source.join("manifest.json")).expect("manifest"))
            .expect("manifest JSON");
    let work_dir = manifest["generator"]["work_dir"]
        .as_str()
        .expect("work_dir");
    let session = manifest["scenarios"]["b_multi_turn"]["session"]
        .as_str()
        .expect("the multi-turn session")
        .to_string();
    let mock = MockModel::start();
    let env = OpenCode::with_layout(&bin, &mock.base_url(), Layout::generated(work_dir));
    let db = env.copy_fixture(&source);
    env.relocate_sessions();

    // Two turns that edit the file, and the first one reverted and taken back.
    let mut server = env.serve();
    let first = edit_turn(&env, &server, &session, "edit one");
    let second = edit_turn(&env, &server, &session, "edit two");
    let (file_before, revert_before) = revert_and_back(&env, &server, &session, &first);
    server.stop();
    let diffs = diffs_of(&db, &first);
    let bodies = holds_a_body(&diffs);
    eprintln!(
        "{fixture}: the first edit's diffs {diffs}; reverted: {file_before:?}, {revert_before}"
    );
    assert_eq!(bodies, tracks == Tracks::BashEdits, "{fixture}: {diffs}");
    assert_eq!(
        file_before.contains("edit one"),
        tracks == Tracks::Nothing,
        "{fixture}: {file_before}"
    );

    // The diffs prune, alone: no part is selected (no such tool, no reasoning).
    let report = document(
        &db,
        &[
            "clean",
            &session,
            "--apply",
            "--diffs",
            "--keep-last-turns",
            "0",
            "--tools",
            "no-such-tool",
            "--no-reasoning",
            "--no-compact",
        ],
    );
    assert_eq!(report["pruned"], 0, "{fixture}: {report}");
    assert_eq!(report["failed"], 0, "{fixture}: {report}");
    let emptied = report["diffs"]["pruned"].as_u64().expect("diffs.pruned");
    assert_eq!(emptied > 0, bodies, "{fixture}: {report}");
    for message in [&first, &second] {
        assert!(
            !holds_a_body(&diffs_of(&db, message)),
            "{fixture}: {message}"
        );
    }
    let kept = diffs_of(&db, &first);
    assert_eq!(
        kept.as_array().map(Vec::len),
        diffs.as_array().map(Vec::len),
        "{fixture}: every entry stays"
    );

    // The release lists and exports the session, reverts the same turn alike, and continues.
    let mut server = env.serve();
    let listed = http(
        server.url(),
        "GET",
        &format!(
            "/session?directory={}",
            query_value(env.work_dir().to_str().expect("UTF-8 path"))
        ),
        None,
        TIMEOUT,
    )
    .expect("list sessions")
    .json();
    assert!(
        listed
            .as_array()
            .expect("sessions")
            .iter()
            .any(|s| s["id"] == session.as_str()),
        "{fixture}: {listed}"
    );
    let (file_after, revert_after) = revert_and_back(&env, &server, &session, &first);
    assert_eq!(
        file_after, file_before,
        "{fixture}: the revert restores the file alike"
    );
    assert_eq!(revert_after, revert_before, "{fixture}: the same revert");
    edit_turn(&env, &server, &session, "edit three");
    server.stop();
    let out = env.export(&session, TIMEOUT);
    assert!(out.status.success(), "{fixture}: export: {}", out.stderr);
    let exported: Value = serde_json::from_str(&out.stdout).expect("export JSON");
    let message = exported["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["info"]["id"] == first.as_str())
        .expect("the first edit's message");
    assert_eq!(message["info"]["summary"]["diffs"], kept, "{fixture}");
}

#[test]
fn release_1_2_27_reverts_a_turn_whose_diffs_were_emptied() {
    release_reverts_after_diffs_prune("opencode-1.2.27", "1.2.27", Tracks::Nothing);
}

#[test]
fn release_1_3_2_reverts_a_turn_whose_diffs_were_emptied() {
    release_reverts_after_diffs_prune("opencode-1.3.2", "1.3.2", Tracks::Nothing);
}

#[test]
fn release_1_14_48_reverts_a_turn_whose_diffs_were_emptied() {
    release_reverts_after_diffs_prune("opencode-1.14.48", "1.14.48", Tracks::BashEdits);
}

#[test]
fn release_1_15_13_reverts_a_turn_whose_diffs_were_emptied() {
    release_reverts_after_diffs_prune("opencode-1.15.13", "1.15.13", Tracks::BashEdits);
}

#[test]
fn release_1_17_19_reverts_a_turn_whose_diffs_were_emptied() {
    release_reverts_after_diffs_prune("opencode-1.17.19", "1.17.19", Tracks::BashEdits);
}

#[test]
fn release_1_18_34_reverts_a_turn_whose_diffs_were_emptied() {
    release_reverts_after_diffs_prune(
        "opencode-1.18.34-matrix",
        opencode_real::VERSION,
        Tracks::BashEdits,
    );
}

#[test]
fn release_1_19_5_reverts_a_turn_whose_diffs_were_emptied() {
    release_reverts_after_diffs_prune("opencode-1.19.5", "1.19.5", Tracks::BashEdits);
}
