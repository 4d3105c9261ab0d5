//! The engine's own tables inside the OpenCode database: the receipt of every committed prune,
//! their hash chain ([`chain`]: each receipt is chained as it is inserted), and the database
//! identity the journal is bound to.
//!
//! Both are created by the first prune, inside its transaction, so a refused prune leaves the
//! database without them. OpenCode's migrations ignore tables they do not know. A receipt holds
//! ids, revisions, indexes, counts and times, never pruned content.

use pruning_engine::{BlockedReason, Receipt, Refusal};
use rusqlite::{Connection, OptionalExtension, Row};
use uuid::Uuid;

use super::txn::WriteTxn;
use chain::OptionalColumns;

pub(crate) mod chain;

/// Receipt table name.
pub const RECEIPT_TABLE: &str = "session_prune_receipt";
/// Meta table name (key/value; key `database_id`).
pub const META_TABLE: &str = "session_prune_meta";

const CREATE: &str = "
CREATE TABLE IF NOT EXISTS session_prune_meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS session_prune_receipt (
  id TEXT PRIMARY KEY,
  request_key TEXT NOT NULL UNIQUE,
  intent_id TEXT NOT NULL,
  session_id TEXT NOT NULL,
  message_id TEXT NOT NULL,
  storage TEXT NOT NULL,
  revision_before TEXT NOT NULL,
  revision_after TEXT NOT NULL,
  indexes TEXT NOT NULL,
  part_ids TEXT NOT NULL,
  removed_count INTEGER NOT NULL,
  bytes_removed INTEGER NOT NULL,
  time_committed INTEGER NOT NULL,
  engine_version TEXT NOT NULL,
  abandoned_run TEXT,
  chain_seq INTEGER,
  chain_hash TEXT,
  archive_hash TEXT,
  restores TEXT,
  operation TEXT
);
CREATE INDEX IF NOT EXISTS session_prune_receipt_session_idx
  ON session_prune_receipt (session_id, time_committed);
";

/// The index that finds the restore of a receipt (made with the first restore).
const RESTORES_INDEX: &str = "CREATE INDEX IF NOT EXISTS session_prune_receipt_restores_idx \
     ON session_prune_receipt (restores) WHERE restores IS NOT NULL";

/// Every column of a receipt row but its place in the chain (`chain_seq`, `chain_hash`), in the
/// order a chain link covers them ([`chain::link_payload`]): the one list of them. The first 14
/// are in every receipt table; the last four ([`ABANDONED_COLUMN`], [`ARCHIVE_COLUMN`],
/// [`RESTORES_COLUMN`], [`OPERATION_COLUMN`]) were added later, and a table made before them
/// lacks them until a receipt needs them.
pub(crate) const RECEIPT_COLUMNS: [&str; 18] = [
    "id",
    "request_key",
    "intent_id",
    "session_id",
    "message_id",
    STORAGE_COLUMN,
    "revision_before",
    "revision_after",
    "indexes",
    "part_ids",
    "removed_count",
    "bytes_removed",
    "time_committed",
    "engine_version",
    ABANDONED_COLUMN,
    ARCHIVE_COLUMN,
    RESTORES_COLUMN,
    OPERATION_COLUMN,
];

/// The receipt column naming the storage generation a prune wrote (`v1`, `v2`): in
/// [`RECEIPT_COLUMNS`], not in [`SELECTED_COLUMNS`] (a receipt read back does not carry it).
const STORAGE_COLUMN: &str = "storage";

/// Where [`STORAGE_COLUMN`] is in [`RECEIPT_COLUMNS`].
const STORAGE_AT: usize = 5;

/// How many of [`SELECTED_COLUMNS`] every receipt table has (the rest are the optional ones).
const ALWAYS_SELECTED: usize = 13;

/// The names of the columns [`select_list`] selects, in its order: [`RECEIPT_COLUMNS`] without
/// [`STORAGE_COLUMN`], the optional ones last. What a column index of a row read with it names.
pub(crate) const SELECTED_COLUMNS: [&str; 17] = {
    let mut selected = [""; 17];
    let mut i = 0;
    while i < selected.len() {
        selected[i] = RECEIPT_COLUMNS[if i < STORAGE_AT { i } else { i + 1 }];
        i += 1;
    }
    selected
};

