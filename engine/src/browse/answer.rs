//! The browsing answers: each is `{status: "blocked", reason}` or its own page, with the keys
//! in the order CodeNomad's plugin writes them.

use serde::Serialize;
use serde_json::Value;

use super::request::{AssetTarget, OutlineCursor, Target};

/// Why a browsing request was refused. The first five are the contract's [`BlockedReason`](crate::contract::BlockedReason)s
/// ([`crate::BlockedReason`]); `anchor_missing` is the window's, `missing` and `limit` the
/// assets'.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum BrowseReason {
    /// The request could not be run (an internal failure, or it was cancelled).
    Unavailable,
    /// (Never sent by reads; listed for the contract's shape.)
    MaintenanceRequired,
    /// What the request builds on changed: checkpoints that do not follow each other, or an
    /// assets cursor of another state of the session.
    Conflict,
    /// The session is missing or lies elsewhere.
    NotDeletable,
    /// The storage is not what the reader expects (a malformed row, a message over 16 MiB or a
    /// window over 24 MiB, a damaged cursor).
    UnsupportedStorage,
    /// The window's anchor message is gone (deleted, or hidden by a staged revert).
    AnchorMissing,
    /// The asset's message is gone, or is over 16 MiB.
    Missing,
    /// CodeNomad's answer for an assets page that meets a message over 16 MiB. This engine
    /// passes such a message over instead (so that older attachments stay within reach) and
    /// never sends it; it stays for the contract's shape.
    Limit,
}

impl BrowseReason {
    /// The reason's string (`anchor_missing`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unavailable => "unavailable",
            Self::MaintenanceRequired => "maintenance_required",
            Self::Conflict => "conflict",
            Self::NotDeletable => "not_deletable",
            Self::UnsupportedStorage => "unsupported_storage",
            Self::AnchorMissing => "anchor_missing",
            Self::Missing => "missing",
            Self::Limit => "limit",
        }
    }
}

impl std::fmt::Display for BrowseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The answer of `window`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum WindowResult {
    /// At most 200 messages, oldest first.
    Window {
        /// V1: `{info, parts}` as OpenCode's `GET /session/{id}/message` answers them; V2: the
        /// `session_message` row's `data` with its `id` and `type`.
        #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>, max_items = 200))]
        messages: Vec<Value>,
        /// The window before this one; `null` at the session's start.
        older: Option<Target>,
        /// The window after this one; `null` at its end.
        newer: Option<Target>,
        /// The request's target, as sent.
        resume: Target,
        /// Whether the window reaches the newest message (`newer` is `null`).
        latest: bool,
    },
    /// Refused; nothing was read.
    Blocked {
        /// Why.
        reason: BrowseReason,
    },
}

/// One message in an outline.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutlineEntry {
    /// The message id.
    pub id: String,
    /// Its sequence number (see [`super::OutlineRequest`]).
    pub seq: u64,
    /// V2: `session_message.type`; V1: the message's `role` (`user` or `assistant`).
    #[serde(rename = "type")]
    pub kind: String,
    /// Tool parts in it.
    pub tools: u64,
    /// Reasoning parts in it.
    pub reasoning: u64,
    /// The first tool part's tool name (at most 256 UTF-16 code units); present exactly when
    /// `tools` is not 0, and empty when no tool part names its tool.
    #[serde(rename = "toolName", skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
}

/// A chunk of an outline page: the messages with `after < seq <= through`, the digest of
/// their rows, and whether its entries are in the page (`changed`) or the client's copy holds.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Checkpoint {
    /// Exclusive start (-1 for the session's start).
    pub after: i64,
    /// Inclusive end.
    pub through: u64,
    /// SHA-256 (lowercase hex) of the JSON array of the chunk's rows
    /// `{id, type, seq, time_updated, bytes}`.
    pub digest: String,
    /// True when the page carries the chunk's entries: the client sent no checkpoint equal to
    /// this one, or the chunk reaches the newest message (the live tail is always re-read).
    pub changed: bool,
}

/// The answer of `outline`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum OutlineResult {
    /// One page.
    Outline {
        /// The entries of the changed chunks, in sequence order (at most 16,384).
        #[cfg_attr(feature = "openapi", schema(max_items = 16384))]
        entries: Vec<OutlineEntry>,
        /// Every chunk of the page, in order (at most 512).
        #[cfg_attr(feature = "openapi", schema(max_items = 512))]
        checkpoints: Vec<Checkpoint>,
        /// Messages up to the horizon.
        total: u64,
        /// Where the next page starts; `null` on the last page.
        cursor: Option<OutlineCursor>,
    },
    /// Refused; nothing was read.
    Blocked {
        /// Why.
        reason: BrowseReason,
    },
}

/// Excerpts of one message.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Excerpt {
    /// The message id, as requested.
    pub id: String,
    /// Its text (at most 4,096 UTF-16 code units).
    pub text: String,
    /// Its tool parts: name, title and output (at most 4,096 UTF-16 code units).
    pub tools: String,
}

/// The answer of `outlinePreview`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum PreviewsResult {
    /// One entry per requested message that exists and is visible, in request order.
    Previews {
        /// The excerpts.
        #[cfg_attr(feature = "openapi", schema(max_items = 12))]
        entries: Vec<Excerpt>,
    },
    /// Refused; nothing was read.
    Blocked {
        /// Why.
        reason: BrowseReason,
    },
}

/// One attachment in a page of assets (metadata only: no URI, no bytes).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AssetEntry {
    /// Where it is, for `assetRead`.
    pub target: AssetTarget,
    /// Its file name, or `TOOL · N` (N counted from 1) when it has none.
    pub name: String,
    /// The tool that produced it.
    pub tool: String,
    /// Its MIME type.
    pub mime: String,
    /// Whether `assetRead` can answer it (an embedded `data:` URI of its type, at most 8 MiB).
    pub available: bool,
}

/// The answer of `assets`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum AssetsResult {
    /// One page, newest message first.
    Page {
        /// At most 64 attachments.
        #[cfg_attr(feature = "openapi", schema(max_items = 64))]
        entries: Vec<AssetEntry>,
        /// Where the next page starts; `null` on the last page.
        cursor: Option<String>,
    },
    /// Refused.
    Blocked {
        /// Why.
        reason: BrowseReason,
    },
}

/// The answer of `assetRead`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum AssetResult {
    /// The attachment.
    Asset {
        /// `data:<mime>;base64,...`, at most 8 MiB.
        uri: String,
        /// Its MIME type.
        mime: String,
    },
    /// Refused.
    Blocked {
        /// Why.
        reason: BrowseReason,
    },
}
