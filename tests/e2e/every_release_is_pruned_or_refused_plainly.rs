//! The version matrix: every database a real OpenCode release wrote (1.2.27, 1.3.2, 1.14.48,
//! 1.15.13, 1.17.19, 1.18.34, 1.19.5, and 1.2.27 and 1.14.48 upgraded in place by 1.18.34) goes through
//! every command (listings, stats, preview, prune and its dry run, history, prune-batch, clean and
//! its dry run, vacuum, and the HTTP preview and prune). Each answers exactly what the fixture's
//! manifest says it holds, every dry run predicts its apply, and no output shows a raw SQLite
//! message. The fixtures and the generator that made them: `scripts/opencode-fixtures/`.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::cli::{assert_exit, json};
use common::http::{parse, post, Server};
use serde_json::{json, Value};

/// Words of SQLite's own errors that must never reach a person.
const RAW_SQLITE: [&str; 5] = [
    "no such table",
    "no such column",
    "constraint failed",
    "unable to open",
    "syntax error",
];

/// One release's database, copied into a temporary folder, with its manifest.
struct Release {
    _dir: tempfile::TempDir,
    db: PathBuf,
    manifest: Value,
    /// Everything every command printed, for the raw-message check.
    printed: String,
}

impl Release {
    fn copy(folder: &str) -> Self {
        let source = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(folder);
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::copy(source.join("opencode.db"), dir.path().join("opencode.db"))
            .expect("copy database");
        let spill = dir.path().join("tool-output");
        std::fs::create_dir(&spill).expect("tool-output");
        for entry in std::fs::read_dir(source.join("tool-output")).expect("spill files") {
            let entry = entry.expect("entry");
            std::fs::copy(entry.path(), spill.join(entry.file_name())).expect("copy spill file");
        }
        let manifest: Value =
            serde_json::from_slice(&std::fs::read(source.join("manifest.json")).expect("manifest"))
                .expect("manifest JSON");
        Self {
            db: dir.path().join("opencode.db"),
            _dir: dir,
            manifest,
            printed: String::new(),
        }
    }

    /// Runs the binary (quiet period 0: the fixtures were written moments apart; unless `args`
    /// say otherwise, a killed run abandoned after a minute: a fixture written today is not yet
    /// a day old) and keeps what it printed.
    fn run(&mut self, args: &[&str]) -> Output {
        let mut all = vec!["--quiet-period", "0"];
        if !args.contains(&"--abandoned-after") {
            all.extend(["--abandoned-after", "1m"]);
        }
        all.extend_from_slice(args);
        let out = common::cli::run(&self.db, &all);
        self.printed.push_str(&String::from_utf8_lossy(&out.stdout));
        self.printed.push_str(&String::from_utf8_lossy(&out.stderr));
        out
    }

    /// [`Self::run`] expecting exit 0 and one JSON document.
    fn json(&mut self, args: &[&str]) -> Value {
        let out = self.run(args);
        assert_exit(&out, 0);
        json(&out)
    }

    fn sessions(&self) -> &Vec<Value> {
        self.manifest["sessions"].as_array().expect("sessions")
    }

    /// The session of a scenario (`a` one tool call, `b` three turns, `c` fork, `d` compacted,
    /// `e` killed run).
    fn session(&self, scenario: &str) -> &Value {
        self.sessions()
            .iter()
            .find(|s| s["scenario"] == scenario)
            .unwrap_or_else(|| panic!("no scenario {scenario} in the manifest"))
    }
}

/// Whether a manifest message is a complete assistant message with tool or reasoning parts:
/// what a prune of every technical part takes.
fn prunable(message: &Value) -> bool {
    message["role"] == "assistant"
        && message["state"] == "complete"
        && technical(message).next().is_some()
}

/// `(index, type)` of the tool and reasoning parts of a manifest message, in content order.
fn technical(message: &Value) -> impl Iterator<Item = (usize, &str)> {
    message["parts"]
        .as_array()
        .expect("parts")
        .iter()
        .enumerate()
        .filter_map(|(index, part)| match part["type"].as_str() {
            Some(kind @ ("tool" | "reasoning")) => Some((index, kind)),
            _ => None,
        })
}

