//! Opening a journal: acquiring the file (retrying for a bounded time while another handle
//! holds it), refusing an unknown format version, and initialising a new file (all tables and
//! the `format_version` meta entry, in one durable transaction).

use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use redb::{
    Database, DatabaseError, Durability, ReadableDatabase, ReadableTableMetadata, TableError,
};

use super::{
    Journal, StorageResult, EVENTS, INTENTS, META, META_FORMAT_VERSION, OPEN_RETRY, PENDING,
    REQUEST_KEYS,
};
use crate::codec::FORMAT_VERSION;
use crate::error::OpenError;

/// Pause between two attempts to acquire a locked file.
const RETRY_PAUSE: Duration = Duration::from_millis(20);

/// redb page cache budget of one handle, in bytes. The working set is small (the newest pages of
/// each table); redb keeps what it reads and writes up to this budget, so a larger one only
/// grows the memory of a long clean with the journal (64 MiB made a clean of 10 GB hold 116 MiB).
const CACHE_BYTES: usize = 8 * 1024 * 1024;

impl Journal {
    /// Opens or creates the journal file at `path`.
    ///
    /// A new (absent or empty) file gets all tables and the `format_version` meta entry in one
    /// durable transaction. An existing file is only checked (the journal writes nothing to it).
    ///
    /// Errors: [`OpenError::Locked`] when another handle (this process or another) still holds
    /// the file after retrying for [`OPEN_RETRY`] (2 s) with short pauses;
    /// [`OpenError::UnknownFormatVersion`] when the file's format version is not
    /// [`FORMAT_VERSION`]; [`OpenError::MissingFormatVersion`] / [`OpenError::MalformedMeta`]
    /// for a damaged meta table; [`OpenError::NotAJournal`] for a file that is not a redb file
    /// (nothing written to it); [`OpenError::Damaged`] for one whose redb structure is damaged
    /// (truncated, say; nothing written to it); [`OpenError::Database`] when redb cannot open
    /// the file otherwise (I/O); [`OpenError::Storage`] for a storage error while checking.
    pub fn open(path: &Path) -> Result<Journal, OpenError> {
        Self::open_with_retry(path, OPEN_RETRY)
    }

    /// [`Journal::open`] with a retry window of `retry` instead of [`OPEN_RETRY`] (for tests).
    #[doc(hidden)]
    pub fn open_with_retry(path: &Path, retry: Duration) -> Result<Journal, OpenError> {
        if !path.exists() {
            create_in_place(path, initialise)?;
        }
        let started = Instant::now();
        loop {
            match guarded(path, || builder().create(path))? {
                Ok(db) => return guarded(path, || Self::checked(db))?,
                Err(DatabaseError::DatabaseAlreadyOpen) => {
                    let waited = started.elapsed();
                    if waited >= retry {
                        return Err(OpenError::Locked {
                            path: path.to_path_buf(),
                            waited,
                        });
                    }
                    thread::sleep(RETRY_PAUSE.min(retry - waited));
                }
                Err(other) => return Err(not_opened(path, other)),
            }
        }
    }

    /// Opens an existing journal file for reading only: nothing is ever written to the file (no
    /// open mark, no fsync), so it works on a read-only file, folder or mount. Retries like
    /// [`Journal::open`] while a writable handle (another process's prune or `serve`) holds
    /// the file. Every write of the handle is refused ([`crate::WriteError::ReadOnly`]).
    ///
    /// Errors: as [`Journal::open`], and [`OpenError::NeedsRepair`] for a file that a killed
    /// process left unclosed (open it writable once to repair it); an absent file is
    /// [`OpenError::Database`] with redb's I/O error (callers check for the file first).
    pub fn open_read_only(path: &Path) -> Result<Journal, OpenError> {
        let started = Instant::now();
        loop {
            match guarded(path, || builder().open_read_only(path))? {
                Ok(db) => {
                    let journal = Journal::read_only_from(db);
                    guarded(path, || check_version(stored_format_version_in(&journal)?))??;
                    return Ok(journal);
                }
                Err(DatabaseError::DatabaseAlreadyOpen) => {
                    let waited = started.elapsed();
                    if waited >= OPEN_RETRY {
                        return Err(OpenError::Locked {
                            path: path.to_path_buf(),
                            waited,
                        });
                    }
                    thread::sleep(RETRY_PAUSE.min(OPEN_RETRY - waited));
                }
                Err(DatabaseError::RepairAborted) => {
                    return Err(OpenError::NeedsRepair {
                        path: path.to_path_buf(),
                    })
                }
                Err(other) => return Err(not_opened(path, other)),
            }
        }
    }

