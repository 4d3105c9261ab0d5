//! A V2 (opencode2) database built from the DDL of migration `20260804233008_loose_psylocke` and
//! its successors (docs/ARCHITECTURE.md, "Storage generations"), holding one session whose
//! assistant message is shaped like the real V2 rows OpenCode 1.18.34 wrote (its data is taken
//! from the 1.18.34 fixture, with a final text part added).
#![allow(dead_code)]

use std::path::PathBuf;

use rusqlite::Connection;
use serde_json::Value;
use tempfile::TempDir;

/// The V2 session.
pub const V2_SESSION: &str = "ses_v2_fixture_session_000001";
/// Its assistant message: reasoning, completed bash tool, text.
pub const V2_ASSISTANT: &str = "msg_v2_fixture_assistant_0001";

const SCHEMA: &str = "
CREATE TABLE project (id text PRIMARY KEY, worktree text NOT NULL, time_created integer NOT NULL,
  time_updated integer NOT NULL, sandboxes text NOT NULL);
CREATE TABLE session_v2 (id text PRIMARY KEY, project_id text NOT NULL REFERENCES project(id) ON DELETE CASCADE,
  workspace_id text, parent_id text, fork_session_id text, fork_boundary text, slug text NOT NULL,
  directory text NOT NULL, path text, title text, version text NOT NULL, share_url text,
  summary_additions integer, summary_deletions integer, summary_files integer, summary_diffs text,
  metadata text, cost real DEFAULT 0 NOT NULL, tokens_input integer DEFAULT 0 NOT NULL,
  tokens_output integer DEFAULT 0 NOT NULL, tokens_reasoning integer DEFAULT 0 NOT NULL,
  tokens_cache_read integer DEFAULT 0 NOT NULL, tokens_cache_write integer DEFAULT 0 NOT NULL,
  revert text, permission text, agent text, model text, time_created integer NOT NULL,
  time_updated integer NOT NULL, time_compacting integer, time_archived integer, {CLAIM}
  resume_attempts integer DEFAULT 0 NOT NULL, time_idle integer, time_viewed integer, idle_outcome text);
CREATE TABLE session_message (id text PRIMARY KEY, session_id text NOT NULL REFERENCES session_v2(id) ON DELETE CASCADE,
  type text NOT NULL, seq integer NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL,
  data text NOT NULL);
CREATE UNIQUE INDEX session_message_session_seq_idx ON session_message (session_id, seq);
CREATE INDEX session_message_session_type_seq_idx ON session_message (session_id, type, seq);
CREATE INDEX session_message_session_time_created_id_idx ON session_message (session_id, time_created, id);
CREATE INDEX session_message_time_created_idx ON session_message (time_created);
CREATE TABLE event_sequence (aggregate_id text PRIMARY KEY, seq integer NOT NULL, owner_id text);
CREATE TABLE event (id text PRIMARY KEY, aggregate_id text NOT NULL REFERENCES event_sequence(aggregate_id) ON DELETE CASCADE,
  seq integer NOT NULL, type text NOT NULL, data text NOT NULL, created integer DEFAULT 0);
CREATE TABLE kv (key text PRIMARY KEY, value text NOT NULL, time_created integer, time_updated integer NOT NULL);
";

/// A V2 database on disk in a temporary folder.
/// Dropping it audits the database and the journal (see `super::audit`) unless
/// [`V2Fixture::skip_audit`] was called.
pub struct V2Fixture {
    pub dir: TempDir,
    pub db: PathBuf,
    pub journal: PathBuf,
    audited: std::cell::Cell<bool>,
}

impl Drop for V2Fixture {
    fn drop(&mut self) {
        if self.audited.get() {
            super::audit::assert_audit_holds(&self.db, &self.journal);
        }
    }
}

impl V2Fixture {
    /// The opencode2 schema with `time_suspended`.
    pub fn new() -> Self {
        Self::build(true)
    }

    /// A build whose `session_v2` lacks `time_suspended` (the column renamed).
    pub fn without_claim_column() -> Self {
        Self::build(false)
    }

    /// For a test that tampers with the receipts, the rows or the journal on purpose: dropping
    /// the fixture does not audit it.
    pub fn skip_audit(&self) {
        self.audited.set(false);
    }

