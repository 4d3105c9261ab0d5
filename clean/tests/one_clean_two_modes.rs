//! One [`Clean`] run twice on the same database written by OpenCode 1.18.34 doing coding work
//! (`tests/fixtures/opencode-1.18.34-work`, copied to a temporary folder): first as a dry run,
//! then applied through the engine. Both runs are the same walk, handing their prunes to the
//! mode, so the dry run's report is the apply's, figure for figure, but for the status and what
//! only an apply measures; the progress goes through the same phases; and the plan of one
//! session counts what the clean of that session counts.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use pruning_clean::{plan_session, run, AtOnce, Clean, Mode, Progress, Report, Silent, Status};
use pruning_engine::{Engine, Scope};
use pruning_journal::Journal;
use pruning_opencode::{OpenCodeStore, StoreOptions};
use serde_json::Value;

/// A copy of the coding-work fixture: its folder (kept alive), the database, the journal.
fn coding_work() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("opencode.db");
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/opencode-1.18.34-work/opencode.db");
    std::fs::copy(source, &db).expect("copy the fixture");
    let journal = dir.path().join("opencode.db.prune-journal");
    (dir, db, journal)
}

/// The store with no quiet period: the fixture's sessions ended long ago.
fn store(db: &Path) -> OpenCodeStore {
    let options = StoreOptions {
        quiet_period: Duration::ZERO,
        ..StoreOptions::default()
    };
    OpenCodeStore::open(db, options).expect("open the store")
}

/// The report as `clean --json` writes it, less what only an apply has: the status and the
/// pages in use measured after it.
fn figures(report: &Report) -> Value {
    let mut json = serde_json::to_value(report).expect("serializes");
    let object = json.as_object_mut().expect("an object");
    object.remove("status");
    object["file"]
        .as_object_mut()
        .expect("file")
        .remove("liveAfter");
    json
}

/// The phases a clean told, with their totals and how far each got.
#[derive(Debug, Default, PartialEq, Eq)]
struct Phases(Vec<(&'static str, u64, u64)>);

impl Progress for Phases {
    fn phase(&mut self, unit: &'static str, total: u64) {
        self.0.push((unit, total, 0));
    }
    fn update(&mut self, done: u64, _freed: u64) {
        if let Some(last) = self.0.last_mut() {
            last.2 = done;
        }
    }
    fn finish(&mut self) {}
}

#[test]
fn a_dry_run_and_its_apply_count_the_same_figures_through_the_same_phases() {
    let (_dir, db, journal) = coding_work();
    let clean = Clean {
        diffs: true,
        ..Clean::default()
    };
    let stop = AtomicBool::new(false);
    let mut dry_phases = Phases::default();
    let dry = run(
        Mode::DryRun(&store(&db)),
        &clean,
        &stop,
        &AtOnce,
        &mut dry_phases,
    )
    .expect("the dry run");
    let engine =
        Engine::open(store(&db), Journal::open(&journal).expect("journal")).expect("engine");
    let mut applied_phases = Phases::default();
    let applied = run(
        Mode::Apply(&engine),
        &clean,
        &stop,
        &AtOnce,
        &mut applied_phases,
    )
    .expect("the apply");

    assert_eq!(dry.status, Status::DryRun);
    assert_eq!(applied.status, Status::Cleaned);
    assert_eq!(figures(&dry), figures(&applied));
    assert_eq!(dry_phases, applied_phases);
    assert_eq!(
        applied_phases.0,
        [
            ("sessions", 8, 8),
            ("shell rows", 0, 0),
            ("user messages", 21, 21),
            ("messages", applied.considered, applied.considered),
        ]
    );
    // What it did, whole: every session compacted, the diffs and the parts pruned, each with
    // its receipt, nothing refused or failed.
    let compaction = applied.compaction.as_ref().expect("compaction");
    let diffs = applied.diffs.as_ref().expect("diffs");
    assert_eq!(compaction.sessions, 8);
    assert_eq!(applied.failed + applied.blocked.values().sum::<u64>(), 0);
    let conn = rusqlite::Connection::open(&db).expect("sql");
    let receipts: i64 = conn
        .query_row("SELECT count(*) FROM session_prune_receipt", [], |row| {
            row.get(0)
        })
        .expect("count");
    let receipts = receipts as u64;
    assert_eq!(receipts, 108);
    assert_eq!(receipts, 8 + diffs.pruned + applied.pruned);
}

#[test]
fn the_plan_of_one_session_counts_what_the_clean_of_that_session_counts() {
    let (_dir, db, _journal) = coding_work();
    let store = store(&db);
    let conn = rusqlite::Connection::open(&db).expect("sql");
    let sessions: Vec<String> = conn
        .prepare("SELECT id FROM session ORDER BY id")
        .expect("select")
        .query_map([], |row| row.get(0))
        .expect("query")
        .map(Result::unwrap)
        .collect();
    assert_eq!(sessions.len(), 8);
    let stop = AtomicBool::new(false);
    let mut prunes = 0;
    for session in &sessions {
        let clean = Clean {
            sessions: Some(vec![session.clone()]),
            compact: false,
            ..Clean::default()
        };
        let report =
            run(Mode::DryRun(&store), &clean, &stop, &AtOnce, &mut Silent).expect("the dry run");
        let plan = plan_session(
            &store,
            session,
            &clean.policy,
            false,
            &Scope::default(),
            pruning_engine::now_ms(),
        )
        .expect("the plan");
        assert_eq!(plan.looked_at, report.considered, "{session}");
        assert_eq!(plan.prunes.len() as u64, report.pruned, "{session}");
        assert_eq!(plan.bytes, report.bytes, "{session}");
        assert_eq!(plan.parts, report.parts, "{session}");
        assert_eq!(plan.nothing_to_prune, report.nothing_to_prune, "{session}");
        assert_eq!(plan.skipped, report.skipped, "{session}");
        prunes += plan.prunes.len();
    }
    assert!(prunes > 0, "the fixture has parts to prune");
}
