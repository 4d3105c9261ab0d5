//! A database with receipts whose journal was deleted or emptied is refused by every command
//! that writes and by `serve`, in words that say what happened and what to do, with the
//! database and the journal's path left as they were. `journal new-epoch` starts a new journal
//! from the receipts: its events are numbered after theirs, `/health` names the epoch, a stream
//! whose cursor is older gets a `resync` (one at the last number goes on with nothing missed),
//! the audit holds, and the old journal put back is refused as another epoch's.

use crate::common;

use common::archive::{receipt_ids, revision};
use common::cli::{assert_exit, json, run};
use common::http::{events_path, get, parse, prune_all, with_messages, Server, Sse, WORKSPACE};
use common::Fixture;
use serde_json::json;

const SESSION: &str = "ses_lost_journal";

/// `with_messages(SESSION, n)` with the first `pruned` of them pruned, archived, through a
/// server: `pruned` receipts and events 1 to `pruned`.
fn pruned(n: usize, pruned: usize) -> (Fixture, Vec<String>) {
    let (fx, messages) = with_messages(SESSION, n);
    let server = Server::start(&fx.db, &["--archive"]);
    for message in &messages[..pruned] {
        assert_eq!(prune_all(&server, SESSION, message)["status"], "pruned");
    }
    server.stop();
    (fx, messages)
}

/// Asserts that `args` is refused as a database whose journal is lost: exit 1, words naming
/// both ways out.
fn assert_refused_as_lost(fx: &Fixture, args: &[&str], receipts: usize) {
    let out = run(&fx.db, args);
    assert_exit(&out, 1);
    let words = String::from_utf8_lossy(&out.stderr);
    assert!(
        words.contains(&format!(
            "this database holds the receipts of {receipts} prune(s)"
        )) && words.contains("but their journal is missing or empty: nothing was changed")
            && words.contains("put the journal back")
            && words.contains("`session-prune journal new-epoch`"),
        "{args:?}: {words}"
    );
}

#[test]
fn every_write_refuses_a_database_whose_journal_was_deleted_or_emptied_and_changes_nothing() {
    let (fx, messages) = pruned(3, 2);
    let kept = std::fs::read(&fx.journal).unwrap();
    let receipt = receipt_ids(&fx.db).pop().expect("a receipt");
    let revision = revision(&fx.db, SESSION, &messages[2]);
    let prune = [
        "--quiet-period",
        "0",
        "prune",
        SESSION,
        &messages[2],
        "--revision",
        &revision,
        "--all-technical",
    ];
    let writes: [&[&str]; 5] = [
        &prune,
        &["--quiet-period", "0", "clean", "--all", "--apply"],
        &["--quiet-period", "0", "restore", &receipt],
        &[
            "--quiet-period",
            "0",
            "clean",
            "--all",
            "--apply",
            "--archive",
        ],
        &["serve", "--listen", "127.0.0.1:0"],
    ];
    for emptied in [false, true] {
        if emptied {
            std::fs::write(&fx.journal, b"").unwrap();
        } else {
            std::fs::remove_file(&fx.journal).unwrap();
        }
        let database = fx.file_digest();
        for args in writes {
            assert_refused_as_lost(&fx, args, 2);
            assert_eq!(fx.file_digest(), database, "{args:?}");
            match std::fs::metadata(&fx.journal) {
                Ok(found) => assert!(emptied && found.len() == 0, "{args:?}: {found:?}"),
                Err(_) => assert!(!emptied, "{args:?}: the empty journal is gone"),
            }
        }
    }
    // Reads still answer.
    let out = run(&fx.db, &["--json", "receipts"]);
    assert_exit(&out, 0);
    assert_eq!(json(&out).as_array().map(Vec::len), Some(2));
    // Put back, the journal is taken again (and the audit holds).
    std::fs::write(&fx.journal, kept).unwrap();
    let out = run(&fx.db, &prune);
    assert_exit(&out, 0);
}

