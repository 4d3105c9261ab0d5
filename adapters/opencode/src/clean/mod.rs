//! What `clean` prunes: the messages of a session it looks at, and, per message, the technical
//! parts a clean policy selects. Applying is the engine's one write path
//! ([`pruning_engine::Engine::prune_many`]); this module only reads.
//!
//! Sources: OpenCode's own prune (`session/compaction.ts`): the last two user turns are never
//! touched, and `skill` tool output is kept. A message is looked at only when it is an
//! assistant message created before the session's last `keep_last_turns` user messages (V1
//! `role`, V2 row `type`; both generations together, by `time_created`). A V1 user message
//! whose every part is an `ignored` text part is no turn: OpenCode never sends it to the model
//! (`MessageV2.toModelMessages` drops a user message left without parts), and it is how a
//! plugin answers in a session (docs/plugin.md).

pub(crate) mod copies;

use std::time::Duration;

use pruning_engine::contract::MAX_MESSAGE_BYTES;
use pruning_engine::{
    PartClass, Plan, PreviewRequest, PruneRequest, StoreError, StoredMessage, Unprunable,
};
use rusqlite::{Connection, OptionalExtension};
use serde::Serialize;
use serde_json::Value;

use super::generation::Generation;
use super::receipts::Restorable;
use super::row_budget;
use super::schema::Schema;
use super::txn::ReadTxn;
use super::v1::known::PlannedPrune;
use super::values::lenient_text;
use super::OpenCodeStore;

/// Which technical parts a clean removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CleanPolicy {
    /// Only messages completed at least this long ago (`time.completed`); `None`: any age.
    pub older_than: Option<Duration>,
    /// Never touch the last N user turns of a session (and everything after them).
    pub keep_last_turns: u32,
    /// Only tool parts of these tools (V1 `tool`, V2 `name`); `None`: every tool.
    pub tools: Option<Vec<String>>,
    /// Never tool parts of these tools.
    pub skip_tools: Vec<String>,
    /// Only parts of at least this many bytes (the contract's `bytes`).
    pub min_bytes: u64,
    /// Reasoning parts too.
    pub reasoning: bool,
    /// Messages a person put back with `restore` too (their newest receipt is a restore's); by
    /// default a clean leaves them alone, so that it never takes back what a person put back.
    pub include_restored: bool,
}

impl Default for CleanPolicy {
    /// OpenCode's own choices: keep the last 2 turns, keep `skill` output, take reasoning.
    fn default() -> Self {
        Self {
            older_than: None,
            keep_last_turns: 2,
            tools: None,
            skip_tools: vec!["skill".into()],
            min_bytes: 0,
            reasoning: true,
            include_restored: false,
        }
    }
}

/// Why a clean left a message alone. Declared in the order of their names ([`Self::as_str`]),
/// which is the order reports list them in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// An assistant message without `time.completed`: a run may still be writing it.
    Incomplete,
    /// Not readable as a message: invalid JSON, not UTF-8, no `content` array.
    Malformed,
    /// A session's OpenCode 1.x rows that are not all copied by OpenCode 2 (its migration did
    /// not finish, or a 1.x wrote to the session since): not removed by `--migrated-v1`.
    NotACopy,
    /// A user message row that is JSON, but not as OpenCode's `JSON.stringify` writes it (other
    /// spacing, escapes or number forms): emptying its diffs would rewrite more than them.
    NotStringified,
    /// Over the 16 MiB budget (`data`, or a V1 message with its parts).
    Oversize,
    /// Stored where this engine does not write prunes (OpenCode 1.18's V2 rows).
    ReadOnly,
    /// Put back by `restore`, and not pruned since: a clean never takes back what a person put
    /// back (`--include-restored` takes it).
    Restored,
    /// A tool part still pending or running.
    RunningTool,
    /// Completed more recently than `--older-than`.
    TooRecent,
    /// A part of a type this engine does not know.
    UnknownPart,
    /// `time_created` is not a number, or the id is not one a request can name: the message
    /// cannot be placed among the turns or addressed.
    Unplaceable,
}

