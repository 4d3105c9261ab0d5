//! The history answer: `{status:"page", scanned, tools, reasoning, skipped, hits, candidates,
//! cursor}` or `{status:"blocked", reason}`.
//!
//! Source: docs/ARCHITECTURE.md, "Contract" (`history` output). CodeNomad's native page also
//! carries
//! `sessions[]`, which its broker strips before HTTP output; this shape is the stripped one.

use serde::{Deserialize, Serialize};

use crate::contract::BlockedReason;
use crate::history::search::SearchKind;

/// Most rows one page scans, hits and candidates it lists.
pub const PAGE_ROWS: usize = 32;
/// Longest `role`, in characters.
pub const MAX_ROLE_LEN: usize = 32;

/// A history answer.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum HistoryResult {
    /// One page of the scan.
    Page(HistoryPage),
    /// The scan could not run (a session that is missing or outside the scope:
    /// `not_deletable`; storage this engine does not know: `unsupported_storage`).
    Blocked {
        /// Why.
        reason: BlockedReason,
    },
}

/// One page: what the rows it scanned hold.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HistoryPage {
    /// Rows (messages) scanned by this page, skipped ones included; at most 32.
    pub scanned: u32,
    /// Tool parts in the scanned rows that were read.
    pub tools: u32,
    /// Reasoning parts in the scanned rows that were read.
    pub reasoning: u32,
    /// Rows not read: malformed, over the 16 MiB budget, or an incomplete assistant message.
    pub skipped: u32,
    /// Search matches, at most one per message (its first matching part), in scan order.
    #[cfg_attr(feature = "openapi", schema(max_items = 32))]
    pub hits: Vec<HistoryHit>,
    /// With `purpose: "prune"`: the messages a batch prune could take, in scan order.
    #[cfg_attr(feature = "openapi", schema(max_items = 32))]
    pub candidates: Vec<HistoryCandidate>,
    /// Where the next page starts; `null` when the scan reached its horizon.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub cursor: Option<String>,
}

/// A search match: `{sessionID, messageID, role, partIndex, kind, excerpt}`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HistoryHit {
    /// Session of the message.
    #[serde(rename = "sessionID")]
    pub session_id: String,
    /// The message.
    #[serde(rename = "messageID")]
    pub message_id: String,
    /// `user`, `assistant`, or a V2 message type; at most 32 characters.
    pub role: String,
    /// Index of the matching part in the message content (0 for a V2 message's own `text`).
    #[serde(rename = "partIndex")]
    pub part_index: u32,
    /// `text`, `tool` or `reasoning`.
    pub kind: SearchKind,
    /// Up to 320 characters of the matching text, from a little before the match.
    pub excerpt: String,
}

/// A message a batch prune may take: `{messageID, revision, toolCount, reasoningCount}`. The
/// revision binds the prune to the content the page saw.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryCandidate {
    /// The message (1 to 256 characters).
    #[serde(rename = "messageID")]
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 256))]
    pub message_id: String,
    /// Revision of its content when scanned (64 lowercase hex).
    #[cfg_attr(feature = "openapi", schema(pattern = "^[0-9a-f]{64}$"))]
    pub revision: String,
    /// Its tool parts.
    #[serde(rename = "toolCount")]
    #[cfg_attr(feature = "openapi", schema(maximum = 4294967295_u64))]
    pub tool_count: u32,
    /// Its reasoning parts.
    #[serde(rename = "reasoningCount")]
    #[cfg_attr(feature = "openapi", schema(maximum = 4294967295_u64))]
    pub reasoning_count: u32,
}
