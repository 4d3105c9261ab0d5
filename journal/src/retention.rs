//! The retention policy of the committed-event log: what `Journal::apply_retention` may
//! remove. Pure rules, no storage.
//!
//! The design keeps at least the last 1,000,000 events *or* 30 days: an event is removed only
//! when it is outside both windows. Removal is always a prefix of the log (oldest first,
//! stopping at the first event that must stay), so the removed range is `1..=trimmed_through`.

/// 30 days in milliseconds.
const THIRTY_DAYS_MS: i64 = 30 * 24 * 60 * 60 * 1000;

/// How much of the event log is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// The newest `keep_events` events are always kept (count of events).
    pub keep_events: u64,
    /// Events committed within the last `keep_for_ms` milliseconds are always kept.
    pub keep_for_ms: i64,
}

impl Default for Retention {
    /// 1,000,000 events or 30 days, whichever keeps more.
    fn default() -> Self {
        Retention {
            keep_events: 1_000_000,
            keep_for_ms: THIRTY_DAYS_MS,
        }
    }
}

impl Retention {
    /// Whether the event `seq`, committed at `committed_at_ms` (ms since epoch), may be removed
    /// when the newest event is `last_seq` and the time is `now_ms` (ms since epoch): only if
    /// it is not among the newest `keep_events` and was committed more than `keep_for_ms` ago.
    pub fn may_remove(&self, seq: u64, committed_at_ms: i64, last_seq: u64, now_ms: i64) -> bool {
        let outside_newest = last_seq.saturating_sub(seq) >= self.keep_events;
        let outside_window = committed_at_ms < now_ms.saturating_sub(self.keep_for_ms);
        outside_newest && outside_window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_only_outside_both_windows() {
        let policy = Retention {
            keep_events: 3,
            keep_for_ms: 1_000,
        };
        // last_seq 10: 8, 9, 10 are the newest three.
        assert!(policy.may_remove(7, 0, 10, 5_000));
        assert!(!policy.may_remove(8, 0, 10, 5_000));
        // committed at 4_000, now 5_000: within the 1 s window.
        assert!(!policy.may_remove(7, 4_000, 10, 5_000));
        assert!(policy.may_remove(7, 3_999, 10, 5_000));
    }
}
