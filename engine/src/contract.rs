//! The request and response shapes of the CodeNomad session-pruning contract, and every bound on
//! them.
//!
//! Source: CodeNomad's `contract.ts` (schemas are `.strict()`: unknown keys are rejected) and
//! docs/ARCHITECTURE.md, "Contract". Requests are validated here, before anything is journaled or
//! written.
//! Responses serialize to exactly the compatible shapes, with no extra keys.

use serde::{Deserialize, Serialize};

use crate::error::ContractError;
use crate::scope::Scope;

/// Largest accepted request body, in bytes (CodeNomad's HTTP `bodyLimit`, 1 MiB).
pub const MAX_REQUEST_BYTES: usize = 1024 * 1024;
/// Longest accepted session or message id, in UTF-16 code units (zod `.max(256)` on a JS string).
pub const MAX_ID_LEN: usize = 256;
/// Largest accepted part index.
pub const MAX_INDEX: i64 = 100_000;
/// Most indexes one prune request may carry.
pub const MAX_INDEXES: usize = 100_001;
/// Largest stored message the engine reads, in bytes of `data` (CodeNomad's 16 MiB budget).
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// Most parts a message may have for the planner (CodeNomad caps `content` at 100,001 parts).
pub const MAX_PARTS: usize = 100_001;

/// `{sessionID, messageID}`: what to preview.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PreviewRequest {
    /// OpenCode session id (`ses_...`), 1 to 256 characters.
    #[serde(rename = "sessionID")]
    pub session_id: String,
    /// OpenCode message id (`msg_...`), 1 to 256 characters.
    #[serde(rename = "messageID")]
    pub message_id: String,
    /// The sessions the caller may read; not part of the body (see [`Scope`]).
    #[serde(skip)]
    pub scope: Scope,
}

/// What a prune removes: technical parts of an assistant message, or one of the copies OpenCode
/// keeps besides them (docs/ARCHITECTURE.md, "Copies OpenCode keeps").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// The parts at these indexes of the message content (sorted ascending, unique, at least one).
    Indexes(Vec<u32>),
    /// Every tool and reasoning part (CodeNomad's `pruneBatch` mode and the CLI's `--all-technical`).
    AllTechnical,
    /// No part: the file bodies in the entries of a V1 user message's `summary.diffs` (`patch`,
    /// and `before`/`after` in older releases), each emptied to `""`, in the message row and in
    /// its newest `message.updated.1` snapshot. The request's revision is the diffs revision
    /// ([`crate::revision::diffs_revision`]), not the content's.
    Diffs,
    /// No message: the superseded snapshots of the session's event log (a
    /// `message.part.updated.1`, `message.updated.1` or `session.updated.1` event of an entity
    /// that has a newer one of the same type in the session's aggregate) whose `event.seq` lies
    /// in the range. The request's `message_id` is empty and its revision is the event log's
    /// ([`crate::revision::event_log_revision`]). A session's compaction is one request per
    /// range, so that each one's transaction stays short (docs/ARCHITECTURE.md, "Copies
    /// OpenCode keeps").
    SupersededSnapshots(SeqRange),
    /// No part: every OpenCode 1.x row of a message that OpenCode 2 migrated, its `message` row
    /// and its `part` rows, a copy OpenCode 2 never reads (docs/ARCHITECTURE.md, "Migrated
    /// history"). The request's revision is the rows' ([`crate::revision::rows_revision`]).
    MigratedV1,
    /// No part: the output an OpenCode 2 `shell` row keeps of a command the user ran
    /// (`output.output`), emptied. OpenCode 2 shows it, but never sends it to the model again
    /// (the model got it through the `synthetic` row that follows, which stays). The request's
    /// revision is that of the row's `output` ([`crate::revision::revision`] of the value).
    ShellOutput,
}

/// An inclusive range of `event.seq` values (OpenCode's per-aggregate event sequence):
/// `first <= last`, both integers as SQLite stores them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SeqRange {
    /// The lowest `seq` in the range.
    pub first: i64,
    /// The highest `seq` in the range.
    pub last: i64,
}

impl SeqRange {
    /// The range `first..=last`.
    ///
    /// Errors: [`ContractError::Invalid`] on the field `seqs` when `first > last`.
    pub fn new(first: i64, last: i64) -> Result<Self, ContractError> {
        if first > last {
            return Err(ContractError::Invalid {
                field: "seqs".into(),
                detail: format!(
                    "a range of event seqs runs from its first to its last, got {first} to {last}"
                ),
            });
        }
        Ok(Self { first, last })
    }

