//! The history cursor: where a scan stopped and where it will end, bound to the database, scope
//! and query it was made for.
//!
//! Source: docs/ARCHITECTURE.md, "History scans", and CodeNomad's `history.test.ts`: a cursor
//! is bound to scope and query, and the scan horizon ignores rows appended mid-scan.
//!
//! Rows are visited in [`Position`] order: session by session (by session id, bytewise), and
//! within a session by `time_created`, then message id, then storage generation (OpenCode ids
//! wrapped on 2026-08-14, so time comes before id). Each session's rows are one range of the
//! indexes OpenCode keeps on `(session_id, ...)`, so a page costs the same however many rows the
//! database holds. The first page fixes the [`Horizon`]: per storage generation, the highest row
//! number that existed then. Later pages visit rows after the cursor and within the horizon only,
//! so a row appended mid-scan, in a session already visited or one still to come, is neither
//! visited nor shifts the cursor.
//!
//! Text form (opaque to callers, at most 4,096 characters for ids up to 900 bytes, the longest a
//! scan visits):
//! `h2.<binding: 32 hex>.<horizon>.<after>`, the horizon being `<v1>_<v2>` (each a row number,
//! or `-` for none) and the position `<hex of the session id>_<time_created>_<generation>_<hex of
//! the message id>`. The binding is a plain hash, not a signature: a forged cursor only moves a
//! read position, and the scope is checked on every page. Cursors of the earlier time-ordered
//! scan (`h1`) are refused with words that say so: their positions name no session.

use sha2::{Digest, Sha256};

use crate::error::ContractError;
use crate::history::request::HistoryRequest;
use crate::revision::canonical_json;

const VERSION: &str = "h2";
/// The version of the cursors made before scans went session by session.
const TIME_ORDERED: &str = "h1";

/// A row's place in the scan order: by session id, then time, then message id, then generation
/// (fields compare in that order, ids bytewise as SQLite's BINARY collation does).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    /// The row's session.
    pub session_id: String,
    /// The row's `time_created`, ms since the Unix epoch; [`UNTIMED`] for a row whose
    /// `time_created` is not an integer (such rows come last in their session, by id).
    pub time_created: i64,
    /// The message id.
    pub message_id: String,
    /// The storage generation: 1 for V1 `message`, 2 for V2 `session_message` (a database
    /// upgraded to V2 may hold the same id in both).
    pub generation: u8,
}

/// The time of rows whose `time_created` is not an integer (or is `i64::MAX`): after every
/// other row of their session.
pub const UNTIMED: i64 = i64::MAX;

/// Where a scan ends: for each storage generation, the highest row number (SQLite's `rowid`)
/// its table held when the scan's first page ran. Rows numbered above it were appended later
/// and are not visited. `None`: the table held no row then (or does not exist), so none of its
/// rows are visited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Horizon {
    /// V1 `message`.
    pub v1: Option<i64>,
    /// V2 `session_message`.
    pub v2: Option<i64>,
}

impl Horizon {
    /// The last row number of `generation` (1 or 2; `None` for any other).
    pub fn last_row(&self, generation: u8) -> Option<i64> {
        match generation {
            1 => self.v1,
            2 => self.v2,
            _ => None,
        }
    }
}

/// A decoded cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// The end of the scan, fixed by its first page.
    pub horizon: Horizon,
    /// The last row visited.
    pub after: Position,
}

impl Cursor {
    /// The cursor's text for `request` on the database at `location`.
    pub fn encode(&self, request: &HistoryRequest, location: Option<&str>) -> String {
        format!(
            "{VERSION}.{}.{}.{}",
            binding(request, location),
            encode_horizon(&self.horizon),
            encode_position(&self.after)
        )
    }

