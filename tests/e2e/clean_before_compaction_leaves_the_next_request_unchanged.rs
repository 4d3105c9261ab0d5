//! `clean --before-compaction` prunes only what OpenCode no longer sends the model: the real
//! OpenCode 1.18.34 continuing the fixture's compacted session sends the same request, byte for
//! byte, with and without the clean; and the report counts what qualified and what did not.
//!
//! The binary comes from `$OPENCODE_BIN` or `scripts/install-opencode.sh` (see
//! `support/binary.rs`); without one the interop test prints why and returns, except under
//! `CI=true`, where it fails.

use crate::common::cli::{json, run};
use crate::common::Fixture;
use crate::opencode_real;

use std::path::Path;
use std::time::Duration;

use opencode_real::{http, query_value, MockModel, OpenCode, RequestKind};
use rusqlite::Connection;
use serde_json::{json, Value};

/// The fixture's session compacted by OpenCode (`POST /session/{id}/summarize`) after three
/// turns, with one more turn after it.
const COMPACTED: &str = "ses_dd9927d77ffeCzugJZ3vDGPMn9";
const PROMPT_TIMEOUT: Duration = Duration::from_secs(45);

/// Assistant messages of the compacted session with a tool or reasoning part, `(before, after)`
/// the user message that holds its compaction part.
fn technical_messages(db: &Path) -> (i64, i64) {
    let conn = Connection::open(db).expect("open");
    conn.query_row(
        "WITH boundary AS (SELECT m.time_created AS t FROM message m JOIN part p ON p.message_id = m.id \
                             WHERE m.session_id = ?1 AND json_extract(p.data, '$.type') = 'compaction'), \
              technical AS (SELECT DISTINCT m.id, m.time_created FROM message m JOIN part p ON p.message_id = m.id \
                             WHERE m.session_id = ?1 \
                               AND json_extract(p.data, '$.type') IN ('tool', 'reasoning')) \
         SELECT (SELECT count(*) FROM technical WHERE time_created < (SELECT t FROM boundary)), \
                (SELECT count(*) FROM technical WHERE time_created > (SELECT t FROM boundary))",
        [COMPACTED],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .expect("count")
}

/// The dry run and the apply agree; only the messages before the compaction are pruned, and a
/// session without a compaction is left whole (the snapshots are left as they are:
/// `--no-compact`).
#[test]
fn clean_before_compaction_prunes_only_messages_older_than_the_compaction() {
    let fx = Fixture::new();
    let (before, after) = technical_messages(&fx.db);
    assert_eq!((before, after), (3, 1));
    let args = [
        "--json",
        "clean",
        "--all",
        "--no-compact",
        "--keep-last-turns",
        "0",
        "--before-compaction",
    ];
    let dry = json(&run(&fx.db, &args));
    let applied = json(&run(&fx.db, &[&args[..], &["--apply"]].concat()));
    for key in ["pruned", "parts", "bytes", "beforeCompaction", "considered"] {
        assert_eq!(dry[key], applied[key], "{key}");
    }
    // 49 assistant messages in the fixture; the 6 before the compaction qualify.
    assert_eq!(
        applied["beforeCompaction"],
        json!({"qualified": 6, "outside": 43}),
        "{applied}"
    );
    assert_eq!(applied["pruned"], before, "{applied}");
    assert_eq!(technical_messages(&fx.db), (0, after));
    let receipts = fx.scalar("SELECT count(*) FROM session_prune_receipt");
    assert_eq!(receipts, before);
    assert_eq!(
        fx.scalar(&format!(
            "SELECT count(*) FROM session_prune_receipt WHERE session_id <> '{COMPACTED}'"
        )),
        0
    );
}

/// The chat request OpenCode 1.18.34 sends to continue the fixture's compacted session, first
/// on the fixture changed by `prepare`, then on the same database after `clean --all
/// --keep-last-turns 0 --before-compaction --apply`; with the clean's report. `None` without
/// the binary (outside CI).
pub(crate) fn requests_around_clean(prepare: impl Fn(&Path)) -> Option<(String, String, Value)> {
    let bin = opencode_real::binary()?;
    let mock = MockModel::start();
    let env = OpenCode::new(&bin, &mock.base_url());
    let db = env.install_database(
        &opencode_real::workspace().join("tests/fixtures/opencode-1.18.34/opencode.db"),
    );
    prepare(&db);
    let pristine = env.root().join("pristine.db");
    std::fs::copy(&db, &pristine).expect("keep the pristine database");
    let path = format!(
        "/session/{COMPACTED}/message?directory={}",
        query_value(env.work_dir().to_str().expect("UTF-8 path"))
    );
    let body = json!({
        "parts": [{"type": "text", "text": "continue"}],
        "model": {"providerID": "fixture", "modelID": "fixture"}
    });
    // The chat request OpenCode sends for one new prompt in the compacted session.
    let continue_session = || -> String {
        let asked_before = mock.requests().len();
        let mut server = env.serve();
        let reply = http(server.url(), "POST", &path, Some(&body), PROMPT_TIMEOUT)
            .unwrap_or_else(|e| panic!("prompting: {e}\n{}", server.log()));
        assert_eq!(reply.status, 200, "{}\n{}", reply.body, server.log());
        server.stop();
        let chats: Vec<String> = mock.requests()[asked_before..]
            .iter()
            .filter(|r| r.kind == RequestKind::Chat)
            .map(|r| r.body.clone())
            .collect();
        assert_eq!(chats.len(), 1, "one chat request per prompt");
        chats.into_iter().next().unwrap_or_default()
    };

    let without_clean = continue_session();
    // The same database again, cleaned before its compaction.
    for side in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{side}", db.display()));
    }
    std::fs::copy(&pristine, &db).expect("restore the pristine database");
    let report = json(&run(
        &db,
        &[
            "--json",
            "clean",
            "--all",
            "--keep-last-turns",
            "0",
            "--before-compaction",
            "--apply",
        ],
    ));
    let with_clean = continue_session();
    Some((without_clean, with_clean, report))
}

#[test]
fn opencode_sends_the_same_request_after_clean_before_compaction() {
    let Some((without_clean, with_clean, report)) = requests_around_clean(|_| {}) else {
        return;
    };
    assert!(
        without_clean.contains("SUMMARY_CANARY"),
        "the summary is sent"
    );
    assert_eq!(report["pruned"], 3, "{report}");
    assert_eq!(with_clean, without_clean);
}
