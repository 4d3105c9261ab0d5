//! The integrity check run beside other work: `PRAGMA integrity_check` on a read-only
//! connection of its own, on a thread of its own, while the store's connection goes on reading
//! (a clean surveys and plans meanwhile). The store keeps the running check and lets no write
//! begin until it has answered `ok` (docs/ARCHITECTURE.md, "Sound files").

use std::path::Path;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};
use serde::Serialize;

use super::soundness::integrity_findings;

/// How long a store's integrity check took, and how long its first write (or whoever asked
/// for its answer) waited for it; ms. Shown by `clean --timings`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IntegrityTimes {
    /// The check, from its start to its answer, ms.
    pub check_ms: f64,
    /// How long the work that needed its answer waited for it, ms: the whole check when it
    /// ran before that work, less when it ran beside it.
    pub waited_ms: f64,
    /// Whether it ran beside other work (on a thread of its own) rather than before it.
    pub overlapped: bool,
}

/// A check running on its own thread.
pub(crate) struct Running {
    handle: JoinHandle<Found>,
}

/// What the thread found: the findings (empty when sound), or why it could not check (it
/// could not open its own connection, or SQLite failed for another reason than damage), and
/// how long it ran.
struct Found {
    findings: Result<Vec<String>, String>,
    took: Duration,
}

impl Running {
    /// Starts the check of the database file at `path` on a thread of its own.
    pub(crate) fn start(path: &Path) -> Self {
        let path = path.to_path_buf();
        let handle = std::thread::spawn(move || {
            let started = Instant::now();
            let findings = check(&path);
            Found {
                findings,
                took: started.elapsed(),
            }
        });
        Self { handle }
    }

    /// Whether the check has answered (waiting for it would not wait).
    pub(crate) fn answered(&self) -> bool {
        self.handle.is_finished()
    }

    /// Waits for the answer: the findings (empty when sound) and the check's time, or why
    /// it could not run beside (the caller then checks on its own connection).
    pub(crate) fn wait(self) -> Result<(Vec<String>, IntegrityTimes), String> {
        let waiting = Instant::now();
        let found = self
            .handle
            .join()
            .map_err(|_| "the integrity check's thread ended unexpectedly".to_string())?;
        let times = IntegrityTimes {
            check_ms: found.took.as_secs_f64() * 1e3,
            waited_ms: waiting.elapsed().as_secs_f64() * 1e3,
            overlapped: true,
        };
        found.findings.map(|findings| (findings, times))
    }
}

/// KiB of page cache the check's connection keeps: 8,000, as the store's own connection. The
/// check looks every row up in each of its table's indexes, and the indexes' inner pages must
/// stay in the cache for that: measured on a generated 10 GB database, SQLite's default of
/// 2,000 KiB took 37.7 s, 4,000 took 35.9 s, 6,000 took 26.2 s and 8,000 took 25.4 to 28.6 s.
const CHECK_CACHE_KIB: u32 = 8_000;

/// The check on a read-only connection of its own. The store that started it holds the file
/// open, so its `-shm` index exists and a plain read-only open reads the latest commits.
fn check(path: &Path) -> Result<Vec<String>, String> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| e.to_string())?;
    // A reader may meet another process opening the WAL index: wait briefly, as read
    // commands do.
    conn.busy_timeout(Duration::from_secs(5))
        .map_err(|e| e.to_string())?;
    conn.execute_batch(&format!("PRAGMA cache_size = -{CHECK_CACHE_KIB}"))
        .map_err(|e| e.to_string())?;
    integrity_findings(&conn).map_err(|e| e.to_string())
}
