//! The restore contract: a request to undo one archived prune, and its answer. A restore puts
//! back exactly the rows the prune removed (from the prune archive), in one store transaction
//! with a receipt of its own, journaled and announced like a prune
//! (`rpc.codenomad.session-pruning.restored`). Source: docs/ARCHITECTURE.md, "Restore".

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::contract::{check_body_size, BlockedReason, PrunedEventData};
use crate::error::ContractError;
use crate::scope::Scope;

/// The event type announced after every committed restore; its data is the pruned event's
/// `{sessionID, messageID, revision}`, with the revision after the restore.
pub const RESTORED_EVENT_TYPE: &str = "rpc.codenomad.session-pruning.restored";

/// A request to restore the prune whose receipt is `receipt_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreRequest {
    /// The receipt of the prune to undo.
    pub receipt_id: Uuid,
    /// Where the prune's session must be (a server's workspace); unbounded for the CLI.
    pub scope: Scope,
}

/// The restore body `{receiptID}` as parsed.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = RestoreRequest))]
#[serde(deny_unknown_fields)]
pub struct RawRestore {
    /// The receipt id of the prune to undo (a UUID, from the receipts route).
    #[serde(rename = "receiptID")]
    #[cfg_attr(feature = "openapi", schema(format = Uuid))]
    receipt_id: String,
}

impl RestoreRequest {
    /// Parses and validates a JSON restore body `{receiptID}`.
    ///
    /// Errors: [`ContractError`] for a body over 1 MiB, malformed JSON, an unknown key, or a
    /// `receiptID` that is not a UUID.
    pub fn from_json(body: &str) -> Result<Self, ContractError> {
        check_body_size(body)?;
        let raw: RawRestore = ContractError::parse(body)?;
        let receipt_id =
            Uuid::parse_str(&raw.receipt_id).map_err(|_| ContractError::Malformed {
                detail: format!(
                    "receiptID must be a receipt id (a UUID), got `{}`",
                    raw.receipt_id.chars().take(80).collect::<String>()
                ),
                field: Some("receiptID".into()),
            })?;
        Ok(Self::new(receipt_id))
    }

    /// A restore of receipt `receipt_id` with no scope.
    pub fn new(receipt_id: Uuid) -> Self {
        Self {
            receipt_id,
            scope: Scope::default(),
        }
    }

    /// The same request bounded by `scope`.
    pub fn within(self, scope: Scope) -> Self {
        Self { scope, ..self }
    }
}

/// A restore answer: `{status:"restored", receiptID, sessionID, messageID, revision,
/// restoredCount}` or `{status:"blocked", reason}`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum RestoreResult {
    /// The parts are back (now, or by an earlier identical request).
    Restored {
        /// The restore's own receipt (and event) id.
        #[serde(rename = "receiptID")]
        receipt_id: Uuid,
        /// The message's session.
        #[serde(rename = "sessionID")]
        session_id: String,
        /// The restored message.
        #[serde(rename = "messageID")]
        message_id: String,
        /// Revision of the content after the restore: the revision before the prune (64
        /// lowercase hex).
        #[cfg_attr(feature = "openapi", schema(pattern = "^[0-9a-f]{64}$"))]
        revision: String,
        /// How many parts were put back.
        #[serde(rename = "restoredCount")]
        restored_count: u32,
    },
    /// Nothing was changed.
    Blocked {
        /// Why: `conflict` when the message changed since the prune, `not_deletable` when the
        /// receipt is unknown, not a prune's or not archived, and the prune's own reasons.
        reason: BlockedReason,
    },
}

impl RestoreResult {
    /// The answer of a committed restore with receipt `receipt_id`, announced with `data`,
    /// putting back `count` parts.
    pub fn restored(receipt_id: Uuid, data: &PrunedEventData, count: u32) -> Self {
        Self::Restored {
            receipt_id,
            session_id: data.session_id.clone(),
            message_id: data.message_id.clone(),
            revision: data.revision.clone(),
            restored_count: count,
        }
    }
}