    /// Whether `seq` lies in the range.
    pub fn contains(&self, seq: i64) -> bool {
        (self.first..=self.last).contains(&seq)
    }
}

impl From<&Selection> for pruning_journal::Selection {
    /// The selection as the journal records it in an intent.
    fn from(selection: &Selection) -> Self {
        match selection {
            Selection::Indexes(indexes) => Self::Indexes(indexes.clone()),
            Selection::AllTechnical => Self::AllTechnical,
            Selection::Diffs => Self::Diffs,
            Selection::SupersededSnapshots(seqs) => Self::SupersededSnapshotsIn {
                first_seq: seqs.first,
                last_seq: seqs.last,
            },
            Selection::MigratedV1 => Self::MigratedV1,
            Selection::ShellOutput => Self::ShellOutput,
        }
    }
}

impl Selection {
    /// Whether this selects technical parts of a message (the planner's kind of prune).
    pub fn is_parts(&self) -> bool {
        matches!(self, Self::Indexes(_) | Self::AllTechnical)
    }
}

/// `{sessionID, messageID, revision, indexes}`: a validated prune request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PruneRequest {
    /// OpenCode session id, 1 to 256 characters.
    pub session_id: String,
    /// OpenCode message id, 1 to 256 characters.
    pub message_id: String,
    /// The revision the caller previewed: 64 lowercase hex characters.
    pub revision: String,
    /// The parts to remove.
    pub selection: Selection,
    /// The sessions the caller may prune in; not part of the body nor of the request key, and
    /// checked by the fence inside the write transaction (see [`Scope`]).
    pub scope: Scope,
}

/// The preview body `{sessionID, messageID}` as parsed (unknown keys are rejected by serde).
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = PreviewRequest))]
#[serde(deny_unknown_fields)]
pub struct RawPreview {
    /// OpenCode session id (`ses_...`), 1 to 256 characters.
    #[serde(rename = "sessionID")]
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 256))]
    session_id: String,
    /// OpenCode message id (`msg_...`), 1 to 256 characters.
    #[serde(rename = "messageID")]
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 256))]
    message_id: String,
}

/// The prune body `{sessionID, messageID, revision, indexes}` as parsed. Indexes are read as
/// signed numbers so that `-1` gets a precise error.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = PruneRequest))]
#[serde(deny_unknown_fields)]
pub struct RawPrune {
    /// OpenCode session id, 1 to 256 characters.
    #[serde(rename = "sessionID")]
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 256))]
    session_id: String,
    /// OpenCode message id, 1 to 256 characters.
    #[serde(rename = "messageID")]
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 256))]
    message_id: String,
    /// The revision the caller previewed: 64 lowercase hex characters.
    #[cfg_attr(feature = "openapi", schema(pattern = "^[0-9a-f]{64}$"))]
    revision: String,
    /// The content indexes of the parts to remove.
    #[cfg_attr(feature = "openapi", schema(schema_with = index_list))]
    indexes: Vec<WholeNumber>,
}

/// One index as a JSON number whose value is an integer, however it is written: `2`, `2.0`,
/// `1e0`, `-0` (what JavaScript's `JSON.parse` reads as the integer, so what a client in another
/// language may send for it). A number with a fraction, or past 2^53 when written as a float,
/// is refused. Signed, so that `-1` gets the range's precise error.
#[derive(Debug, Clone, Copy)]
struct WholeNumber(i64);

impl<'de> Deserialize<'de> for WholeNumber {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = WholeNumber;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an integer")
            }
            fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<WholeNumber, E> {
                Ok(WholeNumber(value))
            }
            fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<WholeNumber, E> {
                // Far past the largest index: kept out of range, not wrapped.
                Ok(WholeNumber(i64::try_from(value).unwrap_or(i64::MAX)))
            }
            fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<WholeNumber, E> {
                // 2^53: every integer up to it is exact as a float.
                const EXACT: f64 = 9_007_199_254_740_992.0;
                if value.fract() == 0.0 && value.abs() <= EXACT {
                    Ok(WholeNumber(value as i64))
                } else {
                    Err(E::invalid_value(serde::de::Unexpected::Float(value), &self))
                }
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// The schema of `indexes`: 1 to [`MAX_INDEXES`] unique integers, each 0 to [`MAX_INDEX`].
#[cfg(feature = "openapi")]
fn index_list() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    let index = ObjectBuilder::new()
        .schema_type(Type::Integer)
        .minimum(Some(0))
        .maximum(Some(MAX_INDEX));
    ArrayBuilder::new()
        .items(index)
        .min_items(Some(1))
        .max_items(Some(MAX_INDEXES))
        .unique_items(true)
        .description(Some(format!(
            "The content indexes of the parts to remove: 1 to {MAX_INDEXES} of them, unique, \
             each 0 to {MAX_INDEX}."
        )))
        .build()
}

