//! `clean --before-compaction` on OpenCode 2 prunes only what OpenCode 2 never sends the model
//! again: the real OpenCode 2 continuing a compacted session sends the same request, byte for
//! byte, with and without the clean, on each shape of compaction a file can hold:
//!
//! - 2.1.2's own (`metadata.keepID`: only rows older than the kept message are never sent);
//! - 2.0.15's own (a `recent` transcript: rows older than the compaction are never sent), read by
//!   2.0.15 and by 2.1.2 continuing a 2.0.15 file;
//! - one the migration made of a 1.x compaction (`metadata.recent`, or `recent` by 2.0.15).
//!
//! Each clean must prune something, so that the request's sameness says something; and a clean
//! that takes every completed message instead must change the request, so that the cut is not
//! later than it needs to be.

use crate::common::cli;
use crate::opencode_real;

use std::path::Path;
use std::time::Duration;

use opencode_real::{
    binary_of, configure_service, next_request, Layout, MockModel, OpenCode, Service,
};
use serde_json::Value;

const TURN_TIMEOUT: Duration = Duration::from_secs(90);

/// A turn whose shell output is about 30 KB, so that a compaction keeps only the last turns.
fn big_turn(n: u32) -> String {
    format!(
        "Turn {n}. [[bash:seq -f 'output line %g of turn {n}' 1 1200]] \
         [[reason:thinking about turn {n}]] [[say:text_canary_{n}]]"
    )
}

/// Where the compacted session comes from.
enum Source {
    /// Written by a release: these turns, a compaction, then one more turn.
    Native { writer: &'static str },
    /// `tests/fixtures/opencode-1.18.34-matrix/` migrated by the reader: its compacted session.
    Migrated,
}

/// What `reader` sent for one new prompt in the compacted session.
struct Requests {
    /// Without a clean.
    without_clean: String,
    /// After `clean --all --keep-last-turns 0 --before-compaction --apply`.
    with_clean: String,
    /// That clean's report.
    report: Value,
    /// After `clean --all --keep-last-turns 0 --apply` instead: every completed message, past
    /// the cut too.
    past_the_cut: String,
}

/// The chat request `reader` sends for one new prompt in the compacted session, without and
/// with `clean --all --keep-last-turns 0 --before-compaction --apply` on the same database,
/// and after a clean past the cut. `None` without a binary (outside CI).
fn requests_around_clean(reader: &str, source: Source) -> Option<Requests> {
    let reader_bin = binary_of(reader)?;
    let mock = MockModel::start();
    let (home, session) = match source {
        Source::Native { writer } => {
            let writer_bin = binary_of(writer)?;
            let mut home = OpenCode::new(&writer_bin, &mock.base_url());
            configure_service(&home, &mock.base_url());
            let mut service = Service::start(&home);
            let session = service.create_session("compacted");
            for n in 1..=6 {
                service.turn(&session, &big_turn(n), TURN_TIMEOUT);
            }
            service.compact(&session, TURN_TIMEOUT);
            service.turn(&session, &big_turn(7), TURN_TIMEOUT);
            service.stop();
            drop(service);
            home.set_binary(&reader_bin);
            (home, session)
        }
        Source::Migrated => {
            let fixture = opencode_real::workspace().join("tests/fixtures/opencode-1.18.34-matrix");
            let text = std::fs::read_to_string(fixture.join("manifest.json")).expect("manifest");
            let manifest: Value = serde_json::from_str(&text).expect("manifest JSON");
            let home = OpenCode::with_layout(
                &reader_bin,
                &mock.base_url(),
                Layout::generated(
                    manifest["generator"]["work_dir"]
                        .as_str()
                        .expect("work_dir"),
                ),
            );
            configure_service(&home, &mock.base_url());
            home.copy_fixture(&fixture);
            home.relocate_sessions();
            let mut service = Service::start(&home);
            service.wait_migration(TURN_TIMEOUT);
            service.stop();
            drop(service);
            let session = manifest["scenarios"]["d_compaction"]["session"]
                .as_str()
                .expect("the compacted session")
                .to_string();
            (home, session)
        }
    };
    let db = home.database();
    let pristine = home.root().join("pristine.db");
    std::fs::copy(&db, &pristine).expect("keep the pristine database");
    let without_clean = next_request(&home, &mock, &session, "continue");
    put_back(&db, &pristine);
    let report = clean_everything(&db, &["--before-compaction"]);
    let with_clean = next_request(&home, &mock, &session, "continue");
    put_back(&db, &pristine);
    clean_everything(&db, &[]);
    let past_the_cut = next_request(&home, &mock, &session, "continue");
    Some(Requests {
        without_clean,
        with_clean,
        report,
        past_the_cut,
    })
}

/// `clean --all --keep-last-turns 0 --apply` with `extra` on `db`, which must exit 0: its report.
fn clean_everything(db: &Path, extra: &[&str]) -> Value {
    let (code, report) = cli::clean_everything(db, extra);
    assert_eq!(code, Some(0), "{report}");
    report
}

/// The database back as `pristine` holds it, without a WAL of the run since and without the
/// journal of a clean of it (a clean of the copy put back starts one of its own).
fn put_back(db: &Path, pristine: &Path) {
    for side in ["-wal", "-shm", ".prune-journal"] {
        let _ = std::fs::remove_file(format!("{}{side}", db.display()));
    }
    std::fs::copy(pristine, db).expect("put the pristine database back");
}

fn assert_unchanged(reader: &str, source: Source) {
    let Some(Requests {
        without_clean,
        with_clean,
        report,
        past_the_cut,
    }) = requests_around_clean(reader, source)
    else {
        return;
    };
    assert!(
        report["pruned"].as_u64() > Some(0),
        "{reader}: the clean pruned nothing: {report}"
    );
    assert!(
        report["beforeCompaction"]["outside"].as_u64() > Some(0),
        "{reader}: every message was older than the cut: {report}"
    );
    assert!(
        without_clean.contains("SUMMARY_CANARY"),
        "{reader}: the summary is sent"
    );
    assert_eq!(with_clean, without_clean, "{reader}: the request changed");
    // What the cut keeps is sent: a clean that takes it too changes the request.
    assert_ne!(
        past_the_cut, without_clean,
        "{reader}: a clean past the cut left the request as it was"
    );
}

#[test]
fn opencode_2_1_2_sends_the_same_request_after_clean_before_its_compaction() {
    assert_unchanged("2.1.2", Source::Native { writer: "2.1.2" });
}

#[test]
fn opencode_2_0_15_sends_the_same_request_after_clean_before_its_compaction() {
    assert_unchanged("2.0.15", Source::Native { writer: "2.0.15" });
}

#[test]
fn opencode_2_1_2_sends_the_same_request_after_clean_before_a_2_0_15_compaction() {
    assert_unchanged("2.1.2", Source::Native { writer: "2.0.15" });
}

#[test]
fn opencode_2_1_2_sends_the_same_request_after_clean_before_a_migrated_compaction() {
    assert_unchanged("2.1.2", Source::Migrated);
}

#[test]
fn opencode_2_0_15_sends_the_same_request_after_clean_before_a_migrated_compaction() {
    assert_unchanged("2.0.15", Source::Migrated);
}
