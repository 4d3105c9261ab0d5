//! SIGKILL at any point of an archiving clean (of generated turns; of coding work with
//! `--diffs`, which compacts, empties diffs and prunes parts), or of a restore, leaves the prune
//! archive and the database agreeing. After a killed `clean --apply --archive`: every receipt
//! records an archive hash whose entry reads back (`audit`: ok, `archive.checked` = the
//! receipts), the archive holds those entries plus the orphans of prunes that never committed,
//! and the next `clean --apply --archive` recovers it (`archive stats`: no orphan, nothing
//! unreadable) and finishes the clean. After a killed `restore`: its receipt and the rows it
//! puts back are there together or not at all, the audit holds, and the restore run again puts
//! the rows back.
//!
//! Two ways of choosing the moment, each checked the same way:
//! - at times spread over the length of an uninterrupted run of the same command on the same
//!   database (measured first, never asserted; a run may also end before its kill);
//! - with strace, on entering the n-th write or sync of the archive, the WAL or the journal, for
//!   n spread over the calls an uninterrupted run makes (counted first): a kill as the archive
//!   syncs a batch's entries, between that sync and the batch's commits, between two commits,
//!   before the WAL sync, before the journal's commit marks. Without strace these say why and
//!   pass, except under `CI=true`, where they fail.

use crate::common;

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::archive::prunes;
use common::cli::{assert_exit, json, run};
use common::{generate, Fixture};
use rusqlite::types::Value as SqlValue;
use rusqlite::Connection;
use serde_json::Value;

/// Generated sessions of the clean's database, messages in each, tool parts per message and
/// bytes of each tool output (stored twice in its part, and again in each of its two snapshot
/// events): about 8 MB of rows.
const SESSIONS: usize = 4;
const MESSAGES: usize = 20;
const TOOLS: usize = 2;
const OUTPUT_BYTES: usize = 8 * 1024;
/// Messages per batch of the clean: many archive syncs, each followed by its batch's commits.
const BATCH: &str = "6";
/// Timed kills of the clean, and of the restore.
const KILLS: u32 = 8;
/// Kills by strace per syscall and file watched.
const CALL_KILLS: usize = 3;

/// The restore's message: this many tool parts (each with one snapshot event) of this many
/// bytes of output, and one text part.
const BIG_TOOLS: usize = 800;
const BIG_OUTPUT_BYTES: usize = 2 * 1024;
const BIG_SESSION: &str = "ses_kill9_restore_big";
const BIG_MESSAGE: &str = "msg_kill9_restore_big";

/// The clean, short of its batch size: every session, every turn, archived. The fixture's own
/// complete messages are pruned as well (its killed runs are refused: `--abandoned-after never`).
const CLEAN: [&str; 10] = [
    "--abandoned-after",
    "never",
    "--json",
    "clean",
    "--all",
    "--keep-last-turns",
    "0",
    "--apply",
    "--archive",
    "--batch-size",
];

fn session_id(n: usize) -> String {
    format!("ses_kill9_clean_{n:02}")
}

/// Adds two `message.part.updated.1` snapshots of every tool part of `session` (full copies, as
/// OpenCode writes them while a tool runs and when it completes), numbered after the session's
/// `event_sequence` row (created when missing), which then names the last one.
fn add_snapshots(conn: &Connection, session: &str, per_part: usize) {
    // `event.aggregate_id` references the sequence row: it goes first (-1: no event yet).
    conn.execute(
        "INSERT OR IGNORE INTO event_sequence (aggregate_id, seq) VALUES (?1, -1)",
        [session],
    )
    .expect("event_sequence");
    for copy in 0..per_part {
        conn.execute(
            "INSERT INTO event (id, aggregate_id, seq, type, data) \
             SELECT 'evt_' || ?2 || '_' || p.id, p.session_id, \
                    (SELECT seq FROM event_sequence WHERE aggregate_id = ?1) \
                      + row_number() OVER (ORDER BY p.id), \
                    'message.part.updated.1', \
                    json_object('sessionID', p.session_id, \
                                'part', json(json_set(p.data, '$.id', p.id, \
                                  '$.sessionID', p.session_id, '$.messageID', p.message_id)), \
                                'time', p.time_created) \
             FROM part p WHERE p.session_id = ?1 AND json_extract(p.data, '$.type') = 'tool'",
            rusqlite::params![session, copy as i64],
        )
        .expect("snapshots");
        conn.execute(
            "UPDATE event_sequence \
             SET seq = (SELECT max(seq) FROM event WHERE aggregate_id = ?1) \
             WHERE aggregate_id = ?1",
            [session],
        )
        .expect("event_sequence");
    }
}

