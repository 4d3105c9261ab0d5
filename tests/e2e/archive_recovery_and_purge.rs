//! The prune archive's upkeep (docs/ARCHITECTURE.md, "Archive"): entries no receipt names (a
//! prune that never committed) are counted by `archive stats` and discarded by the next command
//! that archives; frames a crash tore at the end are cut by it; damage where a receipt's entry
//! lies is refused, changing nothing; `archive purge` removes old entries but the newest
//! receipt's of each message, and `audit` counts them as purged.

use crate::common;

use common::archive::{archive_path, clean_archived, clean_archived_with, prunes};
use common::cli::{assert_exit, json, run};
use common::*;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// `clean --all --apply --archive` that fails (exit 1): its output, for its words.
fn failing_clean(fx: &Fixture) -> std::process::Output {
    let out = run(
        &fx.db,
        &[
            "--quiet-period",
            "0",
            "clean",
            "--all",
            "--apply",
            "--archive",
            "--keep-last-turns",
            "0",
        ],
    );
    assert_exit(&out, 1);
    out
}

fn stats(fx: &Fixture) -> Value {
    let out = run(&fx.db, &["--json", "archive", "stats"]);
    assert_exit(&out, 0);
    json(&out)
}

/// The sessions of the fixture that a clean prunes, other than MANY_TURNS.
fn other_sessions(fx: &Fixture) -> Vec<String> {
    let conn = fx.sql();
    let mut stmt = conn
        .prepare("SELECT DISTINCT session_id FROM session_prune_receipt WHERE session_id != ?1")
        .expect("select");
    let ids = stmt
        .query_map([MANY_TURNS], |row| row.get(0))
        .expect("query")
        .collect::<rusqlite::Result<Vec<String>>>()
        .expect("ids");
    ids
}

#[test]
fn entries_of_prunes_that_never_committed_are_discarded_by_the_next_archiving_command() {
    let fx = Fixture::new();
    // The database and journal as they were, put back after a clean: the clean's entries are
    // in the archive, and no receipt names them, as after a crash between the archive's sync
    // and the commits.
    let saved = fx.dir.path().join("saved");
    std::fs::create_dir(&saved).expect("dir");
    std::fs::copy(&fx.db, saved.join("db")).expect("save db");
    clean_archived(&fx.db, &[MANY_TURNS]);
    let written = stats(&fx)["entries"].as_u64().expect("entries");
    assert!(written > 0);
    std::fs::copy(saved.join("db"), &fx.db).expect("put the database back");
    let _ = std::fs::remove_file(fx.db.with_extension("db-wal"));
    let _ = std::fs::remove_file(fx.db.with_extension("db-shm"));
    std::fs::remove_file(&fx.journal).expect("a journal of those prunes no more");
    let before = stats(&fx);
    assert_eq!(before["entries"], written);
    assert_eq!(before["orphans"], written);

    let report = clean_archived(&fx.db, &[MANY_TURNS]);
    assert_eq!(prunes(&report), written, "{report}");
    let after = stats(&fx);
    assert_eq!(after["entries"], written, "{after}");
    assert_eq!(after["orphans"], 0, "{after}");
    // A purge drops nothing more (the discarded entries are gone with its rewrite).
    let purge = run(
        &fx.db,
        &["--json", "archive", "purge", "--older-than", "365d"],
    );
    assert_exit(&purge, 0);
    let purge = json(&purge);
    assert_eq!(purge["orphans"], 0, "{purge}");
    assert_eq!(purge["purged"], 0, "{purge}");
}

