//! The OpenCode store: one connection to an OpenCode database, implementing the engine's
//! [`SessionStore`] for both storage generations. Which generation holds a message, and what
//! each does with it, is [`super::generation`]'s to decide.

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use pruning_engine::history::{HistoryScan, ScanEnd, ScannedMessage};
use pruning_engine::{
    Applied, AuditScope, BlockedReason, Discrepancy, DiscrepancyKind, DryRun, Durability,
    MissingSpillFile, PreviewRequest, PruneCommand, PruneRequest, Receipt, ReceiptsHighWater,
    Refusal, RestoreApplied, RestoreCommand, RestorePlan, RestoreRequest, Selection, SessionStore,
    StoreAudit, StoreError, StoredMessage,
};
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags};
use uuid::Uuid;

use super::archive::restore;
use super::archive::StoreArchive;
use super::audit;
use super::generation::{self, Generation};
use super::history;
use super::ownership;
use super::receipts;
use super::schema::integrity::{IntegrityTimes, Running};
use super::schema::media::{
    hot_journal, immutable_is_safe, immutable_uri, read_only_cause, read_only_media,
};
use super::schema::soundness;
use super::schema::{self, Schema};
use super::shrink::{give_back, AutoVacuum, GivenBack};
use super::sql_errors::{classify, sql_refusal};
use super::txn::{ReadTxn, WriteTxn, Writer};
use super::v1::compact::Survey;
use super::v1::fence::FenceLimits;
use super::v1::known::Known;
use super::write::Prepared;

/// How often a store looks at the processes holding its files before a write: 1 s.
const HOLDERS_EVERY: Duration = Duration::from_secs(1);

/// Default quiet period: a session updated within the last 30 s is refused.
pub const DEFAULT_QUIET_PERIOD: Duration = Duration::from_secs(30);

/// Options of a [`OpenCodeStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreOptions {
    /// Sessions updated more recently than this are refused (`maintenance_required`).
    pub quiet_period: Duration,
    /// A session with a run OpenCode left incomplete is refused (`maintenance_required`) until
    /// nothing of it was written for this long; then its completed messages can be pruned
    /// (docs/ARCHITECTURE.md, "Fence"). `None`: always refused.
    pub abandoned_after: Option<Duration>,
}

/// The default of [`StoreOptions::abandoned_after`]: a day.
pub const DEFAULT_ABANDONED_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            quiet_period: DEFAULT_QUIET_PERIOD,
            abandoned_after: Some(DEFAULT_ABANDONED_AFTER),
        }
    }
}

/// Bytes of the database file a read-only connection reads through a memory map
/// (`PRAGMA mmap_size`): SQLite's own ceiling (`SQLITE_MAX_MMAP_SIZE`, 0x7fff0000); a larger
/// file is read beyond it as usual.
const READ_MMAP_BYTES: i64 = 0x7fff_0000;

/// Pages of WAL after which a commit of the store checkpoints (passively): 10,000 (40 MB of 4 KiB
/// pages) rather than SQLite's 1,000, since a clean rewrites many pages, and fewer checkpoints
/// write each of them to the database fewer times.
const CHECKPOINT_PAGES: std::ffi::c_int = 10_000;

/// An OpenCode database opened for pruning ([`OpenCodeStore::open`]) or for reading only
/// ([`OpenCodeStore::open_read_only`]).
///
/// One connection, guarded by a mutex, with `busy_timeout = 0` (5 s and a memory map of up to
/// `READ_MMAP_BYTES` of the file for a read-only one), `synchronous = FULL`,
/// `foreign_keys = ON`, `cache_size = -8000`, a WAL hook that times the end of each commit and
/// checkpoints every `CHECKPOINT_PAGES` pages of WAL (in place of `wal_autocheckpoint`), and the query
/// planner's stability guarantee (`SQLITE_DBCONFIG_ENABLE_QPSG`); the file's
/// `journal_mode` is never changed. The schema profile ([`Schema`]) is read once and read
/// again only when SQLite's schema cookie changes (OpenCode migrated the file meanwhile).
pub struct OpenCodeStore {
    conn: Mutex<Connection>,
    path: PathBuf,
    options: StoreOptions,
    schema: Mutex<Option<Arc<Schema>>>,
    /// What the connection learnt of the V1 tables, kept between its transactions: filled by
    /// the read-only planners (a clean's plan of a message keeps the prune it planned,
    /// [`Self::remember_planned`]), read by the write path inside its transaction, valid while
    /// SQLite's `PRAGMA data_version` is unchanged (see [`Known`] for the rule). Reached only
    /// through [`Self::known`].
    known: Mutex<Known>,
    read_only: bool,
    /// Why this store writes nothing more: the words of the damage a check or a write found
    /// (`super::schema::soundness`). Set once, never cleared.
    damage: Mutex<Option<String>>,
    /// Where the store's integrity check is (it reads every page: once per store). Locked
    /// before the connection, never after.
    integrity: Mutex<Integrity>,
    /// When the processes holding the database's files were last looked at, before a write
    /// (`super::schema::soundness::detached_files`); `None` before the first look.
    holders_checked: Mutex<Option<std::time::Instant>>,
    /// The prune archive, when prunes are archived ([`OpenCodeStore::archive_prunes`]). Locked
    /// after the connection, never before.
    archive: Mutex<Option<StoreArchive>>,
    /// How long each write transaction held the write lock.
    lock_times: super::lock_times::LockTimes,
    /// Group transactions (`super::group`): how many prunes the last one took, and the
    /// surveys of compactions read ahead of one that it did not reach, by intent id.
    groups: Mutex<GroupsAhead>,
    /// Test seam, in the crate's own tests only: called by each prune inside its write
    /// transaction after its row writes ([`super::txn::WriteTxn::inside_prune`]).
    #[cfg(test)]
    inside_prune: Mutex<Option<fn()>>,
}

/// Whether a write gate waits for an integrity check running beside
/// ([`OpenCodeStore::check_sound_beside`]).
#[derive(Clone, Copy)]
enum Waits {
    /// A write: it begins only once the check answered `ok`.
    ForTheCheck,
    /// A dry run: it answers without the check, whose caller waits for it before its own
    /// answer.
    NotForTheCheck,
}

/// [`Integrity`] without the running check, read under its lock.
#[derive(Clone, Copy)]
enum Checking {
    NotYet,
    Running,
    Answered,
}

/// Where a store's integrity check is ([`OpenCodeStore::check_sound`],
/// [`OpenCodeStore::check_sound_beside`]).
enum Integrity {
    /// Not run: the first write runs it.
    Unchecked,
    /// Running on a thread of its own: a write waits for it, a dry run does not.
    Running(Running),
    /// Answered (its findings, if any, are the store's damage).
    Checked(IntegrityTimes),
}

/// What a store's group transactions keep between them ([`SessionStore::apply_group`]).
#[derive(Debug, Default)]
struct GroupsAhead {
    /// Prunes the last group transaction took.
    last_taken: usize,
    /// Surveys read before a group transaction for compactions it did not reach, by intent id.
    surveys: HashMap<Uuid, Arc<Survey>>,
}

impl OpenCodeStore {
    /// Opens an existing database file (never creates one).
    ///
    /// Errors: [`StoreError::Open`] when the file is missing, unreadable or not SQLite;
    /// [`StoreError::Detached`] (see [`refuse_detached`]).
    pub fn open(path: &Path, options: StoreOptions) -> Result<Self, StoreError> {
        let open_error = |detail: String| open_error(path, detail);
        existing_file(path)?;
        refuse_detached(path)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn =
            Connection::open_with_flags(path, flags).map_err(|e| open_error(e.to_string()))?;
        let store = Self::from_connection(conn, options).map_err(|e| match e {
            StoreError::Storage(_) if read_only_media(path) => StoreError::ReadOnly {
                path: path.display().to_string(),
                detail: format!(
                    "{}; read commands work, prunes need a writable copy",
                    read_only_cause(path)
                ),
            },
            StoreError::Storage(detail) => open_error(detail.to_string()),
            other => other,
        })?;
        // SQLite opens a file it may not write read-only without saying so.
        if store
            .connection()
            .is_readonly(rusqlite::MAIN_DB)
            .unwrap_or(true)
        {
            return Err(StoreError::ReadOnly {
                path: path.display().to_string(),
                detail: format!(
                    "{}; read commands work, prunes need a writable copy",
                    read_only_cause(path)
                ),
            });
        }
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        Ok(Self { path, ..store })
    }