impl SkipReason {
    /// The name used in reports (`oversize`, `malformed`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Oversize => "oversize",
            Self::Malformed => "malformed",
            Self::Incomplete => "incomplete",
            Self::UnknownPart => "unknown_part",
            Self::RunningTool => "running_tool",
            Self::TooRecent => "too_recent",
            Self::ReadOnly => "read_only",
            Self::Restored => "restored",
            Self::Unplaceable => "unplaceable",
            Self::NotStringified => "not_stringified",
            Self::NotACopy => "not_a_copy",
        }
    }
}

/// What a clean does with one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Planned {
    /// Prune these parts.
    Prune {
        /// The request, bound to the content read.
        request: PruneRequest,
        /// Sum of the selected parts' `bytes`.
        bytes: u64,
        /// Whether the selected parts are every tool and reasoning part of the message, as
        /// `prune-batch` (which takes them all) would take them.
        every_technical: bool,
        /// Spill files the selected tool parts point at (`state.metadata.outputPath` in V1,
        /// `state.outputPaths` in V2), as stored, once per part that names them.
        spill_files: Vec<String>,
    },
    /// No part passes the policy.
    Nothing,
    /// Left alone.
    Skipped {
        /// Why.
        reason: SkipReason,
        /// In words.
        detail: String,
    },
}

/// The `role` of an unaliased V1 `message` row, bounded by the row budget (NULL when not JSON).
fn v1_role() -> String {
    let data = row_budget::data("", "message");
    format!("CASE WHEN json_valid({data}) THEN json_extract({data}, '$.role') END")
}

/// The condition (after `AND`) that leaves out the V1 user `message` rows aliased `m` that
/// OpenCode never sends the model: rows with parts, every one an `ignored` text part. A part
/// that is not JSON counts as sent, so that damage can only keep more turns.
fn sent_to_the_model() -> String {
    let data = row_budget::data("p", "part");
    format!(
        "AND NOT (EXISTS (SELECT 1 FROM part p WHERE p.message_id = m.id) \
         AND NOT EXISTS (SELECT 1 FROM part p WHERE p.message_id = m.id AND NOT \
         CASE WHEN json_valid({data}) THEN json_extract({data}, '$.type') = 'text' \
         AND json_extract({data}, '$.ignored') IS 1 ELSE 0 END))"
    )
}

/// The condition (after `AND`, empty where nothing is to be left out) that leaves out the V1
/// `message` rows aliased `m` that are a copy OpenCode 2 holds (`super::migrated`): a clean
/// looks at the copy, the one row OpenCode 2 reads, never at both.
fn live_v1(schema: &Schema) -> String {
    if super::migrated::possible(schema) {
        format!(
            "AND NOT ({} AND {})",
            super::migrated::in_migrated_session(schema, "m.session_id"),
            super::migrated::copied("m")
        )
    } else {
        String::new()
    }
}

/// Every session id of the database (both session tables), oldest first.
pub fn all_sessions(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let schema = Schema::read(conn)?;
    let mut selects = Vec::new();
    for table in ["session", "session_v2"] {
        if schema.has(table) {
            selects.push(format!(
                "SELECT id, CAST(coalesce({}, 0) AS INTEGER) AS t FROM {table}",
                schema.column_or_null(table, "time_created")
            ));
        }
    }
    if selects.is_empty() {
        return Ok(Vec::new());
    }
    let sql = format!(
        "SELECT id FROM ({}) GROUP BY id ORDER BY min(t), id",
        selects.join(" UNION ALL ")
    );
    let mut stmt = conn.prepare(&sql)?;
    let ids = stmt.query_map([], |row| Ok(lenient_text(row.get_ref(0)?)))?;
    ids.collect()
}

/// The messages of a session a clean looks at, and how many it leaves to the kept turns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// The ids looked at, oldest first.
    pub ids: Vec<String>,
    /// Their `time_created` (ms since the Unix epoch), `None` where it is not an integer.
    pub times: Vec<Option<i64>>,
    /// Assistant messages in the last `keep_last_turns` turns, left alone.
    pub kept: u64,
    /// With `before_compaction`: assistant messages before the kept turns that are not older
    /// than the session's last completed compaction (OpenCode still sends them to the model),
    /// left alone. 0 otherwise.
    pub after_compaction: u64,
}

