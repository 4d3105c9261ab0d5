//! The HTTP API answers preview, prune, history and prune-batch with the very bytes
//! `session-prune --json` prints for the same request, and an identical retry with the
//! identical body.

mod common;

use common::cli::{assert_exit, run};
use common::http::{parse, post, Server};
use common::{Fixture, MANY_TURNS, TURN1, TURN5};
use serde_json::json;

#[test]
fn preview_and_prune_answer_the_bytes_the_cli_prints() {
    let through_cli = Fixture::new();
    let through_http = Fixture::new();
    let server = Server::start(&through_http.db, &[]);

    let cli_preview = run(&through_cli.db, &["--json", "preview", MANY_TURNS, TURN5]);
    assert_exit(&cli_preview, 0);
    let body = json!({ "sessionID": MANY_TURNS, "messageID": TURN5 }).to_string();
    let (status, http_preview) = post(&server.route("preview"), &body);
    assert_eq!(status, 200, "{http_preview}");
    assert_eq!(http_preview.as_bytes(), cli_preview.stdout.as_slice());

    let preview = parse(&http_preview);
    let revision = preview["revision"].as_str().unwrap().to_string();
    let indexes: Vec<u64> = preview["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["index"].as_u64().unwrap())
        .collect();
    assert_eq!(indexes, [1, 2]);

    let cli_prune = run(
        &through_cli.db,
        &[
            "--json",
            "prune",
            MANY_TURNS,
            TURN5,
            "--revision",
            &revision,
            "--indexes",
            "1,2",
        ],
    );
    assert_exit(&cli_prune, 0);
    let body = json!({
        "sessionID": MANY_TURNS, "messageID": TURN5, "revision": revision, "indexes": [1, 2]
    })
    .to_string();
    let (status, http_prune) = post(&server.route("prune"), &body);
    assert_eq!(status, 200, "{http_prune}");
    assert_eq!(http_prune.as_bytes(), cli_prune.stdout.as_slice());
    assert_eq!(parse(&http_prune)["status"], "pruned");
    assert_eq!(parse(&http_prune)["removedCount"], 2);

    let (status, again) = post(&server.route("prune"), &body);
    assert_eq!(status, 200);
    assert_eq!(
        again, http_prune,
        "an identical retry answers the identical body"
    );
    drop(server);
    // One receipt, though the request came twice.
    assert_eq!(common::receipts(&through_http).len(), 1);
}

#[test]
fn history_and_prune_batch_answer_the_bytes_the_cli_prints() {
    let through_cli = Fixture::new();
    let through_http = Fixture::new();
    let server = Server::start(&through_http.db, &[]);

    let cli_page = run(
        &through_cli.db,
        &["--json", "history", MANY_TURNS, "--purpose", "prune"],
    );
    assert_exit(&cli_page, 0);
    let body = json!({ "sessionID": MANY_TURNS, "purpose": "prune" }).to_string();
    let (status, http_page) = post(&server.route("history"), &body);
    assert_eq!(status, 200, "{http_page}");
    assert_eq!(http_page.as_bytes(), cli_page.stdout.as_slice());

    let candidates: Vec<serde_json::Value> = parse(&http_page)["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["messageID"] == TURN1 || c["messageID"] == TURN5)
        .cloned()
        .collect();
    assert_eq!(candidates.len(), 2, "{http_page}");
    let batch = json!({ "sessionID": MANY_TURNS, "candidates": candidates }).to_string();
    let cli_batch = common::cli::run_with_stdin(
        &through_cli.db,
        &["--json", "prune-batch", MANY_TURNS, "--candidates", "-"],
        batch.as_bytes(),
    );
    assert_exit(&cli_batch, 0);
    let (status, http_batch) = post(&server.route("prune-batch"), &batch);
    assert_eq!(status, 200, "{http_batch}");
    assert_eq!(http_batch.as_bytes(), cli_batch.stdout.as_slice());
    let results = parse(&http_batch)["results"].clone();
    assert_eq!(results[0]["result"]["status"], "pruned");
    assert_eq!(results[1]["result"]["status"], "pruned");
}