    /// Checks that the file is sound enough to be written (docs/ARCHITECTURE.md, "Sound files"): SQLite's
    /// integrity check finds nothing, and no process holds a database, `-wal` or `-shm` file
    /// that was deleted or replaced at its path. A command that writes runs it before it
    /// journals anything; the first write of a store that did not runs it too. Damage found
    /// is kept: the store then refuses every write.
    ///
    /// Errors: [`StoreError::Damaged`], [`StoreError::Detached`]; [`StoreError::Storage`] when
    /// the check cannot run (a busy or unreadable file).
    pub fn check_sound(&self) -> Result<(), StoreError> {
        let mut integrity = self.integrity();
        let started = std::time::Instant::now();
        let findings = soundness::integrity_findings(&self.connection()).map_err(storage)?;
        let took = started.elapsed().as_secs_f64() * 1e3;
        *integrity = Integrity::Checked(IntegrityTimes {
            check_ms: took,
            waited_ms: took,
            overlapped: false,
        });
        drop(integrity);
        self.answer_of_check(&findings)
    }

    /// Starts the integrity check of [`Self::check_sound`] on a thread and a read-only
    /// connection of its own, and returns at once: the store goes on reading (a clean surveys
    /// and plans meanwhile), a dry run answers without it, and a write waits for its answer
    /// ([`Self::await_sound`]), so that no write begins until it answered `ok`. Nothing is
    /// started once a check ran or is running.
    pub fn check_sound_beside(&self) {
        let mut integrity = self.integrity();
        if matches!(*integrity, Integrity::Unchecked) {
            *integrity = Integrity::Running(Running::start(&self.path));
        }
    }

    /// Whether the integrity check has answered, so that [`Self::await_sound`] would not wait
    /// for it (`false` before any check started).
    pub fn sound_check_answered(&self) -> bool {
        match &*self.integrity() {
            Integrity::Unchecked => false,
            Integrity::Running(running) => running.answered(),
            Integrity::Checked(_) => true,
        }
    }

    /// Waits for the integrity check started by [`Self::check_sound_beside`] (or runs it now
    /// if none ran) and answers as [`Self::check_sound`] does, with how long it took and how
    /// long this call waited for it.
    ///
    /// Errors: those of [`Self::check_sound`]; damage found before.
    pub fn await_sound(&self) -> Result<IntegrityTimes, StoreError> {
        let mut integrity = self.integrity();
        let answer = match std::mem::replace(&mut *integrity, Integrity::Unchecked) {
            Integrity::Unchecked => {
                drop(integrity);
                self.check_sound()?;
                return Ok(self.integrity_times().unwrap_or_default());
            }
            Integrity::Checked(times) => {
                *integrity = Integrity::Checked(times);
                drop(integrity);
                return match self.damage_found() {
                    Some(detail) => Err(StoreError::Damaged {
                        path: self.path.display().to_string(),
                        detail,
                    }),
                    None => Ok(times),
                };
            }
            Integrity::Running(running) => running.wait(),
        };
        let (findings, times) = match answer {
            Ok(answer) => answer,
            // It could not run beside (its own connection would not open): run it here.
            Err(_) => {
                drop(integrity);
                self.check_sound()?;
                return Ok(self.integrity_times().unwrap_or_default());
            }
        };
        *integrity = Integrity::Checked(times);
        drop(integrity);
        self.answer_of_check(&findings)?;
        Ok(times)
    }

    /// How long the store's integrity check took and how long it was waited for; `None`
    /// until it answered.
    pub fn integrity_times(&self) -> Option<IntegrityTimes> {
        match &*self.integrity() {
            Integrity::Checked(times) => Some(*times),
            Integrity::Unchecked | Integrity::Running(_) => None,
        }
    }

    /// Whether what this store's planners learn is still kept for its writes (the prunes a
    /// clean planned, the compaction surveys: see `super::v1::known`): a clean plans ahead of
    /// its first write while the integrity check runs, as long as this holds.
    pub fn keeps_more_plans(&self) -> bool {
        self.known_slot().has_room()
    }

    /// The integrity check's state, locked.
    fn integrity(&self) -> std::sync::MutexGuard<'_, Integrity> {
        self.integrity
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// What the integrity check's `findings` mean: damage kept and refused, or the holders of
    /// the files looked at.
    /// The check's own words are answered even where a read met the damage first (they name
    /// what is damaged: an index, the freelist).
    fn answer_of_check(&self, findings: &[String]) -> Result<(), StoreError> {
        if !findings.is_empty() {
            let words = soundness::damage_words(&self.path, findings);
            self.note_damage(words.clone());
            return Err(StoreError::Damaged {
                path: self.path.display().to_string(),
                detail: words,
            });
        }
        self.check_holders()?;
        Ok(())
    }

    /// Why no write may run now, as the refusal the write answers: damage found before, or by
    /// the integrity check a store runs before its first write (`unsupported_storage`, lasting);
    /// a process holding a deleted or replaced file of the database's family
    /// (`maintenance_required`: it passes when that process closes them), looked at once per
    /// [`HOLDERS_EVERY`] (reading `/proc` costs milliseconds, a prune of a bulk clean less).
    /// A check running beside is waited for as `waits` says. `None` when the write may run.
    fn write_gate(&self, waits: Waits) -> Option<Refusal> {
        let due = self
            .holders_checked
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .is_none_or(|last| last.elapsed() >= HOLDERS_EVERY);
        let state = match &*self.integrity() {
            Integrity::Unchecked => Checking::NotYet,
            Integrity::Running(_) => Checking::Running,
            Integrity::Checked(_) => Checking::Answered,
        };
        let found = match (self.damage_found(), state, waits) {
            (Some(detail), _, _) => Err(StoreError::Damaged {
                path: self.path.display().to_string(),
                detail,
            }),
            (None, Checking::NotYet, _) => self.check_sound(),
            (None, Checking::Running, Waits::ForTheCheck) => self.await_sound().map(|_| ()),
            (None, Checking::Running | Checking::Answered, _) if due => self.check_holders(),
            (None, Checking::Running | Checking::Answered, _) => Ok(()),
        };
        match found {
            Ok(()) => None,
            Err(error @ StoreError::Detached { .. }) => Some(Refusal::new(
                BlockedReason::MaintenanceRequired,
                error.to_string(),
            )),
            Err(error) => {
                Some(Refusal::new(BlockedReason::UnsupportedStorage, error.to_string()).lasting())
            }
        }
    }

    /// Looks at the processes holding the database's files now.
    fn check_holders(&self) -> Result<(), StoreError> {
        let beside = soundness::beside(&self.path);
        // The write lock is left free now and then only where a writer may wait for it.
        self.lock_times.alone(beside.others == Some(false));
        let detached = beside.detached;
        *self
            .holders_checked
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(std::time::Instant::now());
        if detached.is_empty() {
            Ok(())
        } else {
            Err(soundness::detached(&self.path, &detached))
        }
    }

