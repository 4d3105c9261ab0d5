//! Read commands work on a database this process cannot write (a read-only mount when the tests
//! run as root, a read-only folder and file otherwise), in WAL mode with and without its side
//! files, and with a read-only journal; a prune there is refused with words naming the cause,
//! and nothing changes.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::cli::{assert_exit, json, run};
use common::*;
use serde_json::Value;

/// A folder made read-only for this process: bind-mounted read-only when running as root (root
/// ignores permission bits), else its permission bits cleared. Restored on drop.
struct ReadOnly {
    /// Where to read the folder's files.
    view: PathBuf,
    source: PathBuf,
    mounted: bool,
}

impl ReadOnly {
    fn new(source: &Path) -> Self {
        if rustix_is_root() {
            let view = source.with_extension("ro");
            std::fs::create_dir(&view).expect("mount point");
            let bind = Command::new("mount")
                .arg("--bind")
                .arg(source)
                .arg(&view)
                .status()
                .expect("mount");
            assert!(bind.success(), "mount --bind");
            let ro = Command::new("mount")
                .args(["-o", "remount,ro,bind"])
                .arg(&view)
                .status()
                .expect("remount");
            assert!(ro.success(), "remount read-only");
            Self {
                view,
                source: source.to_path_buf(),
                mounted: true,
            }
        } else {
            set_mode(source, 0o555, 0o444);
            Self {
                view: source.to_path_buf(),
                source: source.to_path_buf(),
                mounted: false,
            }
        }
    }
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg(&self.view).status();
            let _ = std::fs::remove_dir(&self.view);
        } else {
            set_mode(&self.source, 0o755, 0o644);
        }
    }
}

fn rustix_is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn set_mode(folder: &Path, folder_mode: u32, file_mode: u32) {
    for entry in std::fs::read_dir(folder).expect("folder") {
        let path = entry.expect("entry").path();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(file_mode))
            .expect("chmod file");
    }
    std::fs::set_permissions(folder, std::fs::Permissions::from_mode(folder_mode))
        .expect("chmod folder");
}

/// The fixture with one message pruned (a journal and a receipt exist), its WAL folded into
/// the database and the `-wal` and `-shm` files removed: a database at rest, as a backup holds
/// it. Returns the fixture's folder.
fn at_rest() -> Fixture {
    let fx = Fixture::new();
    prune_turn5_once(&fx);
    let conn = fx.sql();
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .expect("checkpoint");
    drop(conn);
    for side in ["-wal", "-shm"] {
        let mut name = fx.db.clone().into_os_string();
        name.push(side);
        let _ = std::fs::remove_file(name);
    }
    fx
}

/// Each read command with `--json` on `db` (and `journal`), as `(command, exit code, stdout)`.
fn read_everything(db: &Path, journal: &Path) -> Vec<(String, i32, Value)> {
    let journal = journal.to_str().expect("path");
    let commands: Vec<Vec<&str>> = vec![
        vec!["sessions"],
        vec!["messages", MANY_TURNS],
        vec!["receipts"],
        vec!["audit"],
        vec!["history", MANY_TURNS, "--query", "TOOL_CANARY"],
        vec!["history", MANY_TURNS, "--purpose", "prune"],
        vec!["preview", MANY_TURNS, TURN1],
        vec!["clean", "--all"],
    ];
    commands
        .into_iter()
        .map(|command| {
            let mut args = vec!["--journal", journal, "--json"];
            args.extend_from_slice(&command);
            let out = run(db, &args);
            (
                command.join(" "),
                out.status.code().unwrap_or(-1),
                json(&out),
            )
        })
        .collect()
}

