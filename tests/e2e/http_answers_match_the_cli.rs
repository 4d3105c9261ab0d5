//! The HTTP API answers preview, prune and prune-batch with the very bytes `session-prune
//! --json` prints for the same request (and history with the same pages' content), and an
//! identical retry with the identical body.

use crate::common;

use common::app::App;
use common::audit::clean_parts;
use common::cli::{assert_exit, run};
use common::http::parse;
use common::{Fixture, MANY_TURNS, TURN1, TURN5};
use serde_json::json;

#[test]
fn preview_and_prune_answer_the_bytes_the_cli_prints() {
    let through_cli = Fixture::new();
    let through_http = Fixture::new();
    let app = App::start(&through_http);

    let cli_preview = run(&through_cli.db, &["--json", "preview", MANY_TURNS, TURN5]);
    assert_exit(&cli_preview, 0);
    let body = json!({ "sessionID": MANY_TURNS, "messageID": TURN5 }).to_string();
    let (status, http_preview) = app.post(&app.route("preview"), &body);
    assert_eq!(status, 200, "{http_preview}");
    assert_eq!(http_preview, String::from_utf8(cli_preview.stdout).unwrap());

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
    let (status, http_prune) = app.post(&app.route("prune"), &body);
    assert_eq!(status, 200, "{http_prune}");
    assert_eq!(http_prune, String::from_utf8(cli_prune.stdout).unwrap());
    assert_eq!(parse(&http_prune)["status"], "pruned");
    assert_eq!(parse(&http_prune)["removedCount"], 2);

    let (status, again) = app.post(&app.route("prune"), &body);
    assert_eq!(status, 200);
    assert_eq!(
        again, http_prune,
        "an identical retry answers the identical body"
    );
    app.stop();
    // One receipt, though the request came twice.
    assert_eq!(common::receipts(&through_http).len(), 1);
}

/// Every page of a `purpose: "prune"` scan of `session`, following the cursor, as `(candidates,
/// scanned)`. Pages end after 40 ms, so where they split depends on the machine's load; what
/// they hold together does not.
fn whole_scan(
    mut page: impl FnMut(Option<&str>) -> serde_json::Value,
) -> (Vec<serde_json::Value>, u64) {
    let (mut candidates, mut scanned) = (Vec::new(), 0);
    let mut cursor: Option<String> = None;
    loop {
        let doc = page(cursor.as_deref());
        assert_eq!(doc["status"], "page", "{doc}");
        candidates.extend(doc["candidates"].as_array().unwrap().iter().cloned());
        scanned += doc["scanned"].as_u64().unwrap();
        match doc["cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => return (candidates, scanned),
        }
    }
}

#[test]
fn history_lists_what_the_cli_lists_and_prune_batch_answers_its_bytes() {
    let through_cli = Fixture::new();
    let through_http = Fixture::new();
    let app = App::start(&through_http);

    let by_cli = whole_scan(|cursor| {
        let mut args = vec!["--json", "history", MANY_TURNS, "--purpose", "prune"];
        if let Some(cursor) = cursor {
            args.extend(["--cursor", cursor]);
        }
        let out = run(&through_cli.db, &args);
        assert_exit(&out, 0);
        serde_json::from_slice(&out.stdout).unwrap()
    });
    let by_http = whole_scan(|cursor| {
        let mut body = json!({ "sessionID": MANY_TURNS, "purpose": "prune" });
        if let Some(cursor) = cursor {
            body["cursor"] = cursor.into();
        }
        let (status, page) = app.post(&app.route("history"), &body.to_string());
        assert_eq!(status, 200, "{page}");
        parse(&page)
    });
    assert_eq!(by_http, by_cli);

    let candidates: Vec<serde_json::Value> = by_http
        .0
        .iter()
        .filter(|c| c["messageID"] == TURN1 || c["messageID"] == TURN5)
        .cloned()
        .collect();
    assert_eq!(candidates.len(), 2);
    let batch = json!({ "sessionID": MANY_TURNS, "candidates": candidates }).to_string();
    let cli_batch = common::cli::run_with_stdin(
        &through_cli.db,
        &["--json", "prune-batch", MANY_TURNS, "--candidates", "-"],
        batch.as_bytes(),
    );
    assert_exit(&cli_batch, 0);
    let (status, http_batch) = app.post(&app.route("prune-batch"), &batch);
    assert_eq!(status, 200, "{http_batch}");
    assert_eq!(http_batch, String::from_utf8(cli_batch.stdout).unwrap());
    let results = parse(&http_batch)["results"].clone();
    assert_eq!(results[0]["result"]["status"], "pruned");
    assert_eq!(results[1]["result"]["status"], "pruned");
}

