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
}
