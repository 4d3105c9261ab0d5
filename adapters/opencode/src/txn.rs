//! The store's SQLite transactions as guards, and every `BEGIN`, `COMMIT`, `ROLLBACK` and
//! savepoint statement of the crate: [`WriteTxn`] (`BEGIN IMMEDIATE`: the write lock),
//! [`ReadTxn`] (`BEGIN`: one snapshot), and [`Writer`], the connection and the lock-time record
//! the write path begins its transactions with.
//!
//! A guard ends its transaction when it is consumed (`commit`, `rollback`, `end`), or else when
//! it is dropped: rolled back, as when a panic unwinds through it. The connection is then never
//! left inside a transaction after a panic, which would make every later write of the store
//! refused (`super::write::begin`) until the process restarts. A write transaction's hold of the
//! lock is recorded in the store's [`LockTimes`] however it ends.
//!
//! Source: docs/ARCHITECTURE.md, "The write path of one prune", step 3, and "Group
//! transactions".

use std::time::Duration;

use rusqlite::Connection;

use super::cached;
use super::lock_times::{Held, LockTimes};

/// The savepoint each prune of a group transaction runs under (`super::group`), opened,
/// released, and rolled back to.
const SAVEPOINT: &str = "SAVEPOINT prune";
const RELEASE: &str = "RELEASE prune";
const ROLLBACK_TO: &str = "ROLLBACK TO prune";

/// The store's connection as the write path holds it: the connection, where the holds of the
/// write lock are recorded, and (in the crate's tests only) the seam a prune calls inside its
/// transaction. Copied freely; [`Writer::begin`] takes the lock.
#[derive(Clone, Copy)]
pub(crate) struct Writer<'c> {
    conn: &'c Connection,
    held: &'c LockTimes,
    /// Test seam: called by a prune inside its transaction after its row writes
    /// ([`WriteTxn::inside_prune`]). Exists only in the crate's own tests.
    #[cfg(test)]
    inside_prune: Option<fn()>,
}

impl<'c> Writer<'c> {
    /// The writer of `conn` (the store's connection), recording its holds in `held`.
    pub(crate) fn new(conn: &'c Connection, held: &'c LockTimes) -> Self {
        Self {
            conn,
            held,
            #[cfg(test)]
            inside_prune: None,
        }
    }

    /// The same writer, with `hook` called inside each prune's transaction after its row writes
    /// (test seam, see [`WriteTxn::inside_prune`]).
    #[cfg(test)]
    pub(crate) fn with_inside_prune(self, hook: Option<fn()>) -> Self {
        Self {
            inside_prune: hook,
            ..self
        }
    }

    /// The connection.
    pub(crate) fn conn(&self) -> &'c Connection {
        self.conn
    }

    /// Waits for the rest the lock's pace asks for ([`LockTimes::rest_if_due`]), then takes the
    /// write lock: `BEGIN IMMEDIATE`.
    ///
    /// Errors: SQLite's (a busy or locked database, a connection already inside a transaction).
    pub(crate) fn begin(self) -> rusqlite::Result<WriteTxn<'c>> {
        #[cfg_attr(not(test), allow(unused_mut))]
        let mut txn = WriteTxn::begin(self.conn, self.held)?;
        #[cfg(test)]
        {
            txn.inside_prune = self.inside_prune;
        }
        Ok(txn)
    }
}

/// A write transaction (`BEGIN IMMEDIATE`), open from [`WriteTxn::begin`] until
/// [`WriteTxn::commit`] or [`WriteTxn::rollback`] consume it, or until it is dropped, which rolls
/// it back (the rollback's failure ignored). Its hold of the write lock, from the `BEGIN` to the
/// end of its `COMMIT` or `ROLLBACK`, is recorded in the [`LockTimes`] it began with
/// ([`LockTimes::record`]), however it ended.
#[must_use = "a write transaction is rolled back when dropped"]
pub(crate) struct WriteTxn<'c> {
    conn: &'c Connection,
    /// Where the hold is recorded; `None` for a transaction the store does not count
    /// ([`WriteTxn::begin_uncounted`]).
    held: Option<&'c LockTimes>,
    /// When the lock was taken.
    lock: Held,
    /// Whether `commit` or `rollback` ended it (then dropping it does nothing).
    ended: bool,
    /// See [`Writer::inside_prune`].
    #[cfg(test)]
    inside_prune: Option<fn()>,
}

