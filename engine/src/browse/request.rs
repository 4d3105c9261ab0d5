//! The browsing requests as parsed and validated: `window`, `outline`, `outlinePreview`,
//! `assets`, `assetRead` (shapes of CodeNomad's navigation and assets contracts; unknown keys
//! are refused, ids are 1 to 256 UTF-16 code units).

use serde::{Deserialize, Serialize};

use super::{ASSETS_CURSOR_CHARS, MAX_ASSET_INDEX, MAX_CHECKPOINTS, PREVIEW_IDS};
use crate::contract::{check_body_size, check_id};
use crate::ContractError;

/// Where a window lies: `{kind:"latest"}`, `{kind:"oldest"}`, or `{kind, messageID}` with
/// `kind` one of `around`, `before`, `after`. Also the `older`/`newer`/`resume` of an answer.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Target {
    /// The newest messages.
    Latest {},
    /// The oldest messages.
    Oldest {},
    /// 80 messages before the anchor, and 120 from it on.
    Around {
        /// The anchor.
        #[serde(rename = "messageID")]
        message_id: String,
    },
    /// The messages before the anchor (184 of them, and 16 from it on).
    Before {
        /// The anchor.
        #[serde(rename = "messageID")]
        message_id: String,
    },
    /// The messages after the anchor (184 of them, and 16 up to it).
    After {
        /// The anchor.
        #[serde(rename = "messageID")]
        message_id: String,
    },
}

impl Target {
    /// The anchor message, for the kinds that have one.
    pub fn anchor(&self) -> Option<&str> {
        match self {
            Self::Latest {} | Self::Oldest {} => None,
            Self::Around { message_id }
            | Self::Before { message_id }
            | Self::After { message_id } => Some(message_id),
        }
    }
}

/// `window {sessionID, target}`: at most 200 messages of a session, oldest first.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowRequest {
    /// The session, 1 to 256 characters.
    #[serde(rename = "sessionID")]
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 256))]
    pub session_id: String,
    /// Where the window lies.
    pub target: Target,
}

impl WindowRequest {
    /// Parses and validates a JSON body.
    ///
    /// Errors: [`ContractError`] for a body over 1 MiB, malformed JSON, an unknown key, or an
    /// id outside 1..=256 characters.
    pub fn from_json(body: &str) -> Result<Self, ContractError> {
        check_body_size(body)?;
        let request: Self = ContractError::parse(body)?;
        request.validate()
    }

    /// Checks the ids of a request built in code (the CLI's). Errors: as [`Self::from_json`].
    pub fn validate(self) -> Result<Self, ContractError> {
        check_id("sessionID", &self.session_id)?;
        if let Some(anchor) = self.target.anchor() {
            check_id("messageID", anchor)?;
        }
        Ok(self)
    }
}

/// Where the next outline page starts: after `after`, up to the horizon `through` (sequence
/// numbers, see [`OutlineRequest`]).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutlineCursor {
    /// The last sequence number already answered.
    pub after: u64,
    /// The horizon the scan was fixed to by its first page.
    pub through: u64,
}

/// A checkpoint the client holds from an earlier outline: the chunk of sequence numbers
/// `after < seq <= through` and the digest of its rows.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KnownCheckpoint {
    /// Exclusive start, -1 for the session's start.
    #[cfg_attr(feature = "openapi", schema(minimum = -1))]
    pub after: i64,
    /// Inclusive end.
    pub through: u64,
    /// SHA-256 of the chunk's rows, 64 lowercase hex characters.
    #[cfg_attr(feature = "openapi", schema(pattern = "^[a-f0-9]{64}$"))]
    pub digest: String,
    /// The `changed` of the page the checkpoint came in, accepted so that a client may send
    /// checkpoints back as it got them; not read.
    #[serde(
        default,
        skip_serializing,
        deserialize_with = "crate::contract::not_null"
    )]
    pub changed: Option<bool>,
}

