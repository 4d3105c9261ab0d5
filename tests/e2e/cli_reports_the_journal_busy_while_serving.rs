//! While `serve` holds the journal, CLI commands that need it say so and change nothing (exit 3,
//! naming `serve`; `audit` also names the route that audits meanwhile), and read-only commands
//! work as usual.

use crate::common;

use common::cli::{assert_exit, run};
use common::http::Server;
use common::{Fixture, MANY_TURNS, TURN5};

#[test]
fn commands_that_need_the_journal_are_blocked_and_readers_work() {
    let fx = Fixture::new();
    let server = Server::start(&fx.db, &[]);
    let before = (fx.file_digest(), fx.journal_digest());

    let events = run(&fx.db, &["events"]);
    assert_exit(&events, 3);
    let stderr = String::from_utf8_lossy(&events.stderr);
    assert!(
        stderr.contains("another session-prune process holds the journal")
            && stderr.contains("`serve`"),
        "{stderr}"
    );
    let events = run(&fx.db, &["events", "--json"]);
    assert_exit(&events, 3);
    assert_eq!(
        String::from_utf8_lossy(&events.stdout),
        "{\"status\":\"blocked\",\"reason\":\"maintenance_required\"}\n"
    );

    let preview = run(&fx.db, &["--json", "preview", MANY_TURNS, TURN5]);
    assert_exit(&preview, 0);
    let doc: serde_json::Value = serde_json::from_slice(&preview.stdout).unwrap();
    let revision = doc["revision"].as_str().unwrap();
    let prune = run(
        &fx.db,
        &[
            "--json",
            "prune",
            MANY_TURNS,
            TURN5,
            "--revision",
            revision,
            "--indexes",
            "1",
        ],
    );
    assert_exit(&prune, 3);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&prune.stdout).unwrap(),
        serde_json::json!({ "status": "blocked", "reason": "maintenance_required" })
    );
    assert_eq!((fx.file_digest(), fx.journal_digest()), before);
    drop(server);
}

#[test]
fn the_audit_while_serving_is_blocked_and_names_the_route_that_audits() {
    let fx = Fixture::new();
    let server = Server::start(&fx.db, &[]);
    let before = (fx.file_digest(), fx.journal_digest());
    // The audit cannot read its second witness, the journal, while `serve` holds it.
    let audit = run(&fx.db, &["--json", "audit"]);
    assert_exit(&audit, 3);
    assert_eq!(
        String::from_utf8_lossy(&audit.stdout),
        "{\"status\":\"blocked\",\"reason\":\"maintenance_required\"}\n"
    );
    let stderr = String::from_utf8_lossy(&audit.stderr);
    assert!(
        stderr.contains("another session-prune process holds the journal")
            && stderr.contains("GET /api/workspaces/{id}/session-pruning/audit"),
        "{stderr}"
    );
    assert_eq!((fx.file_digest(), fx.journal_digest()), before);
    drop(server);
}

#[test]
fn a_journal_held_by_the_opencode_plugins_server_is_named_with_what_to_do() {
    let fx = Fixture::new();
    let server = Server::start(&fx.db, &[]);
    // The registration the plugin writes beside the database for the server it started.
    let mut registration = fx.db.as_os_str().to_owned();
    registration.push(".session-prune-serve.json");
    std::fs::write(
        &registration,
        r#"{"pid":4242,"url":"http://127.0.0.1:1","password":"x"}"#,
    )
    .expect("registration");
    let before = (fx.file_digest(), fx.journal_digest());
    let clean = run(&fx.db, &["clean", "--all", "--apply"]);
    assert_exit(&clean, 3);
    let stderr = String::from_utf8_lossy(&clean.stderr);
    assert!(
        stderr.contains(
            "the OpenCode plugin's server (pid 4242) holds it while OpenCode runs: prune from \
             inside OpenCode (/prune, /prune all), or stop OpenCode first"
        ),
        "{stderr}"
    );
    assert_eq!((fx.file_digest(), fx.journal_digest()), before);
    drop(server);
}
