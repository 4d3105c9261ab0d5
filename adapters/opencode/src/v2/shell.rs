//! The output an OpenCode 2 `shell` row keeps of a command the user ran, emptied inside the
//! write transaction `crate::write` opens: `output.output` set to `""` by a compare-and-swap on
//! the row's exact text, with a receipt; nothing else of the row changes (its command, exit
//! code, the output's `size` and `truncated` stay).
//!
//! Source: docs/opencode-versions.md, "OpenCode 2" (measured with 2.0.15 and 2.1.2): a command
//! the user runs is a `shell` row `{shellID, command, status, exit, output: {output, cursor,
//! size, truncated}, ...}`, and OpenCode 2 tells the model of it through the `synthetic` row
//! after it (`metadata.source = "shell"`, its last 2,000 lines); the model's requests carry the
//! synthetic row's text and never the shell row's `output.output`, which its UI shows. So
//! emptying it changes no request; the synthetic row stays.

use pruning_engine::revision::revision;
use pruning_engine::{BlockedReason, Operation, Plan, PruneRequest, Refusal, ShellOutputPruned};
use rusqlite::{params, Connection};
use serde_json::Value;

use super::fence;
use crate::schema::Schema;
use crate::v1::fence::FenceClock;
use crate::v1::runs::Abandoned;
use crate::write::{self, Prepared, Written};

/// A `shell` row as read: its text, and its `output` value.
pub(crate) struct ShellRow {
    /// `data`, exactly as stored.
    pub(crate) data: String,
    /// `output`.
    pub(crate) output: Value,
    /// `shellID`, when it is text.
    pub(crate) shell_id: Option<String>,
}

/// Why a `shell` row's output cannot be emptied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unread {
    /// No such row in the session, or not a `shell` row.
    NotShell,
    /// Over the 16 MiB budget.
    OverBudget,
    /// Not a JSON object of text (or a row `JSON.stringify` would not have written: its output
    /// read is not the one the write would empty).
    Malformed,
    /// The command has not finished: its output is still being written.
    Running,
    /// No output text.
    NoOutput,
}

impl Unread {
    /// The refusal of a prune of row `message_id` for this reason (`not_deletable`; a command
    /// still running, `maintenance_required`: it passes).
    pub(crate) fn refusal(&self, message_id: &str) -> Refusal {
        let not_deletable = |detail: String| Refusal::new(BlockedReason::NotDeletable, detail);
        match self {
            Self::NotShell => not_deletable(format!("there is no shell row {message_id}")),
            Self::OverBudget => {
                not_deletable(format!("shell row {message_id} is over the 16 MiB budget"))
            }
            Self::Malformed => not_deletable(format!(
                "shell row {message_id} is not JSON as OpenCode writes it"
            )),
            Self::Running => Refusal::new(
                BlockedReason::MaintenanceRequired,
                format!("the command of shell row {message_id} has not finished"),
            ),
            Self::NoOutput => not_deletable(format!("shell row {message_id} keeps no output")),
        }
    }
}

/// The `shell` row `message_id` of `session_id`, when it is one whose output may be emptied; else
/// why not.
///
/// Errors: SQLite's.
pub(crate) fn read(
    conn: &Connection,
    session_id: &str,
    message_id: &str,
) -> rusqlite::Result<Result<ShellRow, Unread>> {
    let Some((kind, data)) = super::load_row(conn, session_id, message_id)? else {
        return Ok(Err(Unread::NotShell));
    };
    if kind != "shell" {
        return Ok(Err(Unread::NotShell));
    }
    let data = match data {
        super::RowData::Text(data) => data,
        super::RowData::OverBudget => return Ok(Err(Unread::OverBudget)),
        super::RowData::NotText => return Ok(Err(Unread::Malformed)),
    };
    let Ok(Value::Object(mut row)) = serde_json::from_str::<Value>(&data) else {
        return Ok(Err(Unread::Malformed));
    };
    // A command still running writes its output on: OpenCode 2 marks it `running`.
    if row.get("status").and_then(Value::as_str) == Some("running")
        || row
            .get("time")
            .and_then(|time| time.get("completed"))
            .is_none()
    {
        return Ok(Err(Unread::Running));
    }
    let output = row.remove("output").unwrap_or(Value::Null);
    if !matches!(output.get("output"), Some(Value::String(_))) {
        return Ok(Err(Unread::NoOutput));
    }
    Ok(Ok(ShellRow {
        data,
        output,
        shell_id: row
            .get("shellID")
            .and_then(Value::as_str)
            .map(str::to_string),
    }))
}

/// The revision a prune of a `shell` row's output is bound to: that of its `output` value;
/// `None` when the row cannot be read as one ([`read`]).
///
/// Errors: SQLite's.
pub(crate) fn revision_of(
    conn: &Connection,
    session_id: &str,
    message_id: &str,
) -> rusqlite::Result<Option<String>> {
    Ok(read(conn, session_id, message_id)?
        .ok()
        .map(|row| revision(std::slice::from_ref(&row.output))))
}

