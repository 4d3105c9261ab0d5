//! The README's flow, as a new user follows it: a clean with the archive, a restore of one
//! message, then the spill-file step without `--archive`. The message put back is left alone
//! by the later clean (`restored`), every later prune is archived because the database has an
//! archive (no receipt is stranded behind one that cannot be undone), and the spill files go
//! while the rows that named them stay restorable. `--include-restored` and a `prune` by name
//! still take the message; `--no-archive` writes a prune that is not archived, on purpose.

use crate::common;

use common::archive::{archive_of, clean_archived_with, ids, restore, unrestored};
use common::cli::{assert_exit, json, run};
use common::Fixture;
use serde_json::Value;

/// Receipts (of prunes and restores) without an archive entry.
fn unarchived(fx: &Fixture) -> i64 {
    fx.scalar("SELECT count(*) FROM session_prune_receipt WHERE archive_hash IS NULL")
}

/// The newest receipt of a prune of parts: its id, session and message.
fn newest_parts_prune(fx: &Fixture) -> (String, String, String) {
    fx.sql()
        .query_row(
            "SELECT id, session_id, message_id FROM session_prune_receipt \
             WHERE restores IS NULL AND operation IS NULL AND part_ids <> '[]' \
             ORDER BY rowid DESC LIMIT 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .expect("a prune of parts")
}

/// Parts of `message` in the `part` table.
fn parts_of(fx: &Fixture, message: &str) -> i64 {
    fx.scalar(&format!(
        "SELECT count(*) FROM part WHERE message_id = '{message}'"
    ))
}

/// `--json --quiet-period 0 --abandoned-after never clean --all --keep-last-turns 0` and
/// `extra` (`--apply` for a clean that writes), exit 0: its report.
fn clean(fx: &Fixture, extra: &[&str]) -> Value {
    let mut args = vec![
        "--json",
        "--quiet-period",
        "0",
        "--abandoned-after",
        "never",
        "clean",
        "--all",
        "--keep-last-turns",
        "0",
    ];
    args.extend_from_slice(extra);
    let out = run(&fx.db, &args);
    assert_exit(&out, 0);
    json(&out)
}

#[test]
fn the_readmes_flow_leaves_the_restored_message_and_archives_the_spill_file_step() {
    let fx = Fixture::with_spill_files();
    let folder = fx.db.parent().unwrap().join("tool-output");
    let spill_files = || std::fs::read_dir(&folder).unwrap().count();
    let spilled = spill_files();
    clean_archived_with(&fx.db, &[], &["--no-compact"]);
    assert_eq!(unarchived(&fx), 0);
    let (receipt, _, message) = newest_parts_prune(&fx);
    let parts_pruned = parts_of(&fx, &message);
    assert_eq!(restore(&fx.db, &receipt, 0)["status"], "restored");
    let parts_restored = parts_of(&fx, &message);
    assert!(parts_restored > parts_pruned);

    // The README's spill-file step, without --archive: the database has an archive, so its
    // prunes are archived; the message put back is left alone.
    let receipts_before = fx.scalar("SELECT count(*) FROM session_prune_receipt");
    let report = clean(&fx, &["--apply", "--include-spill-files"]);
    assert_eq!(report["skipped"]["restored"], 1, "{report}");
    assert_eq!(parts_of(&fx, &message), parts_restored);
    assert_eq!(unarchived(&fx), 0, "every receipt stays restorable");
    assert!(
        spill_files() < spilled,
        "the spill files no row needs are gone"
    );
    // A dry run says the same.
    assert_eq!(clean(&fx, &[])["skipped"]["restored"], 1);

    // Every prune can still be undone, newest first, back to the file before the first clean.
    for receipt in unrestored(&fx.db) {
        assert_eq!(
            restore(&fx.db, &receipt, 0)["status"],
            "restored",
            "{receipt}"
        );
    }
    assert!(fx.scalar("SELECT count(*) FROM session_prune_receipt") > receipts_before);
    let audit = run(&fx.db, &["--json", "audit"]);
    assert_exit(&audit, 0);
    // The rows that named the removed spill files are back; the files are not (the archive
    // keeps rows): the audit says so, and holds.
    assert!(
        !json(&audit)["missingSpillFiles"]
            .as_array()
            .expect("missingSpillFiles")
            .is_empty(),
        "{}",
        json(&audit)
    );
}

#[test]
fn include_restored_and_a_prune_by_name_still_take_a_restored_message() {
    let fx = Fixture::new();
    clean_archived_with(&fx.db, &[], &["--no-compact"]);
    let (receipt, session, message) = newest_parts_prune(&fx);
    let pruned = parts_of(&fx, &message);
    restore(&fx.db, &receipt, 0);

    // A prune naming it takes it, archived by default.
    let out = run(
        &fx.db,
        &[
            "--json",
            "--quiet-period",
            "0",
            "prune",
            &session,
            &message,
            "--revision",
            &common::archive::revision(&fx.db, &session, &message),
            "--all-technical",
        ],
    );
    assert_exit(&out, 0);
    assert_eq!(parts_of(&fx, &message), pruned);
    assert_eq!(unarchived(&fx), 0);

    // Put back again; --include-restored takes it.
    let (again, _, _) = newest_parts_prune(&fx);
    restore(&fx.db, &again, 0);
    let report = clean(&fx, &["--apply", "--no-compact", "--include-restored"]);
    assert_eq!(report["skipped"].get("restored"), None, "{report}");
    assert_eq!(report["pruned"], 1, "{report}");
    assert_eq!(parts_of(&fx, &message), pruned);
}

#[test]
fn no_archive_writes_a_prune_that_is_not_archived_and_conflicts_with_archive() {
    let fx = Fixture::new();
    // No archive yet: a clean without --archive archives nothing, and makes no archive.
    clean(&fx, &["--apply", "--no-compact"]);
    assert!(!archive_of(&fx.db).exists());
    let fx = Fixture::new();
    clean_archived_with(&fx.db, &[], &["--no-compact"]);
    let (receipt, session, message) = newest_parts_prune(&fx);
    restore(&fx.db, &receipt, 0);
    let revision = common::archive::revision(&fx.db, &session, &message);
    let prune = |extra: &[&str]| {
        let mut args = vec![
            "--json",
            "--quiet-period",
            "0",
            "prune",
            &session,
            &message,
            "--revision",
            &revision,
            "--all-technical",
        ];
        args.extend_from_slice(extra);
        run(&fx.db, &args)
    };
    let both = prune(&["--archive", "--no-archive"]);
    assert_exit(&both, 2);
    assert!(String::from_utf8_lossy(&both.stderr).contains("cannot be used with"));
    assert_exit(&prune(&["--no-archive"]), 0);
    assert_eq!(unarchived(&fx), 1);
    assert_eq!(
        ids(
            &fx.db,
            &format!(
                "SELECT id FROM session_prune_receipt WHERE archive_hash IS NULL \
                 AND message_id = '{message}'"
            )
        )
        .len(),
        1
    );
}
