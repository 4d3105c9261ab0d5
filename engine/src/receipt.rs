//! The receipt: the audit record of one committed prune, what a store writes in the prune's
//! transaction and what an identical retry returns (docs/ARCHITECTURE.md, "The write path of
//! one prune").

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The audit record of one committed prune, stored in the OpenCode database in the same
/// transaction as the prune. It never holds pruned content. JSON keys are camelCase
/// (`receiptId`, `committedAtMs`, ...), with ids spelled as in the contract (`sessionID`,
/// `messageID`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    /// Receipt id (UUID v7); also the id of the announced event.
    pub receipt_id: Uuid,
    /// The journaled intent that produced it.
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
    /// its `indexes` and `partIds` those it put back, `removedCount` and `bytesRemoved` 0, and
    /// `archiveHash` the entry it read. Absent from the JSON when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restores: Option<Uuid>,
}

impl Receipt {
    /// Whether this is the receipt of a restore rather than of a prune.
    pub fn is_restore(&self) -> bool {
        self.restores.is_some()
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