/// The receipt column that records an abandoned run the fence admitted a prune beside (JSON
/// `{"messageID", "idleMs"}`, NULL otherwise). Receipt tables made before it lack it; the first
/// receipt that needs it adds it.
const ABANDONED_COLUMN: &str = "abandoned_run";

/// The receipt column that records the entry hash of an archived prune (lowercase hex, NULL
/// when the prune was not archived). Receipt tables made before it lack it; the first archived
/// prune adds it.
pub(crate) const ARCHIVE_COLUMN: &str = "archive_hash";

/// The receipt column that marks the receipt of a restore: the id of the prune receipt it
/// undid (NULL on a prune's receipt). Receipt tables made before it lack it; the first restore
/// adds it.
pub(crate) const RESTORES_COLUMN: &str = "restores";

/// The receipt column that says what a prune of one of the copies OpenCode keeps removed (JSON
/// of [`pruning_engine::Operation`]: `{"kind": "diffs", ...}` or `{"kind": "compaction", ...}`;
/// NULL on the receipt of a prune of parts or of a restore). Receipt tables made before it lack
/// it; the first such receipt adds it.
pub(crate) const OPERATION_COLUMN: &str = "operation";

/// Creates the meta and receipt tables if missing. Call inside the write transaction.
pub fn ensure_tables(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(CREATE)
}

/// Whether the receipt table has [`ARCHIVE_COLUMN`].
pub(crate) fn has_archive_column(conn: &Connection) -> rusqlite::Result<bool> {
    has_column(conn, ARCHIVE_COLUMN)
}

/// Whether the receipt table has [`RESTORES_COLUMN`].
pub(crate) fn has_restores_column(conn: &Connection) -> rusqlite::Result<bool> {
    has_column(conn, RESTORES_COLUMN)
}

/// Whether the receipt table has [`OPERATION_COLUMN`].
pub(crate) fn has_operation_column(conn: &Connection) -> rusqlite::Result<bool> {
    has_column(conn, OPERATION_COLUMN)
}

