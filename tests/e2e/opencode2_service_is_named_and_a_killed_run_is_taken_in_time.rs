//! OpenCode 2's background service, found as a user meets it:
//!
//! - while it runs, `stats` and `sessions` name it, and `vacuum` refuses (exit 3) with
//!   `opencode service stop`;
//! - killed mid-run (SIGKILL), it leaves `time_suspended` set: the session is refused
//!   (`maintenance_required`, nothing written) while the run is recent, with words that say when
//!   it will be taken, and while any process has the database open (by any name: a hard link);
//!   once nothing of it was
//!   written for `--abandoned-after` and nothing holds the file, its completed messages are
//!   pruned, the receipts say beside which run, and the run's own message is left whole;
//! - OpenCode 2 started again continues from there, logging no database error.

use crate::common::cli::{clean_everything, json, run};
use crate::opencode_real;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use opencode_real::{assert_no_database_trouble, opencode2_home, Service};
use rusqlite::Connection;

const TURN_TIMEOUT: Duration = Duration::from_secs(90);
const TWO_HOURS_MS: i64 = 2 * 3600 * 1000;

fn clean(db: &std::path::Path, abandoned_after: &str) -> (Option<i32>, serde_json::Value) {
    clean_everything(db, &["--abandoned-after", abandoned_after])
}

fn digest(db: &std::path::Path) -> Vec<(String, String)> {
    let conn = Connection::open(db).expect("open");
    let mut stmt = conn
        .prepare("SELECT id, data FROM session_message ORDER BY id")
        .expect("select");
    let rows = stmt
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .expect("rows")
        .map(|row| row.expect("row"))
        .collect();
    rows
}

fn service_named_and_killed_run_taken(version: &str) {
    let Some((_mock, home)) = opencode2_home(version) else {
        return;
    };
    let mut service = Service::start(&home);
    let session = service.session_with_turns("killed mid-run", 2, TURN_TIMEOUT);
    let db = home.database();

    // Named while it runs.
    let stats = run(&db, &["stats"]);
    let said = String::from_utf8_lossy(&stats.stdout).into_owned();
    assert!(
        said.contains(&format!(
            "OpenCode {version}'s background service (pid {}",
            service.pid()
        )),
        "{version}: {said}"
    );
    assert!(said.contains("`opencode service stop`"), "{said}");
    let vacuum = run(&db, &["vacuum"]);
    assert_eq!(vacuum.status.code(), Some(3), "{vacuum:?}");
    let said = String::from_utf8_lossy(&vacuum.stdout).into_owned()
        + &String::from_utf8_lossy(&vacuum.stderr);
    assert!(
        said.contains("background service") && said.contains("`opencode service stop` stops it"),
        "{version}: {said}"
    );

    // Killed while a run holds the session.
    service.send_prompt(&session, "Hold the session. [[slow:12]]");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let conn = Connection::open(&db).expect("open");
        let claim: Option<i64> = conn
            .query_row(
                "SELECT time_suspended FROM session_v2 WHERE id = ?1",
                [&session],
                |row| row.get(0),
            )
            .expect("claim");
        if claim.is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "{version}: no run claim");
        std::thread::sleep(Duration::from_millis(100));
    }
    service.kill();
    let before = digest(&db);
    let (code, report) = clean(&db, "24h");
    assert_eq!(code, Some(3), "{version}: {report}");
    assert_eq!(report["pruned"], 0, "{report}");
    assert!(
        report["blockedBecause"]["maintenance_required"]
            .as_str()
            .is_some_and(|why| why.contains("time_suspended") && why.contains("--abandoned-after")),
        "{version}: {report}"
    );
    assert_eq!(digest(&db), before);

    // As if the run was killed two hours ago.
    let conn = Connection::open(&db).expect("open");
    conn.execute(
        "UPDATE session_v2 SET time_suspended = time_suspended - ?1, \
                time_updated = time_updated - ?1 WHERE id = ?2",
        rusqlite::params![TWO_HOURS_MS, session],
    )
    .expect("age the session");
    conn.execute(
        "UPDATE session_message SET time_created = time_created - ?1, \
                time_updated = time_updated - ?1 WHERE session_id = ?2",
        rusqlite::params![TWO_HOURS_MS, session],
    )
    .expect("age its messages");
    drop(conn);
    let aged = digest(&db);
    let (code, report) = clean(&db, "24h");
    assert_eq!((code, &report["pruned"]), (Some(3), &0.into()), "{report}");

    // Taken after --abandoned-after, but not while a process holds the file, even by another
    // name for it (a hard link).
    let link = home.root().join("another-name.db");
    std::fs::hard_link(&db, &link).expect("a hard link to the database");
    let mut holder = Command::new("bash")
        .arg("-c")
        .arg("exec 3<\"$0\"; sleep 60")
        .arg(&link)
        .stdin(Stdio::null())
        .spawn()
        .expect("a process holding the database");
    std::thread::sleep(Duration::from_millis(300));
    let (code, report) = clean(&db, "1h");
    assert_eq!(code, Some(3), "{report}");
    assert!(
        report["blockedBecause"]["maintenance_required"]
            .as_str()
            .is_some_and(|why| why.contains("has the database open")),
        "{version}: {report}"
    );
    assert_eq!(digest(&db), aged);
    let _ = holder.kill();
    let _ = holder.wait();
    std::fs::remove_file(&link).expect("remove the link");

    let (code, report) = clean(&db, "1h");
    assert_eq!(code, Some(0), "{version}: {report}");
    assert!(report["pruned"].as_u64() >= Some(2), "{report}");
    assert_eq!(report["abandonedRuns"], 1, "{report}");
    let out = run(&db, &["--json", "receipts"]);
    let receipts = json(&out);
    let run_message = receipts[0]["abandonedRun"]["messageID"]
        .as_str()
        .unwrap_or_else(|| panic!("{version}: no abandoned run in {receipts}"))
        .to_string();
    let kept = aged
        .iter()
        .find(|(id, _)| *id == run_message)
        .expect("the run's row");
    assert!(
        digest(&db).contains(kept),
        "{version}: the run's own row changed"
    );
    let audit = run(&db, &["audit"]);
    assert_eq!(audit.status.code(), Some(0), "{audit:?}");

    // OpenCode 2 started again goes on from there.
    let mut service = Service::start(&home);
    service.turn(&session, "Go on. [[say:after_the_kill]]", TURN_TIMEOUT);
    service.stop();
    assert_no_database_trouble(&home.log_files());
}

#[test]
fn opencode_2_1_2_service_is_named_and_a_killed_run_is_taken_in_time() {
    service_named_and_killed_run_taken("2.1.2");
}

#[test]
fn opencode_2_0_15_service_is_named_and_a_killed_run_is_taken_in_time() {
    service_named_and_killed_run_taken("2.0.15");
}
