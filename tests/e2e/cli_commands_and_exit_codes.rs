//! The `session-prune` binary end to end: JSON shapes, exit codes (0 done, 1 failure, 2 bad
//! input, 3 blocked), database discovery, the demo, and `events --follow` across processes.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::cli::{assert_exit, assert_json_error, json};
use common::*;
use serde_json::Value;

fn cli(fx: &Fixture, args: &[&str]) -> Output {
    crate::common::cli::run(&fx.db, args)
}

/// Runs the binary on `db` with the journal at `journal`.
fn cli_with_journal(
    db: &std::path::Path,
    journal: impl AsRef<std::ffi::OsStr>,
    args: &[&str],
) -> Output {
    crate::common::cli::session_prune()
        .arg("--db")
        .arg(db)
        .arg("--journal")
        .arg(journal)
        .args(args)
        .output()
        .unwrap()
}

/// `--json prune` of every technical part of turn 5, with `extra` flags.
fn prune_turn5(fx: &Fixture, revision: &str, extra: &[&str]) -> Output {
    let mut args = vec!["--json"];
    args.extend(turn5_all_technical(revision));
    args.extend_from_slice(extra);
    cli(fx, &args)
}

/// `prune` of every technical part of turn 5 against `revision`.
fn turn5_all_technical(revision: &str) -> [&str; 6] {
    [
        "prune",
        MANY_TURNS,
        TURN5,
        "--revision",
        revision,
        "--all-technical",
    ]
}

/// The revision `preview --json` prints for turn 5 of the many-turns session.
fn turn5_revision(fx: &Fixture) -> String {
    json(&cli(fx, &["--json", "preview", MANY_TURNS, TURN5]))["revision"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn preview_then_prune_print_the_compatible_shapes_and_retry_prints_the_same_bytes() {
    let fx = Fixture::new();
    let out = cli(&fx, &["--json", "preview", MANY_TURNS, TURN5]);
    assert_eq!(out.status.code(), Some(0));
    let preview = json(&out);
    let keys: Vec<&String> = preview.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["status", "revision", "liveMutation", "parts"]);
    assert_eq!(preview["status"], "preview");
    assert_eq!(preview["liveMutation"], true);
    assert_eq!(preview["parts"][0]["index"], 1);
    assert_eq!(preview["parts"][0]["type"], "reasoning");
    assert_eq!(preview["parts"][1]["type"], "tool");
    let revision = preview["revision"].as_str().unwrap().to_string();

    let args = [
        "--json",
        "prune",
        MANY_TURNS,
        TURN5,
        "--revision",
        &revision,
        "--indexes",
        "1,2",
    ];
    let first = cli(&fx, &args);
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let result = json(&first);
    let keys: Vec<&String> = result.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["status", "messageID", "revision", "removedCount"]);
    assert_eq!(result["status"], "pruned");
    assert_eq!(result["messageID"], TURN5);
    assert_eq!(result["removedCount"], 2);
    let retry = cli(&fx, &args);
    assert_eq!(retry.status.code(), Some(0));
    assert_eq!(retry.stdout, first.stdout);

    let receipts = json(&cli(&fx, &["--json", "receipts", "--session", MANY_TURNS]));
    assert_eq!(receipts.as_array().unwrap().len(), 1);
    assert_eq!(receipts[0]["revisionAfter"], result["revision"]);
    let events = cli(&fx, &["--json", "events"]);
    let lines: Vec<Value> = events
        .stdout
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["seq"], 1);
    assert_eq!(lines[0]["type"], "rpc.codenomad.session-pruning.pruned");
    assert_eq!(lines[0]["data"]["revision"], result["revision"]);
    assert_eq!(lines[0]["id"], receipts[0]["receiptID"]);
}

#[test]
fn dry_run_writes_nothing() {
    let fx = Fixture::new();
    let revision = turn5_revision(&fx);
    let digest = fx.file_digest();
    let out = prune_turn5(&fx, &revision, &["--dry-run"]);
    assert_eq!(out.status.code(), Some(0));
    let plan = json(&out);
    assert_eq!(plan["status"], "dry-run");
    assert_eq!(plan["removedCount"], 2);
    assert_eq!(plan["indexes"], serde_json::json!([1, 2]));
    assert_eq!(fx.file_digest(), digest);
    assert!(!fx.journal.exists());
}

