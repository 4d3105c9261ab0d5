//! What is over the 16 MiB row budget is never written from half a reading: a diffs prune whose
//! newest snapshot is over the budget is refused (both copies of the bodies go, or neither); a
//! prune of parts one of whose snapshots is over the budget is refused (it would be archived
//! whole, and a prune removes every snapshot of its parts or refuses); a spill file named only
//! inside the cut middle of a row over the budget is kept; a table OpenCode reads by row number
//! declared `WITHOUT ROWID` is refused in words.

use crate::common;

use common::cli::{assert_exit, json, run};
use common::Fixture;
use pruning_engine::{BlockedReason, IntentState, Journal, PruneResult};
use pruning_opencode::PlannedCopy;

/// More than the budget, in bytes.
const OVER: usize = 16 * 1024 * 1024 + 4096;

#[test]
fn a_diffs_prune_whose_snapshot_is_over_the_budget_is_refused_and_changes_nothing() {
    let fx = Fixture::work();
    let (session, message) = common::user_message_with_diffs(&fx);
    let request = match fx.store(0).clean_diffs(&session, &message, false).unwrap() {
        PlannedCopy::Prune(request) => request,
        other => panic!("no diffs prune of {message}: {other:?}"),
    };
    // The row stays as it was (its revision holds); only its newest snapshot grows.
    fx.exec(&format!(
        "UPDATE event SET data = json_set(data, '$.info.summary.diffs[0].patch', printf('%.*c', {OVER}, 'x')) \
         WHERE id = (SELECT id FROM event WHERE type = 'message.updated.1' \
                       AND json_extract(data, '$.info.id') = '{message}' ORDER BY seq DESC LIMIT 1)"
    ));
    let snapshot: String = fx
        .sql()
        .query_row(
            &format!("SELECT id FROM event WHERE octet_length(data) > {OVER}"),
            [],
            |row| row.get(0),
        )
        .unwrap();
    let digest = fx.file_digest();
    let engine = fx.engine_with(fx.store(0));
    let outcome = engine.prune(&request).unwrap();
    assert_eq!(
        outcome.result,
        PruneResult::Blocked {
            reason: BlockedReason::NotDeletable
        }
    );
    assert_eq!(
        outcome.refusal.unwrap().detail,
        format!("snapshot {snapshot} of message {message} holds more than the 16 MiB budget")
    );
    drop(engine);
    assert_eq!(fx.file_digest(), digest, "database file changed");
    let journal = Journal::open(&fx.journal).unwrap();
    let intents = journal.intents().unwrap();
    assert_eq!(intents.len(), 1);
    assert_eq!(
        intents[0].state,
        IntentState::Refused {
            reason: "not_deletable".into()
        }
    );
    assert_eq!(journal.last_seq().unwrap(), 0);
}

const SESSION: &str = "ses_dd992d334ffeb4iZc8W2NskkWu";
const MESSAGE: &str = "msg_2266d3474001I3pewKwYudoyEm";
const PART: &str = "prt_2266d3ed4001O1ve5LCzzaLeit";

