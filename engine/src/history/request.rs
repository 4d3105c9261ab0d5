//! The history request `{sessionID?, query, includeTechnical, purpose, cursor?}` and its bounds.
//!
//! Source: docs/ARCHITECTURE.md, "Contract" (`history`): `query` at most 200 characters (default
//! `""`),
//! `includeTechnical` default true, `purpose` one of `search`, `stats`, `prune` (default
//! `search`; `prune` needs `sessionID`), `cursor` at most 4,096 characters. Unknown keys are
//! rejected, as CodeNomad's `.strict()` schemas do.

use serde::{Deserialize, Serialize};

use crate::contract::{check_body_size, check_id};
use crate::error::ContractError;
use crate::scope::Scope;

/// Longest accepted query, in UTF-16 code units (zod `.max(200)`).
pub const MAX_QUERY_LEN: usize = 200;
/// Longest accepted cursor, in UTF-16 code units (zod `.max(4096)`).
pub const MAX_CURSOR_LEN: usize = 4096;

/// What a history scan is for.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Purpose {
    /// Find parts whose text holds the query (`hits`).
    #[default]
    Search,
    /// Count tool and reasoning parts only.
    Stats,
    /// List the messages a batch prune could take (`candidates`); needs a session.
    Prune,
}

impl Purpose {
    /// The contract's name (`search`, `stats`, `prune`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Search => "search",
            Self::Stats => "stats",
            Self::Prune => "prune",
        }
    }
}

/// A validated history request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryRequest {
    /// Scan one session, or every session in the scope when `None`.
    pub session_id: Option<String>,
    /// Case-insensitive text to find; empty finds nothing.
    pub query: String,
    /// Whether tool and reasoning parts are searched too.
    pub include_technical: bool,
    /// What the page is for.
    pub purpose: Purpose,
    /// Where the previous page stopped (opaque, from [`crate::history::HistoryPage`]).
    pub cursor: Option<String>,
    /// The sessions the caller may read; not part of the body (see [`Scope`]). A cursor is bound
    /// to it.
    pub scope: Scope,
}

/// The history body `{sessionID?, query?, includeTechnical?, purpose?, cursor?}` as parsed.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = HistoryRequest))]
#[serde(deny_unknown_fields)]
pub struct RawHistory {
    /// Scan one session (1 to 256 characters), or every session of the workspace; required
    /// with `purpose: "prune"`.
    #[serde(
        rename = "sessionID",
        default,
        deserialize_with = "crate::contract::not_null"
    )]
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 256))]
    session_id: Option<String>,
    /// Case-insensitive text to find, at most 200 characters; empty finds nothing.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_length = 200))]
    query: String,
    /// Whether tool and reasoning parts are searched too.
    #[serde(rename = "includeTechnical", default = "yes")]
    #[cfg_attr(feature = "openapi", schema(default = true))]
    include_technical: bool,
    /// What the page is for.
    #[serde(default, deserialize_with = "crate::contract::given")]
    purpose: Purpose,
    /// Where the previous page stopped (its `cursor`), 1 to 4,096 characters.
    #[serde(default, deserialize_with = "crate::contract::not_null")]
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 4096))]
    cursor: Option<String>,
}

fn yes() -> bool {
    true
}

impl HistoryRequest {
    /// Parses and validates a JSON history body.
    ///
    /// Errors: [`ContractError`] for a body over 1 MiB, malformed JSON, an unknown key, an
    /// unknown purpose, a bad session id, a query over 200 or a cursor over 4,096 characters, or
    /// `purpose: "prune"` without `sessionID`.
    pub fn from_json(body: &str) -> Result<Self, ContractError> {
        check_body_size(body)?;
        let raw: RawHistory = ContractError::parse(body)?;
        Self::new(
            raw.session_id,
            raw.query,
            raw.include_technical,
            raw.purpose,
            raw.cursor,
        )
    }

    /// Builds a validated request. Same errors as [`Self::from_json`].
    pub fn new(
        session_id: Option<String>,
        query: String,
        include_technical: bool,
        purpose: Purpose,
        cursor: Option<String>,
    ) -> Result<Self, ContractError> {
        if let Some(session_id) = &session_id {
            check_id("sessionID", session_id)?;
        }
        let query_len = query.encode_utf16().count();
        if query_len > MAX_QUERY_LEN {
            return Err(ContractError::TooLong {
                field: "query",
                len: query_len,
                max: MAX_QUERY_LEN,
            });
        }
        if let Some(cursor) = &cursor {
            let len = cursor.encode_utf16().count();
            if len > MAX_CURSOR_LEN {
                return Err(ContractError::TooLong {
                    field: "cursor",
                    len,
                    max: MAX_CURSOR_LEN,
                });
            }
        }
        if purpose == Purpose::Prune && session_id.is_none() {
            return Err(ContractError::PruneNeedsSession);
        }
        Ok(Self {
            session_id,
            query,
            include_technical,
            purpose,
            cursor,
            scope: Scope::default(),
        })
    }

    /// The same request, limited to `scope`.
    pub fn within(self, scope: Scope) -> Self {
        Self { scope, ..self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_contract() {
        let request = HistoryRequest::from_json("{}").unwrap();
        assert_eq!(request.query, "");
        assert!(request.include_technical);
        assert_eq!(request.purpose, Purpose::Search);
        assert_eq!(request.session_id, None);
        assert_eq!(request.cursor, None);
    }

    #[test]
    fn bounds_and_unknown_keys_are_rejected() {
        assert_eq!(
            HistoryRequest::from_json(r#"{"purpose":"prune"}"#),
            Err(ContractError::PruneNeedsSession)
        );
        assert_eq!(
            HistoryRequest::from_json(&format!(r#"{{"query":"{}"}}"#, "é".repeat(201))),
            Err(ContractError::TooLong {
                field: "query",
                len: 201,
                max: 200
            })
        );
        assert!(
            HistoryRequest::from_json(&format!(r#"{{"query":"{}"}}"#, "é".repeat(200))).is_ok()
        );
        assert_eq!(
            HistoryRequest::from_json(r#"{"limit":5}"#),
            Err(ContractError::UnknownKey {
                key: "limit".into()
            })
        );
        assert!(matches!(
            HistoryRequest::from_json(r#"{"purpose":"delete"}"#),
            Err(ContractError::Malformed { .. })
        ));
        assert!(matches!(
            HistoryRequest::from_json(r#"{"sessionID":""}"#),
            Err(ContractError::IdLength { .. })
        ));
    }
}
