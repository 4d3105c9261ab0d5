//! `outline` in chunks of 512 rows with checkpoints: a client that sends back the checkpoints
//! it holds gets entries only for the chunks that changed and for the live tail (the rows
//! parsed are counted); a page holds at most 16,384 entries and its cursor pins the horizon, so
//! paging while messages are appended neither skips nor repeats; V2 digests are CodeNomad's
//! (SHA-256 of the JSON of each row's id, type, seq, update time and length).

use std::sync::Arc;

use pruning_engine::browse::{KnownCheckpoint, OutlineRequest};
use pruning_opencode::{Browser, StoreOptions};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::common::app::App;
use crate::common::browse::{
    append_v1, append_v2, call, v1_ids, v2_ids, V2_SESSION, V2_TOOL_MESSAGE,
};
use crate::common::{preview, request, Fixture, MANY_TURNS, TURN1};

fn browser(fx: &Fixture) -> Arc<Browser> {
    Browser::open(&fx.db, StoreOptions::default()).expect("open for browsing")
}

/// One outline page read in process, with the rows it parsed for entries.
fn outline(browser: &Arc<Browser>, session: &str, known: &[KnownCheckpoint]) -> (Value, u64) {
    let request = OutlineRequest {
        session_id: session.into(),
        cursor: None,
        after: -1,
        known: known.to_vec(),
    };
    let (result, parsed) = browser.lease().unwrap().outline_counted(&request).unwrap();
    (serde_json::to_value(result).unwrap(), parsed)
}

fn known(page: &Value) -> Vec<KnownCheckpoint> {
    page["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| KnownCheckpoint {
            after: c["after"].as_i64().unwrap(),
            through: c["through"].as_u64().unwrap(),
            digest: c["digest"].as_str().unwrap().into(),
            changed: None,
        })
        .collect()
}

fn shape(page: &Value) -> Vec<(i64, u64, bool)> {
    page["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["after"].as_i64().unwrap(),
                c["through"].as_u64().unwrap(),
                c["changed"].as_bool().unwrap(),
            )
        })
        .collect()
}

