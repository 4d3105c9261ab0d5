//! A prune that a clean planned in the same process (docs/ARCHITECTURE.md, "Bulk work") writes
//! exactly what a prune of the same request that reads the message in its own transaction
//! writes: the same outcome, the same receipt (part ids, bytes, revisions, indexes), the same
//! rows left, the same events. Each case runs the same plans and prunes twice on two copies of
//! one database: once planned on the engine's own store (its prunes take the plans), once
//! planned on another connection (its prunes find no plan and read the message again).

use crate::common;

use common::archive::{fixture_named, FIXTURES};
use common::*;
use pruning_engine::{BlockedReason, Engine, PruneRequest, PruneResult, SessionStore};
use pruning_opencode::{CleanPolicy, OpenCodeStore, Planned};
use sha2::{Digest, Sha256};

/// A clean's policy that keeps no turn.
fn every_turn() -> CleanPolicy {
    CleanPolicy {
        keep_last_turns: 0,
        ..CleanPolicy::default()
    }
}

/// An engine over `fx` with no quiet period.
fn engine(fx: &Fixture) -> Engine<OpenCodeStore> {
    fx.engine_with(fx.store(0))
}

/// The store a clean plans on: the engine's own (`planned`), or another connection's.
fn planner<'a>(
    engine: &'a Engine<OpenCodeStore>,
    other: &'a OpenCodeStore,
    planned: bool,
) -> &'a OpenCodeStore {
    if planned {
        engine.store()
    } else {
        other
    }
}

/// The prune requests a clean with `policy` plans on `store`, in the clean's order.
fn plan_all(store: &OpenCodeStore, policy: &CleanPolicy) -> Vec<PruneRequest> {
    let now = now_ms();
    let mut requests = Vec::new();
    for session in store.clean_sessions().unwrap() {
        let listing = store
            .clean_listing(&session, policy.keep_last_turns)
            .unwrap();
        for message in &listing.ids {
            if let Planned::Prune { request, .. } =
                store.clean_plan(&session, message, policy, now).unwrap()
            {
                requests.push(request);
            }
        }
    }
    requests
}

/// The plan of one message, which must be a prune.
fn plan_one(
    store: &OpenCodeStore,
    session: &str,
    message: &str,
    policy: &CleanPolicy,
) -> PruneRequest {
    match store
        .clean_plan(session, message, policy, now_ms())
        .unwrap()
    {
        Planned::Prune { request, .. } => request,
        other => panic!("{message} is not planned for a prune: {other:?}"),
    }
}

/// What a batch of prunes answered, request by request: the result, whether it was a retry,
/// and the refusal's reason.
fn answers(
    results: Vec<Result<pruning_engine::PruneOutcome, pruning_engine::EngineError>>,
) -> Vec<String> {
    results
        .into_iter()
        .map(|result| match result {
            Ok(outcome) => format!(
                "{:?} retried={} refusal={:?}",
                outcome.result,
                outcome.retried,
                outcome.refusal.map(|r| r.reason)
            ),
            Err(error) => format!("error: {error}"),
        })
        .collect()
}