/// A `COMMIT` that failed: SQLite's error, and whether the transaction was still open after it
/// (BUSY leaves it open; it was then rolled back here).
#[derive(Debug)]
pub(crate) struct CommitError {
    /// SQLite's error.
    pub(crate) error: rusqlite::Error,
    /// Whether SQLite left the transaction open (it was rolled back here).
    pub(crate) was_open: bool,
}

impl<'c> WriteTxn<'c> {
    /// Waits for the rest the lock's pace asks for ([`LockTimes::rest_if_due`]), then takes the
    /// write lock (`BEGIN IMMEDIATE`); its hold will be recorded in `held`.
    ///
    /// Errors: SQLite's (a busy or locked database, a connection already inside a transaction).
    pub(crate) fn begin(conn: &'c Connection, held: &'c LockTimes) -> rusqlite::Result<Self> {
        held.rest_if_due();
        Self::take_lock(conn, Some(held))
    }

    /// Takes the write lock (`BEGIN IMMEDIATE`) without pacing or recording it: a transaction
    /// outside the prunes' (the journal epoch's move, `super::receipts::set_journal_epoch`).
    ///
    /// Errors: SQLite's.
    pub(crate) fn begin_uncounted(conn: &'c Connection) -> rusqlite::Result<Self> {
        Self::take_lock(conn, None)
    }

    fn take_lock(conn: &'c Connection, held: Option<&'c LockTimes>) -> rusqlite::Result<Self> {
        cached::execute(conn, "BEGIN IMMEDIATE", [])?;
        Ok(Self {
            conn,
            held,
            lock: Held::began(),
            ended: false,
            #[cfg(test)]
            inside_prune: None,
        })
    }

    /// The connection the transaction is open on.
    pub(crate) fn conn(&self) -> &'c Connection {
        self.conn
    }

    /// Whether the transaction is still open (SQLite rolls a transaction back by itself on
    /// some failures: a full disk, an I/O error).
    pub(crate) fn is_open(&self) -> bool {
        !self.conn.is_autocommit()
    }

    /// Commits, and answers how long the write lock was held (as recorded; zero for a
    /// transaction begun with [`Self::begin_uncounted`]). On failure the transaction is rolled
    /// back where SQLite left it open.
    ///
    /// Errors: [`CommitError`], SQLite's error and whether the transaction was still open.
    pub(crate) fn commit(mut self) -> Result<Duration, CommitError> {
        let committed = cached::execute(self.conn, "COMMIT", []);
        let result = match committed {
            Ok(_) => Ok(()),
            Err(error) => {
                let was_open = self.is_open();
                if was_open {
                    let _ = self.conn.execute_batch("ROLLBACK");
                }
                Err(CommitError { error, was_open })
            }
        };
        let hold = self.ended();
        result.map(|()| hold)
    }

    /// Rolls back what is still open (the rollback's failure ignored).
    pub(crate) fn rollback(mut self) {
        self.roll_back_open();
        let _ = self.ended();
    }

    /// Opens the savepoint a prune of a group transaction runs under (`SAVEPOINT prune`).
    ///
    /// Errors: SQLite's.
    pub(crate) fn savepoint(&self) -> rusqlite::Result<()> {
        cached::execute(self.conn, SAVEPOINT, []).map(|_| ())
    }

    /// Releases the savepoint into the transaction (`RELEASE prune`).
    ///
    /// Errors: SQLite's.
    pub(crate) fn release_savepoint(&self) -> rusqlite::Result<()> {
        cached::execute(self.conn, RELEASE, []).map(|_| ())
    }

    /// Undoes what was written since the savepoint and releases it (`ROLLBACK TO prune`, then
    /// `RELEASE prune`).
    ///
    /// Errors: SQLite's.
    pub(crate) fn undo_savepoint(&self) -> rusqlite::Result<()> {
        cached::execute(self.conn, ROLLBACK_TO, []).and_then(|_| self.release_savepoint())
    }

    /// Test seam: what a prune calls inside its transaction after its row writes, before its
    /// receipt. In the crate's tests it runs the hook the [`Writer`] was given (one that panics,
    /// to show that the transaction is rolled back); elsewhere it does nothing and compiles to
    /// nothing.
    #[inline(always)]
    pub(crate) fn inside_prune(&self) {
        #[cfg(test)]
        if let Some(hook) = self.inside_prune {
            hook();
        }
    }

    fn roll_back_open(&self) {
        if self.is_open() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }

    /// The transaction ended: its hold is recorded (and answered; zero when not counted), and
    /// dropping it does nothing more.
    fn ended(&mut self) -> Duration {
        self.ended = true;
        self.held
            .map_or(Duration::ZERO, |held| held.record(self.lock))
    }
}

