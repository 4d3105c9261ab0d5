//! What crosses the [`crate::SessionStore`] boundary for a history scan: the rows to visit and
//! each row as read. The store does the I/O in [`Position`] order; the engine decides what a row
//! contributes and when a page is full.

use crate::history::cursor::{Horizon, Position};
use crate::planner::StoredMessage;
use crate::scope::Scope;

/// Which rows to visit.
#[derive(Debug, Clone, Copy)]
pub struct HistoryScan<'a> {
    /// One session, or every session in `scope` when `None`.
    pub session_id: Option<&'a str>,
    /// The sessions the caller may read.
    pub scope: &'a Scope,
    /// Visit rows after this position (`None`: from the first).
    pub after: Option<&'a Position>,
    /// Visit rows within this horizon; `None` on a first page, whose horizon the store fixes
    /// (the last row of each generation now) and returns in [`ScanEnd::horizon`].
    pub horizon: Option<&'a Horizon>,
    /// Most rows to visit.
    pub limit: usize,
}

/// One row of a scan.
#[derive(Debug, Clone)]
pub struct ScannedMessage {
    /// Its place in the scan order.
    pub position: Position,
    /// Its session.
    pub session_id: String,
    /// V1 `role`, or the V2 row `type`.
    pub role: String,
    /// The message, or why it was not read (malformed JSON, over the 16 MiB budget).
    pub read: Result<ScannedContent, String>,
    /// Whether a prune of this message id reaches this row: a message held by both storage
    /// generations is pruned in one of them only, and only that row is a candidate.
    pub addressable: bool,
}

/// A row that was read.
#[derive(Debug, Clone)]
pub struct ScannedContent {
    /// The message as the planner sees it.
    pub message: StoredMessage,
    /// Text a V2 message holds outside `content` (a user message's `text`), searched as part 0.
    pub body_text: Option<String>,
}

/// How a scan ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanEnd {
    /// The horizon the scan ran to (`None`: the store fixed none, having nothing to scan).
    pub horizon: Option<Horizon>,
    /// Whether every row up to the horizon has now been visited.
    pub exhausted: bool,
}
