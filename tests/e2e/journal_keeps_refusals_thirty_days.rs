//! Opening the engine removes refused and abandoned intents older than 30 days (a day past the
//! window) and keeps newer ones, in one durable write; an open with nothing to remove does not
//! write for it. A request whose old refusal was removed runs again as a new one.

use crate::common;

use common::counting::CountingFile;
use common::*;
use pruning_engine::{Engine, Journal};
use pruning_journal::{Intent, Resolution};

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// A pending intent for a request of the many-turns session, its id made `age_ms` ago.
fn intent_aged(n: u8, age_ms: i64) -> Intent {
    let request = request(MANY_TURNS, TURN5, &format!("{n:064x}"), &[0]);
    Intent {
        intent_id: uuid::Builder::from_unix_timestamp_millis((now_ms() - age_ms) as u64, &[n; 10])
            .into_uuid(),
        ..pending_intent(&request)
    }
}

#[test]
fn an_open_removes_refusals_older_than_thirty_days() {
    let fx = Fixture::new();
    drop(fx.engine());
    let old = intent_aged(1, 32 * DAY_MS);
    let recent = intent_aged(2, 29 * DAY_MS);
    {
        let journal = Journal::open(&fx.journal).unwrap();
        journal
            .record_intents(&[old.clone(), recent.clone()])
            .unwrap();
        journal
            .resolve_all(&[
                (old.intent_id, Resolution::Refused("conflict".into())),
                (recent.intent_id, Resolution::Abandoned("store busy".into())),
            ])
            .unwrap();
    }
    // Opens `fx`'s engine on a journal that counts its syncs; the syncs the open cost.
    let open_counting = || {
        let (file, syncs) = CountingFile::open(&fx.journal);
        let engine =
            Engine::open(fx.store(30_000), Journal::open_with_backend(file).unwrap()).unwrap();
        drop(engine);
        syncs.write_syncs()
    };
    let removing = open_counting();
    let journal = Journal::open(&fx.journal).unwrap();
    let ids: Vec<_> = journal
        .intents()
        .unwrap()
        .into_iter()
        .map(|i| i.intent_id)
        .collect();
    assert_eq!(ids, vec![recent.intent_id]);
    drop(journal);
    // Nothing more is due: the next open costs one durable write less.
    let idle = open_counting();
    assert_eq!(removing, idle + 1);
}

/// A request refused more than 30 days ago, whose intent and request key the open removed, runs
/// as a new request when it comes again: pruned, with its own intent and the first event.
#[test]
fn a_request_whose_old_refusal_was_removed_runs_again_as_new() {
    let fx = Fixture::new();
    let engine = fx.engine();
    let (revision, indexes) = preview(&engine, MANY_TURNS, TURN5);
    drop(engine);
    let req = request(MANY_TURNS, TURN5, &revision, &indexes);
    let refused = Intent {
        intent_id: uuid::Builder::from_unix_timestamp_millis(
            (now_ms() - 32 * DAY_MS) as u64,
            &[9; 10],
        )
        .into_uuid(),
        ..pending_intent(&req)
    };
    {
        let journal = Journal::open(&fx.journal).unwrap();
        journal.record_intent(&refused).unwrap();
        journal
            .resolve_all(&[(
                refused.intent_id,
                Resolution::Refused("maintenance_required".into()),
            )])
            .unwrap();
    }

    let engine = fx.engine();
    assert_eq!(engine.journal().intents().unwrap(), Vec::new());
    assert_eq!(
        engine
            .journal()
            .intent_by_request_key(&refused.request_key)
            .unwrap(),
        None
    );
    let outcome = engine.prune(&req).unwrap();
    assert!(!outcome.retried);
    assert_eq!(pruned(&outcome.result).2, 2);
    assert_eq!(outcome.event.expect("an event").seq, 1);
    let intents = engine.journal().intents().unwrap();
    assert_eq!(intents.len(), 1);
    assert_eq!(Some(intents[0].intent_id), outcome.intent_id);
    assert_eq!(
        engine
            .journal()
            .intent_by_request_key(&refused.request_key)
            .unwrap()
            .map(|i| i.intent_id),
        outcome.intent_id
    );
}