impl Drop for WriteTxn<'_> {
    /// Neither committed nor rolled back (an early return, a panic unwinding): rolled back, and
    /// the hold recorded.
    fn drop(&mut self) {
        if !self.ended {
            self.roll_back_open();
            let _ = self.ended();
        }
    }
}

/// A read transaction (`BEGIN`, deferred: one snapshot from its first read), open until
/// [`ReadTxn::end`] or [`ReadTxn::rollback`] consume it, or until it is dropped, which rolls it
/// back (the rollback's failure ignored).
#[must_use = "a read transaction is rolled back when dropped"]
pub(crate) struct ReadTxn<'c> {
    conn: &'c Connection,
    ended: bool,
}

impl<'c> ReadTxn<'c> {
    /// Begins a read transaction on `conn` (`BEGIN`).
    ///
    /// Errors: SQLite's (a connection already inside a transaction).
    pub(crate) fn begin(conn: &'c Connection) -> rusqlite::Result<Self> {
        conn.execute_batch("BEGIN")?;
        Ok(Self { conn, ended: false })
    }

    /// Ends it with `COMMIT` (it wrote nothing; a failure is ignored).
    pub(crate) fn end(mut self) {
        let _ = self.conn.execute_batch("COMMIT");
        self.ended = true;
    }

    /// Ends it with `ROLLBACK` (a failure is ignored: an interrupted rollback leaves the
    /// transaction open, which [`idle_after_rollback`] tells).
    pub(crate) fn rollback(mut self) {
        let _ = self.conn.execute_batch("ROLLBACK");
        self.ended = true;
    }
}

