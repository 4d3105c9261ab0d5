//! Layouts made from the 1.18.34 fixture with SQL, as older releases or damaged files have them:
//! each is either pruned (the dry run predicting the apply) or refused in words that name what
//! is missing; no output shows SQLite's own message.

use crate::common;

use common::cli::{assert_exit, json, run};
use common::*;
use serde_json::{json, Value};

/// OpenCode 1.2's first SQLite layout, made from the 1.18.34 fixture: no event log, no V2 table,
/// no workspace, and a `session` table without the columns later releases added.
const LAYOUT_1_2: &str = "
    DROP TABLE event; DROP TABLE event_sequence; DROP TABLE session_message;
    DROP TABLE session_input; DROP TABLE session_context_epoch; DROP TABLE workspace;
    DROP INDEX session_workspace_idx;
    ALTER TABLE session DROP COLUMN workspace_id; ALTER TABLE session DROP COLUMN path;
    ALTER TABLE session DROP COLUMN agent; ALTER TABLE session DROP COLUMN model;
    ALTER TABLE session DROP COLUMN cost; ALTER TABLE session DROP COLUMN tokens_input;
    ALTER TABLE session DROP COLUMN tokens_output; ALTER TABLE session DROP COLUMN tokens_reasoning;
    ALTER TABLE session DROP COLUMN tokens_cache_read;
    ALTER TABLE session DROP COLUMN tokens_cache_write; ALTER TABLE session DROP COLUMN metadata;
    DROP TABLE migration; CREATE TABLE __drizzle_migrations (id, hash, created_at);";

/// `preview --json` of turn 5 of the many-turns session (exit 0 expected).
fn preview_turn5(fx: &Fixture) -> std::process::Output {
    run(
        &fx.db,
        &[
            "--quiet-period",
            "0",
            "--json",
            "preview",
            MANY_TURNS,
            TURN5,
        ],
    )
}

/// `prune --json` of every technical part of turn 5 at `revision`, or its dry run.
fn prune_turn5(fx: &Fixture, revision: &str, dry: bool) -> std::process::Output {
    let mut args = vec![
        "--quiet-period",
        "0",
        "--json",
        "prune",
        MANY_TURNS,
        TURN5,
        "--revision",
        revision,
        "--all-technical",
    ];
    if dry {
        args.push("--dry-run");
    }
    run(&fx.db, &args)
}

/// Every output a test printed, checked for SQLite's own words.
fn assert_no_raw_sqlite(printed: &str) {
    for words in [
        "no such table",
        "no such column",
        "constraint failed",
        "unable to open",
    ] {
        assert!(!printed.contains(words), "{words:?} in:\n{printed}");
    }
}

