//! `vacuum --into PATH` writes the vacuumed database to a new file (for a disk without room for a
//! rebuild in place) and leaves the database as it is: the copy holds every row, is synced and
//! checked, and, moved over the database as the command says, is the database OpenCode and this
//! tool go on with. A path that exists or a folder that does not is bad input; too little room
//! there is refused with the numbers; a copy that fails on the way is removed whole. A rebuild
//! in place refused for room names this alternative.

use crate::common;

use common::cli::{assert_exit, json, run};
use common::*;

/// Rows of the tables a clean and OpenCode read, as one comparable tuple.
fn rows(db: &std::path::Path) -> (i64, i64, i64, i64) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let count = |table: &str| -> i64 {
        conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap()
    };
    (
        count("session"),
        count("message"),
        count("part"),
        count("session_prune_receipt"),
    )
}

#[test]
fn the_copy_holds_every_row_leaves_the_database_as_it_was_and_takes_its_place() {
    let fx = Fixture::new();
    let cleaned = run(
        &fx.db,
        &[
            "--json",
            "clean",
            "--all",
            "--keep-last-turns",
            "0",
            "--apply",
        ],
    );
    assert_exit(&cleaned, 0);
    let other_disk = tempfile::tempdir().unwrap();
    let into = other_disk.path().join("opencode.db");
    // Read first: the last connection to close checkpoints the WAL.
    let source_rows = rows(&fx.db);
    let before = fx.file_digest();
    let out = run(
        &fx.db,
        &["--json", "vacuum", "--into", into.to_str().unwrap()],
    );
    assert_exit(&out, 0);
    let doc = json(&out);
    assert_eq!(doc["status"], "copied", "{doc}");
    assert_eq!(doc["into"], into.to_str().unwrap());
    let size = std::fs::metadata(&into).unwrap().len();
    assert_eq!(doc["intoBytes"], size);
    assert!(size < doc["bytesBefore"].as_u64().unwrap(), "{doc}");
    assert_eq!(doc["bytesAfter"], doc["bytesBefore"]);
    assert_eq!(fx.file_digest(), before, "the database changed");
    assert_eq!(rows(&into), source_rows);
    let integrity: String = rusqlite::Connection::open(&into)
        .unwrap()
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");

    // The text report says how to put it in place; done so, the journal and the receipts agree.
    let text = run(
        &fx.db,
        &[
            "vacuum",
            "--into",
            other_disk.path().join("second.db").to_str().unwrap(),
        ],
    );
    assert_exit(&text, 0);
    let said = String::from_utf8(text.stdout).unwrap();
    let db = fx.db.display();
    assert!(
        said.contains(&format!(
            "then: mv {}",
            other_disk.path().join("second.db").display()
        )) && said.contains(&format!(" {db} && rm -f {db}-wal {db}-shm")),
        "{said}"
    );
    std::fs::copy(&into, &fx.db).unwrap();
    for side in ["db-wal", "db-shm"] {
        let _ = std::fs::remove_file(fx.db.with_extension(side));
    }
    assert_eq!(rows(&fx.db), source_rows);
    let audit = run(&fx.db, &["--json", "audit"]);
    assert_exit(&audit, 0);
    let audited = json(&audit);
    assert_eq!(audited["ok"], true, "{audited}");
    assert_eq!(audited["receipts"], audited["events"], "{audited}");
}

#[test]
fn a_path_that_exists_or_a_missing_folder_is_bad_input_and_nothing_is_written() {
    let fx = Fixture::new();
    let before = fx.file_digest();
    let dir = tempfile::tempdir().unwrap();
    let taken = dir.path().join("taken.db");
    std::fs::write(&taken, b"someone's file").unwrap();
    let out = run(&fx.db, &["vacuum", "--into", taken.to_str().unwrap()]);
    assert_exit(&out, 2);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "--into {}: it exists; nothing was written",
            taken.display()
        )),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&taken).unwrap(), b"someone's file");

    let nowhere = dir.path().join("no-such-folder/opencode.db");
    let out = run(&fx.db, &["vacuum", "--into", nowhere.to_str().unwrap()]);
    assert_exit(&out, 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("its folder does not exist"));
    assert!(!nowhere.parent().unwrap().exists());

    for with in ["--online-shrink", "--force"] {
        let both = run(
            &fx.db,
            &[
                "vacuum",
                with,
                "--into",
                dir.path().join("x.db").to_str().unwrap(),
            ],
        );
        assert_exit(&both, 2);
        assert!(!dir.path().join("x.db").exists());
    }

    // A rollback journal of that name (a copy killed mid-write) would be taken for the copy's.
    std::fs::write(dir.path().join("y.db-journal"), b"left behind").unwrap();
    let out = run(
        &fx.db,
        &[
            "vacuum",
            "--into",
            dir.path().join("y.db").to_str().unwrap(),
        ],
    );
    assert_exit(&out, 2);
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("-journal or -wal of that name lies beside it"));
    assert!(!dir.path().join("y.db").exists());
    assert_eq!(fx.file_digest(), before);
}

