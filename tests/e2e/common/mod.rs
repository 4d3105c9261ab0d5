//! Shared set-up of the end-to-end tests: a private copy of the real OpenCode 1.18.34 fixture on
//! disk, an engine over it, and ways to look at the file and the journal from outside.
#![allow(dead_code)]

pub mod archive;
pub mod audit;
pub mod browse;
pub mod plugin;

use std::path::{Path, PathBuf};

use pruning_engine::{
    Engine, Journal, PreviewRequest, PreviewResult, PruneRequest, PruneResult, Receipt,
};
use pruning_opencode::{OpenCodeStore, StoreOptions};
use rusqlite::Connection;
use sha2::{Digest, Sha256};
use tempfile::TempDir;

/// The "fixture: many turns" session.
pub const MANY_TURNS: &str = "ses_dd992af4dffe56B7kwrH3SftqX";
/// Its turn-5 assistant message: step-start, reasoning (REASONING_CANARY_T05), bash tool
/// (TOOL_CANARY_T05), step-finish.
pub const TURN5: &str = "msg_2266d6d8d001S1dgSZNRxFlv9X";
/// Its turn-1 assistant message: step-start, reasoning, tool, step-finish.
pub const TURN1: &str = "msg_2266d56ca00189ShWYkElL07uN";
/// The "fixture: killed mid-tool" session: last assistant incomplete with a running bash tool.
pub const KILLED_MID_TOOL: &str = "ses_dd9924472ffeRJmUg5iAfebgd3";
/// Its incomplete assistant message.
pub const KILLED_MID_TOOL_MSG: &str = "msg_2266dbbbe001wpA7iYROobDQYq";
/// The "fixture: killed mid-stream" session: last assistant incomplete, empty text part.
pub const KILLED_MID_STREAM: &str = "ses_dd992446cffe9e9tU47UDk00bQ";
/// Its incomplete assistant message.
pub const KILLED_MID_STREAM_MSG: &str = "msg_2266dbbe90019dgXYRF0Odk2af";
/// The V2 session of the fixture, in OpenCode 1.18's shared `session` table (read-only for
/// prunes).
pub const V2_SHARED_SESSION: &str = "ses_dd9925f43ffe2Is1MklYsLGbbU";

/// The snapshot events (`id`, `aggregate_id`) superseded by a newer snapshot of the same entity
/// and type in their aggregate, as SQL: what a compaction of their session deletes.
pub const SUPERSEDED_SQL: &str = "SELECT id, aggregate_id FROM (
       SELECT id, aggregate_id, seq,
              max(seq) OVER (PARTITION BY aggregate_id, type, entity) AS top
       FROM (SELECT id, aggregate_id, type, seq,
                    json_extract(data, CASE type WHEN 'message.part.updated.1' THEN '$.part.id'
                                       ELSE '$.info.id' END) AS entity
             FROM event WHERE type IN ('message.part.updated.1', 'message.updated.1',
                                       'session.updated.1') AND json_valid(data)))
     WHERE seq < top";

/// The ids of the superseded snapshots of `session` ([`SUPERSEDED_SQL`]).
pub fn superseded_of(fx: &Fixture, session: &str) -> std::collections::BTreeSet<String> {
    let conn = fx.sql();
    let mut stmt = conn
        .prepare(&format!(
            "SELECT id FROM ({SUPERSEDED_SQL}) WHERE aggregate_id = ?1"
        ))
        .expect("select");
    let rows = stmt.query_map([session], |row| row.get(0)).expect("query");
    rows.map(Result::unwrap).collect()
}

/// A private copy of the fixture database in a temporary folder. Dropping it audits the
/// database and the journal (see `audit`) unless [`Fixture::skip_audit`] was called.
pub struct Fixture {
    pub dir: TempDir,
    pub db: PathBuf,
    pub journal: PathBuf,
    audited: std::cell::Cell<bool>,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if self.audited.get() {
            audit::assert_audit_holds(&self.db, &self.journal);
        }
    }
}

