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

/// A refusal made while the clock was behind (its id's time before where an earlier removal
/// got to) is still removed once it is past the window, by its id's time.
#[test]
fn a_refusal_made_while_the_clock_was_behind_is_removed_in_its_turn() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(&journal_path(&dir)).unwrap();
    let policy = Retention {
        keep_events: 1_000_000,
        keep_for_ms: 30 * DAY_MS,
    };
    // A removal at T0 + 40 days: it got to T0 + 10 days.
    let old = intent_at(1, T0_MS);
    journal.record_intent(&old).unwrap();
    journal
        .resolve_all(&[(old.intent_id, Resolution::Refused("conflict".into()))])
        .unwrap();
    assert_eq!(
        journal
            .remove_resolved_intents(&policy, T0_MS + 40 * DAY_MS)
            .unwrap(),
        1
    );
    // Then the clock steps back 39 days: a refusal is made with an id of T0 + 1 day.
    let behind = intent_at(2, T0_MS + DAY_MS);
    journal.record_intent(&behind).unwrap();
    journal
        .resolve_all(&[(behind.intent_id, Resolution::Refused("conflict".into()))])
        .unwrap();
    // The clock is right again; 60 days later the refusal is well past the window.
    let later = T0_MS + 100 * DAY_MS;
    assert!(journal.resolved_intents_due(&policy, later).unwrap());
    assert_eq!(journal.remove_resolved_intents(&policy, later).unwrap(), 1);
    assert_eq!(ids(&journal), Vec::<Uuid>::new());
    assert_eq!(
        journal.intent_by_request_key(&behind.request_key).unwrap(),
        None
    );
}

/// An intent whose id is not a UUID v7 has no time in its id: it is never removed by an id that
/// only looks old (the engine makes v7 ids only; the journal accepts any).
#[test]
fn a_refusal_whose_id_is_not_v7_is_not_removed_by_the_time_its_id_seems_to_hold() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(&journal_path(&dir)).unwrap();
    let policy = Retention {
        keep_events: 1_000_000,
        keep_for_ms: 30 * DAY_MS,
    };
    let now = T0_MS + 100 * DAY_MS;
    // A version 4 id whose first 48 bits, read as a v7 time, are T0; made now.
    let mut bytes = *intent_at(3, T0_MS).intent_id.as_bytes();
    bytes[6] = 0x40 | (bytes[6] & 0x0f);
    let v4 = Intent {
        intent_id: Uuid::from_bytes(bytes),
        created_at_ms: now,
        ..intent(3)
    };
    assert_eq!(v4.intent_id.get_version_num(), 4);
    journal.record_intent(&v4).unwrap();
    journal
        .resolve_all(&[(v4.intent_id, Resolution::Refused("conflict".into()))])
        .unwrap();
    assert_eq!(journal.remove_resolved_intents(&policy, now).unwrap(), 0);
    assert_eq!(ids(&journal), vec![v4.intent_id]);
    assert_eq!(
        journal
            .intent_by_request_key(&v4.request_key)
            .unwrap()
            .map(|i| i.intent_id),
        Some(v4.intent_id)
    );
}
