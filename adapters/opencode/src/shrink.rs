//! Online shrink: the pages prunes freed given back to the file system while OpenCode runs.
//!
//! OpenCode's databases have `auto_vacuum = NONE`: a freed page stays on the file's freelist
//! until a full `VACUUM`, which needs OpenCode stopped. A file switched once to
//! `auto_vacuum = INCREMENTAL` (`vacuum --online-shrink`: the switch takes effect with that
//! VACUUM) keeps pointer-map pages that let SQLite move pages; `PRAGMA incremental_vacuum(N)`
//! then moves up to N pages off the freelist to the end of the file and cuts them off. Each
//! step here is one write transaction holding the lock at most the prune's own budget
//! (`group::LOCK_BUDGET`, 50 ms), sized by how fast the step before it went; between steps the
//! lock is left to OpenCode as long as the step held it. In WAL mode the file itself shrinks
//! when a checkpoint writes the steps back: a passive one at the end (it takes no lock), then a
//! truncating one of the WAL that gives up at once when a reader or writer is there.
//! Source: docs/ARCHITECTURE.md, "Online shrink".

use std::time::Duration;

use rusqlite::{Connection, ErrorCode};
use serde::Serialize;

use super::group::LOCK_BUDGET;
use super::lock_times::{Held, LockTimes};
use super::txn::WriteTxn;

/// A file's `auto_vacuum` mode (`PRAGMA auto_vacuum`: 0, 1 or 2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AutoVacuum {
    /// 0, OpenCode's: freed pages stay in the file until `VACUUM`.
    #[default]
    None,
    /// 1: SQLite gives freed pages back at every commit (OpenCode never sets it).
    Full,
    /// 2: freed pages are given back by `PRAGMA incremental_vacuum`, as a clean does.
    Incremental,
}

impl AutoVacuum {
    /// The mode the connection's file has.
    pub(crate) fn of(conn: &Connection) -> rusqlite::Result<Self> {
        let mode: i64 = conn.query_row("PRAGMA auto_vacuum", [], |row| row.get(0))?;
        Ok(match mode {
            1 => Self::Full,
            2 => Self::Incremental,
            _ => Self::None,
        })
    }
}

/// What giving pages back did: `pages` moved off the freelist and cut off the file, in `steps`
/// write transactions; `bytes` is `pages` times the page size. `left_pages` stayed on the
/// freelist because `stopped` says why (OpenCode held the write lock, the time allowed ran
/// out, Ctrl-C); 0 when every free page was given back. `file_bytes_before` and `file_bytes_after` are
/// the database file's size (without its WAL) before the first step and after the last
/// checkpoint: the file shrinks only once a checkpoint wrote the steps back, so it may be
/// larger than `file_bytes_before - bytes` while a reader of OpenCode holds the WAL.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GivenBack {
    /// Pages moved off the freelist and cut off.
    pub pages: u64,
    /// `pages` in bytes.
    pub bytes: u64,
    /// Write transactions it took.
    pub steps: u64,
    /// The longest of them, from `BEGIN IMMEDIATE` to the end of its `COMMIT`, in ms (0
    /// without steps): what OpenCode may have waited for the lock at most.
    pub longest_step_ms: f64,
    /// Free pages left in the file.
    pub left_pages: u64,
    /// Why pages were left, in words; `None` when none were.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// The database file's size before, bytes.
    pub file_bytes_before: u64,
    /// The database file's size after the last checkpoint, bytes.
    pub file_bytes_after: u64,
}

/// The hold a step aims at: a third of the budget, so that a step slower than the ones before
/// it (pages farther apart, a busier disk, a core taken by another process) still ends inside
/// [`LOCK_BUDGET`]: on two loaded cores a step aimed at half the budget held the lock 58 ms.
const STEP_TARGET: Duration = Duration::from_micros(LOCK_BUDGET.as_micros() as u64 / 3);

/// Pages of the first step: 4 MiB of 4 KiB pages, which a quiet machine moves in a few ms.
const FIRST_STEP_PAGES: u64 = 1024;

/// The fewest pages a step asks for, however slow the steps before it were.
const LEAST_STEP_PAGES: u64 = 16;

/// How long a step waits in all for OpenCode to leave the write lock before the give back stops
/// (it goes on at the next clean): OpenCode's own commits hold it a few ms.
const BUSY_PATIENCE: Duration = Duration::from_millis(500);

