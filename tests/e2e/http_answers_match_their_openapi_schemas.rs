//! Every answer of every route validates against the OpenAPI document the server serves: real
//! requests to each documented route, for its success and for each error status it answers,
//! each body checked against the schema the document declares for that route and status, and
//! each event of the stream against the schema of its data. An answer whose status the
//! document does not list for its route fails, as does a documented route the router does not
//! serve, and a documented status that no request here provoked (but the one named in
//! [`NOT_PROVOKED`]).

use crate::common;

use std::collections::BTreeSet;

use axum::body::{Body, Bytes};
use axum::http::{header, Method};
use common::app::{json_request, Answer, App};
use common::http::with_messages;
use common::openapi::Document;
use pruning_server::Workspaces;
use serde_json::{json, Value};

const SESSION: &str = "ses_http_openapi";
/// The fixture's OpenCode project: its workspace holds the fixture's sessions.
const PROJECT: &str = "acd687b6218323a9c4e26490721b570cacab4aef";
/// An OpenCode workspace that holds none of them.
const ELSEWHERE: &str = "wrk_elsewhere";
const PASSWORD: &str = "open sesame";
const PRUNED: &str = "rpc.codenomad.session-pruning.pruned";

/// Documented statuses that no request can provoke from outside, and why.
const NOT_PROVOKED: &[(&str, u16, &str)] = &[(
    "GET /health",
    500,
    "the journal of an open engine would have to fail to read",
)];

/// `METHOD /api/workspaces/{id}/session-pruning/NAME`, a route as the document names it.
fn route(method: &str, name: &str) -> String {
    format!("{method} /api/workspaces/{{id}}/session-pruning/{name}")
}

/// The path of route `name` in `workspace`.
fn path(workspace: &str, name: &str) -> String {
    format!("/api/workspaces/{workspace}/session-pruning/{name}")
}

/// The client of these checks: every answer is checked against the document.
struct Checked<'a> {
    app: &'a App,
    doc: Document,
}

impl Checked<'_> {
    /// Sends `METHOD path` with `body`, with the password unless `authorized` is false, and
    /// checks the answer against what the document says of `route`.
    fn send(&mut self, route: &str, path: &str, body: Body, authorized: bool) -> Answer {
        let method = route.split_once(' ').expect("METHOD /path").0;
        let method = Method::from_bytes(method.as_bytes()).expect("a method");
        let mut request = json_request(method, path, body);
        if authorized {
            request.headers_mut().insert(
                header::AUTHORIZATION,
                format!("Bearer {PASSWORD}").parse().expect("a header"),
            );
        }
        let answer = self.app.answer(request);
        self.doc.check(route, &answer);
        answer
    }

    /// [`Checked::send`] with the password and a JSON body; the answer's status must be
    /// `status`.
    fn expect(&mut self, route: &str, path: &str, body: Value, status: u16) -> Value {
        let body = match body {
            Value::Null => Body::empty(),
            body => Body::from(body.to_string()),
        };
        let answer = self.send(route, path, body, true);
        assert_eq!(answer.status, status, "{route} ({path}): {}", answer.body);
        answer.json()
    }

    /// `POST path` with a body that never arrives: the answer must be 408, as `route` says.
    fn body_never_arrives(&mut self, route: &str, path: &str) {
        let never =
            Body::from_stream(futures_util::stream::pending::<Result<Bytes, std::io::Error>>());
        let mut request = json_request(Method::POST, path, never);
        request
            .headers_mut()
            .insert(header::CONTENT_LENGTH, "100".parse().expect("a header"));
        request.headers_mut().insert(
            header::AUTHORIZATION,
            format!("Bearer {PASSWORD}").parse().expect("a header"),
        );
        let answer = self.app.answer(request);
        assert_eq!(answer.status, 408, "{route}: {}", answer.body);
        self.doc.check(route, &answer);
    }

    /// `POST path` with `body` as a page of another site could send it: with the header
    /// `name: value` replacing or adding to a JSON request's; the answer must be `status`.
    fn forged(
        &mut self,
        route: &str,
        path: &str,
        body: &Value,
        name: header::HeaderName,
        value: &str,
        status: u16,
    ) {
        let mut request = json_request(Method::POST, path, Body::from(body.to_string()));
        request
            .headers_mut()
            .insert(name, value.parse().expect("a header"));
        request.headers_mut().insert(
            header::AUTHORIZATION,
            format!("Bearer {PASSWORD}").parse().expect("a header"),
        );
        let answer = self.app.answer(request);
        assert_eq!(answer.status, status, "{route}: {}", answer.body);
        self.doc.check(route, &answer);
    }

    /// Opens the event stream at `path`, checks its status and content type against the
    /// document, and checks the events of its first chunks (until one of type `last`) against
    /// the schemas of their data; returns them.
    fn events(&mut self, path: &str, last: &str) -> Vec<(String, Value)> {
        let route = route("GET", "events");
        let mut request = json_request(Method::GET, path, Body::empty());
        request.headers_mut().insert(
            header::AUTHORIZATION,
            format!("Bearer {PASSWORD}").parse().expect("a header"),
        );
        let response = self.app.send(request);
        assert_eq!(response.status().as_u16(), 200);
        let content_type = response.headers()[header::CONTENT_TYPE]
            .to_str()
            .expect("a content type")
            .to_string();
        let schema = self.doc.schema_for(&route, 200, &content_type);
        let mut body = response.into_body();
        let mut events = Vec::new();
        while !events.iter().any(|(event, _)| event == last) {
            let chunk = self.app.next_chunk(&mut body).expect("the stream goes on");
            let text = String::from_utf8(chunk.to_vec()).expect("UTF-8 events");
            self.doc
                .validate(&schema, &Value::String(text.clone()))
                .unwrap_or_else(|e| panic!("{route}: {e}"));
            events.extend(sse_events(&text));
        }
        for (event, data) in &events {
            let schema = match event.as_str() {
                PRUNED => "PrunedEventData",
                "heartbeat" => "Heartbeat",
                "resync" => "Resync",
                other => panic!("an event type the document does not describe: {other}"),
            };
            self.doc
                .validate_named(schema, data)
                .unwrap_or_else(|e| panic!("{event} {data}: {e}"));
        }
        events
    }
}