/// Every file of `folder` with the SHA-256 of its bytes.
fn snapshot(folder: &Path) -> Vec<(String, String)> {
    use sha2::Digest;
    let mut files: Vec<(String, String)> = std::fs::read_dir(folder)
        .expect("folder")
        .map(|entry| {
            let entry = entry.expect("entry");
            let bytes = std::fs::read(entry.path()).expect("read");
            (
                entry.file_name().to_string_lossy().into_owned(),
                hex::encode(sha2::Sha256::digest(&bytes)),
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn a_wal_database_at_rest_on_read_only_media_answers_every_read_command() {
    let fx = at_rest();
    let folder = fx.dir.path().to_path_buf();
    let writable = read_everything(&fx.db, &fx.journal);
    // Reading a WAL database where SQLite may write leaves its (empty) side files: remove them
    // again, so that the read-only pass starts from a database at rest.
    for side in ["-wal", "-shm"] {
        let mut name = fx.db.clone().into_os_string();
        name.push(side);
        let _ = std::fs::remove_file(name);
    }
    let before = snapshot(&folder);
    let ro = ReadOnly::new(&folder);
    let db = ro.view.join("opencode.db");
    let journal = ro.view.join("opencode.db.prune-journal");
    let read_only = read_everything(&db, &journal);
    for ((command, code, doc), (_, ro_code, ro_doc)) in writable.iter().zip(&read_only) {
        assert_eq!(*code, 0, "{command}: {doc}");
        assert_eq!(*ro_code, 0, "{command} on read-only media: {ro_doc}");
        match command.as_str() {
            // What storage cannot write is said: no live mutation, no candidates, every
            // prunable message skipped as read_only.
            "preview ses_dd992af4dffe56B7kwrH3SftqX msg_2266d56ca00189ShWYkElL07uN" => {
                assert_eq!(doc["liveMutation"], true);
                assert_eq!(ro_doc["liveMutation"], false);
                assert_eq!(doc["revision"], ro_doc["revision"]);
                assert_eq!(doc["parts"], ro_doc["parts"]);
            }
            "history ses_dd992af4dffe56B7kwrH3SftqX --purpose prune" => {
                // A page ends early (with a cursor) when it runs past about 40 ms: the pages
                // scan the same messages when both came whole.
                for page in [doc, ro_doc] {
                    let scanned = page["scanned"].as_u64().expect("scanned");
                    assert!(
                        scanned == 30 || (scanned > 0 && page["cursor"].is_string()),
                        "{page}"
                    );
                }
                assert_eq!(ro_doc["candidates"], serde_json::json!([]));
                assert!(!doc["candidates"].as_array().expect("list").is_empty());
            }
            "clean --all" => {
                let would = doc["pruned"].as_u64().expect("pruned");
                let skipped = doc["skipped"]["read_only"].as_u64().unwrap_or(0);
                assert_eq!(ro_doc["pruned"], 0, "{ro_doc}");
                assert_eq!(ro_doc["skipped"]["read_only"], would + skipped, "{ro_doc}");
            }
            _ => assert_eq!(doc, ro_doc, "{command}"),
        }
    }
    let events = run(
        &db,
        &[
            "--journal",
            journal.to_str().expect("path"),
            "events",
            "--json",
        ],
    );
    assert_exit(&events, 0);
    assert_eq!(String::from_utf8_lossy(&events.stdout).lines().count(), 1);
    drop(ro);
    assert_eq!(snapshot(&folder), before, "the folder changed");
}

#[test]
fn a_prune_on_read_only_media_is_refused_naming_the_cause_and_changes_nothing() {
    let fx = at_rest();
    let folder = fx.dir.path().to_path_buf();
    let before = snapshot(&folder);
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let journal_elsewhere = elsewhere.path().join("journal");
    let ro = ReadOnly::new(&folder);
    let db = ro.view.join("opencode.db");
    let cause = if ro.mounted {
        "it is on a read-only mount"
    } else {
        "is not writable by this user"
    };
    let revision = "0".repeat(64);
    for journal in [None, Some(&journal_elsewhere)] {
        let mut args = vec![
            "--json",
            "prune",
            MANY_TURNS,
            TURN1,
            "--revision",
            &revision,
            "--all-technical",
        ];
        if let Some(journal) = journal {
            args.extend_from_slice(&["--journal", journal.to_str().expect("path")]);
        }
        for dry in [false, true] {
            let mut args = args.clone();
            if dry {
                args.push("--dry-run");
            }
            let out = run(&db, &args);
            assert_exit(&out, 1);
            let doc = json(&out);
            assert_eq!(doc["status"], "error");
            let error = doc["error"].as_str().expect("error");
            assert!(error.contains("is read-only"), "{error}");
            assert!(error.contains(cause), "{error}");
        }
    }
    let clean = run(&db, &["--json", "clean", "--all", "--apply"]);
    assert_exit(&clean, 1);
    assert!(!journal_elsewhere.exists(), "a journal was made");
    drop(ro);
    assert_eq!(snapshot(&folder), before, "the folder changed");
}

/// The fixture with a commit (a session retitled `only in the WAL`) still in its `-wal` file,
/// beside its `-shm` index, as a running OpenCode leaves them.
fn with_commit_only_in_the_wal() -> Fixture {
    let fx = Fixture::new();
    let conn = fx.sql();
    conn.execute_batch("PRAGMA wal_autocheckpoint = 0")
        .expect("no checkpoint");
    conn.execute(
        "UPDATE session SET title = 'only in the WAL' WHERE id = ?1",
        [MANY_TURNS],
    )
    .expect("update");
    // Never closed: closing the last connection would fold the WAL into the database.
    std::mem::forget(conn);
    fx
}

#[test]
fn a_wal_with_commits_and_its_index_on_read_only_media_is_read_with_those_commits() {
    let fx = with_commit_only_in_the_wal();
    let ro = ReadOnly::new(fx.dir.path());
    let out = run(&ro.view.join("opencode.db"), &["--json", "sessions"]);
    assert_exit(&out, 0);
    let sessions = json(&out);
    let titles: Vec<&str> = sessions
        .as_array()
        .expect("list")
        .iter()
        .filter(|s| s["sessionID"] == MANY_TURNS)
        .map(|s| s["title"].as_str().expect("title"))
        .collect();
    assert_eq!(titles, ["only in the WAL"]);
}

#[test]
fn a_wal_with_commits_but_no_index_on_read_only_media_is_refused_in_words() {
    let fx = with_commit_only_in_the_wal();
    let mut shm = fx.db.clone().into_os_string();
    shm.push("-shm");
    std::fs::remove_file(shm).expect("remove the index");
    let ro = ReadOnly::new(fx.dir.path());
    let out = run(&ro.view.join("opencode.db"), &["--json", "sessions"]);
    assert_exit(&out, 1);
    let doc = json(&out);
    let error = doc["error"].as_str().expect("error");
    assert!(
        error.contains("Copy the database together with its -wal file to writable storage"),
        "{error}"
    );
    assert!(!error.contains("unable to open"), "{error}");
}

#[test]
fn read_commands_and_dry_runs_work_with_a_read_only_journal() {
    let fx = at_rest();
    // The journal moves to a read-only folder, away from where the fixture's audit looks.
    fx.skip_audit();
    let journal_folder = tempfile::tempdir().expect("tempdir");
    let journal = journal_folder.path().join("opencode.db.prune-journal");
    std::fs::rename(&fx.journal, &journal).expect("move the journal");
    let ro = ReadOnly::new(journal_folder.path());
    let journal = ro.view.join("opencode.db.prune-journal");
    let before = std::fs::read(&journal).expect("journal");
    let journal_arg = journal.to_str().expect("path");
    for command in [
        vec!["clean", "--all"],
        vec!["receipts"],
        vec![
            "prune-batch",
            MANY_TURNS,
            "--candidates",
            "/dev/null",
            "--dry-run",
        ],
    ] {
        let mut args = vec!["--journal", journal_arg, "--json"];
        args.extend_from_slice(&command);
        let out = run(&fx.db, &args);
        assert_exit(&out, 0);
    }
    let events = run(&fx.db, &["--journal", journal_arg, "events", "--json"]);
    assert_exit(&events, 0);
    assert_eq!(String::from_utf8_lossy(&events.stdout).lines().count(), 1);
    let apply = run(
        &fx.db,
        &[
            "--journal",
            journal_arg,
            "--json",
            "clean",
            "--all",
            "--apply",
        ],
    );
    assert_exit(&apply, 1);
    let error = json(&apply)["error"].as_str().expect("error").to_string();
    assert!(error.contains("for writing"), "{error}");
    assert_eq!(std::fs::read(&journal).expect("journal"), before);
}

#[test]
fn serve_on_read_only_media_answers_reads_and_refuses_prunes() {
    let fx = at_rest();
    let folder = fx.dir.path().to_path_buf();
    let before = snapshot(&folder);
    let ro = ReadOnly::new(&folder);
    let server = common::http::Server::start(&ro.view.join("opencode.db"), &[]);
    let (status, body) = common::http::get(&server.url("/health"));
    assert_eq!(status, 200, "{body}");
    let preview = serde_json::json!({"sessionID": MANY_TURNS, "messageID": TURN1}).to_string();
    let (status, body) = common::http::post(&server.route("preview"), &preview);
    assert_eq!(status, 200, "{body}");
    let preview = common::http::parse(&body);
    assert_eq!(preview["status"], "preview");
    assert_eq!(preview["liveMutation"], false);
    let receipts = common::http::get(&server.route("receipts"));
    assert_eq!(receipts.0, 200, "{}", receipts.1);
    let prune = serde_json::json!({"sessionID": MANY_TURNS, "messageID": TURN1,
        "revision": preview["revision"], "indexes": [1]})
    .to_string();
    let (status, body) = common::http::post(&server.route("prune"), &prune);
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        common::http::parse(&body),
        serde_json::json!({"status": "blocked", "reason": "unavailable"})
    );
    let (exit, printed) = server.stop();
    assert!(exit.success(), "{printed}");
    drop(ro);
    assert_eq!(snapshot(&folder), before, "the folder changed");
}

/// A copy of the fixture in `journal_mode = DELETE` as a writer killed mid-transaction leaves
/// it: the database with half a transaction written into it (a cache of one page spills every
/// change) and its hot rollback journal, copied while the writer held its lock. Returns the
/// fixture of the copy and the number of parts.
fn with_a_hot_journal() -> (Fixture, i64) {
    let source = Fixture::new();
    source.exec("PRAGMA journal_mode = DELETE");
    let parts = source.scalar("SELECT count(*) FROM part");
    let writer = source.sql();
    writer
        .execute_batch(
            "PRAGMA cache_size = 1; BEGIN; UPDATE part SET data = data || ' '; \
             DELETE FROM part WHERE rowid % 2 = 0;",
        )
        .expect("half a transaction");
    let copy = tempfile::tempdir().expect("tempdir");
    let db = copy.path().join("opencode.db");
    std::fs::copy(&source.db, &db).expect("copy database");
    let mut journal = source.db.clone().into_os_string();
    journal.push("-journal");
    std::fs::copy(&journal, copy.path().join("opencode.db-journal")).expect("copy journal");
    writer.execute_batch("ROLLBACK").expect("rollback");
    let journal = copy.path().join("opencode.db.prune-journal");
    (Fixture::at(copy, db, journal), parts)
}

#[test]
fn a_read_command_rolls_a_hot_journal_back_and_reads_what_committed() {
    let (fx, parts) = with_a_hot_journal();
    let hot = fx.db.with_extension("db-journal");
    assert!(hot.exists());
    let out = run(&fx.db, &["--json", "sessions"]);
    assert_exit(&out, 0);
    assert_eq!(json(&out).as_array().unwrap().len(), 10);
    // SQLite rolled the transaction back: every part is there, none changed.
    assert!(!hot.exists());
    assert_eq!(fx.scalar("SELECT count(*) FROM part"), parts);
    assert_eq!(
        fx.scalar("SELECT count(*) FROM part WHERE data LIKE '% '"),
        0
    );
    let check: String = fx
        .sql()
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    for args in [
        vec!["stats"],
        vec!["messages", MANY_TURNS],
        vec!["receipts"],
        vec!["audit"],
    ] {
        let out = run(&fx.db, &args);
        assert_exit(&out, 0);
    }
}

#[test]
fn a_hot_journal_on_read_only_media_is_named_with_what_to_do() {
    let (fx, _) = with_a_hot_journal();
    let folder = fx.db.parent().unwrap().to_path_buf();
    let before = snapshot(&folder);
    let ro = ReadOnly::new(&folder);
    let db = ro.view.join("opencode.db");
    let out = run(&db, &["sessions"]);
    assert_exit(&out, 1);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for words in [
        "rollback journal",
        "left unfinished",
        "Copy the database together with its -journal file",
    ] {
        assert!(stderr.contains(words), "{stderr}");
    }
    drop(ro);
    assert_eq!(snapshot(&folder), before);
}

#[test]
fn a_damaged_file_on_read_only_media_is_refused_as_damaged() {
    let fx = at_rest();
    fx.skip_audit();
    common::faults::damage_pages(&fx.db, 260, 4);
    let folder = fx.db.parent().unwrap().to_path_buf();
    let before = snapshot(&folder);
    let ro = ReadOnly::new(&folder);
    let db = ro.view.join("opencode.db");
    for args in [
        vec!["--quiet-period", "0", "clean", "--all"],
        vec!["--quiet-period", "0", "clean", "--all", "--apply"],
        vec!["vacuum"],
    ] {
        let out = run(&db, &args);
        assert_exit(&out, 1);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("is damaged"), "{args:?}: {stderr}");
        assert!(!stderr.contains("read commands work"), "{args:?}: {stderr}");
    }
    drop(ro);
    assert_eq!(snapshot(&folder), before);
}