#[test]
fn audit_answers_the_report_the_cli_prints() {
    let fx = Fixture::new();
    let cleaned = clean_parts(&fx.db, "--all");
    assert_exit(&cleaned, 0);
    let app = App::start(&fx);
    let (status, whole) = app.get(&app.route("audit"));
    assert_eq!(status, 200, "{whole}");
    let (status, of_session) = app.get(&format!("{}?sessionID={MANY_TURNS}", app.route("audit")));
    assert_eq!(status, 200, "{of_session}");
    app.stop();
    let cli_whole = run(&fx.db, &["--json", "audit"]);
    assert_exit(&cli_whole, 0);
    assert_eq!(whole, String::from_utf8(cli_whole.stdout).unwrap());
    let cli_session = run(&fx.db, &["--json", "audit", "--session", MANY_TURNS]);
    assert_exit(&cli_session, 0);
    assert_eq!(of_session, String::from_utf8(cli_session.stdout).unwrap());
    assert_eq!(parse(&whole)["receipts"], 11);
    assert!(parse(&of_session)["receipts"].as_u64().unwrap() < 11);
}

/// `(request key, bytes removed)` of every receipt of `fixture`, in the order they committed.
fn receipt_keys(fixture: &Fixture) -> Vec<(String, u64)> {
    common::receipts(fixture)
        .into_iter()
        .map(|r| (r.request_key, r.bytes_removed))
        .collect()
}

#[test]
fn clean_plan_plans_what_the_cli_clean_prunes() {
    let through_cli = Fixture::new();
    let through_http = Fixture::new();
    let app = App::start(&through_http);
    // The route plans the session's tool and reasoning parts: the CLI's clean without its
    // compaction of superseded snapshots.
    let clean = [
        "--json",
        "clean",
        MANY_TURNS,
        "--keep-last-turns",
        "1",
        "--no-compact",
    ];
    let dry = run(&through_cli.db, &clean);
    assert_exit(&dry, 0);
    let dry: serde_json::Value = serde_json::from_slice(&dry.stdout).unwrap();
    let body = json!({ "sessionID": MANY_TURNS, "keepLastTurns": 1 }).to_string();
    let (status, plan) = app.post(&app.route("clean-plan"), &body);
    assert_eq!(status, 200, "{plan}");
    let plan = parse(&plan);
    assert_eq!(plan["status"], "plan", "{plan}");
    let prunes = plan["prunes"].as_array().unwrap();
    assert!(prunes.iter().all(|p| p["blocked"].is_null()), "{plan}");
    assert_eq!(prunes.len(), 9, "{plan}");
    assert_eq!(dry["pruned"], 9, "{dry}");
    assert_eq!(plan["lookedAt"], dry["considered"]);
    assert_eq!(plan["keptInTurns"], dry["keptRecent"]);
    assert_eq!(plan["nothingToPrune"], dry["nothingToPrune"]);
    assert_eq!(plan["alreadyPruned"], dry["alreadyPruned"]);
    assert_eq!(plan["skipped"], dry["skipped"]);
    assert_eq!(plan["parts"], dry["parts"]);
    assert_eq!(plan["bytes"], dry["bytes"]);

    // Applied, the plan's prunes commit the receipts the CLI's clean commits.
    let mut apply = clean.to_vec();
    apply.push("--apply");
    assert_exit(&run(&through_cli.db, &apply), 0);
    for prune in prunes {
        let body = json!({
            "sessionID": MANY_TURNS,
            "messageID": prune["messageID"],
            "revision": prune["revision"],
            "indexes": prune["indexes"],
        })
        .to_string();
        let (status, answer) = app.post(&app.route("prune"), &body);
        assert_eq!(status, 200, "{answer}");
        assert_eq!(parse(&answer)["status"], "pruned", "{answer}");
    }
    app.stop();
    let expected = receipt_keys(&through_cli);
    assert_eq!(expected.len(), 9);
    assert_eq!(receipt_keys(&through_http), expected);
}

