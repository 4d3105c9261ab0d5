//! The OpenCode store: one connection to an OpenCode database, implementing the engine's
//! [`SessionStore`] for both storage generations. A message id is looked up in V2's
//! `session_message` first, then in V1's `message`; V1 prunes go through [`super::v1`], V2
//! prunes through [`super::v2`].

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use pruning_engine::history::{HistoryScan, ScanEnd, ScannedMessage};
use pruning_engine::{
    Applied, BlockedReason, DryRun, Durability, PreviewRequest, PruneCommand, PruneRequest,
    Receipt, Refusal, SessionStore, StoreError, StoredMessage,
};
use rusqlite::{Connection, OpenFlags};

use super::history;
use super::ownership::{self, SessionTable};
use super::receipts;
use super::schema::Schema;
use super::v1::{apply, read};
use super::v2;

/// Default quiet period: a session updated within the last 30 s is refused.
pub const DEFAULT_QUIET_PERIOD: Duration = Duration::from_secs(30);

/// Options of a [`OpenCodeStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreOptions {
    /// Sessions updated more recently than this are refused (`maintenance_required`).
    pub quiet_period: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            quiet_period: DEFAULT_QUIET_PERIOD,
        }
    }
}

/// A V1 OpenCode database opened for pruning.
///
/// One connection, guarded by a mutex, with `busy_timeout = 0`, `synchronous = FULL`,
/// `foreign_keys = ON`, `cache_size = -16000` and `wal_autocheckpoint = 10000`; the file's
/// `journal_mode` is never changed.
pub struct OpenCodeStore {
    conn: Mutex<Connection>,
    path: PathBuf,
    options: StoreOptions,
}

impl OpenCodeStore {
    /// Opens an existing database file (never creates one).
    ///
    /// Errors: [`StoreError::Open`] when the file is missing, unreadable or not SQLite.
    pub fn open(path: &Path, options: StoreOptions) -> Result<Self, StoreError> {
        let open_error = |detail: String| StoreError::Open {
            path: path.display().to_string(),
            detail,
        };
        if path.is_dir() {
            return Err(open_error(
                "it is a directory; pass the database file".into(),
            ));
        }
        if !path.is_file() {
            return Err(open_error(
                "no such file (is OpenCode's data elsewhere? pass --db PATH or --channel NAME)"
                    .into(),
            ));
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn =
            Connection::open_with_flags(path, flags).map_err(|e| open_error(e.to_string()))?;
        let store = Self::from_connection(conn, options).map_err(|e| match e {
            StoreError::Storage(detail) => open_error(detail),
            other => other,
        })?;
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        Ok(Self { path, ..store })
    }

    /// Wraps a connection the caller opened (for embedding, and for tests that attach a
    /// database to it). Applies the connection settings; checks that the file is SQLite.
    pub fn from_connection(conn: Connection, options: StoreOptions) -> Result<Self, StoreError> {
        conn.busy_timeout(Duration::ZERO).map_err(storage)?;
        conn.set_prepared_statement_cache_capacity(super::cached::STATEMENT_CACHE);
        // A 16 MB page cache keeps a clean of any database well under 64 MiB of memory (a 16 MiB
        // message read twice comes back from the OS cache). Checkpoints every 10,000 pages (40 MB
        // of WAL) rather than 1,000: a clean rewrites many pages, and fewer checkpoints write
        // each of them to the database fewer times. Both are this connection's own settings.
        conn.execute_batch(
            "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; PRAGMA cache_size = -16000; PRAGMA wal_autocheckpoint = 10000;",
        )
        .map_err(storage)?;
        super::sql_functions::register(&conn).map_err(storage)?;
        Schema::read(&conn).map_err(storage)?;
        let path = conn
            .path()
            .filter(|p| !p.is_empty())
            .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| PathBuf::from(p)))
            .unwrap_or_default();
        Ok(Self {
            conn: Mutex::new(conn),
            path,
            options,
        })
    }

    /// Keeps this connection from folding the WAL into the database file when it closes (as
    /// the last connection otherwise does): a command that only reads leaves the file, and the
    /// WAL, byte-for-byte as it found them. A command that writes keeps the default, so that
    /// the database file alone holds its prunes once it exits with no other connection open.
    ///
    /// Errors: [`StoreError::Storage`] when SQLite refuses the setting.
    pub fn leave_wal_on_close(&self) -> Result<(), StoreError> {
        self.connection()
            .set_db_config(
                rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
                true,
            )
            .map(|_| ())
            .map_err(storage)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Locks the connection (a poisoned lock is taken over: the connection holds no Rust state).
    pub fn connection(&self) -> MutexGuard<'_, Connection> {
        self.conn
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn quiet_period_ms(&self) -> i64 {
        i64::try_from(self.options.quiet_period.as_millis()).unwrap_or(i64::MAX)
    }
}