    /// A new, empty journal that lives in memory and is gone when dropped: for a process that
    /// only reads where no journal file exists (nothing was journaled there), such as `serve`
    /// on read-only media. It accepts writes like any journal; they are never durable.
    ///
    /// Errors: as [`Journal::open_with_backend`] (none is expected for memory).
    pub fn in_memory() -> Result<Journal, OpenError> {
        Self::open_with_backend(redb::backends::InMemoryBackend::new())
    }

    /// Opens or creates a journal on a custom redb storage backend (for tests that simulate
    /// failing storage). No retry: a held backend is [`OpenError::BackendLocked`]. Otherwise as
    /// [`Journal::open`].
    #[doc(hidden)]
    pub fn open_with_backend(backend: impl redb::StorageBackend) -> Result<Journal, OpenError> {
        match builder().create_with_backend(backend) {
            Ok(db) => Self::checked(db),
            Err(DatabaseError::DatabaseAlreadyOpen) => Err(OpenError::BackendLocked),
            Err(other) => Err(OpenError::Database(other)),
        }
    }

    /// Checks the format version of a freshly opened database, initialising a new one.
    fn checked(db: Database) -> Result<Journal, OpenError> {
        match check_version(stored_format_version(&db)?)? {
            true => {}
            false => initialise(&db)?,
        }
        Ok(Journal::from_parts(db))
    }
}

/// `true` for this build's format version, `false` for none (a new file); an error for any
/// other version.
fn check_version(found: Option<u8>) -> Result<bool, OpenError> {
    match found {
        Some(FORMAT_VERSION) => Ok(true),
        Some(found) => Err(OpenError::UnknownFormatVersion {
            found,
            supported: FORMAT_VERSION,
        }),
        None => Ok(false),
    }
}

/// [`stored_format_version`] through a journal handle (read-only ones included).
fn stored_format_version_in(journal: &Journal) -> Result<Option<u8>, OpenError> {
    let txn = journal.db.begin_read().storage()?;
    format_version_of(&txn)
}

/// The permission bits a new journal file is created with (less the process's umask): read and
/// write for its owner only.
const JOURNAL_MODE: u32 = 0o600;

/// Creates a new journal at `path`, readable by its owner only ([`JOURNAL_MODE`]) and made
/// by `make` (which [`initialise`]s it, at least), without ever leaving a half-made file there:
/// the file is built and made durable under a temporary name beside it, then linked into place
/// (which fails, harmlessly, if another process got there first: `false`), and the folder is
/// synced. A crash midway leaves at most the temporary file, which the next creation replaces.
pub(super) fn create_in_place(
    path: &Path,
    make: impl FnOnce(&Database) -> Result<(), OpenError>,
) -> Result<bool, OpenError> {
    let create_error = |source: std::io::Error| OpenError::Create {
        path: path.to_path_buf(),
        source,
    };
    let name = path
        .file_name()
        .ok_or_else(|| create_error(std::io::Error::other("the journal path has no file name")))?;
    let mut temporary = std::ffi::OsString::from(".");
    temporary.push(name);
    temporary.push(format!(".creating-{}", std::process::id()));
    let temporary = path.with_file_name(temporary);
    remove_abandoned_creations(path);
    match std::fs::remove_file(&temporary) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(create_error(e)),
    }
    {
        // Readable by its owner only: the journal names every session and message pruned, and
        // the database beside it may be as private (OpenCode 2 keeps its file at 0600). redb
        // initialises the empty file.
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(JOURNAL_MODE)
            .open(&temporary)
            .map_err(create_error)?;
        let db = builder().create(&temporary).map_err(OpenError::Database)?;
        make(&db)?;
    }
    let linked = std::fs::hard_link(&temporary, path);
    let _ = std::fs::remove_file(&temporary);
    match linked {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
        Err(e) => return Err(create_error(e)),
    }
    let folder = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    std::fs::File::open(folder)
        .and_then(|dir| dir.sync_all())
        .map_err(create_error)?;
    Ok(true)
}

