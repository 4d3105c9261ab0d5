//! A journal file that is garbage, one cut short, or another database's journal is refused by
//! every command that needs it (and by `vacuum`, which rewrites the database it belongs to), in
//! words that say what the file is, that nothing was changed and what to do; neither the
//! database nor a byte of the journal is changed.

use crate::common;

use common::archive::{receipt_ids, revision};
use common::cli::{assert_exit, run};
use common::http::with_messages;
use common::Fixture;

const SESSION: &str = "ses_bad_journal";

/// A database with two pruned messages of three (archived), its journal holding their events;
/// and the third message's id.
fn pruned() -> (Fixture, String) {
    let (fx, messages) = with_messages(SESSION, 3);
    for message in &messages[..2] {
        let out = run(
            &fx.db,
            &[
                "--quiet-period",
                "0",
                "--json",
                "prune",
                SESSION,
                message,
                "--revision",
                &revision(&fx.db, SESSION, message),
                "--all-technical",
                "--archive",
            ],
        );
        assert_exit(&out, 0);
    }
    fx.skip_audit();
    (fx, messages[2].clone())
}

/// Every command that opens the journal, and `vacuum`.
fn commands(fx: &Fixture, message: &str) -> Vec<Vec<String>> {
    let receipt = receipt_ids(&fx.db).pop().expect("a receipt");
    let revision = revision(&fx.db, SESSION, message);
    let quiet = |args: &[&str]| {
        ["--quiet-period", "0"]
            .iter()
            .chain(args)
            .map(|arg| arg.to_string())
            .collect::<Vec<_>>()
    };
    vec![
        quiet(&[
            "prune",
            SESSION,
            message,
            "--revision",
            &revision,
            "--all-technical",
        ]),
        quiet(&["clean", "--all", "--apply"]),
        quiet(&["clean", "--all"]),
        quiet(&["restore", &receipt]),
        quiet(&["audit"]),
        quiet(&["events"]),
        quiet(&["vacuum"]),
        quiet(&["serve", "--listen", "127.0.0.1:0"]),
    ]
}

/// Runs every command against `fx`'s journal as it now is: each exits 1 with `what` and the
/// way out in its words, and the database and the journal keep every byte.
fn assert_each_refused(fx: &Fixture, message: &str, what: &str, way_out: &str) {
    let (database, journal) = (fx.file_digest(), fx.journal_digest());
    for args in commands(fx, message) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(&fx.db, &args);
        assert_exit(&out, 1);
        let words = String::from_utf8_lossy(&out.stderr);
        assert!(
            words.contains(what)
                && words.contains("nothing was changed")
                && words.contains(way_out),
            "{args:?}: {words}"
        );
        assert_eq!(
            (fx.file_digest(), fx.journal_digest()),
            (database.clone(), journal.clone()),
            "{args:?} changed the database or the journal"
        );
    }
}

#[test]
fn a_journal_of_garbage_is_refused_as_no_journal_and_kept_byte_for_byte() {
    let (fx, message) = pruned();
    let garbage: Vec<u8> = (0..20_000u32).map(|i| (i * 7919 % 251) as u8).collect();
    std::fs::write(&fx.journal, garbage).unwrap();
    assert_each_refused(
        &fx,
        &message,
        &format!(
            "{} is not a session-prune journal (its first bytes are not a journal's)",
            fx.journal.display()
        ),
        "move this file aside and run `session-prune journal new-epoch`",
    );
}

#[test]
fn a_journal_cut_short_is_refused_as_damaged_and_kept_byte_for_byte() {
    let (fx, message) = pruned();
    let whole = std::fs::read(&fx.journal).unwrap();
    std::fs::write(&fx.journal, &whole[..whole.len() / 2]).unwrap();
    assert_each_refused(
        &fx,
        &message,
        &format!("journal {} is damaged (", fx.journal.display()),
        "put a copy of the journal back",
    );
    // Put back whole, the journal is taken again.
    std::fs::write(&fx.journal, whole).unwrap();
    let out = run(&fx.db, &["--quiet-period", "0", "audit"]);
    assert_exit(&out, 0);
}

