//! Refused and abandoned intents are removed once older than the retention window (by their
//! UUID v7 id's time), with the request key that points at them; pending and committed intents
//! and newer resolutions stay; the work is due only a day past the window, and each intent is
//! looked at once.

use crate::common;

use common::{commit_for, intent, journal_path, T0_MS};
use pruning_journal::{Intent, Journal, Resolution, Retention};
use uuid::Uuid;

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// `intent(n)` with an id made at `ms` (ms since the epoch).
fn intent_at(n: u8, ms: i64) -> Intent {
    let random = [n; 10];
    Intent {
        intent_id: uuid::Builder::from_unix_timestamp_millis(ms as u64, &random).into_uuid(),
        ..intent(n)
    }
}

fn ids(journal: &Journal) -> Vec<Uuid> {
    let mut ids: Vec<Uuid> = journal
        .intents()
        .unwrap()
        .into_iter()
        .map(|i| i.intent_id)
        .collect();
    ids.sort();
    ids
}

#[test]
fn old_refusals_and_abandons_go_with_their_request_keys() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(&journal_path(&dir)).unwrap();
    let policy = Retention {
        keep_events: 1_000_000,
        keep_for_ms: 30 * DAY_MS,
    };
    let old = T0_MS;
    let refused = intent_at(1, old);
    let abandoned = intent_at(2, old + 1);
    let committed = intent_at(3, old + 2);
    let pending = intent_at(4, old + 3);
    let recent_refusal = intent_at(5, old + 10 * DAY_MS);
    journal
        .record_intents(&[
            refused.clone(),
            abandoned.clone(),
            committed.clone(),
            pending.clone(),
            recent_refusal.clone(),
        ])
        .unwrap();
    journal
        .resolve_all(&[
            (refused.intent_id, Resolution::Refused("conflict".into())),
            (
                abandoned.intent_id,
                Resolution::Abandoned("store busy".into()),
            ),
            (
                recent_refusal.intent_id,
                Resolution::Refused("conflict".into()),
            ),
        ])
        .unwrap();
    journal.commit(&[commit_for(&committed, 1)]).unwrap();

    // 30 days and a few ms later: inside the day of slack, nothing is due yet.
    let now = old + 30 * DAY_MS + 10;
    assert!(!journal.resolved_intents_due(&policy, now).unwrap());
    // 31 days and more: due, and the two old resolutions go.
    let now = old + 31 * DAY_MS + 10;
    assert!(journal.resolved_intents_due(&policy, now).unwrap());
    assert_eq!(journal.remove_resolved_intents(&policy, now).unwrap(), 2);
    let mut kept = vec![
        committed.intent_id,
        pending.intent_id,
        recent_refusal.intent_id,
    ];
    kept.sort();
    assert_eq!(ids(&journal), kept);
    assert_eq!(
        journal.intent_by_request_key(&refused.request_key).unwrap(),
        None
    );
    assert_eq!(
        journal
            .intent_by_request_key(&abandoned.request_key)
            .unwrap(),
        None
    );
    assert_eq!(
        journal
            .intent_by_request_key(&committed.request_key)
            .unwrap()
            .map(|i| i.intent_id),
        Some(committed.intent_id)
    );
    assert!(journal
        .committed_event_for(&committed.request_key)
        .unwrap()
        .is_some());
    assert_eq!(journal.pending_intents().unwrap(), vec![pending.clone()]);

    // Looked at once: nothing more is due until the recent refusal is old enough.
    assert!(!journal.resolved_intents_due(&policy, now).unwrap());
    assert_eq!(journal.remove_resolved_intents(&policy, now).unwrap(), 0);
    let later = old + 41 * DAY_MS + 10;
    assert!(journal.resolved_intents_due(&policy, later).unwrap());
    assert_eq!(journal.remove_resolved_intents(&policy, later).unwrap(), 1);
    let mut kept = vec![committed.intent_id, pending.intent_id];
    kept.sort();
    assert_eq!(ids(&journal), kept);

    // The removal is durable.
    drop(journal);
    let journal = Journal::open(&journal_path(&dir)).unwrap();
    assert_eq!(ids(&journal), kept);
    assert!(!journal.resolved_intents_due(&policy, later).unwrap());
}

#[test]
fn a_request_key_that_moved_to_a_newer_intent_stays() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(&journal_path(&dir)).unwrap();
    let policy = Retention {
        keep_events: 1_000_000,
        keep_for_ms: 30 * DAY_MS,
    };
    // The same request refused long ago, then tried again recently and still pending.
    let first = intent_at(7, T0_MS);
    let again = intent_at(7, T0_MS + 20 * DAY_MS);
    assert_eq!(first.request_key, again.request_key);
    journal.record_intent(&first).unwrap();
    journal
        .resolve_all(&[(first.intent_id, Resolution::Refused("conflict".into()))])
        .unwrap();
    journal.record_intent(&again).unwrap();
    let now = T0_MS + 32 * DAY_MS;
    assert_eq!(journal.remove_resolved_intents(&policy, now).unwrap(), 1);
    assert_eq!(ids(&journal), vec![again.intent_id]);
    assert_eq!(
        journal
            .intent_by_request_key(&again.request_key)
            .unwrap()
            .map(|i| i.intent_id),
        Some(again.intent_id)
    );
}
