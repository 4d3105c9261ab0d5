//! A user message whose every part is an `ignored` text part (how a plugin answers in an
//! OpenCode 1.x session, `/prune` among them) is no turn for `--keep-last-turns`: OpenCode never
//! sends it to the model, so the turns kept are the same with it as without it. A user message
//! with text OpenCode sends is a turn, and one with a part that is not JSON counts as one too;
//! the apply takes exactly what the dry run planned beside an answer, and leaves the answer be.

use crate::common;

use common::cli::{json, run};
use common::*;
use serde_json::{json, Value};

/// The newest message of the many-turns session: its `time_created`, ms since epoch.
fn newest_time(fx: &Fixture) -> i64 {
    fx.scalar(&format!(
        "SELECT max(time_created) FROM message WHERE session_id = '{MANY_TURNS}'"
    ))
}

/// Adds a user message after every other one of the many-turns session, with one part per
/// `parts` entry (each the part's `data` text).
fn add_user_message(fx: &Fixture, id: &str, parts: &[String]) {
    let at = newest_time(fx) + 1_000;
    let data = json!({"id": id, "sessionID": MANY_TURNS, "role": "user",
        "time": {"created": at}, "agent": "build",
        "model": {"providerID": "fixture", "modelID": "fixture"}});
    let conn = fx.sql();
    conn.execute(
        "INSERT INTO message (id, session_id, time_created, time_updated, data) \
         VALUES (?1, ?2, ?3, ?3, ?4)",
        (id, MANY_TURNS, at, data.to_string()),
    )
    .expect("insert the message");
    for (n, part) in parts.iter().enumerate() {
        conn.execute(
            "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) \
             VALUES (?1, ?2, ?3, ?4, ?4, ?5)",
            (format!("prt_{id}_{n}"), id, MANY_TURNS, at, part),
        )
        .expect("insert the part");
    }
}

fn text(text: &str, ignored: bool) -> String {
    let mut part = json!({"type": "text", "text": text});
    if ignored {
        part["ignored"] = json!(true);
    }
    part.to_string()
}

/// The dry run of a clean of the many-turns session keeping its last turn.
fn plan(fx: &Fixture) -> Value {
    json(&run(
        &fx.db,
        &[
            "--json",
            "clean",
            MANY_TURNS,
            "--keep-last-turns",
            "1",
            "--no-compact",
        ],
    ))
}

/// What a plan takes and keeps, without the file's figures.
fn taken(plan: &Value) -> (u64, u64, u64, u64) {
    (
        plan["considered"].as_u64().expect("considered"),
        plan["pruned"].as_u64().expect("pruned"),
        plan["parts"].as_u64().expect("parts"),
        plan["bytes"].as_u64().expect("bytes"),
    )
}

#[test]
fn an_answer_of_ignored_text_parts_keeps_the_same_turns() {
    let fx = Fixture::new();
    let before = taken(&plan(&fx));
    add_user_message(
        &fx,
        "msg_zz_answer",
        &[
            text("session-prune: a clean would prune 3 parts", true),
            text("", true),
        ],
    );
    assert_eq!(taken(&plan(&fx)), before);
}

#[test]
fn a_message_with_text_opencode_sends_is_a_turn() {
    let fx = Fixture::new();
    let before = taken(&plan(&fx));
    add_user_message(
        &fx,
        "msg_zz_prompt",
        &[text("an answer", true), text("go on", false)],
    );
    let after = taken(&plan(&fx));
    assert!(
        after.0 > before.0 && after.3 > before.3,
        "the former last turn is no longer kept: {before:?} -> {after:?}"
    );
}

#[test]
fn a_part_that_is_not_json_counts_as_sent() {
    let fx = Fixture::new();
    let before = taken(&plan(&fx));
    add_user_message(
        &fx,
        "msg_zz_damaged",
        &[text("an answer", true), "{not json".to_string()],
    );
    let after = taken(&plan(&fx));
    assert!(
        after.0 > before.0,
        "a damaged part makes the message a turn: {before:?} -> {after:?}"
    );
}

#[test]
fn the_clean_applies_what_its_dry_run_planned_beside_an_answer() {
    let fx = Fixture::new();
    add_user_message(
        &fx,
        "msg_zz_answer",
        &[text("session-prune: pruned 3 parts", true)],
    );
    let planned = plan(&fx);
    let applied = json(&run(
        &fx.db,
        &[
            "--json",
            "clean",
            MANY_TURNS,
            "--keep-last-turns",
            "1",
            "--no-compact",
            "--apply",
        ],
    ));
    assert_eq!(applied["status"], "cleaned", "{applied}");
    assert_eq!(taken(&applied), taken(&planned), "{planned} -> {applied}");
    // The answer itself is a user message: nothing of it is touched.
    assert_eq!(
        fx.scalar("SELECT count(*) FROM part WHERE message_id = 'msg_zz_answer'"),
        1
    );
}
