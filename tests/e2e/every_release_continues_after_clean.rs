//! The version matrix, interop half: for each fixture in `tests/fixtures/` written by a real
//! OpenCode release (1.2.27, 1.3.2, 1.14.48, 1.15.13, 1.17.19, 1.18.34, 1.19.5, and the 1.2.27 and
//! 1.14.48 databases upgraded in place by 1.18.34), `clean --all --apply --keep-last-turns 0`
//! prunes exactly the complete assistant messages with tool or reasoning parts, and then the
//! release that owns the database (1.18.34 for the upgraded ones):
//!
//! - exports every session as JSON, the pruned messages present without those parts;
//! - continues the multi-turn session (scenario b) through its API, sending the model the
//!   session's text but none of the pruned tool output or reasoning, and stores the reply;
//! - stops on SIGTERM and logs no error about the database.
//!
//! Each runs twice: on the fixture as OpenCode left it (`auto_vacuum = NONE`), and on the
//! fixture switched by `vacuum --online-shrink` (`auto_vacuum = INCREMENTAL`), where the clean
//! gives every freed page back and the release must read, write and export the file as any
//! other, and leave it switched.
//!
//! What is expected comes from each fixture's `manifest.json`, never from constants. Binaries:
//! `support/binary.rs` ([`opencode_real::binary_of`]); without one a test prints
//! `SKIPPED` and why and returns, except under `CI=true`, where it fails.

use crate::opencode_real;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use opencode_real::{http, query_value, Layout, MockModel, OpenCode, RequestKind, Stopped};
use rusqlite::Connection;
use serde_json::{json, Value};

const CLEAN_TIMEOUT: Duration = Duration::from_secs(60);
const EXPORT_TIMEOUT: Duration = Duration::from_secs(60);
const PROMPT_TIMEOUT: Duration = Duration::from_secs(90);
const SIGTERM_GRACE: Duration = Duration::from_secs(15);
/// The new prompt of the continued session; it names no canary.
const PROMPT: &str = "Continue after the clean: say you are done.";
/// Part types a clean removes (with the defaults: every tool but `skill`, and reasoning).
const TECHNICAL: [&str; 2] = ["tool", "reasoning"];
/// Words that make an error line one about the database.
const DATABASE_WORDS: [&str; 7] = [
    "sqlite",
    "database",
    "opencode.db",
    "drizzle",
    "migration",
    "no such table",
    "no such column",
];

// ------------------------------------------------------------------------------------------
// What the manifest promises

/// One part of a manifest message.
struct PartFact {
    id: String,
    kind: String,
    canaries: Vec<String>,
}

/// One message of a manifest session.
struct MessageFact {
    id: String,
    role: String,
    complete: bool,
    parts: Vec<PartFact>,
}

impl MessageFact {
    fn technical(&self) -> impl Iterator<Item = &PartFact> {
        self.parts
            .iter()
            .filter(|p| TECHNICAL.contains(&p.kind.as_str()))
    }

    /// A complete assistant message with tool or reasoning parts: what the clean prunes.
    fn prunable(&self) -> bool {
        self.role == "assistant" && self.complete && self.technical().next().is_some()
    }

    /// The ids of the parts a prune leaves, in manifest order.
    fn kept_part_ids(&self) -> Vec<String> {
        self.parts
            .iter()
            .filter(|p| !TECHNICAL.contains(&p.kind.as_str()))
            .map(|p| p.id.clone())
            .collect()
    }
}

/// One manifest session.
struct SessionFact {
    id: String,
    messages: Vec<MessageFact>,
}

/// The facts of one fixture folder's `manifest.json` this test relies on.
struct Manifest {
    /// `generator.work_dir`: the directory every session names.
    work_dir: String,
    sessions: Vec<SessionFact>,
    /// `scenarios.b_multi_turn.session`.
    multi_turn: String,
}

fn text(value: &Value, what: &str) -> String {
    value
        .as_str()
        .unwrap_or_else(|| panic!("manifest: {what} is not a string: {value}"))
        .to_string()
}

fn list<'a>(value: &'a Value, what: &str) -> &'a Vec<Value> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("manifest: {what} is not a list: {value}"))
}