/// Everything a prune writes, as it can be compared between two copies: the receipts (without
/// their ids and times), the part rows (with a digest of their text), and the events (without
/// their ids, which carry the time).
fn written(fx: &Fixture) -> (Vec<String>, Vec<String>, Vec<String>) {
    let store = fx.store(0);
    let mut receipts: Vec<String> = store
        .receipts(None)
        .unwrap()
        .into_iter()
        .map(|r| {
            format!(
                "{} {} {} -> {} {:?} {:?} {} {}",
                r.session_id,
                r.message_id,
                r.revision_before,
                r.revision_after,
                r.indexes,
                r.part_ids,
                r.removed_count,
                r.bytes_removed
            )
        })
        .collect();
    receipts.sort();
    let conn = fx.sql();
    let rows = |sql: &str| -> Vec<String> {
        let mut stmt = conn.prepare(sql).unwrap();
        let rows = stmt
            .query_map([], |row| {
                let fields: Vec<String> = (0..row.as_ref().column_count())
                    .map(|i| match row.get_ref(i).unwrap() {
                        rusqlite::types::ValueRef::Null => "NULL".to_string(),
                        rusqlite::types::ValueRef::Integer(n) => n.to_string(),
                        rusqlite::types::ValueRef::Real(x) => x.to_string(),
                        rusqlite::types::ValueRef::Text(t) | rusqlite::types::ValueRef::Blob(t) => {
                            if t.len() > 64 {
                                hex::encode(Sha256::digest(t))
                            } else {
                                String::from_utf8_lossy(t).into_owned()
                            }
                        }
                    })
                    .collect();
                Ok(fields.join("|"))
            })
            .unwrap();
        rows.collect::<Result<_, _>>().unwrap()
    };
    let parts = rows("SELECT id, message_id, data FROM part ORDER BY id, message_id, data");
    let events = if fx.has_table("event") {
        rows("SELECT aggregate_id, seq, type, data FROM event ORDER BY aggregate_id, seq, data")
    } else {
        Vec::new()
    };
    (receipts, parts, events)
}

/// What a case does with a fixture, its engine and the store it plans on; its answers.
type Case<'a> = dyn Fn(&Fixture, &Engine<OpenCodeStore>, &OpenCodeStore) -> Vec<String> + 'a;

/// Runs `case` on two copies of a database made by `make`: planned on the engine's own store,
/// and planned on another connection; asserts that both wrote the same, and returns the
/// planned copy's answers.
fn same_with_and_without_plans(make: &dyn Fn() -> Fixture, case: &Case<'_>) -> Vec<String> {
    let mut seen = Vec::new();
    // Without plans first: a claim of `case` that fails only with plans fails on the second run.
    for planned in [false, true] {
        let fx = make();
        let engine = engine(&fx);
        let other = fx.store(0);
        let planner = planner(&engine, &other, planned);
        let answers =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| case(&fx, &engine, planner)))
                .unwrap_or_else(|panic| {
                    eprintln!(
                        "failed in the run {}",
                        if planned {
                            "with plans"
                        } else {
                            "without plans"
                        }
                    );
                    std::panic::resume_unwind(panic)
                });
        drop(engine);
        seen.push((answers, written(&fx)));
    }
    let planned = seen.pop().unwrap();
    let unplanned = seen.pop().unwrap();
    assert_eq!(planned.0, unplanned.0, "answers");
    assert_eq!(planned.1 .0, unplanned.1 .0, "receipts");
    assert_eq!(planned.1 .1, unplanned.1 .1, "part rows");
    assert_eq!(planned.1 .2, unplanned.1 .2, "events");
    planned.0
}

/// The id of the first part of `message` of type `kind`.
fn part_of_type(fx: &Fixture, message: &str, kind: &str) -> String {
    fx.sql()
        .query_row(
            "SELECT id FROM part WHERE message_id = ?1 AND json_extract(data, '$.type') = ?2 \
             ORDER BY id LIMIT 1",
            [message, kind],
            |row| row.get(0),
        )
        .unwrap()
}

/// Every fixture release, cleaned whole in one batch, and in batches of one message (plan,
/// prune, plan the next): the same answers and the same database as without plans.
#[test]
fn every_fixture_is_cleaned_the_same_in_batches_of_any_size() {
    for name in FIXTURES {
        for batch in [usize::MAX, 1] {
            let answers =
                same_with_and_without_plans(&|| fixture_named(name), &|_, engine, planner| {
                    let policy = every_turn();
                    if batch == 1 {
                        let mut answers = Vec::new();
                        for session in planner.clean_sessions().unwrap() {
                            let listing = planner.clean_listing(&session, 0).unwrap();
                            for message in &listing.ids {
                                if let Planned::Prune { request, .. } = planner
                                    .clean_plan(&session, message, &policy, now_ms())
                                    .unwrap()
                                {
                                    answers.extend(self::answers(engine.prune_many(&[request])));
                                }
                            }
                        }
                        answers
                    } else {
                        answers(engine.prune_many(&plan_all(planner, &policy)))
                    }
                });
            assert!(
                answers.iter().any(|a| a.starts_with("Pruned")),
                "{name}: nothing pruned: {answers:?}"
            );
        }
    }
}

