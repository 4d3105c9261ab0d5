//! Every bound of the contract: rejected with a precise error before anything is journaled or
//! written; values at the bound are accepted.

use crate::common;

use common::*;
use pruning_engine::{ContractError, PreviewRequest, PruneRequest, Selection};
use serde_json::json;

const REV: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn body(session: &str, message: &str, indexes: serde_json::Value) -> String {
    json!({ "sessionID": session, "messageID": message, "revision": REV, "indexes": indexes })
        .to_string()
}

#[test]
fn empty_indexes_are_rejected() {
    assert_eq!(
        PruneRequest::from_json(&body("s", "m", json!([]))),
        Err(ContractError::NoIndexes)
    );
}

#[test]
fn duplicate_indexes_are_rejected() {
    assert_eq!(
        PruneRequest::from_json(&body("s", "m", json!([3, 1, 3]))),
        Err(ContractError::DuplicateIndex { index: 3 })
    );
}

#[test]
fn negative_and_too_large_indexes_are_rejected() {
    assert_eq!(
        PruneRequest::from_json(&body("s", "m", json!([0, -1]))),
        Err(ContractError::IndexOutOfBounds {
            index: -1,
            max: 100_000
        })
    );
    assert_eq!(
        PruneRequest::from_json(&body("s", "m", json!([100_001]))),
        Err(ContractError::IndexOutOfBounds {
            index: 100_001,
            max: 100_000
        })
    );
}

#[test]
fn too_many_indexes_are_rejected_and_the_maximum_is_accepted() {
    let many: Vec<i64> = (0..100_002).collect();
    let text = body("s", "m", json!(many));
    assert!(text.len() < 1024 * 1024);
    assert_eq!(
        PruneRequest::from_json(&text),
        Err(ContractError::TooManyIndexes {
            count: 100_002,
            max: 100_001
        })
    );
    let max: Vec<i64> = (0..100_001).collect();
    let accepted = PruneRequest::from_json(&body("s", "m", json!(max))).unwrap();
    match accepted.selection {
        Selection::Indexes(indexes) => assert_eq!(indexes.len(), 100_001),
        other => panic!("expected indexes, got {other:?}"),
    }
}

#[test]
fn ids_of_257_characters_are_rejected_and_256_accepted() {
    let long = "x".repeat(257);
    assert_eq!(
        PruneRequest::from_json(&body(&long, "m", json!([1]))),
        Err(ContractError::IdLength {
            field: "sessionID",
            len: 257,
            max: 256
        })
    );
    assert_eq!(
        PreviewRequest::new("s".into(), long),
        Err(ContractError::IdLength {
            field: "messageID",
            len: 257,
            max: 256
        })
    );
    assert_eq!(
        PreviewRequest::new(String::new(), "m".into()),
        Err(ContractError::IdLength {
            field: "sessionID",
            len: 0,
            max: 256
        })
    );
    let ok = "y".repeat(256);
    assert!(PruneRequest::from_json(&body(&ok, &ok, json!([1]))).is_ok());
    // Length is counted in UTF-16 code units, as JavaScript does: 128 emoji are 256 units.
    assert!(PreviewRequest::new("😀".repeat(128), "m".into()).is_ok());
    assert!(PreviewRequest::new("😀".repeat(129), "m".into()).is_err());
}

#[test]
fn unknown_keys_are_rejected() {
    let with_content = json!({
        "sessionID": "s", "messageID": "m", "revision": REV, "indexes": [1], "content": []
    });
    assert_eq!(
        PruneRequest::from_json(&with_content.to_string()),
        Err(ContractError::UnknownKey {
            key: "content".into()
        })
    );
    assert_eq!(
        PreviewRequest::from_json(r#"{"sessionID":"s","messageID":"m","sql":"DROP"}"#),
        Err(ContractError::UnknownKey { key: "sql".into() })
    );
}

#[test]
fn body_over_one_mebibyte_is_rejected() {
    let padding = "p".repeat(1024 * 1024);
    assert_eq!(
        PruneRequest::from_json(&body(&padding, "m", json!([1]))),
        Err(ContractError::BodyTooLarge {
            bytes: 1024 * 1024 + 124,
            limit: 1024 * 1024
        })
    );
}

#[test]
fn malformed_revision_is_rejected() {
    let upper = REV.to_uppercase();
    let text = json!({ "sessionID": "s", "messageID": "m", "revision": upper, "indexes": [1] });
    assert!(matches!(
        PruneRequest::from_json(&text.to_string()),
        Err(ContractError::Revision { .. })
    ));
}

/// The CLI maps each bad input to exit 2 and journals and writes nothing.
#[test]
fn cli_bad_input_exits_2_and_journals_nothing() {
    let fx = Fixture::new();
    let digest = fx.file_digest();
    let long = "z".repeat(257);
    let cases: Vec<Vec<String>> = vec![
        vec![
            MANY_TURNS.into(),
            TURN5.into(),
            "--revision".into(),
            REV.into(),
            "--indexes=".into(),
        ],
        vec![
            MANY_TURNS.into(),
            TURN5.into(),
            "--revision".into(),
            REV.into(),
            "--indexes=1,1".into(),
        ],
        vec![
            MANY_TURNS.into(),
            TURN5.into(),
            "--revision".into(),
            REV.into(),
            "--indexes=-1".into(),
        ],
        vec![
            MANY_TURNS.into(),
            TURN5.into(),
            "--revision".into(),
            REV.into(),
            "--indexes=1,x".into(),
        ],
        vec![
            long,
            TURN5.into(),
            "--revision".into(),
            REV.into(),
            "--indexes=1".into(),
        ],
        vec![
            MANY_TURNS.into(),
            TURN5.into(),
            "--revision".into(),
            "abc".into(),
            "--indexes=1".into(),
        ],
    ];
    for args in cases {
        let out = crate::common::cli::session_prune()
            .arg("--db")
            .arg(&fx.db)
            .arg("prune")
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: "));
        assert!(!fx.journal.exists(), "{args:?} created a journal");
    }
    assert_eq!(fx.file_digest(), digest);
}