#[test]
fn clean_plan_refuses_kept_turns_that_are_not_a_whole_number() {
    let fx = Fixture::new();
    let app = App::start(&fx);
    let (database, journal) = (fx.file_digest(), fx.journal_digest());
    for kept in [
        json!(-1),
        json!(1.5),
        json!("2"),
        json!(null),
        json!(4_294_967_296_u64),
    ] {
        let body = json!({ "sessionID": MANY_TURNS, "keepLastTurns": kept }).to_string();
        let (status, answer) = app.post(&app.route("clean-plan"), &body);
        assert_eq!(status, 400, "{kept}: {answer}");
        let answer = parse(&answer);
        assert_eq!(answer["field"], "keepLastTurns", "{kept}: {answer}");
    }
    // Nothing was written.
    assert_eq!(fx.file_digest(), database);
    assert_eq!(fx.journal_digest(), journal);
    app.stop();
    assert!(common::receipts(&fx).is_empty());
}

/// The pinned fixture's session with a completed compaction (`fixture: compacted`).
const COMPACTED: &str = "ses_dd9927d77ffeCzugJZ3vDGPMn9";

#[test]
fn clean_plan_before_compaction_plans_what_clean_before_compaction_prunes() {
    let fx = Fixture::new();
    let app = App::start(&fx);
    let dry = run(
        &fx.db,
        &[
            "--json",
            "clean",
            COMPACTED,
            "--keep-last-turns",
            "0",
            "--before-compaction",
            "--no-compact",
        ],
    );
    assert_exit(&dry, 0);
    let dry: serde_json::Value = serde_json::from_slice(&dry.stdout).unwrap();
    let plan_of = |before_compaction: bool| {
        let body = json!({
            "sessionID": COMPACTED, "keepLastTurns": 0, "beforeCompaction": before_compaction,
        })
        .to_string();
        let (status, plan) = app.post(&app.route("clean-plan"), &body);
        assert_eq!(status, 200, "{plan}");
        parse(&plan)
    };
    let old = plan_of(true);
    assert_eq!(old["status"], "plan", "{old}");
    assert_eq!(old["beforeCompaction"], true, "{old}");
    let prunes = old["prunes"].as_array().unwrap().len() as u64;
    assert!(prunes > 0, "the compaction has history before it: {old}");
    assert_eq!(Some(prunes), dry["pruned"].as_u64(), "{dry}");
    assert_eq!(old["lookedAt"], dry["considered"], "{dry}");
    assert_eq!(old["parts"], dry["parts"], "{dry}");
    assert_eq!(old["bytes"], dry["bytes"], "{dry}");

    // Without it, the plan also takes what OpenCode still sends the model.
    let all = plan_of(false);
    assert_eq!(all["beforeCompaction"], false, "{all}");
    assert!(
        all["prunes"].as_array().unwrap().len() as u64 > prunes,
        "{all}"
    );
    app.stop();
    assert!(common::receipts(&fx).is_empty(), "a plan writes nothing");
}

#[test]
fn clean_plan_refuses_a_before_compaction_that_is_not_a_boolean() {
    let fx = Fixture::new();
    let app = App::start(&fx);
    let (database, journal) = (fx.file_digest(), fx.journal_digest());
    for given in [json!("yes"), json!(1), json!(null)] {
        let body = json!({ "sessionID": COMPACTED, "beforeCompaction": given }).to_string();
        let (status, answer) = app.post(&app.route("clean-plan"), &body);
        assert_eq!(status, 400, "{given}: {answer}");
        assert_eq!(
            parse(&answer)["field"],
            "beforeCompaction",
            "{given}: {answer}"
        );
    }
    assert_eq!(fx.file_digest(), database);
    assert_eq!(fx.journal_digest(), journal);
    app.stop();
    assert!(common::receipts(&fx).is_empty());
}