/// A receipt insert that fails (the receipt table accepts one removed part only) rolls back
/// the prunes of two-part messages between planned one-part prunes: each answer and the
/// database are as without plans.
#[test]
fn a_rolled_back_receipt_in_the_batch_leaves_the_rest_as_without_plans() {
    let answers = same_with_and_without_plans(
        &|| {
            let fx = Fixture::new();
            fx.receipt_table_accepting("removed_count < 2");
            fx
        },
        &|_, engine, planner| {
            let tools_only = CleanPolicy {
                reasoning: false,
                ..every_turn()
            };
            // Two-part prunes (refused at their receipt) between one-part prunes.
            let mut requests = plan_all(planner, &every_turn());
            requests.extend(plan_all(planner, &tools_only));
            answers(engine.prune_many(&requests))
        },
    );
    assert!(
        answers.iter().any(|a| a.starts_with("Pruned")),
        "{answers:?}"
    );
    assert!(
        answers.iter().any(|a| !a.starts_with("Pruned")),
        "{answers:?}"
    );
}

/// OpenCode rewrites one planned message's tool part and adds a part to another between the
/// plans and their batch: those two are refused (`conflict`) and keep what OpenCode wrote; the
/// rest are pruned.
/// In WAL mode (OpenCode's) and in rollback-journal mode.
#[test]
fn opencode_writes_between_the_plans_and_their_batch_are_seen() {
    for mode in ["WAL", "DELETE"] {
        let make = || {
            let fx = Fixture::new();
            let set: String = fx
                .sql()
                .query_row(&format!("PRAGMA journal_mode = {mode}"), [], |row| {
                    row.get(0)
                })
                .unwrap();
            assert!(set.eq_ignore_ascii_case(mode));
            fx
        };
        opencode_writes_between_the_plans_and_their_batch_are_seen_in(&make);
    }
}

fn opencode_writes_between_the_plans_and_their_batch_are_seen_in(make: &dyn Fn() -> Fixture) {
    let answers = same_with_and_without_plans(make, &|fx, engine, planner| {
        let requests = plan_all(planner, &every_turn());
        let rewritten = part_of_type(fx, TURN5, "tool");
        fx.exec(&format!(
            "UPDATE part SET data = json_set(data, '$.state.output', 'OPENCODE_REWROTE') \
               WHERE id = '{rewritten}';
             INSERT INTO part (id, message_id, session_id, time_created, time_updated, data)
               VALUES ('prt_zzzzzzzzzzzzzzzzzzzzzzzzzz', '{TURN1}', '{MANY_TURNS}', 1, 1,
                       '{{\"type\":\"text\",\"text\":\"OPENCODE_ADDED\"}}')"
        ));
        let answers = answers(engine.prune_many(&requests));
        assert_eq!(fx.rows_containing("part", "OPENCODE_REWROTE"), 1);
        assert_eq!(fx.rows_containing("part", "OPENCODE_ADDED"), 1);
        let conflicts = answers.iter().filter(|a| a.contains("Conflict")).count();
        assert_eq!(conflicts, 2, "{answers:?}");
        answers
    });
    assert!(
        answers.iter().any(|a| a.starts_with("Pruned")),
        "{answers:?}"
    );
}

