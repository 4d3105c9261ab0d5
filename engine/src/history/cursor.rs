//! The history cursor: where a scan stopped and where it will end, bound to the database, scope
//! and query it was made for.
//!
//! Source: CodeNomad's `history.test.ts`: a cursor is bound to scope and query, and
//! the scan horizon ignores rows appended mid-scan. Rows are visited in [`Position`] order
//! (`time_created`, then id, then storage generation: OpenCode ids wrapped on 2026-08-14, so
//! time comes first). The first page fixes the horizon, the last row that existed then; later
//! pages visit rows after the cursor and up to the horizon only, so a row appended mid-scan
//! neither shifts the cursor nor extends the scan.
//!
//! Text form (opaque to callers, at most 4,096 characters for ids up to 1,000 bytes):
//! `h1.<binding: 32 hex>.<horizon>.<after>`, a position being
//! `<time_created>_<generation>_<hex of the message id>`. The binding is a plain hash, not a
//! signature: a forged cursor only moves a read position, and the scope is checked on every
//! page.

use sha2::{Digest, Sha256};

use crate::error::ContractError;
use crate::history::request::HistoryRequest;
use crate::revision::canonical_json;

const VERSION: &str = "h1";

/// A row's place in the scan order: by time, then id, then generation (fields compare in that
/// order).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    /// The row's `time_created`, ms since the Unix epoch; [`UNTIMED`] for a row whose
    /// `time_created` is not an integer (such rows come last, by id).
    pub time_created: i64,
    /// The message id (compared bytewise, as SQLite's BINARY collation does).
    pub message_id: String,
    /// The storage generation: 1 for V1 `message`, 2 for V2 `session_message` (a database
    /// upgraded to V2 may hold the same id in both).
    pub generation: u8,
}

/// The time of rows whose `time_created` is not an integer (or is `i64::MAX`): after every
/// other row.
pub const UNTIMED: i64 = i64::MAX;

/// A decoded cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// The last row of the scan, fixed by its first page.
    pub horizon: Position,
    /// The last row visited.
    pub after: Position,
}

impl Cursor {
    /// The cursor's text for `request` on the database at `location`.
    pub fn encode(&self, request: &HistoryRequest, location: Option<&str>) -> String {
        format!(
            "{VERSION}.{}.{}.{}",
            binding(request, location),
            encode_position(&self.horizon),
            encode_position(&self.after)
        )
    }

    /// Decodes `text`, which must have been made for the same database, scope, session, query,
    /// `includeTechnical` and purpose as `request`.
    ///
    /// Errors: [`ContractError::Cursor`] for text that is not a cursor, or one made for
    /// another request or database.
    pub fn decode(
        text: &str,
        request: &HistoryRequest,
        location: Option<&str>,
    ) -> Result<Self, ContractError> {
        let bad = |detail: &str| ContractError::Cursor {
            detail: detail.to_string(),
        };
        let mut pieces = text.split('.');
        let (Some(version), Some(bound), Some(horizon), Some(after), None) = (
            pieces.next(),
            pieces.next(),
            pieces.next(),
            pieces.next(),
            pieces.next(),
        ) else {
            return Err(bad("not a history cursor"));
        };
        if version != VERSION {
            return Err(bad("not a history cursor of this version"));
        }
        if bound != binding(request, location) {
            return Err(bad(
                "the cursor belongs to another query, scope or database; start again without a cursor",
            ));
        }
        let horizon = decode_position(horizon).ok_or_else(|| bad("damaged horizon"))?;
        let after = decode_position(after).ok_or_else(|| bad("damaged position"))?;
        if after > horizon {
            return Err(bad("the position lies past the horizon"));
        }
        Ok(Self { horizon, after })
    }
}

/// First 16 bytes, in hex, of SHA-256 of the canonical JSON of everything a page depends on
/// except the cursor: the database (`location`, [`crate::SessionStore::location`]), the scope,
/// the session, the query, `includeTechnical` and the purpose.
fn binding(request: &HistoryRequest, location: Option<&str>) -> String {
    let body = serde_json::json!({
        "database": location,
        "sessionID": request.session_id,
        "query": request.query,
        "includeTechnical": request.include_technical,
        "purpose": request.purpose.as_str(),
        "scope": request.scope,
    });
    let digest = Sha256::digest(canonical_json(&body).as_bytes());
    hex::encode(&digest[..16])
}

fn encode_position(position: &Position) -> String {
    format!(
        "{}_{}_{}",
        position.time_created,
        position.generation,
        hex::encode(position.message_id.as_bytes())
    )
}

fn decode_position(text: &str) -> Option<Position> {
    let mut pieces = text.split('_');
    let time_created = pieces.next()?.parse().ok()?;
    let generation = pieces.next()?.parse().ok()?;
    let id_hex = pieces.next()?;
    // One spelling per id (lowercase), so that a cursor has one text.
    if id_hex.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    let id = hex::decode(id_hex).ok()?;
    if pieces.next().is_some() || !matches!(generation, 1 | 2) {
        return None;
    }
    Some(Position {
        time_created,
        generation,
        message_id: String::from_utf8(id).ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::request::Purpose;
    use crate::scope::Scope;

    fn request(query: &str) -> HistoryRequest {
        HistoryRequest::new(
            Some("ses_1".into()),
            query.into(),
            true,
            Purpose::Search,
            None,
        )
        .unwrap()
    }

    fn cursor() -> Cursor {
        Cursor {
            horizon: Position {
                time_created: 20,
                message_id: "msg_b".into(),
                generation: 2,
            },
            after: Position {
                time_created: -5,
                message_id: "msg_a.x_y".into(),
                generation: 1,
            },
        }
    }

    #[test]
    fn a_cursor_round_trips_for_the_same_request() {
        let text = cursor().encode(&request("q"), Some("/db"));
        assert_eq!(
            Cursor::decode(&text, &request("q"), Some("/db")),
            Ok(cursor())
        );
    }

    #[test]
    fn a_cursor_is_refused_for_another_query_or_scope() {
        let text = cursor().encode(&request("q"), Some("/db"));
        let foreign = ContractError::Cursor {
            detail: "the cursor belongs to another query, scope or database; start again without a cursor"
                .into(),
        };
        assert_eq!(
            Cursor::decode(&text, &request("Q"), Some("/db")),
            Err(foreign.clone())
        );
        assert_eq!(
            Cursor::decode(&text, &request("q"), Some("/other.db")),
            Err(foreign.clone())
        );
        let scoped = request("q").within(Scope {
            directory: Some("/repo".into()),
            ..Scope::default()
        });
        assert_eq!(Cursor::decode(&text, &scoped, Some("/db")), Err(foreign));
        assert!(matches!(
            Cursor::decode("h1.zz", &request("q"), Some("/db")),
            Err(ContractError::Cursor { .. })
        ));
    }
}
