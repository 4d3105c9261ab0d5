//! `serve` and its page on the databases the real OpenCode 2 (2.0.15 and 2.1.2) writes: one it
//! wrote from scratch and one it migrated from OpenCode 1.18.34
//! (`tests/fixtures/opencode-1.18.34-matrix/`).
//! With no `--workspace` given, the workspaces come from OpenCode 2's own tables; every route the
//! page reads answers 200 with no SQL in it; in headless Chromium the page lists the sessions,
//! draws the overview, opens a session and prunes a message, and says nothing is wrong.

use crate::common;
use crate::opencode_real;

use std::path::Path;
use std::time::Duration;

use common::browser::Browser;
use common::http::{get, parse, Server};
use opencode_real::{opencode2_home, Layout, OpenCode, Service};
use rusqlite::Connection;
use serde_json::Value;

const TURN_TIMEOUT: Duration = Duration::from_secs(90);

/// `serve` on `db` with the workspaces it finds itself.
fn serve(db: &Path) -> Server {
    Server::start_exactly(db, &["--heartbeat".into(), "200ms".into()], &[])
}

/// The project id and one completed assistant row with a tool item of `session` in `db`.
fn project_and_message(db: &Path, session: &str) -> (String, String) {
    let conn = Connection::open(db).expect("open");
    conn.query_row(
        "SELECT s.project_id, m.id FROM session_v2 s JOIN session_message m ON m.session_id = s.id \
         WHERE s.id = ?1 AND m.type = 'assistant' \
           AND json_type(m.data, '$.time.completed') IS NOT NULL \
           AND m.data LIKE '%\"type\":\"tool\"%' \
         ORDER BY m.seq LIMIT 1",
        [session],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .expect("a prunable message")
}

/// Every route the page reads on opening, answered 200 without a word of SQL; the workspaces
/// found.
fn routes_answer(server: &Server, workspace: &str) -> Value {
    let (status, workspaces) = get(&server.url("/api/workspaces"));
    assert_eq!(status, 200, "{workspaces}");
    for route in [
        format!("/api/workspaces/{workspace}/sessions"),
        format!("/api/workspaces/{workspace}/stats"),
        format!("/api/workspaces/{workspace}/session-pruning/receipts"),
        format!("/api/workspaces/{workspace}/session-pruning/audit"),
        "/health".to_string(),
    ] {
        let (status, body) = get(&server.url(&route));
        assert_eq!(status, 200, "{route}: {body}");
        assert!(!body.contains("SELECT "), "{route}: {body}");
    }
    parse(&workspaces)
}

async fn page_prunes(
    browser: &Browser,
    server: &Server,
    workspace: &str,
    session: &str,
    message: &str,
) {
    let url = server.url(&format!("/#ws={workspace}&session={session}"));
    browser.open_tab(&url).await;
    browser
        .until(
            "the session in the sessions list",
            &format!("return !!document.querySelector('#sessions-list li[data-session-id=\"{session}\"]')"),
        )
        .await;
    browser
        .until(
            "the overview read",
            "return document.getElementById('overview-summary').textContent !== 'reading…'",
        )
        .await;
    browser
        .until(
            "the message drawn",
            &format!("return !!document.querySelector('article[data-message-id=\"{message}\"] button.preview')"),
        )
        .await;
    browser
        .click(&format!(
            "article[data-message-id=\"{message}\"] button.preview"
        ))
        .await;
    browser
        .until(
            "the preview",
            "return document.querySelectorAll('#panel-body label.choice input:checked').length > 0",
        )
        .await;
    browser.click("#panel-body button.prune").await;
    let result = browser
        .until(
            "the prune's answer",
            "return document.querySelector('#panel-body .result')?.textContent",
        )
        .await;
    assert!(
        result
            .as_str()
            .is_some_and(|text| text.to_lowercase().contains("pruned")),
        "{result}"
    );
    let notice = browser
        .eval("const n = document.getElementById('notice'); return n.hidden ? '' : n.textContent")
        .await;
    assert_eq!(notice, Value::from(""), "the page says something is wrong");
}

/// Serves `db`, checks the routes, then drives the page in Chromium (on a runtime of its own:
/// the servers and the mock model run on theirs).
fn serve_and_browse(db: &Path, session: &str) {
    let (project, message) = project_and_message(db, session);
    let server = serve(db);
    let workspaces = routes_answer(&server, &project);
    assert!(workspaces.to_string().contains(&project), "{workspaces}");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for the browser");
    runtime.block_on(async {
        let Some(browser) = Browser::start().await else {
            return;
        };
        page_prunes(&browser, &server, &project, session, &message).await;
        browser.close().await;
    });
    server.stop();
}

fn page_on_a_database_opencode_2_wrote(version: &str) {
    let Some((_mock, home)) = opencode2_home(version) else {
        return;
    };
    let session = {
        let mut service = Service::start(&home);
        let session = service.session_with_turns("shown on the page", 2, TURN_TIMEOUT);
        service.stop();
        session
    };
    serve_and_browse(&home.database(), &session);
}

fn page_on_a_database_opencode_2_migrated(version: &str) {
    let Some(bin) = opencode_real::binary_of(version) else {
        return;
    };
    let fixture = opencode_real::workspace().join("tests/fixtures/opencode-1.18.34-matrix");
    let text = std::fs::read_to_string(fixture.join("manifest.json")).expect("manifest");
    let manifest: Value = serde_json::from_str(&text).expect("manifest JSON");
    let mock = opencode_real::MockModel::start();
    let home = OpenCode::with_layout(
        &bin,
        &mock.base_url(),
        Layout::generated(
            manifest["generator"]["work_dir"]
                .as_str()
                .expect("work_dir"),
        ),
    );
    opencode_real::configure_service(&home, &mock.base_url());
    home.copy_fixture(&fixture);
    home.relocate_sessions();
    {
        let mut service = Service::start(&home);
        service.wait_migration(TURN_TIMEOUT);
        service.stop();
    }
    let session = manifest["scenarios"]["b_multi_turn"]["session"]
        .as_str()
        .expect("the multi-turn session");
    serve_and_browse(&home.database(), session);
}

#[test]
fn the_page_works_on_a_database_opencode_2_1_2_wrote() {
    page_on_a_database_opencode_2_wrote("2.1.2");
}

#[test]
fn the_page_works_on_a_database_opencode_2_0_15_wrote() {
    page_on_a_database_opencode_2_wrote("2.0.15");
}

#[test]
fn the_page_works_on_a_database_opencode_2_1_2_migrated() {
    page_on_a_database_opencode_2_migrated("2.1.2");
}

#[test]
fn the_page_works_on_a_database_opencode_2_0_15_migrated() {
    page_on_a_database_opencode_2_migrated("2.0.15");
}