/// OpenCode writes between the batch's first prune and the prune of a message planned with
/// it: that prune reads the message again and is refused.
#[test]
fn opencode_writes_after_the_first_prune_of_a_batch_are_seen() {
    same_with_and_without_plans(&Fixture::new, &|fx, engine, planner| {
        let first = plan_one(planner, MANY_TURNS, TURN1, &every_turn());
        let second = plan_one(planner, MANY_TURNS, TURN5, &every_turn());
        let mut answers = answers(engine.prune_many(&[first]));
        let rewritten = part_of_type(fx, TURN5, "reasoning");
        fx.exec(&format!(
            "UPDATE part SET data = json_set(data, '$.text', 'OPENCODE_REWROTE') \
               WHERE id = '{rewritten}'"
        ));
        let digest = fx.file_digest();
        answers.extend(self::answers(engine.prune_many(&[second])));
        assert!(answers[0].starts_with("Pruned"), "{answers:?}");
        assert!(answers[1].contains("Conflict"), "{answers:?}");
        assert_eq!(fx.file_digest(), digest);
        answers
    });
}

/// A prune of the message between its plan and the clean's prune (of its tool part only, as a
/// `prune` or `prune-batch` would) takes the plan: the clean's request then meets another
/// revision and is refused (`conflict`), and the reasoning part stays.
#[test]
fn another_prune_of_the_message_after_its_plan_makes_the_planned_request_conflict() {
    same_with_and_without_plans(&Fixture::new, &|fx, engine, planner| {
        let request = plan_one(planner, MANY_TURNS, TURN5, &every_turn());
        let tools_only = CleanPolicy {
            reasoning: false,
            ..every_turn()
        };
        let tool = plan_one(planner, MANY_TURNS, TURN5, &tools_only);
        let mut answers = answers(engine.prune_many(&[tool]));
        let digest = fx.file_digest();
        answers.extend(self::answers(engine.prune_many(&[request])));
        assert!(answers[0].starts_with("Pruned"), "{answers:?}");
        assert_eq!(
            answers[1],
            format!(
                "{:?} retried=false refusal=Some({:?})",
                PruneResult::Blocked {
                    reason: BlockedReason::Conflict
                },
                BlockedReason::Conflict
            )
        );
        assert_eq!(fx.file_digest(), digest);
        assert_eq!(fx.rows_containing("part", "REASONING_CANARY_T05"), 1);
        answers
    });
}

/// The same message planned twice with two policies, then both requests pruned in either
/// order: the second plan replaces the first, and each prune answers as without plans.
#[test]
fn one_message_planned_twice_prunes_as_without_plans_in_either_order() {
    for tools_first in [true, false] {
        same_with_and_without_plans(&Fixture::new, &|_, engine, planner| {
            let tools_only = CleanPolicy {
                reasoning: false,
                ..every_turn()
            };
            let all = plan_one(planner, MANY_TURNS, TURN5, &every_turn());
            let tool = plan_one(planner, MANY_TURNS, TURN5, &tools_only);
            let order = if tools_first {
                [tool, all]
            } else {
                [all, tool]
            };
            let mut answers = Vec::new();
            for request in order {
                answers.extend(self::answers(engine.prune_many(&[request])));
            }
            assert!(answers[0].starts_with("Pruned"), "{answers:?}");
            assert!(answers[1].contains("Conflict"), "{answers:?}");
            answers
        });
    }
}

/// A dry run of a planned request (as `clean --dry-run` does) takes the plan; a later apply
/// of the same request, planned again or not, prunes as without plans.
#[test]
fn a_dry_run_then_an_apply_in_the_same_process_prunes_as_without_plans() {
    for plan_again in [true, false] {
        same_with_and_without_plans(&Fixture::new, &|_, engine, planner| {
            let requests = plan_all(planner, &every_turn());
            let mut answers: Vec<String> = requests
                .iter()
                .map(|request| {
                    format!(
                        "{:?}",
                        pruning_engine::dry_run(engine.store(), request)
                            .unwrap()
                            .map(|found| match found {
                                pruning_engine::DryRun::Plan { plan, .. } => format!("{plan:?}"),
                                pruning_engine::DryRun::AlreadyPruned(r) => r.message_id,
                            })
                    )
                })
                .collect();
            // Every request was planned as a prune, so every dry run found a plan.
            assert!(
                !answers.is_empty() && answers.iter().all(|a| a.starts_with("Ok(")),
                "{answers:?}"
            );
            let requests = if plan_again {
                plan_all(planner, &every_turn())
            } else {
                requests
            };
            let pruned = self::answers(engine.prune_many(&requests));
            assert_eq!(pruned.len(), requests.len());
            assert!(pruned.iter().all(|a| a.starts_with("Pruned")), "{pruned:?}");
            answers.extend(pruned);
            answers
        });
    }
}

