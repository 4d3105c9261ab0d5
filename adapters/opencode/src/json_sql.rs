//! SQL that walks the entries of OpenCode's JSON rows (a V2 row's `content`, a summary's
//! `diffs`) with one parse of each row.
//!
//! `json_each` given text parses it, and an entry's `value` it yields is text again, which
//! every function given it (`json_extract` of the entry's `type`) parses once more: a row's
//! largest entries, its tool outputs, were parsed three times. Here the row is checked
//! (`json_valid`) and turned into JSONB once ([`parsed`]) and walked by `jsonb_each`
//! ([`entries`]), whose entries are JSONB: a field of one ([`entry_field`]) is found without a
//! parse, and its text ([`entry_text`], what the figures measure) is rendered from it, the
//! same minified text `json_each` yields.

/// SQL for the JSONB of the JSON text `data` (an SQL expression), or of `{}` when it is not
/// valid JSON, so that a malformed row yields no entries instead of failing the statement.
pub fn parsed(data: &str) -> String {
    format!("(CASE WHEN json_valid({data}) THEN jsonb({data}) ELSE jsonb('{{}}') END)")
}

/// SQL for the table of the entries at `path` (such as `$.content`) of the JSON text `data`,
/// aliased `alias`, for a `FROM` clause: `jsonb_each` over [`parsed`]`(data)`. Its `type` column
/// is as `json_each`'s; its `value` is JSONB for an object or an array (read it with
/// [`entry_field`] and [`entry_text`]).
pub fn entries(data: &str, path: &str, alias: &str) -> String {
    format!("jsonb_each({}, '{path}') {alias}", parsed(data))
}

/// SQL for the field at `path` (such as `$.type`) of the object entry aliased `alias`
/// ([`entries`]), as `json_extract` gives it (SQL NULL when there is none). Only for an entry
/// whose `type` is `object`: on any other it is an error (test the type first).
pub fn entry_field(alias: &str, path: &str) -> String {
    format!("json_extract({alias}.value, '{path}')")
}

/// SQL for the minified JSON text of the object entry aliased `alias` ([`entries`]): what
/// `json_each` would have yielded as its `value`.
pub fn entry_text(alias: &str) -> String {
    format!("json({alias}.value)")
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::{entries, entry_field, entry_text};

    /// The tool entries of `data`'s `content` as `(count, bytes)`, the way the figures read them.
    fn tool_entries(conn: &Connection, data: &str) -> (i64, i64) {
        let sql = format!(
            "SELECT count(*), coalesce(sum(octet_length({})), 0) \
             FROM (SELECT ?1 AS data) r, {} \
             WHERE j.type = 'object' AND {} = 'tool'",
            entry_text("j"),
            entries("r.data", "$.content", "j"),
            entry_field("j", "$.type")
        );
        conn.query_row(&sql, [data], |row| Ok((row.get(0)?, row.get(1)?)))
            .expect("query")
    }

    /// The same figure read the plain way: `json_each` over the text, the entry's text parsed.
    fn tool_entries_plainly(conn: &Connection, data: &str) -> (i64, i64) {
        conn.query_row(
            "SELECT count(*), coalesce(sum(octet_length(j.value)), 0) \
             FROM (SELECT ?1 AS data) r, \
                  json_each(CASE WHEN json_valid(r.data) THEN r.data ELSE '{}' END, '$.content') j \
             WHERE j.type = 'object' AND json_extract(j.value, '$.type') = 'tool'",
            [data],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .expect("query")
    }

    #[test]
    fn entries_are_found_by_their_field_and_measured_as_their_minified_text() {
        let conn = Connection::open_in_memory().expect("open");
        let data = r#"{"content":[{"type":"text","text":"hi"},{"type":"tool","output":"a\"b\u00e9"},"x",3,null,{"type":"tool","k":{"type":"text"},"n":1.50}]}"#;
        let first = r#"{"type":"tool","output":"a\"b\u00e9"}"#.len() as i64;
        let second = r#"{"type":"tool","k":{"type":"text"},"n":1.50}"#.len() as i64;
        assert_eq!(tool_entries(&conn, data), (2, first + second));
        assert_eq!(tool_entries_plainly(&conn, data), (2, first + second));
    }

    #[test]
    fn the_entries_of_an_object_are_its_values() {
        let conn = Connection::open_in_memory().expect("open");
        let data = r#"{"content":{"a b":{"type":"tool"},"c":{"type":"tool"},"e":{"type":"text"}}}"#;
        let expected = (2, 2 * r#"{"type":"tool"}"#.len() as i64);
        assert_eq!(tool_entries(&conn, data), expected);
        assert_eq!(tool_entries_plainly(&conn, data), expected);
    }

    #[test]
    fn a_row_that_is_not_json_has_no_entries_and_fails_nothing() {
        let conn = Connection::open_in_memory().expect("open");
        for data in [
            r#"{"content":[{"type":"tool""#,
            "not json",
            "",
            "{content:[{type:'tool'}]}",
        ] {
            assert_eq!(tool_entries(&conn, data), (0, 0), "{data}");
            assert_eq!(tool_entries_plainly(&conn, data), (0, 0), "{data}");
        }
    }

    #[test]
    fn whitespace_in_a_row_is_not_counted_in_an_entry() {
        let conn = Connection::open_in_memory().expect("open");
        let data = "{ \"content\" : [ { \"type\" : \"tool\" ,\n \"n\" : 1 } ] }";
        let expected = (1, r#"{"type":"tool","n":1}"#.len() as i64);
        assert_eq!(tool_entries(&conn, data), expected);
        assert_eq!(tool_entries_plainly(&conn, data), expected);
    }
}
