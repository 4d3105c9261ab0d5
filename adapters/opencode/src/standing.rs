//! Whether a receipt's prune still holds: what it removed is still gone. A prune whose content
//! came back behind the engine's back (a sync, a backup put over the rows while the receipts
//! stayed) does not: the same request is then a new prune, not an identical retry, so that a
//! clean removes that content again (`super::receipts::live_key`). The revision each kind of
//! prune is bound to, read now, is also what a restore compares.
//!
//! Source: docs/ARCHITECTURE.md, "Restore" ("Pruning again").

use pruning_engine::{BlockedReason, Receipt, Refusal};
use rusqlite::Connection;

use super::generation::Generation;
use super::schema::Schema;
use super::v1::read::{self, Texts};
use super::{v1, v2};

/// What a receipt's prune removed, which decides its revision and how its rows go back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Parts of a message.
    Parts,
    /// The file bodies of a user message's `summary.diffs`.
    Diffs,
    /// A session's superseded snapshots.
    Compaction,
    /// A message's 1.x rows OpenCode 2 migrated.
    MigratedV1,
    /// The output an OpenCode 2 `shell` row keeps.
    ShellOutput,
}

impl Kind {
    /// The kind of `receipt`'s prune (a restore's receipt names the kind it undid).
    pub(crate) fn of(receipt: &Receipt) -> Self {
        match receipt.operation {
            None => Self::Parts,
            Some(pruning_engine::Operation::Diffs(_)) => Self::Diffs,
            Some(pruning_engine::Operation::Compaction(_)) => Self::Compaction,
            Some(pruning_engine::Operation::MigratedV1(_)) => Self::MigratedV1,
            Some(pruning_engine::Operation::ShellOutput(_)) => Self::ShellOutput,
        }
    }
}

/// The revision a prune of `kind` is bound to, now, or why it cannot be read: the message's
/// content revision as its generation reads it, its diffs revision, the session's event log
/// revision, or its 1.x rows' revision (that of no rows when they are gone).
pub(crate) fn revision_of(
    conn: &Connection,
    generation: Generation,
    kind: Kind,
    session_id: &str,
    message_id: &str,
) -> rusqlite::Result<Result<String, Refusal>> {
    Ok(match (kind, generation) {
        (Kind::Compaction, _) => Ok(v1::compact::revision(conn, session_id)?),
        (Kind::Diffs, _) => {
            v1::diffs::revision_of(conn, session_id, message_id)?.ok_or_else(|| {
                refuse(
                    BlockedReason::Conflict,
                    format!("message {message_id} is gone or no longer a JSON object"),
                )
            })
        }
        (Kind::MigratedV1, _) => {
            use super::migrated::remove::{self, Unread};
            match remove::revision_of(conn, session_id, message_id)? {
                Ok(revision) => Ok(revision),
                Err(Unread::Missing) => Ok(remove::removed_revision()),
                Err(_) => Err(refuse(
                    BlockedReason::Conflict,
                    format!("the 1.x rows of message {message_id} cannot be read whole"),
                )),
            }
        }
        (Kind::ShellOutput, _) => {
            v2::shell::revision_of(conn, session_id, message_id)?.ok_or_else(|| {
                refuse(
                    BlockedReason::Conflict,
                    format!("row {message_id} is gone or no longer a shell row"),
                )
            })
        }
        (Kind::Parts, Generation::V1) => {
            read::read_message(conn, session_id, message_id, Texts::Skip)?
                .map(|m| m.message.revision())
        }
        (Kind::Parts, Generation::V2) => {
            v2::load(conn, session_id, message_id)?.map(|(message, _)| message.revision())
        }
    })
}

/// Whether the prune of `receipt` still holds: a compaction's deleted events are all still gone
/// (by id); any other prune's message is not back at the revision before it (its content, or its
/// diffs, exactly as the prune found them). A message that cannot be read, or is gone, holds.
///
/// Errors: SQLite's.
pub(crate) fn holds(
    conn: &Connection,
    schema: &Schema,
    receipt: &Receipt,
) -> rusqlite::Result<bool> {
    let kind = Kind::of(receipt);
    if let Some(pruning_engine::Operation::Compaction(compacted)) = &receipt.operation {
        if !schema.has_events() || compacted.event_ids.is_empty() {
            return Ok(true);
        }
        let ids = serde_json::to_string(&compacted.event_ids).unwrap_or_else(|_| "[]".into());
        let back: i64 = conn.query_row(
            "SELECT count(*) FROM event WHERE id IN (SELECT value FROM json_each(?1))",
            [ids],
            |row| row.get(0),
        )?;
        return Ok(back == 0);
    }
    let generation = Generation::of(conn, schema, &receipt.session_id, &receipt.message_id)?;
    Ok(
        match revision_of(
            conn,
            generation,
            kind,
            &receipt.session_id,
            &receipt.message_id,
        )? {
            Ok(now) => now != receipt.revision_before,
            Err(_) => true,
        },
    )
}

fn refuse(reason: BlockedReason, detail: impl Into<String>) -> Refusal {
    Refusal::new(reason, detail)
}