fn has_column(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    crate::cached::query_row(
        conn,
        "SELECT count(*) FROM pragma_table_info('session_prune_receipt') \
         WHERE name = ?1 COLLATE NOCASE",
        [name],
        |row| row.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

/// What a person put back with `restore` and a clean leaves alone: which prunes of a message
/// [`restored`] looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Restorable {
    /// Prunes of parts (receipts without an operation).
    Parts,
    /// Prunes of a user message's summary diffs.
    Diffs,
}

/// Whether the newest receipt of `kind` naming message `message_id` of `session_id` (by the
/// order receipts were written in) is a restore's: what the prune took, a person put back, and
/// no prune since took it again. False without receipts, or in a table made before restores.
///
/// Source: docs/ARCHITECTURE.md, "Restore" (a clean never takes back what a person put back).
pub(crate) fn restored(
    conn: &Connection,
    session_id: &str,
    message_id: &str,
    kind: Restorable,
) -> rusqlite::Result<bool> {
    let has = optional_columns(conn)?;
    if !has.restores {
        return Ok(false);
    }
    let of_kind = match (kind, has.operation) {
        (Restorable::Parts, false) => "1",
        (Restorable::Parts, true) => "operation IS NULL",
        (Restorable::Diffs, false) => return Ok(false),
        (Restorable::Diffs, true) => {
            "CASE WHEN json_valid(operation) THEN json_extract(operation, '$.kind') END = 'diffs'"
        }
    };
    let newest: Option<bool> = conn
        .prepare_cached(&format!(
            "SELECT restores IS NOT NULL FROM session_prune_receipt \
             WHERE session_id = ?1 AND message_id = ?2 AND {of_kind} \
             ORDER BY rowid DESC LIMIT 1"
        ))?
        .query_row([session_id, message_id], |row| row.get(0))
        .optional()?;
    Ok(newest.unwrap_or(false))
}

/// Which optional columns the receipt table has ([`ABANDONED_COLUMN`], [`ARCHIVE_COLUMN`],
/// [`RESTORES_COLUMN`], [`OPERATION_COLUMN`]) (none when it has none, or there is no such
/// table). A prune asks several times, so the answer is kept for the table's `CREATE TABLE` text
/// in `sqlite_schema`, which decides the columns and which SQLite rewrites on every `ALTER
/// TABLE ... ADD COLUMN`: looking that text up costs a read of the schema table, where reading
/// the columns (`pragma_table_info`) prepares a statement of its own each time.
pub(crate) fn optional_columns(conn: &Connection) -> rusqlite::Result<OptionalColumns> {
    /// The columns found for each `CREATE TABLE` text seen (a process meets a few).
    static KNOWN: std::sync::Mutex<Vec<(String, OptionalColumns)>> =
        std::sync::Mutex::new(Vec::new());
    let created: Option<String> = crate::cached::query_row(
        conn,
        "SELECT sql FROM main.sqlite_schema WHERE type = 'table' AND name = ?1",
        [RECEIPT_TABLE],
        |row| row.get(0),
    )
    .optional()?
    .flatten();
    if let Some(created) = created {
        let known = KNOWN
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((_, columns)) = known.iter().find(|(text, _)| *text == created) {
            return Ok(*columns);
        }
    }
    let (created, columns) = read_optional_columns(conn)?;
    if let Some(created) = created {
        let mut known = KNOWN
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if !known.iter().any(|(text, _)| *text == created) {
            known.push((created, columns));
        }
    }
    Ok(columns)
}

/// [`optional_columns`] read from the table's columns, with the `CREATE TABLE` text they were
/// read beside: one statement, so both are of the same commit even while another connection
/// adds a column (`None` without the table).
fn read_optional_columns(conn: &Connection) -> rusqlite::Result<(Option<String>, OptionalColumns)> {
    let mut stmt = conn.prepare_cached(
        "SELECT (SELECT sql FROM main.sqlite_schema \
                 WHERE type = 'table' AND name = 'session_prune_receipt'), name \
         FROM pragma_table_info('session_prune_receipt')",
    )?;
    let mut created = None;
    let mut found = OptionalColumns {
        abandoned: false,
        archive: false,
        restores: false,
        operation: false,
    };
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        created = row.get::<_, Option<String>>(0)?;
        let name: String = row.get(1)?;
        let is = |column: &str| name.eq_ignore_ascii_case(column);
        found.abandoned |= is(ABANDONED_COLUMN);
        found.archive |= is(ARCHIVE_COLUMN);
        found.restores |= is(RESTORES_COLUMN);
        found.operation |= is(OPERATION_COLUMN);
    }
    Ok((created, found))
}

/// The SELECT list of a receipt: [`SELECTED_COLUMNS`], with NULL in place of each optional
/// column ([`ABANDONED_COLUMN`], [`ARCHIVE_COLUMN`], [`RESTORES_COLUMN`],
/// [`OPERATION_COLUMN`]) the table lacks.
pub(crate) fn select_list(conn: &Connection) -> rusqlite::Result<String> {
    let or_null = |present: bool, name: &'static str| if present { name } else { "NULL" };
    let has = optional_columns(conn)?;
    Ok(format!(
        "{}, {}, {}, {}, {}",
        SELECTED_COLUMNS[..ALWAYS_SELECTED].join(", "),
        or_null(has.abandoned, ABANDONED_COLUMN),
        or_null(has.archive, ARCHIVE_COLUMN),
        or_null(has.restores, RESTORES_COLUMN),
        or_null(has.operation, OPERATION_COLUMN),
    ))
}