#[test]
fn blocked_prune_exits_3_and_prints_the_blocked_shape() {
    let fx = Fixture::new();
    let rev = "0".repeat(64);
    let out = cli(
        &fx,
        &[
            "--json",
            "--abandoned-after",
            "never",
            "prune",
            KILLED_MID_TOOL,
            KILLED_MID_TOOL_MSG,
            "--revision",
            &rev,
            "--all-technical",
        ],
    );
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "{\n  \"status\": \"blocked\",\n  \"reason\": \"maintenance_required\"\n}\n"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("not complete"));
}

#[test]
fn missing_database_is_bad_input_with_a_clear_error() {
    let fx = Fixture::new();
    let out = crate::common::cli::session_prune()
        .arg("--db")
        .arg(fx.dir.path().join("nope.db"))
        .arg("sessions")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("nope.db") && err.contains("no such file"),
        "{err}"
    );
    assert!(
        !fx.dir.path().join("nope.db").exists(),
        "must not create a database"
    );
}

#[test]
fn database_is_found_under_xdg_data_home() {
    let fx = Fixture::new();
    let data = fx.dir.path().join("xdg");
    std::fs::create_dir_all(data.join("opencode")).unwrap();
    std::fs::copy(&fx.db, data.join("opencode/opencode.db")).unwrap();
    let out = crate::common::cli::session_prune()
        .env_remove("OPENCODE_DB")
        .env("XDG_DATA_HOME", &data)
        .args(["--json", "sessions"])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let sessions = json(&out);
    assert_eq!(sessions.as_array().unwrap().len(), 10);
    assert_eq!(sessions[0]["sessionID"], MANY_TURNS, "largest first");
}