impl Fixture {
    /// A fixture of the database `db` in `dir`, with its journal at `journal`.
    pub fn at(dir: TempDir, db: PathBuf, journal: PathBuf) -> Self {
        Self {
            dir,
            db,
            journal,
            audited: std::cell::Cell::new(true),
        }
    }

    /// For a test that tampers with the receipts, the rows or the journal on purpose: dropping
    /// the fixture does not audit it.
    pub fn skip_audit(&self) {
        self.audited.set(false);
    }

    /// Creates the engine's receipt and meta tables before the first prune, with a receipt
    /// table that accepts only rows whose `removed_count` satisfies `removed_count_check`
    /// (e.g. `removed_count < 2`): a receipt insert that fails after a prune's deletes ran.
    pub fn receipt_table_accepting(&self, removed_count_check: &str) {
        self.exec(&format!(
            "CREATE TABLE session_prune_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE session_prune_receipt (id TEXT PRIMARY KEY, request_key TEXT NOT NULL UNIQUE,
               intent_id TEXT NOT NULL, session_id TEXT NOT NULL, message_id TEXT NOT NULL,
               storage TEXT NOT NULL, revision_before TEXT NOT NULL, revision_after TEXT NOT NULL,
               indexes TEXT NOT NULL, part_ids TEXT NOT NULL,
               removed_count INTEGER NOT NULL CHECK ({removed_count_check}),
               bytes_removed INTEGER NOT NULL, time_committed INTEGER NOT NULL, engine_version TEXT NOT NULL);"
        ));
    }

    /// Copies `tests/fixtures/opencode-1.18.34/opencode.db` into a new temporary folder.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("opencode.db");
        let source = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/opencode-1.18.34/opencode.db");
        std::fs::copy(&source, &db).expect("copy fixture");
        let journal = dir.path().join("opencode.db.prune-journal");
        Self::at(dir, db, journal)
    }

    /// Copies `tests/fixtures/opencode-1.18.34-work/opencode.db` (written by OpenCode 1.18.34
    /// doing coding work: streaming bash output, edits with summary diffs) into a new temporary
    /// folder.
    pub fn work() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("opencode.db");
        let source = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/opencode-1.18.34-work/opencode.db");
        std::fs::copy(&source, &db).expect("copy fixture");
        let journal = dir.path().join("opencode.db.prune-journal");
        Self::at(dir, db, journal)
    }

    /// [`Fixture::new`] with the fixture's spill files in `tool-output/` beside the database.
    pub fn with_spill_files() -> Self {
        let fx = Self::new();
        let source = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/opencode-1.18.34/tool-output");
        let target = fx.dir.path().join("tool-output");
        std::fs::create_dir(&target).expect("tool-output folder");
        for entry in std::fs::read_dir(source).expect("fixture spill files") {
            let entry = entry.expect("entry");
            std::fs::copy(entry.path(), target.join(entry.file_name())).expect("copy spill file");
        }
        fx
    }

    /// A plain connection for set-up and inspection (closed when dropped, which checkpoints).
    pub fn sql(&self) -> Connection {
        Connection::open(&self.db).expect("open fixture")
    }

    /// Runs SQL on the database and closes the connection.
    pub fn exec(&self, sql: &str) {
        self.sql().execute_batch(sql).expect("set-up SQL");
    }

    /// A store with the given quiet period in ms (and the default abandoned-run threshold).
    pub fn store(&self, quiet_ms: u64) -> OpenCodeStore {
        let options = StoreOptions {
            quiet_period: std::time::Duration::from_millis(quiet_ms),
            ..StoreOptions::default()
        };
        OpenCodeStore::open(&self.db, options).expect("open store")
    }

    /// An engine with the default 30 s quiet period.
    pub fn engine(&self) -> Engine<OpenCodeStore> {
        self.engine_with(self.store(30_000))
    }

    /// An engine over a given store.
    pub fn engine_with(&self, store: OpenCodeStore) -> Engine<OpenCodeStore> {
        Engine::open(store, Journal::open(&self.journal).expect("open journal")).expect("engine")
    }

    /// SHA-256 of the database file and whatever WAL sits beside it.
    pub fn file_digest(&self) -> String {
        let mut hasher = Sha256::new();
        hasher.update(std::fs::read(&self.db).expect("read db"));
        let wal = self.db.with_extension("db-wal");
        if let Ok(bytes) = std::fs::read(wal) {
            hasher.update(bytes);
        }
        hex::encode(hasher.finalize())
    }

    /// SHA-256 of the journal file ("" when there is none).
    pub fn journal_digest(&self) -> String {
        match std::fs::read(&self.journal) {
            Ok(bytes) => hex::encode(Sha256::digest(bytes)),
            Err(_) => String::new(),
        }
    }

    /// Number of rows of `table` whose `data` contains `needle`.
    pub fn rows_containing(&self, table: &str, needle: &str) -> i64 {
        let sql = format!("SELECT count(*) FROM {table} WHERE instr(CAST(data AS TEXT), ?1) > 0");
        self.sql()
            .query_row(&sql, [needle], |r| r.get(0))
            .expect("count")
    }

    /// A single-value query.
    pub fn scalar(&self, sql: &str) -> i64 {
        self.sql().query_row(sql, [], |r| r.get(0)).expect("scalar")
    }

    /// Whether a table exists.
    pub fn has_table(&self, name: &str) -> bool {
        self.scalar(&format!(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = '{name}'"
        )) == 1
    }
}