/// The messages of `session_id` a clean looks at, oldest first: assistant messages (V1 rows
/// whose role is not `user`, so that unreadable rows are looked at and reported; V2 rows of
/// type `assistant`) created before the session's `keep_last_turns`-th last user message, and
/// those whose time is not a number (reported as unplaceable). With `before_compaction`, only
/// those created before the session's last completed compaction too ([`compaction_boundary`];
/// for a session OpenCode 2 holds, below its cut, `super::v2::compaction::cut`); a session
/// without one has none.
pub fn messages(
    conn: &Connection,
    schema: &Schema,
    session_id: &str,
    keep_last_turns: u32,
    before_compaction: bool,
) -> rusqlite::Result<Listing> {
    let v1 = schema.has("message") && schema.has("part");
    let v2 = schema.has_v2();
    let v1_role = v1_role();
    let mut assistants = Vec::new();
    if v1 {
        let live = live_v1(schema);
        assistants.push(format!(
            "SELECT time_created, id FROM message m WHERE session_id = ?1 AND {v1_role} IS NOT 'user' {live}"
        ));
    }
    if v2 {
        assistants.push(
            "SELECT time_created, id FROM session_message WHERE session_id = ?1 AND type = 'assistant'"
                .to_string(),
        );
    }
    if assistants.is_empty() {
        return Ok(Listing::default());
    }
    let all = assistants.join(" UNION ALL ");
    let total: i64 = crate::cached::query_row(
        conn,
        &format!("SELECT count(*) FROM ({all})"),
        [session_id],
        |row| row.get(0),
    )?;
    let before = match kept_boundary(conn, schema, v1, v2, session_id, keep_last_turns)? {
        Some(t) => t,
        // Fewer user turns than kept: every turn is kept.
        None => {
            return Ok(Listing {
                kept: total.max(0) as u64,
                ..Listing::default()
            })
        }
    };
    // Rows whose time is not a number come too (they are reported as unplaceable), but not
    // before a compaction: they cannot be placed before it.
    // `below_id`: only ids below it too (a compaction's boundary, which OpenCode places by id).
    let list = |before: i64,
                unplaced: bool,
                below_id: Option<&str>|
     -> rusqlite::Result<Vec<(String, Option<i64>)>> {
        let unplaced = if unplaced {
            "typeof(time_created) <> 'integer' OR"
        } else {
            ""
        };
        let below = if below_id.is_some() {
            "AND id < ?3"
        } else {
            ""
        };
        let sql = format!(
            "SELECT id, CASE typeof(time_created) WHEN 'integer' THEN time_created END \
             FROM ({all}) WHERE {unplaced} \
               (typeof(time_created) = 'integer' AND time_created < ?2 {below}) \
             ORDER BY CAST(time_created AS INTEGER), id"
        );
        let mut stmt = conn.prepare(&sql)?;
        let mut params: Vec<&dyn rusqlite::ToSql> = vec![&session_id, &before];
        if let Some(below_id) = &below_id {
            params.push(below_id);
        }
        let ids = stmt
            .query_map(params.as_slice(), |row| {
                Ok((lenient_text(row.get_ref(0)?), row.get(1)?))
            })?
            .collect::<rusqlite::Result<Vec<_>>>();
        ids
    };
    let listed = |rows: Vec<(String, Option<i64>)>, kept: u64, after_compaction: u64| {
        let (ids, times) = rows.into_iter().unzip();
        Listing {
            ids,
            times,
            kept,
            after_compaction,
        }
    };
    let rows = list(before, true, None)?;
    let kept = (total.max(0) as u64).saturating_sub(rows.len() as u64);
    if !before_compaction {
        return Ok(listed(rows, kept, 0));
    }
    // A session OpenCode 2 holds is cut where OpenCode 2 cuts it, any other where 1.x does.
    let v2_session = v2
        && crate::cached::query_row(
            conn,
            "SELECT EXISTS (SELECT 1 FROM session_message WHERE session_id = ?1)",
            [session_id],
            |row| row.get::<_, bool>(0),
        )?;
    let older = if v2_session {
        match super::v2::compaction::cut(conn, session_id)? {
            Some(cut) => v2_before(conn, session_id, before, cut)?,
            None => Vec::new(),
        }
    } else if v1 {
        match compaction_boundary(conn, session_id)? {
            Some((time, id)) => list(before.min(time), false, Some(id.as_str()))?,
            None => Vec::new(),
        }
    } else {
        Vec::new()
    };
    let after_compaction = (rows.len() - older.len()) as u64;
    Ok(listed(older, kept, after_compaction))
}