#[test]
fn a_new_epoch_numbers_events_after_the_receipts_and_older_cursors_resync() {
    let (fx, messages) = pruned(5, 3);
    let old_journal = std::fs::read(&fx.journal).unwrap();
    std::fs::remove_file(&fx.journal).unwrap();

    // A dry run writes nothing.
    let database = fx.file_digest();
    let out = run(&fx.db, &["--json", "journal", "new-epoch", "--dry-run"]);
    assert_exit(&out, 0);
    let planned = json(&out);
    assert_eq!(planned["status"], "planned", "{planned}");
    assert_eq!(fx.file_digest(), database);
    assert!(!fx.journal.exists());

    let out = run(&fx.db, &["--json", "journal", "new-epoch"]);
    assert_exit(&out, 0);
    let started = json(&out);
    let database_id = started["databaseID"]
        .as_str()
        .expect("databaseID")
        .to_string();
    assert_eq!(
        started,
        json!({
            "status": "started", "journal": fx.journal.display().to_string(),
            "databaseID": database_id, "epoch": 2, "afterSeq": 3, "receipts": 3,
        })
    );
    // Never over a journal.
    let journal = fx.journal_digest();
    let out = run(&fx.db, &["journal", "new-epoch"]);
    assert_exit(&out, 2);
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("is not empty, and a journal is never written over"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fx.journal_digest(), journal);

    let server = Server::start(&fx.db, &[]);
    let (status, health) = get(&server.url("/health"));
    assert_eq!(status, 200, "{health}");
    let health = parse(&health);
    assert_eq!(
        (
            &health["databaseID"],
            &health["lastSeq"],
            &health["journalEpoch"]
        ),
        (&json!(database_id), &json!(3), &json!(2)),
        "{health}"
    );
    let mut behind = Sse::open(&server.address, &events_path(WORKSPACE), Some(1));
    let mut caught_up = Sse::open(&server.address, &events_path(WORKSPACE), Some(3));
    assert_eq!(
        prune_all(&server, SESSION, &messages[3])["status"],
        "pruned"
    );
    let resync = behind.next_not_heartbeat().expect("resync");
    assert_eq!(resync.event, "resync", "{resync:?}");
    let next = caught_up.next_not_heartbeat().expect("the next event");
    assert_eq!(
        (next.event.as_str(), next.id),
        ("rpc.codenomad.session-pruning.pruned", Some(4)),
        "{next:?}"
    );
    assert_eq!(next.data["messageID"], json!(messages[3]));
    drop((behind, caught_up));
    server.stop();

    let out = run(&fx.db, &["--json", "audit"]);
    assert_exit(&out, 0);
    let audit = json(&out);
    assert_eq!(audit["ok"], true, "{audit}");
    assert_eq!(
        audit["journalEpoch"],
        json!({ "number": 2, "afterSeq": 3, "earlierReceipts": 3 }),
        "{audit}"
    );

    // The journal of epoch 1 put back: another epoch's, refused.
    let epoch_two = std::fs::read(&fx.journal).unwrap();
    std::fs::write(&fx.journal, &old_journal).unwrap();
    let database = fx.file_digest();
    let out = run(
        &fx.db,
        &["--quiet-period", "0", "clean", "--all", "--apply"],
    );
    assert_exit(&out, 1);
    let words = String::from_utf8_lossy(&out.stderr);
    assert!(
        words.contains("the journal is of epoch 1, but this database is on journal epoch 2"),
        "{words}"
    );
    assert_eq!(fx.file_digest(), database);
    assert!(
        std::fs::read(&fx.journal).unwrap() == old_journal,
        "the journal was written"
    );
    std::fs::write(&fx.journal, epoch_two).unwrap();
}

#[test]
fn a_database_without_receipts_has_no_epoch_to_start() {
    let fx = Fixture::new();
    let database = fx.file_digest();
    for args in [
        &["journal", "new-epoch", "--dry-run"][..],
        &["journal", "new-epoch"],
    ] {
        let out = run(&fx.db, args);
        assert_exit(&out, 2);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("holds no receipt"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(fx.file_digest(), database);
        assert!(!fx.journal.exists());
    }
}

#[test]
fn a_new_epoch_is_refused_while_a_server_holds_the_journal_it_lost() {
    let (fx, messages) = pruned(3, 1);
    // The journal that numbered the prunes is gone by the end: nothing to audit against.
    fx.skip_audit();
    let server = Server::start(&fx.db, &[]);
    for lose in ["delete", "empty"] {
        match lose {
            "delete" => std::fs::remove_file(&fx.journal).unwrap(),
            _ => std::fs::write(&fx.journal, b"").unwrap(),
        }
        let database = fx.file_digest();
        let out = run(&fx.db, &["--json", "journal", "new-epoch"]);
        assert_exit(&out, 3);
        assert_eq!(json(&out)["status"], "blocked", "{lose}");
        let words = String::from_utf8_lossy(&out.stderr);
        assert!(
            words.contains("is held open by") && words.contains("Nothing was changed"),
            "{lose}: {words}"
        );
        assert_eq!(fx.file_digest(), database, "{lose}");
        match lose {
            "delete" => assert!(!fx.journal.exists()),
            _ => assert_eq!(std::fs::metadata(&fx.journal).unwrap().len(), 0),
        }
    }
    // The server goes on with its own journal, on the epoch it started with.
    assert_eq!(
        prune_all(&server, SESSION, &messages[1])["status"],
        "pruned"
    );
    server.stop();
}

#[test]
fn a_new_epoch_at_another_path_is_refused_while_the_journal_beside_holds_something() {
    let (fx, _) = pruned(2, 1);
    let elsewhere = fx.dir.path().join("elsewhere.prune-journal");
    let (database, journal) = (fx.file_digest(), fx.journal_digest());
    let out = run(
        &fx.db,
        &[
            "--journal",
            elsewhere.to_str().unwrap(),
            "journal",
            "new-epoch",
        ],
    );
    assert_exit(&out, 2);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!(
            "the journal beside the database, {}, is not empty",
            fx.journal.display()
        )),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!((fx.file_digest(), fx.journal_digest()), (database, journal));
    assert!(!elsewhere.exists());
}

