//! Group transactions: several prunes of one batch in one SQLite write transaction, each under
//! its own `SAVEPOINT`, for as long as the write lock may be held. A prune's content change and
//! its receipt are released into the transaction together or rolled back together; the
//! transaction commits every prune it kept at once.
//!
//! The bound: OpenCode waits up to 5 s for the write lock (`busy_timeout = 5000`); a group
//! transaction holds it at most [`LOCK_BUDGET`], 1 % of that. A prune joins the transaction only
//! when, at the pace of the slowest prune of the transaction so far, it ends before
//! [`LOCK_BUDGET`] less [`COMMIT_RESERVE`]; the first prune always joins (one prune is a
//! transaction of its own, however long). Source: docs/ARCHITECTURE.md, "Group transactions".

use std::time::{Duration, Instant};

use pruning_engine::{Applied, StoreError};

use super::txn::{WriteTxn, Writer};
use super::write::{self, Failure, Step};

/// The longest a group transaction holds SQLite's write lock: 1 % of OpenCode's
/// `busy_timeout` (5,000 ms).
pub(crate) const LOCK_BUDGET: Duration = Duration::from_millis(50);

/// The part of [`LOCK_BUDGET`] left to the transaction's `COMMIT` (writing its pages to the
/// WAL).
pub(crate) const COMMIT_RESERVE: Duration = Duration::from_millis(15);