#[test]
fn a_torn_last_frame_is_cut_and_damage_under_an_entry_is_refused() {
    let fx = Fixture::new();
    clean_archived(&fx.db, &[MANY_TURNS]);
    let path = archive_path(&fx);
    let whole = std::fs::read(&path).expect("archive");
    // Half a frame at the end: a length, a few bytes of head.
    let mut torn = whole.clone();
    torn.extend_from_slice(&[40, 0, 0, 0, 1, 2, 3]);
    std::fs::write(&path, &torn).expect("tear");
    let seen = stats(&fx);
    assert_eq!(seen["unreadableAt"], whole.len(), "{seen}");
    let others = other_sessions(&fx);
    assert!(others.is_empty(), "only MANY_TURNS was cleaned");
    clean_archived(&fx.db, &[]);
    let cut = stats(&fx);
    assert_eq!(cut["unreadableAt"], Value::Null, "{cut}");
    assert_eq!(cut["orphans"], 0, "{cut}");
    let now = std::fs::read(&path).expect("archive");
    assert_eq!(
        &now[..whole.len()],
        &whole[..],
        "the frames before stay as they were"
    );
    let audit = run(&fx.db, &["--json", "audit"]);
    assert_exit(&audit, 0);

    // Cut inside the first entry: the entries receipts name are gone, and an archiving command
    // refuses to write past them.
    let digest = |bytes: &[u8]| hex::encode(Sha256::digest(bytes));
    std::fs::write(&path, &now[..40]).expect("cut");
    let before = (fx.file_digest(), digest(&now[..40]));
    let out = failing_clean(&fx);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is damaged at byte"), "{stderr}");
    assert!(stderr.contains("Move it aside"), "{stderr}");
    let after = (
        fx.file_digest(),
        digest(&std::fs::read(&path).expect("archive")),
    );
    assert_eq!(after, before);
    // The audit names every archived receipt whose entry is not among the frames that read.
    let audit = run(&fx.db, &["--json", "audit"]);
    assert_exit(&audit, 1);
    let report = json(&audit);
    let archived =
        fx.scalar("SELECT count(*) FROM session_prune_receipt WHERE archive_hash IS NOT NULL");
    let missing = report["discrepancies"]
        .as_array()
        .expect("discrepancies")
        .iter()
        .filter(|d| d["kind"] == "archive_damaged")
        .count();
    assert_eq!(missing as i64, archived, "{report}");
    std::fs::write(&path, &now).expect("put the archive back");
}

#[test]
fn a_purge_keeps_each_messages_newest_receipts_entry_and_the_audit_counts_what_it_took() {
    let fx = Fixture::new();
    clean_archived(&fx.db, &[]);
    let entries = stats(&fx)["entries"].as_u64().expect("entries");
    let turn1: String = fx
        .sql()
        .query_row(
            "SELECT id FROM session_prune_receipt WHERE message_id = ?1",
            [TURN1],
            |row| row.get(0),
        )
        .expect("receipt");
    let out = run(
        &fx.db,
        &["--json", "--quiet-period", "0", "restore", &turn1],
    );
    assert_exit(&out, 0);
    // TURN1's newest receipt is its restore's now: its prune's entry may go.
    let dry = run(
        &fx.db,
        &[
            "--json",
            "archive",
            "purge",
            "--older-than",
            "0",
            "--dry-run",
        ],
    );
    assert_exit(&dry, 0);
    let archive = std::fs::read(archive_path(&fx)).expect("archive");
    let dry = json(&dry);
    assert_eq!(dry["status"], "dry-run");
    assert_eq!(dry["purged"], 1, "{dry}");
    assert_eq!(dry["keptNewest"], entries - 1, "{dry}");
    assert_eq!(dry["fileBytesFreed"], 0, "{dry}");
    assert_eq!(std::fs::read(archive_path(&fx)).expect("archive"), archive);
    // Entries younger than the cutoff stay.
    let young = run(
        &fx.db,
        &["--json", "archive", "purge", "--older-than", "1d"],
    );
    assert_exit(&young, 0);
    assert_eq!(json(&young)["purged"], 0);

    let purge = run(&fx.db, &["--json", "archive", "purge", "--older-than", "0"]);
    assert_exit(&purge, 0);
    let purge = json(&purge);
    assert_eq!(purge["purged"], 1, "{purge}");
    assert!(
        purge["fileBytesFreed"].as_u64().expect("freed") > 0,
        "{purge}"
    );
    let after = stats(&fx);
    assert_eq!(after["entries"], entries - 1, "{after}");
    assert_eq!(after["purged"], 1, "{after}");
    let audit = run(&fx.db, &["--json", "audit"]);
    assert_exit(&audit, 0);
    let report = json(&audit);
    // The purged entry was of a restored prune, whose rows are back: the audit asks for no
    // entry of it, purged or not.
    assert_eq!(report["archive"]["purged"], 0, "{report}");
    assert_eq!(report["archive"]["checked"], entries - 1, "{report}");
    // TURN1 is pruned again (a clean takes what a restore put back only when asked), archived
    // again, and that prune restores.
    clean_archived_with(&fx.db, &[MANY_TURNS], &["--include-restored"]);
    let newest: String = fx
        .sql()
        .query_row(
            "SELECT id FROM session_prune_receipt WHERE message_id = ?1 ORDER BY rowid DESC LIMIT 1",
            [TURN1],
            |row| row.get(0),
        )
        .expect("receipt");
    let out = run(
        &fx.db,
        &["--json", "--quiet-period", "0", "restore", &newest],
    );
    assert_exit(&out, 0);
}

