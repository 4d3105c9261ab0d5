//! Every refused HTTP request leaves the database, its WAL and the journal byte-for-byte as
//! they were: a body over 1 MiB (413), malformed JSON or an unknown key (400, naming the
//! field), a session outside the workspace (403), an unknown workspace (404), a bad cursor.

use crate::common;

use axum::body::{Body, Bytes};
use axum::http::{Method, Request};
use common::app::{json_request, App};
use common::http::{events_path, parse, with_messages, OTHER_WORKSPACE, WORKSPACE};
use common::Fixture;
use pruning_engine::Journal;
use serde_json::json;

const SESSION: &str = "ses_http_refusals";

/// A valid prune body for the first message, from a preview.
fn prune_body(app: &App, message: &str) -> serde_json::Value {
    let (status, preview) = app.post(
        &app.route("preview"),
        &json!({ "sessionID": SESSION, "messageID": message }).to_string(),
    );
    assert_eq!(status, 200, "{preview}");
    let preview = parse(&preview);
    json!({
        "sessionID": SESSION, "messageID": message,
        "revision": preview["revision"], "indexes": [preview["parts"][0]["index"]],
    })
}

fn other_route(name: &str) -> String {
    format!("/api/workspaces/{OTHER_WORKSPACE}/session-pruning/{name}")
}

/// `GET path` with `Last-Event-ID` headers; the status and the body.
fn get_with_last_event_ids(app: &App, path: &str, ids: &[&str]) -> (u16, String) {
    let mut request = Request::get(path);
    for id in ids {
        request = request.header("last-event-id", *id);
    }
    let answer = app.answer(request.body(Body::empty()).unwrap());
    (answer.status, answer.body)
}

/// Asserts a JSON error answer: status, the field it names, and words of its message.
fn assert_error(answer: (u16, String), status: u16, field: Option<&str>, words: &str) {
    let (got, body) = answer;
    assert_eq!(got, status, "{body}");
    let doc = parse(&body);
    assert_eq!(doc["field"].as_str(), field, "{doc}");
    let message = doc["error"].as_str().unwrap();
    assert!(message.contains(words), "{message:?} lacks {words:?}");
}