/// The OpenCode 2 assistant rows of `session_id` created before `before` (ms) whose `seq` lies
/// below `cut` (`super::v2::compaction::cut`): those OpenCode 2 never sends again, oldest first,
/// with their times.
fn v2_before(
    conn: &Connection,
    session_id: &str,
    before: i64,
    cut: i64,
) -> rusqlite::Result<Vec<(String, Option<i64>)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, time_created FROM session_message \
         WHERE session_id = ?1 AND type = 'assistant' AND typeof(time_created) = 'integer' \
           AND time_created < ?2 AND typeof(seq) = 'integer' AND seq < ?3 \
         ORDER BY time_created, id",
    )?;
    let rows = stmt.query_map(rusqlite::params![session_id, before, cut], |row| {
        Ok((lenient_text(row.get_ref(0)?), row.get(1)?))
    })?;
    rows.collect()
}

/// The `time_created` (ms since the Unix epoch) before which a session's messages are outside
/// its last `keep_last_turns` user turns: the `keep_last_turns`-th newest user message's
/// (`i64::MAX` when no turn is kept); `None` when the session has fewer user turns than that
/// (every turn is kept). Only user rows with a number for a time count: a damaged time can only
/// make fewer turns look recent, never move the kept turns later. `v1` and `v2` say which
/// generations' tables there are.
pub(crate) fn kept_boundary(
    conn: &Connection,
    schema: &Schema,
    v1: bool,
    v2: bool,
    session_id: &str,
    keep_last_turns: u32,
) -> rusqlite::Result<Option<i64>> {
    if keep_last_turns == 0 {
        return Ok(Some(i64::MAX));
    }
    let v1_role = v1_role();
    let mut users = Vec::new();
    if v1 {
        let live = live_v1(schema);
        let sent = sent_to_the_model();
        users.push(format!(
            "SELECT time_created AS t FROM message m WHERE session_id = ?1 AND {v1_role} = 'user' {live} {sent}"
        ));
    }
    if v2 {
        users.push(
            "SELECT time_created AS t FROM session_message WHERE session_id = ?1 AND type = 'user'"
                .to_string(),
        );
    }
    if users.is_empty() {
        return Ok(None);
    }
    let sql = format!(
        "SELECT t FROM ({}) WHERE typeof(t) = 'integer' ORDER BY t DESC LIMIT 1 OFFSET ?2",
        users.join(" UNION ALL ")
    );
    conn.query_row(
        &sql,
        rusqlite::params![session_id, keep_last_turns - 1],
        |row| row.get(0),
    )
    .optional()
}