#[test]
fn a_bad_older_than_is_bad_input_and_a_database_without_an_archive_has_no_stats() {
    let fx = Fixture::new();
    let out = run(
        &fx.db,
        &["--json", "archive", "purge", "--older-than", "soon"],
    );
    assert_exit(&out, 2);
    assert!(!archive_path(&fx).exists());
    let seen = stats(&fx);
    assert_eq!(seen["exists"], false, "{seen}");
    assert_eq!(seen["entries"], 0, "{seen}");
    let out = run(&fx.db, &["archive", "stats"]);
    assert_exit(&out, 0);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("no archive at "));
    let purge = run(&fx.db, &["--json", "archive", "purge", "--older-than", "0"]);
    assert_exit(&purge, 0);
    assert_eq!(json(&purge)["purged"], 0);
    assert!(
        !archive_path(&fx).exists(),
        "a purge never creates the archive"
    );
}

#[test]
fn a_missing_archive_is_not_replaced_by_a_new_one_unless_asked() {
    let fx = Fixture::new();
    clean_archived(&fx.db, &[MANY_TURNS]);
    let path = archive_path(&fx);
    let named = stats(&fx)["entries"].as_u64().expect("entries");
    std::fs::rename(&path, fx.dir.path().join("moved")).expect("move the archive away");
    let seen = stats(&fx);
    assert_eq!(seen["exists"], false, "{seen}");
    assert_eq!(seen["named"], named, "{seen}");
    let db = fx.file_digest();
    let out = failing_clean(&fx);
    let words = String::from_utf8_lossy(&out.stderr);
    assert!(words.contains("is missing, while"), "{words}");
    assert!(words.contains("touch "), "{words}");
    assert!(!path.exists(), "no new archive");
    assert_eq!(fx.file_digest(), db);
    // An empty file in its place: a new, empty archive on purpose.
    std::fs::write(&path, b"").expect("touch");
    let report = clean_archived(&fx.db, &[]);
    assert!(report["pruned"].as_u64().expect("pruned") > 0, "{report}");
    let audit = run(&fx.db, &["--json", "audit"]);
    assert_exit(&audit, 1);
    let report = json(&audit);
    let missing = report["discrepancies"]
        .as_array()
        .expect("discrepancies")
        .iter()
        .filter(|d| d["kind"] == "archive_missing")
        .count();
    assert_eq!(missing as u64, named, "{report}");
    // The old archive back in its place: every entry reads (the new one's are lost instead).
    fx.skip_audit();
}
