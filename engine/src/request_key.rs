//! The request key: the identity of a prune request, used to find an identical retry.
//!
//! Source: CodeNomad `transaction.ts`: SHA-256 of the canonical JSON of `{sessionID, messageID,
//! revision, indexes}` with indexes sorted ascending; in all-technical mode
//! `{sessionID, messageID, revision, allTechnical: true}`. The copies OpenCode keeps besides the
//! parts are this engine's own: `{..., diffs: true}` for a message's `summary.diffs`, and
//! `{sessionID, messageID: "", revision, supersededSnapshots: {firstSeq, lastSeq}}` for the
//! range of a session's event log one compaction request takes, and `{..., migratedV1: true}`
//! for the OpenCode 1.x rows of a message OpenCode 2 migrated, `{..., shellOutput: true}` for
//! the output an OpenCode 2 `shell` row keeps.
//!
//! A restore puts a message back as it was, so pruning it again is the same request as the
//! prune that was undone. Its key is then [`after_restore`] of the undone receipt's key (and
//! again after each later restore): the store finds the key a request has now with
//! `SessionStore::live_request_key`. A restore's own key is [`restore_key`]
//! (docs/ARCHITECTURE.md, "Restore").

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::contract::{PruneRequest, Selection};
use crate::revision::canonical_json;

/// SHA-256 of the canonical request (32 bytes).
pub fn request_key(request: &PruneRequest) -> [u8; 32] {
    let mut body = json!({
        "sessionID": request.session_id,
        "messageID": request.message_id,
        "revision": request.revision,
    });
    if let Value::Object(map) = &mut body {
        match &request.selection {
            // Indexes are kept sorted by validation.
            Selection::Indexes(indexes) => map.insert("indexes".into(), json!(indexes)),
            Selection::AllTechnical => map.insert("allTechnical".into(), Value::Bool(true)),
            Selection::Diffs => map.insert("diffs".into(), Value::Bool(true)),
            Selection::SupersededSnapshots(seqs) => map.insert(
                "supersededSnapshots".into(),
                json!({ "firstSeq": seqs.first, "lastSeq": seqs.last }),
            ),
            Selection::MigratedV1 => map.insert("migratedV1".into(), Value::Bool(true)),
            Selection::ShellOutput => map.insert("shellOutput".into(), Value::Bool(true)),
        };
    }
    Sha256::digest(canonical_json(&body).as_bytes()).into()
}

/// The key of a prune request whose earlier identical prune, with receipt `receipt_id` under
/// `key`, was undone by a restore: SHA-256 of `key`'s lowercase hex, `/`, and the receipt id.
pub fn after_restore(key: &[u8; 32], receipt_id: uuid::Uuid) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(hex::encode(key).as_bytes());
    hasher.update(b"/");
    hasher.update(receipt_id.to_string().as_bytes());
    hasher.finalize().into()
}

/// The key of the restore of the prune with receipt `receipt_id`: SHA-256 of `restore/` and the
/// receipt id. One prune has one restore: an identical retry finds it by this key.
pub fn restore_key(receipt_id: uuid::Uuid) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(b"restore/");
    hasher.update(receipt_id.to_string().as_bytes());
    hasher.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::SeqRange;

    #[test]
    fn index_order_does_not_change_the_key() {
        let rev = "a".repeat(64);
        let a = PruneRequest::with_indexes("s".into(), "m".into(), rev.clone(), &[2, 0]).unwrap();
        let b = PruneRequest::with_indexes("s".into(), "m".into(), rev.clone(), &[0, 2]).unwrap();
        let c = PruneRequest::all_technical("s".into(), "m".into(), rev).unwrap();
        assert_eq!(request_key(&a), request_key(&b));
        assert_ne!(request_key(&a), request_key(&c));
    }

    #[test]
    fn each_kind_of_selection_has_keys_of_its_own() {
        let rev = "b".repeat(64);
        let parts = PruneRequest::all_technical("s".into(), "m".into(), rev.clone()).unwrap();
        let diffs = PruneRequest::diffs("s".into(), "m".into(), rev.clone()).unwrap();
        let seqs = SeqRange::new(1, 40).unwrap();
        let compaction = PruneRequest::compaction("s".into(), rev, seqs).unwrap();
        let keys = [
            request_key(&parts),
            request_key(&diffs),
            request_key(&compaction),
        ];
        assert_ne!(keys[0], keys[1]);
        assert_ne!(keys[1], keys[2]);
        assert_ne!(keys[0], keys[2]);
        assert_eq!(compaction.message_id, "");
    }

    #[test]
    fn each_range_of_a_compaction_has_a_key_of_its_own() {
        let rev = "c".repeat(64);
        let key = |first, last| {
            let seqs = SeqRange::new(first, last).unwrap();
            request_key(&PruneRequest::compaction("s".into(), rev.clone(), seqs).unwrap())
        };
        assert_eq!(key(1, 40), key(1, 40));
        assert_ne!(key(1, 40), key(1, 41));
        assert_ne!(key(1, 40), key(2, 40));
        // The canonical body the key hashes, by its exact text.
        let body = json!({
            "sessionID": "s",
            "messageID": "",
            "revision": rev,
            "supersededSnapshots": { "firstSeq": 1, "lastSeq": 40 },
        });
        let expected: [u8; 32] = Sha256::digest(canonical_json(&body).as_bytes()).into();
        assert_eq!(key(1, 40), expected);
    }

    #[test]
    fn a_range_that_ends_before_it_begins_is_refused() {
        let error = SeqRange::new(5, 4).unwrap_err();
        assert_eq!(error.field(), Some("seqs"));
        assert_eq!(SeqRange::new(4, 4).unwrap(), SeqRange { first: 4, last: 4 });
    }
}
