//! No command loads a row over the 16 MiB row budget whole. On a database made by OpenCode
//! 1.18.34 where one completed bash part holds 127 MB of output, in its `part` row and in its
//! newest `message.part.updated.1` snapshot (as OpenCode writes both), every command allocates
//! under 96 MiB at its peak (anonymous memory, sampled every millisecond: a read command's memory
//! map of the database is the OS's file cache, not the command's; the server's is sampled the
//! same way), the commands that open it writable stay under 96 MiB of peak resident memory too,
//! and their answers
//! still count the part: it is a tool part, its bytes are where the listings say, and a prune
//! refuses its message as over the budget.

use std::path::Path;

use serde_json::Value;

use crate::common::http::{self, Server, WORKSPACE};
use crate::common::peak_memory::{self, Run};
use crate::common::Fixture;

const SESSION: &str = "ses_dd992d334ffeb4iZc8W2NskkWu";
const MESSAGE: &str = "msg_2266d3474001I3pewKwYudoyEm";
const PART: &str = "prt_2266d3ed4001O1ve5LCzzaLeit";
/// Bytes of the part's `state.output`.
const OUTPUT_BYTES: usize = 127_000_000;
/// The bound on every command's peak resident memory.
const PEAK_BYTES: u64 = 96 * 1024 * 1024;

/// The fixture with the part's output, and its newest snapshot's, made `OUTPUT_BYTES` long.
fn huge_part() -> Fixture {
    let fx = Fixture::new();
    let conn = fx.sql();
    let mut output = "line of build output 0123456789\n".repeat(OUTPUT_BYTES / 32 + 1);
    output.truncate(OUTPUT_BYTES);
    let data: String = conn
        .query_row("SELECT data FROM part WHERE id = ?1", [PART], |r| r.get(0))
        .unwrap();
    let mut part: Value = serde_json::from_str(&data).unwrap();
    part["state"]["output"] = Value::String(output.clone());
    conn.execute(
        "UPDATE part SET data = ?1 WHERE id = ?2",
        [serde_json::to_string(&part).unwrap(), PART.to_string()],
    )
    .unwrap();
    let (rowid, data): (i64, String) = conn
        .query_row(
            "SELECT rowid, data FROM event WHERE type = 'message.part.updated.1' \
               AND json_extract(data, '$.part.id') = ?1 ORDER BY seq DESC LIMIT 1",
            [PART],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let mut event: Value = serde_json::from_str(&data).unwrap();
    event["part"]["state"]["output"] = Value::String(output);
    conn.execute(
        "UPDATE event SET data = ?1 WHERE rowid = ?2",
        rusqlite::params![serde_json::to_string(&event).unwrap(), rowid],
    )
    .unwrap();
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .unwrap();
    fx
}

/// Runs the binary on `db` with `args` (quiet period 0), measured; `None` when it cannot be.
fn measured(db: &Path, args: &[&str]) -> Option<Run> {
    let mut all = vec!["--quiet-period", "0"];
    all.extend_from_slice(args);
    peak_memory::measured(db, &all)
}

/// Whether the command opens the database writable (its dry run too): it reads no file
/// through a memory map, so its whole resident memory is bounded, not only what it allocates.
fn opens_writable(args: &[&str]) -> bool {
    matches!(args.first(), Some(&"clean") | Some(&"vacuum"))
}

fn within_budget(args: &[&str], run: &Run) {
    assert!(
        run.anon_peak < PEAK_BYTES,
        "{args:?} allocated {} MiB at its peak (bound {} MiB); stderr: {}",
        run.anon_peak / (1024 * 1024),
        PEAK_BYTES / (1024 * 1024),
        run.stderr
    );
    if opens_writable(args) {
        assert!(
            run.peak < PEAK_BYTES,
            "{args:?} peaked at {} MiB resident (bound {} MiB); stderr: {}",
            run.peak / (1024 * 1024),
            PEAK_BYTES / (1024 * 1024),
            run.stderr
        );
    }
}

fn json(run: &Run) -> Value {
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("{e}: {} / {}", run.stdout, run.stderr))
}

