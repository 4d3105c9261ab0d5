//! A live OpenCode 1.18.34 `serve` on a database of coding work
//! (`tests/fixtures/opencode-1.18.34-work/`), driven with prompts, while `clean --all --apply`
//! runs again and again beside it (`--quiet-period 0 --keep-last-turns 0`: it goes for what
//! OpenCode has just written): every prompt is answered and stored, OpenCode logs no
//! `database is locked`, no `SQLITE_BUSY` and no database error, and every clean exits 0 (done)
//! or 3 (something blocked, for the next run). The longest hold of the write lock the cleans
//! report (`writeLock.maxMs`, their group transactions and give back steps) is printed, not
//! asserted: it is a measurement. It runs twice: on the file as OpenCode left it, and on the
//! file switched by `vacuum --online-shrink`, where each clean also gives the pages it freed back
//! while OpenCode writes, and the file stays switched.
//!
//! The binary comes from `$OPENCODE_BIN` or `scripts/install-opencode.sh` (see
//! `support/binary.rs`); without one the test prints why and returns, except under `CI=true`,
//! where it fails.

use crate::opencode_real;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opencode_real::{http, query_value, Layout, MockModel, OpenCode};
use rusqlite::Connection;
use serde_json::{json, Value};

const PROMPT_TIMEOUT: Duration = Duration::from_secs(90);
/// Prompts sent while the cleans run, spread over the sessions with the most messages.
const PROMPTS: usize = 8;
const SESSIONS: usize = 4;
const PROMPT: &str = "Carry on with the work while the clean runs: say you are done.";

/// The prompts stored in `session`: its text parts that hold [`PROMPT`].
fn prompts_in(db: &Path, session: &str) -> i64 {
    opencode_real::text_parts(db, session, PROMPT)
}

/// One `clean --all --apply` with the write lock's holds reported; its exit code and report.
fn clean(db: &Path) -> (Option<i32>, Value) {
    let out = crate::common::cli::session_prune()
        .arg("--db")
        .arg(db)
        .args(["--json", "--quiet-period", "0", "clean", "--all", "--apply"])
        .args(["--keep-last-turns", "0", "--timings"])
        .output()
        .expect("session-prune clean");
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "the clean report is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), report)
}

#[test]
fn prompts_are_answered_and_opencode_never_waits_on_a_lock_while_cleans_run_beside_it() {
    prompts_are_answered_beside_cleans(false);
}

#[test]
fn prompts_are_answered_beside_cleans_that_give_pages_back_on_a_switched_file() {
    prompts_are_answered_beside_cleans(true);
}

fn prompts_are_answered_beside_cleans(online_shrink: bool) {
    let Some(bin) = opencode_real::binary() else {
        return;
    };
    let fixture = opencode_real::workspace().join("tests/fixtures/opencode-1.18.34-work");
    let mock = MockModel::start();
    let env = OpenCode::with_layout(&bin, &mock.base_url(), Layout::work());
    let db = env.copy_fixture(&fixture);
    if online_shrink {
        let switched = crate::common::cli::run(&db, &["vacuum", "--online-shrink"]);
        crate::common::cli::assert_exit(&switched, 0);
    }
    env.relocate_sessions();
    assert!(env.adopt_project(), "the work tree is a git repo");
    let conn = Connection::open(&db).expect("open");
    let mut stmt = conn
        .prepare("SELECT session_id FROM message GROUP BY session_id ORDER BY count(*) DESC, session_id LIMIT ?1")
        .expect("sessions");
    let sessions: Vec<String> = stmt
        .query_map([SESSIONS as i64], |row| row.get(0))
        .expect("sessions")
        .map(|row| row.expect("row"))
        .collect();
    drop(stmt);
    drop(conn);
    assert!(sessions.iter().all(|s| prompts_in(&db, s) == 0));

    let mut server = env.serve();
    let done = AtomicBool::new(false);
    let (cleans, longest_ms) = std::thread::scope(|scope| {
        let cleaner = scope.spawn(|| {
            let mut runs = 0;
            let mut longest: f64 = 0.0;
            // At least two cleans, and on until the prompts are done.
            while runs < 2 || !done.load(Ordering::SeqCst) {
                let (code, report) = clean(&db);
                assert!(
                    matches!(code, Some(0) | Some(3)),
                    "clean exited {code:?}: {report}"
                );
                assert_eq!(report["failed"], 0, "{report}");
                // A switched file gives pages back after every clean; another never does.
                assert_eq!(report.get("givenBack").is_some(), online_shrink, "{report}");
                let held = report["writeLock"]["maxMs"].as_f64().expect("writeLock");
                longest = longest.max(held);
                runs += 1;
            }
            (runs, longest)
        });
        for n in 0..PROMPTS {
            let session = &sessions[n % sessions.len()];
            let path = format!(
                "/session/{session}/message?directory={}",
                query_value(env.work_dir().to_str().expect("UTF-8 path"))
            );
            let body = json!({
                "parts": [{"type": "text", "text": PROMPT}],
                "model": env.layout().prompt_model()
            });
            let reply = http(server.url(), "POST", &path, Some(&body), PROMPT_TIMEOUT)
                .unwrap_or_else(|e| panic!("prompt {n} failed: {e}\n{}", server.log()));
            assert_eq!(
                reply.status,
                200,
                "prompt {n}: {}\n{}",
                reply.body,
                server.log()
            );
            assert_eq!(reply.json()["info"]["finish"], "stop", "prompt {n}");
        }
        done.store(true, Ordering::SeqCst);
        cleaner.join().expect("the cleaning thread")
    });
    let serve_log = server.log();
    server.stop();

    // Every prompt stored (each was answered above).
    for (i, session) in sessions.iter().enumerate() {
        let prompts = (0..PROMPTS).filter(|n| n % sessions.len() == i).count() as i64;
        assert_eq!(prompts_in(&db, session), prompts, "prompts of {session}");
    }
    let log = format!("{serve_log}\n{}", env.log_files());
    opencode_real::assert_no_database_trouble(&log);
    let conn = Connection::open(&db).expect("open");
    let mode: i64 = conn
        .query_row("PRAGMA auto_vacuum", [], |row| row.get(0))
        .expect("auto_vacuum");
    assert_eq!(
        mode,
        if online_shrink { 2 } else { 0 },
        "OpenCode kept the mode"
    );
    drop(conn);
    eprintln!(
        "LIVE online_shrink={online_shrink} cleans={cleans} prompts={PROMPTS} max_lock_ms={longest_ms:.1} (the longest write lock hold the cleans reported)"
    );
}
