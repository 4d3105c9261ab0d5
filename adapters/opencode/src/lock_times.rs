//! How long this store held SQLite's write lock: one duration per write transaction, from its
//! `BEGIN IMMEDIATE` to the end of its `COMMIT` or `ROLLBACK` (a group transaction of prunes, a
//! prune, a compaction, a diffs prune, a restore, and the dry runs that take the lock to report
//! a busy database as a prune would). In WAL mode a `COMMIT` ends when SQLite calls the
//! connection's WAL hook ([`Released`]): the lock is released then, and the checkpoint that may
//! follow does not hold it. OpenCode waits up to 5 s for the lock (`busy_timeout = 5000`), so these are what a
//! clean costs the OpenCode beside it (docs/ARCHITECTURE.md, "Bulk work").

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;

/// The durations recorded so far, in µs.
#[derive(Debug, Default)]
pub struct LockTimes {
    held_us: Mutex<Vec<u64>>,
    released: Released,
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
        let us = u64::try_from(hold.as_micros()).unwrap_or(u64::MAX);
        self.held_us
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(us);
        hold
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