/// The fixture with [`SESSIONS`] generated sessions of [`MESSAGES`] prunable messages each.
fn clean_database() -> Fixture {
    let fx = Fixture::new();
    let mut conn = fx.sql();
    let tx = conn.transaction().expect("transaction");
    for s in 0..SESSIONS {
        let session = generate::add_session(&tx, &session_id(s));
        for m in 0..MESSAGES {
            generate::insert_message(
                &tx,
                &session,
                &format!("msg_kill9_{s:02}_{m:04}"),
                TOOLS,
                OUTPUT_BYTES,
            );
        }
        add_snapshots(&tx, &session, 2);
    }
    tx.commit().expect("commit");
    fx
}

/// A copy of `from`'s database, journal and archive (those that exist) in a new folder.
fn copy_of(from: &Fixture) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("opencode.db");
    for suffix in ["", "-wal", ".prune-journal", ".prune-archive"] {
        let source = format!("{}{suffix}", from.db.display());
        if Path::new(&source).exists() {
            std::fs::copy(&source, format!("{}{suffix}", db.display())).expect("copy");
        }
    }
    let journal = dir.path().join("opencode.db.prune-journal");
    Fixture::at(dir, db, journal)
}

/// When a run is killed.
#[derive(Debug, Clone)]
enum Kill {
    /// This long after its start.
    After(Duration),
    /// By strace, on entering its `nth` (from 1) call of `syscall` on the file beside the
    /// database whose name ends with `file` (one of [`WATCHED`]).
    AtCall {
        syscall: String,
        file: &'static str,
        nth: usize,
    },
}

/// The syscalls a kill by strace may land on.
const CALLS: &str = "pwrite64,fdatasync,fsync";
/// The files it watches: the WAL, the archive and the journal (the ends of their names).
const WATCHED: [&str; 3] = ["-wal", ".prune-archive", ".prune-journal"];

/// strace's path, or `None` (see [`common::strace::strace`]).
fn strace() -> Option<&'static str> {
    common::strace::strace("to kill at a given call")
}

/// strace's `-P PATH` for each file of `fx` whose name ends with one of `files`.
fn watch_args(fx: &Fixture, files: &[&str]) -> Vec<String> {
    files
        .iter()
        .flat_map(|suffix| ["-P".to_string(), format!("{}{suffix}", fx.db.display())])
        .collect()
}

