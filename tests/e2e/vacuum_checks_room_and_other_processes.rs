//! `vacuum` refuses, changing nothing, when the disk lacks the room it needs (saying how much
//! it needs and how much is free) and while another process has the database open (naming
//! it), unless `--force`; otherwise it shrinks the file and reports the sizes.

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::cli::{assert_exit, json, run};
use common::*;

#[test]
fn too_little_free_space_is_refused_with_the_numbers() {
    let fx = Fixture::new();
    let before = fx.file_digest();
    let out = run(&fx.db, &["--json", "vacuum", "--assume-free-bytes", "4096"]);
    assert_exit(&out, 3);
    let doc = json(&out);
    assert_eq!(doc["status"], "refused");
    assert_eq!(doc["freeBytes"], 4096);
    let live = fx.scalar("SELECT (SELECT page_count FROM pragma_page_count) - (SELECT freelist_count FROM pragma_freelist_count)")
        * fx.scalar("SELECT page_size FROM pragma_page_size");
    assert_eq!(doc["neededBytes"].as_i64().unwrap(), 2 * live);
    let reason = doc["reason"].as_str().unwrap();
    assert!(reason.starts_with("not enough free disk space"), "{reason}");
    let folder = std::fs::canonicalize(fx.dir.path()).unwrap();
    assert!(
        reason.contains(&format!("on the disk holding {}", folder.display()))
            || reason.contains(&format!("on the disk holding {}", fx.dir.path().display())),
        "{reason}"
    );
    assert!(reason.contains("that disk has 4.0 KiB free"), "{reason}");
    assert_eq!(doc["bytesAfter"], doc["bytesBefore"]);
    assert_eq!(fx.file_digest(), before);
}

#[test]
fn another_process_holding_the_database_is_refused_unless_forced() {
    let fx = Fixture::new();
    // A process that keeps the database file open, as OpenCode does while it runs.
    let mut holder = Command::new("sh")
        .arg("-c")
        .arg("exec 3<\"$0\"; echo ready; exec sleep 60")
        .arg(&fx.db)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.take().unwrap()),
        &mut ready,
    )
    .unwrap();
    let started = Instant::now();
    let before = fx.file_digest();
    let out = loop {
        let out = run(&fx.db, &["--json", "vacuum"]);
        // /proc may show the open file a moment late.
        if out.status.code() == Some(3) || started.elapsed() > Duration::from_secs(10) {
            break out;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_exit(&out, 3);
    let doc = json(&out);
    assert_eq!(doc["status"], "refused");
    assert_eq!(doc["pids"], serde_json::json!([holder.id()]));
    let reason = doc["reason"].as_str().unwrap();
    assert!(reason.contains("--force"), "{reason}");
    // Named, so that a person can tell OpenCode from a `session-prune serve`.
    assert!(
        reason.contains(&format!("pid {} (sleep)", holder.id())),
        "{reason}"
    );
    assert_eq!(fx.file_digest(), before);

    let forced = run(&fx.db, &["--json", "vacuum", "--force"]);
    assert_exit(&forced, 0);
    assert_eq!(json(&forced)["status"], "vacuumed");
    holder.kill().unwrap();
    holder.wait().unwrap();
}

#[test]
fn a_short_temporary_folder_is_named_with_its_free_space_and_the_remedy_that_helps() {
    let Some(disk) = common::small_disk::SmallDisk::mount("1M") else {
        return;
    };
    let fx = Fixture::new();
    let before = fx.file_digest();
    let out = crate::common::cli::session_prune()
        .arg("--db")
        .arg(&fx.db)
        .args(["--json", "vacuum"])
        .env("SQLITE_TMPDIR", &disk.mount)
        .output()
        .unwrap();
    assert_exit(&out, 3);
    let doc = json(&out);
    let reason = doc["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(&format!(
            "not enough free disk space: the temporary copy needs 2.1 MiB in {}, which has 1.0 MiB free",
            disk.mount.display()
        )),
        "{reason}"
    );
    assert!(
        reason.contains("set SQLITE_TMPDIR to a roomier folder"),
        "{reason}"
    );
    assert!(!reason.contains("WAL"), "the WAL's disk has room: {reason}");
    assert_eq!(fx.file_digest(), before);
}

#[test]
fn too_little_room_beside_the_database_says_sqlite_tmpdir_does_not_help() {
    let Some(disk) = common::small_disk::SmallDisk::mount("3M") else {
        return;
    };
    let db = disk.mount.join("opencode.db");
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/opencode-1.18.34/opencode.db"),
        &db,
    )
    .unwrap();
    let room = tempfile::tempdir().unwrap();
    let out = crate::common::cli::session_prune()
        .arg("--db")
        .arg(&db)
        .args(["--json", "vacuum"])
        .env("SQLITE_TMPDIR", room.path())
        .output()
        .unwrap();
    assert_exit(&out, 3);
    let reason = json(&out)["reason"].as_str().unwrap().to_string();
    assert!(
        reason.starts_with(&format!(
            "not enough free disk space: the WAL beside the database needs 2.1 MiB in {}",
            disk.mount.display()
        )),
        "{reason}"
    );
    assert!(
        reason.contains("SQLITE_TMPDIR does not move the WAL"),
        "{reason}"
    );
}