/// OpenCode moves a planned message to another session before its prune: the planned request
/// is refused (`not_deletable`), and a request naming the new session is pruned.
#[test]
fn a_message_moved_to_another_session_after_its_plan_is_not_pruned_under_the_old_one() {
    same_with_and_without_plans(&Fixture::new, &|fx, engine, planner| {
        let request = plan_one(planner, MANY_TURNS, TURN5, &every_turn());
        fx.exec(&format!(
            "UPDATE message SET session_id = '{KILLED_MID_TOOL}' WHERE id = '{TURN5}';
             UPDATE part SET session_id = '{KILLED_MID_TOOL}' WHERE message_id = '{TURN5}';"
        ));
        let mut moved = request.clone();
        moved.session_id = KILLED_MID_TOOL.to_string();
        let mut answers = answers(engine.prune_many(&[request]));
        answers.extend(self::answers(engine.prune_many(&[moved])));
        assert!(answers[0].contains("NotDeletable"), "{answers:?}");
        answers
    });
}

/// A message pruned from another process of this tool (another connection) between its plan
/// and its prune: the planned request meets its receipt and answers as a retry would, or is
/// refused; nothing is written twice.
#[test]
fn a_prune_from_another_connection_after_the_plan_is_not_repeated() {
    same_with_and_without_plans(&Fixture::new, &|fx, engine, planner| {
        // Another journal holds the other process's prune: the audit would say so.
        fx.skip_audit();
        // A first prune records the database's identity, which the other process adopts.
        let first = plan_one(planner, MANY_TURNS, TURN1, &every_turn());
        let mut answers = answers(engine.prune_many(&[first]));
        let request = plan_one(planner, MANY_TURNS, TURN5, &every_turn());
        {
            // A copy of this journal as it was: the same database's (a journal of no database
            // is refused beside receipts).
            let copy = fx.dir.path().join("elsewhere.journal");
            std::fs::copy(&fx.journal, &copy).unwrap();
            let elsewhere =
                Engine::open(fx.store(0), pruning_engine::Journal::open(&copy).unwrap()).unwrap();
            let first = elsewhere.prune(&request).unwrap();
            assert!(matches!(first.result, PruneResult::Pruned { .. }));
        }
        let digest = fx.file_digest();
        answers.extend(self::answers(engine.prune_many(&[request])));
        assert_eq!(fx.file_digest(), digest, "{answers:?}");
        answers
    });
}

/// A `VACUUM` between the plans and their batch, run by the store itself (which commits
/// nothing another connection would see, yet rewrites every page and may renumber rowids) or
/// by another connection: the batch prunes as without plans.
#[test]
fn a_vacuum_between_the_plans_and_their_batch_prunes_as_without_plans() {
    for own in [true, false] {
        same_with_and_without_plans(&Fixture::new, &|fx, engine, planner| {
            let requests = plan_all(planner, &every_turn());
            if own {
                engine.store().vacuum(false).unwrap();
            } else {
                fx.exec("VACUUM");
            }
            let pruned = answers(engine.prune_many(&requests));
            assert!(
                !pruned.is_empty() && pruned.iter().all(|a| a.starts_with("Pruned")),
                "{pruned:?}"
            );
            pruned
        });
    }
}

