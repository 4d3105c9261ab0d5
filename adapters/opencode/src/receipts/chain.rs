//! The receipt hash chain, owned by the receipts: every receipt row carries its place in the
//! chain (`chain_seq`, 1, 2, ...) and a hash over its own stored columns and the previous
//! receipt's hash (`chain_hash`), and the meta table keeps the chain's head. [`extend`] chains
//! each receipt as `super::insert` inserts it. A receipt row deleted or edited after the fact no
//! longer fits the chain, which `crate::audit` checks, reading it with this module's functions.
//!
//! `chain_hash` of receipt n is the lowercase hex SHA-256 of the bytes of `chain_hash` of receipt
//! n - 1 (64 hex characters; nothing for receipt 1) followed by [`link_payload`] of receipt n.
//! Receipts written before the chain existed are chained, oldest row first, by the first receipt
//! written after it (docs/ARCHITECTURE.md, "Audit").

use pruning_engine::revision::sha256_hex;
use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, OptionalExtension, Row};
use serde_json::Value;

// The receipt columns a chain link covers, in the order `link_payload` writes them: every column
// but the link's own (`super::RECEIPT_COLUMNS`, the one list of them). `abandoned_run` is NULL in
// tables made before it. The columns after it (`archive_hash`, `restores`, `operation`) are left
// out of the payload from the end while NULL, so that links made before they existed keep their
// hashes.
use super::RECEIPT_COLUMNS as LINKED_COLUMNS;

/// How many of [`LINKED_COLUMNS`] every link payload holds, NULL or not.
const ALWAYS_LINKED: usize = 15;

/// Which of the receipt columns added after the first layout a table has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OptionalColumns {
    /// `abandoned_run`.
    pub(crate) abandoned: bool,
    /// `archive_hash`.
    pub(crate) archive: bool,
    /// `restores`.
    pub(crate) restores: bool,
    /// `operation`.
    pub(crate) operation: bool,
}

/// Meta key of the chain's head: `{"seq": n, "hash": "<hex>"}` of the newest chained receipt.
pub(crate) const HEAD_KEY: &str = "receipt_chain_head";

/// The chain's head as the meta table records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Head {
    /// `chain_seq` of the newest chained receipt.
    pub(crate) seq: i64,
    /// Its `chain_hash`.
    pub(crate) hash: String,
}

