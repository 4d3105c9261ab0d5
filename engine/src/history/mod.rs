//! `history`: paged scans of session history for search, statistics and batch pruning.
//!
//! Source: docs/ARCHITECTURE.md, "Contract" and "History scans", and CodeNomad's
//! `history.test.ts`. A page scans at most 32 rows (messages) in [`Position`] order (session by
//! session in session id order, oldest first within a session) and stops early after about
//! 40 ms; its cursor resumes the same scan (same scope, session, query and purpose) within the
//! [`Horizon`] the first page fixed.
//! Rows that cannot be read (malformed, over 16 MiB) and incomplete assistant messages count as
//! `skipped`. With `purpose: "prune"`, a candidate is a message every technical part of which a
//! batch prune could remove now as far as the message itself tells, in storage this store can
//! write ([`SessionStore::live_mutation`]). Reads only; nothing is journaled.

pub mod cursor;
pub mod page;
pub mod request;
pub mod scan;
pub mod search;

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

pub use cursor::{Cursor, Horizon, Position, UNTIMED};
pub use page::{HistoryCandidate, HistoryHit, HistoryPage, HistoryResult, PAGE_ROWS};
pub use request::{HistoryRequest, Purpose};
pub use scan::{HistoryScan, ScanEnd, ScannedContent, ScannedMessage};
pub use search::{Matcher, SearchKind};

use crate::contract::Refusal;
use crate::error::EngineError;
use crate::planner::PartClass;
use crate::store::SessionStore;

/// How much one page may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLimits {
    /// Most rows scanned (at most [`PAGE_ROWS`]).
    pub rows: usize,
    /// After this long the page ends at the row being scanned (at least one row is scanned).
    pub time_budget: Duration,
}

impl Default for PageLimits {
    /// 32 rows, 40 ms (CodeNomad's page).
    fn default() -> Self {
        Self {
            rows: PAGE_ROWS,
            time_budget: Duration::from_millis(40),
        }
    }
}

/// What [`history`] answers: the contract result and, when blocked, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryOutcome {
    /// The contract answer.
    pub result: HistoryResult,
    /// The refusal with its explanation, when blocked.
    pub refusal: Option<Refusal>,
    /// The rows the page counted as `skipped`, as `(messageID, why)`, in scan order (for people;
    /// not part of the contract page).
    pub skipped: Vec<(String, String)>,
}

/// Scans one page of history through `store` with the default [`PageLimits`].
///
/// Errors: [`EngineError::Contract`] for a cursor that is damaged or was made for another
/// request; [`EngineError::Store`] when the store fails.
pub fn history<S: SessionStore + ?Sized>(
    store: &S,
    request: &HistoryRequest,
) -> Result<HistoryOutcome, EngineError> {
    history_with(store, request, PageLimits::default())
}