#[test]
fn another_databases_journal_is_refused_by_every_write_without_a_byte_written() {
    let (fx, message) = pruned();
    let (other, _) = pruned();
    std::fs::copy(&other.journal, &fx.journal).unwrap();
    let (database, journal) = (fx.file_digest(), fx.journal_digest());
    for args in commands(&fx, &message) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        if ["audit", "events", "vacuum", "clean"]
            .iter()
            .any(|read| args[2] == *read && !args.contains(&"--apply"))
        {
            continue;
        }
        let out = run(&fx.db, &args);
        assert_exit(&out, 1);
        let words = String::from_utf8_lossy(&out.stderr);
        assert!(words.contains("bound to database"), "{args:?}: {words}");
        assert_eq!(
            (fx.file_digest(), fx.journal_digest()),
            (database.clone(), journal.clone()),
            "{args:?} changed the database or the journal"
        );
    }
}

#[test]
fn a_journal_that_ends_inside_its_header_or_whose_pages_do_not_read_is_damaged() {
    let (fx, message) = pruned();
    let whole = std::fs::read(&fx.journal).unwrap();
    // Ten bytes: the header is cut.
    std::fs::write(&fx.journal, &whole[..10]).unwrap();
    assert_each_refused(
        &fx,
        &message,
        &format!(
            "journal {} is damaged (found: the file ends inside its header)",
            fx.journal.display()
        ),
        "put a copy of the journal back",
    );
    // A byte flipped every 997 bytes past the header: redb meets its pages with a panic, which
    // is the file's damage, said in words.
    let mut flipped = whole.clone();
    for at in (8192..flipped.len()).step_by(997) {
        flipped[at] = 0xff;
    }
    std::fs::write(&fx.journal, &flipped).unwrap();
    for args in [
        &["--quiet-period", "0", "clean", "--all", "--apply"][..],
        &["audit"],
        &["vacuum"],
    ] {
        let out = run(&fx.db, args);
        assert_exit(&out, 1);
        let words = String::from_utf8_lossy(&out.stderr);
        assert!(
            words.starts_with(&format!(
                "error: journal {} is damaged (found: ",
                fx.journal.display()
            )) && words.contains("nothing was changed")
                && !words.contains("panicked"),
            "{args:?}: {words}"
        );
        assert_eq!(std::fs::read(&fx.journal).unwrap(), flipped, "{args:?}");
    }
    std::fs::write(&fx.journal, whole).unwrap();
}

#[test]
fn a_journal_page_of_noise_is_met_in_words_never_with_a_panic() {
    let (fx, _) = pruned();
    let whole = std::fs::read(&fx.journal).unwrap();
    let mut noise = 0x2545_f491_4f6c_dd1du64;
    let mut found = 0;
    for page in (4096..whole.len()).step_by(4096) {
        let mut damaged = whole.clone();
        for byte in &mut damaged[page..(page + 4096).min(whole.len())] {
            noise ^= noise << 13;
            noise ^= noise >> 7;
            noise ^= noise << 17;
            *byte = noise as u8;
        }
        std::fs::write(&fx.journal, &damaged).unwrap();
        let audit = run(&fx.db, &["audit"]);
        let vacuum = run(&fx.db, &["vacuum"]);
        for (name, out) in [("audit", &audit), ("vacuum", &vacuum)] {
            let words = String::from_utf8_lossy(&out.stderr);
            assert!(!words.contains("panicked"), "page {page}, {name}: {words}");
        }
        assert_eq!(std::fs::read(&fx.journal).unwrap(), damaged, "page {page}");
        // What the audit finds unreadable, vacuum refuses.
        let audit_words = String::from_utf8_lossy(&audit.stderr);
        if audit.status.code() == Some(1) && audit_words.contains("is damaged") {
            found += 1;
            assert_eq!(vacuum.status.code(), Some(1), "page {page}: {audit_words}");
            assert!(
                String::from_utf8_lossy(&vacuum.stderr).contains("is damaged"),
                "page {page}: {}",
                String::from_utf8_lossy(&vacuum.stderr)
            );
        }
    }
    assert!(found > 0, "no page of noise was met");
    std::fs::write(&fx.journal, whole).unwrap();
}