/// The canonical bytes of one receipt row for its chain link: a JSON array of the
/// [`LINKED_COLUMNS`] values exactly as stored (text as a string, an integer or real as a
/// number, NULL as null, a blob as a string of lowercase hex), without the NULLs at its end
/// past the first 15 values.
pub(crate) fn link_payload(values: &[ValueRef<'_>]) -> String {
    let mut values = values;
    while values.len() > ALWAYS_LINKED && matches!(values.last(), Some(ValueRef::Null)) {
        values = &values[..values.len() - 1];
    }
    let array: Vec<Value> = values
        .iter()
        .map(|value| match value {
            ValueRef::Null => Value::Null,
            ValueRef::Integer(n) => Value::from(*n),
            ValueRef::Real(x) => Value::from(*x),
            ValueRef::Text(bytes) => Value::String(String::from_utf8_lossy(bytes).into_owned()),
            ValueRef::Blob(bytes) => Value::String(hex::encode(bytes)),
        })
        .collect();
    Value::Array(array).to_string()
}

/// The chain hash of a receipt whose link payload is `payload`, after a receipt whose chain hash
/// is `previous` (`None` for the first receipt).
pub(crate) fn link_hash(previous: Option<&str>, payload: &str) -> String {
    let mut bytes = Vec::with_capacity(64 + payload.len());
    bytes.extend_from_slice(previous.unwrap_or_default().as_bytes());
    bytes.extend_from_slice(payload.as_bytes());
    sha256_hex(&bytes)
}

/// The SELECT list of [`LINKED_COLUMNS`] for a receipt table that may lack the columns added
/// after its first layout (NULL in their place).
pub(crate) fn linked_select(optional: OptionalColumns) -> String {
    let present = [true; 14].into_iter().chain([
        optional.abandoned,
        optional.archive,
        optional.restores,
        optional.operation,
    ]);
    LINKED_COLUMNS
        .iter()
        .zip(present)
        .map(|(name, present)| if present { *name } else { "NULL" })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The [`link_payload`] of a row selected with [`linked_select`] starting at column `first`.
pub(crate) fn payload_of(row: &Row<'_>, first: usize) -> rusqlite::Result<String> {
    let values = (first..first + LINKED_COLUMNS.len())
        .map(|i| row.get_ref(i))
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(link_payload(&values))
}

/// Whether the receipt table has the chain columns.
pub(crate) fn has_chain_columns(conn: &Connection) -> rusqlite::Result<bool> {
    crate::cached::query_row(
        conn,
        "SELECT count(*) FROM pragma_table_info('session_prune_receipt') \
         WHERE name IN ('chain_seq', 'chain_hash') COLLATE NOCASE",
        [],
        |row| row.get::<_, i64>(0),
    )
    .map(|n| n == 2)
}

/// What the meta table holds under [`HEAD_KEY`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Recorded {
    /// No head: no receipt was chained yet, or the row was deleted.
    Absent,
    /// A value that is not `{"seq": n, "hash": "<hex>"}` text; the words say what it is.
    Unreadable(String),
    /// The head.
    Head(Head),
}

/// The head the meta table records, if any. `Ok(None)` also for a value that cannot be read as
/// one (the audit reports that, see [`recorded`]; a new link then starts after the newest
/// chained row).
pub(crate) fn head(conn: &Connection) -> rusqlite::Result<Option<Head>> {
    Ok(match recorded(conn)? {
        Recorded::Head(head) => Some(head),
        Recorded::Absent | Recorded::Unreadable(_) => None,
    })
}

/// What the meta table records under [`HEAD_KEY`], of whatever type it was stored as.
pub(crate) fn recorded(conn: &Connection) -> rusqlite::Result<Recorded> {
    let mut stmt = conn.prepare_cached("SELECT value FROM session_prune_meta WHERE key = ?1")?;
    let mut rows = stmt.query([HEAD_KEY])?;
    let Some(row) = rows.next()? else {
        return Ok(Recorded::Absent);
    };
    Ok(match row.get_ref(0)? {
        ValueRef::Text(bytes) => match std::str::from_utf8(bytes).ok().and_then(parse_head) {
            Some(head) => Recorded::Head(head),
            None => Recorded::Unreadable("it is not {\"seq\", \"hash\"} JSON".to_string()),
        },
        ValueRef::Blob(_) => Recorded::Unreadable("it is a blob, not text".to_string()),
        ValueRef::Integer(_) | ValueRef::Real(_) => {
            Recorded::Unreadable("it is a number, not text".to_string())
        }
        ValueRef::Null => Recorded::Unreadable("it is NULL".to_string()),
    })
}

/// A head from its meta text.
pub(crate) fn parse_head(text: &str) -> Option<Head> {
    let value: Value = serde_json::from_str(text).ok()?;
    Some(Head {
        seq: value.get("seq")?.as_i64()?,
        hash: value.get("hash")?.as_str()?.to_string(),
    })
}

/// Chains the receipt row just inserted (`rowid`) after the chain's head and records the new
/// head. Call inside the write transaction, right after inserting the receipt.
///
/// A receipt table made without the chain columns gets them here; when the meta table records
/// no head either (the first receipt since the chain was introduced), every row without a place
/// is chained first, oldest row first. Otherwise only the new row is chained: a row without a
/// place in a table that has the columns was inserted behind the engine's back (or the head was
/// deleted to hide one), and stays without one for the audit to report. Where the head is gone
/// or unreadable, the new link continues after the newest chained row.
pub(crate) fn extend(
    conn: &Connection,
    optional: OptionalColumns,
    rowid: i64,
) -> rusqlite::Result<()> {
    let introduced = !has_chain_columns(conn)?;
    if introduced {
        conn.execute_batch(
            "ALTER TABLE session_prune_receipt ADD COLUMN chain_seq INTEGER;
             ALTER TABLE session_prune_receipt ADD COLUMN chain_hash TEXT;",
        )?;
    }
    let recorded = head(conn)?;
    let (which, only): (&str, Option<i64>) = if introduced && recorded.is_none() {
        ("chain_seq IS NULL", None)
    } else {
        ("rowid = ?1", Some(rowid))
    };
    let mut tip = match recorded {
        Some(head) => Some(head),
        // No readable head: continue after the newest chained row, if any.
        None => crate::cached::query_row(
            conn,
            "SELECT chain_seq, chain_hash FROM session_prune_receipt \
             WHERE typeof(chain_seq) = 'integer' AND typeof(chain_hash) = 'text' \
             ORDER BY chain_seq DESC LIMIT 1",
            [],
            |row| {
                Ok(Head {
                    seq: row.get(0)?,
                    hash: row.get(1)?,
                })
            },
        )
        .optional()?,
    };
    let sql = format!(
        "SELECT rowid, {} FROM session_prune_receipt WHERE {which} ORDER BY rowid",
        linked_select(optional)
    );
    let unchained: Vec<(i64, String)> = {
        let mut stmt = conn.prepare_cached(&sql)?;
        let read = |row: &Row<'_>| Ok((row.get(0)?, payload_of(row, 1)?));
        let rows = match only {
            Some(rowid) => stmt.query_map([rowid], read)?,
            None => stmt.query_map([], read)?,
        };
        rows.collect::<rusqlite::Result<_>>()?
    };
    for (rowid, payload) in unchained {
        // A head edited to the largest place has no next one: the link takes that place again,
        // for the audit to report, rather than overflow.
        let seq = tip.as_ref().map_or(1, |head| head.seq.saturating_add(1));
        let hash = link_hash(tip.as_ref().map(|head| head.hash.as_str()), &payload);
        crate::cached::execute(
            conn,
            "UPDATE session_prune_receipt SET chain_seq = ?1, chain_hash = ?2 WHERE rowid = ?3",
            params![seq, hash, rowid],
        )?;
        tip = Some(Head { seq, hash });
    }
    if let Some(head) = tip {
        let value = serde_json::json!({ "seq": head.seq, "hash": head.hash }).to_string();
        crate::cached::execute(
            conn,
            "INSERT INTO session_prune_meta (key, value) VALUES (?1, ?2) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            params![HEAD_KEY, value],
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_payload_keeps_each_value_as_stored() {
        let values = [
            ValueRef::Text(b"r1"),
            ValueRef::Integer(7),
            ValueRef::Null,
            ValueRef::Text(b"[1,2]"),
            ValueRef::Blob(&[0xab, 0x01]),
        ];
        assert_eq!(link_payload(&values), r#"["r1",7,null,"[1,2]","ab01"]"#);
    }

    #[test]
    fn link_payload_leaves_out_only_the_null_columns_at_its_end_past_the_first_15() {
        let ones = ["1"; 15].join(",");
        let mut values = vec![ValueRef::Integer(1); LINKED_COLUMNS.len()];
        values[14] = ValueRef::Null;
        values[15] = ValueRef::Null;
        values[16] = ValueRef::Null;
        values[17] = ValueRef::Null;
        assert_eq!(
            link_payload(&values),
            format!("[{},null]", ["1"; 14].join(","))
        );
        values[14] = ValueRef::Integer(1);
        values[15] = ValueRef::Text(b"ab");
        assert_eq!(link_payload(&values), format!("[{ones},\"ab\"]"));
        values[15] = ValueRef::Null;
        values[16] = ValueRef::Text(b"r");
        values[17] = ValueRef::Null;
        assert_eq!(link_payload(&values), format!("[{ones},null,\"r\"]"));
        values[16] = ValueRef::Null;
        values[17] = ValueRef::Text(b"{}");
        assert_eq!(
            link_payload(&values),
            format!("[{ones},null,null,\"{{}}\"]")
        );
    }

    #[test]
    fn link_hash_covers_the_previous_hash() {
        let first = link_hash(None, "[1]");
        assert_eq!(first, sha256_hex(b"[1]"));
        let second = link_hash(Some(&first), "[2]");
        assert_eq!(second, sha256_hex(format!("{first}[2]").as_bytes()));
        assert_ne!(link_hash(Some(&second), "[2]"), second);
    }

    #[test]
    fn a_head_is_read_back_from_its_meta_text() {
        assert_eq!(
            parse_head(r#"{"seq":3,"hash":"ab"}"#),
            Some(Head {
                seq: 3,
                hash: "ab".into()
            })
        );
        assert_eq!(parse_head(r#"{"seq":"3","hash":"ab"}"#), None);
        assert_eq!(parse_head("not json"), None);
    }
}
