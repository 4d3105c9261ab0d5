//! The entity a snapshot event holds, read from the first bytes of its `data` alone: what
//! `stats`'s estimate reads for every later snapshot of a sampled one, where reading each row
//! whole would read the session's every snapshot.
//!
//! The rule is [`super::compact::entity_sql`]'s: `data.part.id` of a `message.part.updated.1`
//! event, `data.info.id` of the others, the first member of each name (SQLite's `json_extract`
//! takes the first of duplicate names). OpenCode writes the id near the start
//! (`{"sessionID":"ses_…","part":{"id":"prt_…",…`). Where the first bytes do not name a text id
//! plainly (they end first, the JSON around it is unusual, the id is not a string), the answer is `None` and the caller reads the row whole with `entity_sql`. What
//! this cannot see is JSON that breaks after the id: `entity_sql` calls such a row's entity NULL,
//! this names it. Only an estimate reads it so (docs/ARCHITECTURE.md, "The overview").

use struson::reader::{JsonReader, JsonStreamReader, ValueType};

use super::events::PART_UPDATED;

/// Bytes of `data` read to find the entity: the id of every snapshot OpenCode 1.14 to 1.18
/// writes is within its first 200.
pub(crate) const PREFIX_BYTES: usize = 512;

/// The entity of a snapshot event of type `event_type` named in `prefix` (the first bytes of
/// its `data`), or `None` when `prefix` does not name it plainly (see the module's docs).
pub(crate) fn entity_in_prefix(prefix: &[u8], event_type: &str) -> Option<String> {
    let holder = if event_type == PART_UPDATED {
        "part"
    } else {
        "info"
    };
    let mut json = JsonStreamReader::new(prefix);
    json.begin_object().ok()?;
    while json.has_next().ok()? {
        if json.next_name().ok()? != holder {
            json.skip_value().ok()?;
            continue;
        }
        if json.peek().ok()? != ValueType::Object {
            return None;
        }
        json.begin_object().ok()?;
        while json.has_next().ok()? {
            if json.next_name().ok()? != "id" {
                json.skip_value().ok()?;
                continue;
            }
            if json.peek().ok()? != ValueType::String {
                return None;
            }
            // Escapes are decoded, as `json_extract` decodes them.
            return json.next_str().ok().map(str::to_string);
        }
        return None;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;

    /// `entity_sql`'s answer for `data` of `event_type`, from SQLite.
    fn by_sqlite(data: &str, event_type: &str) -> Option<String> {
        let conn = Connection::open_in_memory().expect("memory database");
        let sql = format!(
            "SELECT {} FROM (SELECT ?1 AS data, ?2 AS type)",
            super::super::compact::entity_sql("data")
        );
        conn.query_row(&sql, [data, event_type], |row| {
            row.get::<_, Option<String>>(0)
        })
        .ok()
        .flatten()
    }

    #[test]
    fn a_prefix_names_the_entity_sqlite_reads_from_the_whole_row() {
        let cases = [
            (
                PART_UPDATED,
                r#"{"sessionID":"ses_1","part":{"id":"prt_1","type":"tool","state":{"output":"x"}}}"#,
            ),
            (
                "message.updated.1",
                r#"{"sessionID":"ses_1","info":{"role":"user","time":{"created":1},"id":"msg_9"}}"#,
            ),
            (
                "session.updated.1",
                r#"{"info":{"id":"ses_2","title":"t"},"sessionID":"ses_2"}"#,
            ),
            (
                PART_UPDATED,
                r#"{"part":{"id":"prt_first","id":"prt_second"},"part":{"id":"prt_third"}}"#,
            ),
            (PART_UPDATED, r#"{"part":{"id":"prt_\u0031\n"}}"#),
            (
                PART_UPDATED,
                r#"{"extra":[1,{"part":{"id":"nested"}},"s\"x"],"part":{"meta":{"id":"deep"},"id":"prt_3"}}"#,
            ),
        ];
        for (event_type, data) in cases {
            let expected = by_sqlite(data, event_type);
            assert!(expected.is_some(), "{data}");
            assert_eq!(
                entity_in_prefix(data.as_bytes(), event_type),
                expected,
                "{data}"
            );
        }
    }

    #[test]
    fn a_prefix_that_does_not_name_a_plain_text_id_answers_none() {
        let cases = [
            r#"{"sessionID":"ses_1","part":{"type":"tool","state":{"output":"cut short"#,
            r#"{"part":{"id":42}}"#,
            r#"{"part":"prt_1"}"#,
            r#"{"part":{"type":"text"}}"#,
            r#"["part",{"id":"prt_1"}]"#,
            r#"not json"#,
            "",
        ];
        for data in cases {
            assert_eq!(
                entity_in_prefix(data.as_bytes(), PART_UPDATED),
                None,
                "{data}"
            );
        }
    }

    #[test]
    fn a_prefix_cut_inside_a_multibyte_character_answers_none_or_the_id() {
        let data = r#"{"sessionID":"ses_é","part":{"id":"prt_1"}}"#.as_bytes();
        let cut = data
            .iter()
            .position(|&b| b >= 0x80)
            .expect("a multibyte character")
            + 1;
        assert_eq!(entity_in_prefix(&data[..cut], PART_UPDATED), None);
        assert_eq!(
            entity_in_prefix(data, PART_UPDATED).as_deref(),
            Some("prt_1")
        );
    }
}