fn seqs(page: &Value) -> Vec<u64> {
    page["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect()
}

#[test]
fn v1_revalidation_parses_only_the_changed_chunks_and_the_tail() {
    let fx = Fixture::new();
    let conn = fx.sql();
    append_v1(&conn, MANY_TURNS, TURN1, 1970);
    let all = v1_ids(&conn, MANY_TURNS);
    assert_eq!(all.len(), 2000);
    let browser = browser(&fx);

    let (first, parsed) = outline(&browser, MANY_TURNS, &[]);
    assert_eq!(first["status"], "outline");
    assert_eq!(
        shape(&first),
        [
            (-1, 511, true),
            (511, 1023, true),
            (1023, 1535, true),
            (1535, 1999, true)
        ]
    );
    assert_eq!(
        (first["total"].clone(), first["cursor"].clone()),
        (json!(2000), Value::Null)
    );
    assert_eq!(parsed, 2000);
    let entries = first["entries"].as_array().unwrap();
    for (i, entry) in entries.iter().enumerate() {
        assert_eq!(entry["id"], all[i]);
        assert_eq!(entry["seq"], i as u64);
    }
    // The fixture's turn 1 is a bash call with reasoning; the first message is the user's.
    let turn1 = entries.iter().find(|e| e["id"] == TURN1).unwrap();
    assert_eq!(
        turn1,
        &json!({"id": TURN1, "seq": 1, "type": "assistant", "tools": 1, "reasoning": 1, "toolName": "bash"})
    );
    assert_eq!(
        entries[0],
        json!({"id": all[0], "seq": 0, "type": "user", "tools": 0, "reasoning": 0})
    );

    // Nothing changed: only the live tail is parsed again.
    let (again, parsed) = outline(&browser, MANY_TURNS, &known(&first));
    assert_eq!(
        shape(&again),
        [
            (-1, 511, false),
            (511, 1023, false),
            (1023, 1535, false),
            (1535, 1999, true)
        ]
    );
    assert_eq!(parsed, 464);
    assert_eq!(seqs(&again), (1536..2000).collect::<Vec<_>>());

    // One message appended: the tail grows by one, nothing else is parsed.
    append_v1(&conn, MANY_TURNS, TURN1, 1);
    let (appended, parsed) = outline(&browser, MANY_TURNS, &known(&first));
    assert_eq!(
        shape(&appended),
        [
            (-1, 511, false),
            (511, 1023, false),
            (1023, 1535, false),
            (1535, 2000, true)
        ]
    );
    assert_eq!(parsed, 465);
    assert_eq!(appended["total"], 2001);

    // A prune inside the second chunk changes its digest: that chunk and the tail.
    let pruned = &all[600];
    let engine = fx.engine();
    let (revision, indexes) = preview(&engine, MANY_TURNS, pruned);
    engine
        .prune(&request(MANY_TURNS, pruned, &revision, &indexes))
        .expect("prune");
    drop(engine);
    let (after_prune, parsed) = outline(&browser, MANY_TURNS, &known(&appended));
    assert_eq!(
        shape(&after_prune),
        [
            (-1, 511, false),
            (511, 1023, true),
            (1023, 1535, false),
            (1535, 2000, true)
        ]
    );
    assert_eq!(parsed, 512 + 465);
    let entry = after_prune["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == *pruned)
        .unwrap();
    assert_eq!(
        entry,
        &json!({"id": pruned, "seq": 600, "type": "assistant", "tools": 0, "reasoning": 0})
    );
}

/// CodeNomad's digest of V2 rows, computed here from the rows themselves.
fn codenomad_digest(conn: &rusqlite::Connection, after: i64, through: i64) -> String {
    let mut stmt = conn
        .prepare(
            "SELECT id, type, seq, time_updated, length(CAST(data AS BLOB)) FROM session_message
             WHERE session_id = ?1 AND seq > ?2 AND seq <= ?3 ORDER BY seq LIMIT 512",
        )
        .unwrap();
    let rows: Vec<Value> = stmt
        .query_map(rusqlite::params![V2_SESSION, after, through], |r| {
            Ok(json!({
                "id": r.get::<_, String>(0)?,
                "type": r.get::<_, String>(1)?,
                "seq": r.get::<_, i64>(2)?,
                "time_updated": r.get::<_, Option<i64>>(3)?,
                "bytes": r.get::<_, i64>(4)?,
            }))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    hex::encode(Sha256::digest(serde_json::to_string(&rows).unwrap()))
}

#[test]
fn v2_pages_of_16384_keep_their_horizon_while_rows_are_appended() {
    let fx = Fixture::new();
    let conn = fx.sql();
    append_v2(&conn, V2_TOOL_MESSAGE, 17_000);
    let all = v2_ids(&conn, V2_SESSION);
    let app = App::start(&fx);
    let body = |extra: Value| {
        let mut body = json!({"sessionID": V2_SESSION});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    let (status, first) = call(&app, "outline", &body(json!({})));
    assert_eq!(status, 200, "{first}");
    let checkpoints = first["checkpoints"].as_array().unwrap();
    assert_eq!(checkpoints.len(), 32);
    assert_eq!(first["entries"].as_array().unwrap().len(), 16_384);
    assert_eq!(first["total"], all.len());
    let maximum: i64 = fx.scalar(&format!(
        "SELECT max(seq) FROM session_message WHERE session_id = '{V2_SESSION}'"
    ));
    let cursor = first["cursor"].clone();
    assert_eq!(cursor["through"], maximum);
    assert_eq!(cursor["after"], checkpoints[31]["through"]);
    for checkpoint in checkpoints {
        let (after, through) = (
            checkpoint["after"].as_i64().unwrap(),
            checkpoint["through"].as_i64().unwrap(),
        );
        assert_eq!(
            checkpoint["digest"],
            codenomad_digest(&conn, after, through)
        );
    }

    append_v2(&conn, V2_TOOL_MESSAGE, 7);
    let (_, second) = call(&app, "outline", &body(json!({"cursor": cursor})));
    assert_eq!(second["cursor"], Value::Null);
    assert_eq!(second["total"], all.len(), "the horizon holds");
    let ids: Vec<String> = first["entries"]
        .as_array()
        .unwrap()
        .iter()
        .chain(second["entries"].as_array().unwrap())
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, all, "two pages: every row once, in order");

    // The next scan from the start sees the appended rows.
    // Sent back as they came, `changed` and all.
    let (_, next) = call(
        &app,
        "outline",
        &body(json!({"known": first["checkpoints"]})),
    );
    assert_eq!(next["total"], all.len() + 7);
    assert!(next["checkpoints"].as_array().unwrap()[..31]
        .iter()
        .all(|c| c["changed"] == false));
    assert!(next["entries"].as_array().unwrap().is_empty());
}

#[test]
fn checkpoints_that_do_not_follow_each_other_are_a_conflict() {
    let fx = Fixture::new();
    let app = App::start(&fx);
    let digest = "0".repeat(64);
    let gap = json!({"sessionID": MANY_TURNS, "known": [
        {"after": -1, "through": 5, "digest": digest},
        {"after": 6, "through": 9, "digest": digest},
    ]});
    assert_eq!(
        call(&app, "outline", &gap),
        (200, json!({"status": "blocked", "reason": "conflict"}))
    );
    let empty =
        json!({"sessionID": MANY_TURNS, "known": [{"after": 3, "through": 3, "digest": digest}]});
    assert_eq!(
        call(&app, "outline", &empty),
        (200, json!({"status": "blocked", "reason": "conflict"}))
    );
    let too_many: Vec<Value> = (0..513)
        .map(|i| json!({"after": i - 1, "through": i, "digest": digest}))
        .collect();
    let (status, answer) = call(
        &app,
        "outline",
        &json!({"sessionID": MANY_TURNS, "known": too_many}),
    );
    assert_eq!(
        (status, answer["field"].clone()),
        (400, json!("known")),
        "{answer}"
    );
    let result = browser(&fx)
        .lease()
        .unwrap()
        .outline(&OutlineRequest {
            session_id: "ses_missing".into(),
            cursor: None,
            after: -1,
            known: Vec::new(),
        })
        .unwrap();
    assert_eq!(
        serde_json::to_value(result).unwrap(),
        json!({"status": "blocked", "reason": "not_deletable"})
    );
}