pub(crate) fn table_exists(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    crate::cached::query_row(
        conn,
        "SELECT count(*) FROM main.sqlite_schema WHERE type = 'table' AND name = ?1",
        [name],
        |row| row.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

/// The database identity, if a prune has recorded one.
pub fn database_id(conn: &Connection) -> rusqlite::Result<Option<String>> {
    if !table_exists(conn, META_TABLE)? {
        return Ok(None);
    }
    crate::cached::query_row(
        conn,
        "SELECT value FROM session_prune_meta WHERE key = 'database_id'",
        [],
        |row| row.get(0),
    )
    .optional()
}

/// Records `id` as the database identity unless one is already there; returns the identity the
/// database now holds. Call inside the write transaction, after [`ensure_tables`].
pub fn claim_database_id(conn: &Connection, id: &str) -> rusqlite::Result<String> {
    crate::cached::execute(
        conn,
        "INSERT OR IGNORE INTO session_prune_meta (key, value) VALUES ('database_id', ?1)",
        [id],
    )?;
    crate::cached::query_row(
        conn,
        "SELECT value FROM session_prune_meta WHERE key = 'database_id'",
        [],
        |row| row.get(0),
    )
}

/// The journal epoch the database is on: the `journal_epoch` meta entry (docs/ARCHITECTURE.md,
/// "Journal epochs"), 1 when there is none (or no meta table).
///
/// Errors: SQLite's; an entry that is not a positive number is
/// [`rusqlite::Error::IntegralValueOutOfRange`].
pub fn journal_epoch(conn: &Connection) -> rusqlite::Result<u64> {
    if !table_exists(conn, META_TABLE)? {
        return Ok(1);
    }
    let stored: Option<String> = conn
        .query_row(
            "SELECT value FROM session_prune_meta WHERE key = 'journal_epoch'",
            [],
            |row| row.get(0),
        )
        .optional()?;
    match stored {
        None => Ok(1),
        Some(text) => text
            .parse::<u64>()
            .ok()
            .filter(|epoch| *epoch >= 1)
            .ok_or(rusqlite::Error::IntegralValueOutOfRange(0, 0)),
    }
}

/// Moves the database from journal epoch `epoch - 1` to `epoch` in one write transaction
/// (`BEGIN IMMEDIATE`: two starts are serialized): `false`, nothing written, when it is on
/// another epoch by then. The meta table exists: only a database with an identity gets an epoch.
pub fn set_journal_epoch(conn: &Connection, epoch: u64) -> rusqlite::Result<bool> {
    let txn = WriteTxn::begin_uncounted(conn)?;
    let moved = journal_epoch(conn).and_then(|now| {
        if now.checked_add(1) != Some(epoch) {
            return Ok(false);
        }
        conn.execute(
            "INSERT INTO session_prune_meta (key, value) VALUES ('journal_epoch', ?1) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [epoch.to_string()],
        )?;
        Ok(true)
    });
    match moved {
        Ok(true) => {
            txn.commit().map_err(|failed| failed.error)?;
            Ok(true)
        }
        other => {
            txn.rollback();
            other
        }
    }
}

/// The receipts and the highest place in their chain (`chain_seq`, where the table has it):
/// `(count, max(count, highest place))`. A committed prune has one receipt and one event, and
/// both are numbered in commit order.
pub fn high_water(conn: &Connection) -> rusqlite::Result<(u64, u64)> {
    if !table_exists(conn, RECEIPT_TABLE)? {
        return Ok((0, 0));
    }
    let count: i64 = conn.query_row("SELECT count(*) FROM session_prune_receipt", [], |row| {
        row.get(0)
    })?;
    let highest: i64 = if has_column(conn, "chain_seq")? {
        conn.query_row(
            "SELECT coalesce(max(chain_seq), 0) FROM session_prune_receipt \
             WHERE typeof(chain_seq) = 'integer'",
            [],
            |row| row.get(0),
        )?
    } else {
        0
    };
    let count = count.max(0) as u64;
    Ok((count, count.max(highest.max(0) as u64)))
}

/// Inserts a receipt and chains it (see [`chain`]). Call inside the write
/// transaction, after [`ensure_tables`]. A receipt with an abandoned run adds
/// [`ABANDONED_COLUMN`] to a table made without it, an archived one [`ARCHIVE_COLUMN`].
pub fn insert(conn: &Connection, receipt: &Receipt, storage: &str) -> rusqlite::Result<()> {
    let indexes = serde_json::to_string(&receipt.indexes).unwrap_or_else(|_| "[]".into());
    let part_ids = serde_json::to_string(&receipt.part_ids).unwrap_or_else(|_| "[]".into());
    // The columns a receipt needs are added as it needs them: afterwards the table has them.
    let mut has = optional_columns(conn)?;
    let abandoned = match &receipt.abandoned_run {
        Some(run) => {
            if !has.abandoned {
                has.abandoned = true;
                conn.execute_batch(
                    "ALTER TABLE session_prune_receipt ADD COLUMN abandoned_run TEXT",
                )?;
            }
            serde_json::to_string(run).ok()
        }
        None => None,
    };
    if receipt.archive_hash.is_some() && !has.archive {
        has.archive = true;
        conn.execute_batch("ALTER TABLE session_prune_receipt ADD COLUMN archive_hash TEXT")?;
    }
    if receipt.restores.is_some() && !has.restores {
        has.restores = true;
        conn.execute_batch("ALTER TABLE session_prune_receipt ADD COLUMN restores TEXT")?;
    }
    if receipt.restores.is_some() {
        conn.execute_batch(RESTORES_INDEX)?;
    }
    let operation = match &receipt.operation {
        Some(operation) => {
            if !has.operation {
                has.operation = true;
                conn.execute_batch("ALTER TABLE session_prune_receipt ADD COLUMN operation TEXT")?;
            }
            serde_json::to_string(operation).ok()
        }
        None => None,
    };
    let restores = receipt.restores.map(|id| id.to_string());
    let bytes_removed = i64::try_from(receipt.bytes_removed).unwrap_or(i64::MAX);
    let (receipt_id, intent_id) = (
        receipt.receipt_id.to_string(),
        receipt.intent_id.to_string(),
    );
    let mut columns = String::from(
        "id, request_key, intent_id, session_id, message_id, storage, revision_before, \
         revision_after, indexes, part_ids, removed_count, bytes_removed, time_committed, \
         engine_version",
    );
    let mut values: Vec<&dyn rusqlite::ToSql> = vec![
        &receipt_id,
        &receipt.request_key,
        &intent_id,
        &receipt.session_id,
        &receipt.message_id,
        &storage,
        &receipt.revision_before,
        &receipt.revision_after,
        &indexes,
        &part_ids,
        &receipt.removed_count,
        &bytes_removed,
        &receipt.committed_at_ms,
        &receipt.engine_version,
    ];
    // A column left unset is left out: the insert works on a table made without it.
    if let Some(abandoned) = &abandoned {
        columns.push_str(", abandoned_run");
        values.push(abandoned);
    }
    if let Some(hash) = &receipt.archive_hash {
        columns.push_str(", archive_hash");
        values.push(hash);
    }
    if let Some(restores) = &restores {
        columns.push_str(", restores");
        values.push(restores);
    }
    if let Some(operation) = &operation {
        columns.push_str(", operation");
        values.push(operation);
    }
    let placeholders = (1..=values.len())
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!("INSERT INTO session_prune_receipt ({columns}) VALUES ({placeholders})");
    conn.prepare_cached(&sql)?
        .execute(rusqlite::params_from_iter(values))?;
    let rowid = conn.last_insert_rowid();
    chain::extend(conn, has, rowid)
}

/// The receipt stored under a request key (lowercase hex), if any.
pub fn by_key(conn: &Connection, request_key: &str) -> rusqlite::Result<Option<Receipt>> {
    if !table_exists(conn, RECEIPT_TABLE)? {
        return Ok(None);
    }
    let sql = format!(
        "SELECT {} FROM session_prune_receipt WHERE request_key = ?1",
        select_list(conn)?
    );
    crate::cached::query_row(conn, &sql, [request_key], from_row).optional()
}

/// The receipt with id `receipt_id`, if any.
pub fn by_id(conn: &Connection, receipt_id: Uuid) -> rusqlite::Result<Option<Receipt>> {
    if !table_exists(conn, RECEIPT_TABLE)? {
        return Ok(None);
    }
    let sql = format!(
        "SELECT {} FROM session_prune_receipt WHERE id = ?1",
        select_list(conn)?
    );
    crate::cached::query_row(conn, &sql, [receipt_id.to_string()], from_row).optional()
}

/// The id of the restore receipt that undid the prune with receipt `receipt_id`, if one did.
pub fn restored_by(conn: &Connection, receipt_id: Uuid) -> rusqlite::Result<Option<Uuid>> {
    if !table_exists(conn, RECEIPT_TABLE)? || !has_restores_column(conn)? {
        return Ok(None);
    }
    let id: Option<String> = crate::cached::query_row(
        conn,
        "SELECT id FROM session_prune_receipt WHERE restores = ?1 LIMIT 1",
        [receipt_id.to_string()],
        |row| row.get(0),
    )
    .optional()?;
    Ok(id.and_then(|id| Uuid::parse_str(&id).ok()))
}

/// The key a prune request with key `request_key` has now (see
/// [`pruning_engine::after_restore`]): while the receipt under the key was undone, by a restore
/// or by its content coming back behind the engine's back (`super::standing::holds`: a sync, a
/// backup put over the rows), the key after it. So the same request, asked again once the
/// content is back, is a new prune that removes it again, not an identical retry of the old
/// one. `schema` is the profile `conn` sees now.
pub fn live_key(
    conn: &Connection,
    schema: &super::schema::Schema,
    request_key: [u8; 32],
) -> rusqlite::Result<[u8; 32]> {
    let mut key = request_key;
    if !schema.has(RECEIPT_TABLE) {
        return Ok(key);
    }
    let restores = schema.has_column(RECEIPT_TABLE, RESTORES_COLUMN);
    loop {
        // A row under the key that cannot be read as a receipt names no prune to follow: the
        // request's own key stands, and the audit reports the row.
        let receipt = match by_key(conn, &hex::encode(key)) {
            Ok(Some(receipt)) => receipt,
            Ok(None) => return Ok(key),
            Err(
                rusqlite::Error::FromSqlConversionFailure(..)
                | rusqlite::Error::InvalidColumnType(..)
                | rusqlite::Error::IntegralValueOutOfRange(..),
            ) => return Ok(key),
            Err(error) => return Err(error),
        };
        let undone = (restores && restored_by(conn, receipt.receipt_id)?.is_some())
            || !super::standing::holds(conn, schema, &receipt)?;
        if !undone {
            return Ok(key);
        }
        key = pruning_engine::after_restore(&key, receipt.receipt_id);
    }
}

/// The receipt of an identical earlier prune of `message_id` in `session_id` (`Ok`), a refusal
/// (`unsupported_storage`) when the receipt under `request_key` names another message, or
/// `None` when there is none.
pub fn replay(
    conn: &Connection,
    request_key: &str,
    session_id: &str,
    message_id: &str,
) -> rusqlite::Result<Option<Result<Receipt, Refusal>>> {
    let Some(receipt) = by_key(conn, request_key)? else {
        return Ok(None);
    };
    if receipt.message_id == message_id && receipt.session_id == session_id {
        return Ok(Some(Ok(receipt)));
    }
    Ok(Some(Err(Refusal::new(
        BlockedReason::UnsupportedStorage,
        format!(
            "receipt {} under this request key names another message",
            receipt.receipt_id
        ),
    ))))
}

/// Every receipt, oldest commit first, optionally of one session.
pub fn list(conn: &Connection, session_id: Option<&str>) -> rusqlite::Result<Vec<Receipt>> {
    if !table_exists(conn, RECEIPT_TABLE)? {
        return Ok(Vec::new());
    }
    // The order they committed in: the chain's, which no clock can disturb (a wall clock that
    // stepped back gives a later receipt an earlier time); rows without a place (made before
    // the chain, or behind the engine's back) by insertion order, before the chained ones.
    let order = if chain::has_chain_columns(conn)? {
        "chain_seq IS NOT NULL, chain_seq, rowid"
    } else {
        "rowid"
    };
    let sql = format!(
        "SELECT {} FROM session_prune_receipt WHERE ?1 IS NULL OR session_id = ?1 ORDER BY {order}",
        select_list(conn)?
    );
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map([session_id], from_row)?;
    rows.collect()
}

/// The session ids the receipt rows name, each once, in id order: also of rows that cannot be
/// read as receipts otherwise (a damaged column elsewhere in the row), so that an audit can be
/// scoped by them. A `session_id` that is not text names no session.
pub fn session_ids(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    if !table_exists(conn, RECEIPT_TABLE)? {
        return Ok(Vec::new());
    }
    let mut stmt = conn.prepare(
        "SELECT DISTINCT session_id FROM session_prune_receipt \
         WHERE typeof(session_id) = 'text' ORDER BY session_id",
    )?;
    let rows = stmt.query_map([], |row| row.get(0))?;
    rows.collect()
}

fn from_row(row: &Row<'_>) -> rusqlite::Result<Receipt> {
    receipt_at(row, 0)
}

/// The receipt in the columns of `row` from `at` on, selected with [`select_list`].
pub(crate) fn receipt_at(row: &Row<'_>, at: usize) -> rusqlite::Result<Receipt> {
    let uuid = |i: usize| -> rusqlite::Result<Uuid> {
        let text: String = row.get(at + i)?;
        Uuid::parse_str(&text).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(
                at + i,
                rusqlite::types::Type::Text,
                Box::new(e),
            )
        })
    };
    let json = |i: usize| -> rusqlite::Result<String> { row.get(at + i) };
    let parse_err = |i: usize, e: serde_json::Error| {
        rusqlite::Error::FromSqlConversionFailure(at + i, rusqlite::types::Type::Text, Box::new(e))
    };
    let bytes: i64 = row.get(at + 10)?;
    Ok(Receipt {
        receipt_id: uuid(0)?,
        request_key: row.get(at + 1)?,
        intent_id: uuid(2)?,
        session_id: row.get(at + 3)?,
        message_id: row.get(at + 4)?,
        revision_before: row.get(at + 5)?,
        revision_after: row.get(at + 6)?,
        indexes: serde_json::from_str(&json(7)?).map_err(|e| parse_err(7, e))?,
        part_ids: serde_json::from_str(&json(8)?).map_err(|e| parse_err(8, e))?,
        removed_count: row.get(at + 9)?,
        bytes_removed: u64::try_from(bytes).unwrap_or(0),
        committed_at_ms: row.get(at + 11)?,
        engine_version: row.get(at + 12)?,
        abandoned_run: match row.get::<_, Option<String>>(at + 13)? {
            Some(text) => Some(serde_json::from_str(&text).map_err(|e| parse_err(13, e))?),
            None => None,
        },
        archive_hash: row.get(at + 14)?,
        restores: match row.get::<_, Option<String>>(at + 15)? {
            Some(text) => Some(Uuid::parse_str(&text).map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(
                    at + 15,
                    rusqlite::types::Type::Text,
                    Box::new(e),
                )
            })?),
            None => None,
        },
        operation: match row.get::<_, Option<String>>(at + 16)? {
            Some(text) => Some(serde_json::from_str(&text).map_err(|e| parse_err(16, e))?),
            None => None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The columns are found anew once a column is added, and in a table of another layout;
    /// without the table, none.
    #[test]
    fn the_optional_columns_follow_every_change_of_the_table() {
        let dir = tempfile::tempdir().expect("temporary folder");
        let conn = Connection::open(dir.path().join("opencode.db")).expect("database");
        let none = OptionalColumns {
            abandoned: false,
            archive: false,
            restores: false,
            operation: false,
        };
        assert_eq!(optional_columns(&conn).expect("read"), none);
        conn.execute_batch(
            "CREATE TABLE session_prune_receipt (id TEXT PRIMARY KEY, abandoned_run TEXT)",
        )
        .expect("an early layout");
        let abandoned = OptionalColumns {
            abandoned: true,
            ..none
        };
        assert_eq!(optional_columns(&conn).expect("read"), abandoned);
        conn.execute_batch("ALTER TABLE session_prune_receipt ADD COLUMN restores TEXT")
            .expect("a column added");
        let restores = OptionalColumns {
            restores: true,
            ..abandoned
        };
        assert_eq!(optional_columns(&conn).expect("read"), restores);
        conn.execute_batch(
            "DROP TABLE session_prune_receipt; \
             CREATE TABLE session_prune_receipt (id TEXT PRIMARY KEY, abandoned_run TEXT)",
        )
        .expect("the early layout again");
        assert_eq!(optional_columns(&conn).expect("read"), abandoned);
        conn.execute_batch("DROP TABLE session_prune_receipt; ")
            .expect("dropped");
        assert_eq!(optional_columns(&conn).expect("read"), none);
    }

    #[test]
    fn the_selected_column_names_follow_the_select_list() {
        assert_eq!(
            SELECTED_COLUMNS[..ALWAYS_SELECTED].join(", "),
            "id, request_key, intent_id, session_id, message_id, revision_before, \
             revision_after, indexes, part_ids, removed_count, bytes_removed, time_committed, \
             engine_version"
        );
        assert_eq!(RECEIPT_COLUMNS[STORAGE_AT], STORAGE_COLUMN);
        assert_eq!(SELECTED_COLUMNS[13], ABANDONED_COLUMN);
        assert_eq!(SELECTED_COLUMNS[14], ARCHIVE_COLUMN);
        assert_eq!(SELECTED_COLUMNS[15], RESTORES_COLUMN);
        assert_eq!(SELECTED_COLUMNS[16], OPERATION_COLUMN);
    }
}
