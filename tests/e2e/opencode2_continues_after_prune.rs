//! The real OpenCode 2 (2.0.15 and 2.1.2), in its background service mode, writes turns that a
//! clean prunes, and continues the pruned session: the next model request carries no pruned
//! tool output or reasoning while every text the user and the model wrote is still there, and
//! `opencode session export` of the pruned session succeeds.
//!
//! The binaries come from `scripts/install-opencode.sh 2.1.2` / `2.0.15` (see
//! `support/binary.rs`); without one a test prints why and returns, except under `CI=true`.

use crate::common::cli::{clean_everything, json, run};
use crate::opencode_real;

use std::time::Duration;

use opencode_real::{opencode2_home, RequestKind, Service};
use rusqlite::Connection;

const TURN_TIMEOUT: Duration = Duration::from_secs(90);

fn continues_after_clean(version: &str) {
    let Some((mock, home)) = opencode2_home(version) else {
        return;
    };
    let mut service = Service::start(&home);
    let session = service.session_with_turns("pruned by a clean", 3, TURN_TIMEOUT);
    let db = home.database();
    let conn = Connection::open(&db).expect("open");
    let tool_rows: i64 = conn
        .query_row(
            "SELECT count(*) FROM session_message WHERE session_id = ?1 AND type = 'assistant' \
             AND data LIKE '%TOOL_CANARY_%'",
            [&session],
            |row| row.get(0),
        )
        .expect("count");
    assert!(
        tool_rows >= 3,
        "{tool_rows} assistant rows hold a tool canary"
    );
    drop(conn);

    let (code, report) = clean_everything(&db, &[]);
    assert_eq!(code, Some(0), "{report}");
    assert!(report["pruned"].as_u64() >= Some(3), "{report}");

    let before = mock.requests().len();
    service.turn(
        &session,
        "Turn 4: go on. [[say:text_canary_4]]",
        TURN_TIMEOUT,
    );
    let next = mock.requests()[before..]
        .iter()
        .find(|request| {
            request.kind == RequestKind::Chat && request.session_id() == Some(session.as_str())
        })
        .cloned()
        .expect("the continued turn's model request");
    for n in 1..=3 {
        for pruned in [format!("TOOL_CANARY_{n}"), format!("REASONING_CANARY_{n}")] {
            assert!(
                !next.body.contains(&pruned),
                "{version}: {pruned} was sent after the clean"
            );
        }
        for kept in [
            format!("Turn {n}: run the check."),
            format!("TEXT_CANARY_{n}"),
        ] {
            assert!(next.body.contains(&kept), "{version}: {kept} was not sent");
        }
    }
    service.stop();
}

#[test]
fn opencode_2_1_2_continues_after_clean() {
    continues_after_clean("2.1.2");
}

#[test]
fn opencode_2_0_15_continues_after_clean() {
    continues_after_clean("2.0.15");
}

/// OpenCode 2's spill files (`shell/<project>/sh_*.out`, one per shell call) are counted by
/// `stats`, and `clean --include-spill-files` removes those no remaining row names: the short
/// output's at once, the long output's once the tool output that names it is pruned.
fn spill_files_go_with_the_rows_that_name_them(version: &str) {
    let Some((_mock, home)) = opencode2_home(version) else {
        return;
    };
    let mut service = Service::start(&home);
    let session = service.create_session("spilled");
    service.turn(
        &session,
        "Long. [[bash:seq -f 'spilled line %g of the output' 1 3000]]",
        TURN_TIMEOUT,
    );
    service.turn(&session, "Short. [[bash:echo short]]", TURN_TIMEOUT);
    service.turn(&session, "Done. [[say:done]]", TURN_TIMEOUT);
    service.stop();
    let db = home.database();
    let stats = json(&run(&db, &["--json", "stats", "--exact"]));
    assert_eq!(
        stats["spill"]["files"]["count"], 2,
        "{version}: {}",
        stats["spill"]
    );
    assert_eq!(
        stats["spill"]["unreferenced"]["count"], 1,
        "{}",
        stats["spill"]
    );
    let (code, report) = clean_everything(&db, &["--include-spill-files"]);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["spillFilesRemoved"], 2, "{version}: {report}");
    let stats = json(&run(&db, &["--json", "stats", "--exact"]));
    assert_eq!(stats["spill"]["files"]["count"], 0, "{}", stats["spill"]);
}

#[test]
fn opencode_2_1_2_spill_files_go_with_the_rows_that_name_them() {
    spill_files_go_with_the_rows_that_name_them("2.1.2");
}

#[test]
fn opencode_2_0_15_spill_files_go_with_the_rows_that_name_them() {
    spill_files_go_with_the_rows_that_name_them("2.0.15");
}