impl Manifest {
    fn read(fixture: &Path) -> Self {
        let path = fixture.join("manifest.json");
        let raw = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let doc: Value = serde_json::from_slice(&raw).expect("manifest.json is JSON");
        let sessions = list(&doc["sessions"], "sessions")
            .iter()
            .map(|s| SessionFact {
                id: text(&s["id"], "session id"),
                messages: list(&s["messages"], "messages")
                    .iter()
                    .map(|m| MessageFact {
                        id: text(&m["id"], "message id"),
                        role: text(&m["role"], "message role"),
                        complete: m["state"] == "complete",
                        parts: list(&m["parts"], "parts")
                            .iter()
                            .map(|p| PartFact {
                                id: text(&p["id"], "part id"),
                                kind: text(&p["type"], "part type"),
                                canaries: list(&p["canaries"], "canaries")
                                    .iter()
                                    .map(|c| text(c, "canary"))
                                    .collect(),
                            })
                            .collect(),
                    })
                    .collect(),
            })
            .collect();
        Self {
            work_dir: text(&doc["generator"]["work_dir"], "generator.work_dir"),
            sessions,
            multi_turn: text(
                &doc["scenarios"]["b_multi_turn"]["session"],
                "scenarios.b_multi_turn.session",
            ),
        }
    }

    fn messages(&self) -> impl Iterator<Item = &MessageFact> {
        self.sessions.iter().flat_map(|s| s.messages.iter())
    }

    fn prunable(&self) -> impl Iterator<Item = &MessageFact> {
        self.messages().filter(|m| m.prunable())
    }

    /// Canaries of the tool and reasoning parts a clean removes.
    fn pruned_canaries(&self) -> BTreeSet<String> {
        self.prunable()
            .flat_map(|m| m.technical())
            .flat_map(|p| p.canaries.iter().cloned())
            .collect()
    }

    /// Assistant messages a clean must leave whole: those not complete (the killed run's).
    fn incomplete(&self) -> impl Iterator<Item = &MessageFact> {
        self.messages()
            .filter(|m| m.role == "assistant" && !m.complete)
    }

    fn session(&self, id: &str) -> &SessionFact {
        self.sessions
            .iter()
            .find(|s| s.id == id)
            .unwrap_or_else(|| panic!("manifest has no session {id}"))
    }
}

// ------------------------------------------------------------------------------------------
// The database after the clean

fn part_ids_of(conn: &Connection, message: &str) -> BTreeSet<String> {
    let mut stmt = conn
        .prepare("SELECT id FROM part WHERE message_id = ?1")
        .expect("prepare");
    let rows = stmt
        .query_map([message], |r| r.get(0))
        .expect("query parts");
    rows.map(|r| r.expect("part id")).collect()
}

/// Ids of the part rows whose data holds `needle` (`instr`, so `_` is no wildcard).
fn parts_holding(conn: &Connection, needle: &str) -> BTreeSet<String> {
    let mut stmt = conn
        .prepare("SELECT id FROM part WHERE instr(data, ?1) > 0")
        .expect("prepare");
    let rows = stmt.query_map([needle], |r| r.get(0)).expect("query parts");
    rows.map(|r| r.expect("part id")).collect()
}

fn message_count(conn: &Connection) -> usize {
    let count: i64 = conn
        .query_row("SELECT count(*) FROM message", [], |r| r.get(0))
        .expect("count messages");
    usize::try_from(count).expect("a count is not negative")
}

