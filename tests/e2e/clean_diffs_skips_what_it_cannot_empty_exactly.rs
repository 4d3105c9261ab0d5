//! `clean --diffs` leaves alone, and counts by reason, a user message whose row it would not
//! rewrite exactly: one over the 16 MiB budget (`oversize`), and one that is JSON but not as
//! OpenCode's `JSON.stringify` writes it (`not_stringified`: other spacing, escapes or number
//! forms); the rows stay byte for byte.

use crate::common;

use common::cli::document;
use common::*;

/// The session and the user message of the coding-work fixture changed here.
const SESSION: &str = "ses_dccba8c3affeymjOpmMRfgOe4F";
const MESSAGE: &str = "msg_2334573cb001yU82oOcbkXSZEH";

fn diffs_after(setup: &str) -> (serde_json::Value, bool) {
    let fx = Fixture::work();
    fx.exec(setup);
    let before: String = fx
        .sql()
        .query_row("SELECT data FROM message WHERE id = ?1", [MESSAGE], |row| {
            row.get(0)
        })
        .expect("the message");
    let report = document(
        &fx.db,
        &["clean", SESSION, "--apply", "--diffs", "--no-compact"],
    );
    let after: String = fx
        .sql()
        .query_row("SELECT data FROM message WHERE id = ?1", [MESSAGE], |row| {
            row.get(0)
        })
        .expect("the message");
    (report["diffs"].clone(), before == after)
}

#[test]
fn a_user_message_over_the_budget_is_skipped_as_oversize() {
    let (diffs, unchanged) = diffs_after(&format!(
        "UPDATE message SET data = json_set(data, '$.summary.diffs[0].patch', \
           printf('%.*c', 17000000, 'y')) WHERE id = '{MESSAGE}'"
    ));
    assert_eq!(
        diffs["skipped"],
        serde_json::json!({"oversize": 1}),
        "{diffs}"
    );
    assert!(unchanged);
}

#[test]
fn a_row_not_written_by_json_stringify_is_skipped_as_not_stringified() {
    let (diffs, unchanged) = diffs_after(&format!(
        "UPDATE message SET data = replace(data, '\"role\":\"user\"', '\"role\": \"user\"') \
         WHERE id = '{MESSAGE}'"
    ));
    assert_eq!(
        diffs["skipped"],
        serde_json::json!({"not_stringified": 1}),
        "{diffs}"
    );
    assert!(unchanged);
}
