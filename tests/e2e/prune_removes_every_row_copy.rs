//! Pruning a real OpenCode 1.18.34 message removes the tool output and reasoning from every row
//! that held a copy (`part`, `event` snapshots), appends OpenCode's own removal events, and
//! leaves everything else as it was.

use crate::common;

use common::*;

#[test]
fn prune_removes_tool_and_reasoning_canaries_from_every_row() {
    let fx = Fixture::new();
    assert_eq!(fx.rows_containing("part", "TOOL_CANARY_T05"), 1);
    assert_eq!(fx.rows_containing("part", "REASONING_CANARY_T05"), 1);
    assert_eq!(fx.rows_containing("event", "TOOL_CANARY_T05"), 5);
    assert_eq!(fx.rows_containing("event", "REASONING_CANARY_T05"), 1);
    let parts_before = fx.scalar("SELECT count(*) FROM part");
    let seq_before = fx.scalar(&format!(
        "SELECT seq FROM event_sequence WHERE aggregate_id = '{MANY_TURNS}'"
    ));
    let events_before = fx.scalar("SELECT count(*) FROM event");

    let engine = fx.engine();
    let (revision, indexes) = preview(&engine, MANY_TURNS, TURN5);
    assert_eq!(indexes, vec![1, 2]);
    let outcome = engine
        .prune(&request(MANY_TURNS, TURN5, &revision, &indexes))
        .unwrap();
    let (message_id, revision_after, removed) = pruned(&outcome.result);
    assert_eq!(message_id, TURN5);
    assert_eq!(removed, 2);
    let (preview_after, parts_after) = preview(&engine, MANY_TURNS, TURN5);
    assert_eq!(preview_after, revision_after);
    assert!(parts_after.is_empty());
    drop(engine);

    for table in ["part", "event", "session_message", "message"] {
        assert_eq!(fx.rows_containing(table, "TOOL_CANARY_T05"), 0, "{table}");
        assert_eq!(
            fx.rows_containing(table, "REASONING_CANARY_T05"),
            0,
            "{table}"
        );
    }
    assert_eq!(fx.scalar("SELECT count(*) FROM part"), parts_before - 2);
    // Every snapshot of the two parts goes (8, some from before the output existed), and two
    // removal events are appended.
    assert_eq!(
        fx.scalar("SELECT count(*) FROM event"),
        events_before - 8 + 2
    );
    assert_eq!(
        fx.scalar(&format!(
            "SELECT seq FROM event_sequence WHERE aggregate_id = '{MANY_TURNS}'"
        )),
        seq_before + 2
    );
    let conn = fx.sql();
    let mut stmt = conn
        .prepare(
            "SELECT id, seq, data FROM event WHERE type = 'message.part.removed.1' \
             AND aggregate_id = ?1 ORDER BY seq",
        )
        .unwrap();
    let removed_events: Vec<(String, i64, String)> = stmt
        .query_map([MANY_TURNS], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let receipt = outcome.receipt.expect("receipt");
    assert_eq!(removed_events.len(), 2);
    for (i, (id, seq, data)) in removed_events.iter().enumerate() {
        assert_eq!(id.len(), 30);
        assert!(id.starts_with("evt_"));
        assert_eq!(*seq, seq_before + 1 + i as i64);
        assert_eq!(
            data,
            &format!(
                r#"{{"sessionID":"{MANY_TURNS}","messageID":"{TURN5}","partID":"{}"}}"#,
                receipt.part_ids[i]
            )
        );
    }
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
    let fk: i64 = conn
        .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(fk, 0);
}

#[test]
fn receipt_records_ids_revisions_and_sizes_but_no_content() {
    let fx = Fixture::new();
    let part_bytes = fx.scalar(&format!(
        "SELECT sum(length(CAST(data AS BLOB))) FROM part WHERE message_id = '{TURN5}' \
         AND json_extract(data, '$.type') IN ('tool', 'reasoning')"
    ));
    let engine = fx.engine();
    let (revision, indexes) = preview(&engine, MANY_TURNS, TURN5);
    let outcome = engine
        .prune(&request(MANY_TURNS, TURN5, &revision, &indexes))
        .unwrap();
    let receipt = outcome.receipt.unwrap();
    drop(engine);

    let stored = receipts(&fx);
    assert_eq!(stored, vec![receipt.clone()]);
    assert_eq!(receipt.session_id, MANY_TURNS);
    assert_eq!(receipt.message_id, TURN5);
    assert_eq!(receipt.revision_before, revision);
    assert_eq!(receipt.indexes, vec![1, 2]);
    assert_eq!(receipt.removed_count, 2);
    assert_eq!(Some(receipt.intent_id), outcome.intent_id);
    assert_eq!(receipt.engine_version, env!("CARGO_PKG_VERSION"));
    assert!(
        receipt.bytes_removed > part_bytes as u64,
        "snapshot bytes are counted too"
    );
    let row: String = fx
        .sql()
        .query_row(
            "SELECT group_concat(part_ids || indexes || revision_after) FROM session_prune_receipt",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(!row.contains("CANARY"));
}

#[test]
fn aborted_message_is_complete_and_its_reasoning_prunes() {
    // The "fixture: aborted" session: the last assistant message has MessageAbortedError, time.completed
    // set and no finish; its parts are step-start, reasoning, text.
    let session = "ses_dd99265d6ffesYDLpK0nfK8NIQ";
    let aborted = "msg_2266d9d92001kWl89Uxu7rAlc4";
    let fx = Fixture::new();
    let engine = fx.engine();
    let (revision, indexes) = preview(&engine, session, aborted);
    assert_eq!(indexes, vec![1]);
    let outcome = engine
        .prune(&request(session, aborted, &revision, &indexes))
        .unwrap();
    assert_eq!(pruned(&outcome.result).2, 1);
    drop(engine);
    assert_eq!(
        fx.rows_containing("part", "PARTIAL_TEXT_CANARY"),
        1,
        "text is kept"
    );
    assert_eq!(
        fx.scalar(&format!(
            "SELECT count(*) FROM part WHERE message_id = '{aborted}'"
        )),
        2
    );
}

#[test]
fn a_snapshot_filed_under_another_sessions_aggregate_is_removed_and_counted() {
    let fx = Fixture::new();
    let other = KILLED_MID_STREAM;
    // A full copy of turn 5's tool snapshot filed under another session's aggregate, at that
    // aggregate's next seq (its bookkeeping stays consistent).
    fx.exec(&format!(
        "INSERT INTO event (id, aggregate_id, seq, type, data) \
           SELECT 'evt_foreign_copy', '{other}', \
                  (SELECT seq + 1 FROM event_sequence WHERE aggregate_id = '{other}'), type, data \
           FROM event WHERE aggregate_id = '{MANY_TURNS}' AND type = 'message.part.updated.1' \
             AND instr(data, 'TOOL_CANARY_T05') > 0 ORDER BY seq DESC LIMIT 1; \
         UPDATE event_sequence SET seq = seq + 1 WHERE aggregate_id = '{other}';"
    ));
    let copy_bytes =
        fx.scalar("SELECT length(CAST(data AS BLOB)) FROM event WHERE id = 'evt_foreign_copy'");
    assert!(copy_bytes > 0);
    let other_seq = fx.scalar(&format!(
        "SELECT seq FROM event_sequence WHERE aggregate_id = '{other}'"
    ));

    let engine = fx.engine();
    let (revision, indexes) = preview(&engine, MANY_TURNS, TURN5);
    let request = request(MANY_TURNS, TURN5, &revision, &indexes);
    let planned = match pruning_engine::dry_run(engine.store(), &request).unwrap() {
        Ok(pruning_engine::DryRun::Plan { plan, .. }) => plan,
        other => panic!("{other:?}"),
    };
    let predicted = engine
        .store()
        .freed_bytes(MANY_TURNS, TURN5, &planned.remove, planned.bytes)
        .unwrap();
    let outcome = engine.prune(&request).unwrap();
    let receipt = outcome.receipt.expect("receipt");
    drop(engine);

    assert_eq!(
        fx.scalar("SELECT count(*) FROM event WHERE id = 'evt_foreign_copy'"),
        0
    );
    assert_eq!(fx.rows_containing("event", "TOOL_CANARY_T05"), 0);
    assert_eq!(receipt.bytes_removed, predicted);
    // The copy's bytes are counted: without it the prune frees exactly that much less.
    let plain = Fixture::new();
    let (_, outcome) = prune_turn5_once(&plain);
    assert_eq!(
        receipt.bytes_removed,
        outcome.receipt.expect("receipt").bytes_removed + copy_bytes as u64
    );
    // The other aggregate's bookkeeping is untouched.
    assert_eq!(
        fx.scalar(&format!(
            "SELECT seq FROM event_sequence WHERE aggregate_id = '{other}'"
        )),
        other_seq
    );
}

/// Files a full copy of turn 5's newest tool snapshot under `other`'s aggregate, at its next
/// seq, as `evt_foreign_copy`; `top_level` names the top-level `sessionID` too.
fn file_a_foreign_copy(fx: &Fixture, other: &str, top_level: &str) {
    fx.exec(&format!(
        "INSERT INTO event (id, aggregate_id, seq, type, data) \
           SELECT 'evt_foreign_copy', '{other}', \
                  (SELECT seq + 1 FROM event_sequence WHERE aggregate_id = '{other}'), type, \
                  json_set(data, '$.sessionID', '{top_level}') \
           FROM event WHERE aggregate_id = '{MANY_TURNS}' AND type = 'message.part.updated.1' \
             AND instr(data, 'TOOL_CANARY_T05') > 0 ORDER BY seq DESC LIMIT 1; \
         UPDATE event_sequence SET seq = seq + 1 WHERE aggregate_id = '{other}';"
    ));
}

#[test]
fn a_foreign_copy_naming_its_aggregate_at_the_top_level_is_still_found_by_its_part() {
    let fx = Fixture::new();
    file_a_foreign_copy(&fx, KILLED_MID_STREAM, KILLED_MID_STREAM);
    let (_, outcome) = prune_turn5_once(&fx);
    assert!(outcome.receipt.is_some());
    assert_eq!(
        fx.scalar("SELECT count(*) FROM event WHERE id = 'evt_foreign_copy'"),
        0
    );
    assert_eq!(fx.rows_containing("event", "TOOL_CANARY_T05"), 0);
}

#[test]
fn a_long_running_engine_finds_a_foreign_copy_written_at_a_rowid_its_own_prune_freed() {
    let fx = Fixture::new();
    // Turn 1's snapshots at the top of the table, so that its prune frees the top rowids.
    fx.exec(&format!(
        "INSERT INTO event (id, aggregate_id, seq, type, data) \
           SELECT 'evt_top_' || e.rowid, e.aggregate_id, \
                  (SELECT seq FROM event_sequence WHERE aggregate_id = '{MANY_TURNS}') \
                    + row_number() OVER (ORDER BY e.seq), e.type, e.data \
           FROM event e WHERE e.aggregate_id = '{MANY_TURNS}' AND e.type = 'message.part.updated.1' \
             AND instr(e.data, '{TURN1}') > 0 \
             AND json_extract(e.data, '$.part.type') IN ('tool', 'reasoning'); \
         UPDATE event_sequence SET seq = (SELECT max(seq) FROM event WHERE aggregate_id = '{MANY_TURNS}') \
           WHERE aggregate_id = '{MANY_TURNS}';"
    ));
    let top_before = fx.scalar("SELECT max(rowid) FROM event");
    let engine = fx.engine();
    let (revision, indexes) = preview(&engine, MANY_TURNS, TURN1);
    let first = engine
        .prune(&request(MANY_TURNS, TURN1, &revision, &indexes))
        .unwrap();
    assert!(first.receipt.is_some());
    assert!(fx.scalar("SELECT max(rowid) FROM event") < top_before);

    // OpenCode files a foreign copy meanwhile: SQLite hands it a rowid the prune freed.
    file_a_foreign_copy(&fx, KILLED_MID_STREAM, MANY_TURNS);
    let copy = fx.scalar("SELECT rowid FROM event WHERE id = 'evt_foreign_copy'");
    assert!(copy <= top_before, "the copy reuses a freed rowid");
    // And more events after it, so that the table's top is back where it was.
    for n in 0..=(top_before - copy) {
        fx.exec(&format!(
            "INSERT INTO event (id, aggregate_id, seq, type, data)                SELECT 'evt_later_{n}', '{KILLED_MID_STREAM}', seq + 1, 'session.updated.1', '{{}}'                FROM event_sequence WHERE aggregate_id = '{KILLED_MID_STREAM}';              UPDATE event_sequence SET seq = seq + 1 WHERE aggregate_id = '{KILLED_MID_STREAM}';"
        ));
    }
    assert!(fx.scalar("SELECT max(rowid) FROM event") > top_before);
    let (revision, indexes) = preview(&engine, MANY_TURNS, TURN5);
    let second = engine
        .prune(&request(MANY_TURNS, TURN5, &revision, &indexes))
        .unwrap();
    assert!(second.receipt.is_some());
    drop(engine);
    assert_eq!(
        fx.scalar("SELECT count(*) FROM event WHERE id = 'evt_foreign_copy'"),
        0
    );
    assert_eq!(fx.rows_containing("event", "TOOL_CANARY_T05"), 0);
}

#[test]
fn a_snapshot_that_is_both_local_and_foreign_is_counted_once() {
    let fx = Fixture::new();
    // One of turn 5's own snapshots names another session as the part's owner.
    fx.exec(&format!(
        "UPDATE event SET data = json_set(data, '$.part.sessionID', '{KILLED_MID_STREAM}') \
         WHERE id = (SELECT id FROM event WHERE aggregate_id = '{MANY_TURNS}' \
                       AND type = 'message.part.updated.1' AND instr(data, 'TOOL_CANARY_T05') > 0 \
                     ORDER BY seq LIMIT 1)"
    ));
    let parts: i64 = fx.scalar(&format!(
        "SELECT sum(length(CAST(data AS BLOB))) FROM part WHERE message_id = '{TURN5}' \
           AND json_extract(data, '$.type') IN ('tool', 'reasoning')"
    ));
    let snapshots: i64 = fx.scalar(&format!(
        "SELECT sum(length(CAST(data AS BLOB))) FROM event WHERE type = 'message.part.updated.1' \
           AND json_extract(data, '$.part.id') IN (SELECT id FROM part WHERE message_id = '{TURN5}' \
             AND json_extract(data, '$.type') IN ('tool', 'reasoning'))"
    ));
    let (_, outcome) = prune_turn5_once(&fx);
    let receipt = outcome.receipt.expect("receipt");
    assert_eq!(receipt.bytes_removed, (parts + snapshots) as u64);
    assert_eq!(fx.rows_containing("event", "TOOL_CANARY_T05"), 0);
}

/// Snapshots of turn 5's tool part whose JSON SQLite reads as naming that part although they
/// are not as `JSON.stringify` writes them: a key repeated (SQLite reads the first) or a key
/// holding a lone UTF-16 surrogate escape. Each holds the tool's output; the prune removes them
/// and counts them as its dry run does.
#[test]
fn a_snapshot_whose_json_repeats_or_oddly_escapes_a_key_is_removed() {
    let fx = Fixture::new();
    let variants = [
        (
            "evt_repeated_part",
            r#"'{"sessionID":"' || aggregate_id || '","part":' || json_extract(data, '$.part') || ',"part":{"id":"prt_not_a_part"}}'"#,
        ),
        (
            "evt_repeated_id",
            r#"'{"sessionID":"' || aggregate_id || '","part":{"id":"' || json_extract(data, '$.part.id') || '","id":"prt_not_a_part","state":' || json_extract(data, '$.part.state') || '}}'"#,
        ),
        (
            "evt_surrogate_part_key",
            r#"'{"sessionID":"' || aggregate_id || '","part":{"id":"' || json_extract(data, '$.part.id') || '","\ud800":0,"state":' || json_extract(data, '$.part.state') || '}}'"#,
        ),
        (
            "evt_surrogate_top_key",
            r#"'{"\udc00":0,"sessionID":"' || aggregate_id || '","part":' || json_extract(data, '$.part') || '}'"#,
        ),
    ];
    let tool_part: String = fx
        .sql()
        .query_row(
            "SELECT id FROM part WHERE message_id = ?1 AND json_extract(data, '$.type') = 'tool'",
            [TURN5],
            |row| row.get(0),
        )
        .unwrap();
    for (id, data) in variants {
        fx.exec(&format!(
            "INSERT INTO event (id, aggregate_id, seq, type, data) \
               SELECT '{id}', aggregate_id, \
                      (SELECT seq + 1 FROM event_sequence WHERE aggregate_id = '{MANY_TURNS}'), \
                      type, {data} \
               FROM event WHERE aggregate_id = '{MANY_TURNS}' AND type = 'message.part.updated.1' \
                 AND instr(data, 'TOOL_CANARY_T05') > 0 ORDER BY seq DESC LIMIT 1; \
             UPDATE event_sequence SET seq = seq + 1 WHERE aggregate_id = '{MANY_TURNS}';"
        ));
        // As SQLite reads it: valid JSON, a snapshot of the tool part, holding its output.
        let read: (i64, String, i64) = fx
            .sql()
            .query_row(
                "SELECT json_valid(data), json_extract(data, '$.part.id'), \
                        instr(data, 'TOOL_CANARY_T05') > 0 FROM event WHERE id = ?1",
                [id],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .unwrap();
        assert_eq!(read, (1, tool_part.clone(), 1), "{id}");
    }

    let engine = fx.engine();
    let (revision, indexes) = preview(&engine, MANY_TURNS, TURN5);
    let request = request(MANY_TURNS, TURN5, &revision, &indexes);
    let planned = match pruning_engine::dry_run(engine.store(), &request).unwrap() {
        Ok(pruning_engine::DryRun::Plan { plan, .. }) => plan,
        other => panic!("{other:?}"),
    };
    let predicted = engine
        .store()
        .freed_bytes(MANY_TURNS, TURN5, &planned.remove, planned.bytes)
        .unwrap();
    let receipt = engine.prune(&request).unwrap().receipt.expect("receipt");
    drop(engine);

    for (id, _) in variants {
        assert_eq!(
            fx.scalar(&format!("SELECT count(*) FROM event WHERE id = '{id}'")),
            0,
            "{id}"
        );
    }
    assert_eq!(fx.rows_containing("event", "TOOL_CANARY_T05"), 0);
    assert_eq!(receipt.bytes_removed, predicted);
}

/// Appends `n` `session.updated.1` events of `aggregate` at its next seqs, as `evt_{tag}_{i}`.
fn append_plain_events(fx: &Fixture, aggregate: &str, tag: &str, n: i64) {
    for i in 0..n {
        fx.exec(&format!(
            "INSERT INTO event (id, aggregate_id, seq, type, data) \
               SELECT 'evt_{tag}_{i}', '{aggregate}', seq + 1, 'session.updated.1', '{{}}' \
               FROM event_sequence WHERE aggregate_id = '{aggregate}'; \
             UPDATE event_sequence SET seq = seq + 1 WHERE aggregate_id = '{aggregate}';"
        ));
    }
}

/// Another connection deletes the newest event rows (as OpenCode deletes a session with its
/// events), then files a foreign copy, which SQLite gives a freed rowid, and more events after
/// it: a long-running engine's next prune still finds and deletes the copy.
#[test]
fn a_long_running_engine_finds_a_foreign_copy_written_at_a_rowid_another_connection_freed() {
    let fx = Fixture::new();
    let engine = fx.engine();
    let (revision, indexes) = preview(&engine, MANY_TURNS, TURN1);
    let first = engine
        .prune(&request(MANY_TURNS, TURN1, &revision, &indexes))
        .unwrap();
    assert!(first.receipt.is_some());
    // OpenCode appends events; the engine looks at them with its next request (refused here).
    append_plain_events(&fx, KILLED_MID_STREAM, "doomed", 3);
    let stale = request(MANY_TURNS, TURN5, &"0".repeat(64), &[1]);
    assert!(engine.prune(&stale).unwrap().refusal.is_some());
    let top_before = fx.scalar("SELECT max(rowid) FROM event");

    fx.exec("DELETE FROM event WHERE id LIKE 'evt_doomed_%'");
    file_a_foreign_copy(&fx, KILLED_MID_STREAM, MANY_TURNS);
    let copy = fx.scalar("SELECT rowid FROM event WHERE id = 'evt_foreign_copy'");
    assert!(copy <= top_before, "the copy reuses a freed rowid");
    append_plain_events(&fx, KILLED_MID_STREAM, "later", top_before - copy + 1);
    assert!(fx.scalar("SELECT max(rowid) FROM event") > top_before);

    let (revision, indexes) = preview(&engine, MANY_TURNS, TURN5);
    let second = engine
        .prune(&request(MANY_TURNS, TURN5, &revision, &indexes))
        .unwrap();
    assert!(second.receipt.is_some());
    drop(engine);
    assert_eq!(
        fx.scalar("SELECT count(*) FROM event WHERE id = 'evt_foreign_copy'"),
        0
    );
    assert_eq!(fx.rows_containing("event", "TOOL_CANARY_T05"), 0);
}