/// `outline {sessionID, cursor?, after?, known?}`: one entry per message, in chunks with
/// checkpoints; a chunk whose checkpoint the client sent back unchanged comes without entries.
///
/// Sequence numbers: V2 rows carry their own (`session_message.seq`); a V1 message's is its
/// position (from 0) in the session's `(time_created, id)` order (docs/ARCHITECTURE.md,
/// "Browsing").
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutlineRequest {
    /// The session, 1 to 256 characters.
    #[serde(rename = "sessionID")]
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 256))]
    pub session_id: String,
    /// The previous page's cursor, to go on with a scan.
    #[serde(default, deserialize_with = "crate::contract::not_null")]
    pub cursor: Option<OutlineCursor>,
    /// Start after this sequence number (-1, the default: from the start); ignored with a
    /// cursor.
    #[serde(default = "from_start")]
    #[cfg_attr(feature = "openapi", schema(minimum = -1))]
    pub after: i64,
    /// Checkpoints the client holds, in order (at most 512).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 512))]
    pub known: Vec<KnownCheckpoint>,
}

fn from_start() -> i64 {
    -1
}

impl OutlineRequest {
    /// Parses and validates a JSON body.
    ///
    /// Errors: [`ContractError`] for a body over 1 MiB, malformed JSON, an unknown key, a bad
    /// id, `after` below -1, more than 512 checkpoints, or a checkpoint whose `after` is below
    /// -1 or whose digest is not 64 lowercase hex characters. (Checkpoints that do not follow
    /// each other are answered `blocked/conflict`, as CodeNomad does.)
    pub fn from_json(body: &str) -> Result<Self, ContractError> {
        check_body_size(body)?;
        let request: Self = ContractError::parse(body)?;
        request.validate()
    }

    /// Checks a request built in code. Errors: as [`Self::from_json`].
    pub fn validate(self) -> Result<Self, ContractError> {
        check_id("sessionID", &self.session_id)?;
        if self.after < -1 {
            return Err(invalid("after", "after must be -1 or more"));
        }
        if let Some(cursor) = self.cursor {
            if cursor.after > cursor.through {
                return Err(invalid(
                    "cursor",
                    "cursor.after must not be past cursor.through (send back a page's cursor as it came)",
                ));
            }
        }
        if self.known.len() > MAX_CHECKPOINTS {
            return Err(invalid(
                "known",
                format!(
                    "known holds {} checkpoints; at most {MAX_CHECKPOINTS} are accepted",
                    self.known.len()
                ),
            ));
        }
        for (i, checkpoint) in self.known.iter().enumerate() {
            if checkpoint.after < -1 {
                return Err(invalid(
                    format!("known[{i}].after"),
                    "after must be -1 or more",
                ));
            }
            if !hex_digest(&checkpoint.digest) {
                return Err(invalid(
                    format!("known[{i}].digest"),
                    "digest must be 64 lowercase hex characters",
                ));
            }
        }
        Ok(self)
    }

    /// Whether the checkpoints follow each other: each ends after it starts, and each starts
    /// where the one before it ends (CodeNomad answers `blocked/conflict` otherwise).
    pub fn known_is_a_chain(&self) -> bool {
        self.known.iter().enumerate().all(|(i, c)| {
            c.through as i128 > c.after as i128
                && (i == 0 || c.after as i128 == self.known[i - 1].through as i128)
        })
    }
}

/// `outlinePreview {sessionID, messageIDs}`: text and tool excerpts of 1 to 12 messages.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutlinePreviewRequest {
    /// The session, 1 to 256 characters.
    #[serde(rename = "sessionID")]
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 256))]
    pub session_id: String,
    /// 1 to 12 message ids; repeats are answered once.
    #[serde(rename = "messageIDs")]
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 12))]
    pub message_ids: Vec<String>,
}

impl OutlinePreviewRequest {
    /// Parses and validates a JSON body.
    ///
    /// Errors: [`ContractError`] for a body over 1 MiB, malformed JSON, an unknown key, a bad
    /// id, or no message id or more than 12.
    pub fn from_json(body: &str) -> Result<Self, ContractError> {
        check_body_size(body)?;
        let request: Self = ContractError::parse(body)?;
        request.validate()
    }

