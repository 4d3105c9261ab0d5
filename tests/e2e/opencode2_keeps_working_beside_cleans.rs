//! Beside a working OpenCode 2.1.2: its background service driven with prompts in two sessions
//! while, for the first half of the time, `clean --all --apply` runs again and again, and for
//! the second half `serve --auto-clean` cleans on a schedule (both with `--quiet-period 0
//! --keep-last-turns 0`: they go for what OpenCode has just written). Every prompt is answered
//! and stored (no turn lost), no clean fails, OpenCode logs no database error, the prunes took
//! something, and the audit holds at the end.
//!
//! It runs 120 s (`SESSION_PRUNE_BESIDE_SECS` changes it).

use crate::common::cli::{clean_everything, run};
use crate::common::http::{get, parse, Server};
use crate::opencode_real;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use opencode_real::{assert_no_database_trouble, canary_turn, opencode2_home, Service};
use rusqlite::Connection;

const VERSION: &str = "2.1.2";
const TURN_TIMEOUT: Duration = Duration::from_secs(90);

fn seconds() -> u64 {
    std::env::var("SESSION_PRUNE_BESIDE_SECS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(120)
}

/// User rows of `session` whose text is `text`.
fn user_rows(db: &std::path::Path, session: &str, text: &str) -> i64 {
    let conn = Connection::open(db).expect("open");
    conn.query_row(
        "SELECT count(*) FROM session_message WHERE session_id = ?1 AND type = 'user' \
         AND json_extract(data, '$.text') = ?2",
        [session, text],
        |row| row.get(0),
    )
    .expect("count")
}

/// Prompts the sessions in turn until `until`, from turn number `first`; the prompts sent, each
/// checked answered and stored once. Returns the next turn number.
fn prompt_until(
    service: &Service,
    db: &std::path::Path,
    sessions: &[String],
    first: u32,
    until: Instant,
) -> u32 {
    let mut n = first;
    while Instant::now() < until {
        let session = &sessions[n as usize % sessions.len()];
        let text = canary_turn(n);
        service.turn(session, &text, TURN_TIMEOUT);
        assert_eq!(user_rows(db, session, &text), 1, "turn {n} of {session}");
        n += 1;
    }
    n
}

#[test]
fn opencode_2_1_2_keeps_working_beside_cleans_and_a_scheduled_clean() {
    let Some((_mock, home)) = opencode2_home(VERSION) else {
        return;
    };
    let db = home.database();
    let half = Duration::from_secs(seconds() / 2);
    let mut service = Service::start(&home);
    let sessions: Vec<String> = (0..2)
        .map(|i| service.session_with_turns(&format!("beside cleans {i}"), 1, TURN_TIMEOUT))
        .collect();

    // First half: `clean --all --apply` again and again.
    let stop = AtomicBool::new(false);
    let (next, cleans) = std::thread::scope(|scope| {
        let cleaner = scope.spawn(|| {
            let mut reports = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let (code, report) = clean_everything(&db, &[]);
                // 3: a session a run held was refused for now.
                assert!(matches!(code, Some(0 | 3)), "{report}");
                assert_eq!(report["failed"], 0, "{report}");
                reports.push(report);
                std::thread::sleep(Duration::from_millis(500));
            }
            reports
        });
        let next = prompt_until(&service, &db, &sessions, 2, Instant::now() + half);
        stop.store(true, Ordering::SeqCst);
        (next, cleaner.join().expect("the cleaner"))
    });
    let pruned: u64 = cleans
        .iter()
        .map(|report| report["pruned"].as_u64().unwrap_or(0))
        .sum();
    assert!(cleans.len() >= 3, "{} cleans", cleans.len());
    assert!(pruned > 0, "the cleans pruned nothing");

    // Second half: `serve --auto-clean`.
    let server = Server::start_exactly(
        &db,
        &[
            "--workspace".into(),
            format!("w={}", home.work_dir().display()),
            "--auto-clean".into(),
            "3s".into(),
            "--quiet-period".into(),
            "0".into(),
            "--keep-last-turns".into(),
            "0".into(),
        ],
        &[],
    );
    prompt_until(&service, &db, &sessions, next, Instant::now() + half);
    let (status, upkeep) = get(&server.url("/api/session-pruning/upkeep"));
    assert_eq!(status, 200, "{upkeep}");
    let upkeep = parse(&upkeep);
    assert!(upkeep["runs"].as_u64() >= Some(2), "{upkeep}");
    assert_eq!(upkeep["lastRun"]["counts"]["failed"], 0, "{upkeep}");
    server.stop();
    service.stop();

    assert_no_database_trouble(&home.log_files());
    let audit = run(&db, &["audit"]);
    assert_eq!(
        audit.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&audit.stdout)
    );
}