#[test]
fn too_little_room_for_the_copy_is_refused_with_the_numbers_and_creates_nothing() {
    let fx = Fixture::new();
    let before = fx.file_digest();
    let dir = tempfile::tempdir().unwrap();
    let into = dir.path().join("opencode.db");
    let out = run(
        &fx.db,
        &[
            "--json",
            "vacuum",
            "--into",
            into.to_str().unwrap(),
            "--assume-free-bytes",
            "4096",
        ],
    );
    assert_exit(&out, 3);
    let doc = json(&out);
    assert_eq!(doc["status"], "refused");
    let live = fx.scalar("SELECT (SELECT page_count FROM pragma_page_count) - (SELECT freelist_count FROM pragma_freelist_count)")
        * fx.scalar("SELECT page_size FROM pragma_page_size");
    assert_eq!(doc["neededBytes"].as_i64().unwrap(), live);
    assert_eq!(doc["freeBytes"], 4096);
    let reason = doc["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("not enough free disk space: the vacuumed copy needs ")
            && reason.ends_with(", which has 4.0 KiB free"),
        "{reason}"
    );
    assert!(!into.exists());
    assert_eq!(fx.file_digest(), before);
}

#[test]
fn a_rebuild_in_place_refused_for_room_offers_the_copy_on_another_disk() {
    let fx = Fixture::new();
    let out = run(&fx.db, &["--json", "vacuum", "--assume-free-bytes", "4096"]);
    assert_exit(&out, 3);
    let reason = json(&out)["reason"].as_str().unwrap().to_string();
    // The command names this database, as every suggestion does.
    assert!(
        reason.contains(". Or write the vacuumed database to another disk with ")
            && reason.contains(&format!(
                "`session-prune --db {} vacuum --into /path/on/that/disk/opencode.db`",
                fx.db.display()
            )),
        "{reason}"
    );
    assert!(
        reason.contains("`vacuum --online-shrink` needs it one last time"),
        "{reason}"
    );
}

#[test]
fn a_copy_that_fills_its_disk_is_removed_whole_and_the_database_is_as_it_was() {
    let Some(disk) = common::small_disk::SmallDisk::mount("1M") else {
        return;
    };
    let fx = Fixture::new();
    let before = fx.file_digest();
    let into = disk.mount.join("opencode.db");
    // The room check is told there is room: the disk fills while SQLite writes.
    let out = run(
        &fx.db,
        &[
            "vacuum",
            "--into",
            into.to_str().unwrap(),
            "--assume-free-bytes",
            "1000000000",
        ],
    );
    assert_exit(&out, 1);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "the vacuumed copy {} could not be written",
            into.display()
        )) && stderr.contains("nothing of it is left, and the database is as it was"),
        "{stderr}"
    );
    // In our words, and the place named is the copy's disk, not the database's.
    assert!(
        stderr.contains("could not be written (its disk filled up)"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("; the disk holding {} has ", disk.mount.display())),
        "{stderr}"
    );
    assert!(
        !stderr.contains("where the database and the journal are"),
        "{stderr}"
    );
    assert!(!into.exists());
    assert_eq!(std::fs::read_dir(&disk.mount).unwrap().count(), 0);
    assert_eq!(fx.file_digest(), before);
}

#[test]
fn the_words_to_put_the_copy_in_place_quote_paths_a_shell_would_split() {
    let dir = tempfile::tempdir().unwrap();
    let spaced = dir.path().join("open code");
    std::fs::create_dir(&spaced).unwrap();
    let db = spaced.join("open code.db");
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/opencode-1.18.34/opencode.db"),
        &db,
    )
    .unwrap();
    let into = spaced.join("new copy.db");
    let out = run(&db, &["vacuum", "--into", into.to_str().unwrap()]);
    assert_exit(&out, 0);
    let said = String::from_utf8(out.stdout).unwrap();
    let quoted = |path: &std::path::Path| format!("'{}'", path.display());
    assert!(
        said.contains(&format!(
            "then: mv {} {} && rm -f {} {}",
            quoted(&into),
            quoted(&db),
            quoted(&spaced.join("open code.db-wal")),
            quoted(&spaced.join("open code.db-shm"))
        )),
        "{said}"
    );
    assert!(!said.contains("  "), "{said}");
}

#[test]
fn the_copy_of_a_private_database_is_as_private() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fixture::new();
    std::fs::set_permissions(&fx.db, std::fs::Permissions::from_mode(0o600)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let into = dir.path().join("opencode.db");
    let out = run(&fx.db, &["vacuum", "--into", into.to_str().unwrap()]);
    assert_exit(&out, 0);
    let mode = std::fs::metadata(&into).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}