    /// Decodes `text`, which must have been made for the same database, scope, session, query,
    /// `includeTechnical` and purpose as `request`.
    ///
    /// Errors: [`ContractError::Cursor`] for text that is not a cursor, a cursor of the earlier
    /// time-ordered scan (`h1`), or one made for another request or database.
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
        if version == TIME_ORDERED {
            return Err(bad(
                "a cursor of the earlier time-ordered scan, which pages no longer follow (they go session by session now); start again without a cursor",
            ));
        }
        if version != VERSION {
            return Err(bad("not a history cursor of this version"));
        }
        if bound != binding(request, location) {
            return Err(bad(
                "the cursor belongs to another query, scope or database; start again without a cursor",
            ));
        }
        let horizon = decode_horizon(horizon).ok_or_else(|| bad("damaged horizon"))?;
        let after = decode_position(after).ok_or_else(|| bad("damaged position"))?;
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

fn encode_horizon(horizon: &Horizon) -> String {
    let row = |last: Option<i64>| last.map_or_else(|| "-".to_string(), |n| n.to_string());
    format!("{}_{}", row(horizon.v1), row(horizon.v2))
}

fn decode_horizon(text: &str) -> Option<Horizon> {
    let row = |piece: &str| -> Option<Option<i64>> {
        if piece == "-" {
            return Some(None);
        }
        // One spelling per number, so that a cursor has one text.
        let n: i64 = piece.parse().ok()?;
        (n.to_string() == piece).then_some(Some(n))
    };
    let (v1, v2) = text.split_once('_')?;
    Some(Horizon {
        v1: row(v1)?,
        v2: row(v2)?,
    })
}

fn encode_position(position: &Position) -> String {
    format!(
        "{}_{}_{}_{}",
        hex::encode(position.session_id.as_bytes()),
        position.time_created,
        position.generation,
        hex::encode(position.message_id.as_bytes())
    )
}

fn decode_position(text: &str) -> Option<Position> {
    let mut pieces = text.split('_');
    let session_id = decode_id(pieces.next()?)?;
    let time_created = pieces.next()?.parse().ok()?;
    let generation = pieces.next()?.parse().ok()?;
    let message_id = decode_id(pieces.next()?)?;
    if pieces.next().is_some() || !matches!(generation, 1 | 2) {
        return None;
    }
    Some(Position {
        session_id,
        time_created,
        generation,
        message_id,
    })
}

/// An id from its lowercase hex (one spelling per id, so that a cursor has one text).
fn decode_id(hex_text: &str) -> Option<String> {
    if hex_text.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    String::from_utf8(hex::decode(hex_text).ok()?).ok()
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
            horizon: Horizon {
                v1: Some(-3),
                v2: None,
            },
            after: Position {
                session_id: "ses_é.1".into(),
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
            Cursor::decode("h2.zz", &request("q"), Some("/db")),
            Err(ContractError::Cursor { .. })
        ));
    }

    #[test]
    fn the_text_names_the_session_and_each_generations_last_row() {
        let text = cursor().encode(&request("q"), Some("/db"));
        let pieces: Vec<&str> = text.split('.').collect();
        assert_eq!(pieces.len(), 4);
        assert_eq!(pieces[0], "h2");
        assert_eq!(pieces[2], "-3_-");
        assert_eq!(
            pieces[3],
            format!(
                "{}_-5_1_{}",
                hex::encode("ses_é.1"),
                hex::encode("msg_a.x_y")
            )
        );
    }

    #[test]
    fn the_longest_cursor_fits_the_contracts_bound() {
        // Ids of 900 bytes, the longest a scan visits (a request names at most 256 UTF-16
        // units, 768 bytes); the widest numbers.
        let request = HistoryRequest::new(None, String::new(), true, Purpose::Stats, None).unwrap();
        let session = "é".repeat(450);
        let longest = Cursor {
            horizon: Horizon {
                v1: Some(i64::MIN),
                v2: Some(i64::MIN),
            },
            after: Position {
                session_id: session,
                time_created: i64::MIN,
                message_id: "m".repeat(900),
                generation: 2,
            },
        };
        let text = longest.encode(&request, Some("/db"));
        assert_eq!(text.len(), 3702);
        assert!(text.len() <= crate::history::request::MAX_CURSOR_LEN);
        assert_eq!(Cursor::decode(&text, &request, Some("/db")), Ok(longest));
    }

    #[test]
    fn a_time_ordered_cursor_is_refused_in_words() {
        // The shape `h1` cursors had: `h1.<binding>.<horizon>.<after>`, positions
        // `<time>_<generation>_<hex id>`.
        let text = cursor().encode(&request("q"), Some("/db"));
        let binding = text.split('.').nth(1).unwrap();
        let old = format!("h1.{binding}.20_2_6d73675f62.5_1_6d73675f61");
        assert_eq!(
            Cursor::decode(&old, &request("q"), Some("/db")),
            Err(ContractError::Cursor {
                detail: "a cursor of the earlier time-ordered scan, which pages no longer follow (they go session by session now); start again without a cursor".into()
            })
        );
    }

    #[test]
    fn a_horizon_or_position_in_another_spelling_is_damaged() {
        let text = cursor().encode(&request("q"), Some("/db"));
        let pieces: Vec<&str> = text.split('.').collect();
        let with = |horizon: &str, after: &str| {
            Cursor::decode(
                &format!("h2.{}.{horizon}.{after}", pieces[1]),
                &request("q"),
                Some("/db"),
            )
        };
        let damaged = |detail: &str| {
            Err(ContractError::Cursor {
                detail: detail.into(),
            })
        };
        for horizon in ["+3_-", "-03_-", "3", "3_4_5", "x_-", "-_"] {
            assert_eq!(
                with(horizon, pieces[3]),
                damaged("damaged horizon"),
                "{horizon}"
            );
        }
        let upper = pieces[3].to_ascii_uppercase();
        for after in [
            "6d_1_1",
            "6d_1_3_6d",
            "6d_x_1_6d",
            "ff_1_1_6d",
            upper.as_str(),
        ] {
            assert_eq!(
                with(pieces[2], after),
                damaged("damaged position"),
                "{after}"
            );
        }
        assert_eq!(
            with("-_-", "_0_2_"),
            Ok(Cursor {
                horizon: Horizon { v1: None, v2: None },
                after: Position {
                    session_id: String::new(),
                    time_created: 0,
                    message_id: String::new(),
                    generation: 2,
                },
            })
        );
    }
}