/// The oldest message OpenCode still sends the model in a session with a completed
/// compaction, as `(time_created in ms, id)`: the user message holding the `compaction` part
/// that the newest finished summary (an assistant message with `summary: true`, a `finish`, no
/// `error` and `time.completed`; newest by id, as OpenCode walks them) answers, or, when that
/// part keeps a tail (`tail_start_id`), the tail's first message. OpenCode sends nothing older
/// (the summary stands in for it). `None` when the session (V1) has no such compaction, or its
/// tail names no message of the session (then OpenCode sends everything).
pub fn compaction_boundary(
    conn: &Connection,
    session_id: &str,
) -> rusqlite::Result<Option<(i64, String)>> {
    // CASE keeps the JSON functions off rows that are not JSON.
    let a = row_budget::data("a", "message");
    let p = row_budget::data("p", "part");
    let summary = format!(
        "CASE WHEN json_valid({a}) THEN \
           json_extract({a}, '$.role') = 'assistant' \
           AND json_type({a}, '$.summary') = 'true' \
           AND json_type({a}, '$.finish') = 'text' AND json_extract({a}, '$.finish') <> '' \
           AND json_type({a}, '$.error') IS NULL \
           AND json_type({a}, '$.time.completed') IN ('integer', 'real') \
           AND json_extract({a}, '$.time.completed') > 0 END"
    );
    let sql = format!(
        "SELECT u.time_created, u.id, \
                (SELECT CASE WHEN json_valid({p}) THEN json_extract({p}, '$.tail_start_id') END \
                   FROM part p WHERE p.message_id = u.id \
                    AND CASE WHEN json_valid({p}) \
                        THEN json_extract({p}, '$.type') = 'compaction' END \
                  ORDER BY p.id LIMIT 1) \
         FROM message a JOIN message u \
           ON u.session_id = a.session_id \
          AND u.id = CASE WHEN json_valid({a}) THEN json_extract({a}, '$.parentID') END \
         WHERE a.session_id = ?1 AND {summary} AND typeof(u.time_created) = 'integer' \
           AND EXISTS (SELECT 1 FROM part p WHERE p.message_id = u.id \
                 AND CASE WHEN json_valid({p}) \
                     THEN json_extract({p}, '$.type') = 'compaction' END) \
         ORDER BY a.id DESC LIMIT 1"
    );
    let found: Option<(i64, String, Option<String>)> =
        crate::cached::query_row(conn, &sql, [session_id], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .optional()?;
    let Some((time, id, tail)) = found else {
        return Ok(None);
    };
    let Some(tail) = tail else {
        return Ok(Some((time, id)));
    };
    let tail_time: Option<i64> = crate::cached::query_row(
        conn,
        "SELECT time_created FROM message WHERE session_id = ?1 AND id = ?2 \
           AND typeof(time_created) = 'integer'",
        [session_id, tail.as_str()],
        |row| row.get(0),
    )
    .optional()?;
    Ok(tail_time.map(|tail_time| {
        if (tail_time, tail.as_str()) < (time, id.as_str()) {
            (tail_time, tail)
        } else {
            (time, id)
        }
    }))
}

/// What a prune of some parts of a message would free, as its receipt would count it (bytes of
/// row data).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Freed {
    /// The part rows' `data` (V1), or what the message row shrinks by (V2).
    pub parts: u64,
    /// The `message.part.updated.1` snapshots of those parts (V1 with an event log).
    pub snapshots: u64,
}

impl Freed {
    /// Everything the prune frees: what its receipt's `bytesRemoved` will say.
    pub fn total(&self) -> u64 {
        self.parts + self.snapshots
    }
}

/// What a prune of the parts at `indexes` of a message would remove, as its receipt would count
/// it: for a V1 message, the part rows and their `message.part.updated.1` snapshots; for a V2
/// message, `planned_bytes` (the entries' size, which is what the row shrinks by). With
/// `after_compaction`, the prune runs after its session's compaction, which deletes the
/// superseded snapshots first: only the others are counted.
pub fn freed(
    store: &OpenCodeStore,
    session_id: &str,
    message_id: &str,
    indexes: &[usize],
    planned_bytes: u64,
    after_compaction: bool,
) -> Result<Freed, StoreError> {
    let conn = store.connection();
    let storage = |e: rusqlite::Error| StoreError::Storage(Box::new(e));
    let schema = store.schema_of(&conn).map_err(storage)?;
    if Generation::of(&conn, &schema, session_id, message_id).map_err(storage)? == Generation::V2 {
        return Ok(Freed {
            parts: planned_bytes,
            snapshots: 0,
        });
    }
    // Parts in content order (`ORDER BY id`, as OpenCode reads them).
    let mut stmt = conn
        .prepare_cached("SELECT id, octet_length(data) FROM part WHERE message_id = ?1 ORDER BY id")
        .map_err(storage)?;
    let parts: Vec<(String, i64)> = stmt
        .query_map([message_id], |row| Ok((row.get(0)?, row.get(1)?)))
        .map_err(storage)?
        .collect::<Result<_, _>>()
        .map_err(storage)?;
    drop(stmt);
    let mut bytes = 0u64;
    let mut ids = std::collections::HashSet::new();
    for &index in indexes {
        if let Some((id, len)) = parts.get(index) {
            bytes += u64::try_from(*len).unwrap_or(0);
            ids.insert(id.as_str());
        }
    }
    // No event log (OpenCode 1.2, 1.3): a prune deletes no snapshot.
    let snapshots = if schema.has_events() {
        let mut known = store.known(&conn, &schema)?;
        // One read transaction: the snapshot index is learnt at one data version.
        let txn = ReadTxn::begin(&conn).map_err(storage)?;
        let found = known.refresh(&conn).and_then(|()| {
            let found = super::v1::events::find_snapshots(&conn, &mut known, session_id, &ids)?;
            let compacted = if after_compaction {
                known.superseded_of(&conn, session_id, &ids)?
            } else {
                std::collections::HashSet::new()
            };
            Ok(found
                .into_iter()
                .filter(|(id, _)| !compacted.contains(id))
                .collect::<Vec<_>>())
        });
        txn.end();
        found.map_err(storage)?
    } else {
        Vec::new()
    };
    Ok(Freed {
        parts: bytes,
        snapshots: snapshots
            .iter()
            .map(|(_, len)| u64::try_from(*len).unwrap_or(0))
            .sum::<u64>(),
    })
}