/// Checks the cleaned database against the manifest: every message row is still there; each
/// pruned message keeps exactly its other parts; the incomplete messages keep every part; and
/// the only part rows holding a tool or reasoning canary are the incomplete messages'.
fn assert_clean_result(db: &Path, manifest: &Manifest) {
    let conn = Connection::open(db).expect("open the cleaned database");
    assert_eq!(message_count(&conn), manifest.messages().count());
    for message in manifest.prunable() {
        let kept: BTreeSet<String> = message.kept_part_ids().into_iter().collect();
        assert_eq!(
            part_ids_of(&conn, &message.id),
            kept,
            "parts of {}",
            message.id
        );
    }
    let mut kept_technical = BTreeSet::new();
    for message in manifest.incomplete() {
        let all: BTreeSet<String> = message.parts.iter().map(|p| p.id.clone()).collect();
        assert_eq!(
            part_ids_of(&conn, &message.id),
            all,
            "parts of {}",
            message.id
        );
        kept_technical.extend(
            message
                .technical()
                .filter(|p| !p.canaries.is_empty())
                .map(|p| p.id.clone()),
        );
    }
    for canary in manifest.pruned_canaries() {
        assert_eq!(
            parts_holding(&conn, &canary),
            BTreeSet::new(),
            "part rows still holding {canary}"
        );
    }
    let mut holding: BTreeSet<String> = parts_holding(&conn, "TOOL_CANARY_");
    holding.extend(parts_holding(&conn, "REASONING_CANARY_"));
    assert_eq!(
        holding, kept_technical,
        "part rows holding a tool or reasoning canary"
    );
}

// ------------------------------------------------------------------------------------------
// Steps

/// Runs `session-prune --db DB --quiet-period 0 --abandoned-after 1m clean --all --apply
/// --keep-last-turns 0 --json` (a killed run abandoned after a minute: a fixture written today
/// is not yet a day old), asserts exit 0 and returns its report.
fn clean_everything(db: &Path) -> Value {
    let mut cmd = crate::common::cli::session_prune();
    cmd.arg("--db")
        .arg(db)
        .args(["--quiet-period", "0", "--abandoned-after", "1m"])
        .args(["clean", "--all", "--apply"])
        .args(["--keep-last-turns", "0", "--json"]);
    let out = opencode_real::run_bounded(&mut cmd, CLEAN_TIMEOUT)
        .unwrap_or_else(|e| panic!("session-prune clean: {e}"));
    assert!(
        out.status.success(),
        "session-prune clean: {}\n{}\n{}",
        out.status,
        out.stdout,
        out.stderr
    );
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("the clean report is not JSON ({e}): {}", out.stdout))
}

/// `opencode export` of every session: JSON with every manifest message, the pruned ones
/// without tool or reasoning parts, and no pruned canary anywhere.
fn assert_exports(env: &OpenCode, manifest: &Manifest, pruned: &BTreeSet<String>) {
    for session in &manifest.sessions {
        let out = env.export(&session.id, EXPORT_TIMEOUT);
        assert!(
            out.status.success(),
            "opencode export {}: {}\n{}",
            session.id,
            out.status,
            out.stderr
        );
        let exported: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| {
            panic!("export of {} is not JSON ({e}): {}", session.id, out.stdout)
        });
        assert_eq!(exported["info"]["id"], session.id.as_str());
        let messages = exported["messages"]
            .as_array()
            .unwrap_or_else(|| panic!("export of {} has no messages: {exported}", session.id));
        let ids: BTreeSet<&str> = messages
            .iter()
            .filter_map(|m| m["info"]["id"].as_str())
            .collect();
        let expected: BTreeSet<&str> = session.messages.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, expected, "messages exported for {}", session.id);
        for message in session.messages.iter().filter(|m| m.prunable()) {
            let exported_message = messages
                .iter()
                .find(|m| m["info"]["id"] == message.id.as_str())
                .expect("exported above");
            let parts: Vec<String> = exported_message["parts"]
                .as_array()
                .map(|parts| {
                    parts
                        .iter()
                        .filter_map(|p| p["id"].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            assert_eq!(
                parts,
                message.kept_part_ids(),
                "parts exported for {}",
                message.id
            );
        }
        for canary in pruned {
            assert!(
                !out.stdout.contains(canary.as_str()),
                "export of {} holds {canary}",
                session.id
            );
        }
    }
}

/// Error lines of `log` (a line holding `ERROR` or, any case, `error`) that mention the
/// database.
fn database_errors(log: &str) -> Vec<String> {
    log.lines()
        .filter(|line| line.to_ascii_lowercase().contains("error"))
        .filter(|line| {
            let lower = line.to_ascii_lowercase();
            DATABASE_WORDS.iter().any(|word| lower.contains(word))
        })
        .map(str::to_string)
        .collect()
}

/// What to look at when OpenCode did not answer: its output, its log files and the requests
/// the mock model saw.
fn diagnosis(env: &OpenCode, server: &opencode_real::Server, mock: &MockModel) -> String {
    let requests: Vec<String> = mock
        .requests()
        .iter()
        .map(|r| {
            format!(
                "{} {} {:?} ({} bytes)",
                r.method,
                r.path,
                r.kind,
                r.body.len()
            )
        })
        .collect();
    format!(
        "--- opencode serve output\n{}\n--- log files\n{}\n--- model requests\n{}",
        server.log(),
        env.log_files(),
        requests.join("\n")
    )
}

/// At most `max` bytes of `line` (cut at a character boundary).
fn truncate(line: &str, max: usize) -> &str {
    let mut end = line.len().min(max);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    &line[..end]
}

fn fixture_dir(name: &str) -> PathBuf {
    opencode_real::workspace().join("tests/fixtures").join(name)
}

/// The whole check for one fixture folder, with OpenCode `version`.
/// Whether the copy is switched to online shrink before the clean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum File {
    AsOpenCodeLeftIt,
    OnlineShrink,
}

