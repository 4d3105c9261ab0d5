//! What a client of the contract may send that JavaScript reads one way: an index written as a
//! float whose value is whole (`2.0`, `1e0`, `-0`: `JSON.parse` makes them the integers) is that
//! integer, a fraction is refused; and an optional field is left out or given, never `null`: a
//! `null` is 400 naming the field, for every optional field alike, as CodeNomad's strict
//! schemas answer it. Nothing is journaled or written by a refused request.

use crate::common;

use common::http::{parse, post, with_messages, Server, WORKSPACE};
use pruning_engine::{ContractError, PruneRequest, Selection};

const REV: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const SESSION: &str = "ses_codenomad_client";

/// A prune body whose `indexes` is the JSON text `indexes`, exactly as written.
fn body(indexes: &str) -> String {
    format!(r#"{{"sessionID":"s","messageID":"m","revision":"{REV}","indexes":{indexes}}}"#)
}

#[test]
fn whole_numbers_written_as_floats_are_the_integers_they_are() {
    for (written, read) in [
        ("[2.0]", vec![2]),
        ("[1e0]", vec![1]),
        ("[-0]", vec![0]),
        ("[-0.0, 3E0, 4.000]", vec![0, 3, 4]),
        ("[1e5]", vec![100_000]),
    ] {
        let request = PruneRequest::from_json(&body(written)).expect(written);
        assert_eq!(request.selection, Selection::Indexes(read), "{written}");
    }
}

#[test]
fn a_fraction_or_a_float_past_what_is_exact_is_refused_naming_the_index() {
    for (written, field) in [
        ("[2.5]", "indexes[0]"),
        ("[1, 0.1]", "indexes[1]"),
        ("[1e300]", "indexes[0]"),
        ("[9007199254740994.0]", "indexes[0]"),
    ] {
        let refused = PruneRequest::from_json(&body(written));
        match &refused {
            Err(ContractError::Malformed {
                field: Some(named),
                detail,
            }) => {
                assert_eq!(named, field, "{written}");
                assert!(
                    detail.contains("expected an integer"),
                    "{written}: {detail}"
                );
            }
            other => panic!("{written}: {other:?}"),
        }
    }
    // Whole, but out of range: the range's own error.
    assert_eq!(
        PruneRequest::from_json(&body("[1e6]")),
        Err(ContractError::IndexOutOfBounds {
            index: 1_000_000,
            max: 100_000
        })
    );
}

#[test]
fn a_prune_over_http_takes_an_index_written_as_a_float() {
    let (fx, messages) = with_messages(SESSION, 1);
    let server = Server::start(&fx.db, &[]);
    let (status, preview) = post(
        &server.route("preview"),
        &serde_json::json!({ "sessionID": SESSION, "messageID": messages[0] }).to_string(),
    );
    assert_eq!(status, 200, "{preview}");
    let preview = parse(&preview);
    let index = preview["parts"][0]["index"].as_u64().expect("an index");
    let text = format!(
        r#"{{"sessionID":"{SESSION}","messageID":"{}","revision":"{}","indexes":[{index}.0]}}"#,
        messages[0],
        preview["revision"].as_str().expect("revision")
    );
    let (status, answer) = post(&server.route("prune"), &text);
    assert_eq!(status, 200, "{answer}");
    let answer = parse(&answer);
    assert_eq!(answer["status"], "pruned", "{answer}");
    assert_eq!(answer["removedCount"], 1, "{answer}");
}

/// `history` is a route of the pruning API; `outline` and `assets` of the history API.
fn url(server: &Server, route: &str) -> String {
    match route {
        "history" => server.route(route),
        _ => server.url(&format!(
            "/api/workspaces/{WORKSPACE}/session-history/{route}"
        )),
    }
}

#[test]
fn null_for_any_optional_field_is_400_naming_it_and_changes_nothing() {
    let (fx, _) = with_messages(SESSION, 1);
    let server = Server::start(&fx.db, &[]);
    let before = (fx.file_digest(), fx.journal_digest());
    let session = SESSION;
    for (route, body, field) in [
        (
            "history",
            serde_json::json!({ "sessionID": null }),
            "sessionID",
        ),
        ("history", serde_json::json!({ "cursor": null }), "cursor"),
        ("history", serde_json::json!({ "query": null }), "query"),
        (
            "history",
            serde_json::json!({ "includeTechnical": null }),
            "includeTechnical",
        ),
        ("history", serde_json::json!({ "purpose": null }), "purpose"),
        (
            "outline",
            serde_json::json!({ "sessionID": session, "cursor": null }),
            "cursor",
        ),
        (
            "outline",
            serde_json::json!({ "sessionID": session, "after": null }),
            "after",
        ),
        (
            "outline",
            serde_json::json!({ "sessionID": session, "known": null }),
            "known",
        ),
        (
            "assets",
            serde_json::json!({ "sessionID": session, "cursor": null }),
            "cursor",
        ),
        (
            "outline",
            serde_json::json!({
                "sessionID": session,
                "known": [{ "after": -1, "through": 0, "digest": REV, "changed": null }],
            }),
            "known[0].changed",
        ),
    ] {
        let (status, answer) = post(&url(&server, route), &body.to_string());
        assert_eq!(status, 400, "{route} {body}: {answer}");
        assert_eq!(parse(&answer)["field"], field, "{route} {body}: {answer}");
    }
    // The same fields left out are answered.
    for (route, body) in [
        ("history", serde_json::json!({})),
        ("outline", serde_json::json!({ "sessionID": session })),
        ("assets", serde_json::json!({ "sessionID": session })),
    ] {
        let (status, answer) = post(&url(&server, route), &body.to_string());
        assert_eq!(status, 200, "{route} {body}: {answer}");
    }
    drop(server);
    assert_eq!((fx.file_digest(), fx.journal_digest()), before);
}