/// V1 `part` rows of `session_id` whose `message` row is missing: no clean looks at them.
pub fn orphan_parts(conn: &Connection, schema: &Schema, session_id: &str) -> rusqlite::Result<u64> {
    if !(schema.has("message") && schema.has("part")) {
        return Ok(0);
    }
    let count: i64 = crate::cached::query_row(
        conn,
        "SELECT count(*) FROM part p WHERE p.session_id = ?1 \
           AND NOT EXISTS (SELECT 1 FROM message m WHERE m.id = p.message_id)",
        [session_id],
        |row| row.get(0),
    )?;
    Ok(count.max(0) as u64)
}

/// Whether the message row is found by its id with a number for its time (V1 or V2).
fn placed(
    conn: &Connection,
    schema: &Schema,
    session_id: &str,
    message_id: &str,
) -> rusqlite::Result<bool> {
    let mut found = false;
    for (table, present) in [
        ("message", schema.has_v1()),
        ("session_message", schema.has_v2()),
    ] {
        if present {
            let sql = format!(
                "SELECT count(*) > 0 FROM {table} WHERE session_id = ?1 AND id = ?2 \
                   AND typeof(time_created) = 'integer'"
            );
            found |= crate::cached::query_row(conn, &sql, [session_id, message_id], |row| {
                row.get::<_, bool>(0)
            })?;
        }
    }
    Ok(found)
}

/// Bytes a message holds as stored: V2 `data`, or V1 `message.data` plus its parts' `data`.
fn stored_bytes(
    conn: &Connection,
    schema: &Schema,
    session_id: &str,
    message_id: &str,
) -> rusqlite::Result<i64> {
    let mut total = 0i64;
    if schema.has_v2() {
        total = total.max(crate::cached::query_row(
            conn,
            "SELECT coalesce(sum(octet_length(data)), 0) FROM session_message \
             WHERE session_id = ?1 AND id = ?2",
            [session_id, message_id],
            |row| row.get(0),
        )?);
    }
    if schema.has("message") && schema.has("part") {
        total = total.max(crate::cached::query_row(
            conn,
            "SELECT (SELECT coalesce(sum(octet_length(data)), 0) FROM message \
                     WHERE session_id = ?1 AND id = ?2) \
                  + (SELECT coalesce(sum(octet_length(data)), 0) FROM part \
                     WHERE message_id = ?2)",
            [session_id, message_id],
            |row| row.get(0),
        )?);
    }
    Ok(total)
}

/// Plans the clean of one message under `policy` at `now_ms` (ms since the Unix epoch), in one
/// read transaction: every check sees the same snapshot.
pub fn plan(
    store: &OpenCodeStore,
    session_id: &str,
    message_id: &str,
    policy: &CleanPolicy,
    now_ms: i64,
) -> Result<Planned, StoreError> {
    let Ok(request) = PreviewRequest::new(session_id.to_string(), message_id.to_string()) else {
        return Ok(skipped(
            SkipReason::Unplaceable,
            "the id is not one a request can name (empty or over 256 characters)",
        ));
    };
    let conn = store.connection();
    let txn = ReadTxn::begin(&conn).map_err(|e| StoreError::Storage(Box::new(e)))?;
    let planned = plan_in(store, &conn, &request, policy, now_ms);
    txn.end();
    planned
}