/// [`history`] with explicit limits.
pub fn history_with<S: SessionStore + ?Sized>(
    store: &S,
    request: &HistoryRequest,
    limits: PageLimits,
) -> Result<HistoryOutcome, EngineError> {
    let location = store.location();
    let cursor = match &request.cursor {
        Some(text) => Some(Cursor::decode(text, request, location.as_deref())?),
        None => None,
    };
    let scan = HistoryScan {
        session_id: request.session_id.as_deref(),
        scope: &request.scope,
        after: cursor.as_ref().map(|c| &c.after),
        horizon: cursor.as_ref().map(|c| &c.horizon),
        limit: limits.rows.clamp(1, PAGE_ROWS),
    };
    let matcher = match request.purpose {
        Purpose::Search => Matcher::new(&request.query),
        Purpose::Stats | Purpose::Prune => None,
    };
    // The clock starts with the first row: finding where the page starts is not budgeted, or a
    // slow first query would leave one row per page.
    let mut started = None;
    let mut page = HistoryPage::default();
    let mut skipped = Vec::new();
    let mut last = None;
    let mut visit = |row: ScannedMessage| {
        page.scanned += 1;
        if let Some(why) = take_row(&mut page, &row, matcher.as_ref(), request) {
            skipped.push((row.position.message_id.clone(), why));
        }
        last = Some(row.position);
        let started = *started.get_or_insert_with(Instant::now);
        if page.scanned as usize >= scan.limit || started.elapsed() >= limits.time_budget {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    };
    let end = match store.scan_history(&scan, &mut visit)? {
        Ok(end) => end,
        Err(refusal) => {
            return Ok(HistoryOutcome {
                result: HistoryResult::Blocked {
                    reason: refusal.reason,
                },
                refusal: Some(refusal),
                skipped: Vec::new(),
            })
        }
    };
    // A message this store cannot write (OpenCode 1.18's V2 rows) is no candidate.
    if let Some(session_id) = &request.session_id {
        page.candidates
            .retain(|candidate| store.live_mutation(session_id, &candidate.message_id));
    }
    page.cursor = match (end.exhausted, end.horizon, last) {
        (false, Some(horizon), Some(after)) => {
            Some(Cursor { horizon, after }.encode(request, location.as_deref()))
        }
        _ => None,
    };
    Ok(HistoryOutcome {
        result: HistoryResult::Page(page),
        refusal: None,
        skipped,
    })
}

/// Adds what one row holds to the page; `Some(why)` when the row is skipped.
fn take_row(
    page: &mut HistoryPage,
    row: &ScannedMessage,
    matcher: Option<&Matcher>,
    request: &HistoryRequest,
) -> Option<String> {
    let content = match &row.read {
        Ok(content) if !content.message.is_assistant || content.message.completed => content,
        Ok(_) => {
            page.skipped += 1;
            return Some("the assistant message is not complete (a run may still be writing it, or was killed)".into());
        }
        Err(why) => {
            page.skipped += 1;
            return Some(why.clone());
        }
    };
    let message = &content.message;
    let count = |wanted: fn(&PartClass) -> bool| {
        message.parts.iter().filter(|p| wanted(&p.class)).count() as u32
    };
    let tools = count(|class| matches!(class, PartClass::Tool(_)));
    let reasoning = count(|class| matches!(class, PartClass::Reasoning));
    page.tools += tools;
    page.reasoning += reasoning;

    if let Some(matcher) = matcher {
        if let Some((part_index, kind, excerpt)) = first_match(content, matcher, request) {
            page.hits.push(HistoryHit {
                session_id: row.session_id.clone(),
                message_id: row.position.message_id.clone(),
                role: row.role.chars().take(page::MAX_ROLE_LEN).collect(),
                part_index,
                kind,
                excerpt,
            });
        }
    }
    if request.purpose == Purpose::Prune
        && row.addressable
        && tools + reasoning > 0
        && message.check_prunable().is_ok()
    {
        page.candidates.push(HistoryCandidate {
            message_id: row.position.message_id.clone(),
            revision: message.revision(),
            tool_count: tools,
            reasoning_count: reasoning,
        });
    }
    None
}

/// The first part (in content order) whose searchable text holds the query.
fn first_match(
    content: &ScannedContent,
    matcher: &Matcher,
    request: &HistoryRequest,
) -> Option<(u32, SearchKind, String)> {
    if let Some(excerpt) = content
        .body_text
        .as_deref()
        .and_then(|t| matcher.excerpt(t))
    {
        return Some((0, SearchKind::Text, excerpt));
    }
    content
        .message
        .parts
        .iter()
        .enumerate()
        .find_map(|(index, part)| {
            let kind = match part.class {
                PartClass::Kept
                    if part.value.get("type").and_then(|t| t.as_str()) == Some("text") =>
                {
                    SearchKind::Text
                }
                PartClass::Tool(_) if request.include_technical => SearchKind::Tool,
                PartClass::Reasoning if request.include_technical => SearchKind::Reasoning,
                _ => return None,
            };
            search::part_texts(&part.value, kind)
                .into_iter()
                .find_map(|text| matcher.excerpt(text))
                .map(|excerpt| (index as u32, kind, excerpt))
        })
}