impl PreviewRequest {
    /// Parses and validates a JSON preview body.
    ///
    /// Errors: [`ContractError`] for a body over 1 MiB, malformed JSON, an unknown key, or an id
    /// outside 1..=256 characters.
    pub fn from_json(body: &str) -> Result<Self, ContractError> {
        check_body_size(body)?;
        let raw: RawPreview = ContractError::parse(body)?;
        Self::new(raw.session_id, raw.message_id)
    }

    /// Builds a validated preview request. Errors: [`ContractError::IdLength`].
    pub fn new(session_id: String, message_id: String) -> Result<Self, ContractError> {
        check_id("sessionID", &session_id)?;
        check_id("messageID", &message_id)?;
        Ok(Self {
            session_id,
            message_id,
            scope: Scope::default(),
        })
    }

    /// The same request, limited to `scope`.
    pub fn within(self, scope: Scope) -> Self {
        Self { scope, ..self }
    }
}

impl PruneRequest {
    /// Parses and validates a JSON prune body `{sessionID, messageID, revision, indexes}`.
    ///
    /// Errors: [`ContractError`] for a body over 1 MiB, malformed JSON, an unknown key, a bad id
    /// or revision, or indexes that are empty, duplicated, negative, above 100,000 or more than
    /// 100,001.
    pub fn from_json(body: &str) -> Result<Self, ContractError> {
        check_body_size(body)?;
        let raw: RawPrune = ContractError::parse(body)?;
        let indexes: Vec<i64> = raw.indexes.iter().map(|index| index.0).collect();
        Self::with_indexes(raw.session_id, raw.message_id, raw.revision, &indexes)
    }

    /// Builds a validated request that selects parts by index. Same errors as [`Self::from_json`].
    pub fn with_indexes(
        session_id: String,
        message_id: String,
        revision: String,
        indexes: &[i64],
    ) -> Result<Self, ContractError> {
        let selection = Selection::Indexes(validate_indexes(indexes)?);
        Self::new(session_id, message_id, revision, selection)
    }

    /// Builds a validated request that selects every technical part.
    pub fn all_technical(
        session_id: String,
        message_id: String,
        revision: String,
    ) -> Result<Self, ContractError> {
        Self::new(session_id, message_id, revision, Selection::AllTechnical)
    }

    /// Builds a validated request that empties the file bodies of a user message's
    /// `summary.diffs` ([`Selection::Diffs`]); `revision` is the message's diffs revision. Same
    /// errors as [`Self::from_json`] for the ids and the revision.
    pub fn diffs(
        session_id: String,
        message_id: String,
        revision: String,
    ) -> Result<Self, ContractError> {
        Self::new(session_id, message_id, revision, Selection::Diffs)
    }

    /// Builds a validated request that removes the OpenCode 1.x rows of a message OpenCode 2
    /// migrated ([`Selection::MigratedV1`]); `revision` is the rows' revision. Same errors as
    /// [`Self::from_json`] for the ids and the revision.
    pub fn migrated_v1(
        session_id: String,
        message_id: String,
        revision: String,
    ) -> Result<Self, ContractError> {
        Self::new(session_id, message_id, revision, Selection::MigratedV1)
    }

    /// Builds a validated request that empties the output an OpenCode 2 `shell` row keeps
    /// ([`Selection::ShellOutput`]); `revision` is that of the row's `output`. Same errors as
    /// [`Self::from_json`] for the ids and the revision.
    pub fn shell_output(
        session_id: String,
        message_id: String,
        revision: String,
    ) -> Result<Self, ContractError> {
        Self::new(session_id, message_id, revision, Selection::ShellOutput)
    }

    /// Builds a validated request that compacts the part of a session's event log whose
    /// `event.seq` lies in `seqs` ([`Selection::SupersededSnapshots`]): it names no message
    /// (`message_id` is empty), and `revision` is the event log's. Errors: a bad session id or
    /// revision ([`ContractError::IdLength`], [`ContractError::Revision`]).
    pub fn compaction(
        session_id: String,
        revision: String,
        seqs: SeqRange,
    ) -> Result<Self, ContractError> {
        check_id("sessionID", &session_id)?;
        check_revision(&revision)?;
        Ok(Self {
            session_id,
            message_id: String::new(),
            revision,
            selection: Selection::SupersededSnapshots(seqs),
            scope: Scope::default(),
        })
    }