#[test]
fn a_start_that_comes_second_changes_nothing_and_an_engine_of_the_old_epoch_stops_writing() {
    use pruning_engine::{start_journal_epoch, EngineError, SessionStore as _};
    let (fx, messages) = pruned(3, 1);
    fx.skip_audit();
    // An engine of epoch 1 is open (a server, say) when another process starts epoch 2.
    let engine = fx.engine();
    std::fs::rename(&fx.journal, fx.dir.path().join("epoch-1.prune-journal")).unwrap();
    let (journal, started) = start_journal_epoch(&fx.store(0), &fx.journal).unwrap();
    assert_eq!(started.epoch.number, 2);
    drop(journal);
    // A second start from a plan made before the first: refused, nothing written.
    let database = fx.file_digest();
    assert!(!fx.store(0).set_journal_epoch(2).unwrap());
    assert_eq!(fx.file_digest(), database);
    // The engine of epoch 1 refuses to write: its events would go to a journal the database no
    // longer names.
    let revision = common::archive::revision(&fx.db, SESSION, &messages[1]);
    let request =
        pruning_engine::PruneRequest::all_technical(SESSION.into(), messages[1].clone(), revision)
            .unwrap();
    let refused = engine.prune(&request).err();
    assert!(
        matches!(
            refused,
            Some(EngineError::JournalEpochMismatch {
                journal: 1,
                database: 2
            })
        ),
        "{refused:?}"
    );
    assert_eq!(fx.file_digest(), database);
}

#[test]
fn starts_at_once_make_one_epoch_and_leave_the_database_on_it() {
    let (fx, _) = pruned(2, 1);
    fx.skip_audit();
    for round in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("opencode.db");
        // The database with its WAL (which holds the receipts), not its journal: lost.
        std::fs::copy(&fx.db, &db).unwrap();
        let mut wal = fx.db.clone().into_os_string();
        wal.push("-wal");
        if std::path::Path::new(&wal).exists() {
            std::fs::copy(&wal, dir.path().join("opencode.db-wal")).unwrap();
        }
        std::fs::copy(
            common::archive::archive_of(&fx.db),
            common::archive::archive_of(&db),
        )
        .unwrap();
        let starts: Vec<std::process::Child> = (0..3)
            .map(|_| {
                common::cli::session_prune()
                    .arg("--db")
                    .arg(&db)
                    .args(["--json", "journal", "new-epoch"])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("start")
            })
            .collect();
        let codes: Vec<Option<i32>> = starts
            .into_iter()
            .map(|child| child.wait_with_output().expect("wait").status.code())
            .collect();
        assert_eq!(
            codes.iter().filter(|code| **code == Some(0)).count(),
            1,
            "round {round}: {codes:?}"
        );
        assert!(
            codes.iter().all(|code| matches!(code, Some(0) | Some(2))),
            "round {round}: {codes:?}"
        );
        let epoch: String = rusqlite::Connection::open(&db)
            .unwrap()
            .query_row(
                "SELECT value FROM session_prune_meta WHERE key = 'journal_epoch'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(epoch, "2", "round {round}");
        let out = run(&db, &["audit"]);
        assert_exit(&out, 0);
    }
}

#[test]
fn a_new_epoch_is_refused_while_a_server_runs_with_a_journal_elsewhere() {
    let (fx, _) = pruned(2, 1);
    fx.skip_audit();
    let elsewhere = fx.dir.path().join("elsewhere.prune-journal");
    std::fs::rename(&fx.journal, &elsewhere).unwrap();
    let server = Server::start(&fx.db, &["--journal", elsewhere.to_str().unwrap()]);
    let database = fx.file_digest();
    let out = run(&fx.db, &["journal", "new-epoch"]);
    assert_exit(&out, 3);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("or its database is held open by"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fx.file_digest(), database);
    assert!(!fx.journal.exists());
    server.stop();
}

#[test]
fn a_new_epoch_while_another_process_writes_the_database_is_blocked_and_changes_nothing() {
    let (fx, _) = pruned(2, 1);
    fx.skip_audit();
    std::fs::remove_file(&fx.journal).unwrap();
    // Another writer (OpenCode, say) holds the database's write lock.
    let writer = fx.sql();
    writer.execute_batch("BEGIN IMMEDIATE").unwrap();
    let out = run(&fx.db, &["--json", "journal", "new-epoch"]);
    assert_exit(&out, 3);
    let answer = json(&out);
    assert_eq!(answer["status"], "blocked", "{answer}");
    assert!(
        answer["detail"]
            .as_str()
            .unwrap()
            .contains("is being written by another process"),
        "{answer}"
    );
    writer.execute_batch("ROLLBACK").unwrap();
    drop(writer);
    assert!(!fx.journal.exists());
    assert_eq!(
        fx.scalar("SELECT count(*) FROM session_prune_meta WHERE key = 'journal_epoch'"),
        0
    );
    // Once it is done, the start goes through.
    let out = run(&fx.db, &["journal", "new-epoch"]);
    assert_exit(&out, 0);
}
