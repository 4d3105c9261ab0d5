//! How long this store held SQLite's write lock: one duration per write transaction, from its
//! `BEGIN IMMEDIATE` to the end of its `COMMIT` or `ROLLBACK` (a group transaction of prunes, a
//! prune, a compaction, a diffs prune, a restore, and the dry runs that take the lock to report
//! a busy database as a prune would). In WAL mode a `COMMIT` ends when SQLite calls the
//! connection's WAL hook ([`Released`]): the lock is released then, and the checkpoint that may
//! follow does not hold it. OpenCode waits up to 5 s for the lock (`busy_timeout = 5000`), so these are what a
//! clean costs the OpenCode beside it (docs/ARCHITECTURE.md, "Bulk work").
//!
//! It also paces them ([`LockTimes::rest_if_due`]): short holds taken one after another can
//! still keep a waiting writer out for its whole 5 s, since SQLite's busy handler does not queue
//! for the lock but sleeps and polls it, and a poll lands in the brief gaps between holds only by
//! chance. After [`REST_AFTER`] of holds with no longer gap, the store leaves the lock free for
//! [`REST`] before it takes it again, unless it last found no other process holding the
//! database's files ([`LockTimes::alone`]; docs/ARCHITECTURE.md, "Group transactions").

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

/// Holds of the write lock, in all, after which the store leaves it free for [`REST`] before it
/// takes it again: 250 ms (five of the longest group transactions).
pub(crate) const REST_AFTER: Duration = Duration::from_millis(250);

/// How long the store leaves the write lock free after [`REST_AFTER`] of holds: 120 ms, longer
/// than the longest sleep of SQLite's default busy handler (100 ms, `sqliteDefaultBusyCallback`),
/// which OpenCode's `busy_timeout = 5000` runs, so that a writer waiting for the lock polls it
/// at least once while it is free. A writer beside a clean then waits at most about
/// `REST_AFTER` plus one hold.
pub(crate) const REST: Duration = Duration::from_millis(120);

/// The durations recorded so far, in µs, and the pace of the holds.
#[derive(Debug, Default)]
pub struct LockTimes {
    held_us: Mutex<Vec<u64>>,
    released: Released,
    pace: Mutex<Pace>,
    /// Whether no other process held the database's files when last looked at (then no rest
    /// is due: nobody waits for the lock). False until a look found so.
    alone: AtomicBool,
}

/// The holds since the lock was last left free for [`REST`].
#[derive(Debug, Default, Clone, Copy)]
struct Pace {
    /// Their sum.
    held: Duration,
    /// When the last one ended; `None` before the first.
    last_end: Option<Instant>,
}

impl Pace {
    /// A hold that ended at `end`, `hold` long.
    fn held(&mut self, hold: Duration, end: Instant) {
        if self
            .last_end
            .is_some_and(|last| end.duration_since(last) >= REST + hold)
        {
            // The lock was free for a rest before this hold began.
            self.held = Duration::ZERO;
        }
        self.held += hold;
        self.last_end = Some(end);
    }

    /// How long to leave the lock free, at `now`, before taking it again (zero when no rest is
    /// due), and the pace after it.
    fn rest_at(self, now: Instant) -> (Duration, Self) {
        let Some(last_end) = self.last_end else {
            return (Duration::ZERO, self);
        };
        let free = now.saturating_duration_since(last_end);
        let rested = Self {
            held: Duration::ZERO,
            last_end: self.last_end,
        };
        if free >= REST {
            (Duration::ZERO, rested)
        } else if self.held >= REST_AFTER {
            (REST - free, rested)
        } else {
            (Duration::ZERO, self)
        }
    }
}

/// When the connection's last `COMMIT` in WAL mode released the write lock: set by its WAL hook,
/// which SQLite calls once the commit's frames are in the WAL and the lock is released.
#[derive(Debug, Clone, Default)]
pub(crate) struct Released(Arc<Mutex<Option<Instant>>>);

impl Released {
    /// The lock was released now.
    pub(crate) fn now(&self) {
        *self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(Instant::now());
    }

    /// The last release, forgotten.
    fn take(&self) -> Option<Instant> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
    }
}

/// A summary of `LockTimes`: `--json` of a clean writes it as `writeLock`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LockSummary {
    /// Write transactions.
    pub transactions: u64,
    /// Median hold, in ms (nearest rank; 0 without transactions).
    pub p50_ms: f64,
    /// 99th percentile hold, in ms (nearest rank).
    pub p99_ms: f64,
    /// Longest hold, in ms.
    pub max_ms: f64,
}

/// A write lock taken at [`Held::began`]; [`LockTimes::record`] ends it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Held {
    began: Instant,
}

impl Held {
    /// The lock was taken now.
    pub(crate) fn began() -> Self {
        Self {
            began: Instant::now(),
        }
    }
}

impl LockTimes {
    /// What the connection's WAL hook marks ([`Released`]).
    pub(crate) fn released(&self) -> Released {
        self.released.clone()
    }

