//! An empty file given as `--db` is not a database SQLite may turn into one, a path that names
//! nothing is no database, and a file that does not begin with SQLite's header (a text file,
//! a first page of zeros) is none either: every command that uses the database refuses each in
//! the same words (exit 2, bad input), and nothing is created beside it: no journal, no
//! archive, no `-wal` or `-shm`.

use crate::common;

use common::cli::run;

/// Every command that uses the database, with arguments it would otherwise accept.
fn commands() -> Vec<Vec<String>> {
    let session = "ses_dd992af4dffe56B7kwrH3SftqX";
    let message = "msg_2266d6d8d001S1dgSZNRxFlv9X";
    let revision = "0".repeat(64);
    let receipt = "0190f5c2-0000-7000-8000-000000000000";
    let commands: Vec<Vec<&str>> = vec![
        vec!["sessions"],
        vec!["stats"],
        vec!["vacuum"],
        vec!["messages", session],
        vec!["window", session],
        vec!["outline", session],
        vec!["preview", session, message],
        vec![
            "prune",
            session,
            message,
            "--revision",
            &revision,
            "--all-technical",
        ],
        vec!["history", session],
        vec!["prune-batch", session, "--candidates", "-"],
        vec!["clean", "--all"],
        vec!["clean", "--all", "--apply", "--archive"],
        vec!["receipts"],
        vec!["restore", receipt],
        vec!["archive", "stats"],
        vec!["archive", "purge", "--older-than", "30d"],
        vec!["audit"],
        vec!["events"],
        vec!["serve", "--listen", "127.0.0.1:0"],
    ];
    commands
        .into_iter()
        .map(|args| args.into_iter().map(str::to_string).collect())
        .collect()
}

/// Runs every command on `db` in `dir` (holding only it): each exits 2 with `expected` on
/// stderr, prints nothing on stdout, creates nothing and leaves the file's bytes (`kept`, or
/// no file at all).
fn assert_every_command_refuses(dir: &std::path::Path, db: &std::path::Path, expected: &str) {
    let kept = std::fs::read(db).ok();
    for args in commands() {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(db, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), expected, "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        let files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        let expected_files: Vec<std::ffi::OsString> = kept
            .iter()
            .map(|_| db.file_name().unwrap().to_os_string())
            .collect();
        assert_eq!(files, expected_files, "{args:?} created files");
        assert_eq!(std::fs::read(db).ok(), kept, "{args:?}");
    }
}

#[test]
fn every_command_refuses_an_empty_file_in_the_same_words_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("opencode.db");
    std::fs::write(&db, b"").unwrap();
    let expected = format!(
        "error: {} is an empty file (0 bytes), not an OpenCode database: pass the database \
         OpenCode writes (`opencode.db` in its data folder; OPENCODE_DB or --channel find it) \
         with --db\n",
        db.display()
    );
    assert_every_command_refuses(dir.path(), &db, &expected);
    // With --json, the refusal is the one error document.
    let out = run(&db, &["--json", "receipts"]);
    assert_eq!(out.status.code(), Some(2));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["status"], "error");
    assert_eq!(doc["exitCode"], 2);
    assert_eq!(
        doc["error"],
        expected.trim_start_matches("error: ").trim_end()
    );
}

#[test]
fn every_command_refuses_a_path_that_names_nothing_as_bad_input_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("opencode.db");
    let expected = format!(
        "error: cannot open database {}: no such file; nothing was changed (is OpenCode's data \
         elsewhere? pass --db PATH or --channel NAME)\n",
        db.display()
    );
    assert_every_command_refuses(dir.path(), &db, &expected);
}

#[test]
fn every_command_refuses_a_file_that_is_not_sqlite_as_bad_input_and_creates_nothing() {
    for content in [&b"hello, this is a text file\n"[..], &[0u8; 4096][..]] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("opencode.db");
        std::fs::write(&db, content).unwrap();
        let expected = format!(
            "error: {0} is not an SQLite database (it does not begin with SQLite's header), or \
             that header is damaged: nothing was read or written. Check that --db names \
             OpenCode's opencode.db; if it does, restore it from a backup, or stop OpenCode and \
             try to recover a copy (sqlite3 {0} .recover | sqlite3 recovered.db)\n",
            db.display()
        );
        assert_every_command_refuses(dir.path(), &db, &expected);
    }
}

#[test]
fn every_command_refuses_a_folder_or_a_device_as_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("opencode.db");
    std::fs::create_dir(&folder).unwrap();
    for args in commands() {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(&folder, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!(
                "error: --db {} is a folder: nothing was read or written; pass OpenCode's \
                 opencode.db (in its data folder; OPENCODE_DB or --channel find it)\n",
                folder.display()
            ),
            "{args:?}"
        );
    }
    let out = run(std::path::Path::new("/dev/null"), &["sessions"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not a regular file"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 0);
}