/// The oldest user message whose diffs hold a file body: `(session, message)`.
pub fn user_message_with_diffs(fx: &Fixture) -> (String, String) {
    fx.sql()
        .query_row(
            "SELECT session_id, id FROM message \
             WHERE json_extract(data, '$.role') = 'user' AND EXISTS ( \
               SELECT 1 FROM json_each(data, '$.summary.diffs') d \
               WHERE json_extract(d.value, '$.patch') <> '') \
             ORDER BY time_created, id LIMIT 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .expect("a user message with diffs")
}

/// A connection to `db` with another database (a new file in `dir`) attached to it, as the
/// fence must refuse.
pub fn connection_with_attached_database(db: &Path, dir: &Path) -> Connection {
    let other = dir.join("other.db");
    Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t (x)")
        .unwrap();
    let conn = Connection::open(db).unwrap();
    conn.execute("ATTACH DATABASE ?1 AS other", [other.to_str().unwrap()])
        .unwrap();
    conn
}

/// Previews and returns the revision and the indexes of the technical parts.
pub fn preview(engine: &Engine<OpenCodeStore>, session: &str, message: &str) -> (String, Vec<i64>) {
    let request = PreviewRequest::new(session.into(), message.into()).unwrap();
    match engine.preview(&request).unwrap() {
        PreviewResult::Preview {
            revision, parts, ..
        } => (revision, parts.iter().map(|p| i64::from(p.index)).collect()),
        other => panic!("preview blocked: {other:?}"),
    }
}

/// A prune request by indexes.
pub fn request(session: &str, message: &str, revision: &str, indexes: &[i64]) -> PruneRequest {
    PruneRequest::with_indexes(session.into(), message.into(), revision.into(), indexes).unwrap()
}

/// The pruned result's fields, or a panic.
pub fn pruned(result: &PruneResult) -> (String, String, u32) {
    match result {
        PruneResult::Pruned {
            message_id,
            revision,
            removed_count,
        } => (message_id.clone(), revision.clone(), *removed_count),
        other => panic!("expected pruned, got {other:?}"),
    }
}

/// Every receipt in the database.
pub fn receipts(fixture: &Fixture) -> Vec<Receipt> {
    use pruning_engine::SessionStore;
    fixture.store(0).receipts(None).unwrap()
}

/// Now in ms since the Unix epoch.
pub fn now_ms() -> i64 {
    pruning_engine::now_ms()
}

/// A pending intent for `req`, as the engine journals it before applying.
pub fn pending_intent(req: &PruneRequest) -> pruning_engine::Intent {
    pruning_engine::Intent {
        intent_id: uuid::Uuid::now_v7(),
        request_key: pruning_engine::request_key(req),
        session_id: req.session_id.clone(),
        message_id: req.message_id.clone(),
        revision: req.revision.clone(),
        selection: (&req.selection).into(),
        created_at_ms: now_ms(),
        state: pruning_engine::IntentState::Pending,
    }
}

/// Plays a prune of turn 5 that stopped right after journaling its intent: returns the pending
/// intent, its request and the database identity the engine bound the journal to.
pub fn journal_turn5_intent(fx: &Fixture) -> (pruning_engine::Intent, PruneRequest, String) {
    let engine = fx.engine();
    let (revision, indexes) = preview(&engine, MANY_TURNS, TURN5);
    let database_id = engine.database_id().to_string();
    drop(engine);
    let req = request(MANY_TURNS, TURN5, &revision, &indexes);
    let intent = pending_intent(&req);
    Journal::open(&fx.journal)
        .unwrap()
        .record_intent(&intent)
        .unwrap();
    (intent, req, database_id)
}

/// Plays a prune of turn 5 that stopped between its two steps: the intent is journaled and the
/// prune committed in the database with its receipt, but the journal never marked it committed.
/// Returns the intent and the receipt.
pub fn prune_stopped_before_journal_commit(fx: &Fixture) -> (pruning_engine::Intent, Receipt) {
    use pruning_engine::{Applied, PruneCommand, SessionStore};
    let (intent, req, database_id) = journal_turn5_intent(fx);
    let applied = fx
        .store(30_000)
        .apply(&PruneCommand {
            request: &req,
            intent_id: intent.intent_id,
            request_key: intent.request_key,
            receipt_id: uuid::Uuid::now_v7(),
            database_id: &database_id,
            now_ms: now_ms(),
            durability: pruning_engine::Durability::Immediate,
        })
        .unwrap();
    match applied {
        Applied::Pruned {
            receipt,
            replayed: false,
        } => (intent, *receipt),
        other => panic!("{other:?}"),
    }
}

/// Prunes turn 5 (both technical parts) through `fx`'s engine, closes it, and returns the request
/// and its outcome.
pub fn prune_turn5_once(fx: &Fixture) -> (PruneRequest, pruning_engine::PruneOutcome) {
    let engine = fx.engine();
    let (revision, indexes) = preview(&engine, MANY_TURNS, TURN5);
    let req = request(MANY_TURNS, TURN5, &revision, &indexes);
    let outcome = engine.prune(&req).unwrap();
    (req, outcome)
}

pub mod app;
pub mod browser;
pub mod cli;
pub mod counting;
pub mod faults;
#[path = "../../../benches/common/mod.rs"]
pub mod generate;
pub mod home;
pub mod http;
pub mod npm;
pub mod openapi;
pub mod peak_memory;
pub mod power_loss;
pub mod small_disk;
pub mod strace;
pub mod v2;

/// Checks that the journal at `path` holds exactly one intent, refused with `reason`.
pub fn assert_one_refused_intent(path: &Path, reason: pruning_engine::BlockedReason) {
    let intents = Journal::open(path).unwrap().intents().unwrap();
    assert_eq!(intents.len(), 1);
    assert_eq!(
        intents[0].state,
        pruning_engine::IntentState::Refused {
            reason: reason.as_str().into()
        }
    );
}

/// History pages of 32 rows with no time budget to end them early, so that a test sees the
/// same pages on a slow machine.
pub const ROWS_ONLY: pruning_engine::history::PageLimits = pruning_engine::history::PageLimits {
    rows: 32,
    time_budget: std::time::Duration::from_secs(3600),
};

/// `{sessionID: session, purpose: "prune"}`: the history request that lists a session's
/// candidates for a batch prune.
pub fn prune_listing(session: &str) -> pruning_engine::HistoryRequest {
    pruning_engine::HistoryRequest::new(
        Some(session.into()),
        String::new(),
        true,
        pruning_engine::Purpose::Prune,
        None,
    )
    .expect("a valid history request")
}

/// `(seq, message id)` of every event the engine's journal holds (the first 100), in order.
pub fn journaled_events(engine: &Engine<OpenCodeStore>) -> Vec<(u64, String)> {
    engine
        .events_after(0, 100)
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e.data.message_id))
        .collect()
}
