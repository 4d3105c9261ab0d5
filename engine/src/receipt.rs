//! The receipt: the audit record of one committed prune, what a store writes in the prune's
//! transaction and what an identical retry returns (docs/ARCHITECTURE.md, "The write path of
//! one prune").

use pruning_journal::EventKind;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The audit record of one committed prune, stored in the OpenCode database in the same
/// transaction as the prune. It never holds pruned content. JSON keys are camelCase
/// (`committedAtMs`, ...), with every id spelled as the contract spells `sessionID` and
/// `messageID` (`receiptID`, `intentID`, `partIDs`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    /// Receipt id (UUID v7); also the id of the announced event.
    #[serde(rename = "receiptID")]
    pub receipt_id: Uuid,
    /// The journaled intent that produced it.
    #[serde(rename = "intentID")]
    pub intent_id: Uuid,
    /// Lowercase hex SHA-256 of the canonical request (see [`crate::request_key()`]).
    pub request_key: String,
    /// Session id.
    #[serde(rename = "sessionID")]
    pub session_id: String,
    /// Message id.
    #[serde(rename = "messageID")]
    pub message_id: String,
    /// Revision of the content before the prune (64 lowercase hex).
    #[cfg_attr(feature = "openapi", schema(pattern = "^[0-9a-f]{64}$"))]
    pub revision_before: String,
    /// Revision of the content after the prune (64 lowercase hex).
    #[cfg_attr(feature = "openapi", schema(pattern = "^[0-9a-f]{64}$"))]
    pub revision_after: String,
    /// Content indexes of the removed parts, ascending.
    pub indexes: Vec<u32>,
    /// Ids of the removed parts.
    #[serde(rename = "partIDs")]
    pub part_ids: Vec<String>,
    /// Number of parts removed.
    pub removed_count: u32,
    /// Bytes of row data deleted: the parts' `data` plus any snapshot events removed with them.
    pub bytes_removed: u64,
    /// Commit time, ms since the Unix epoch.
    pub committed_at_ms: i64,
    /// `CARGO_PKG_VERSION` of the engine that committed it.
    pub engine_version: String,
    /// Set when the fence admitted the prune although the session holds a run OpenCode left
    /// incomplete, because nothing of the session had been written for at least the store's
    /// `abandoned_after` (docs/ARCHITECTURE.md, "Fence"). Absent from the JSON when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abandoned_run: Option<AbandonedRun>,
    /// Set when the prune was archived: the entry hash of the rows it removed, lowercase hex
    /// SHA-256 of their encoding in the prune archive (docs/ARCHITECTURE.md, "Archive"). Absent
    /// from the JSON when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive_hash: Option<String>,
    /// Set on the receipt of a restore (not a prune): the id of the prune's receipt whose parts
    /// it put back. Such a receipt's revisions are the message's before and after the restore,
    /// its `indexes` and `partIDs` those it put back, `removedCount` and `bytesRemoved` 0, and
    /// `archiveHash` the entry it read. Absent from the JSON when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restores: Option<Uuid>,
    /// Set when the prune removed one of the copies OpenCode keeps besides the parts (a user
    /// message's `summary.diffs`, a session's superseded snapshots) rather than parts: what it
    /// removed. Such a receipt's `indexes` and `partIDs` are empty. On a restore's receipt, the
    /// operation of the prune it undid (what it put back). Absent from the JSON when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<Operation>,
}

impl Receipt {
    /// Whether this is the receipt of a restore rather than of a prune.
    pub fn is_restore(&self) -> bool {
        self.restores.is_some()
    }

    /// Whether this receipt is of a removal of a message's OpenCode 1.x rows OpenCode 2 migrated
    /// (or of its restore): it names the message OpenCode 2's copy has, not that copy's rows.
    pub fn is_migrated_v1(&self) -> bool {
        matches!(self.operation, Some(Operation::MigratedV1(_)))
    }

    /// Whether this is the receipt of a compaction (it names no message), not of its restore.
    pub fn is_compaction(&self) -> bool {
        !self.is_restore() && matches!(self.operation, Some(Operation::Compaction(_)))
    }

    /// A digest of the whole receipt: SHA-256 of its JSON (the form above, fields in their
    /// declared order, unset optional fields left out). The journal keeps it beside the
    /// receipt's event, so that the audit finds a receipt edited afterwards even when the edit
    /// was hashed into the receipt chain again (docs/ARCHITECTURE.md, "Audit"). A field added
    /// to the receipt must be optional and left out when unset, so that the digests of
    /// receipts written before stay what they were.
    pub fn digest(&self) -> [u8; 32] {
        use sha2::{Digest, Sha256};
        // A struct of strings, numbers and lists always serializes; an empty input would only
        // make the digest disagree, which the audit reports.
        Sha256::digest(serde_json::to_vec(self).unwrap_or_default()).into()
    }