/// Runs `session-prune --db DB vacuum --online-shrink --json` and asserts the switch.
fn switch_to_online_shrink(db: &Path) {
    let mut cmd = crate::common::cli::session_prune();
    cmd.arg("--db")
        .arg(db)
        .args(["vacuum", "--online-shrink", "--json"]);
    let out = opencode_real::run_bounded(&mut cmd, CLEAN_TIMEOUT)
        .unwrap_or_else(|e| panic!("session-prune vacuum: {e}"));
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    let doc: Value = serde_json::from_str(&out.stdout).expect("vacuum's JSON");
    assert_eq!(doc["status"], "vacuumed", "{doc}");
    assert_eq!(doc["autoVacuum"], "incremental", "{doc}");
}

/// `PRAGMA name` of the database.
fn pragma(conn: &Connection, name: &str) -> i64 {
    conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
        .unwrap_or_else(|e| panic!("PRAGMA {name}: {e}"))
}

fn release_continues_after_clean(fixture: &str, version: &str, file: File) {
    let Some(bin) = opencode_real::binary_of(version) else {
        return;
    };
    let started = Instant::now();
    let source = fixture_dir(fixture);
    let manifest = Manifest::read(&source);
    let pruned = manifest.pruned_canaries();
    assert!(
        !pruned.is_empty(),
        "{fixture}: the manifest names no canary"
    );
    let mock = MockModel::start();
    let env = OpenCode::with_layout(
        &bin,
        &mock.base_url(),
        Layout::generated(&manifest.work_dir),
    );
    assert!(
        env.work_is_fixture_project(),
        "{fixture}: the work tree must have the fixture's project id"
    );

    // 1. Clean a copy of the fixture as it is (or switched to online shrink first).
    let db = env.copy_fixture(&source);
    if file == File::OnlineShrink {
        switch_to_online_shrink(&db);
    }
    let report = clean_everything(&db);
    assert_eq!(report["status"], "cleaned", "{report}");
    assert_eq!(
        report["pruned"],
        manifest.prunable().count(),
        "{fixture}: {report}"
    );
    assert_eq!(report["failed"], 0, "{report}");
    assert_clean_result(&db, &manifest);
    if file == File::OnlineShrink {
        // Every page the clean freed went back: the file holds no free page.
        let given = &report["givenBack"];
        assert!(
            given["pages"].as_u64().unwrap_or(0) > 0,
            "{fixture}: {report}"
        );
        assert_eq!(given["leftPages"], 0, "{fixture}: {report}");
        let conn = Connection::open(&db).expect("open the cleaned copy");
        assert_eq!(pragma(&conn, "freelist_count"), 0, "{fixture}");
        assert_eq!(pragma(&conn, "auto_vacuum"), 2, "{fixture}");
    } else {
        assert_eq!(report.get("givenBack"), None, "{fixture}: {report}");
    }

    // 2. OpenCode opens that copy, its sessions moved to the work tree it runs in.
    env.relocate_sessions();

    // 3. Every session exports.
    assert_exports(&env, &manifest, &pruned);

    // 4. The multi-turn session continues.
    let session = manifest.session(&manifest.multi_turn);
    let texts: BTreeSet<String> = session
        .messages
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter(|p| p.kind == "text")
        .flat_map(|p| p.canaries.iter().cloned())
        .filter(|c| c.starts_with("TEXT_CANARY_"))
        .collect();
    assert!(!texts.is_empty(), "{fixture}: session b has no text canary");
    let mut server = env.serve();
    let path = format!(
        "/session/{}/message?directory={}",
        session.id,
        query_value(env.work_dir().to_str().expect("UTF-8 path"))
    );
    let body = json!({
        "parts": [{"type": "text", "text": PROMPT}],
        "model": env.layout().prompt_model(),
    });
    let reply =
        http(server.url(), "POST", &path, Some(&body), PROMPT_TIMEOUT).unwrap_or_else(|e| {
            panic!(
                "{fixture}: prompting {}: {e}\n{}",
                session.id,
                diagnosis(&env, &server, &mock)
            )
        });
    assert_eq!(
        reply.status,
        200,
        "{fixture}: {}\n{}",
        reply.body,
        diagnosis(&env, &server, &mock)
    );
    let reply = reply.json();
    assert_eq!(reply["info"]["finish"], "stop", "{fixture}: {reply}");
    let reply_id = text(&reply["info"]["id"], "reply id");

    // 5. It stops on SIGTERM, and nothing it logged is an error about the database.
    let stopped = server.terminate(SIGTERM_GRACE);
    let serve_log = server.log();
    assert!(
        matches!(stopped, Stopped::OnSigterm(_)),
        "{fixture}: opencode serve {stopped:?}\n{serve_log}"
    );
    let logs = format!("{serve_log}\n{}", env.log_files());
    let errors = database_errors(&logs);
    assert_eq!(errors, Vec::<String>::new(), "{fixture}: database errors");
    // Other errors and warnings are no failure here, but worth seeing in the output.
    for line in logs
        .lines()
        .filter(|l| l.starts_with("ERROR") || l.starts_with("WARN"))
    {
        eprintln!("{fixture}: opencode logged: {}", truncate(line, 400));
    }

    // The reply is stored, after the prompt, in the session.
    let conn = Connection::open(&db).expect("open the database after OpenCode");
    let (owner, data): (String, String) = conn
        .query_row(
            "SELECT session_id, data FROM message WHERE id = ?1",
            [&reply_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap_or_else(|e| panic!("{fixture}: reply {reply_id} not stored: {e}"));
    assert_eq!(owner, session.id);
    let stored: Value = serde_json::from_str(&data).expect("message data is JSON");
    assert_eq!(stored["role"], "assistant");
    assert_eq!(stored["finish"], "stop");
    let reply_text: String = conn
        .query_row(
            "SELECT group_concat(json_extract(data, '$.text'), '') FROM part \
             WHERE message_id = ?1 AND json_extract(data, '$.type') = 'text'",
            [&reply_id],
            |r| r.get(0),
        )
        .expect("the reply's text parts");
    assert_eq!(reply_text, opencode_real::REPLY_TEXT);
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity_check");
    assert_eq!(integrity, "ok");
    // OpenCode leaves the file's mode as it found it.
    let mode = if file == File::OnlineShrink { 2 } else { 0 };
    assert_eq!(pragma(&conn, "auto_vacuum"), mode, "{fixture}");
    drop(conn);

    // What the model was sent: the session's text, none of what was pruned.
    let requests = mock.requests();
    for request in &requests {
        for canary in &pruned {
            assert!(
                !request.body.contains(canary.as_str()),
                "{fixture}: the model was sent {canary}"
            );
        }
    }
    let continuation: Vec<_> = requests
        .iter()
        .filter(|r| r.kind == RequestKind::Chat)
        .filter(|r| r.last_user_text().is_some_and(|t| t.contains(PROMPT)))
        .collect();
    assert!(
        !continuation.is_empty(),
        "{fixture}: no chat request carried the new prompt ({} requests)",
        requests.len()
    );
    for request in &continuation {
        for canary in &texts {
            assert!(
                request.body.contains(canary.as_str()),
                "{fixture}: the continuation did not send {canary}"
            );
        }
    }
    eprintln!(
        "{fixture} ({file:?}) with opencode {version}: pruned {} messages, {} bytes; {} exports; \
         continued {} ({} chat requests); {stopped:?}; {:.1} s",
        report["pruned"],
        report["bytes"],
        manifest.sessions.len(),
        session.id,
        continuation.len(),
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn release_1_2_27_continues_its_database_after_clean() {
    release_continues_after_clean("opencode-1.2.27", "1.2.27", File::AsOpenCodeLeftIt);
}

#[test]
fn release_1_2_27_continues_its_database_switched_to_online_shrink_after_clean() {
    release_continues_after_clean("opencode-1.2.27", "1.2.27", File::OnlineShrink);
}

#[test]
fn release_1_3_2_continues_its_database_after_clean() {
    release_continues_after_clean("opencode-1.3.2", "1.3.2", File::AsOpenCodeLeftIt);
}

#[test]
fn release_1_3_2_continues_its_database_switched_to_online_shrink_after_clean() {
    release_continues_after_clean("opencode-1.3.2", "1.3.2", File::OnlineShrink);
}

#[test]
fn release_1_14_48_continues_its_database_after_clean() {
    release_continues_after_clean("opencode-1.14.48", "1.14.48", File::AsOpenCodeLeftIt);
}

#[test]
fn release_1_14_48_continues_its_database_switched_to_online_shrink_after_clean() {
    release_continues_after_clean("opencode-1.14.48", "1.14.48", File::OnlineShrink);
}

#[test]
fn release_1_15_13_continues_its_database_after_clean() {
    release_continues_after_clean("opencode-1.15.13", "1.15.13", File::AsOpenCodeLeftIt);
}

#[test]
fn release_1_15_13_continues_its_database_switched_to_online_shrink_after_clean() {
    release_continues_after_clean("opencode-1.15.13", "1.15.13", File::OnlineShrink);
}

#[test]
fn release_1_17_19_continues_its_database_after_clean() {
    release_continues_after_clean("opencode-1.17.19", "1.17.19", File::AsOpenCodeLeftIt);
}

#[test]
fn release_1_17_19_continues_its_database_switched_to_online_shrink_after_clean() {
    release_continues_after_clean("opencode-1.17.19", "1.17.19", File::OnlineShrink);
}

#[test]
fn release_1_18_34_continues_its_database_after_clean() {
    release_continues_after_clean(
        "opencode-1.18.34-matrix",
        opencode_real::VERSION,
        File::AsOpenCodeLeftIt,
    );
}

#[test]
fn release_1_18_34_continues_its_database_switched_to_online_shrink_after_clean() {
    release_continues_after_clean(
        "opencode-1.18.34-matrix",
        opencode_real::VERSION,
        File::OnlineShrink,
    );
}

#[test]
fn release_1_19_5_continues_its_database_after_clean() {
    release_continues_after_clean("opencode-1.19.5", "1.19.5", File::AsOpenCodeLeftIt);
}

#[test]
fn release_1_19_5_continues_its_database_switched_to_online_shrink_after_clean() {
    release_continues_after_clean("opencode-1.19.5", "1.19.5", File::OnlineShrink);
}

#[test]
fn release_1_18_34_continues_a_1_2_27_database_it_upgraded_after_clean() {
    release_continues_after_clean(
        "opencode-1.2.27-upgraded-1.18.34",
        opencode_real::VERSION,
        File::AsOpenCodeLeftIt,
    );
}

#[test]
fn release_1_18_34_continues_a_1_2_27_database_it_upgraded_switched_to_online_shrink_after_clean() {
    release_continues_after_clean(
        "opencode-1.2.27-upgraded-1.18.34",
        opencode_real::VERSION,
        File::OnlineShrink,
    );
}

#[test]
fn release_1_18_34_continues_a_1_14_48_database_it_upgraded_after_clean() {
    release_continues_after_clean(
        "opencode-1.14.48-upgraded-1.18.34",
        opencode_real::VERSION,
        File::AsOpenCodeLeftIt,
    );
}

#[test]
fn release_1_18_34_continues_a_1_14_48_database_it_upgraded_switched_to_online_shrink_after_clean()
{
    release_continues_after_clean(
        "opencode-1.14.48-upgraded-1.18.34",
        opencode_real::VERSION,
        File::OnlineShrink,
    );
}
