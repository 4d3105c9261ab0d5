//! Shared set-up of the benchmarks: a copy of the real OpenCode 1.18.34 fixture with extra
//! messages of a chosen size.
#![allow(dead_code)]

pub mod scale;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rusqlite::{params, Connection};
use serde_json::Value;

/// The fixture's "many turns" session.
pub const SESSION: &str = "ses_dd992af4dffe56B7kwrH3SftqX";

/// `target/release/session-prune`, the binary the benchmarks run (`cargo build --release`
/// first).
pub fn release_binary() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/session-prune")
}

/// How long SQLite's `VACUUM INTO` of `source` takes, into `target` (removed before and after):
/// a copy of every live page, the reference the benchmarks state their ratios against.
pub fn time_vacuum_into(source: &Path, target: &Path) -> std::time::Duration {
    let _ = std::fs::remove_file(target);
    let conn = Connection::open(source).expect("open");
    let started = std::time::Instant::now();
    conn.execute("VACUUM INTO ?1", [target.to_str().expect("UTF-8 path")])
        .expect("VACUUM INTO");
    let elapsed = started.elapsed();
    drop(conn);
    let _ = std::fs::remove_file(target);
    elapsed
}

/// Copies the fixture into `dir` and returns the database path.
pub fn fixture_copy(dir: &Path) -> PathBuf {
    let db = dir.join("opencode.db");
    let source =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/opencode-1.18.34/opencode.db");
    std::fs::copy(source, &db).expect("copy fixture");
    db
}

/// Deletes a message and its parts.
pub fn delete_message(conn: &Connection, id: &str) {
    conn.execute("DELETE FROM part WHERE message_id = ?1", [id])
        .expect("parts");
    conn.execute("DELETE FROM message WHERE id = ?1", [id])
        .expect("message");
}

/// Adds an empty session `id` (a copy of the fixture session's row) and returns its id.
pub fn add_session(conn: &Connection, id: &str) -> String {
    conn.execute(
        "INSERT INTO session (id, project_id, slug, directory, title, version, time_created, time_updated) \
         SELECT ?1, project_id, slug, directory, 'bench', version, time_created, time_updated \
         FROM session WHERE id = ?2",
        params![id, SESSION],
    )
    .expect("session");
    id.to_string()
}

/// Inserts into `session` a completed assistant message `id` with `tools` completed bash parts of at most
/// `output_len` bytes of output each (stored twice, as OpenCode does: `output` and `metadata.output`) and
/// one text part. Returns the bytes of part data written.
pub fn insert_message(
    conn: &Connection,
    session: &str,
    id: &str,
    tools: usize,
    output_len: usize,
) -> usize {
    let created: i64 = conn
        .query_row(
            "SELECT coalesce(max(time_created), 0) + 1 FROM message",
            [],
            |r| r.get(0),
        )
        .expect("time");
    let data = format!(
        r#"{{"role":"assistant","time":{{"created":{created},"completed":{}}},"parentID":"x","modelID":"fixture","providerID":"fixture","finish":"stop"}}"#,
        created + 1
    );
    conn.execute(
        "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?3, ?4)",
        params![id, session, created, data],
    )
    .expect("message");
    let mut output = String::with_capacity(output_len + 4);
    for c in "line of tool output é ✓ 0123456789\n".chars().cycle() {
        if output.len() + c.len_utf8() > output_len {
            break;
        }
        output.push(c);
    }
    let mut written = 0;
    for i in 0..=tools {
        let data = if i == tools {
            r#"{"type":"text","text":"done"}"#.to_string()
        } else {
            let part = serde_json::json!({
                "type": "tool", "tool": "bash", "callID": format!("call_{i}"),
                "state": {"status": "completed", "input": {"command": "cat big", "description": "d"},
                          "output": output, "metadata": {"output": output, "exit": 0, "truncated": false},
                          "title": "cat big", "time": {"start": 1, "end": 2}}
            });
            part.to_string()
        };
        written += data.len();
        conn.execute(
            "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?4, ?4, ?5)",
            params![format!("prt_{id}_{i:06}"), id, session, created, data],
        )
        .expect("part");
    }
    written
}

/// `target/release/session-prune --db DB --quiet-period 0 --json ARGS`: its document and wall
/// time. Exit 0 is required, but for `audit`, whose exit code is returned in the document.
pub fn release_json(db: &Path, args: &[&str]) -> (Value, Duration) {
    let started = Instant::now();
    let out = Command::new(release_binary())
        .arg("--db")
        .arg(db)
        .args(["--quiet-period", "0", "--json"])
        .args(args)
        .output()
        .expect("run target/release/session-prune (cargo build --release first)");
    let elapsed = started.elapsed();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (serde_json::from_slice(&out.stdout).expect("JSON"), elapsed)
}

/// The file's size, bytes (0 when it is missing).
pub fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// A copy of `source` at `dir/NAME.db`, without side files.
pub fn copy_of(source: &Path, dir: &Path, name: &str) -> PathBuf {
    let db = dir.join(format!("{name}.db"));
    for suffix in ["", "-wal", "-shm", ".prune-journal", ".prune-archive"] {
        let mut side = db.clone().into_os_string();
        side.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(side));
    }
    std::fs::copy(source, &db).expect("copy the database");
    db
}

/// How much smaller `after` is than `before`, in percent of `before`.
pub fn smaller_pct(before: u64, after: u64) -> f64 {
    100.0 * (1.0 - after as f64 / before as f64)
}