    /// What the receipt says that contradicts itself, in words, or `None` when its ids agree
    /// with its counts and bytes: a prune of parts names one id per index, as many as it
    /// counts removed, indexes ascending, and some bytes; a prune of one of the copies names no
    /// part and counts what its operation did (the diff entries, the snapshots, the 1.x message
    /// row and its parts, the one shell output); a restore counts nothing removed and names the
    /// parts its prune named.
    pub fn contradiction(&self) -> Option<String> {
        let (indexes, ids) = (self.indexes.len(), self.part_ids.len());
        if indexes != ids {
            return Some(format!("it names {ids} part id(s) for {indexes} index(es)"));
        }
        if self.indexes.windows(2).any(|pair| pair[0] >= pair[1]) {
            return Some("its indexes are not ascending".to_string());
        }
        if self.is_restore() {
            if self.removed_count != 0 || self.bytes_removed != 0 {
                return Some(format!(
                    "a restore's receipt counts {} part(s) and {} byte(s) removed",
                    self.removed_count, self.bytes_removed
                ));
            }
            return None;
        }
        let counted = match &self.operation {
            None => {
                if self.bytes_removed == 0 {
                    return Some("it removed parts of no bytes".to_string());
                }
                u32::try_from(ids).ok().filter(|&count| count > 0)
            }
            Some(_) if ids > 0 => {
                return Some(format!("it names {ids} part id(s) besides its operation"))
            }
            Some(Operation::Diffs(diffs)) => Some(diffs.entries),
            Some(Operation::Compaction(compacted)) => compacted
                .part_snapshots
                .checked_add(compacted.message_snapshots)
                .and_then(|sum| sum.checked_add(compacted.session_snapshots)),
            Some(Operation::MigratedV1(removed)) => {
                if removed.part_ids.len() != removed.parts as usize {
                    return Some(format!(
                        "it names {} 1.x part id(s) for {} part(s)",
                        removed.part_ids.len(),
                        removed.parts
                    ));
                }
                removed.parts.checked_add(1)
            }
            Some(Operation::ShellOutput(_)) => Some(1),
        };
        match counted {
            Some(count) if count == self.removed_count => None,
            _ => Some(format!(
                "it counts {} removed where what it names makes {}",
                self.removed_count,
                counted.map_or_else(|| "no count".to_string(), |count| count.to_string())
            )),
        }
    }

    /// What the receipt's event announces: a restore, a compaction (with its bytes), or a prune
    /// (of parts or of diffs).
    pub fn event_kind(&self) -> EventKind {
        if self.is_restore() {
            EventKind::Restored
        } else if self.is_compaction() {
            EventKind::Compacted {
                bytes_removed: self.bytes_removed,
            }
        } else {
            EventKind::Pruned
        }
    }
}

/// What a prune of one of the copies OpenCode keeps removed (docs/ARCHITECTURE.md, "Copies
/// OpenCode keeps", "Migrated history"). JSON: `{"kind": "diffs", ...}`,
/// `{"kind": "compaction", ...}`, `{"kind": "migratedV1", ...}` or `{"kind": "shellOutput", ...}`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Operation {
    /// The file bodies of a user message's `summary.diffs` were emptied.
    Diffs(DiffsPruned),
    /// The superseded snapshots of a session's event log were deleted.
    Compaction(Compacted),
    /// The OpenCode 1.x rows of a message OpenCode 2 migrated were deleted.
    #[serde(rename = "migratedV1")]
    MigratedV1(MigratedRemoved),
    /// The output an OpenCode 2 `shell` row keeps of a command the user ran was emptied.
    #[serde(rename = "shellOutput")]
    ShellOutput(ShellOutputPruned),
}

/// What emptying a `shell` row's output changed: the command it ran (by OpenCode 2's shell id).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShellOutputPruned {
    /// The row's `shellID` (`sh_...`), when it has one.
    #[serde(rename = "shellID", default, skip_serializing_if = "Option::is_none")]
    pub shell_id: Option<String>,
}

/// What the removal of a message's migrated OpenCode 1.x rows deleted: its `message` row and
/// its `part` rows (no event: OpenCode 2 deleted the 1.x events when it migrated the file).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigratedRemoved {
    /// `part` rows deleted.
    pub parts: u32,
    /// Ids of the deleted `part` rows, by id.
    #[serde(rename = "partIDs")]
    pub part_ids: Vec<String>,
}

/// What a diffs prune changed: the entries of `summary.diffs` whose file bodies it emptied, in
/// the message row and in the newest `message.updated.1` snapshot of the message.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffsPruned {
    /// Entries whose `patch` (or `before`/`after`) text was emptied.
    pub entries: u32,
    /// The `message.updated.1` event rewritten with the message row, when the message has one
    /// in its session's event log.
    #[serde(
        rename = "snapshotID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub snapshot_id: Option<String>,
}

/// What a compaction deleted: superseded snapshots by type, and their event ids.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Compacted {
    /// `message.part.updated.1` events deleted.
    pub part_snapshots: u32,
    /// `message.updated.1` events deleted.
    pub message_snapshots: u32,
    /// `session.updated.1` events deleted.
    pub session_snapshots: u32,
    /// Ids of the deleted events, in the order they were deleted.
    #[serde(rename = "eventIDs")]
    pub event_ids: Vec<String>,
}

impl Compacted {
    /// Events deleted, of every type.
    pub fn total(&self) -> u32 {
        self.part_snapshots + self.message_snapshots + self.session_snapshots
    }
}

/// The incomplete run a fence admitted a prune beside: `{messageID, idleMs}`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AbandonedRun {
    /// The incomplete assistant message (or the message of the unfinished tool part) of the
    /// run; a prune never touches it.
    #[serde(rename = "messageID")]
    pub message_id: String,
    /// How long nothing of the session had been written when the prune committed, ms.
    pub idle_ms: i64,
}