impl Drop for ReadTxn<'_> {
    /// Neither ended nor rolled back (an early return, a panic unwinding): rolled back.
    fn drop(&mut self) {
        if !self.ended && !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

/// Rolls back whatever transaction is open on `conn` (a read cut short, an interrupted
/// rollback) and answers whether the connection is outside any transaction after it: what the
/// browsing lease asks before it lends its connection again (`super::browse`).
pub(crate) fn idle_after_rollback(conn: &Connection) -> bool {
    conn.is_autocommit() || (conn.execute_batch("ROLLBACK").is_ok() && conn.is_autocommit())
}

/// What the crate's tests do to a transaction behind its guard's back, as SQLite or another
/// caller could.
#[cfg(test)]
pub(crate) mod behind {
    use rusqlite::Connection;

    /// Rolls back the open transaction, as SQLite does by itself on a full disk or an I/O
    /// error.
    pub(crate) fn roll_back(conn: &Connection) -> rusqlite::Result<()> {
        conn.execute_batch("ROLLBACK")
    }

    /// Releases the group's savepoint under it: its own `RELEASE` then fails.
    pub(crate) fn release_savepoint(conn: &Connection) -> rusqlite::Result<()> {
        conn.execute_batch(super::RELEASE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn database() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let conn = Connection::open(dir.path().join("txn.db")).unwrap();
        conn.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE row (n INTEGER PRIMARY KEY);")
            .unwrap();
        (dir, conn)
    }

    fn rows(conn: &Connection) -> i64 {
        conn.query_row("SELECT count(*) FROM row", [], |row| row.get(0))
            .unwrap()
    }

    #[test]
    fn a_write_transaction_dropped_by_a_panic_is_rolled_back_and_its_hold_recorded() {
        let (_dir, conn) = database();
        let held = LockTimes::default();
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let txn = WriteTxn::begin(&conn, &held).unwrap();
            txn.conn()
                .execute("INSERT INTO row VALUES (1)", [])
                .unwrap();
            panic!("inside the transaction");
        }));
        assert!(unwound.is_err());
        assert!(conn.is_autocommit(), "rolled back");
        assert_eq!(rows(&conn), 0);
        assert_eq!(held.summary().transactions, 1);
        let txn = WriteTxn::begin(&conn, &held).unwrap();
        txn.conn()
            .execute("INSERT INTO row VALUES (2)", [])
            .unwrap();
        txn.commit().unwrap();
        assert_eq!(rows(&conn), 1);
        assert_eq!(held.summary().transactions, 2);
    }

    /// The OpenCode 1.18.34 fixture the end-to-end tests use (`tests/fixtures/`), copied to a
    /// folder of its own, and its "many turns" session with two of its assistant messages, each
    /// with a reasoning and a tool part.
    mod fixture {
        use std::path::PathBuf;

        pub(super) const MANY_TURNS: &str = "ses_dd992af4dffe56B7kwrH3SftqX";
        pub(super) const TURN5: &str = "msg_2266d6d8d001S1dgSZNRxFlv9X";
        pub(super) const TURN1: &str = "msg_2266d56ca00189ShWYkElL07uN";

        pub(super) fn copy() -> (tempfile::TempDir, PathBuf) {
            let dir = tempfile::tempdir().unwrap();
            let db = dir.path().join("opencode.db");
            let source = concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../tests/fixtures/opencode-1.18.34/opencode.db"
            );
            std::fs::copy(source, &db).unwrap();
            (dir, db)
        }
    }

    mod prune {
        use std::panic::{catch_unwind, AssertUnwindSafe};

        use pruning_engine::{
            Applied, Durability, PreviewRequest, PruneCommand, PruneRequest, SessionStore,
        };
        use rusqlite::Connection;
        use uuid::Uuid;

        use super::fixture::{self, MANY_TURNS, TURN1, TURN5};
        use crate::{OpenCodeStore, StoreOptions};

        const DATABASE_ID: &str = "0190b5d2-0000-7000-8000-000000000000";

        fn panics() {
            panic!("a panic inside the prune's transaction");
        }

        fn store(db: &std::path::Path) -> OpenCodeStore {
            let options = StoreOptions {
                quiet_period: std::time::Duration::ZERO,
                ..StoreOptions::default()
            };
            OpenCodeStore::open(db, options).unwrap()
        }

        /// The request that prunes every technical part of `message`, at its revision now.
        fn request(store: &OpenCodeStore, message: &str) -> PruneRequest {
            let preview = PreviewRequest::new(MANY_TURNS.into(), message.into()).unwrap();
            let stored = store.read_message(&preview).unwrap().unwrap();
            PruneRequest::all_technical(MANY_TURNS.into(), message.into(), stored.revision())
                .unwrap()
        }

        fn command(request: &PruneRequest, durability: Durability) -> PruneCommand<'_> {
            PruneCommand {
                request,
                intent_id: Uuid::now_v7(),
                request_key: pruning_engine::request_key(request),
                receipt_id: Uuid::now_v7(),
                database_id: DATABASE_ID,
                now_ms: 1_900_000_000_000,
                durability,
            }
        }

        /// The part ids of `message`, read through a connection of its own.
        fn parts(db: &std::path::Path, message: &str) -> Vec<String> {
            let conn = Connection::open(db).unwrap();
            let mut stmt = conn
                .prepare("SELECT id FROM part WHERE message_id = ?1 ORDER BY id")
                .unwrap();
            let ids = stmt.query_map([message], |row| row.get(0)).unwrap();
            ids.map(Result::unwrap).collect()
        }

        /// Whether the file holds any receipt, read through a connection of its own.
        fn receipt_rows(db: &std::path::Path) -> i64 {
            let conn = Connection::open(db).unwrap();
            conn.query_row(
                "SELECT count(*) FROM sqlite_schema WHERE name = 'session_prune_receipt'",
                [],
                |row| row.get::<_, i64>(0),
            )
            .and_then(|tables| {
                if tables == 0 {
                    return Ok(0);
                }
                conn.query_row("SELECT count(*) FROM session_prune_receipt", [], |row| {
                    row.get(0)
                })
            })
            .unwrap()
        }

        /// Checks that `applied` committed a prune of two parts of `message` (its reasoning and
        /// its tool) whose receipt the store holds, and that those rows are gone from the file
        /// and the others kept.
        fn assert_pruned(
            db: &std::path::Path,
            store: &OpenCodeStore,
            applied: Applied,
            message: &str,
            before: &[String],
        ) {
            let Applied::Pruned { receipt, replayed } = applied else {
                panic!("not pruned: {applied:?}");
            };
            assert!(!replayed);
            assert_eq!(receipt.message_id, message);
            assert_eq!(receipt.removed_count, 2);
            assert_eq!(receipt.part_ids.len(), 2);
            assert!(store.receipts(None).unwrap().contains(&receipt));
            let after = parts(db, message);
            let kept: Vec<String> = before
                .iter()
                .filter(|id| !receipt.part_ids.contains(id))
                .cloned()
                .collect();
            assert_eq!(after, kept);
        }

        /// A prune that panics inside its write transaction (after its rows were deleted,
        /// before its receipt) leaves nothing written, and the store's next prune of the same
        /// message commits: the panic unwound through the transaction's guard, which rolled it
        /// back, so the connection is not left inside a transaction.
        #[test]
        fn a_prune_that_panics_inside_its_transaction_leaves_the_store_usable() {
            let (_dir, db) = fixture::copy();
            let store = store(&db);
            let before = parts(&db, TURN5);
            assert_eq!(before.len(), 4);
            let request = request(&store, TURN5);

            store.set_inside_prune(Some(panics));
            let unwound = catch_unwind(AssertUnwindSafe(|| {
                store.apply(&command(&request, Durability::Immediate))
            }));
            assert!(unwound.is_err(), "the seam panicked");
            store.set_inside_prune(None);

            assert!(store.connection().is_autocommit(), "rolled back");
            assert_eq!(parts(&db, TURN5), before, "nothing was deleted");
            assert_eq!(receipt_rows(&db), 0, "no receipt");
            assert!(store.receipts(None).unwrap().is_empty());
            assert_eq!(store.write_lock().transactions, 1, "its hold recorded");

            let applied = store
                .apply(&command(&request, Durability::Immediate))
                .unwrap();
            assert_pruned(&db, &store, applied, TURN5, &before);
            assert_eq!(receipt_rows(&db), 1);
        }

        /// The same in a group transaction: the panic rolls the whole group back, and the next
        /// group commits every prune.
        #[test]
        fn a_group_that_panics_inside_its_transaction_leaves_the_store_usable() {
            let (_dir, db) = fixture::copy();
            let store = store(&db);
            let before = [parts(&db, TURN5), parts(&db, TURN1)];
            let requests = [request(&store, TURN5), request(&store, TURN1)];
            fn commands(requests: &[PruneRequest; 2]) -> Vec<PruneCommand<'_>> {
                requests
                    .iter()
                    .map(|request| command(request, Durability::Deferred))
                    .collect()
            }

            store.set_inside_prune(Some(panics));
            let unwound =
                catch_unwind(AssertUnwindSafe(|| store.apply_group(&commands(&requests))));
            assert!(unwound.is_err(), "the seam panicked");
            store.set_inside_prune(None);

            assert!(store.connection().is_autocommit(), "rolled back");
            assert_eq!([parts(&db, TURN5), parts(&db, TURN1)], before);
            assert_eq!(receipt_rows(&db), 0);

            let answers = store.apply_group(&commands(&requests));
            assert_eq!(answers.len(), 2);
            for ((answer, message), before) in answers.into_iter().zip([TURN5, TURN1]).zip(&before)
            {
                assert_pruned(&db, &store, answer.unwrap(), message, before);
            }
            store.make_durable().unwrap();
            assert_eq!(receipt_rows(&db), 2);
        }
    }

    #[test]
    fn a_read_transaction_dropped_is_rolled_back() {
        let (_dir, conn) = database();
        {
            let _txn = ReadTxn::begin(&conn).unwrap();
            assert!(!conn.is_autocommit());
        }
        assert!(conn.is_autocommit());
        assert!(idle_after_rollback(&conn));
    }
}
