//! A scope directory compares by the rules of its platform, end to end: in a POSIX directory
//! `\` is part of a name, so `--directory /x/work` refuses a session in `/x/work\sub` (a
//! sibling) and `--directory /home/other` one in `/x/work\..\..\home\other`, with nothing
//! written; a Windows directory (`C:\...`) is compared with both separators and without case,
//! through the CLI's `--directory` and the server's `--workspace ID=DIR` alike.

use crate::common;

use std::process::Output;

use common::cli::{assert_exit, json, run};
use common::http::{get, parse, post, Server};
use common::{Fixture, KILLED_MID_TOOL, KILLED_MID_TOOL_MSG, MANY_TURNS, TURN5};
use serde_json::json;

/// Gives `session` the directory `directory`, as OpenCode would have stored it.
fn set_directory(fx: &Fixture, session: &str, directory: &str) {
    let changed = fx
        .sql()
        .execute(
            "UPDATE session SET directory = ?1 WHERE id = ?2",
            [directory, session],
        )
        .expect("set the directory");
    assert_eq!(changed, 1);
}

/// The revision of turn 5, previewed without a scope.
fn turn5_revision(fx: &Fixture) -> String {
    let out = run(&fx.db, &["--json", "preview", MANY_TURNS, TURN5]);
    assert_exit(&out, 0);
    json(&out)["revision"]
        .as_str()
        .expect("revision")
        .to_string()
}

/// `preview` of turn 5 within `directory`.
fn preview_within(fx: &Fixture, directory: &str) -> Output {
    run(
        &fx.db,
        &[
            "--json",
            "preview",
            MANY_TURNS,
            TURN5,
            "--directory",
            directory,
        ],
    )
}

/// `prune --dry-run` of every technical part of turn 5 within `directory`.
fn dry_run_within(fx: &Fixture, revision: &str, directory: &str) -> Output {
    run(
        &fx.db,
        &[
            "--json",
            "prune",
            MANY_TURNS,
            TURN5,
            "--revision",
            revision,
            "--all-technical",
            "--dry-run",
            "--directory",
            directory,
        ],
    )
}

/// Checks a `not_deletable` refusal: exit 3, the blocked document, and the reason on stderr.
fn assert_outside(out: &Output, directory: &str, scope: &str) {
    assert_exit(out, 3);
    assert_eq!(
        json(out),
        json!({"status": "blocked", "reason": "not_deletable"})
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        format!(
            "blocked: not_deletable: session {MANY_TURNS} is outside the request's scope: \
             the session's directory {directory} is outside {scope}"
        )
    );
}

#[test]
fn a_backslash_in_a_posix_directory_does_not_separate() {
    let fx = Fixture::new();
    let revision = turn5_revision(&fx);
    for (directory, scope) in [
        ("/x/work\\sub", "/x/work"),
        ("/x/work\\..\\..\\home\\other", "/home/other"),
    ] {
        set_directory(&fx, MANY_TURNS, directory);
        let database = fx.file_digest();
        assert_outside(&preview_within(&fx, scope), directory, scope);
        assert_outside(&dry_run_within(&fx, &revision, scope), directory, scope);
        assert_eq!(fx.file_digest(), database, "{directory}");
        assert!(!fx.journal.exists(), "{directory}");
    }
    // The same directory is admitted by a scope that names it, backslash and all.
    set_directory(&fx, MANY_TURNS, "/x/work\\sub");
    let out = dry_run_within(&fx, &revision, "/x/work\\sub/");
    assert_exit(&out, 0);
    assert_eq!(json(&out)["status"], "dry-run");
    assert_eq!(json(&out)["removedCount"], 2);
}

#[test]
fn a_windows_directory_is_admitted_by_a_scope_that_differs_in_case_and_separators() {
    let fx = Fixture::new();
    let revision = turn5_revision(&fx);
    set_directory(&fx, MANY_TURNS, "C:\\Users\\dev\\proj\\sub");
    let database = fx.file_digest();

    let out = preview_within(&fx, "c:/users/DEV/proj/");
    assert_exit(&out, 0);
    let preview = json(&out);
    assert_eq!(preview["status"], "preview");
    assert_eq!(preview["revision"], revision.as_str());

    let out = dry_run_within(&fx, &revision, "c:\\USERS\\dev\\Proj\\Sub\\");
    assert_exit(&out, 0);
    let plan = json(&out);
    assert_eq!(plan["status"], "dry-run");
    assert_eq!(plan["removedCount"], 2);
    assert_eq!(plan["indexes"], json!([1, 2]));

    // A sibling, another drive and a POSIX root hold it not.
    for (scope, shown) in [
        ("C:\\Users\\dev\\pro", "C:/Users/dev/pro"),
        ("D:\\Users\\dev\\proj", "D:/Users/dev/proj"),
        ("/", "/"),
    ] {
        assert_outside(
            &dry_run_within(&fx, &revision, scope),
            "C:\\Users\\dev\\proj\\sub",
            shown,
        );
    }
    assert_eq!(fx.file_digest(), database);
    assert!(!fx.journal.exists());
}

#[test]
fn server_workspaces_compare_directories_by_the_same_rules() {
    let fx = Fixture::new();
    set_directory(&fx, MANY_TURNS, "C:\\Users\\dev\\proj\\sub");
    set_directory(&fx, KILLED_MID_TOOL, "/x/work\\sub");
    let database = fx.file_digest();
    let server = Server::start_exactly(
        &fx.db,
        &[
            "--workspace".to_string(),
            "win=c:/users/DEV/proj/".to_string(),
            "--workspace".to_string(),
            "posix=/x/work".to_string(),
        ],
        &[],
    );
    let route = |workspace: &str| {
        server.url(&format!(
            "/api/workspaces/{workspace}/session-pruning/preview"
        ))
    };
    let (status, body) = get(&server.url("/api/workspaces"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        parse(&body),
        json!([
            {"id": "posix", "directory": "/x/work"},
            {"id": "win", "directory": "c:/users/DEV/proj"},
        ])
    );

    let windows = json!({"sessionID": MANY_TURNS, "messageID": TURN5}).to_string();
    let (status, body) = post(&route("win"), &windows);
    assert_eq!(status, 200, "{body}");
    assert_eq!(parse(&body)["status"], "preview");
    let (status, body) = post(&route("posix"), &windows);
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        parse(&body),
        json!({"error": format!(
            "session {MANY_TURNS} does not belong to workspace posix (its directory is outside /x/work)"
        )})
    );

    let sibling =
        json!({"sessionID": KILLED_MID_TOOL, "messageID": KILLED_MID_TOOL_MSG}).to_string();
    let (status, body) = post(&route("posix"), &sibling);
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        parse(&body),
        json!({"error": format!(
            "session {KILLED_MID_TOOL} does not belong to workspace posix (its directory is outside /x/work)"
        )})
    );
    let (status, body) = post(&route("win"), &sibling);
    assert_eq!(status, 403, "{body}");
    let (exit, _) = server.stop();
    assert_eq!(exit.code(), Some(0));
    assert_eq!(fx.file_digest(), database);
}
