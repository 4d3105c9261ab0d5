//! A V2 restore puts back the `content` the prune removed and nothing else: what OpenCode wrote
//! to the row since the prune outside `content` (the revision covers `content` only) is not
//! overwritten with the row as it was before the prune.

use crate::common;

use common::v2::*;
use pruning_engine::{
    Engine, Journal, PreviewRequest, PreviewResult, PruneRequest, PruneResult, RestoreRequest,
    RestoreResult,
};
use pruning_opencode::{OpenCodeStore, StoreOptions};

fn engine(fx: &V2Fixture) -> Engine<OpenCodeStore> {
    let options = StoreOptions {
        quiet_period: std::time::Duration::ZERO,
        ..StoreOptions::default()
    };
    let store = OpenCodeStore::open(&fx.db, options).expect("store");
    store.archive_prunes().expect("archive");
    Engine::open(store, Journal::open(&fx.journal).expect("journal")).expect("engine")
}

#[test]
fn a_write_outside_content_after_the_prune_survives_the_restore() {
    let fx = V2Fixture::new();
    let before = fx.assistant_data();
    let engine = engine(&fx);
    let PreviewResult::Preview { revision, .. } = engine
        .preview(&PreviewRequest::new(V2_SESSION.into(), V2_ASSISTANT.into()).expect("request"))
        .expect("preview")
    else {
        panic!("no preview");
    };
    let request =
        PruneRequest::all_technical(V2_SESSION.into(), V2_ASSISTANT.into(), revision.clone())
            .expect("request");
    let outcome = engine.prune(&request).expect("prune");
    assert!(
        matches!(outcome.result, PruneResult::Pruned { .. }),
        "{outcome:?}"
    );
    let receipt = outcome.receipt.expect("receipt").receipt_id;

    // OpenCode records the message's cost afterwards: `content`, and so the revision, stay.
    fx.exec(&format!(
        "UPDATE session_message SET data = json_set(data, '$.cost', 0.25) WHERE id = '{V2_ASSISTANT}'"
    ));
    let restored = engine
        .restore(&RestoreRequest::new(receipt))
        .expect("restore");
    let data = fx.assistant_data();
    assert_eq!(
        data["cost"], 0.25,
        "the later write was undone: {restored:?}"
    );
    match restored.result {
        RestoreResult::Restored { .. } => assert_eq!(data["content"], before["content"]),
        RestoreResult::Blocked { reason } => {
            assert_eq!(reason, pruning_engine::BlockedReason::Conflict)
        }
    }
}