/// A message held in both generations (a V2 row beside its V1 rows, in its own session or in
/// another one), where OpenCode 1.18's V2 rows are read-only: the clean lists it twice and
/// plans its V1 rows; the batch prunes as without plans.
#[test]
fn a_message_held_in_both_generations_prunes_as_without_plans() {
    for session in [MANY_TURNS, KILLED_MID_TOOL] {
        let make = || {
            let fx = Fixture::new();
            fx.exec(&format!(
                "INSERT INTO session_message (id, session_id, type, seq, time_created, time_updated, data)
                   SELECT '{TURN5}', '{session}', 'assistant', 1000,
                          (SELECT time_created FROM message WHERE id = '{TURN5}'),
                          (SELECT time_created FROM message WHERE id = '{TURN5}'), data
                   FROM session_message WHERE id = 'msg_2266dabb2001y39t0IapYwvrbI'"
            ));
            fx
        };
        let answers = same_with_and_without_plans(&make, &|_, engine, planner| {
            answers(engine.prune_many(&plan_all(planner, &every_turn())))
        });
        assert!(answers.iter().any(|a| a.contains(TURN5)), "{answers:?}");
    }
}

/// A `part` table rebuilt without its primary key (as a damaged or hand-repaired file may have
/// it) where a text part of the message shares its row id with the planned tool part: the
/// prune removes the tool part's row and keeps the text, as the prune without a plan does
/// (which deletes each row matching the text it read).
#[test]
fn a_row_sharing_the_planned_part_id_is_kept() {
    let make = || {
        let fx = Fixture::new();
        let tool = part_of_type(&fx, TURN5, "tool");
        fx.exec(&format!(
            "CREATE TABLE part_copy AS SELECT * FROM part; DROP TABLE part;
             ALTER TABLE part_copy RENAME TO part;
             CREATE INDEX part_message_id_id_idx ON part (message_id, id);
             INSERT INTO part (id, message_id, session_id, time_created, time_updated, data)
               VALUES ('{tool}', '{TURN5}', '{MANY_TURNS}', 1, 1,
                       '{{\"type\":\"text\",\"text\":\"SHARED_ID_TEXT\"}}');"
        ));
        fx
    };
    same_with_and_without_plans(&make, &|fx, engine, planner| {
        let request = plan_one(planner, MANY_TURNS, TURN5, &every_turn());
        let answers = answers(engine.prune_many(&[request]));
        assert_eq!(
            fx.rows_containing("part", "SHARED_ID_TEXT"),
            1,
            "{answers:?}"
        );
        answers
    });
}

/// `clean --apply` (which plans each batch on the store it prunes with) on a `part` table
/// rebuilt without its primary key, where a text part shares its row id with a tool part it
/// prunes: the text part stays, as `clean` promises for every text.
#[test]
fn clean_keeps_a_text_part_sharing_its_row_id_with_a_pruned_tool_part() {
    use common::cli::{assert_exit, json, run};
    for batch in ["1", "1000"] {
        let fx = Fixture::new();
        let tool = part_of_type(&fx, TURN5, "tool");
        fx.exec(&format!(
            "CREATE TABLE part_copy AS SELECT * FROM part; DROP TABLE part;
             ALTER TABLE part_copy RENAME TO part;
             CREATE INDEX part_message_id_id_idx ON part (message_id, id);
             INSERT INTO part (id, message_id, session_id, time_created, time_updated, data)
               VALUES ('{tool}', '{TURN5}', '{MANY_TURNS}', 1, 1,
                       '{{\"type\":\"text\",\"text\":\"SHARED_ID_TEXT\"}}');"
        ));
        let out = run(
            &fx.db,
            &[
                "--json",
                "clean",
                MANY_TURNS,
                "--keep-last-turns",
                "0",
                "--batch-size",
                batch,
                "--apply",
            ],
        );
        assert_exit(&out, 0);
        let report = json(&out);
        assert_eq!(report["status"], "cleaned", "{report}");
        assert_eq!(
            fx.rows_containing("part", "SHARED_ID_TEXT"),
            1,
            "--batch-size {batch}: {report}"
        );
    }
}