/// Runs `work(txn, i)` for `i` in `0..count`, in order, in one write transaction `txn` taken by
/// `writer`, each under its own savepoint, until [`LOCK_BUDGET`] says no more fit, then commits.
/// Returns one answer per prune taken (at least one when `count > 0`), as
/// [`write::in_transaction`] would give it alone. A prune whose work does not end in
/// [`Step::Commit`] is rolled back to its savepoint before the next one runs.
///
/// A failure of a prune's work (not a refusal) ends the transaction after that prune: it is
/// rolled back alone and the prunes before it commit; when SQLite rolled back the whole
/// transaction (a full disk, an I/O error), every prune of it that wrote answers the failure
/// too, nothing of it written. A failed `COMMIT` is every writing prune's
/// ([`write::CommitFailed`]). A panic unwinding out of `work` rolls the whole transaction back
/// (its guard is dropped). How long the lock was held is recorded in the writer's lock times.
pub(crate) fn in_group(
    writer: Writer<'_>,
    count: usize,
    mut work: impl FnMut(&WriteTxn<'_>, usize) -> Result<Step, Failure>,
) -> Vec<Result<Applied, StoreError>> {
    if count == 0 {
        return Vec::new();
    }
    let txn = match write::begin(writer) {
        Ok(txn) => txn,
        Err(refused) => return vec![refused],
    };
    let conn = txn.conn();
    let began = Instant::now();
    let mut answers: Vec<Result<Applied, StoreError>> = Vec::with_capacity(count);
    // Which answers are of prunes whose writes stand in the transaction.
    let mut wrote: Vec<bool> = Vec::with_capacity(count);
    let mut slowest = Duration::ZERO;
    let mut whole_rolled_back = None;
    for index in 0..count {
        if index > 0 && began.elapsed() + slowest > LOCK_BUDGET - COMMIT_RESERVE {
            break;
        }
        let started = Instant::now();
        let outcome = savepoint(&txn, &mut work, index);
        slowest = slowest.max(started.elapsed());
        match outcome {
            Kept(step) => {
                answers.push(write::answer(Ok(step)));
                wrote.push(true);
            }
            Undone(outcome) => {
                let failed = outcome.is_err();
                let answer = write::answer(outcome);
                if failed && conn.is_autocommit() {
                    whole_rolled_back = Some(rolled_back_with(&answer));
                }
                answers.push(answer);
                wrote.push(false);
                if failed {
                    break;
                }
            }
            Lost(error) => {
                // The transaction is rolled back whole after the loop. Worded as any SQL failure
                // of a prune is (`super::sql_errors::classify`).
                let answer = write::answer(Err(Failure::Sql(error)));
                whole_rolled_back = Some(rolled_back_with(&answer));
                answers.push(answer);
                wrote.push(false);
                break;
            }
        }
    }
    let writes = wrote.iter().any(|&w| w);
    if let Some(detail) = whole_rolled_back {
        txn.rollback();
        for (answer, _) in answers.iter_mut().zip(&wrote).filter(|(_, &w)| w) {
            *answer = Err(StoreError::Storage(
                format!("rolled back with the prune after it in the same transaction: {detail}")
                    .into(),
            ));
        }
    } else if writes {
        if let Err(failed) = write::commit(txn) {
            for (answer, _) in answers.iter_mut().zip(&wrote).filter(|(_, &w)| w) {
                *answer = failed.answer();
            }
        }
    } else {
        txn.rollback();
    }
    answers
}

/// How one prune's savepoint ended.
enum Savepoint {
    /// Its work asked to commit: released into the transaction.
    Kept(Step),
    /// Rolled back to the savepoint (a refusal, a replay, a failure of the work).
    Undone(Result<Step, Failure>),
    /// The savepoint itself could not be taken, released or rolled back: the transaction's
    /// state is not known, so none of it is kept.
    Lost(rusqlite::Error),
}
use Savepoint::{Kept, Lost, Undone};

/// Runs `work(txn, index)` under a savepoint and releases or rolls it back.
fn savepoint(
    txn: &WriteTxn<'_>,
    work: &mut impl FnMut(&WriteTxn<'_>, usize) -> Result<Step, Failure>,
    index: usize,
) -> Savepoint {
    if let Err(error) = txn.savepoint() {
        return Lost(error);
    }
    let outcome = match work(txn, index) {
        Ok(Step::Commit(receipt)) => {
            return match txn.release_savepoint() {
                Ok(_) => Kept(Step::Commit(receipt)),
                Err(error) => Lost(error),
            };
        }
        other => other,
    };
    if !txn.is_open() {
        // SQLite rolled back the whole transaction (and with it the savepoint).
        return Undone(outcome);
    }
    match txn.undo_savepoint() {
        Ok(_) => Undone(outcome),
        Err(error) => Lost(error),
    }
}

/// The words for the prunes that wrote in a transaction SQLite rolled back whole, from the
/// answer of the prune whose failure did it.
fn rolled_back_with(answer: &Result<Applied, StoreError>) -> String {
    match answer {
        Err(error) => error.to_string(),
        Ok(Applied::Refused(refusal)) => refusal.detail.clone(),
        Ok(Applied::Pruned { .. }) => "SQLite rolled the transaction back".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock_times::LockTimes;
    use crate::txn::behind;
    use pruning_engine::{BlockedReason, Receipt, Refusal};
    use rusqlite::Connection;
    use uuid::Uuid;

    /// A database file on disk, in WAL mode as OpenCode keeps it, with one table of rows.
    fn database() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let conn = Connection::open(dir.path().join("group.db")).unwrap();
        conn.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE row (n INTEGER PRIMARY KEY);")
            .unwrap();
        (dir, conn)
    }

    fn receipt(n: usize) -> Box<Receipt> {
        Box::new(Receipt {
            receipt_id: Uuid::now_v7(),
            intent_id: Uuid::now_v7(),
            request_key: format!("{n:064x}"),
            session_id: "ses_group".into(),
            message_id: format!("msg_{n}"),
            revision_before: String::new(),
            revision_after: String::new(),
            indexes: Vec::new(),
            part_ids: Vec::new(),
            removed_count: 0,
            bytes_removed: 0,
            committed_at_ms: 0,
            engine_version: String::new(),
            abandoned_run: None,
            archive_hash: None,
            restores: None,
            operation: None,
        })
    }

    /// The work of prune `n`: writes row `n`, then commits, or refuses when `refuse(n)`.
    fn write_row(conn: &Connection, n: usize, refuse: bool) -> Result<Step, Failure> {
        conn.execute("INSERT INTO row (n) VALUES (?1)", [n as i64])?;
        Ok(if refuse {
            Step::Refuse(Refusal::new(
                BlockedReason::Conflict,
                "refused after writing",
            ))
        } else {
            Step::Commit(receipt(n))
        })
    }

    fn rows(conn: &Connection) -> Vec<i64> {
        let mut stmt = conn.prepare("SELECT n FROM row ORDER BY n").unwrap();
        let rows = stmt.query_map([], |row| row.get(0)).unwrap();
        rows.map(Result::unwrap).collect()
    }

    fn pruned(answer: &Result<Applied, StoreError>) -> bool {
        matches!(
            answer,
            Ok(Applied::Pruned {
                replayed: false,
                ..
            })
        )
    }

    #[test]
    fn a_refusal_after_writing_rolls_back_that_prune_alone() {
        let (_dir, conn) = database();
        let held = LockTimes::default();
        let answers = in_group(Writer::new(&conn, &held), 5, |_, n| {
            write_row(&conn, n, n == 2)
        });
        assert_eq!(answers.len(), 5);
        assert!(answers
            .iter()
            .enumerate()
            .all(|(n, a)| pruned(a) == (n != 2)));
        assert!(
            matches!(&answers[2], Ok(Applied::Refused(r)) if r.reason == BlockedReason::Conflict)
        );
        assert!(conn.is_autocommit(), "the transaction ended");
        assert_eq!(rows(&conn), vec![0, 1, 3, 4]);
        assert_eq!(held.summary().transactions, 1);
    }

    #[test]
    fn a_failure_ends_the_group_after_the_prunes_before_it_commit() {
        let (_dir, conn) = database();
        let held = LockTimes::default();
        let answers = in_group(Writer::new(&conn, &held), 5, |_, n| {
            if n == 3 {
                conn.execute("INSERT INTO row (n) VALUES (3)", [])?;
                conn.execute("INSERT INTO no_such_table VALUES (1)", [])?;
            }
            write_row(&conn, n, false)
        });
        assert_eq!(
            answers.len(),
            4,
            "the prunes after the failure are not taken"
        );
        assert!(answers[..3].iter().all(pruned));
        assert!(
            matches!(&answers[3], Ok(Applied::Refused(r)) if r.reason == BlockedReason::UnsupportedStorage)
        );
        assert_eq!(rows(&conn), vec![0, 1, 2]);
    }

    #[test]
    fn a_transaction_rolled_back_whole_answers_every_prune_that_wrote_in_it() {
        let (_dir, conn) = database();
        let held = LockTimes::default();
        // As SQLite does on a full disk or an I/O error: the whole transaction rolled back.
        let answers = in_group(Writer::new(&conn, &held), 4, |_, n| {
            if n == 2 {
                behind::roll_back(&conn)?;
                return Err(Failure::Store(StoreError::Storage("disk full".into())));
            }
            write_row(&conn, n, false)
        });
        assert_eq!(answers.len(), 3);
        assert!(answers
            .iter()
            .all(|a| matches!(a, Err(StoreError::Storage(_)))));
        assert!(rows(&conn).is_empty());
    }

    #[test]
    fn a_savepoint_that_cannot_be_released_undoes_the_whole_transaction_in_words() {
        let (_dir, conn) = database();
        let held = LockTimes::default();
        let answers = in_group(Writer::new(&conn, &held), 4, |_, n| {
            if n == 1 {
                // The savepoint gone under the group: its RELEASE fails.
                behind::release_savepoint(&conn)?;
            }
            write_row(&conn, n, false)
        });
        assert_eq!(answers.len(), 2);
        assert!(
            matches!(&answers[0], Err(StoreError::Storage(e)) if e.to_string().starts_with("rolled back with the prune after it"))
        );
        match &answers[1] {
            Ok(Applied::Refused(r)) => {
                assert_eq!(r.reason, BlockedReason::UnsupportedStorage);
                assert!(
                    r.detail
                        .starts_with("the storage is not as this version expects"),
                    "{}",
                    r.detail
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(conn.is_autocommit());
        assert!(rows(&conn).is_empty());
    }

    #[test]
    fn a_group_stops_taking_prunes_when_the_lock_budget_is_spent() {
        let (_dir, conn) = database();
        let held = LockTimes::default();
        let slow = LOCK_BUDGET / 4;
        let answers = in_group(Writer::new(&conn, &held), 100, |_, n| {
            std::thread::sleep(slow);
            write_row(&conn, n, false)
        });
        // At the pace of the slowest prune, a prune joins only if it ends within the budget
        // less the commit's reserve: 35 ms of 12.5 ms prunes is 2 at most (sleeps only
        // overrun).
        assert!((1..=2).contains(&answers.len()), "{} prunes", answers.len());
        assert!(answers.iter().all(pruned));
        assert_eq!(rows(&conn).len(), answers.len());
        // The first prune always joins, however slow.
        let answers = in_group(Writer::new(&conn, &held), 3, |_, n| {
            std::thread::sleep(LOCK_BUDGET);
            write_row(&conn, 10 + n, false)
        });
        assert_eq!(answers.len(), 1);
    }

    #[test]
    fn a_group_that_cannot_take_the_write_lock_answers_its_first_prune_alone() {
        let (dir, conn) = database();
        let held = LockTimes::default();
        // Another connection holding the write lock: BEGIN IMMEDIATE is refused at once.
        let other = Connection::open(dir.path().join("group.db")).unwrap();
        let other_held = LockTimes::default();
        let other_lock = WriteTxn::begin(&other, &other_held).unwrap();
        let answers = in_group(Writer::new(&conn, &held), 3, |_, n| {
            write_row(&conn, n, false)
        });
        assert_eq!(answers.len(), 1);
        assert!(
            matches!(&answers[0], Ok(Applied::Refused(r)) if r.reason == BlockedReason::MaintenanceRequired)
        );
        other_lock.rollback();
        assert!(rows(&conn).is_empty());
        assert!(in_group(Writer::new(&conn, &held), 0, |_, n| write_row(
            &conn, n, false
        ))
        .is_empty());
    }
}