/// The `(event, data)` of each whole event in `text`.
fn sse_events(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut event = String::from("message");
            let mut data = String::new();
            for line in block.lines() {
                if let Some(value) = line.strip_prefix("event: ") {
                    event = value.to_string();
                } else if let Some(value) = line.strip_prefix("data: ") {
                    data.push_str(value);
                }
            }
            let data = serde_json::from_str(&data).expect("JSON event data");
            (event, data)
        })
        .collect()
}

#[test]
fn every_answer_of_every_route_matches_the_document() {
    let (fx, messages) = with_messages(SESSION, 2);
    fx.exec(&format!(
        "INSERT INTO workspace (id, type, directory, project_id, time_used) \
         VALUES ('{ELSEWHERE}', 'worktree', '/elsewhere', '{PROJECT}', 1)"
    ));
    // The clock is paused: a request body that never comes times out at once.
    let app = App::paused(&fx, Workspaces::Discovered, Some(PASSWORD));
    let mut request = json_request(Method::GET, "/openapi.json", Body::empty());
    request.headers_mut().insert(
        header::AUTHORIZATION,
        format!("Bearer {PASSWORD}").parse().expect("a header"),
    );
    let served = app.answer(request);
    assert_eq!(served.status, 200, "{}", served.body);
    let mut api = Checked {
        app: &app,
        doc: Document::new(served.json()),
    };
    api.doc.check("GET /openapi.json", &served);
    let receipt_path = |workspace: &str, id: &str| path(workspace, &format!("receipts/{id}"));
    let unknown_receipt = "0190a3f0-0000-7000-8000-000000000000";

    // 401 on every route without the password, but the page's: they hold no data.
    for documented in api.doc.routes() {
        if api.doc.is_public(&documented) {
            continue;
        }
        let (method, template) = documented.split_once(' ').expect("METHOD /path");
        let concrete = template
            .replace("{id}", PROJECT)
            .replace("{receiptID}", unknown_receipt);
        let body = if method == "POST" { "{}" } else { "" };
        let answer = api.send(&documented, &concrete, Body::from(body), false);
        assert_eq!(answer.status, 401, "{documented}: {}", answer.body);
    }

    // 200: each route's success, and the contract's `blocked` forms.
    let health = api.expect("GET /health", "/health", Value::Null, 200);
    assert_eq!(health["lastSeq"], 0);
    let listed = api.expect("GET /api/workspaces", "/api/workspaces", Value::Null, 200);
    assert_eq!(listed.as_array().map(Vec::len), Some(2), "{listed}");
    let preview = api.expect(
        &route("POST", "preview"),
        &path(PROJECT, "preview"),
        json!({ "sessionID": SESSION, "messageID": messages[0] }),
        200,
    );
    assert_eq!(preview["status"], "preview", "{preview}");
    let blocked = api.expect(
        &route("POST", "preview"),
        &path(PROJECT, "preview"),
        json!({ "sessionID": "ses_nowhere", "messageID": messages[0] }),
        200,
    );
    assert_eq!(blocked["status"], "blocked", "{blocked}");
    // The clean's plan of the session: both messages, every technical part of each.
    let plan = api.expect(
        &route("POST", "clean-plan"),
        &path(PROJECT, "clean-plan"),
        json!({ "sessionID": SESSION, "keepLastTurns": 0 }),
        200,
    );
    assert_eq!(plan["status"], "plan", "{plan}");
    let planned: Vec<&Value> = plan["prunes"]
        .as_array()
        .expect("prunes")
        .iter()
        .map(|p| &p["messageID"])
        .collect();
    assert_eq!(
        planned,
        [&json!(messages[0]), &json!(messages[1])],
        "{plan}"
    );
    let blocked = api.expect(
        &route("POST", "clean-plan"),
        &path(PROJECT, "clean-plan"),
        json!({ "sessionID": "ses_nowhere" }),
        200,
    );
    assert_eq!(
        blocked,
        json!({ "status": "blocked", "reason": "not_deletable" })
    );
    let prune = json!({
        "sessionID": SESSION, "messageID": messages[0],
        "revision": preview["revision"], "indexes": [preview["parts"][0]["index"]],
    });
    let pruned = api.expect(
        &route("POST", "prune"),
        &path(PROJECT, "prune"),
        prune.clone(),
        200,
    );
    assert_eq!(pruned["status"], "pruned", "{pruned}");
    let mut nowhere = prune.clone();
    nowhere["sessionID"] = json!("ses_nowhere");
    let blocked = api.expect(
        &route("POST", "prune"),
        &path(PROJECT, "prune"),
        nowhere,
        200,
    );
    assert_eq!(blocked["status"], "blocked", "{blocked}");
    let page = api.expect(
        &route("POST", "history"),
        &path(PROJECT, "history"),
        json!({ "sessionID": SESSION, "purpose": "prune" }),
        200,
    );
    assert_eq!(page["status"], "page", "{page}");
    let candidates: Vec<Value> = page["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .filter(|c| c["messageID"] == messages[1].as_str())
        .cloned()
        .collect();
    assert_eq!(candidates.len(), 1, "{page}");
    let search = api.expect(
        &route("POST", "history"),
        &path(PROJECT, "history"),
        json!({ "query": "output" }),
        200,
    );
    assert_eq!(search["status"], "page", "{search}");
    let blocked = api.expect(
        &route("POST", "history"),
        &path(PROJECT, "history"),
        json!({ "sessionID": "ses_nowhere" }),
        200,
    );
    assert_eq!(blocked["status"], "blocked", "{blocked}");
    let batch = json!({ "sessionID": SESSION, "candidates": candidates });
    let results = api.expect(
        &route("POST", "prune-batch"),
        &path(PROJECT, "prune-batch"),
        batch.clone(),
        200,
    );
    assert_eq!(
        results["results"][0]["result"]["status"], "pruned",
        "{results}"
    );
    let receipts = api.expect(
        &route("GET", "receipts"),
        &path(PROJECT, "receipts"),
        Value::Null,
        200,
    );
    assert_eq!(receipts.as_array().map(Vec::len), Some(2), "{receipts}");
    api.expect(
        &route("GET", "receipts"),
        &format!("{}?sessionID={SESSION}", path(PROJECT, "receipts")),
        Value::Null,
        200,
    );
    let receipt_id = receipts[0]["receiptID"]
        .as_str()
        .expect("an id")
        .to_string();
    let receipt = api.expect(
        &route("GET", "receipts/{receiptID}"),
        &receipt_path(PROJECT, &receipt_id),
        Value::Null,
        200,
    );
    assert_eq!(receipt, receipts[0]);
    // The server does not archive: its prunes cannot be restored.
    let restore = json!({ "receiptID": receipt_id });
    let refused = api.expect(
        &route("POST", "restore"),
        &path(PROJECT, "restore"),
        restore.clone(),
        200,
    );
    assert_eq!(
        refused,
        json!({ "status": "blocked", "reason": "not_deletable" })
    );
    let audit = api.expect(
        &route("GET", "audit"),
        &path(PROJECT, "audit"),
        Value::Null,
        200,
    );
    assert_eq!(audit["ok"], true, "{audit}");
    assert_eq!(audit["receipts"], 2, "{audit}");
    api.expect(
        &route("GET", "audit"),
        &format!("{}?sessionID={SESSION}", path(PROJECT, "audit")),
        Value::Null,
        200,
    );
    let replayed = api.events(&format!("{}?since=0", path(PROJECT, "events")), "heartbeat");
    let pruned_events = replayed.iter().filter(|(event, _)| event == PRUNED).count();
    assert_eq!(pruned_events, 2, "{replayed:?}");
    let resync = api.events(&format!("{}?since=99", path(PROJECT, "events")), "resync");
    assert_eq!(resync[0].1, json!({ "firstKept": 1, "resumeAfter": 2 }));

    // 400: bodies that break the contract, unknown parameters, a malformed id or cursor.
    for name in [
        "preview",
        "prune",
        "history",
        "prune-batch",
        "restore",
        "clean-plan",
    ] {
        let error = api.expect(
            &route("POST", name),
            &path(PROJECT, name),
            json!({ "bogus": 1 }),
            400,
        );
        assert_eq!(error["field"], "bogus", "{error}");
    }
    api.expect(
        &route("GET", "receipts"),
        &format!("{}?bogus=1", path(PROJECT, "receipts")),
        Value::Null,
        400,
    );
    api.expect(
        &route("GET", "receipts/{receiptID}"),
        &receipt_path(PROJECT, "not-a-uuid"),
        Value::Null,
        400,
    );
    api.expect(
        &route("GET", "audit"),
        &format!("{}?bogus=1", path(PROJECT, "audit")),
        Value::Null,
        400,
    );
    api.expect(
        &route("GET", "events"),
        &format!("{}?since=x", path(PROJECT, "events")),
        Value::Null,
        400,
    );

    // 403: the session lies outside the workspace.
    let contract_bodies = [
        (
            "preview",
            json!({ "sessionID": SESSION, "messageID": messages[0] }),
        ),
        ("prune", prune.clone()),
        ("history", json!({ "sessionID": SESSION })),
        ("prune-batch", batch.clone()),
        ("clean-plan", json!({ "sessionID": SESSION })),
    ];
    for (name, body) in &contract_bodies {
        api.expect(
            &route("POST", name),
            &path(ELSEWHERE, name),
            body.clone(),
            403,
        );
    }
    for name in ["receipts", "audit"] {
        api.expect(
            &route("GET", name),
            &format!("{}?sessionID={SESSION}", path(ELSEWHERE, name)),
            Value::Null,
            403,
        );
    }

    // 404: no such workspace, no such receipt.
    for (name, body) in &contract_bodies {
        api.expect(&route("POST", name), &path("nope", name), body.clone(), 404);
    }
    api.expect(
        &route("POST", "restore"),
        &path("nope", "restore"),
        restore.clone(),
        404,
    );
    for name in ["receipts", "audit", "events"] {
        api.expect(&route("GET", name), &path("nope", name), Value::Null, 404);
    }
    api.expect(
        &route("GET", "receipts/{receiptID}"),
        &receipt_path("nope", &receipt_id),
        Value::Null,
        404,
    );
    api.expect(
        &route("GET", "receipts/{receiptID}"),
        &receipt_path(PROJECT, unknown_receipt),
        Value::Null,
        404,
    );

    // 408 and 413: a body that never comes, and one over 1 MiB.
    for name in [
        "preview",
        "prune",
        "history",
        "prune-batch",
        "restore",
        "clean-plan",
    ] {
        api.body_never_arrives(&route("POST", name), &path(PROJECT, name));
        let mut big = prune.clone();
        big["sessionID"] = json!("s".repeat(1024 * 1024));
        api.expect(&route("POST", name), &path(PROJECT, name), big, 413);
    }
    // 403 and 415 of the routes that write: a page of another origin, a body not sent as JSON.
    for name in ["prune", "prune-batch", "restore"] {
        let (route, path) = (route("POST", name), path(PROJECT, name));
        api.forged(
            &route,
            &path,
            &prune,
            header::ORIGIN,
            "http://evil.example",
            403,
        );
        api.forged(
            &route,
            &path,
            &prune,
            header::CONTENT_TYPE,
            "text/plain",
            415,
        );
    }

    // The browsing routes: each answer, `blocked`, and every error status.
    let history =
        |workspace: &str, name: &str| format!("/api/workspaces/{workspace}/session-history/{name}");
    let browse_route = |name: &str| format!("POST /api/workspaces/{{id}}/session-history/{name}");
    let browse_bodies = [
        (
            "window",
            json!({ "sessionID": SESSION, "target": { "kind": "latest" } }),
        ),
        ("outline", json!({ "sessionID": SESSION })),
        (
            "outlinePreview",
            json!({ "sessionID": SESSION, "messageIDs": [messages[0]] }),
        ),
        ("assets", json!({ "sessionID": SESSION })),
        (
            "assetRead",
            json!({ "sessionID": SESSION, "target": { "messageID": messages[0], "part": 0, "index": 0, "digest": "0".repeat(64) } }),
        ),
    ];
    for (name, body) in &browse_bodies {
        let answer = api.expect(
            &browse_route(name),
            &history(PROJECT, name),
            body.clone(),
            200,
        );
        if *name == "assetRead" {
            // The fixture's messages have no attachment (the test of assets reads one).
            assert_eq!(
                answer,
                json!({ "status": "blocked", "reason": "unavailable" })
            );
        } else {
            assert_ne!(answer["status"], "blocked", "{name}: {answer}");
        }
        let mut missing = body.clone();
        missing["sessionID"] = json!("ses_missing");
        let blocked = api.expect(&browse_route(name), &history(PROJECT, name), missing, 200);
        assert_eq!(
            blocked,
            json!({ "status": "blocked", "reason": "not_deletable" })
        );
        let mut bogus = body.clone();
        bogus["bogus"] = json!(1);
        let error = api.expect(&browse_route(name), &history(PROJECT, name), bogus, 400);
        assert_eq!(error["field"], "bogus", "{error}");
        api.expect(
            &browse_route(name),
            &history(ELSEWHERE, name),
            body.clone(),
            403,
        );
        api.expect(
            &browse_route(name),
            &history("nope", name),
            body.clone(),
            404,
        );
        api.body_never_arrives(&browse_route(name), &history(PROJECT, name));
        let mut big = body.clone();
        big["sessionID"] = json!("s".repeat(1024 * 1024));
        api.expect(&browse_route(name), &history(PROJECT, name), big, 413);
    }
    let anchor =
        json!({ "sessionID": SESSION, "target": { "kind": "around", "messageID": "msg_gone" } });
    let gone = api.expect(
        &browse_route("window"),
        &history(PROJECT, "window"),
        anchor,
        200,
    );
    assert_eq!(
        gone,
        json!({ "status": "blocked", "reason": "anchor_missing" })
    );
    let sessions_route = "GET /api/workspaces/{id}/sessions";
    let sessions = |workspace: &str| format!("/api/workspaces/{workspace}/sessions");
    let page = api.expect(sessions_route, &sessions(PROJECT), Value::Null, 200);
    assert_eq!(page["cursor"], Value::Null, "{page}");
    api.expect(
        sessions_route,
        &format!("{}?bogus=1", sessions(PROJECT)),
        Value::Null,
        400,
    );
    api.expect(sessions_route, &sessions("nope"), Value::Null, 404);

    let stats_route = "GET /api/workspaces/{id}/stats";
    let stats = |workspace: &str, query: &str| format!("/api/workspaces/{workspace}/stats{query}");
    let overview = api.expect(stats_route, &stats(PROJECT, "?top=1"), Value::Null, 200);
    assert_eq!(
        overview["sessions"].as_array().map(Vec::len),
        Some(1),
        "{overview}"
    );
    for query in ["?top=0", "?top=101", "?top=x", "?bogus=1"] {
        api.expect(stats_route, &stats(PROJECT, query), Value::Null, 400);
    }
    api.expect(stats_route, &stats("nope", ""), Value::Null, 404);
    // The page and its files, without the password.
    for (route, path, status) in [
        ("GET /", "/", 200),
        ("GET /page/{name}", "/page/app.js", 200),
        ("GET /page/{name}", "/page/app.css", 200),
        ("GET /page/{name}", "/page/secrets.txt", 404),
    ] {
        let answer = api.send(route, path, Body::empty(), false);
        assert_eq!(answer.status, status, "{path}: {}", answer.body);
    }

    // 500: the workspaces cannot be read.
    fx.exec("ALTER TABLE project RENAME COLUMN worktree TO gone");
    api.expect(sessions_route, &sessions(PROJECT), Value::Null, 500);
    api.expect(stats_route, &stats(PROJECT, ""), Value::Null, 500);
    for (name, body) in &browse_bodies {
        api.expect(
            &browse_route(name),
            &history(PROJECT, name),
            body.clone(),
            500,
        );
    }
    api.expect("GET /api/workspaces", "/api/workspaces", Value::Null, 500);
    for (name, body) in contract_bodies
        .iter()
        .chain([&("restore", restore.clone())])
    {
        api.expect(
            &route("POST", name),
            &path(PROJECT, name),
            body.clone(),
            500,
        );
    }
    for name in ["receipts", "audit", "events"] {
        api.expect(&route("GET", name), &path(PROJECT, name), Value::Null, 500);
    }
    api.expect(
        &route("GET", "receipts/{receiptID}"),
        &receipt_path(PROJECT, &receipt_id),
        Value::Null,
        500,
    );

    // The upkeep's routes, on this server without a schedule, then on one with a schedule.
    let upkeep = "/api/session-pruning/upkeep";
    let (get_upkeep, post_upkeep) = (format!("GET {upkeep}"), format!("POST {upkeep}"));
    let status = api.expect(&get_upkeep, upkeep, Value::Null, 200);
    assert_eq!(status["enabled"], false, "{status}");
    api.expect(&post_upkeep, upkeep, json!({ "paused": true }), 404);
    api.expect(&post_upkeep, upkeep, json!({ "paused": 1 }), 400);
    let pause = json!({ "paused": true });
    api.forged(&post_upkeep, upkeep, &pause, header::ORIGIN, "null", 403);
    api.forged(
        &post_upkeep,
        upkeep,
        &pause,
        header::CONTENT_TYPE,
        "text/plain",
        415,
    );
    api.body_never_arrives(&post_upkeep, upkeep);
    api.expect(
        &post_upkeep,
        upkeep,
        json!({ "x": "y".repeat(1024 * 1024) }),
        413,
    );
    fx.exec("ALTER TABLE project RENAME COLUMN gone TO worktree");
    let Checked { doc, .. } = api;
    drop(app);
    let scheduled = App::scheduled(&fx, Some(PASSWORD));
    let mut api = Checked {
        app: &scheduled,
        doc,
    };
    let paused = api.expect(&post_upkeep, upkeep, json!({ "paused": true }), 200);
    assert_eq!(
        (&paused["enabled"], &paused["paused"], &paused["nextRunAt"]),
        (&json!(true), &json!(true), &Value::Null),
        "{paused}"
    );
    let status = api.expect(&get_upkeep, upkeep, Value::Null, 200);
    assert_eq!(status, paused);

    // Every status the document lists was answered by a request above, but those that cannot
    // be provoked (which the document does list).
    let documented = api.doc.statuses();
    let mut left: BTreeSet<(String, u16)> =
        documented.difference(api.doc.checked()).cloned().collect();
    for (route, status, why) in NOT_PROVOKED {
        let key = (route.to_string(), *status);
        assert!(
            documented.contains(&key),
            "{route} {status} ({why}) is not documented"
        );
        left.remove(&key);
    }
    assert!(left.is_empty(), "documented, never answered: {left:?}");
}