    fn new(
        session_id: String,
        message_id: String,
        revision: String,
        selection: Selection,
    ) -> Result<Self, ContractError> {
        check_id("sessionID", &session_id)?;
        check_id("messageID", &message_id)?;
        check_revision(&revision)?;
        Ok(Self {
            session_id,
            message_id,
            revision,
            selection,
            scope: Scope::default(),
        })
    }

    /// The same request, limited to `scope`.
    pub fn within(self, scope: Scope) -> Self {
        Self { scope, ..self }
    }
}

/// `deserialize_with` of an optional request field: a missing field is `None` (with
/// `#[serde(default)]`), and `null` is refused like any other value of the wrong type, naming
/// the field: one rule for every optional field, as CodeNomad's strict schemas answer (an
/// optional field may be left out, never sent as `null`).
pub(crate) fn not_null<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    given(deserializer).map(Some)
}

/// [`not_null`] for an optional field with a default value rather than an `Option`.
pub(crate) fn given<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    // Read as an `Option` so that a `null` is told apart from another value of the wrong
    // type: serde_json reports a `null` where an enum is expected as a syntax error, which
    // would name no field.
    Option::<T>::deserialize(deserializer)?.ok_or_else(|| {
        serde::de::Error::invalid_type(
            serde::de::Unexpected::Unit,
            &"a value (an optional field is left out, never sent as null)",
        )
    })
}

/// Refuses a body over [`MAX_REQUEST_BYTES`] (1 MiB), as every route of the contract does.
///
/// Errors: [`ContractError::BodyTooLarge`].
pub fn check_body_size(body: &str) -> Result<(), ContractError> {
    if body.len() > MAX_REQUEST_BYTES {
        return Err(ContractError::BodyTooLarge {
            bytes: body.len(),
            limit: MAX_REQUEST_BYTES,
        });
    }
    Ok(())
}

/// Refuses an id (`sessionID`, `messageID`) that is empty or over [`MAX_ID_LEN`] UTF-16 code
/// units, as CodeNomad's contract does.
///
/// Errors: [`ContractError::IdLength`].
pub fn check_id(field: &'static str, id: &str) -> Result<(), ContractError> {
    let len = id.encode_utf16().count();
    if len == 0 || len > MAX_ID_LEN {
        return Err(ContractError::IdLength {
            field,
            len,
            max: MAX_ID_LEN,
        });
    }
    Ok(())
}

pub(crate) fn check_revision(revision: &str) -> Result<(), ContractError> {
    let ok = revision.len() == 64
        && revision
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !ok {
        return Err(ContractError::Revision {
            found: revision.chars().take(80).collect(),
        });
    }
    Ok(())
}

/// Checks the index list and returns it sorted ascending.
fn validate_indexes(indexes: &[i64]) -> Result<Vec<u32>, ContractError> {
    if indexes.is_empty() {
        return Err(ContractError::NoIndexes);
    }
    if indexes.len() > MAX_INDEXES {
        return Err(ContractError::TooManyIndexes {
            count: indexes.len(),
            max: MAX_INDEXES,
        });
    }
    let mut sorted = Vec::with_capacity(indexes.len());
    for &index in indexes {
        if !(0..=MAX_INDEX).contains(&index) {
            return Err(ContractError::IndexOutOfBounds {
                index,
                max: MAX_INDEX,
            });
        }
        // In range 0..=100_000, so the conversion cannot fail.
        sorted.push(
            u32::try_from(index).map_err(|_| ContractError::IndexOutOfBounds {
                index,
                max: MAX_INDEX,
            })?,
        );
    }
    sorted.sort_unstable();
    if let Some(pair) = sorted.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(ContractError::DuplicateIndex { index: pair[0] });
    }
    Ok(sorted)
}

/// The kind of a prunable part, as the contract names it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PartKind {
    /// A tool call with its input and output.
    Tool,
    /// Model reasoning.
    Reasoning,
}

/// One prunable part in a preview: `{index, type, bytes}`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PreviewPart {
    /// Position of the part in the message content.
    pub index: u32,
    /// `tool` or `reasoning`.
    #[serde(rename = "type")]
    pub kind: PartKind,
    /// UTF-8 length in bytes of `JSON.stringify(part)` in stored key order.
    pub bytes: u64,
}