/// The canaries of a message's tool and reasoning parts.
fn technical_canaries(message: &Value) -> Vec<String> {
    message["parts"]
        .as_array()
        .expect("parts")
        .iter()
        .filter(|part| matches!(part["type"].as_str(), Some("tool" | "reasoning")))
        .flat_map(|part| part["canaries"].as_array().expect("canaries").iter())
        .map(|c| c.as_str().expect("canary").to_string())
        .collect()
}

fn rows_containing(db: &Path, table: &str, needle: &str) -> i64 {
    let conn = rusqlite::Connection::open(db).expect("open");
    conn.query_row(
        &format!("SELECT count(*) FROM {table} WHERE instr(data, ?1) > 0"),
        [needle],
        |row| row.get(0),
    )
    .expect("count")
}

/// Every check of the matrix on one fixture folder; prints the messages pruned and the bytes
/// freed (run with `--nocapture` to see them).
fn release_is_pruned_or_refused_plainly(folder: &str) {
    let mut release = Release::copy(folder);
    let sessions = release.sessions().clone();

    // Listings: every session and message of the manifest, nothing more.
    let listed = release.json(&["sessions", "--json"]);
    let listed = listed.as_array().expect("session list");
    assert_eq!(listed.len(), sessions.len(), "{listed:?}");
    for session in &sessions {
        let id = session["id"].as_str().expect("id");
        let row = listed
            .iter()
            .find(|row| row["sessionID"] == id)
            .unwrap_or_else(|| panic!("session {id} not listed"));
        let count = session["messages"].as_array().expect("messages").len();
        assert_eq!(row["messages"], count, "{row}");
        let messages = release.json(&["messages", id, "--json"]);
        assert_eq!(messages.as_array().expect("messages").len(), count);
    }
    let stats = release.json(&["stats", "--json"]);
    assert!(stats.is_object(), "{stats}");

    // One message of the three-turn session, by hand: preview, dry run, prune, receipt.
    let multi = release.session("b").clone();
    let session = multi["id"].as_str().expect("id").to_string();
    let messages: Vec<&Value> = multi["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| prunable(m))
        .collect();
    let first = messages[0];
    let first_id = first["id"].as_str().expect("id");
    let preview = release.json(&["preview", &session, first_id, "--json"]);
    assert_eq!(preview["status"], "preview");
    assert_eq!(preview["liveMutation"], true, "{preview}");
    let expected: Vec<Value> = technical(first)
        .map(|(index, kind)| json!([index, kind]))
        .collect();
    let found: Vec<Value> = preview["parts"]
        .as_array()
        .expect("parts")
        .iter()
        .map(|p| json!([p["index"], p["type"]]))
        .collect();
    assert_eq!(found, expected);
    let revision = preview["revision"].as_str().expect("revision").to_string();
    let prune = [
        "prune",
        &session,
        first_id,
        "--revision",
        &revision,
        "--all-technical",
        "--json",
    ];
    let mut dry = prune.to_vec();
    dry.push("--dry-run");
    let planned = release.json(&dry);
    assert_eq!(planned["status"], "dry-run", "{planned}");
    assert_eq!(planned["removedCount"], expected.len());
    let pruned = release.json(&prune);
    assert_eq!(
        pruned,
        json!({"status": "pruned", "messageID": first_id,
               "revision": planned["revisionAfter"], "removedCount": expected.len()})
    );
    let receipts = release.json(&["receipts", "--json"]);
    let receipts = receipts.as_array().expect("receipts");
    assert_eq!(receipts.len(), 1);
    assert_eq!(
        receipts[0]["bytesRemoved"], planned["bytes"],
        "{}",
        receipts[0]
    );

    // The killed run: its incomplete message is refused, and so is the session's while the run
    // may be alive (whatever the fixture's age: `--abandoned-after never`).
    let killed = release.session("e").clone();
    let killed_id = killed["id"].as_str().expect("id");
    let incomplete = killed["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["state"] == "incomplete")
        .expect("the killed run's message");
    let out = release.run(&[
        "--abandoned-after",
        "never",
        "prune",
        killed_id,
        incomplete["id"].as_str().expect("id"),
        "--revision",
        &"0".repeat(64),
        "--indexes",
        "1",
        "--dry-run",
        "--json",
    ]);
    assert_exit(&out, 3);
    assert_eq!(
        json(&out),
        json!({"status": "blocked", "reason": "maintenance_required"})
    );

    // History lists the rest of the session as candidates; prune-batch prunes them all.
    let page = release.json(&["history", &session, "--purpose", "prune", "--json"]);
    let candidates: BTreeSet<&str> = page["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .map(|c| c["messageID"].as_str().expect("id"))
        .collect();
    let rest: BTreeSet<&str> = messages[1..]
        .iter()
        .map(|m| m["id"].as_str().expect("id"))
        .collect();
    assert_eq!(candidates, rest);
    let file = release.db.with_file_name("candidates.json");
    std::fs::write(&file, page.to_string()).expect("write candidates");
    let file = file.to_str().expect("path").to_string();
    let batch = ["prune-batch", &session, "--candidates", &file, "--json"];
    let mut batch_dry = batch.to_vec();
    batch_dry.push("--dry-run");
    let would = release.json(&batch_dry);
    assert_eq!(
        would["results"].as_array().expect("results").len(),
        rest.len()
    );
    let results = release.json(&batch);
    let results = results["results"].as_array().expect("results");
    assert_eq!(results.len(), rest.len());
    for result in results {
        assert_eq!(result["result"]["status"], "pruned", "{result}");
    }

    // The HTTP API, on the compacted session's first prunable message.
    let compacted = release.session("d").clone();
    let directory = compacted["directory"].as_str().expect("directory");
    let target = compacted["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| prunable(m))
        .expect("a prunable message");
    let target_id = target["id"].as_str().expect("id");
    let server = Server::start_exactly(
        &release.db,
        &[
            "--workspace".into(),
            format!("w={directory}"),
            "--quiet-period".into(),
            "0".into(),
        ],
        &[],
    );
    let route = |name: &str| server.url(&format!("/api/workspaces/w/session-pruning/{name}"));
    let body = json!({"sessionID": compacted["id"], "messageID": target_id}).to_string();
    let (status, text) = post(&route("preview"), &body);
    assert_eq!(status, 200, "{text}");
    let preview = parse(&text);
    assert_eq!(preview["liveMutation"], true, "{preview}");
    let indexes: Vec<usize> = technical(target).map(|(index, _)| index).collect();
    let body = json!({"sessionID": compacted["id"], "messageID": target_id,
                      "revision": preview["revision"], "indexes": indexes})
    .to_string();
    let (status, text) = post(&route("prune"), &body);
    assert_eq!(status, 200, "{text}");
    assert_eq!(parse(&text)["status"], "pruned", "{text}");
    let (exit, printed) = server.stop();
    assert!(exit.success(), "{printed}");
    release.printed.push_str(&printed);

    // Clean: the dry run predicts the apply exactly; everything prunable is pruned but the
    // killed run's message, and the text stays. With `--diffs`: the matrix's turns edit no file,
    // so their user messages keep no diff bodies, and the diffs clean reads every layout's user
    // messages and empties nothing.
    let done: usize = 1 + rest.len() + 1;
    let all_prunable: usize = sessions
        .iter()
        .flat_map(|s| s["messages"].as_array().expect("messages").iter())
        .filter(|m| prunable(m))
        .count();
    let clean = [
        "clean",
        "--all",
        "--keep-last-turns",
        "0",
        "--include-spill-files",
        "--diffs",
        "--json",
    ];
    let mut apply = clean.to_vec();
    apply.push("--apply");
    let mut predicted = release.json(&clean);
    let mut applied = release.json(&apply);
    assert_eq!(predicted["status"], "dry-run");
    assert_eq!(applied["status"], "cleaned");
    predicted["status"] = Value::Null;
    applied["status"] = Value::Null;
    // What the apply measured after it, beside the estimate both give.
    assert!(applied["file"]["liveAfter"].is_u64(), "{applied}");
    applied["file"]
        .as_object_mut()
        .expect("file")
        .remove("liveAfter");
    assert_eq!(predicted, applied);
    assert_eq!(applied["pruned"], all_prunable - done, "{applied}");
    assert_eq!(applied["skipped"], json!({"incomplete": 1}), "{applied}");
    assert_eq!(applied["blocked"], json!({}), "{applied}");
    assert_eq!(applied["failed"], 0, "{applied}");
    assert_eq!(applied["diffs"]["pruned"], 0, "{applied}");
    assert!(
        applied["diffs"]["considered"].as_u64() > Some(0),
        "{applied}"
    );
    // The spilled output of the three-turn session's last turn belonged to pruned parts only.
    assert_eq!(applied["spillFilesRemoved"], 1, "{applied}");
    for session in &sessions {
        for message in session["messages"].as_array().expect("messages") {
            let kept = if prunable(message) { 0 } else { 1 };
            for canary in technical_canaries(message) {
                // The fork copies the first session's canaries: count this message's row only.
                let conn = rusqlite::Connection::open(&release.db).expect("open");
                let left: i64 = conn
                    .query_row(
                        "SELECT count(*) FROM part WHERE message_id = ?1 AND instr(data, ?2) > 0",
                        [message["id"].as_str().expect("id"), &canary],
                        |row| row.get(0),
                    )
                    .expect("count");
                assert_eq!(left, kept, "{canary} in {}", message["id"]);
            }
        }
    }
    for (canary, where_) in release.manifest["canaries"].as_object().expect("canaries") {
        if canary.starts_with("TEXT_CANARY") {
            assert_eq!(
                rows_containing(&release.db, "part", canary),
                where_["part"].as_i64().expect("count"),
                "{canary}"
            );
        }
    }

    let vacuumed = release.json(&["vacuum", "--json"]);
    assert_eq!(vacuumed["status"], "vacuumed", "{vacuumed}");
    assert!(
        vacuumed["bytesAfter"].as_u64() < vacuumed["bytesBefore"].as_u64(),
        "{vacuumed}"
    );

    for words in RAW_SQLITE {
        assert!(
            !release.printed.contains(words),
            "an output shows SQLite's {words:?}:\n{}",
            release.printed
        );
    }
    let receipts = release.json(&["receipts", "--json"]);
    let receipts = receipts.as_array().expect("receipts");
    // One receipt per pruned message, and one per compacted session (releases before 1.14
    // keep no event log: nothing to compact).
    let compactions = receipts
        .iter()
        .filter(|r| r["operation"]["kind"] == "compaction")
        .count();
    assert_eq!(receipts.len() - compactions, all_prunable);
    assert_eq!(json!(compactions), applied["compaction"]["sessions"]);
    let freed: u64 = receipts
        .iter()
        .map(|r| r["bytesRemoved"].as_u64().expect("bytes"))
        .sum();
    eprintln!(
        "matrix {folder}: {} message(s) pruned, {compactions} session(s) compacted, {freed} bytes of rows freed, file {} -> {} bytes after vacuum",
        receipts.len() - compactions,
        vacuumed["bytesBefore"],
        vacuumed["bytesAfter"]
    );
}

#[test]
fn opencode_1_2_27_database_is_pruned_by_every_command() {
    release_is_pruned_or_refused_plainly("opencode-1.2.27");
}

#[test]
fn opencode_1_3_2_database_is_pruned_by_every_command() {
    release_is_pruned_or_refused_plainly("opencode-1.3.2");
}

#[test]
fn opencode_1_14_48_database_is_pruned_by_every_command() {
    release_is_pruned_or_refused_plainly("opencode-1.14.48");
}

#[test]
fn opencode_1_15_13_database_is_pruned_by_every_command() {
    release_is_pruned_or_refused_plainly("opencode-1.15.13");
}

#[test]
fn opencode_1_17_19_database_is_pruned_by_every_command() {
    release_is_pruned_or_refused_plainly("opencode-1.17.19");
}

#[test]
fn opencode_1_18_34_database_is_pruned_by_every_command() {
    release_is_pruned_or_refused_plainly("opencode-1.18.34-matrix");
}

#[test]
fn opencode_1_19_5_database_is_pruned_by_every_command() {
    release_is_pruned_or_refused_plainly("opencode-1.19.5");
}

#[test]
fn opencode_1_2_27_database_upgraded_by_1_18_34_is_pruned_by_every_command() {
    release_is_pruned_or_refused_plainly("opencode-1.2.27-upgraded-1.18.34");
}

#[test]
fn opencode_1_14_48_database_upgraded_by_1_18_34_is_pruned_by_every_command() {
    release_is_pruned_or_refused_plainly("opencode-1.14.48-upgraded-1.18.34");
}