    /// The damage found so far, in words; `None` while none was.
    pub fn damage_found(&self) -> Option<String> {
        self.damage
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Keeps `detail` as the damage that stops every later write (the first kept stays) and
    /// returns the error that reports it.
    fn note_damage(&self, detail: String) -> StoreError {
        let mut damage = self
            .damage
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let detail = damage.get_or_insert(detail).clone();
        StoreError::Damaged {
            path: self.path.display().to_string(),
            detail,
        }
    }

    /// `result`, with a write's damage kept (see [`Self::note_damage`]): SQLite's damage
    /// errors reach here as [`StoreError::Damaged`] from `classify` (an empty path and
    /// SQLite's finding), or as a
    /// [`StoreError::Storage`] holding SQLite's error.
    fn noting_damage<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        match result {
            // From `classify`: SQLite's finding, not yet worded.
            Err(StoreError::Damaged { path, detail }) if path.is_empty() => {
                Err(self.note_damage(soundness::damage_words(&self.path, &[detail])))
            }
            Err(StoreError::Damaged { detail, .. }) => Err(self.note_damage(detail)),
            Err(StoreError::Storage(source))
                if source
                    .downcast_ref::<rusqlite::Error>()
                    .is_some_and(soundness::is_damage) =>
            {
                let finding = source.to_string();
                Err(self.note_damage(soundness::damage_words(&self.path, &[finding])))
            }
            other => other,
        }
    }

    /// Opens an existing database file for reading only (`SQLITE_OPEN_READONLY`): it works on
    /// a read-only file, folder or mount, WAL or rollback journal, with or without `-wal` and
    /// `-shm` files, and never writes the file. Every prune through it is refused
    /// ([`StoreError::ReadOnly`]).
    ///
    /// A WAL database at rest on read-only media (no `-shm` file, and none can be created) is
    /// one SQLite cannot open read-only: then, and only when no writer can exist (see
    /// `immutable_is_safe`), it is opened with SQLite's `immutable=1`, which reads the file
    /// without locks or side files.
    ///
    /// Errors: [`StoreError::Open`] when the file is missing, unreadable or not SQLite.
    pub fn open_read_only(path: &Path, options: StoreOptions) -> Result<Self, StoreError> {
        let open_error = |detail: String| open_error(path, detail);
        existing_file(path)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn =
            Connection::open_with_flags(path, flags).map_err(|e| open_error(e.to_string()))?;
        let store = match Self::from_connection(conn, options) {
            Ok(store) => store,
            Err(StoreError::Storage(detail)) if hot_journal(path).is_some() => {
                Self::after_rolling_back(path, options, &detail.to_string())?
            }
            Err(StoreError::Storage(detail)) if immutable_is_safe(path) => {
                let conn = Connection::open_with_flags(
                    immutable_uri(path),
                    flags | OpenFlags::SQLITE_OPEN_URI,
                )
                .map_err(|e| open_error(format!("{detail}; read as immutable: {e}")))?;
                Self::from_connection(conn, options).map_err(|e| match e {
                    StoreError::Storage(again) => {
                        open_error(format!("{detail}; read as immutable: {again}"))
                    }
                    other => other,
                })?
            }
            Err(StoreError::Storage(_)) if read_only_media(path) => {
                return Err(open_error(format!(
                    "it cannot be written here ({}), and its -wal file holds commits that are \
                     not in the database file yet while no -shm index exists: SQLite can read \
                     that only by writing the index beside it. Copy the database together with \
                     its -wal file to writable storage and read the copy",
                    read_only_cause(path)
                )))
            }
            Err(StoreError::Storage(detail)) => return Err(open_error(detail.to_string())),
            Err(other) => return Err(other),
        };
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        Ok(Self {
            path,
            read_only: true,
            ..store
        })
    }

    /// [`Self::open_read_only`] of a database whose rollback journal is hot (a writer was
    /// killed mid-transaction): SQLite must roll the journal back before the file can be read,
    /// which a read-only connection cannot do. Where the file and its folder can be written,
    /// one read-write connection lets SQLite roll it back (it writes nothing else), then the
    /// file is opened read-only again; on read-only media the error says so and what to do.
    fn after_rolling_back(
        path: &Path,
        options: StoreOptions,
        detail: &str,
    ) -> Result<Self, StoreError> {
        let open_error = |detail: String| open_error(path, detail);
        let journal = hot_journal(path)
            .map(|journal| journal.display().to_string())
            .unwrap_or_default();
        if read_only_media(path) {
            return Err(open_error(format!(
                "its rollback journal {journal} holds a transaction a writer left unfinished \
                 (it stopped mid-write), and SQLite must roll that back before the file can be \
                 read, which needs write access here ({}). Copy the database together with its \
                 -journal file to writable storage and read the copy",
                read_only_cause(path)
            )));
        }
        let rolled_back = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .and_then(|conn| {
            conn.busy_timeout(READ_BUSY_TIMEOUT)?;
            // The first read takes a shared lock, and SQLite rolls a hot journal back first.
            conn.query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(()))
        });
        if let Err(error) = rolled_back {
            return Err(open_error(format!(
                "its rollback journal {journal} holds a transaction a writer left unfinished, \
                 and rolling it back failed ({error}; first: {detail}). Stop the writer if it \
                 still runs, then retry; or copy the database with its -journal file and read \
                 the copy"
            )));
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn =
            Connection::open_with_flags(path, flags).map_err(|e| open_error(e.to_string()))?;
        Self::from_connection(conn, options).map_err(|e| match e {
            StoreError::Storage(again) => open_error(again.to_string()),
            other => other,
        })
    }