/// The binary on `fx` with `args`, its output discarded; under `strace -f -qq` with the given
/// arguments when `traced` names strace.
fn command(fx: &Fixture, args: &[&str], traced: Option<(&str, Vec<String>)>) -> Command {
    let bin = crate::common::cli::BINARY;
    let mut cmd = match traced {
        Some((strace, strace_args)) => {
            let mut cmd = Command::new(strace);
            cmd.args(["-f", "-qq"]).args(strace_args).arg(bin);
            cmd
        }
        None => Command::new(bin),
    };
    cmd.arg("--db")
        .arg(&fx.db)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

/// How long `args` takes on a copy of `template`, start to exit (exit 0 checked), and the copy.
fn timed_run(template: &Fixture, args: &[&str]) -> (Duration, Fixture) {
    let fx = copy_of(template);
    let started = Instant::now();
    let status = command(&fx, args, None).status().expect("run");
    let took = started.elapsed();
    assert!(status.success(), "{args:?} exited with {status}");
    (took, fx)
}

/// How many calls of each of [`CALLS`] on each of the [`WATCHED`] files `args` makes on a copy
/// of `template`, run to its end under strace: `(syscall, file) -> calls`.
fn counted_run(
    strace: &str,
    template: &Fixture,
    args: &[&str],
) -> BTreeMap<(String, &'static str), usize> {
    let fx = copy_of(template);
    let log = fx.dir.path().join("strace.log");
    let mut strace_args = vec![
        "-y".to_string(),
        "-o".to_string(),
        log.display().to_string(),
        "-e".to_string(),
        format!("trace={CALLS}"),
    ];
    strace_args.extend(watch_args(&fx, &WATCHED));
    let status = command(&fx, args, Some((strace, strace_args)))
        .status()
        .expect("run under strace");
    assert!(
        status.success(),
        "{args:?} under strace exited with {status}"
    );
    let text = std::fs::read_to_string(&log).expect("strace log");
    let mut counts = BTreeMap::new();
    for line in text.lines() {
        // `PID name(FD</path>, ...` starts a call; `PID <... name resumed>` ends one started
        // before.
        let call = line.split_whitespace().nth(1).unwrap_or("");
        let Some((name, rest)) = call.split_once('(') else {
            continue;
        };
        let path = rest.split_once('<').map_or("", |(_, p)| p);
        let path = path.split_once('>').map_or("", |(p, _)| p);
        let file = WATCHED.iter().find(|suffix| path.ends_with(*suffix));
        let file = file.unwrap_or_else(|| panic!("a call on an unwatched file: {line}"));
        *counts.entry((name.to_string(), *file)).or_insert(0) += 1;
    }
    counts
}

/// Kills by strace at `per_call` calls of each syscall on each file `counts` holds, spread
/// from its first call to three quarters of the calls an uninterrupted run makes (the first
/// call only, where that is all there is).
fn call_kills(counts: &BTreeMap<(String, &'static str), usize>, per_call: usize) -> Vec<Kill> {
    let mut kills = Vec::new();
    for ((syscall, file), calls) in counts {
        let last = (calls * 3 / 4).max(1);
        let mut points: Vec<usize> = (0..per_call)
            .map(|i| 1 + i * (last - 1) / (per_call - 1).max(1))
            .collect();
        points.dedup();
        kills.extend(points.into_iter().map(|nth| Kill::AtCall {
            syscall: syscall.clone(),
            file,
            nth,
        }));
    }
    kills
}

/// The timed kills: `KILLS` points inside `run`, closer together towards its end (at
/// `run * sqrt(i / (KILLS + 1))`), where a restore commits and a clean's last batches do.
fn timed_kills(run: Duration) -> Vec<Kill> {
    (1..=KILLS)
        .map(|i| Kill::After(run.mul_f64((f64::from(i) / f64::from(KILLS + 1)).sqrt())))
        .collect()
}

/// Runs `args` on `fx` and kills it as `kill` says. A timed run may end before its kill (then
/// it must have exited 0); a kill by strace must land. Returns whether it was killed.
fn run_killed(strace: Option<&str>, fx: &Fixture, args: &[&str], kill: &Kill) -> bool {
    match kill {
        Kill::After(after) => {
            let mut child = command(fx, args, None).spawn().expect("spawn");
            std::thread::sleep(*after);
            let killed = child.try_wait().expect("try_wait").is_none();
            if killed {
                child.kill().expect("SIGKILL");
            }
            let status = child.wait().expect("wait");
            if !killed {
                assert!(status.success(), "{args:?} exited with {status}");
            }
            killed
        }
        Kill::AtCall { syscall, file, nth } => {
            let mut strace_args = vec![
                "-o".to_string(),
                "/dev/null".to_string(),
                "-e".to_string(),
                format!("trace={syscall}"),
                "-e".to_string(),
                format!("inject={syscall}:signal=KILL:when={nth}"),
            ];
            strace_args.extend(watch_args(fx, &[file]));
            let strace = strace.expect("a kill by strace needs strace");
            let status = command(fx, args, Some((strace, strace_args)))
                .status()
                .expect("strace");
            // strace ends the way its tracee did: killed by the same signal.
            let killed = status.signal() == Some(9) || status.code() == Some(128 + 9);
            assert!(killed, "{args:?} was not killed at {kill:?}: {status}");
            true
        }
    }
}

/// `--json audit`: exit 0, `ok`; returns the report.
fn audit_holds(fx: &Fixture) -> Value {
    let out = run(&fx.db, &["--json", "audit"]);
    let report = json(&out);
    assert_eq!(report["ok"], true, "{report}");
    assert_exit(&out, 0);
    report
}

/// `--json archive stats`, which must answer (exit 0) after anything `when` names.
fn archive_stats(fx: &Fixture, when: &str) -> Value {
    let out = run(&fx.db, &["--json", "archive", "stats"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "archive stats after {when}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(&out)
}

/// Receipts, and of them those that record an archive hash.
fn receipt_counts(fx: &Fixture) -> (i64, i64) {
    (
        fx.scalar("SELECT count(*) FROM session_prune_receipt"),
        fx.scalar("SELECT count(*) FROM session_prune_receipt WHERE archive_hash IS NOT NULL"),
    )
}

/// The database after a clean that ran to its end: every receipt archived, every entry read
/// back by the audit, the archive holding exactly those entries.
fn assert_cleaned_whole(fx: &Fixture, receipts: i64) {
    assert_eq!(receipt_counts(fx), (receipts, receipts));
    // A compaction's receipt names its session and no message.
    let messages = fx.scalar(
        "SELECT count(DISTINCT session_id || '/' || message_id) FROM session_prune_receipt \
         WHERE restores IS NULL",
    );
    assert_eq!(
        messages, receipts,
        "one receipt per pruned message and per compacted session"
    );
    let report = audit_holds(fx);
    assert_eq!(report["archive"]["checked"], receipts, "{report}");
    let stats = archive_stats(fx, "a whole clean");
    assert_eq!(stats["orphans"], 0, "{stats}");
    assert_eq!(stats["entries"], receipts, "{stats}");
    assert_eq!(stats["unreadableAt"], Value::Null, "{stats}");
}

/// The clean's database, the clean's arguments, and the receipts an uninterrupted clean writes
/// (checked: the archive then holds exactly their entries); and how long that clean took.
fn clean_setup() -> (Fixture, Vec<&'static str>, i64, Duration) {
    let template = clean_database();
    let mut args: Vec<&str> = CLEAN.to_vec();
    args.push(BATCH);
    let (took, whole) = timed_run(&template, &args);
    let (receipts, _) = receipt_counts(&whole);
    assert!(
        receipts >= (SESSIONS * MESSAGES) as i64,
        "the generated messages are pruned: {receipts}"
    );
    assert_cleaned_whole(&whole, receipts);
    (template, args, receipts, took)
}

/// Kills the clean on a fresh copy of `template` at each of `kills`, and checks what it left,
/// then what the next clean leaves. Returns how many runs were killed.
fn kill_cleans(
    template: &Fixture,
    args: &[&str],
    receipts: i64,
    kills: &[Kill],
    strace: Option<&str>,
) -> usize {
    let mut killed_runs = 0;
    let mut orphans_seen = 0;
    for kill in kills {
        let fx = copy_of(template);
        if run_killed(strace, &fx, args, kill) {
            killed_runs += 1;
        }
        // Whatever committed is archived, and its entry reads back.
        let (committed, archived) = if fx.has_table("session_prune_receipt") {
            receipt_counts(&fx)
        } else {
            (0, 0)
        };
        assert_eq!(
            committed, archived,
            "{kill:?}: a receipt without an archive hash"
        );
        let report = audit_holds(&fx);
        assert_eq!(report["archive"]["checked"], archived, "{kill:?}: {report}");
        assert_eq!(report["receipts"], committed, "{kill:?}: {report}");
        let stats = archive_stats(&fx, &format!("{kill:?}"));
        if stats["exists"] == true {
            let orphans = stats["orphans"].as_i64().expect("orphans");
            assert_eq!(stats["entries"], archived + orphans, "{kill:?}: {stats}");
            orphans_seen += orphans;
        } else {
            assert_eq!(
                archived, 0,
                "{kill:?}: archived without an archive: {stats}"
            );
        }

        // The next archiving clean recovers the archive and finishes the clean.
        let rerun = run(&fx.db, args);
        assert_exit(&rerun, 0);
        let report = json(&rerun);
        assert_eq!(report["status"], "cleaned", "{kill:?}: {report}");
        assert_eq!(report["failed"], 0, "{kill:?}: {report}");
        assert_eq!(
            prunes(&report) as i64,
            receipts - committed,
            "{kill:?}: {report}"
        );
        assert_cleaned_whole(&fx, receipts);
    }
    eprintln!(
        "{killed_runs} of {} cleans killed; {orphans_seen} orphan entries after the kills",
        kills.len()
    );
    killed_runs
}

#[test]
fn a_clean_killed_at_any_time_keeps_every_archived_receipts_entry() {
    let (template, args, receipts, took) = clean_setup();
    let killed = kill_cleans(&template, &args, receipts, &timed_kills(took), None);
    assert!(killed > 0, "no clean was killed ({took:?} uninterrupted)");
}

#[test]
fn a_clean_killed_at_each_write_and_sync_keeps_every_archived_receipts_entry() {
    let Some(strace) = strace() else {
        return;
    };
    let (template, args, receipts, _) = clean_setup();
    let counts = counted_run(strace, &template, &args);
    let kills = call_kills(&counts, CALL_KILLS);
    eprintln!("calls of an uninterrupted run: {counts:?}");
    for watched in [("fdatasync", ".prune-archive"), ("pwrite64", "-wal")] {
        let calls = counts.get(&(watched.0.to_string(), watched.1));
        assert!(calls.is_some_and(|n| *n > 1), "{watched:?}: {counts:?}");
    }
    kill_cleans(&template, &args, receipts, &kills, Some(strace));
}

#[test]
fn a_clean_of_coding_work_with_its_diffs_killed_at_any_time_keeps_every_prune_whole() {
    // Compactions, diffs prunes and prunes of parts, each kind killed in the middle of its batches.
    let template = Fixture::work();
    let args: Vec<&str> = [&CLEAN[..], &[BATCH, "--diffs"]].concat();
    let (took, whole) = timed_run(&template, &args);
    let (receipts, _) = receipt_counts(&whole);
    let of_kind = |kind: &str| {
        whole.scalar(&format!(
            "SELECT count(*) FROM session_prune_receipt \
             WHERE json_extract(operation, '$.kind') IS '{kind}'"
        ))
    };
    let (compactions, diffs) = (of_kind("compaction"), of_kind("diffs"));
    assert!(
        compactions > 0 && diffs > 0,
        "{compactions} compactions, {diffs} diffs prunes"
    );
    assert!(
        receipts > compactions + diffs,
        "prunes of parts too: {receipts} receipts"
    );
    assert_cleaned_whole(&whole, receipts);
    let killed = kill_cleans(&template, &args, receipts, &timed_kills(took), None);
    assert!(killed > 0, "no clean was killed ({took:?} uninterrupted)");
}

// ------------------------------------------------------------------------------------------
// Restore

/// Every row (all columns, exact values) of the big message's parts, and of its parts'
/// snapshot and removal events, in id order.
struct Rows {
    parts: Vec<Vec<SqlValue>>,
    snapshots: Vec<Vec<SqlValue>>,
    removals: Vec<Vec<SqlValue>>,
}

fn all_rows(conn: &Connection, sql: &str) -> Vec<Vec<SqlValue>> {
    let mut stmt = conn.prepare(sql).expect("prepare");
    let width = stmt.column_count();
    let rows = stmt
        .query_map([], |row| {
            (0..width)
                .map(|i| row.get::<_, SqlValue>(i))
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .expect("query");
    rows.collect::<rusqlite::Result<_>>().expect("rows")
}

fn big_message_rows(fx: &Fixture) -> Rows {
    let conn = fx.sql();
    Rows {
        parts: all_rows(
            &conn,
            &format!("SELECT * FROM part WHERE message_id = '{BIG_MESSAGE}' ORDER BY id"),
        ),
        snapshots: all_rows(
            &conn,
            &format!(
                "SELECT * FROM event WHERE aggregate_id = '{BIG_SESSION}' \
                 AND type = 'message.part.updated.1' ORDER BY id"
            ),
        ),
        removals: all_rows(
            &conn,
            &format!(
                "SELECT * FROM event WHERE aggregate_id = '{BIG_SESSION}' \
                 AND type = 'message.part.removed.1' ORDER BY id"
            ),
        ),
    }
}

fn assert_rows_eq(found: &Rows, expected: &Rows, what: &str) {
    assert_eq!(found.parts.len(), expected.parts.len(), "{what}: part rows");
    assert!(found.parts == expected.parts, "{what}: part rows differ");
    assert_eq!(
        found.snapshots.len(),
        expected.snapshots.len(),
        "{what}: snapshot events"
    );
    assert!(
        found.snapshots == expected.snapshots,
        "{what}: snapshot events differ"
    );
    assert_eq!(
        found.removals.len(),
        expected.removals.len(),
        "{what}: removal events"
    );
    assert!(
        found.removals == expected.removals,
        "{what}: removal events differ"
    );
}

/// Restore receipts in the database.
fn restores(fx: &Fixture) -> i64 {
    fx.scalar("SELECT count(*) FROM session_prune_receipt WHERE restores IS NOT NULL")
}

/// The fixture with the big message, pruned with `prune --archive`: the database, its journal
/// and its archive, with the rows before the prune and the receipt id.
fn pruned_big_message() -> (Fixture, Rows, String) {
    let fx = Fixture::new();
    {
        let mut conn = fx.sql();
        let tx = conn.transaction().expect("transaction");
        let session = generate::add_session(&tx, BIG_SESSION);
        generate::insert_message(&tx, &session, BIG_MESSAGE, BIG_TOOLS, BIG_OUTPUT_BYTES);
        add_snapshots(&tx, &session, 1);
        tx.commit().expect("commit");
    }
    let before = big_message_rows(&fx);
    assert_eq!(before.parts.len(), BIG_TOOLS + 1);
    assert_eq!(before.snapshots.len(), BIG_TOOLS);
    assert!(before.removals.is_empty());

    let preview = run(&fx.db, &["--json", "preview", BIG_SESSION, BIG_MESSAGE]);
    assert_exit(&preview, 0);
    let revision = json(&preview)["revision"]
        .as_str()
        .expect("revision")
        .to_string();
    let pruned = run(
        &fx.db,
        &[
            "--json",
            "prune",
            BIG_SESSION,
            BIG_MESSAGE,
            "--revision",
            &revision,
            "--all-technical",
            "--archive",
        ],
    );
    assert_exit(&pruned, 0);
    assert_eq!(json(&pruned)["status"], "pruned");
    let receipt: String = fx
        .sql()
        .query_row(
            "SELECT id FROM session_prune_receipt WHERE message_id = ?1 AND archive_hash IS NOT NULL",
            [BIG_MESSAGE],
            |row| row.get(0),
        )
        .expect("the prune's receipt");
    (fx, before, receipt)
}

/// Kills the restore on a fresh copy of `template` at each of `kills`, and checks what it left
/// (`before`: the rows before the prune, `after_prune`: after it), then what running it again
/// leaves. Returns how many runs were killed.
fn kill_restores(
    template: &Fixture,
    args: &[&str],
    (before, after_prune): (&Rows, &Rows),
    kills: &[Kill],
    strace: Option<&str>,
) -> usize {
    let mut killed_runs = 0;
    let mut committed = 0;
    for kill in kills {
        let fx = copy_of(template);
        if run_killed(strace, &fx, args, kill) {
            killed_runs += 1;
        }
        // The receipt and the rows, together or not at all.
        match restores(&fx) {
            0 => assert_rows_eq(&big_message_rows(&fx), after_prune, "not restored"),
            1 => {
                committed += 1;
                assert_rows_eq(&big_message_rows(&fx), before, "restored");
            }
            n => panic!("{kill:?}: {n} restore receipts"),
        }
        // The prune's entry is checked while it stands; once restored, its rows are back
        // and its entry is asked for no more.
        let report = audit_holds(&fx);
        let standing = u64::from(restores(&fx) == 0);
        assert_eq!(report["archive"]["checked"], standing, "{kill:?}: {report}");

        // Run again, the restore is whole (or answered from its receipt).
        let again = run(&fx.db, args);
        assert_exit(&again, 0);
        assert_eq!(json(&again)["status"], "restored");
        assert_eq!(restores(&fx), 1);
        assert_rows_eq(&big_message_rows(&fx), before, "restored again");
        let report = audit_holds(&fx);
        assert_eq!(report["archive"]["checked"], 0, "{kill:?}: {report}");
    }
    eprintln!(
        "{killed_runs} of {} restores killed, {committed} after their commit",
        kills.len()
    );
    killed_runs
}

/// The pruned big message, its rows before and after the prune (checked), the restore's
/// arguments, and how long an uninterrupted restore took (checked: it puts every row back).
fn restore_setup() -> (Fixture, Rows, Rows, Vec<String>, Duration) {
    let (template, before, receipt) = pruned_big_message();
    let after_prune = big_message_rows(&template);
    assert_eq!(after_prune.parts.len(), 1, "the text part stays");
    assert!(after_prune.snapshots.is_empty());
    assert_eq!(after_prune.removals.len(), BIG_TOOLS);
    let args = vec!["--json".to_string(), "restore".to_string(), receipt];
    let borrowed: Vec<&str> = args.iter().map(String::as_str).collect();
    // The fastest of three runs: one slowed by a busy moment would time every kill after the
    // restores' ends.
    let (took, whole) = timed_run(&template, &borrowed);
    let took = (0..2)
        .map(|_| timed_run(&template, &borrowed).0)
        .fold(took, Duration::min);
    assert_eq!(restores(&whole), 1);
    assert_rows_eq(&big_message_rows(&whole), &before, "restored");
    let report = audit_holds(&whole);
    assert_eq!(
        report["archive"]["checked"], 0,
        "a restored prune's entry is not asked for: {report}"
    );
    (template, before, after_prune, args, took)
}

#[test]
fn a_restore_killed_at_any_time_is_whole_or_absent() {
    let (template, before, after_prune, args, took) = restore_setup();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let kills = timed_kills(took);
    let killed = kill_restores(&template, &args, (&before, &after_prune), &kills, None);
    assert!(killed > 0, "no restore was killed ({took:?} uninterrupted)");
}

#[test]
fn a_restore_killed_at_each_write_and_sync_is_whole_or_absent() {
    let Some(strace) = strace() else {
        return;
    };
    let (template, before, after_prune, args, _) = restore_setup();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let counts = counted_run(strace, &template, &args);
    let kills = call_kills(&counts, CALL_KILLS);
    eprintln!("calls of an uninterrupted run: {counts:?}");
    for watched in [("pwrite64", "-wal"), ("pwrite64", ".prune-journal")] {
        let calls = counts.get(&(watched.0.to_string(), watched.1));
        assert!(calls.is_some_and(|n| *n > 1), "{watched:?}: {counts:?}");
    }
    kill_restores(
        &template,
        &args,
        (&before, &after_prune),
        &kills,
        Some(strace),
    );
}