#[test]
fn every_read_command_stays_under_96_mib_and_still_counts_the_part() {
    let fx = huge_part();
    let part_bytes = fx.scalar(&format!(
        "SELECT octet_length(data) FROM part WHERE id = '{PART}'"
    ));
    let snapshot_bytes = fx.scalar(&format!(
        "SELECT max(octet_length(data)) FROM event WHERE type = 'message.part.updated.1' \
           AND instr(data, '{PART}') > 0"
    ));
    assert!(part_bytes > OUTPUT_BYTES as i64 && snapshot_bytes > OUTPUT_BYTES as i64);
    let before = fx.file_digest();

    let args = ["sessions", "--json"];
    let Some(run) = measured(&fx.db, &args) else {
        return;
    };
    within_budget(&args, &run);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sessions = json(&run);
    let session = sessions
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sessionID"] == SESSION)
        .unwrap()
        .clone();
    assert!(
        session["prunableBytes"].as_i64().unwrap() >= part_bytes + snapshot_bytes,
        "{session}"
    );

    let args = ["stats", "--json"];
    let Some(run) = measured(&fx.db, &args) else {
        return;
    };
    within_budget(&args, &run);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let stats = json(&run);
    assert!(stats["technical"]["toolParts"]["bytes"].as_i64().unwrap() > part_bytes);
    assert!(
        stats["technical"]["snapshotEvents"]["bytes"]
            .as_i64()
            .unwrap()
            > snapshot_bytes
    );

    let args = ["messages", SESSION, "--json"];
    let Some(run) = measured(&fx.db, &args) else {
        return;
    };
    within_budget(&args, &run);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let listed = json(&run);
    let message = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["messageID"] == MESSAGE)
        .unwrap()
        .clone();
    assert_eq!(
        (&message["technicalParts"], message["completed"].as_bool()),
        (&Value::from(2), Some(true)),
        "{message}"
    );
    assert!(message["technicalBytes"].as_i64().unwrap() > part_bytes);

    let args = ["outline", SESSION, "--json"];
    let Some(run) = measured(&fx.db, &args) else {
        return;
    };
    within_budget(&args, &run);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let entry = json(&run)["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == MESSAGE)
        .unwrap()
        .clone();
    assert_eq!(
        (&entry["tools"], &entry["toolName"]),
        (&Value::from(1), &Value::from("bash"))
    );

    let args = ["preview", SESSION, MESSAGE];
    let Some(run) = measured(&fx.db, &args) else {
        return;
    };
    within_budget(&args, &run);
    assert_eq!(run.code, 3, "{}", run.stdout);
    assert!(
        run.stdout.contains(&format!(
            "message {MESSAGE} holds more than the 16 MiB budget"
        )),
        "{}",
        run.stdout
    );

    for args in [
        &["history", SESSION, "--purpose", "prune", "--json"][..],
        &["history", "-q", "build output", "--json"],
        &["window", SESSION, "--json"],
        &["audit", "--json"],
        &["clean", "--all", "--keep-last-turns", "0", "--json"],
    ] {
        let Some(run) = measured(&fx.db, args) else {
            return;
        };
        within_budget(args, &run);
        assert!(
            [0, 3].contains(&run.code),
            "{args:?} exited {}: {}",
            run.code,
            run.stderr
        );
    }
    assert_eq!(
        fx.file_digest(),
        before,
        "a read command wrote to the database"
    );
}

#[test]
fn an_applied_clean_and_a_vacuum_stay_under_96_mib_and_leave_the_part() {
    let fx = huge_part();
    let args = [
        "clean",
        "--all",
        "--keep-last-turns",
        "0",
        "--apply",
        "--archive",
        "--json",
    ];
    let Some(run) = measured(&fx.db, &args) else {
        return;
    };
    within_budget(&args, &run);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = json(&run);
    assert_eq!(report["skipped"]["oversize"], 1, "{report}");
    assert!(report["pruned"].as_i64().unwrap() > 0, "{report}");
    // The message over the budget and its snapshots are as they were.
    assert_eq!(
        fx.scalar(&format!(
            "SELECT octet_length(data) > {OUTPUT_BYTES} FROM part WHERE id = '{PART}'"
        )),
        1
    );
    assert_eq!(
        fx.scalar(&format!(
            "SELECT count(*) FROM event WHERE octet_length(data) > {OUTPUT_BYTES}"
        )),
        1
    );

    let args = ["vacuum", "--json"];
    let Some(run) = measured(&fx.db, &args) else {
        return;
    };
    within_budget(&args, &run);
    assert_eq!(run.code, 0, "{} {}", run.stdout, run.stderr);
}

#[test]
fn the_servers_read_routes_stay_under_96_mib() {
    let fx = huge_part();
    let server = Server::start(&fx.db, &["--quiet-period", "0"]);
    let sampling = std::sync::atomic::AtomicBool::new(true);
    let pid = server.pid();
    let peak = std::thread::scope(|scope| {
        let sampler = scope.spawn(|| {
            let mut peak = 0;
            while sampling.load(std::sync::atomic::Ordering::SeqCst) {
                peak = peak.max(anon_of(pid));
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            peak
        });
        let workspace = format!("/api/workspaces/{WORKSPACE}");
        let (status, body) = http::get(&server.url(&format!("{workspace}/sessions")));
        assert_eq!(status, 200, "{body}");
        let (status, body) = http::get(&server.url(&format!("{workspace}/stats")));
        assert_eq!(status, 200, "{body}");
        let (status, body) = http::post(
            &server.route("preview"),
            &serde_json::json!({"sessionID": SESSION, "messageID": MESSAGE}).to_string(),
        );
        assert_eq!(status, 200, "{body}");
        assert_eq!(http::parse(&body)["status"], "blocked", "{body}");
        let (status, body) = http::post(
            &server.route("history"),
            &serde_json::json!({"sessionID": SESSION, "purpose": "prune"}).to_string(),
        );
        assert_eq!(status, 200, "{body}");
        sampling.store(false, std::sync::atomic::Ordering::SeqCst);
        sampler.join().expect("the sampler")
    });
    let (status, _) = server.stop();
    assert!(status.success());
    assert!(peak > 0, "the server's memory was never read");
    assert!(
        peak < PEAK_BYTES,
        "serve allocated {} MiB at its peak (bound {} MiB)",
        peak / (1024 * 1024),
        PEAK_BYTES / (1024 * 1024)
    );
}

/// The anonymous resident memory of process `pid` now, in bytes (`RssAnon` of
/// /proc/PID/status; 0 when it cannot be read): what it allocated, without the database pages
/// its read-only connections map.
fn anon_of(pid: u32) -> u64 {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return 0;
    };
    status
        .lines()
        .find(|l| l.starts_with("RssAnon:"))
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|n| n.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}