/// Why a request was refused: the contract's `reason` values.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum BlockedReason {
    /// The engine could not run the request (an internal failure).
    Unavailable,
    /// OpenCode may be using the session (a run, a compaction, a staged revert, a lock).
    MaintenanceRequired,
    /// The message changed since the caller's revision.
    Conflict,
    /// The message or selected parts may not be pruned.
    NotDeletable,
    /// The storage is not what the engine expects.
    UnsupportedStorage,
}

impl BlockedReason {
    /// The contract's string for this reason (e.g. `maintenance_required`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unavailable => "unavailable",
            Self::MaintenanceRequired => "maintenance_required",
            Self::Conflict => "conflict",
            Self::NotDeletable => "not_deletable",
            Self::UnsupportedStorage => "unsupported_storage",
        }
    }

    /// Parses a contract reason string; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "unavailable" => Self::Unavailable,
            "maintenance_required" => Self::MaintenanceRequired,
            "conflict" => Self::Conflict,
            "not_deletable" => Self::NotDeletable,
            "unsupported_storage" => Self::UnsupportedStorage,
            _ => return None,
        })
    }
}

impl std::fmt::Display for BlockedReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A preview answer: `{status:"preview", revision, liveMutation, parts}` or
/// `{status:"blocked", reason}`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum PreviewResult {
    /// The message can be read; `parts` lists its technical parts.
    Preview {
        /// Revision of the message content now (64 lowercase hex).
        #[cfg_attr(feature = "openapi", schema(pattern = "^[0-9a-f]{64}$"))]
        revision: String,
        /// Whether a prune of this message can be written by this store.
        #[serde(rename = "liveMutation")]
        live_mutation: bool,
        /// The tool and reasoning parts, in content order.
        parts: Vec<PreviewPart>,
    },
    /// The message cannot be previewed.
    Blocked {
        /// Why.
        reason: BlockedReason,
    },
}

/// A prune answer: `{status:"pruned", messageID, revision, removedCount}` or
/// `{status:"blocked", reason}`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum PruneResult {
    /// The prune committed (now or by an earlier identical request).
    Pruned {
        /// The pruned message.
        #[serde(rename = "messageID")]
        message_id: String,
        /// Revision of the content after the prune (64 lowercase hex).
        #[cfg_attr(feature = "openapi", schema(pattern = "^[0-9a-f]{64}$"))]
        revision: String,
        /// How many parts were removed.
        #[serde(rename = "removedCount")]
        removed_count: u32,
    },
    /// Nothing was changed.
    Blocked {
        /// Why.
        reason: BlockedReason,
    },
}

/// The data of the `rpc.codenomad.session-pruning.pruned` event: `{sessionID, messageID,
/// revision}` with the post-prune revision.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrunedEventData {
    /// Session of the pruned message.
    #[serde(rename = "sessionID")]
    pub session_id: String,
    /// The pruned message.
    #[serde(rename = "messageID")]
    pub message_id: String,
    /// Revision after the prune (64 lowercase hex).
    #[cfg_attr(feature = "openapi", schema(pattern = "^[0-9a-f]{64}$"))]
    pub revision: String,
}

/// The event type announced after every committed prune (CodeNomad's plugin event name).
pub const PRUNED_EVENT_TYPE: &str = "rpc.codenomad.session-pruning.pruned";

/// The bytes of a JSON document as this project gives it out, over HTTP and from the CLI's
/// `--json` alike (so both carry the same bytes for the same result): pretty-printed JSON and
/// one trailing newline.
///
/// Errors: serde_json's, for a value that cannot be JSON (a map with non-string keys).
pub fn document<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    let mut text = serde_json::to_vec_pretty(value)?;
    text.push(b'\n');
    Ok(text)
}

/// A refusal with a human-readable explanation. `reason` is the contract's value; `detail` says
/// what to do and is never part of the compatible shapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The contract reason.
    pub reason: BlockedReason,
    /// What was found, for people and logs.
    pub detail: String,
    /// Whether the cause stays until someone acts (a setting that refuses for good, a row that
    /// cannot be read), so that the same request later meets the same refusal even where its
    /// reason usually passes (`maintenance_required`). False unless [`Refusal::lasting`] said so.
    pub lasting: bool,
}

impl Refusal {
    /// A refusal with a detail message.
    pub fn new(reason: BlockedReason, detail: impl Into<String>) -> Self {
        Self {
            reason,
            detail: detail.into(),
            lasting: false,
        }
    }

    /// The same refusal, marked as one whose cause does not pass by itself.
    pub fn lasting(mut self) -> Self {
        self.lasting = true;
        self
    }
}
