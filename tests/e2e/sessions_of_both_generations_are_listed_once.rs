//! A session with rows in both storage generations is listed once, with each generation's
//! bytes; a session in both session tables is listed once (as OpenCode 2 migrated it); a V2 table this version cannot read
//! is refused in words instead of showing no messages, while OpenCode 1.14's and 1.15's table
//! without `seq`, which holds only agent and model switches, is read as it always was.

use crate::common;

use common::cli::{json, run};
use common::*;
use serde_json::Value;

fn sessions(fx: &Fixture) -> Vec<Value> {
    let out = run(&fx.db, &["--json", "sessions"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(&out).as_array().unwrap().clone()
}

fn listed<'a>(all: &'a [Value], id: &str) -> Vec<&'a Value> {
    all.iter().filter(|s| s["sessionID"] == id).collect()
}

#[test]
fn a_session_with_v1_and_v2_rows_is_listed_once_with_each_generations_bytes() {
    let fx = Fixture::new();
    let v2_bytes = fx.scalar(&format!(
        "SELECT sum(octet_length(data)) FROM session_message WHERE session_id = '{V2_SHARED_SESSION}'"
    ));
    assert!(v2_bytes > 0);
    // A V1 message with one part in the same session.
    fx.exec(&format!(
        "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES \
           ('msg_both_generations', '{V2_SHARED_SESSION}', 1, 1, '{{\"role\":\"user\"}}');
         INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES \
           ('prt_both_generations', 'msg_both_generations', '{V2_SHARED_SESSION}', 1, 1, '{{\"type\":\"text\",\"text\":\"hi\"}}');"
    ));
    let v1_bytes = fx.scalar(&format!(
        "SELECT (SELECT sum(octet_length(data)) FROM message WHERE session_id = '{V2_SHARED_SESSION}') \
              + (SELECT sum(octet_length(data)) FROM part WHERE session_id = '{V2_SHARED_SESSION}')"
    ));
    let events = fx.scalar(&format!(
        "SELECT coalesce(sum(octet_length(data)), 0) FROM event WHERE aggregate_id = '{V2_SHARED_SESSION}'"
    ));
    let all = sessions(&fx);
    let found = listed(&all, V2_SHARED_SESSION);
    assert_eq!(found.len(), 1, "{found:?}");
    let session = found[0];
    assert_eq!(session["storage"], "v1+v2");
    assert_eq!(session["v1Bytes"], v1_bytes);
    assert_eq!(session["v2Bytes"], v2_bytes);
    assert_eq!(session["totalBytes"], v1_bytes + v2_bytes + events);
    let v2_rows = fx.scalar(&format!(
        "SELECT count(*) FROM session_message WHERE session_id = '{V2_SHARED_SESSION}'"
    ));
    assert_eq!(session["messages"], v2_rows + 1);
}

#[test]
fn a_session_in_both_session_tables_is_listed_once_as_opencode_2_migrated_it() {
    let fx = Fixture::new();
    let before = sessions(&fx);
    fx.exec(&format!(
        "CREATE TABLE session_v2 AS SELECT * FROM session WHERE id = '{MANY_TURNS}'"
    ));
    let after = sessions(&fx);
    assert_eq!(after.len(), before.len());
    let (was, now) = (listed(&before, MANY_TURNS), listed(&after, MANY_TURNS));
    assert_eq!((was.len(), now.len()), (1, 1), "{now:?}");
    let (was, now) = (was[0], now[0]);
    // Its V1 rows are the history OpenCode 2 migrated; none has a copy in `session_message`, so
    // each still counts as a message, none as prunable (a V1 prune of a migrated session is
    // refused), and all of them as the migrated copy's bytes.
    for key in ["messages", "totalBytes", "v1Bytes", "title", "directory"] {
        assert_eq!(now[key], was[key], "{key}");
    }
    assert_eq!(now["migratedV1Bytes"], was["v1Bytes"]);
    assert_eq!(was["migratedV1Bytes"], 0);
    assert_eq!(now["prunableBytes"], 0);
    assert!(was["prunableBytes"].as_u64() > Some(0));
}

#[test]
fn a_v2_table_without_seq_is_refused_in_words() {
    let fx = Fixture::new();
    fx.exec("ALTER TABLE session_message RENAME COLUMN seq TO position");
    let rows = fx.scalar("SELECT count(*) FROM session_message");
    assert!(rows > 0);
    let before = fx.file_digest();
    for args in [
        vec!["sessions"],
        vec!["messages", V2_SHARED_SESSION],
        vec!["stats"],
        vec!["clean", "--all"],
    ] {
        let out = run(&fx.db, &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!(
                "error: {}: the V2 table session_message lacks column(s) session_message.seq and \
                 holds {rows} row(s) that are not agent or model switches: a layout this version \
                 does not know, whose messages it cannot read\n",
                fx.db.display()
            ),
            "{args:?}"
        );
    }
    assert_eq!(fx.file_digest(), before);
    fx.skip_audit();
}

#[test]
fn the_v2_table_of_opencode_1_14_and_1_15_holding_only_switches_is_read() {
    let fx = Fixture::new();
    fx.exec(
        "ALTER TABLE session_message RENAME COLUMN seq TO position;
         DELETE FROM session_message WHERE type NOT IN ('agent-switched', 'model-switched');",
    );
    let out = run(&fx.db, &["--json", "sessions"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    fx.skip_audit();
}