/// Gives back the free pages of the connection's file, step after step, until none are left,
/// `stop()` answers true (asked before each step), or OpenCode keeps the write lock for
/// [`BUSY_PATIENCE`]. The file must be
/// [`AutoVacuum::Incremental`] (on any other it does nothing and says so in `stopped`). Each
/// step's hold goes into `held`. The connection must not be inside a transaction.
///
/// Errors: SQLite's, other than the busy write lock (a full disk, an I/O error): the steps
/// before it stand, each committed on its own.
pub(crate) fn give_back(
    conn: &Connection,
    path: &std::path::Path,
    held: &LockTimes,
    stop: &dyn Fn() -> bool,
) -> rusqlite::Result<GivenBack> {
    let file_size = || std::fs::metadata(path).map_or(0, |meta| meta.len());
    let page_size = pragma(conn, "page_size")?;
    let mut done = GivenBack {
        file_bytes_before: file_size(),
        ..GivenBack::default()
    };
    if AutoVacuum::of(conn)? != AutoVacuum::Incremental {
        done.left_pages = pragma(conn, "freelist_count")?;
        done.stopped = Some("the file's auto_vacuum is not incremental".into());
        done.file_bytes_after = done.file_bytes_before;
        return Ok(done);
    }
    let mut step_pages = FIRST_STEP_PAGES;
    let mut waited = Duration::ZERO;
    loop {
        let free = pragma(conn, "freelist_count")?;
        done.left_pages = free;
        if free == 0 {
            break;
        }
        if stop() {
            done.stopped = Some("it was stopped".into());
            break;
        }
        let asked = step_pages.min(free);
        match step(conn, held, asked)? {
            Step::Busy => {
                if waited >= BUSY_PATIENCE {
                    done.stopped = Some("OpenCode kept the write lock".into());
                    break;
                }
                let pause = Duration::from_millis(10);
                std::thread::sleep(pause);
                waited += pause;
            }
            Step::Took(took) => {
                let after = pragma(conn, "freelist_count")?;
                let moved = free.saturating_sub(after);
                done.pages += moved;
                done.steps += 1;
                if moved == 0 {
                    // SQLite took none of them: nothing more will come of another step.
                    done.left_pages = after;
                    done.stopped = Some("SQLite gave back no page".into());
                    break;
                }
                done.longest_step_ms = done.longest_step_ms.max(took.as_secs_f64() * 1000.0);
                step_pages = next_step(asked, took);
                // The lock is OpenCode's for as long as the step held it.
                std::thread::sleep(took);
            }
        }
    }
    done.bytes = done.pages.saturating_mul(page_size);
    if done.pages > 0 {
        checkpoint(conn, held)?;
    }
    done.file_bytes_after = file_size();
    Ok(done)
}

/// What one step did.
enum Step {
    /// Another connection held the write lock: nothing was done.
    Busy,
    /// The step committed, holding the lock this long (to its release, as `LockTimes` counts).
    Took(Duration),
}

/// One write transaction giving back up to `pages` pages.
fn step(conn: &Connection, held: &LockTimes, pages: u64) -> rusqlite::Result<Step> {
    let txn = match WriteTxn::begin(conn, held) {
        Ok(txn) => txn,
        Err(error) if is_busy(&error) => return Ok(Step::Busy),
        Err(error) => return Err(error),
    };
    // SQLite moves one page per step of the statement: it is stepped to its end.
    let moved = conn
        .prepare(&format!("PRAGMA incremental_vacuum({pages})"))
        .and_then(|mut statement| {
            let mut rows = statement.query([])?;
            while rows.next()?.is_some() {}
            Ok(())
        });
    // The hold ends when the commit released the lock (the store's WAL hook marks it): the
    // checkpoint the hook may run after it holds no lock, and is neither counted nor paced.
    let took = match moved {
        Ok(()) => txn.commit().map_err(|failed| failed.error)?,
        Err(error) => {
            txn.rollback();
            return Err(error);
        }
    };
    Ok(Step::Took(took))
}

/// The pages of the next step, from the last one's `pages` and hold: as many as fit in
/// [`STEP_TARGET`] at its pace, at most half as many again, at least [`LEAST_STEP_PAGES`].
fn next_step(pages: u64, took: Duration) -> u64 {
    let took_us = took.as_micros().max(1);
    let fit = u128::from(pages) * STEP_TARGET.as_micros() / took_us;
    let most = pages.saturating_add(pages / 2).max(LEAST_STEP_PAGES);
    u64::try_from(fit)
        .unwrap_or(u64::MAX)
        .clamp(LEAST_STEP_PAGES, most)
}

/// Writes the steps back into the database file, which cuts it to its new size: a passive
/// checkpoint (no lock; it stops short where a reader still needs the WAL), then the WAL
/// truncated when nothing is left in it to copy and nobody waits (busy: skipped). In rollback
/// journal mode the file was cut at each commit: nothing to do.
fn checkpoint(conn: &Connection, held: &LockTimes) -> rusqlite::Result<()> {
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Ok(());
    }
    // (busy, frames in the WAL, frames written back)
    let (_, frames, copied): (i64, i64, i64) =
        conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })?;
    if frames != copied {
        // A reader of OpenCode still needs the WAL: the file shrinks at a later checkpoint.
        return Ok(());
    }
    let lock = Held::began();
    let truncated = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
    held.record(lock);
    match truncated {
        Err(error) if is_busy(&error) => Ok(()),
        other => other,
    }
}

fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

fn pragma(conn: &Connection, name: &str) -> rusqlite::Result<u64> {
    let value: i64 = conn.query_row(&format!("PRAGMA {name}"), [], |row| row.get(0))?;
    Ok(value.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_is_sized_by_the_pace_of_the_last_one() {
        // 1024 pages in 50 ms: a third as many fit in 16.666 ms.
        assert_eq!(next_step(1024, Duration::from_millis(50)), 341);
        // A fast step makes the next at most half as large again.
        assert_eq!(next_step(1024, Duration::from_micros(10)), 1536);
        // However slow, a step asks for at least 16 pages.
        assert_eq!(next_step(100, Duration::from_secs(10)), LEAST_STEP_PAGES);
        assert_eq!(next_step(4, Duration::from_micros(1)), LEAST_STEP_PAGES);
    }
}