/// Reads a message from whichever generation holds it: V1 when the `message` table has it, else
/// V2 when `session_message` has it.
fn read_any(
    conn: &Connection,
    schema: &Schema,
    request: &PreviewRequest,
) -> rusqlite::Result<Result<StoredMessage, Refusal>> {
    let (session_id, message_id) = (request.session_id.as_str(), request.message_id.as_str());
    if v2::holds_message(conn, schema, session_id, message_id)? {
        let table = if schema.has("session_v2") {
            SessionTable::V2
        } else {
            SessionTable::Shared
        };
        if let Some(refusal) = ownership::check(conn, table, session_id, &request.scope)? {
            return Ok(Err(refusal));
        }
        return v2::read_message(conn, session_id, message_id);
    }
    if !schema.has_v1() {
        return Ok(Err(Refusal::new(
            BlockedReason::NotDeletable,
            format!("there is no message {message_id} in this database"),
        )));
    }
    if let Some(refusal) = ownership::check(conn, SessionTable::Shared, session_id, &request.scope)?
    {
        return Ok(Err(refusal));
    }
    Ok(read::read_message(conn, session_id, message_id, read::Texts::Skip)?.map(|m| m.message))
}

/// Whether the database is in WAL mode (OpenCode's own setting).
fn is_wal(conn: &Connection) -> bool {
    super::cached::query_row(conn, "PRAGMA journal_mode", [], |row| {
        row.get::<_, String>(0)
    })
    .is_ok_and(|mode| mode.eq_ignore_ascii_case("wal"))
}

fn storage(error: rusqlite::Error) -> StoreError {
    StoreError::Storage(error.to_string())
}

impl SessionStore for OpenCodeStore {
    fn location(&self) -> Option<String> {
        let path = self.path.to_str()?;
        (!path.is_empty()).then(|| path.to_string())
    }

    fn database_id(&self) -> Result<Option<String>, StoreError> {
        receipts::database_id(&self.connection()).map_err(storage)
    }

    fn read_message(
        &self,
        request: &PreviewRequest,
    ) -> Result<Result<StoredMessage, Refusal>, StoreError> {
        let conn = self.connection();
        let schema = Schema::read(&conn).map_err(storage)?;
        if !schema.is_supported() {
            return Ok(Err(Refusal::new(
                BlockedReason::UnsupportedStorage,
                "the database has neither V1 (message, part) nor V2 (session_message) tables",
            )));
        }
        // One read transaction, so the message and its parts are one snapshot.
        conn.execute_batch("BEGIN").map_err(storage)?;
        let read = read_any(&conn, &schema, request);
        let _ = conn.execute_batch("COMMIT");
        match read {
            Ok(result) => Ok(result),
            Err(error) => Ok(Err(apply::sql_refusal(&error))),
        }
    }

