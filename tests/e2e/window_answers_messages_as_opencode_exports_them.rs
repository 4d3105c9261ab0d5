//! Interoperability: a V1 window holds each message exactly as the real OpenCode 1.18.34
//! answers it (`opencode export`, whose `messages` are what its `GET /session/{id}/message`
//! returns: `{info, parts}`), for every session of the fixture.
//!
//! The binary comes from `$OPENCODE_BIN` or `scripts/install-opencode.sh` (see
//! `support/binary.rs`); without one the test prints why and returns, except under
//! `CI=true`, where it fails.

use std::time::Duration;

use rusqlite::Connection;
use serde_json::Value;

use crate::common::cli;
use crate::opencode_real::{self, MockModel, OpenCode};

const EXPORT_TIMEOUT: Duration = Duration::from_secs(30);

#[test]
fn window_answers_messages_as_opencode_exports_them() {
    let Some(bin) = opencode_real::binary() else {
        return;
    };
    let mock = MockModel::start();
    let env = OpenCode::new(&bin, &mock.base_url());
    let db = env.install_database(
        &opencode_real::workspace().join("tests/fixtures/opencode-1.18.34/opencode.db"),
    );
    let sessions: Vec<String> = {
        let conn = Connection::open(&db).expect("open the copy");
        let mut stmt = conn
            .prepare(
                "SELECT id FROM session s WHERE EXISTS (SELECT 1 FROM message m WHERE m.session_id = s.id)
                 ORDER BY id",
            )
            .expect("prepare");
        let ids = stmt
            .query_map([], |r| r.get(0))
            .expect("sessions")
            .collect::<Result<_, _>>()
            .expect("sessions");
        ids
    };
    assert!(sessions.len() >= 8, "{sessions:?}");
    for session in &sessions {
        let out = env.export(session, EXPORT_TIMEOUT);
        assert!(
            out.status.success(),
            "opencode export {session}: {}",
            out.stderr
        );
        let exported: Value = serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("export is not JSON ({e}): {}", out.stdout));
        let ours = cli::run(&db, &["--json", "window", session, "--oldest"]);
        cli::assert_exit(&ours, 0);
        let window = cli::json(&ours);
        assert_eq!(window["newer"], Value::Null, "{session} fits one window");
        assert_eq!(
            window["messages"], exported["messages"],
            "session {session}: our window and OpenCode's messages differ"
        );
    }
}