    /// Checks a request built in code. Errors: as [`Self::from_json`].
    pub fn validate(self) -> Result<Self, ContractError> {
        check_id("sessionID", &self.session_id)?;
        let count = self.message_ids.len();
        if count == 0 || count > PREVIEW_IDS {
            return Err(invalid(
                "messageIDs",
                format!("messageIDs takes 1 to {PREVIEW_IDS} ids, got {count}"),
            ));
        }
        for id in &self.message_ids {
            check_id("messageIDs", id)?;
        }
        Ok(self)
    }

    /// The ids to answer: repeats dropped, first occurrence kept, in order.
    pub fn distinct_ids(&self) -> Vec<&str> {
        let mut seen = std::collections::HashSet::new();
        self.message_ids
            .iter()
            .map(String::as_str)
            .filter(|id| seen.insert(*id))
            .collect()
    }
}

/// `assets {sessionID, cursor?}`: the file attachments of a session's tool output, newest
/// message first, 64 a page.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssetsRequest {
    /// The session, 1 to 256 characters.
    #[serde(rename = "sessionID")]
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 256))]
    pub session_id: String,
    /// The previous page's cursor (at most 4,096 characters).
    #[serde(default, deserialize_with = "crate::contract::not_null")]
    #[cfg_attr(feature = "openapi", schema(max_length = 4096))]
    pub cursor: Option<String>,
}

impl AssetsRequest {
    /// Parses and validates a JSON body.
    ///
    /// Errors: [`ContractError`] for a body over 1 MiB, malformed JSON, an unknown key, a bad
    /// id or a cursor over 4,096 characters.
    pub fn from_json(body: &str) -> Result<Self, ContractError> {
        check_body_size(body)?;
        let request: Self = ContractError::parse(body)?;
        check_id("sessionID", &request.session_id)?;
        if let Some(cursor) = &request.cursor {
            let len = cursor.encode_utf16().count();
            if len > ASSETS_CURSOR_CHARS {
                return Err(ContractError::TooLong {
                    field: "cursor",
                    len,
                    max: ASSETS_CURSOR_CHARS,
                });
            }
        }
        Ok(request)
    }
}

/// One attachment: the file at `index` of the `state.content` of the tool part at `part` of a
/// message, and the SHA-256 of its URI (so that a read never answers another file).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssetTarget {
    /// The message.
    #[serde(rename = "messageID")]
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 256))]
    pub message_id: String,
    /// The tool part's position among the message's parts (V1: in part id order; V2: in
    /// `content`), 0 to 100,000.
    #[cfg_attr(feature = "openapi", schema(maximum = 100000))]
    pub part: u32,
    /// The file's position in the tool's attachments (V1 `state.attachments`, V2
    /// `state.content`), 0 to 100,000.
    #[cfg_attr(feature = "openapi", schema(maximum = 100000))]
    pub index: u32,
    /// SHA-256 of the file's URI, 64 lowercase hex characters.
    #[cfg_attr(feature = "openapi", schema(pattern = "^[a-f0-9]{64}$"))]
    pub digest: String,
}

/// `assetRead {sessionID, target}`: one attachment as its `data:` URI.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssetReadRequest {
    /// The session, 1 to 256 characters.
    #[serde(rename = "sessionID")]
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 256))]
    pub session_id: String,
    /// The attachment, as an `assets` page named it.
    pub target: AssetTarget,
}

impl AssetReadRequest {
    /// Parses and validates a JSON body.
    ///
    /// Errors: [`ContractError`] for a body over 1 MiB, malformed JSON, an unknown key, a bad
    /// id, an index above 100,000 or a digest that is not 64 lowercase hex characters.
    pub fn from_json(body: &str) -> Result<Self, ContractError> {
        check_body_size(body)?;
        let request: Self = ContractError::parse(body)?;
        check_id("sessionID", &request.session_id)?;
        check_id("messageID", &request.target.message_id)?;
        for (field, value) in [
            ("target.part", request.target.part),
            ("target.index", request.target.index),
        ] {
            if value > MAX_ASSET_INDEX {
                return Err(invalid(
                    field,
                    format!("{field} must be 0 to {MAX_ASSET_INDEX}"),
                ));
            }
        }
        if !hex_digest(&request.target.digest) {
            return Err(invalid(
                "target.digest",
                "digest must be 64 lowercase hex characters",
            ));
        }
        Ok(request)
    }
}