#[test]
fn a_prune_whose_part_has_a_snapshot_over_the_budget_is_refused_and_changes_nothing() {
    let fx = Fixture::new();
    // The part's oldest snapshot (superseded, so a compaction leaves it) grows over the budget.
    fx.exec(&format!(
        "UPDATE event SET data = json_set(data, '$.part.state.raw', printf('%.*c', {OVER}, 'x')) \
         WHERE id = (SELECT id FROM event WHERE type = 'message.part.updated.1' \
                       AND json_extract(data, '$.part.id') = '{PART}' ORDER BY seq LIMIT 1)"
    ));
    let out = run(
        &fx.db,
        &["--quiet-period", "0", "--json", "preview", SESSION, MESSAGE],
    );
    assert_exit(&out, 0);
    let revision = json(&out)["revision"].as_str().unwrap().to_string();
    let digest = fx.file_digest();
    let out = run(
        &fx.db,
        &[
            "--quiet-period",
            "0",
            "--json",
            "prune",
            "--revision",
            &revision,
            "--all-technical",
            "--archive",
            SESSION,
            MESSAGE,
        ],
    );
    assert_exit(&out, 3);
    let answer = json(&out);
    assert_eq!(answer["status"], "blocked", "{answer}");
    assert_eq!(answer["reason"], "not_deletable", "{answer}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("of a part to prune holds more than the 16 MiB budget"),
        "{stderr}"
    );
    assert_eq!(fx.file_digest(), digest, "database file changed");
    let out = run(&fx.db, &["--json", "archive", "stats"]);
    assert_exit(&out, 0);
    assert_eq!(json(&out)["entries"], 0, "an entry was archived");
    let journal = Journal::open(&fx.journal).unwrap();
    let intents = journal.intents().unwrap();
    assert_eq!(intents.len(), 1);
    assert_eq!(
        intents[0].state,
        IntentState::Refused {
            reason: "not_deletable".into()
        }
    );
    assert_eq!(journal.last_seq().unwrap(), 0);
    drop(journal);

    // The dry run of a clean says the same of that message.
    let out = run(
        &fx.db,
        &[
            "--quiet-period",
            "0",
            "--json",
            "clean",
            SESSION,
            "--keep-last-turns",
            "0",
        ],
    );
    assert_exit(&out, 0);
    let report = json(&out);
    assert_eq!(report["pruned"], 0, "{report}");
    assert_eq!(fx.file_digest(), digest, "database file changed");
}

#[test]
fn a_spill_file_named_only_inside_a_row_over_the_budget_is_kept() {
    let fx = Fixture::with_spill_files();
    // Named by one part a clean prunes, and in the middle of the output of another part whose
    // message is over the budget.
    let named = "prt_2266d7ddd001QBdljHSVEzQuMq";
    let file = "tool_2266d7e0f001s36OzEaaempNRZ";
    let half = "x".repeat(OVER / 2);
    let output = format!("{half} see /data/opencode/tool-output/{file} {half}");
    fx.sql()
        .execute(
            "UPDATE part SET data = json_set(data, '$.state.output', ?1) WHERE id = ?2",
            [output.as_str(), PART],
        )
        .unwrap();
    let out = run(
        &fx.db,
        &[
            "--quiet-period",
            "0",
            "--json",
            "clean",
            "--all",
            "--keep-last-turns",
            "0",
            "--include-spill-files",
            "--apply",
        ],
    );
    assert_exit(&out, 0);
    let report = json(&out);
    assert_eq!(report["skipped"]["oversize"], 1, "{report}");
    assert_eq!(
        fx.scalar(&format!("SELECT count(*) FROM part WHERE id = '{named}'")),
        0,
        "the part naming the file was pruned"
    );
    assert!(
        fx.dir.path().join("tool-output").join(file).exists(),
        "{file} was removed though part {PART} still names it"
    );
}

#[test]
fn a_table_read_by_row_number_declared_without_rowid_is_refused_in_words() {
    let fx = Fixture::new();
    fx.exec(
        "CREATE TABLE part_copy (id text PRIMARY KEY, message_id text NOT NULL, \
           session_id text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL, \
           data text NOT NULL) WITHOUT ROWID;
         INSERT INTO part_copy SELECT id, message_id, session_id, time_created, time_updated, data FROM part;
         DROP TABLE part;
         ALTER TABLE part_copy RENAME TO part;",
    );
    let digest = fx.file_digest();
    let words = "the part table is declared WITHOUT ROWID, which OpenCode never does: a layout this version does not know";
    for args in [
        &["sessions"][..],
        &["stats"],
        &["messages", SESSION],
        &["outline", SESSION],
        &["preview", SESSION, MESSAGE],
        &["history", SESSION],
        &["audit"],
    ] {
        let out = run(&fx.db, args);
        assert_exit(&out, 1);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(words), "{args:?}: {stderr}");
        assert!(!stderr.contains("no such column"), "{args:?}: {stderr}");
    }
    assert_eq!(fx.file_digest(), digest, "database file changed");
    assert!(!fx.journal.exists(), "a journal was created");
}