    /// Wraps a connection the caller opened (for embedding, and for tests that attach a
    /// database to it). Applies the connection settings; checks that the file is SQLite.
    pub fn from_connection(
        mut conn: Connection,
        options: StoreOptions,
    ) -> Result<Self, StoreError> {
        // Opening waits, briefly, on another process opening or recovering the WAL index; the
        // write path never waits (set below).
        conn.busy_timeout(READ_BUSY_TIMEOUT).map_err(storage)?;
        // The query planner's stability guarantee: a plan never depends on a bound value. Without
        // it the planner peeks at some parameters, and SQLite then compiles the statement again
        // each time its parameters are cleared, which the statement cache does on every reuse.
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
            .map_err(storage)?;
        conn.set_prepared_statement_cache_capacity(super::cached::STATEMENT_CACHE);
        let read_only = conn.is_readonly(rusqlite::MAIN_DB).unwrap_or(true);
        // An 8 MB page cache keeps a clean of any database well under 64 MiB of memory (a 16 MiB
        // message read twice comes back from the OS cache): this connection's own setting.
        conn.execute_batch(
            "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; PRAGMA cache_size = -8000;",
        )
        .map_err(storage)?;
        let lock_times = super::lock_times::LockTimes::default();
        let released = lock_times.released();
        // SQLite calls the hook after each commit in WAL mode, the write lock released: the
        // lock's hold ends there, and the checkpoint that SQLite's own hook would run every
        // 1,000 pages runs here, every CHECKPOINT_PAGES.
        conn.wal_hook(Some(
            move |wal: &mut rusqlite::hooks::Wal, pages: std::ffi::c_int| {
                released.now();
                if pages >= CHECKPOINT_PAGES {
                    // A passive checkpoint gives way to any reader or writer; what it leaves, the
                    // next one moves.
                    let _ = wal.checkpoint();
                }
                Ok(())
            },
        ))
        .map_err(storage)?;
        super::sql_functions::register(&conn).map_err(storage)?;
        let profile = Schema::read(&conn).map_err(storage)?;
        if read_only {
            // Reads through a memory map of the file, without a copy into the page cache: only
            // where nothing is written, so that a writing connection's memory stays bounded by
            // its page cache (docs/ARCHITECTURE.md, "Bulk work"). The map's pages are the OS's
            // file cache, shared and given back under pressure.
            conn.execute_batch(&format!("PRAGMA mmap_size = {READ_MMAP_BYTES}"))
                .map_err(storage)?;
        }
        if !read_only {
            // A reader never waits for a writer in WAL mode, but it may meet another process
            // opening or recovering the WAL index (SQLITE_BUSY): a read-only connection waits
            // for that, briefly, rather than failing a read command. A connection that prunes
            // never waits: a busy database is `maintenance_required` at once.
            conn.busy_timeout(Duration::ZERO).map_err(storage)?;
        }
        let path = conn
            .path()
            .filter(|p| !p.is_empty())
            .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| PathBuf::from(p)))
            .unwrap_or_default();
        Ok(Self {
            conn: Mutex::new(conn),
            path,
            options,
            schema: Mutex::new(Some(Arc::new(profile))),
            known: Mutex::new(Known::default()),
            read_only,
            damage: Mutex::new(None),
            integrity: Mutex::new(Integrity::Unchecked),
            holders_checked: Mutex::new(None),
            archive: Mutex::new(None),
            lock_times,
            groups: Mutex::new(GroupsAhead::default()),
            #[cfg(test)]
            inside_prune: Mutex::new(None),
        })
    }

    /// Whether the connection cannot write (opened with [`Self::open_read_only`], or a
    /// connection given to [`Self::from_connection`] that SQLite opened read-only).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The schema profile as `conn` (this store's connection) sees it now: the cached one while
    /// SQLite's schema cookie is unchanged, else read again.
    ///
    /// Errors: SQLite's.
    pub fn schema_of(&self, conn: &Connection) -> rusqlite::Result<Arc<Schema>> {
        let version = schema::schema_version(conn)?;
        let mut cached = self
            .schema
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(profile) = cached.as_ref().filter(|p| p.version() == version) {
            return Ok(Arc::clone(profile));
        }
        let profile = Arc::new(Schema::read(conn)?);
        *cached = Some(Arc::clone(&profile));
        Ok(profile)
    }

    /// Why the database file cannot be written where it is (a read-only file, folder or mount,
    /// checked with `access(2)`), in words that say what to do; `None` when it can.
    pub fn media_read_only(&self) -> Option<String> {
        (!self.path.as_os_str().is_empty() && read_only_media(&self.path))
            .then(|| read_only_cause(&self.path))
    }

    /// Why no prune of the message can be written where it is stored, in words; `None` when
    /// one can. The file or its folder cannot be written (read-only media: checked with
    /// `access(2)`, whether or not this store was opened read-only), or the message is a V2 row
    /// where V2 prunes are not written (the session table OpenCode 1.17 to 1.19 share, see
    /// `Generation::read_only`). An error reading the schema fails closed with its words.
    pub fn read_only_reason(&self, session_id: &str, message_id: &str) -> Option<String> {
        self.read_only_reason_on(&self.connection(), session_id, message_id)
    }

    /// The schema profile and the generation that holds the message, when a prune of it can be
    /// written in that generation; else why not, in words (an error reading the schema or
    /// locating the message fails closed with its words).
    fn writable_generation(
        &self,
        conn: &Connection,
        session_id: &str,
        message_id: &str,
    ) -> Result<(Arc<Schema>, Generation), String> {
        let schema = self
            .schema_of(conn)
            .map_err(|error| format!("the schema cannot be read: {error}"))?;
        let generation = Generation::of(conn, &schema, session_id, message_id)
            .map_err(|error| format!("the message cannot be located: {error}"))?;
        match generation.read_only(conn) {
            Ok(None) => Ok((schema, generation)),
            Ok(Some(why)) => Err(why.into()),
            Err(error) => Err(format!("the schema cannot be read: {error}")),
        }
    }

    /// [`SessionStore::read_message`] on `conn` (this store's connection, held by the caller),
    /// inside the caller's read transaction.
    pub(crate) fn read_message_on(
        &self,
        conn: &Connection,
        request: &PreviewRequest,
    ) -> Result<Result<StoredMessage, Refusal>, StoreError> {
        let schema = self.schema_of(conn).map_err(storage)?;
        if !schema.is_supported() {
            return Ok(Err(Refusal::new(
                BlockedReason::UnsupportedStorage,
                "the database has neither V1 (message, part) nor V2 (session_message) tables",
            )));
        }
        match generation::read(conn, &schema, request) {
            Ok(result) => Ok(result),
            Err(error) => Ok(Err(sql_refusal(&error))),
        }
    }

    /// [`Self::read_only_reason`] on `conn` (this store's connection, held by the caller).
    pub(crate) fn read_only_reason_on(
        &self,
        conn: &Connection,
        session_id: &str,
        message_id: &str,
    ) -> Option<String> {
        if let Some(cause) = self.media_read_only() {
            return Some(cause);
        }
        self.writable_generation(conn, session_id, message_id).err()
    }

    /// What the connection knows of the V1 tables ([`Known`]: valid while SQLite's
    /// `PRAGMA data_version` is unchanged; filled by the read-only planners, read by the write
    /// path), locked for the caller, with the snapshots filed under another session's aggregate
    /// caught up with the `event` table when called outside any transaction (the first call
    /// reads the whole table, later ones only the rows appended since; none where the schema
    /// has no event log). A caller inside a transaction calls [`Known::refresh`] before it uses
    /// what is known.
    ///
    /// Errors: [`StoreError::Storage`].
    pub(crate) fn known(
        &self,
        conn: &Connection,
        schema: &Schema,
    ) -> Result<MutexGuard<'_, Known>, StoreError> {
        let mut known = self.known_slot();
        if schema.has_events() && conn.is_autocommit() {
            known.foreign.catch_up(conn).map_err(storage)?;
        }
        Ok(known)
    }

    /// Keeps the prune a clean planned for `message_id` inside the read transaction on `conn`
    /// (this store's connection, held by the caller) that read the message, for the write path:
    /// the message's prune at the same `PRAGMA data_version` deletes the planned rows without
    /// reading and hashing the message again ([`Known::remember_planned`]). Nothing is kept
    /// when [`Self::known`] fails.
    ///
    /// Errors: SQLite's.
    pub(crate) fn remember_planned(
        &self,
        conn: &Connection,
        schema: &Schema,
        message_id: &str,
        planned: super::v1::known::PlannedPrune,
    ) -> rusqlite::Result<()> {
        let Ok(mut known) = self.known(conn, schema) else {
            return Ok(());
        };
        known.remember_planned(conn, message_id, planned)
    }

    /// The lock of what the connection knows of the V1 tables. A lock a panic poisoned is taken
    /// over with all it learnt forgotten ([`Known::forget`], as after any transaction that
    /// wrote and rolled back: the panic's transaction was rolled back by its guard,
    /// `super::txn`).
    fn known_slot(&self) -> MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(|poisoned| {
            let mut known = poisoned.into_inner();
            known.forget();
            self.known.clear_poison();
            known
        })
    }

    /// OpenCode's projects and workspaces with their directories, ordered by id (see
    /// `super::workspaces::discover`).
    ///
    /// Errors: [`StoreError::Storage`].
    pub fn workspaces(&self) -> Result<Vec<super::workspaces::Workspace>, StoreError> {
        super::workspaces::discover(&self.connection()).map_err(storage)
    }

    /// Who owns session `session_id` (its directory, project and workspace), from whichever
    /// session table holds it; `None` when none does.
    ///
    /// Errors: [`StoreError::Storage`].
    pub fn owner(&self, session_id: &str) -> Result<Option<ownership::Owner>, StoreError> {
        ownership::find(&self.connection(), session_id).map_err(storage)
    }

    /// The session ids the receipts name, each once (see the `receipts` module): what an
    /// audit of a set of sessions is scoped by, damaged receipt rows included.
    ///
    /// Errors: [`StoreError::Storage`].
    pub fn receipt_session_ids(&self) -> Result<Vec<String>, StoreError> {
        receipts::session_ids(&self.connection()).map_err(storage)
    }

    /// [`Self::schema_of`] on this store's connection.
    ///
    /// Errors: [`StoreError::Storage`].
    pub fn schema(&self) -> Result<Arc<Schema>, StoreError> {
        self.schema_of(&self.connection()).map_err(storage)
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

    /// Archives every prune from now on: the rows each removes are kept, compressed, in the
    /// archive beside the database (`<database>.prune-archive`, created when missing), durable
    /// before the prune commits, and its receipt records the entry hash (docs/ARCHITECTURE.md,
    /// "Archive"). Opening recovers the archive against the receipts: entries no receipt names
    /// are discarded. Returns the archive's path.
    ///
    /// Errors: [`StoreError::ReadOnly`] for a store opened read-only; [`StoreError::Archive`]
    /// when the archive is held by another process, is not an archive of this format, or is
    /// damaged where a receipt's entry may be; [`StoreError::Storage`].
    pub fn archive_prunes(&self) -> Result<PathBuf, StoreError> {
        if self.read_only {
            return Err(StoreError::ReadOnly {
                path: self.path.display().to_string(),
                detail: "it was opened for reading only; prunes are not archived".into(),
            });
        }
        let conn = self.connection();
        let opened = StoreArchive::open(&conn, &self.path)?;
        let path = opened.path().to_path_buf();
        *self.archive_slot() = Some(opened);
        Ok(path)
    }

    /// What the prune archive beside the database holds (read without a lock; see
    /// `super::archive::retention`).
    ///
    /// Errors: [`StoreError::Archive`] when the file is not an archive; [`StoreError::Storage`].
    pub fn archive_stats(&self) -> Result<super::ArchiveStats, StoreError> {
        super::archive::retention::stats(&self.connection(), &self.path)
    }

    /// Purges the archive entries written before `cutoff_ms`, except each message's newest
    /// receipt's, and drops those no receipt names (see `super::archive::retention::purge`);
    /// `now_ms` is recorded as the purge time. With `dry_run`, only counts.
    ///
    /// Only the archive is written: the store may be read-only. A store opened with `--archive`
    /// purges through the archive it holds; another process that archives prunes holds it, and
    /// the purge is refused while that runs.
    ///
    /// Errors: [`StoreError::Archive`] (held by another process, damaged, not rewritten);
    /// [`StoreError::Storage`].
    pub fn purge_archive(
        &self,
        cutoff_ms: i64,
        now_ms: i64,
        dry_run: bool,
    ) -> Result<super::PurgeReport, StoreError> {
        let conn = self.connection();
        let mut held = self.archive_slot();
        // The receipts and the archive as of one snapshot.
        let txn = ReadTxn::begin(&conn).map_err(storage)?;
        let purged = super::archive::retention::purge(
            &conn,
            &self.path,
            held.as_mut().map(StoreArchive::file),
            cutoff_ms,
            now_ms,
            dry_run,
        );
        txn.end();
        purged
    }

    /// Whether the prunes this store commits are archived ([`Self::archive_prunes`] was
    /// called).
    pub fn archives_prunes(&self) -> bool {
        self.archive_slot().is_some()
    }

    /// Bytes of archive entries written for the prunes this store committed (0 when prunes
    /// are not archived): what `clean` reports beside the bytes it freed.
    pub fn archived_bytes(&self) -> u64 {
        self.archive_slot()
            .as_ref()
            .map_or(0, StoreArchive::written)
    }

    fn archive_slot(&self) -> MutexGuard<'_, Option<StoreArchive>> {
        self.archive
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A restore's transaction on `conn` (this store's connection, held by the caller): with
    /// `command`, committed; without, a dry run rolled back.
    fn run_restore(
        &self,
        conn: &Connection,
        request: &RestoreRequest,
        command: Option<&RestoreCommand<'_>>,
        now_ms: i64,
    ) -> Result<Result<restore::Done, Refusal>, StoreError> {
        let schema = self.schema_of(conn).map_err(storage)?;
        let mut known = self.known(conn, &schema)?;
        let held = self.archive_slot();
        let source = match held.as_ref() {
            Some(archive) => restore::ArchiveSource::Held(archive),
            None => restore::ArchiveSource::Beside(&self.path),
        };
        let input = restore::RestoreInput {
            request,
            request_key: hex::encode(pruning_engine::restore_key(request.receipt_id)),
            command,
            now_ms,
            limits: self.fence_limits(),
        };
        restore::in_transaction(
            self.writer(conn),
            |conn| self.schema_of(conn),
            &mut known,
            &source,
            &input,
        )
    }

    /// The file's `auto_vacuum` mode: [`AutoVacuum::Incremental`] once `vacuum
    /// --online-shrink` switched it, else OpenCode's [`AutoVacuum::None`].
    ///
    /// Errors: [`StoreError::Storage`].
    pub fn auto_vacuum(&self) -> Result<AutoVacuum, StoreError> {
        AutoVacuum::of(&self.connection()).map_err(storage)
    }

    /// Gives the file's free pages back to the file system while OpenCode runs, in write
    /// transactions of at most 50 ms each (see `super::shrink`), until none are left or
    /// `stop()` answers true (it is asked before each step: Ctrl-C, a deadline). Nothing is done on a file that is not [`AutoVacuum::Incremental`],
    /// on a store opened read-only, or where no write may run now (damage found, a deleted
    /// file held open): [`GivenBack::stopped`] says why. Each step's hold is in
    /// [`Self::write_lock`].
    ///
    /// Errors: [`StoreError::Storage`] (a full disk, an I/O error: the steps before it stand),
    /// [`StoreError::Damaged`] for damage SQLite met on the way.
    pub fn give_back_pages(&self, stop: &dyn Fn() -> bool) -> Result<GivenBack, StoreError> {
        let refused = if self.read_only {
            Some("it was opened for reading only".to_string())
        } else {
            self.write_gate(Waits::ForTheCheck)
                .map(|refusal| refusal.detail)
        };
        if let Some(detail) = refused {
            let conn = self.connection();
            let size = std::fs::metadata(&self.path).map_or(0, |meta| meta.len());
            let free: i64 = conn
                .query_row("PRAGMA freelist_count", [], |row| row.get(0))
                .map_err(storage)?;
            return Ok(GivenBack {
                left_pages: free.max(0) as u64,
                stopped: Some(detail),
                file_bytes_before: size,
                file_bytes_after: size,
                ..GivenBack::default()
            });
        }
        let given = give_back(&self.connection(), &self.path, &self.lock_times, stop);
        self.noting_damage(given.map_err(storage))
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How long this store's write transactions held SQLite's write lock so far (see
    /// `super::lock_times`).
    pub fn write_lock(&self) -> super::LockSummary {
        self.lock_times.summary()
    }

    /// Locks the connection (a poisoned lock is taken over: the connection holds no Rust state).
    /// Only this crate reaches it: callers go through the store's methods.
    pub(crate) fn connection(&self) -> MutexGuard<'_, Connection> {
        self.conn
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The write path's handle on `conn` (this store's connection, held by the caller): it
    /// begins the write transactions and records their holds in this store's lock times.
    fn writer<'c>(&'c self, conn: &'c Connection) -> Writer<'c> {
        let writer = Writer::new(conn, &self.lock_times);
        #[cfg(test)]
        let writer = writer.with_inside_prune(
            *self
                .inside_prune
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        writer
    }

    /// Test seam, in the crate's own tests only: `hook` is called by each prune of this store
    /// inside its write transaction after its row writes, before its receipt; `None` removes
    /// it.
    #[cfg(test)]
    pub(crate) fn set_inside_prune(&self, hook: Option<fn()>) {
        *self
            .inside_prune
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = hook;
    }

    /// The options the store was opened with (its fence's quiet period, ...).
    pub fn options(&self) -> StoreOptions {
        self.options
    }

    /// The V1 fence's limits from [`StoreOptions`].
    fn fence_limits(&self) -> FenceLimits {
        let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        FenceLimits {
            quiet_period_ms: ms(self.options.quiet_period),
            abandoned_after_ms: self.options.abandoned_after.map(ms),
        }
    }
}

/// How long a read-only connection waits on another process holding the WAL index for a moment
/// (a prune's connection never waits: docs/ARCHITECTURE.md, "The write path of one prune").
const READ_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// SQLite's `synchronous` levels this store uses (`PRAGMA synchronous` reads them as numbers).
const NORMAL: i64 = 1;
const FULL: i64 = 2;

/// Sets the connection's `synchronous` level, only when it differs from the level in force:
/// setting a pragma expires every statement the connection has prepared, and each would be
/// compiled again on its next use.
fn set_synchronous(conn: &Connection, level: i64) -> rusqlite::Result<()> {
    let now: i64 = super::cached::query_row(conn, "PRAGMA synchronous", [], |row| row.get(0))?;
    if now != level {
        conn.execute_batch(&format!("PRAGMA synchronous = {level}"))?;
    }
    Ok(())
}

/// [`StoreError::Open`] for `path`.
fn open_error(path: &Path, detail: String) -> StoreError {
    StoreError::Open {
        path: path.display().to_string(),
        detail,
    }
}

/// Why `path` cannot be an OpenCode database, in words, when it is an empty file (0 bytes):
/// SQLite would take it as a new empty database, and a write would make it one. `None` for
/// anything else. Every command refuses such a file with these words before it opens or
/// creates anything.
pub fn empty_database(path: &Path) -> Option<String> {
    let empty = std::fs::metadata(path).is_ok_and(|meta| meta.is_file() && meta.len() == 0);
    empty.then(|| {
        format!(
            "{} is an empty file (0 bytes), not an OpenCode database: pass the database OpenCode \
             writes (`opencode.db` in its data folder; OPENCODE_DB or --channel find it) with --db",
            path.display()
        )
    })
}

/// Refuses to open `path` for writing while a process holds a database, `-wal` or `-shm` file
/// of it that was deleted or replaced at its path (docs/ARCHITECTURE.md, "Sound files"): run
/// before SQLite opens the file, which would create a new `-wal` and `-shm` beside the ones that
/// process still uses. [`OpenCodeStore::open`] runs it; a command that reads before it writes
/// runs it first.
///
/// Errors: [`StoreError::Detached`], naming each process and file.
pub fn refuse_detached(path: &Path) -> Result<(), StoreError> {
    let detached = soundness::detached_files(path);
    if detached.is_empty() {
        Ok(())
    } else {
        Err(soundness::detached(path, &detached))
    }
}

/// Refuses a path that is a directory, names no file or names an empty file: the store never
/// creates a database.
fn existing_file(path: &Path) -> Result<(), StoreError> {
    if let Some(why) = empty_database(path) {
        return Err(StoreError::Open {
            path: path.display().to_string(),
            detail: why,
        });
    }
    if path.is_dir() {
        return Err(open_error(
            path,
            "it is a directory; pass the database file".into(),
        ));
    }
    if !path.is_file() {
        return Err(open_error(
            path,
            "no such file (is OpenCode's data elsewhere? pass --db PATH or --channel NAME)".into(),
        ));
    }
    Ok(())
}

/// Whether the database is in WAL mode (OpenCode's own setting).
fn is_wal(conn: &Connection) -> bool {
    super::cached::query_row(conn, "PRAGMA journal_mode", [], |row| {
        row.get::<_, String>(0)
    })
    .is_ok_and(|mode| mode.eq_ignore_ascii_case("wal"))
}

pub(crate) fn storage(error: rusqlite::Error) -> StoreError {
    StoreError::Storage(Box::new(error))
}

/// The snapshots of the session a compaction request names, read in a read transaction of its
/// own, or held from an earlier read at the session's revision now ([`Known::survey`]); `None`
/// for any other request, or where the database keeps no event log (the compaction then refuses
/// with words of its own).
fn survey_for(
    conn: &Connection,
    schema: &Schema,
    known: &mut Known,
    request: &PruneRequest,
) -> rusqlite::Result<Option<Arc<Survey>>> {
    if !matches!(request.selection, Selection::SupersededSnapshots(_)) || !schema.has_events() {
        return Ok(None);
    }
    let txn = ReadTxn::begin(conn)?;
    let survey = known.survey(conn, &request.session_id);
    txn.end();
    let survey = survey?;
    if let Selection::SupersededSnapshots(range) = request.selection {
        known.written(&survey, range);
    }
    Ok(Some(survey))
}

impl OpenCodeStore {
    /// [`SessionStore::apply`] past its opening checks.
    fn apply_sound(&self, command: &PruneCommand<'_>) -> Result<Applied, StoreError> {
        let conn = self.connection();
        let schema = self.schema_of(&conn).map_err(storage)?;
        let relaxed = command.durability == Durability::Deferred && is_wal(&conn);
        set_synchronous(&conn, if relaxed { NORMAL } else { FULL }).map_err(storage)?;
        let mut known = self.known(&conn, &schema)?;
        // A compaction reads the session's snapshots before it takes the write lock.
        let survey = match survey_for(&conn, &schema, &mut known, command.request) {
            Ok(survey) => survey,
            Err(error) => return classify(&error).map(Applied::Refused),
        };
        let mut archive = self.archive_slot();
        generation::apply(
            self.writer(&conn),
            |conn| self.schema_of(conn),
            &mut known,
            command,
            self.fence_limits(),
            archive.as_mut(),
            survey.as_deref(),
        )
    }

    /// [`SessionStore::apply_group`] past its opening checks. The compactions the transaction
    /// may reach (up to twice as many prunes as the last group took) have their session's
    /// snapshots read first, each in a read transaction of its own, so that no survey runs
    /// under the write lock; those it does not reach are kept for the next group.
    fn apply_group_sound(&self, commands: &[PruneCommand<'_>]) -> Vec<Result<Applied, StoreError>> {
        let conn = self.connection();
        let schema = match self.schema_of(&conn) {
            Ok(schema) => schema,
            Err(error) => return vec![Err(storage(error))],
        };
        let relaxed = is_wal(&conn);
        if let Err(error) = set_synchronous(&conn, if relaxed { NORMAL } else { FULL }) {
            return vec![Err(storage(error))];
        }
        let mut known = match self.known(&conn, &schema) {
            Ok(known) => known,
            Err(error) => return vec![Err(error)],
        };
        let mut groups = self
            .groups
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let given: HashSet<Uuid> = commands.iter().map(|command| command.intent_id).collect();
        groups
            .surveys
            .retain(|intent_id, _| given.contains(intent_id));
        let reach = (groups.last_taken.max(4) * 2).min(commands.len());
        let mut take = reach;
        for (index, command) in commands[..reach].iter().enumerate() {
            if groups.surveys.contains_key(&command.intent_id) {
                continue;
            }
            match survey_for(&conn, &schema, &mut known, command.request) {
                Ok(Some(survey)) => {
                    groups.surveys.insert(command.intent_id, survey);
                }
                Ok(None) => {}
                // The failure is this prune's answer, alone: the group ends before it.
                Err(error) if index == 0 => return vec![classify(&error).map(Applied::Refused)],
                Err(_) => {
                    take = index;
                    break;
                }
            }
        }
        let mut archive = self.archive_slot();
        // A group's savepoints keep the pages each message changes in a statement journal,
        // which SQLite otherwise writes to a temporary file past 64 KiB: in memory, bounded by
        // the pages one message changes. Only for the group: elsewhere (a `VACUUM`, which
        // builds the whole file in temporary storage) temporary data stays on disk.
        if let Err(error) = conn.execute_batch("PRAGMA temp_store = MEMORY") {
            return vec![Err(storage(error))];
        }
        let answers = generation::apply_group(
            self.writer(&conn),
            |conn| self.schema_of(conn),
            &mut known,
            &commands[..take],
            self.fence_limits(),
            archive.as_mut(),
            &groups.surveys,
        );
        let _ = conn.execute_batch("PRAGMA temp_store = DEFAULT");
        for command in &commands[..answers.len()] {
            groups.surveys.remove(&command.intent_id);
        }
        groups.last_taken = answers.len();
        answers
    }

    /// [`SessionStore::dry_run`] past its opening checks.
    fn dry_run_sound(
        &self,
        request: &PruneRequest,
        now_ms: i64,
    ) -> Result<Result<DryRun, Refusal>, StoreError> {
        let conn = self.connection();
        let mut known = self.known_slot();
        // A compaction reads the session's snapshots before it takes the write lock.
        let survey = match self
            .schema_of(&conn)
            .and_then(|schema| survey_for(&conn, &schema, &mut known, request))
        {
            Ok(survey) => survey,
            Err(error) => return classify(&error).map(Err),
        };
        // The write lock a prune takes, so that a busy database is reported as a prune would
        // report it; rolled back, nothing is written. Where a read-only store can take no lock
        // (read-only media: SQLite cannot create its -shm or -journal file), a read transaction
        // gives every check the same snapshot.
        // Both guards roll back when dropped, the write lock's hold recorded.
        let (locked, read) = match WriteTxn::begin(&conn, &self.lock_times) {
            Ok(txn) => (Some(txn), None),
            Err(error) => {
                let held = matches!(
                    error.sqlite_error_code(),
                    Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
                );
                if !self.read_only || held {
                    return classify(&error).map(Err);
                }
                match ReadTxn::begin(&conn) {
                    Ok(txn) => (None, Some(txn)),
                    Err(error) => return classify(&error).map(Err),
                }
            }
        };
        let schema = match self.schema_of(&conn) {
            Ok(schema) => schema,
            Err(error) => return classify(&error).map(Err),
        };
        let prepared = generation::dry_run(
            &conn,
            &schema,
            &mut known,
            request,
            now_ms,
            self.fence_limits(),
            survey.as_deref(),
        );
        if let Some(txn) = locked {
            txn.rollback();
        }
        if let Some(txn) = read {
            txn.rollback();
        }
        Ok(match prepared {
            Ok(Prepared::Refuse(refusal)) => Err(refusal),
            Ok(Prepared::Replayed(receipt)) => Ok(DryRun::AlreadyPruned(receipt)),
            Ok(Prepared::Plan((plan, abandoned_run))) => Ok(DryRun::Plan {
                plan,
                abandoned_run,
            }),
            Err(error) => Err(sql_refusal(&error)),
        })
    }
}

impl SessionStore for OpenCodeStore {
    fn location(&self) -> Option<String> {
        let path = self.path.to_str()?;
        (!path.is_empty()).then(|| path.to_string())
    }

    fn database_id(&self) -> Result<Option<String>, StoreError> {
        receipts::database_id(&self.connection()).map_err(storage)
    }

    fn journal_epoch(&self) -> Result<u64, StoreError> {
        receipts::journal_epoch(&self.connection()).map_err(storage)
    }

    fn set_journal_epoch(&self, epoch: u64) -> Result<bool, StoreError> {
        receipts::set_journal_epoch(&self.connection(), epoch).map_err(storage)
    }

    fn receipts_high_water(&self) -> Result<ReceiptsHighWater, StoreError> {
        let (receipts, seq) = receipts::high_water(&self.connection()).map_err(storage)?;
        Ok(ReceiptsHighWater { receipts, seq })
    }

    fn read_message(
        &self,
        request: &PreviewRequest,
    ) -> Result<Result<StoredMessage, Refusal>, StoreError> {
        let conn = self.connection();
        // One read transaction, so the message and its parts are one snapshot.
        let txn = ReadTxn::begin(&conn).map_err(storage)?;
        let read = self.read_message_on(&conn, request);
        txn.end();
        read
    }

    /// `true` when a prune of the message can succeed as far as storage tells: the media is
    /// writable and the message's generation is written here ([`OpenCodeStore::read_only_reason`]),
    /// and for a V1 message the schema profile admits V1 writes ([`Schema::v1_write_refusal`])
    /// and the session's event bookkeeping is consistent. Whether OpenCode is using the
    /// session is left to the fence of `prune` and its dry run.
    fn live_mutation(&self, session_id: &str, message_id: &str) -> bool {
        if self.media_read_only().is_some() {
            return false;
        }
        let conn = self.connection();
        // Unknown (an error): not writable, failing closed.
        match self.writable_generation(&conn, session_id, message_id) {
            Ok((schema, generation)) => generation.admits_prunes(&conn, &schema, session_id),
            Err(_) => false,
        }
    }

    /// With [`Durability::Deferred`] on a WAL database the commit runs with
    /// `synchronous = NORMAL` (the WAL is written, not synced; [`Self::make_durable`] syncs
    /// it); otherwise with `synchronous = FULL`.
    fn apply(&self, command: &PruneCommand<'_>) -> Result<Applied, StoreError> {
        if self.read_only {
            return Err(StoreError::ReadOnly {
                path: self.path.display().to_string(),
                detail: "it was opened for reading only; nothing was written".into(),
            });
        }
        if let Some(refusal) = self.write_gate(Waits::ForTheCheck) {
            return Ok(Applied::Refused(refusal));
        }
        self.noting_damage(self.apply_sound(command))
    }

    /// Takes as many of `commands` as fit in one group transaction (see `super::group`: its
    /// write lock held at most 50 ms) on a WAL database, with `synchronous = NORMAL`
    /// ([`Self::make_durable`] syncs the WAL); a command that must be durable at once, or one
    /// given alone, is applied alone ([`Self::apply`]).
    fn apply_group(&self, commands: &[PruneCommand<'_>]) -> Vec<Result<Applied, StoreError>> {
        let Some(first) = commands.first() else {
            return Vec::new();
        };
        if commands.len() == 1 || first.durability == Durability::Immediate {
            return vec![self.apply(first)];
        }
        let deferred = commands
            .iter()
            .take_while(|command| command.durability == Durability::Deferred)
            .count();
        if self.read_only {
            return vec![self.apply(first)];
        }
        if let Some(refusal) = self.write_gate(Waits::ForTheCheck) {
            return vec![Ok(Applied::Refused(refusal))];
        }
        self.apply_group_sound(&commands[..deferred])
            .into_iter()
            .map(|answer| self.noting_damage(answer))
            .collect()
    }

    fn dry_run(
        &self,
        request: &PruneRequest,
        now_ms: i64,
    ) -> Result<Result<DryRun, Refusal>, StoreError> {
        if let Some(refusal) = self.write_gate(Waits::NotForTheCheck) {
            return Ok(Err(refusal));
        }
        self.noting_damage(self.dry_run_sound(request, now_ms))
    }

    /// Reads what each prune of the batch will remove, each in its own read transaction after
    /// the checks it will run, appends the entries and syncs the archive once (see
    /// `super::archive`). Does nothing when prunes are not archived. A failure here is not an
    /// error: each prune then archives its own rows, and fails as the archive fails.
    fn archive_ahead(&self, commands: &[PruneCommand<'_>]) {
        let conn = self.connection();
        let mut slot = self.archive_slot();
        let Some(archive) = slot.as_mut() else {
            return;
        };
        archive.discard_unused();
        let Ok(schema) = self.schema_of(&conn) else {
            return;
        };
        let Ok(mut known) = self.known(&conn, &schema) else {
            return;
        };
        let limits = self.fence_limits();
        for command in commands {
            let Ok(survey) = survey_for(&conn, &schema, &mut known, command.request) else {
                continue;
            };
            let Ok(txn) = ReadTxn::begin(&conn) else {
                return;
            };
            let rows = generation::capture_ahead(
                &conn,
                &schema,
                &mut known,
                command.request,
                command.now_ms,
                limits,
                survey.as_deref(),
            );
            txn.end();
            if let Ok(Some(rows)) = rows {
                if archive.write_ahead(command, &rows).is_err() {
                    break;
                }
            }
        }
        archive.sync_ahead();
    }

    /// Syncs the WAL file (`<database>-wal`) to disk: every frame a deferred commit wrote is
    /// either still in it or was moved into the database by a checkpoint, which syncs the
    /// database before the WAL is reused. A missing WAL file was checkpointed away.
    fn make_durable(&self) -> Result<(), StoreError> {
        let conn = self.connection();
        if let Some(archive) = self.archive_slot().as_mut() {
            archive.discard_unused();
        }
        if !is_wal(&conn) {
            return Ok(());
        }
        drop(conn);
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

    fn receipt_by_key(&self, request_key: &[u8; 32]) -> Result<Option<Receipt>, StoreError> {
        receipts::by_key(&self.connection(), &hex::encode(request_key)).map_err(storage)
    }

    fn receipt(&self, receipt_id: Uuid) -> Result<Option<Receipt>, StoreError> {
        receipts::by_id(&self.connection(), receipt_id).map_err(storage)
    }

    fn live_request_key(&self, request_key: &[u8; 32]) -> Result<[u8; 32], StoreError> {
        let conn = self.connection();
        let schema = self.schema_of(&conn).map_err(storage)?;
        receipts::live_key(&conn, &schema, *request_key).map_err(storage)
    }

    /// Commits with `synchronous = FULL`. Reads the archive through the store's handle when it
    /// archives prunes, else from the file beside the database.
    fn restore(&self, command: &RestoreCommand<'_>) -> Result<RestoreApplied, StoreError> {
        if self.read_only {
            return Err(StoreError::ReadOnly {
                path: self.path.display().to_string(),
                detail: "it was opened for reading only; nothing was written".into(),
            });
        }
        if let Some(refusal) = self.write_gate(Waits::ForTheCheck) {
            return Ok(RestoreApplied::Refused(refusal));
        }
        let conn = self.connection();
        set_synchronous(&conn, FULL).map_err(storage)?;
        let done = self.noting_damage(self.run_restore(
            &conn,
            command.request,
            Some(command),
            command.now_ms,
        ))?;
        Ok(match done {
            Ok(restore::Done::Restored { receipt, .. }) => RestoreApplied::Restored {
                receipt,
                replayed: false,
            },
            Ok(restore::Done::Replayed(receipt)) => RestoreApplied::Restored {
                receipt,
                replayed: true,
            },
            Err(refusal) => RestoreApplied::Refused(refusal),
        })
    }

    fn restore_dry_run(
        &self,
        request: &RestoreRequest,
        now_ms: i64,
    ) -> Result<Result<RestorePlan, Refusal>, StoreError> {
        if let Some(cause) = self.media_read_only() {
            return Ok(Err(Refusal::new(BlockedReason::UnsupportedStorage, cause)));
        }
        if let Some(refusal) = self.write_gate(Waits::NotForTheCheck) {
            return Ok(Err(refusal));
        }
        let conn = self.connection();
        Ok(
            match self.noting_damage(self.run_restore(&conn, request, None, now_ms))? {
                Ok(restore::Done::Restored { plan, .. }) => Ok(*plan),
                Ok(restore::Done::Replayed(receipt)) => Ok(RestorePlan {
                    pruned: receipts::by_id(&conn, request.receipt_id)
                        .map_err(storage)?
                        .unwrap_or_else(|| (*receipt).clone()),
                    rows: 0,
                    bytes: 0,
                    already: Some(*receipt),
                }),
                Err(refusal) => Err(refusal),
            },
        )
    }

    fn receipts(&self, session_id: Option<&str>) -> Result<Vec<Receipt>, StoreError> {
        receipts::list(&self.connection(), session_id).map_err(storage)
    }

    fn audit(&self, scope: AuditScope<'_>) -> Result<StoreAudit, StoreError> {
        let conn = self.connection();
        // One read transaction: the chain, the rows and the messages are one snapshot. The
        // archive is opened after it began: an entry is durable before its receipt commits, so
        // every receipt in the snapshot finds its entry.
        let txn = ReadTxn::begin(&conn).map_err(storage)?;
        if let Err(error) = conn.query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(())) {
            txn.end();
            return Err(storage(error));
        }
        let archive = if self.path.as_os_str().is_empty() {
            Ok(None)
        } else {
            pruning_archive::ArchiveReader::open(&pruning_archive::path_beside(&self.path))
                .map_err(|error| error.to_string())
        };
        let findings = soundness::integrity_findings(&conn);
        let found = self
            .schema_of(&conn)
            .and_then(|schema| audit::audit(&conn, &schema, scope, archive.as_ref()));
        txn.end();
        let findings = findings.map_err(storage)?;
        if findings.is_empty() {
            let mut found = found.map_err(storage)?;
            if !self.path.as_os_str().is_empty() {
                let folder = super::spill::folder(&self.path);
                let missing = super::spill::missing(&conn, &folder, &|id| scope.admits(id))
                    .map_err(storage)?;
                found.missing_spill_files = missing
                    .into_iter()
                    .map(|(part_id, session_id, file)| MissingSpillFile {
                        session_id,
                        part_id,
                        file,
                    })
                    .collect();
            }
            return Ok(found);
        }
        let damaged = Discrepancy::new(
            DiscrepancyKind::DatabaseDamaged,
            soundness::damage_found(&findings),
        );
        match found {
            Ok(mut found) => {
                found.discrepancies.insert(0, damaged);
                Ok(found)
            }
            // What the damage keeps from being read cannot be audited: the damage is the answer.
            Err(error) if soundness::is_damage(&error) => Ok(StoreAudit {
                discrepancies: vec![damaged],
                ..StoreAudit::default()
            }),
            Err(error) => Err(storage(error)),
        }
    }

    fn scan_history(
        &self,
        scan: &HistoryScan<'_>,
        visit: &mut dyn FnMut(ScannedMessage) -> ControlFlow<()>,
    ) -> Result<Result<ScanEnd, Refusal>, StoreError> {
        match history::scan(&self.connection(), scan, visit) {
            Ok(result) => Ok(result),
            Err(error) => Ok(Err(sql_refusal(&error))),
        }
    }
}

#[cfg(test)]
mod tests {
    //! What the connection settings cost, counted by SQLite's own statement counters.

    use super::*;

    /// A statement taken from the cache again with other parameters is not compiled again: the
    /// cache clears a statement's parameters when it takes it back, and without the query
    /// planner's stability guarantee SQLite recompiles every statement whose plan peeked at one.
    #[test]
    fn cached_statements_are_not_compiled_again_per_use() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("opencode.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL,
               session_id text NOT NULL, time_created integer NOT NULL,
               time_updated integer NOT NULL, data text NOT NULL);
             CREATE INDEX part_message_id_id_idx ON part (message_id, id);
             INSERT INTO part VALUES ('prt_1', 'msg_1', 'ses_1', 1, 1, '{}'),
                                     ('prt_2', 'msg_2', 'ses_1', 1, 1, '{}');",
        )
        .unwrap();
        drop(conn);
        let store = OpenCodeStore::open(&path, StoreOptions::default()).unwrap();
        let conn = store.connection();
        let sql = "SELECT id, data FROM part WHERE message_id = ?1 ORDER BY id";
        for message in ["msg_1", "msg_2", "msg_1", "msg_3"] {
            let mut stmt = conn.prepare_cached(sql).unwrap();
            let rows = stmt
                .query_map([message], |row| row.get::<_, String>(0))
                .unwrap()
                .count();
            assert_eq!(rows, usize::from(message != "msg_3"));
        }
        let stmt = conn.prepare_cached(sql).unwrap();
        assert_eq!(stmt.get_status(rusqlite::StatementStatus::RePrepare), 0);
    }
}