    fn build(claim: bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("opencode.db");
        let journal = dir.path().join("opencode.db.prune-journal");
        let conn = Connection::open(&db).unwrap();
        conn.execute_batch("PRAGMA journal_mode = WAL").unwrap();
        let claim_column = if claim {
            "time_suspended integer,"
        } else {
            "time_claimed integer,"
        };
        conn.execute_batch(&SCHEMA.replace("{CLAIM}", claim_column))
            .unwrap();
        conn.execute_batch(&format!(
            "INSERT INTO project VALUES ('prj', '/work', 1, 1, '[]');
             INSERT INTO session_v2 (id, project_id, slug, directory, title, version, time_created, time_updated)
               VALUES ('{V2_SESSION}', 'prj', 'calm-fox', '/work', 'v2', '2.0.0', 1, 1);
             INSERT INTO event_sequence VALUES ('{V2_SESSION}', 0, NULL);"
        ))
        .unwrap();
        let user = r#"{"time":{"created":1795941050574},"text":"Please list numbers"}"#;
        let mut assistant: Value = serde_json::from_str(&real_assistant_data()).unwrap();
        assistant["content"].as_array_mut().unwrap().push(
            serde_json::json!({"type": "text", "id": "text-0", "text": "Retain this conclusion."}),
        );
        conn.execute(
            "INSERT INTO session_message VALUES ('msg_v2_fixture_user_000000001', ?1, 'user', 1, 1, 1, ?2)",
            rusqlite::params![V2_SESSION, user],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO session_message VALUES (?1, ?2, 'assistant', 2, 2, 2, ?3)",
            rusqlite::params![V2_ASSISTANT, V2_SESSION, assistant.to_string()],
        )
        .unwrap();
        drop(conn);
        Self {
            dir,
            db,
            journal,
            audited: std::cell::Cell::new(true),
        }
    }

    /// A plain connection.
    pub fn sql(&self) -> Connection {
        Connection::open(&self.db).unwrap()
    }

    /// Runs set-up SQL.
    pub fn exec(&self, sql: &str) {
        self.sql().execute_batch(sql).unwrap();
    }

    /// SHA-256 of the database file and its WAL: equal digests mean nothing was written.
    pub fn file_digest(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        hasher.update(std::fs::read(&self.db).unwrap());
        if let Ok(wal) = std::fs::read(self.db.with_extension("db-wal")) {
            hasher.update(wal);
        }
        hex::encode(hasher.finalize())
    }

    /// The assistant row's `data`, parsed.
    pub fn assistant_data(&self) -> Value {
        let data: String = self
            .sql()
            .query_row(
                "SELECT data FROM session_message WHERE id = ?1",
                [V2_ASSISTANT],
                |r| r.get(0),
            )
            .unwrap();
        serde_json::from_str(&data).unwrap()
    }
}

/// The `data` of the first V2 assistant row OpenCode 1.18.34 wrote in the committed fixture.
fn real_assistant_data() -> String {
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/opencode-1.18.34/opencode.db");
    let copy = tempfile::NamedTempFile::new().unwrap();
    std::fs::copy(&source, copy.path()).unwrap();
    Connection::open(copy.path())
        .unwrap()
        .query_row(
            "SELECT data FROM session_message WHERE id = 'msg_2266dabb2001y39t0IapYwvrbI'",
            [],
            |r| r.get(0),
        )
        .unwrap()
}

impl V2Fixture {
    /// Inserts a V2 row into `session` with the given `type`, `seq` and `data`.
    pub fn insert_message(&self, session: &str, id: &str, kind: &str, seq: i64, data: &str) {
        self.sql()
            .execute(
                "INSERT INTO session_message VALUES (?1, ?2, ?3, ?4, ?4, ?4, ?5)",
                rusqlite::params![id, session, kind, seq, data],
            )
            .unwrap();
    }

    /// Adds a session (a fork, say) with its own event_sequence row.
    pub fn add_session(&self, id: &str) {
        self.exec(&format!(
            "INSERT INTO session_v2 (id, project_id, slug, directory, title, version, time_created, time_updated, fork_session_id)
               VALUES ('{id}', 'prj', 'fork', '/work', 'fork', '2.0.0', 3, 3, '{V2_SESSION}');
             INSERT INTO event_sequence VALUES ('{id}', 0, NULL);"
        ));
    }

    /// The `data` of one `session_message` row.
    pub fn row(&self, id: &str) -> String {
        self.rows()
            .into_iter()
            .find(|(row, _)| row == id)
            .unwrap()
            .1
    }

    /// Every `session_message` row as `(id, data)`, by id.
    pub fn rows(&self) -> Vec<(String, String)> {
        let conn = self.sql();
        let mut stmt = conn
            .prepare("SELECT id, data FROM session_message ORDER BY id")
            .unwrap();
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        rows.collect::<Result<_, _>>().unwrap()
    }
}
