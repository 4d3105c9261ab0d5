//! Retention removes only the oldest events outside both windows (newest N, last D ms), keeps
//! a tombstone so `last_seq` never goes back and seqs are never reused, and tells a cursor
//! older than the tombstone to resync.

use crate::common;

use common::{commit_for, intent, journal_path, T0_MS};
use pruning_journal::{Journal, Retention};

fn seqs(journal: &Journal) -> Vec<u64> {
    journal
        .events_after(0, 100)
        .unwrap()
        .into_iter()
        .map(|event| event.seq)
        .collect()
}

#[test]
fn removes_a_prefix_and_keeps_seqs_monotonic() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let intents: Vec<_> = (1..=6).map(intent).collect();
    {
        let journal = Journal::open(&path).unwrap();
        journal.record_intents(&intents).unwrap();
        let commits: Vec<_> = intents[..5].iter().map(|i| commit_for(i, 1)).collect();
        journal.commit(&commits).unwrap();
        assert_eq!(journal.trimmed_through().unwrap(), 0);
        assert!(!journal.cursor_needs_resync(0).unwrap());

        // Events are committed at T0 + n + 500 ms. Keep the newest 2 or the last 1 s at
        // T0 + 10 s: seqs 1..=3 go.
        let policy = Retention {
            keep_events: 2,
            keep_for_ms: 1_000,
        };
        assert_eq!(journal.apply_retention(&policy, T0_MS + 10_000).unwrap(), 3);
        assert_eq!(seqs(&journal), vec![4, 5]);
        assert_eq!(journal.first_seq().unwrap(), Some(4));
        assert_eq!(journal.trimmed_through().unwrap(), 3);
        assert_eq!(journal.event(3).unwrap(), None);
        assert!(journal.cursor_needs_resync(2).unwrap());
        assert!(!journal.cursor_needs_resync(3).unwrap());
        // The retry short-circuit of a removed event is gone; the intent stays committed.
        assert_eq!(
            journal
                .committed_event_for(&intents[0].request_key)
                .unwrap(),
            None
        );
        assert!(!journal
            .intent(intents[0].intent_id)
            .unwrap()
            .unwrap()
            .state
            .is_pending());

        // The time window protects recent events whatever their count.
        let time_only = Retention {
            keep_events: 0,
            keep_for_ms: 1_000_000,
        };
        assert_eq!(
            journal.apply_retention(&time_only, T0_MS + 10_000).unwrap(),
            0
        );

        // Everything may go: the tombstone still carries last_seq.
        let nothing = Retention {
            keep_events: 0,
            keep_for_ms: 0,
        };
        assert_eq!(
            journal.apply_retention(&nothing, T0_MS + 10_000).unwrap(),
            2
        );
    }

    let journal = Journal::open(&path).unwrap();
    assert_eq!(journal.first_seq().unwrap(), None);
    assert_eq!(journal.last_seq().unwrap(), 5);
    assert_eq!(journal.trimmed_through().unwrap(), 5);
    let next = journal.commit(&[commit_for(&intents[5], 1)]).unwrap();
    assert_eq!(next[0].seq, 6);
    assert_eq!(seqs(&journal), vec![6]);
}

#[test]
fn default_policy_is_a_million_events_or_thirty_days() {
    assert_eq!(
        Retention::default(),
        Retention {
            keep_events: 1_000_000,
            keep_for_ms: 30 * 24 * 60 * 60 * 1000,
        }
    );
}