    /// Records a hold that ends now, or when the WAL hook marked the lock released since it
    /// began (a checkpoint the hook runs after the release is not counted), and answers it.
    pub(crate) fn record(&self, held: Held) -> std::time::Duration {
        let end = self
            .released
            .take()
            .filter(|released| *released >= held.began)
            .unwrap_or_else(Instant::now);
        let hold = end.duration_since(held.began);
        self.pace
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .held(hold, end);
        let us = u64::try_from(hold.as_micros()).unwrap_or(u64::MAX);
        self.held_us
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(us);
        hold
    }

    /// Sleeps, before the store takes the write lock, for what is left of a [`REST`] when the
    /// holds since the last one reached [`REST_AFTER`]; returns at once otherwise. Call it right
    /// before each `BEGIN IMMEDIATE`. Returns the rest taken.
    pub(crate) fn rest_if_due(&self) -> Duration {
        if self.alone.load(Ordering::Relaxed) {
            return Duration::ZERO;
        }
        let mut pace = self
            .pace
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let (rest, after) = pace.rest_at(Instant::now());
        *pace = after;
        drop(pace);
        if !rest.is_zero() {
            std::thread::sleep(rest);
        }
        rest
    }

    /// Records whether a look at the processes holding the database's files found none but
    /// this one (`true`) or could not tell or found some (`false`): with none, no rest is due.
    pub(crate) fn alone(&self, alone: bool) {
        self.alone.store(alone, Ordering::Relaxed);
    }

    /// The summary of every hold recorded so far.
    pub fn summary(&self) -> LockSummary {
        let mut held = self
            .held_us
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        held.sort_unstable();
        let ms = |us: u64| us as f64 / 1000.0;
        // Nearest rank: the smallest hold at least `pct` percent of the holds do not exceed.
        let rank = |pct: usize| {
            let at = (held.len() * pct).div_ceil(100).max(1) - 1;
            held.get(at).copied().map_or(0.0, ms)
        };
        LockSummary {
            transactions: held.len() as u64,
            p50_ms: rank(50),
            p99_ms: rank(99),
            max_ms: held.last().copied().map_or(0.0, ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// The pace after holds of `holds` ms, each followed by a gap of `gap` ms, from `start`.
    fn paced(start: Instant, holds: &[u64], gap: u64) -> (Pace, Instant) {
        let mut pace = Pace::default();
        let mut at = start;
        for &hold in holds {
            at += MS * hold as u32;
            pace.held(MS * hold as u32, at);
            at += MS * gap as u32;
        }
        (pace, at)
    }

    #[test]
    fn holds_back_to_back_rest_the_lock_once_they_reach_the_bound() {
        let start = Instant::now();
        let (pace, at) = paced(start, &[40; 6], 1);
        assert_eq!(pace.held, 240 * MS);
        assert_eq!(pace.rest_at(at).0, Duration::ZERO);
        let (pace, at) = paced(start, &[40; 7], 1);
        let (rest, after) = pace.rest_at(at);
        // The last gap (1 ms) counts toward the rest.
        assert_eq!(rest, REST - MS);
        assert_eq!(after.held, Duration::ZERO);
        assert_eq!(after.rest_at(at).0, Duration::ZERO);
    }

    #[test]
    fn a_gap_as_long_as_a_rest_is_one() {
        let start = Instant::now();
        let (pace, at) = paced(start, &[200, 200], 120);
        assert_eq!(
            pace.held,
            200 * MS,
            "the gap before the second hold was a rest"
        );
        assert_eq!(pace.rest_at(at).0, Duration::ZERO);
        let (pace, at) = paced(start, &[200, 200], 119);
        assert_eq!(pace.held, 400 * MS);
        assert_eq!(
            pace.rest_at(at).0,
            MS,
            "119 ms free since: 1 ms of the rest is left"
        );
        assert_eq!(pace.rest_at(at - 100 * MS).0, 101 * MS);
    }

    /// A hold of 300 ms recorded as ending now.
    fn held_300_ms(times: &LockTimes) {
        times.record(Held {
            began: Instant::now() - 300 * MS,
        });
    }

    #[test]
    fn the_store_rests_after_long_holds_unless_nobody_else_holds_the_database() {
        let times = LockTimes::default();
        held_300_ms(&times);
        let rest = times.rest_if_due();
        assert!(rest > Duration::ZERO && rest <= REST, "{rest:?}");
        assert_eq!(times.rest_if_due(), Duration::ZERO, "rested");

        let times = LockTimes::default();
        times.alone(true);
        held_300_ms(&times);
        assert_eq!(times.rest_if_due(), Duration::ZERO);
        times.alone(false);
        assert!(times.rest_if_due() > Duration::ZERO);
    }

    #[test]
    fn no_rest_is_due_before_the_first_hold() {
        assert_eq!(Pace::default().rest_at(Instant::now()).0, Duration::ZERO);
    }

    #[test]
    fn the_summary_ranks_the_holds() {
        let times = LockTimes::default();
        assert_eq!(times.summary(), LockSummary::default());
        times
            .held_us
            .lock()
            .unwrap()
            .extend((1..=200).rev().map(|ms| ms * 1000));
        assert_eq!(
            times.summary(),
            LockSummary {
                transactions: 200,
                p50_ms: 100.0,
                p99_ms: 198.0,
                max_ms: 200.0,
            }
        );
    }
}