/// [`plan`] inside the read transaction on `conn` (the store's connection).
fn plan_in(
    store: &OpenCodeStore,
    conn: &Connection,
    request: &PreviewRequest,
    policy: &CleanPolicy,
    now_ms: i64,
) -> Result<Planned, StoreError> {
    let (session_id, message_id) = (request.session_id.as_str(), request.message_id.as_str());
    let storage = |e: rusqlite::Error| StoreError::Storage(Box::new(e));
    let schema = store.schema_of(conn).map_err(storage)?;
    if !placed(conn, &schema, session_id, message_id).map_err(storage)? {
        return Ok(skipped(
            SkipReason::Unplaceable,
            "time_created is not a number, or the row cannot be found by its id",
        ));
    }
    let bytes = stored_bytes(conn, &schema, session_id, message_id).map_err(storage)?;
    if bytes > MAX_MESSAGE_BYTES as i64 {
        return Ok(skipped(
            SkipReason::Oversize,
            format!("{bytes} bytes, over the 16 MiB budget"),
        ));
    }
    let message = match store.read_message_on(conn, request)? {
        Ok(message) => message,
        Err(refusal) => return Ok(skipped(SkipReason::Malformed, refusal.detail)),
    };
    let (planned, plan) = select(&message, session_id, message_id, policy, now_ms);
    if let Planned::Prune { request, .. } = &planned {
        if let Some(why) = store.read_only_reason_on(conn, session_id, message_id) {
            return Ok(skipped(SkipReason::ReadOnly, why));
        }
        if !policy.include_restored
            && crate::receipts::restored(conn, session_id, message_id, Restorable::Parts)
                .map_err(storage)?
        {
            return Ok(skipped(SkipReason::Restored, RESTORED));
        }
        if let Some(plan) = plan {
            remember(store, conn, &schema, request, &message, plan).map_err(storage)?;
        }
    }
    Ok(planned)
}

/// Keeps the planner's decision for the prune of a V1 message (see
/// `super::v1::known::PlannedPrune`), so that its prune, at the same data version, need not read
/// the message again. A V2 message's prune reads it again.
fn remember(
    store: &OpenCodeStore,
    conn: &Connection,
    schema: &Schema,
    request: &PruneRequest,
    message: &StoredMessage,
    plan: Plan,
) -> rusqlite::Result<()> {
    if Generation::of(conn, schema, &request.session_id, &request.message_id)? != Generation::V1 {
        return Ok(());
    }
    // The V1 read puts each row's id into its part's value (`id`). The prune deletes by id, so
    // a message whose rows share an id (a `part` table rebuilt without its primary key) is left
    // to the prune's own read and compare-and-swap deletes.
    let mut ids = std::collections::HashSet::new();
    let unique = message.parts.iter().all(|part| {
        part.value
            .get("id")
            .and_then(Value::as_str)
            .is_some_and(|id| ids.insert(id))
    });
    if !unique {
        return Ok(());
    }
    let part_ids: Option<Vec<String>> = plan
        .remove
        .iter()
        .map(|&index| {
            let part = message.parts.get(index)?;
            Some(part.value.get("id")?.as_str()?.to_string())
        })
        .collect();
    let Some(part_ids) = part_ids else {
        return Ok(());
    };
    store.remember_planned(
        conn,
        schema,
        &request.message_id,
        PlannedPrune {
            session_id: request.session_id.clone(),
            selection: request.selection.clone(),
            part_ids,
            plan,
        },
    )
}

/// Why a message put back by `restore` is left alone, in words.
pub(crate) const RESTORED: &str =
    "put back by `restore` and not pruned since: a clean leaves it (`prune` it, or clean with --include-restored)";

fn skipped(reason: SkipReason, detail: impl Into<String>) -> Planned {
    Planned::Skipped {
        reason,
        detail: detail.into(),
    }
}

