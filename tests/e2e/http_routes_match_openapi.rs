//! `GET /openapi.json` describes exactly the routes the server serves, and `GET
//! /api/workspaces` lists the workspaces: OpenCode's projects and workspaces read from the
//! database at each request, or exactly those given with `--workspace`.

use crate::common;

use std::collections::BTreeSet;

use common::app::App;
use common::http::{get, parse, Server, FIXTURE_DIRECTORY};
use common::Fixture;
use pruning_server::Workspaces;
use serde_json::json;

const PROJECT: &str = "acd687b6218323a9c4e26490721b570cacab4aef";

#[test]
fn the_openapi_document_lists_every_route_and_only_those() {
    let fx = Fixture::new();
    let app = App::start(&fx);
    let (status, body) = app.get("/openapi.json");
    assert_eq!(status, 200);
    let doc = parse(&body);
    assert_eq!(doc["openapi"], "3.1.0");
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            documented.insert(format!("{} {path}", method.to_uppercase()));
        }
    }
    let pruning = "/api/workspaces/{id}/session-pruning";
    let served: BTreeSet<String> = [
        "GET /health".to_string(),
        "GET /openapi.json".into(),
        "GET /api/workspaces".into(),
        format!("POST {pruning}/preview"),
        format!("POST {pruning}/prune"),
        format!("POST {pruning}/history"),
        format!("POST {pruning}/prune-batch"),
        format!("POST {pruning}/restore"),
        format!("POST {pruning}/clean-plan"),
        format!("GET {pruning}/receipts"),
        format!("GET {pruning}/receipts/{{receiptID}}"),
        format!("GET {pruning}/audit"),
        format!("GET {pruning}/events"),
        "GET /api/workspaces/{id}/sessions".into(),
        "POST /api/workspaces/{id}/session-history/window".into(),
        "POST /api/workspaces/{id}/session-history/outline".into(),
        "POST /api/workspaces/{id}/session-history/outlinePreview".into(),
        "POST /api/workspaces/{id}/session-history/assets".into(),
        "POST /api/workspaces/{id}/session-history/assetRead".into(),
        "GET /api/workspaces/{id}/stats".into(),
        "GET /api/session-pruning/upkeep".into(),
        "POST /api/session-pruning/upkeep".into(),
        "GET /".into(),
        "GET /page/{name}".into(),
    ]
    .into_iter()
    .collect();
    assert_eq!(documented, served);
    // Each documented route is served: none answers "no such route" or a wrong method.
    for route in &documented {
        let (method, path) = route.split_once(' ').unwrap();
        let path = path
            .replace("{id}", "work")
            .replace("{receiptID}", "0190a3f0-0000-7000-8000-000000000000")
            .replace("{name}", "app.js");
        let path = format!(
            "{path}{}",
            if path.ends_with("/events") {
                "?since=x"
            } else {
                ""
            }
        );
        let (status, text) = match method {
            "GET" => app.get(&path),
            _ => app.post(&path, "{}"),
        };
        assert!(
            status != 405 && !text.contains("no such route"),
            "{route}: {status} {text}"
        );
    }
}

#[test]
fn workspaces_are_discovered_from_the_database_at_each_request() {
    let fx = Fixture::new();
    let app = App::with(&fx, Workspaces::Discovered, None);
    let (status, body) = app.get("/api/workspaces");
    assert_eq!(status, 200);
    assert_eq!(
        parse(&body),
        json!([{ "id": PROJECT, "directory": FIXTURE_DIRECTORY }])
    );
    fx.exec(&format!(
        "INSERT INTO workspace (id, type, directory, project_id, time_used) \
         VALUES ('wrk_a', 'worktree', '/tmp/oc-cache/run/work/tree', '{PROJECT}', 1), \
                ('wrk_b', 'remote', NULL, '{PROJECT}', 1), \
                ('wrk_c', 'worktree', '../..', '{PROJECT}', 1), \
                ('wrk_d', 'worktree', '.', '{PROJECT}', 1)"
    ));
    // A workspace without a directory, or with a relative one, scopes nothing and is not listed.
    let (_, body) = app.get("/api/workspaces");
    assert_eq!(
        parse(&body),
        json!([
            { "id": PROJECT, "directory": FIXTURE_DIRECTORY },
            { "id": "wrk_a", "directory": "/tmp/oc-cache/run/work/tree" },
        ])
    );
    let (status, _) = app.get("/api/workspaces/wrk_c/session-pruning/receipts");
    assert_eq!(status, 404);
    // The project's workspace serves the fixture's sessions.
    let (status, _) = app.get(&format!(
        "/api/workspaces/{PROJECT}/session-pruning/receipts"
    ));
    assert_eq!(status, 200);
}

#[test]
fn given_workspaces_replace_the_discovered_ones() {
    let fx = Fixture::new();
    let server = Server::start_exactly(
        &fx.db,
        &[
            "--workspace".into(),
            "zeta=/srv/z/../zeta/".into(),
            "--workspace".into(),
            "alpha=/srv/alpha".into(),
        ],
        &[],
    );
    let (_, body) = get(&server.url("/api/workspaces"));
    assert_eq!(
        parse(&body),
        json!([
            { "id": "alpha", "directory": "/srv/alpha" },
            { "id": "zeta", "directory": "/srv/zeta" },
        ])
    );
    let (status, _) = get(&server.url(&format!(
        "/api/workspaces/{PROJECT}/session-pruning/receipts"
    )));
    assert_eq!(status, 404);

    let out = common::cli::run(&fx.db, &["serve", "--workspace", "a=relative/dir"]);
    common::cli::assert_exit(&out, 2);
    let out = common::cli::run(
        &fx.db,
        &["serve", "--workspace", "a=/x", "--workspace", "a=/y"],
    );
    common::cli::assert_exit(&out, 2);
}