#[test]
fn demo_runs_the_whole_flow() {
    let out = crate::common::cli::session_prune()
        .args(["--json", "demo"])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let steps: Vec<Value> = out
        .stdout
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    let names: Vec<&str> = steps.iter().map(|s| s["step"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["setup", "sessions", "preview", "prune", "retry", "events", "receipts"]
    );
    assert_eq!(steps[4]["data"]["sameReceipt"], true);
    assert_eq!(steps[5]["data"].as_array().unwrap().len(), 1);
    assert_eq!(steps[6]["data"].as_array().unwrap().len(), 1);
    let dir = steps[0]["data"]["db"].as_str().unwrap();
    assert!(
        !std::path::Path::new(dir).exists(),
        "the demo folder is removed"
    );
}

#[test]
fn events_follow_prints_prunes_made_by_another_process() {
    let fx = Fixture::new();
    let mut follower = crate::common::cli::session_prune()
        .arg("--db")
        .arg(&fx.db)
        .args(["--json", "events", "--follow", "--poll-ms", "50"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = follower.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let revision = turn5_revision(&fx);
    let out = prune_turn5(&fx, &revision, &[]);
    assert_exit(&out, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    let line = rx
        .recv_timeout(deadline - Instant::now())
        .expect("a followed event")
        .unwrap();
    let _ = follower.kill();
    let _ = follower.wait();
    let event: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(event["seq"], 1);
    assert_eq!(event["data"]["messageID"], TURN5);
    assert_eq!(event["data"]["revision"], json(&out)["revision"]);
}

#[test]
fn messages_lists_a_sessions_messages_with_their_technical_parts() {
    let fx = Fixture::new();
    let out = cli(
        &fx,
        &["--json", "messages", "ses_dd992d334ffeb4iZc8W2NskkWu"],
    );
    assert_eq!(out.status.code(), Some(0));
    let list = json(&out);
    let rows: Vec<(String, String, bool, u64, u64)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["messageID"].as_str().unwrap().to_string(),
                m["role"].as_str().unwrap().to_string(),
                m["completed"].as_bool().unwrap(),
                m["parts"].as_u64().unwrap(),
                m["technicalParts"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            (
                "msg_2266d2d7b0014CTmURO2DZvDh8".into(),
                "user".into(),
                false,
                1,
                0
            ),
            (
                "msg_2266d3474001I3pewKwYudoyEm".into(),
                "assistant".into(),
                true,
                4,
                2
            ),
            (
                "msg_2266d40c20019NvH1yjyiIJ935".into(),
                "assistant".into(),
                true,
                3,
                0
            ),
        ]
    );
    let missing = cli(&fx, &["messages", "ses_missing"]);
    assert_eq!(
        missing.status.code(),
        Some(2),
        "an unknown session is bad input"
    );
}

#[test]
fn json_errors_are_one_json_document() {
    let fx = Fixture::new();
    let out = cli(
        &fx,
        &[
            "--json",
            "prune",
            MANY_TURNS,
            TURN5,
            "--revision",
            "abc",
            "--all-technical",
        ],
    );
    assert_json_error(&out, 2, "64 lowercase hex");
}

#[test]
fn dry_run_runs_the_session_checks() {
    let fx = Fixture::new();
    let revision = turn5_revision(&fx);
    fx.exec(&format!(
        "UPDATE session SET time_updated = {} WHERE id = '{MANY_TURNS}'",
        now_ms()
    ));
    let digest = fx.file_digest();
    let out = prune_turn5(&fx, &revision, &["--dry-run"]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        json(&out),
        serde_json::json!({"status": "blocked", "reason": "maintenance_required"})
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("quiet period"));
    assert_eq!(fx.file_digest(), digest);
    assert!(!fx.journal.exists());
}

#[test]
fn journal_path_naming_the_database_or_its_sqlite_files_is_refused() {
    let fx = Fixture::new();
    let digest = fx.file_digest();
    let revision = "0".repeat(64);
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let journal = format!("{}{suffix}", fx.db.display());
        let out = cli_with_journal(&fx.db, &journal, &turn5_all_technical(&revision));
        assert_eq!(out.status.code(), Some(2), "{suffix}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("one of its SQLite files"));
    }
    assert_eq!(fx.file_digest(), digest);
}

#[test]
fn prune_while_another_process_holds_the_journal_is_blocked() {
    let fx = Fixture::new();
    let revision = turn5_revision(&fx);
    let held = pruning_engine::Journal::open(&fx.journal).unwrap();
    let digest = fx.file_digest();
    let out = prune_turn5(&fx, &revision, &[]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        json(&out),
        serde_json::json!({"status": "blocked", "reason": "maintenance_required"})
    );
    assert_eq!(fx.file_digest(), digest);
    assert_eq!(held.intents().unwrap().len(), 0);
}

#[test]
fn events_resolves_a_prune_that_committed_before_its_journal_mark() {
    let fx = Fixture::new();
    let (_, receipt) = prune_stopped_before_journal_commit(&fx);
    let receipt_id = receipt.receipt_id;

    let out = cli(&fx, &["--json", "events"]);
    assert_exit(&out, 0);
    let event: Value =
        serde_json::from_slice(out.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(event["seq"], 1);
    assert_eq!(event["id"], receipt_id.to_string());
}

#[test]
fn events_of_another_databases_journal_are_refused() {
    let first = Fixture::new();
    let second = Fixture::new();
    for fx in [&first, &second] {
        let revision = turn5_revision(fx);
        assert_eq!(prune_turn5(fx, &revision, &[]).status.code(), Some(0));
    }
    let out = cli_with_journal(&second.db, &first.journal, &["--json", "events"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&out)["status"], "error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("bound to database"));
}

#[test]
fn journal_linked_to_the_databases_wal_is_refused() {
    let fx = Fixture::new();
    let revision = "0".repeat(64);
    let refused = |journal: &std::path::Path| {
        let out = cli_with_journal(&fx.db, journal, &turn5_all_technical(&revision));
        assert_eq!(out.status.code(), Some(2), "{}", journal.display());
    };
    // A symbolic link to the -wal file before SQLite creates it.
    let dangling = fx.dir.path().join("dangling-journal");
    std::os::unix::fs::symlink("opencode.db-wal", &dangling).unwrap();
    assert!(!fx.db.with_extension("db-wal").exists());
    refused(&dangling);
    // A hard link to the -wal file while another connection keeps it open.
    let conn = fx.sql();
    let _: i64 = conn
        .query_row("SELECT count(*) FROM session", [], |r| r.get(0))
        .unwrap();
    let hard = fx.dir.path().join("hard-journal");
    std::fs::hard_link(fx.db.with_extension("db-wal"), &hard).unwrap();
    refused(&hard);
    drop(conn);
    let integrity: String = fx
        .sql()
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
}

#[test]
fn damaged_journal_is_a_failure_with_a_json_error_not_a_crash() {
    let fx = Fixture::new();
    let revision = turn5_revision(&fx);
    assert_eq!(prune_turn5(&fx, &revision, &[]).status.code(), Some(0));
    let digest = fx.file_digest();
    let mut bytes = std::fs::read(&fx.journal).unwrap();
    for offset in [8192usize, 16384, 20480, 40960] {
        if offset + 8 <= bytes.len() {
            bytes[offset..offset + 8].copy_from_slice(&[0xff; 8]);
        }
    }
    std::fs::write(&fx.journal, &bytes).unwrap();
    for args in [&["--json", "events"][..], &["--json", "receipts"][..]] {
        let out = cli(&fx, args);
        assert!(
            matches!(out.status.code(), Some(0) | Some(1)),
            "{args:?}: {:?}",
            out.status
        );
        if out.status.code() == Some(1) {
            assert_eq!(json(&out)["status"], "error");
        }
    }
    // The audit cannot vouch for a damaged journal: a failure, in JSON, whichever way it shows.
    let out = cli(&fx, &["--json", "audit"]);
    assert_exit(&out, 1);
    let answer = json(&out);
    assert!(
        answer["status"] == "error" || answer["ok"] == false,
        "{answer}"
    );
    let out = prune_turn5(&fx, &revision, &[]);
    assert_exit(&out, 1);
    assert_eq!(json(&out)["status"], "error");
    assert_eq!(fx.file_digest(), digest);
    fx.skip_audit();
}

#[test]
fn dry_run_refuses_a_journal_of_another_database() {
    let first = Fixture::new();
    let revision = turn5_revision(&first);
    assert_eq!(prune_turn5(&first, &revision, &[]).status.code(), Some(0));
    let other = Fixture::new();
    let out = cli_with_journal(
        &other.db,
        &first.journal,
        &[
            "--json",
            "prune",
            MANY_TURNS,
            TURN5,
            "--revision",
            &revision,
            "--all-technical",
            "--dry-run",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("holds its prune history"));
}

#[test]
fn usage_errors_with_json_are_one_json_document() {
    let fx = Fixture::new();
    let out = cli(
        &fx,
        &["prune", MANY_TURNS, TURN5, "--indexes", "1,2", "--json"],
    );
    assert_json_error(&out, 2, "--revision");
}

#[test]
fn a_reader_that_goes_away_ends_output_quietly() {
    let fx = Fixture::new();
    let mut child = crate::common::cli::session_prune()
        .arg("--db")
        .arg(&fx.db)
        .args(["--json", "sessions"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
fn refusals_name_what_is_wrong_with_the_ids() {
    let fx = Fixture::new();
    let other_session = cli(&fx, &["preview", "ses_dd992d334ffeb4iZc8W2NskkWu", TURN5]);
    assert_eq!(other_session.status.code(), Some(3));
    assert_eq!(
        String::from_utf8_lossy(&other_session.stdout).trim(),
        format!("blocked: not_deletable: message {TURN5} belongs to session {MANY_TURNS}, not ses_dd992d334ffeb4iZc8W2NskkWu")
    );
    let missing = cli(&fx, &["messages", "ses_missing"]);
    assert_eq!(
        missing.status.code(),
        Some(2),
        "an unknown session is bad input"
    );
    assert!(String::from_utf8_lossy(&missing.stderr).contains("there is no session ses_missing"));
}

#[test]
fn dry_run_reports_a_locked_database_as_a_prune_would() {
    let fx = Fixture::new();
    let revision = turn5_revision(&fx);
    let writer = fx.sql();
    writer.execute_batch("BEGIN IMMEDIATE").unwrap();
    let out = prune_turn5(&fx, &revision, &["--dry-run"]);
    writer.execute_batch("ROLLBACK").unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        json(&out),
        serde_json::json!({"status": "blocked", "reason": "maintenance_required"})
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("locked by another writer"));
}

#[test]
fn a_refused_prune_exits_3_even_when_nobody_reads_its_answer() {
    let fx = Fixture::new();
    let rev = "0".repeat(64);
    for json in [true, false] {
        let mut command = crate::common::cli::session_prune();
        command.arg("--db").arg(&fx.db);
        if json {
            command.arg("--json");
        }
        let mut child = command
            .args([
                "--abandoned-after",
                "never",
                "prune",
                KILLED_MID_TOOL,
                KILLED_MID_TOOL_MSG,
                "--revision",
                &rev,
                "--all-technical",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away before anything is written.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(3), "json: {json}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{stderr}");
        if json {
            assert!(stderr.contains("blocked: maintenance_required"), "{stderr}");
        }
    }
}

#[test]
fn an_argument_that_is_not_utf8_is_bad_input_not_a_crash() {
    use std::os::unix::ffi::OsStrExt;
    let fx = Fixture::new();
    let before = fx.file_digest();
    let bad = std::ffi::OsStr::from_bytes(b"ses_\xff");
    let out = crate::common::cli::session_prune()
        .arg("--db")
        .arg(&fx.db)
        .arg("--json")
        .arg("messages")
        .arg(bad)
        .output()
        .unwrap();
    assert_exit(&out, 2);
    let doc = json(&out);
    assert_eq!(doc["status"], "error");
    assert_eq!(doc["exitCode"], 2);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    // After `--`, `--json` is a value, not the flag: no JSON document.
    let out = cli(&fx, &["preview", "--", "--json"]);
    assert_exit(&out, 2);
    assert_eq!(out.stdout, b"");
    assert_eq!(fx.file_digest(), before);
}

#[test]
fn bad_ids_and_journal_paths_are_bad_input_and_change_nothing() {
    let fx = Fixture::new();
    let before = fx.file_digest();
    // A session the database does not hold: refused before the journal is made.
    let out = cli(&fx, &["--json", "clean", "ses_nope", "--apply"]);
    assert_json_error(&out, 2, "there is no session ses_nope");
    assert!(!fx.journal.exists(), "clean made a journal for bad input");
    // An empty session id.
    let out = cli(&fx, &["--json", "receipts", "--session", ""]);
    assert_json_error(&out, 2, "--session needs an id");
    // A journal path that names a folder.
    let folder = fx.dir.path().join("journals");
    std::fs::create_dir(&folder).unwrap();
    for args in [&["--json", "sessions"][..], &["--json", "receipts"][..]] {
        let out = cli_with_journal(&fx.db, &folder, args);
        assert_json_error(&out, 2, "is a folder; the journal is a file");
    }
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 0);
    assert!(!fx.journal.exists());
    assert_eq!(fx.file_digest(), before);
}

#[test]
fn messages_counts_only_what_can_be_pruned_where_it_is_stored() {
    let fx = Fixture::new();
    let text = |out: &Output| String::from_utf8(out.stdout.clone()).unwrap();
    // The fixture's V2 session: OpenCode 1.18's shared session table, read-only for prunes.
    let v2 = cli(&fx, &["messages", "ses_dd9925f43ffe2Is1MklYsLGbbU"]);
    assert_exit(&v2, 0);
    let lines: Vec<String> = text(&v2).lines().rev().take(2).map(String::from).collect();
    assert_eq!(
        lines[0],
        "3 with tool or reasoning parts cannot be pruned where they are stored: OpenCode 2 rows in the session table OpenCode 1.17 to 1.19 share are read-only for prunes"
    );
    assert!(
        lines[1].starts_with("8 message(s), 0 with tool or reasoning parts to prune"),
        "{}",
        lines[1]
    );
    // A V1 session: every completed assistant message with technical parts is prunable.
    let v1 = cli(&fx, &["messages", MANY_TURNS]);
    assert_exit(&v1, 0);
    let last = text(&v1).lines().last().unwrap().to_string();
    assert!(
        last.starts_with("30 message(s), 10 with tool or reasoning parts to prune"),
        "{last}"
    );
}