/// The policy applied to a message as read, with the planner's decision for the prune when
/// there is one.
fn select(
    message: &StoredMessage,
    session_id: &str,
    message_id: &str,
    policy: &CleanPolicy,
    now_ms: i64,
) -> (Planned, Option<Plan>) {
    // The planner's rules, under clean's names for them.
    if let Err(why) = message.prunability() {
        let reason = match why {
            Unprunable::NotAssistant => return (Planned::Nothing, None),
            Unprunable::Incomplete => SkipReason::Incomplete,
            Unprunable::TooManyParts(_) => SkipReason::Oversize,
            Unprunable::UnknownPart { .. } => SkipReason::UnknownPart,
            Unprunable::UnfinishedTool { .. } => SkipReason::RunningTool,
        };
        return (skipped(reason, why.to_string()), None);
    }
    let completed_at = message.completed_at_ms.unwrap_or(0);
    if let Some(age) = policy.older_than {
        let age_ms = i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
        if completed_at > now_ms.saturating_sub(age_ms) {
            return (
                skipped(SkipReason::TooRecent, "completed within --older-than"),
                None,
            );
        }
    }
    let measured = message.measure();
    let mut indexes = Vec::new();
    let mut bytes = 0u64;
    let mut spill_files = Vec::new();
    let mut technical = 0usize;
    for (index, part) in message.parts.iter().enumerate() {
        if matches!(part.class, PartClass::Reasoning | PartClass::Tool(_)) {
            technical += 1;
        }
        let wanted = match part.class {
            PartClass::Reasoning => policy.reasoning,
            PartClass::Tool(_) => {
                let name = part
                    .value
                    .get("tool")
                    .or_else(|| part.value.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let listed = policy
                    .tools
                    .as_ref()
                    .is_none_or(|tools| tools.iter().any(|t| t == name));
                listed && !policy.skip_tools.iter().any(|t| t == name)
            }
            PartClass::Kept | PartClass::Unknown => false,
        };
        let size = measured.bytes.get(index).copied().unwrap_or(0);
        if wanted && size >= policy.min_bytes {
            indexes.push(index as i64);
            bytes += size;
            spill_files.extend(spill_paths(&part.value));
        }
    }
    if indexes.is_empty() {
        return (Planned::Nothing, None);
    }
    let request = match PruneRequest::with_indexes(
        session_id.to_string(),
        message_id.to_string(),
        measured.revision.clone(),
        &indexes,
    ) {
        Ok(request) => request,
        Err(error) => return (skipped(SkipReason::Malformed, error.to_string()), None),
    };
    let plan = message
        .plan_measured(measured, &request.selection, &request.revision)
        .ok();
    let planned = Planned::Prune {
        every_technical: indexes.len() == technical,
        request,
        bytes,
        spill_files,
    };
    (planned, plan)
}

/// The spill files a tool part points at.
fn spill_paths(part: &Value) -> Vec<String> {
    let mut paths = Vec::new();
    if let Some(path) = part
        .pointer("/state/metadata/outputPath")
        .and_then(Value::as_str)
    {
        paths.push(path.to_string());
    }
    if let Some(list) = part.pointer("/state/outputPaths").and_then(Value::as_array) {
        paths.extend(list.iter().filter_map(Value::as_str).map(str::to_string));
    }
    // One entry per file: a part names each of its files once, as a row counts once in
    // `spill::reference_counts`.
    paths.sort();
    paths.dedup();
    paths
}

#[cfg(test)]
mod tests {
    use super::SkipReason;

    #[test]
    fn skip_reasons_are_declared_in_the_order_of_their_names() {
        let reasons = [
            SkipReason::Incomplete,
            SkipReason::Malformed,
            SkipReason::NotStringified,
            SkipReason::Oversize,
            SkipReason::ReadOnly,
            SkipReason::Restored,
            SkipReason::RunningTool,
            SkipReason::TooRecent,
            SkipReason::UnknownPart,
            SkipReason::Unplaceable,
        ];
        let mut by_name = reasons;
        by_name.sort_by_key(|reason| reason.as_str());
        assert_eq!(by_name, reasons);
        let mut by_order = reasons;
        by_order.sort();
        assert_eq!(by_order, reasons);
    }
}