fn printed(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `clean --all` as a dry run, then applied: both reports, with their `status` removed.
fn clean_twice(fx: &Fixture, all: &mut String) -> (Value, Value) {
    let mut reports = Vec::new();
    for apply in [false, true] {
        let mut args = vec!["--quiet-period", "0", "--json", "clean", "--all"];
        if apply {
            args.push("--apply");
        }
        let out = run(&fx.db, &args);
        all.push_str(&printed(&out));
        assert_exit(&out, 0);
        let mut report = json(&out);
        report["status"] = Value::Null;
        // What the apply measured after it, beside the estimate both give.
        if let Some(file) = report["file"].as_object_mut() {
            file.remove("liveAfter");
        }
        reports.push(report);
    }
    let applied = reports.pop().expect("apply");
    (reports.pop().expect("dry run"), applied)
}

#[test]
fn the_first_sqlite_layout_of_1_2_is_cleaned_as_its_dry_run_predicts() {
    let fx = Fixture::new();
    fx.exec(LAYOUT_1_2);
    let mut all = String::new();
    let (predicted, applied) = clean_twice(&fx, &mut all);
    assert_eq!(predicted, applied);
    assert_eq!(applied["pruned"], 11, "{applied}");
    assert_eq!(applied["failed"], 0, "{applied}");
    assert_eq!(applied["blocked"], json!({}), "{applied}");
    assert_eq!(fx.rows_containing("part", "TOOL_CANARY_T05"), 0);
    assert_no_raw_sqlite(&all);
}

#[test]
fn an_event_sequence_without_owner_id_or_unique_index_is_pruned_with_its_events() {
    let fx = Fixture::new();
    fx.exec("DROP INDEX event_aggregate_seq_idx; ALTER TABLE event_sequence DROP COLUMN owner_id;");
    let seq_before = fx.scalar(&format!(
        "SELECT seq FROM event_sequence WHERE aggregate_id = '{MANY_TURNS}'"
    ));
    let preview = preview_turn5(&fx);
    assert_exit(&preview, 0);
    let preview = json(&preview);
    assert_eq!(preview["liveMutation"], true);
    let revision = preview["revision"].as_str().expect("revision");
    let prune = prune_turn5(&fx, revision, false);
    assert_exit(&prune, 0);
    assert_eq!(json(&prune)["status"], "pruned");
    assert_eq!(
        fx.scalar(&format!(
            "SELECT seq FROM event_sequence WHERE aggregate_id = '{MANY_TURNS}'"
        )),
        seq_before + 2
    );
    assert_eq!(
        fx.scalar("SELECT count(*) FROM event WHERE type = 'message.part.removed.1'"),
        2
    );
    let mut all = printed(&prune);
    let (predicted, applied) = clean_twice(&fx, &mut all);
    assert_eq!(predicted, applied);
    assert_no_raw_sqlite(&all);
}

#[test]
fn a_session_table_without_a_column_every_listing_reads_is_refused_naming_it() {
    let fx = Fixture::new();
    fx.exec("ALTER TABLE session DROP COLUMN title");
    let digest = fx.file_digest();
    let mut all = String::new();
    for command in [vec!["sessions"], vec!["stats"], vec!["clean", "--all"]] {
        let mut args = vec!["--json"];
        args.extend_from_slice(&command);
        let out = run(&fx.db, &args);
        all.push_str(&printed(&out));
        assert_exit(&out, 1);
        let error = json(&out)["error"].as_str().expect("error").to_string();
        assert!(
            error.ends_with(
                "the V1 tables lack column(s) session.title: a layout this version does not know"
            ),
            "{error}"
        );
    }
    let preview = preview_turn5(&fx);
    assert_exit(&preview, 0);
    let preview = json(&preview);
    assert_eq!(preview["liveMutation"], false, "{preview}");
    let revision = preview["revision"].as_str().expect("revision");
    let prune = prune_turn5(&fx, revision, false);
    all.push_str(&printed(&prune));
    assert_exit(&prune, 3);
    assert_eq!(
        json(&prune),
        json!({"status": "blocked", "reason": "unsupported_storage"})
    );
    assert!(String::from_utf8_lossy(&prune.stderr).contains("session.title"));
    assert_eq!(fx.file_digest(), digest);
    assert_no_raw_sqlite(&all);
}

/// After `setup`, preview says no prune can succeed, the dry run and the prune are both
/// refused as `unsupported_storage` with `words`, `clean`'s dry run predicts its apply, and
/// the database is unchanged.
fn refused_by_its_own_writes(setup: &str, words: &str) {
    let fx = Fixture::new();
    fx.exec(setup);
    let digest = fx.file_digest();
    let mut all = String::new();
    let preview = preview_turn5(&fx);
    assert_exit(&preview, 0);
    let preview = json(&preview);
    assert_eq!(preview["liveMutation"], false, "{preview}");
    let revision = preview["revision"].as_str().expect("revision").to_string();
    for dry in [true, false] {
        let out = prune_turn5(&fx, &revision, dry);
        all.push_str(&printed(&out));
        assert_exit(&out, 3);
        assert_eq!(
            json(&out),
            json!({"status": "blocked", "reason": "unsupported_storage"})
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(words), "{stderr}");
    }
    assert_eq!(fx.file_digest(), digest);
    let (predicted, applied) = clean_twice(&fx, &mut all);
    assert_eq!(predicted, applied);
    assert_eq!(applied["pruned"], 0, "{applied}");
    assert_no_raw_sqlite(&all);
}

#[test]
fn an_event_column_opencode_does_not_fill_refuses_before_any_prune_is_tried() {
    refused_by_its_own_writes(
        "CREATE TABLE event2 AS SELECT *, 'x' AS origin FROM event; DROP TABLE event; \
         CREATE TABLE event (id text PRIMARY KEY, aggregate_id text NOT NULL, seq integer NOT NULL, \
           type text NOT NULL, data text NOT NULL, origin text NOT NULL); \
         INSERT INTO event SELECT * FROM event2; DROP TABLE event2;",
        "the event table has column(s) origin that every new row must fill",
    );
}

#[test]
fn an_event_sequence_without_its_primary_key_refuses_before_any_prune_is_tried() {
    refused_by_its_own_writes(
        "PRAGMA foreign_keys = OFF; \
         CREATE TABLE es2 AS SELECT * FROM event_sequence; DROP TABLE event_sequence; \
         CREATE TABLE event_sequence (aggregate_id text NOT NULL, seq integer NOT NULL, owner_id text); \
         INSERT INTO event_sequence SELECT * FROM es2; DROP TABLE es2;",
        "event_sequence.aggregate_id is not the table's primary key",
    );
}

#[test]
fn a_view_in_place_of_the_receipt_table_refuses_before_any_prune_is_tried() {
    refused_by_its_own_writes(
        "CREATE VIEW session_prune_receipt AS SELECT 1 AS id",
        "the name of this tool's receipt tables is taken by session_prune_receipt (a view)",
    );
}

#[test]
fn a_trigger_refuses_before_any_prune_is_tried() {
    refused_by_its_own_writes(
        "CREATE TRIGGER keep_parts BEFORE DELETE ON part BEGIN SELECT 1; END",
        "the database has 1 trigger(s); a prune could fire unknown writes",
    );
}