/// A planned emptying: the row as read, and the plan its receipt records.
pub(crate) struct ShellPlan {
    /// The row's `data`, exactly as read.
    pub(crate) data: String,
    /// Revisions (the output's before and after), bytes, the operation.
    pub(crate) plan: Plan,
    /// The run OpenCode 2 abandoned that the fence admitted the prune beside.
    pub(crate) abandoned: Option<Abandoned>,
}

/// The fence (at `clock`), the receipt lookup, the row read ([`read`]), the revision
/// (`conflict`) and nothing left to empty (`not_deletable`), inside the caller's transaction.
///
/// Errors: SQLite's.
pub(crate) fn prepare(
    conn: &Connection,
    schema: &Schema,
    request: &PruneRequest,
    request_key: &str,
    clock: FenceClock,
) -> rusqlite::Result<Prepared<ShellPlan>> {
    let abandoned = match fence::check(conn, schema, &request.session_id, &request.scope, clock)? {
        Ok(abandoned) => abandoned,
        Err(refusal) => return Ok(Prepared::Refuse(refusal)),
    };
    if let Some(replayed) = write::replayed(conn, request_key, request)? {
        return Ok(replayed);
    }
    let row = match read(conn, &request.session_id, &request.message_id)? {
        Ok(row) => row,
        Err(unread) => return Ok(Prepared::Refuse(unread.refusal(&request.message_id))),
    };
    let before = revision(std::slice::from_ref(&row.output));
    if before != request.revision {
        return Ok(Prepared::Refuse(Refusal::new(
            BlockedReason::Conflict,
            "the shell row's output changed since it was read: read it again",
        )));
    }
    let text = row
        .output
        .get("output")
        .and_then(Value::as_str)
        .unwrap_or("");
    if text.is_empty() {
        return Ok(Prepared::Refuse(Refusal::new(
            BlockedReason::NotDeletable,
            "the shell row keeps no output to empty",
        )));
    }
    let mut emptied_output = row.output.clone();
    emptied_output["output"] = Value::String(String::new());
    // What the row shrinks by, as stored (the output's escapes included), as the write counts it.
    let shrinks = (row.data.len() as u64).saturating_sub(emptied(conn, &row.data)?.len() as u64);
    Ok(Prepared::Plan(ShellPlan {
        plan: Plan {
            remove: Vec::new(),
            revision_before: before,
            revision_after: revision(std::slice::from_ref(&emptied_output)),
            bytes: shrinks,
            operation: Some(Operation::ShellOutput(ShellOutputPruned {
                shell_id: row.shell_id,
            })),
        },
        data: row.data,
        abandoned,
    }))
}

/// The text the emptying writes over `data`: `output.output` set to `""` as SQLite's
/// `json_set` sets it (the row minified, as OpenCode's own updates through SQLite leave it).
///
/// Errors: SQLite's.
pub(crate) fn emptied(conn: &Connection, data: &str) -> rusqlite::Result<String> {
    crate::cached::query_row(
        conn,
        "SELECT json_set(?1, '$.output.output', '')",
        [data],
        |row| row.get(0),
    )
}

/// Empties the output (compare-and-swap on the text read; `conflict` when the row changed), the
/// row as it was captured first when `capture`.
///
/// Errors: SQLite's.
pub(crate) fn write(
    conn: &Connection,
    request: &PruneRequest,
    planned: &ShellPlan,
    capture: bool,
) -> rusqlite::Result<Result<Written, Refusal>> {
    let removed_rows = if capture {
        Some(super::apply::capture_row(conn, request)?)
    } else {
        None
    };
    let after = emptied(conn, &planned.data)?;
    let changed = crate::cached::execute(
        conn,
        "UPDATE session_message SET data = ?1 WHERE session_id = ?2 AND id = ?3 AND data = ?4",
        params![after, request.session_id, request.message_id, planned.data],
    )?;
    if changed != 1 {
        return Ok(Err(Refusal::new(
            BlockedReason::Conflict,
            "the shell row changed while its output was being emptied",
        )));
    }
    // What the row reads as now must be what the plan left: a row SQLite and this engine read
    // apart (a key given twice, say) is not rewritten.
    if revision_of(conn, &request.session_id, &request.message_id)?.as_deref()
        != Some(planned.plan.revision_after.as_str())
    {
        return Ok(Err(Refusal::new(
            BlockedReason::UnsupportedStorage,
            format!(
                "shell row {} is not JSON as OpenCode writes it (a key given twice?): SQLite and \
                 this engine read its output apart, so it is left as it is",
                request.message_id
            ),
        )));
    }
    Ok(Ok(Written {
        part_ids: Vec::new(),
        operation: planned.plan.operation.clone(),
        bytes_removed: (planned.data.len() as u64).saturating_sub(after.len() as u64),
        removed_rows,
    }))
}