fn hex_digest(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn invalid(field: impl Into<String>, detail: impl Into<String>) -> ContractError {
    ContractError::Invalid {
        field: field.into(),
        detail: detail.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_by_kind_and_refuse_extra_keys() {
        let parsed = WindowRequest::from_json(
            r#"{"sessionID":"ses_a","target":{"kind":"around","messageID":"msg_a"}}"#,
        )
        .unwrap();
        assert_eq!(
            parsed.target,
            Target::Around {
                message_id: "msg_a".into()
            }
        );
        assert_eq!(
            serde_json::to_string(&Target::Latest {}).unwrap(),
            r#"{"kind":"latest"}"#
        );
        for bad in [
            r#"{"sessionID":"ses_a","target":{"kind":"latest","messageID":"m"}}"#,
            r#"{"sessionID":"ses_a","target":{"kind":"sideways"}}"#,
            r#"{"sessionID":"ses_a","target":{"kind":"around"}}"#,
            r#"{"sessionID":"","target":{"kind":"latest"}}"#,
            r#"{"sessionID":"ses_a","target":{"kind":"latest"},"sql":"x"}"#,
        ] {
            assert!(WindowRequest::from_json(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn outline_defaults_and_bounds() {
        let parsed = OutlineRequest::from_json(r#"{"sessionID":"ses_a"}"#).unwrap();
        assert_eq!(
            (parsed.after, parsed.cursor, parsed.known.len()),
            (-1, None, 0)
        );
        let digest = "a".repeat(64);
        let chain = format!(
            r#"{{"sessionID":"s","known":[{{"after":-1,"through":5,"digest":"{digest}"}},{{"after":5,"through":9,"digest":"{digest}"}}]}}"#
        );
        assert!(OutlineRequest::from_json(&chain)
            .unwrap()
            .known_is_a_chain());
        let gap = chain.replace(r#""after":5"#, r#""after":6"#);
        assert!(!OutlineRequest::from_json(&gap).unwrap().known_is_a_chain());
        for bad in [
            r#"{"sessionID":"s","after":-2}"#.to_string(),
            chain.replace(&digest, &"A".repeat(64)),
            r#"{"sessionID":"s","cursor":{"after":-1,"through":2}}"#.to_string(),
        ] {
            assert!(OutlineRequest::from_json(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn previews_take_one_to_twelve_ids() {
        let ids = |n: usize| {
            (0..n)
                .map(|i| format!("\"m{i}\""))
                .collect::<Vec<_>>()
                .join(",")
        };
        for (n, ok) in [(0, false), (1, true), (12, true), (13, false)] {
            let body = format!(r#"{{"sessionID":"s","messageIDs":[{}]}}"#, ids(n));
            assert_eq!(OutlinePreviewRequest::from_json(&body).is_ok(), ok, "{n}");
        }
        let repeated =
            OutlinePreviewRequest::from_json(r#"{"sessionID":"s","messageIDs":["b","a","b"]}"#)
                .unwrap();
        assert_eq!(repeated.distinct_ids(), ["b", "a"]);
    }

    #[test]
    fn asset_targets_are_bounded() {
        let digest = "0".repeat(64);
        let body = |part: u32, digest: &str| {
            format!(
                r#"{{"sessionID":"s","target":{{"messageID":"m","part":{part},"index":0,"digest":"{digest}"}}}}"#
            )
        };
        assert!(AssetReadRequest::from_json(&body(100_000, &digest)).is_ok());
        assert!(AssetReadRequest::from_json(&body(100_001, &digest)).is_err());
        assert!(AssetReadRequest::from_json(&body(0, "00")).is_err());
        let long = format!(r#"{{"sessionID":"s","cursor":"{}"}}"#, "x".repeat(4097));
        assert!(AssetsRequest::from_json(&long).is_err());
    }
}