#[test]
fn refused_requests_leave_database_and_journal_unchanged() {
    let (fx, messages) = with_messages(SESSION, 1);
    let app = App::start(&fx);
    let body = prune_body(&app, &messages[0]);
    let before = (fx.file_digest(), fx.journal_digest());
    let unchanged = |what: &str| {
        assert_eq!(
            (fx.file_digest(), fx.journal_digest()),
            before,
            "{what} changed something"
        );
    };

    // 413: declared too large, and sent chunked with no length.
    let mut big = body.clone();
    big["sessionID"] = json!("s".repeat(1024 * 1024));
    assert_error(
        app.post(&app.route("prune"), &big.to_string()),
        413,
        None,
        "1 MiB",
    );
    unchanged("a body over 1 MiB");
    // Sent in pieces with no length, as a chunked body.
    let pieces: Vec<Result<Bytes, std::io::Error>> = big
        .to_string()
        .into_bytes()
        .chunks(64 * 1024)
        .map(|piece| Ok(Bytes::copy_from_slice(piece)))
        .collect();
    let chunked = json_request(
        Method::POST,
        &app.route("prune"),
        Body::from_stream(futures_util::stream::iter(pieces)),
    );
    assert!(chunked.headers().get("content-length").is_none());
    assert_eq!(app.answer(chunked).status, 413);
    unchanged("a chunked body over 1 MiB");

    // 400: unknown key, content in a request, malformed JSON, a value of the wrong type.
    let mut unknown = body.clone();
    unknown["bogus"] = json!(1);
    assert_error(
        app.post(&app.route("prune"), &unknown.to_string()),
        400,
        Some("bogus"),
        "unknown key `bogus`",
    );
    let mut content = body.clone();
    content["content"] = json!([]);
    assert_error(
        app.post(&app.route("prune"), &content.to_string()),
        400,
        Some("content"),
        "unknown key",
    );
    assert_error(
        app.post(&app.route("prune"), "{\"sessionID\": "),
        400,
        None,
        "EOF while parsing a value",
    );
    let mut typed = body.clone();
    typed["indexes"] = json!([1, "2"]);
    assert_error(
        app.post(&app.route("prune"), &typed.to_string()),
        400,
        Some("indexes[1]"),
        "invalid type",
    );
    let mut negative = body.clone();
    negative["indexes"] = json!([-1]);
    assert_error(
        app.post(&app.route("prune"), &negative.to_string()),
        400,
        Some("indexes"),
        "out of bounds",
    );
    assert_error(
        app.post(
            &app.route("history"),
            &json!({ "query": "x", "cursor": "not a cursor" }).to_string(),
        ),
        400,
        Some("cursor"),
        "cursor",
    );
    unchanged("a malformed body");

    // 403: the session exists, outside the workspace's directory.
    let preview = json!({ "sessionID": SESSION, "messageID": messages[0] }).to_string();
    let history = json!({ "sessionID": SESSION, "query": "x" }).to_string();
    let batch = json!({ "sessionID": SESSION, "candidates": [{
        "messageID": messages[0], "revision": body["revision"], "toolCount": 1, "reasoningCount": 0,
    }] })
    .to_string();
    for (name, request) in [
        ("preview", preview.as_str()),
        ("prune", &body.to_string()),
        ("history", history.as_str()),
        ("prune-batch", batch.as_str()),
    ] {
        assert_error(
            app.post(&other_route(name), request),
            403,
            None,
            "does not belong to workspace elsewhere",
        );
    }
    assert_error(
        app.get(&format!("{}?sessionID={SESSION}", other_route("receipts"))),
        403,
        None,
        "does not belong to workspace",
    );
    unchanged("a request outside the workspace");

    // 404: no such workspace, no such receipt.
    assert_error(
        app.post(
            "/api/workspaces/nope/session-pruning/prune",
            &body.to_string(),
        ),
        404,
        None,
        "there is no workspace nope",
    );
    assert_error(
        app.get(&app.route("receipts/0190a3f0-0000-7000-8000-000000000000")),
        404,
        None,
        "there is no receipt",
    );
    assert_error(
        app.get(&app.route("receipts/not-a-uuid")),
        400,
        Some("receiptID"),
        "not a receipt id",
    );

    // Event cursors that are not sequence numbers, and unknown parameters.
    assert_error(
        app.get(&format!("{}?since=abc", events_path(WORKSPACE))),
        400,
        Some("since"),
        "must be an event id",
    );
    assert_error(
        app.get(&format!("{}?from=1", events_path(WORKSPACE))),
        400,
        Some("from"),
        "unknown query parameter",
    );
    assert_error(
        get_with_last_event_ids(&app, &events_path(WORKSPACE), &["-1"]),
        400,
        Some("Last-Event-ID"),
        "must be an event id",
    );
    assert_error(
        app.get(&format!("{}?since=%2B3", events_path(WORKSPACE))),
        400,
        Some("since"),
        "must be an event id",
    );
    for headers in [vec!["x"], vec!["1", "2"]] {
        assert_error(
            get_with_last_event_ids(
                &app,
                &format!("{}?since=1", events_path(WORKSPACE)),
                &headers,
            ),
            400,
            Some("Last-Event-ID"),
            "Last-Event-ID",
        );
    }
    unchanged("a bad cursor");

    // A session that does not exist: refused at once, nothing journaled.
    let mut missing = body.clone();
    missing["sessionID"] = json!("ses_nowhere");
    let (status, answer) = app.post(&app.route("prune"), &missing.to_string());
    assert_eq!(status, 200);
    assert_eq!(
        parse(&answer),
        json!({ "status": "blocked", "reason": "not_deletable" })
    );
    let (status, answer) = app.post(
        &app.route("preview"),
        &json!({ "sessionID": "ses_nowhere", "messageID": messages[0] }).to_string(),
    );
    assert_eq!(status, 200);
    assert_eq!(
        parse(&answer),
        json!({ "status": "blocked", "reason": "not_deletable" })
    );
    let batch = json!({ "sessionID": "ses_nowhere", "candidates": [{
        "messageID": messages[0], "revision": body["revision"], "toolCount": 1, "reasoningCount": 0,
    }] });
    let (status, answer) = app.post(&app.route("prune-batch"), &batch.to_string());
    assert_eq!(status, 200);
    assert_eq!(
        parse(&answer),
        json!({ "results": [{ "messageID": messages[0],
            "result": { "status": "blocked", "reason": "not_deletable" } }] })
    );
    unchanged("a prune of a session that does not exist");

    // The same body in the right workspace is pruned: the refusals were about the requests.
    let (status, answer) = app.post(&app.route("prune"), &body.to_string());
    assert_eq!(status, 200);
    assert_eq!(parse(&answer)["status"], "pruned", "{answer}");
    // Its receipt is this workspace's: another workspace neither lists nor shows it.
    let receipts = parse(&app.get(&app.route("receipts")).1);
    let receipt_id = receipts[0]["receiptID"].as_str().unwrap().to_string();
    let (status, one) = app.get(&app.route(&format!("receipts/{receipt_id}")));
    assert_eq!((status, parse(&one)), (200, receipts[0].clone()));
    let (status, listed) = app.get(&other_route("receipts"));
    assert_eq!((status, parse(&listed)), (200, json!([])));
    assert_error(
        app.get(&other_route(&format!("receipts/{receipt_id}"))),
        404,
        None,
        "there is no receipt",
    );
    // Nor is the receipt of a session deleted since shown to any workspace.
    fx.exec(&format!("DELETE FROM session WHERE id = '{SESSION}'"));
    assert_error(
        app.get(&app.route(&format!("receipts/{receipt_id}"))),
        404,
        None,
        "there is no receipt",
    );
    app.stop();
    let journal = Journal::open(&fx.journal).unwrap();
    assert_eq!(
        journal.intents().unwrap().len(),
        1,
        "only the prune was journaled"
    );
}

#[test]
fn an_unknown_route_a_wrong_method_or_a_body_that_is_not_json_is_a_json_error() {
    let fx = Fixture::new();
    let app = App::start(&fx);
    assert_error(app.get("/api/nothing"), 404, None, "no such route");
    assert_error(
        app.get(&app.route("prune")),
        405,
        None,
        "method not allowed",
    );
    assert_error(
        app.post(&app.route("prune"), "not json"),
        400,
        None,
        "expected ident at line 1 column 2",
    );
}