/// Removes `.<name>.creating-<pid>` files left beside `path` by creations whose process is gone
/// (best-effort; only where `/proc` tells which processes are alive).
fn remove_abandoned_creations(path: &Path) {
    let (Some(folder), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    let folder = if folder.as_os_str().is_empty() {
        Path::new(".")
    } else {
        folder
    };
    if !Path::new("/proc/self").exists() {
        return;
    }
    let prefix = format!(".{}.creating-", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(pid) = file.to_str().and_then(|f| f.strip_prefix(&prefix)) else {
            continue;
        };
        let alive = pid
            .parse::<u32>()
            .is_ok_and(|pid| Path::new("/proc").join(pid.to_string()).exists());
        if !alive {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The redb configuration every journal handle uses.
fn builder() -> redb::Builder {
    let mut builder = Database::builder();
    builder.set_cache_size(CACHE_BYTES);
    builder
}

/// The `format_version` meta entry, or `None` for a file without one (a new file).
fn stored_format_version(db: &Database) -> Result<Option<u8>, OpenError> {
    let txn = db.begin_read().storage()?;
    format_version_of(&txn)
}

/// The `format_version` meta entry as one read transaction sees it.
fn format_version_of(txn: &redb::ReadTransaction) -> Result<Option<u8>, OpenError> {
    let meta = match txn.open_table(META) {
        Ok(meta) => meta,
        Err(TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(other) => return Err(redb::Error::from(other).into()),
    };
    let Some(value) = meta.get(META_FORMAT_VERSION).storage()? else {
        return Ok(None);
    };
    match value.value() {
        [version] => Ok(Some(*version)),
        other => Err(OpenError::MalformedMeta {
            key: META_FORMAT_VERSION,
            len: other.len(),
        }),
    }
}

/// Creates every table and writes `format_version`, durably. Refuses a file that already
/// holds intents or events without a format version.
pub(super) fn initialise(db: &Database) -> Result<(), OpenError> {
    let mut txn = db.begin_write().storage()?;
    txn.set_durability(Durability::Immediate).storage()?;
    {
        let intents = txn.open_table(INTENTS).storage()?;
        let events = txn.open_table(EVENTS).storage()?;
        txn.open_table(REQUEST_KEYS).storage()?;
        txn.open_table(PENDING).storage()?;
        let mut meta = txn.open_table(META).storage()?;
        if !intents.is_empty().storage()? || !events.is_empty().storage()? {
            return Err(OpenError::MissingFormatVersion);
        }
        meta.insert(META_FORMAT_VERSION, [FORMAT_VERSION].as_slice())
            .storage()?;
    }
    txn.commit().storage()?;
    Ok(())
}

thread_local! {
    /// Whether this thread is inside a [`guarded`] open.
    static GUARDED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether a panic on this thread now is one a journal open turns into
/// [`OpenError::Damaged`] (redb meeting a damaged file): a panic hook need not print it, the
/// error says it in words.
pub fn panic_is_reported() -> bool {
    GUARDED.with(std::cell::Cell::get)
}

/// Runs redb's open of `path`, a file that may be damaged in ways redb meets with a panic
/// (a malformed allocator state, say) rather than an error: such a panic is the file's damage,
/// [`OpenError::Damaged`], and nothing was written to it (redb panics while it reads).
fn guarded<T>(path: &Path, open: impl FnOnce() -> T) -> Result<T, OpenError> {
    catching(open).map_err(|what| OpenError::Damaged {
        path: path.to_path_buf(),
        detail: what,
    })
}

/// Runs `body`, turning a panic inside it (redb meeting a damaged page) into `Err` with the
/// panic's message, not printed by a panic hook that asks [`panic_is_reported`].
pub(crate) fn catching<T>(body: impl FnOnce() -> T) -> Result<T, String> {
    let outer = GUARDED.with(|guarded| guarded.replace(true));
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
    GUARDED.with(|guarded| guarded.set(outer));
    ran.map_err(|panic| {
        panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "its pages do not read".into())
    })
}

/// The error for a journal file redb could not open: a file that is not a redb file at all
/// ([`OpenError::NotAJournal`]: redb reports its magic bytes as invalid data, before it writes
/// anything), one whose structure is damaged ([`OpenError::Damaged`]: redb's `Corrupted`, or a
/// file that ends inside its header), or redb's own error.
fn not_opened(path: &Path, error: DatabaseError) -> OpenError {
    match error {
        DatabaseError::Storage(redb::StorageError::Io(io))
            if io.kind() == std::io::ErrorKind::InvalidData =>
        {
            OpenError::NotAJournal {
                path: path.to_path_buf(),
            }
        }
        DatabaseError::Storage(redb::StorageError::Io(io))
            if io.kind() == std::io::ErrorKind::UnexpectedEof =>
        {
            OpenError::Damaged {
                path: path.to_path_buf(),
                detail: "the file ends inside its header".into(),
            }
        }
        DatabaseError::Storage(redb::StorageError::Corrupted(detail)) => OpenError::Damaged {
            path: path.to_path_buf(),
            detail,
        },
        other => OpenError::Database(other),
    }
}