    /// V1 messages can be pruned here; V2 messages only where `session_v2.time_suspended`
    /// exists (see [`v2::writable`]).
    fn live_mutation(&self, session_id: &str, message_id: &str) -> bool {
        let conn = self.connection();
        let v2 = Schema::read(&conn)
            .and_then(|schema| v2::holds_message(&conn, &schema, session_id, message_id));
        // Unknown (an error): not writable, failing closed.
        match v2 {
            Ok(false) => true,
            Ok(true) => v2::writable(&conn).unwrap_or(false),
            Err(_) => false,
        }
    }

    /// With [`Durability::Deferred`] on a WAL database the commit runs with
    /// `synchronous = NORMAL` (the WAL is written, not synced; [`Self::make_durable`] syncs
    /// it); otherwise with `synchronous = FULL`.
    fn apply(&self, command: &PruneCommand<'_>) -> Result<Applied, StoreError> {
        let conn = self.connection();
        let relaxed = command.durability == Durability::Deferred && is_wal(&conn);
        let level = if relaxed { "NORMAL" } else { "FULL" };
        conn.execute_batch(&format!("PRAGMA synchronous = {level}"))
            .map_err(storage)?;
        apply::apply(&conn, command, self.quiet_period_ms())
    }

    /// Syncs the WAL file (`<database>-wal`) to disk: every frame a deferred commit wrote is
    /// either still in it or was moved into the database by a checkpoint, which syncs the
    /// database before the WAL is reused. A missing WAL file was checkpointed away.
    fn make_durable(&self) -> Result<(), StoreError> {
        if !is_wal(&self.connection()) {
            return Ok(());
        }
        let mut wal = self.path.clone().into_os_string();
        wal.push("-wal");
        match std::fs::File::open(&wal).and_then(|file| file.sync_data()) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(StoreError::OutcomeUnknown(format!(
                "syncing {}: {error}",
                std::path::Path::new(&wal).display()
            ))),
        }
    }

    fn dry_run(
        &self,
        request: &PruneRequest,
        now_ms: i64,
    ) -> Result<Result<DryRun, Refusal>, StoreError> {
        let conn = self.connection();
        let key = hex::encode(pruning_engine::request_key(request));
        // The write lock a prune takes, so that a busy database is reported as a prune would
        // report it; rolled back, nothing is written.
        if let Err(error) = conn.execute_batch("BEGIN IMMEDIATE") {
            return apply::classify(&error).map(Err);
        }
        let prepared = apply::prepare(
            &conn,
            request,
            &key,
            now_ms,
            self.quiet_period_ms(),
            read::Texts::Skip,
        );
        let _ = conn.execute_batch("ROLLBACK");
        Ok(match prepared {
            Ok(apply::Prepared::Refuse(refusal)) => Err(refusal),
            Ok(apply::Prepared::Replayed(receipt)) => Ok(DryRun::AlreadyPruned(Box::new(receipt))),
            Ok(apply::Prepared::Plan { plan, .. }) => Ok(DryRun::Plan(plan)),
            Ok(apply::Prepared::PlanV2(planned)) => Ok(DryRun::Plan(planned.plan)),
            Err(error) => Err(apply::sql_refusal(&error)),
        })
    }

    fn receipt_by_key(&self, request_key: &[u8; 32]) -> Result<Option<Receipt>, StoreError> {
        receipts::by_key(&self.connection(), &hex::encode(request_key)).map_err(storage)
    }

    fn receipts(&self, session_id: Option<&str>) -> Result<Vec<Receipt>, StoreError> {
        receipts::list(&self.connection(), session_id).map_err(storage)
    }

    fn scan_history(
        &self,
        scan: &HistoryScan<'_>,
        visit: &mut dyn FnMut(ScannedMessage) -> ControlFlow<()>,
    ) -> Result<Result<ScanEnd, Refusal>, StoreError> {
        match history::scan(&self.connection(), scan, visit) {
            Ok(result) => Ok(result),
            Err(error) => Ok(Err(apply::sql_refusal(&error))),
        }
    }
}
