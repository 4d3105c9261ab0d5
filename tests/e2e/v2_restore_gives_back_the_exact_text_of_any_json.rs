//! A V2 restore of a message no one wrote to since its prune puts its row back byte for byte,
//! whatever the JSON's formatting: OpenCode or another writer may store whitespace, keys in any
//! order, unicode escapes, numbers written as `1.0`, `1e2` or wider than 64 bits, and parts
//! without ids. The restore's compare-and-swap computes the text the prune left from the
//! archived row (docs/ARCHITECTURE.md, "Restore"), and must find exactly that text.

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

/// Assistant rows as other writers might store them: each has a completed message with a
/// reasoning part and a completed tool part to prune and a text part to keep.
const ROWS: [(&str, &str); 6] = [
    (
        "msg_v2_odd_whitespace_0000001",
        "{\n  \"time\" : { \"created\" : 1795941051314 , \"completed\" : 1795941051542 },\n  \
         \"content\" : [\n    { \"type\" : \"reasoning\", \"id\" : \"r-1\", \"text\" : \"why\" },\n    \
         { \"type\" : \"tool\", \"id\" : \"call_1\", \"name\" : \"bash\",\n      \"state\" : { \
         \"status\" : \"completed\", \"input\" : {}, \"output\" : \"1\\n2\" } },\n    \
         { \"type\" : \"text\", \"id\" : \"t-1\", \"text\" : \"kept\" }\n  ]\n}\n",
    ),
    (
        "msg_v2_odd_key_order_00000001",
        r#"{"content":[{"text":"why","id":"r-1","type":"reasoning"},{"state":{"output":"x","status":"completed","input":{}},"name":"bash","id":"call_1","type":"tool"},{"text":"kept","type":"text","id":"t-1"}],"time":{"completed":1795941051542,"created":1795941051314},"agent":"build"}"#,
    ),
    (
        "msg_v2_odd_escapes_0000000001",
        r#"{"time":{"created":1795941051314,"completed":1795941051542},"content":[{"type":"reasoning","id":"r-1","text":"caf\u00e9 \ud83d\ude00 \/ \u0000"},{"type":"tool","id":"call_1","name":"bash","state":{"status":"completed","input":{},"output":"\u00e9"}},{"type":"text","id":"t-1","text":"k\u00e9pt \ud83d\ude00 \/"}]}"#,
    ),
    (
        "msg_v2_odd_numbers_0000000001",
        r#"{"time":{"created":1795941051314.0,"completed":1.795941051542e12},"cost":1e2,"tokens":{"input":12345678901234567890123,"output":-0,"ratio":0.1,"tiny":1E-7},"content":[{"type":"reasoning","id":"r-1","text":"why","n":1.0},{"type":"tool","id":"call_1","name":"bash","state":{"status":"completed","input":{"n":1e2},"output":"x"}},{"type":"text","id":"t-1","text":"kept","n":1.0,"m":1e2,"big":12345678901234567890123,"neg":-0,"f":1.5e-300}]}"#,
    ),
    (
        "msg_v2_parts_without_ids_0001",
        r#"{"time":{"created":1795941051314,"completed":1795941051542},"content":[{"type":"reasoning","text":"why"},{"type":"tool","name":"bash","state":{"status":"completed","input":{},"output":"x"}},{"type":"text","text":"kept"}]}"#,
    ),
    (
        "msg_v2_kept_part_first_000001",
        r#"{"time":{"created":1795941051314,"completed":1795941051542},"content":[{"type":"text","text":"kept first","n":1.0},{"type":"reasoning","text":"why"},{"type":"text","text":"kept last","m":1e2}]}"#,
    ),
];

#[test]
fn a_restore_gives_back_the_exact_text_of_rows_written_in_any_json_form() {
    let fx = V2Fixture::new();
    for (seq, (id, data)) in ROWS.iter().enumerate() {
        fx.insert_message(V2_SESSION, id, "assistant", 10 + seq as i64, data);
    }
    let engine = engine(&fx);
    for (id, data) in ROWS {
        let PreviewResult::Preview { revision, .. } = engine
            .preview(&PreviewRequest::new(V2_SESSION.into(), id.into()).expect("request"))
            .expect("preview")
        else {
            panic!("{id}: no preview");
        };
        let request =
            PruneRequest::all_technical(V2_SESSION.into(), id.into(), revision).expect("request");
        let outcome = engine.prune(&request).expect("prune");
        assert!(
            matches!(outcome.result, PruneResult::Pruned { .. }),
            "{id}: {outcome:?}"
        );
        assert_ne!(fx.row(id), data, "{id}: the prune changed nothing");
        let receipt = outcome.receipt.expect("receipt").receipt_id;
        let restored = engine
            .restore(&RestoreRequest::new(receipt))
            .expect("restore");
        assert!(
            matches!(restored.result, RestoreResult::Restored { .. }),
            "{id}: {restored:?}"
        );
        assert_eq!(fx.row(id), data, "{id}: not given back byte for byte");
    }
}
