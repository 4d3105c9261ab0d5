//! `pruneBatch`: up to 16 history candidates of one session, each pruned of all its technical
//! parts whole or not at all (its own savepoint of a group transaction), with one result per
//! candidate.
//!
//! Source: docs/ARCHITECTURE.md, "Contract" (`pruneBatch`): in `{sessionID, candidates:[1..16]}`
//! with
//! unique `messageID`s, out `{results:[{messageID, result}]}`; each candidate runs as an
//! all-technical prune bound to the candidate's revision; an error becomes
//! `blocked/unavailable` for that candidate; there is no all-or-nothing.

use serde::{Deserialize, Serialize};

use crate::contract::{
    check_body_size, check_id, check_revision, BlockedReason, PruneRequest, PruneResult,
};
use crate::engine::{Engine, PruneOutcome};
use crate::error::{ContractError, EngineError};
use crate::history::HistoryCandidate;
use crate::scope::Scope;
use crate::store::SessionStore;

/// Most candidates in one batch.
pub const MAX_BATCH: usize = 16;

/// A validated batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PruneBatchRequest {
    /// The session every candidate belongs to.
    pub session_id: String,
    /// The candidates, as a `history` page with `purpose: "prune"` listed them; 1 to 16, unique
    /// by message id. `toolCount` and `reasoningCount` are informational: the revision binds the
    /// prune to the content.
    pub candidates: Vec<HistoryCandidate>,
    /// The sessions the caller may prune in (see [`Scope`]).
    pub scope: Scope,
}

/// The batch body `{sessionID, candidates}` as parsed.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = PruneBatchRequest))]
#[serde(deny_unknown_fields)]
pub struct RawBatch {
    /// The session every candidate belongs to, 1 to 256 characters.
    #[serde(rename = "sessionID")]
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 256))]
    session_id: String,
    /// 1 to 16 candidates from a `history` page with `purpose: "prune"`, unique by `messageID`.
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 16))]
    candidates: Vec<HistoryCandidate>,
}

impl PruneBatchRequest {
    /// Parses and validates a JSON batch body `{sessionID, candidates}`.
    ///
    /// Errors: [`ContractError`] for a body over 1 MiB, malformed JSON, an unknown key (in the
    /// body or a candidate), a bad id or revision, no candidates or more than 16, or one message
    /// twice.
    pub fn from_json(body: &str) -> Result<Self, ContractError> {
        check_body_size(body)?;
        let raw: RawBatch = ContractError::parse(body)?;
        Self::new(raw.session_id, raw.candidates)
    }

    /// Builds a validated batch. Same errors as [`Self::from_json`].
    pub fn new(
        session_id: String,
        candidates: Vec<HistoryCandidate>,
    ) -> Result<Self, ContractError> {
        check_id("sessionID", &session_id)?;
        if candidates.is_empty() || candidates.len() > MAX_BATCH {
            return Err(ContractError::CandidateCount {
                count: candidates.len(),
                max: MAX_BATCH,
            });
        }
        for (i, candidate) in candidates.iter().enumerate() {
            check_id("messageID", &candidate.message_id)?;
            check_revision(&candidate.revision)?;
            if candidates[..i]
                .iter()
                .any(|earlier| earlier.message_id == candidate.message_id)
            {
                return Err(ContractError::DuplicateCandidate {
                    message_id: candidate.message_id.clone(),
                });
            }
        }
        Ok(Self {
            session_id,
            candidates,
            scope: Scope::default(),
        })
    }

    /// The same batch, limited to `scope`.
    pub fn within(self, scope: Scope) -> Self {
        Self { scope, ..self }
    }
}

/// The batch answer: `{results:[{messageID, result}]}`, in candidate order.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchResult {
    /// One entry per candidate.
    #[cfg_attr(feature = "openapi", schema(max_items = 16))]
    pub results: Vec<BatchItem>,
}

/// One candidate's answer.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchItem {
    /// The candidate.
    #[serde(rename = "messageID")]
    pub message_id: String,
    /// Its prune result.
    pub result: PruneResult,
}

/// What [`Engine::prune_batch`] did with each candidate, in candidate order.
#[derive(Debug)]
pub struct BatchOutcome {
    /// Each candidate's message id and what its prune did, or the error it raised.
    pub items: Vec<(String, Result<PruneOutcome, EngineError>)>,
}

impl BatchOutcome {
    /// The contract answer: a prune committed with its receipt is `pruned` (also when its
    /// commit mark could not be journaled: the database holds it); any other error is
    /// `blocked/unavailable`.
    pub fn result(&self) -> BatchResult {
        BatchResult {
            results: self
                .items
                .iter()
                .map(|(message_id, outcome)| BatchItem {
                    message_id: message_id.clone(),
                    result: match outcome {
                        Ok(outcome) => outcome.result.clone(),
                        Err(EngineError::CommittedNotJournaled { receipt, .. }) => {
                            PruneResult::Pruned {
                                message_id: receipt.message_id.clone(),
                                revision: receipt.revision_after.clone(),
                                removed_count: receipt.removed_count,
                            }
                        }
                        Err(_) => PruneResult::Blocked {
                            reason: BlockedReason::Unavailable,
                        },
                    },
                })
                .collect(),
        }
    }
}

impl<S: SessionStore> Engine<S> {
    /// Prunes every technical part of each candidate, in order, each whole or not at all with
    /// its own receipt and event, sharing the durable writes of the batch (the group commit of
    /// [`Engine::prune_many`]: one journal write for the intents, group transactions, one WAL
    /// sync, one journal write for the commit marks). A refusal or an error of one candidate does not
    /// stop the others.
    pub fn prune_batch(&self, batch: &PruneBatchRequest) -> BatchOutcome {
        let mut requests = Vec::with_capacity(batch.candidates.len());
        let mut invalid = Vec::new();
        for (slot, candidate) in batch.candidates.iter().enumerate() {
            match PruneRequest::all_technical(
                batch.session_id.clone(),
                candidate.message_id.clone(),
                candidate.revision.clone(),
            ) {
                Ok(request) => requests.push((slot, request.within(batch.scope.clone()))),
                Err(error) => invalid.push((slot, EngineError::from(error))),
            }
        }
        let valid: Vec<PruneRequest> = requests.iter().map(|(_, r)| r.clone()).collect();
        let mut outcomes: Vec<Option<Result<PruneOutcome, EngineError>>> =
            batch.candidates.iter().map(|_| None).collect();
        for ((slot, _), outcome) in requests.iter().zip(self.prune_many(&valid)) {
            outcomes[*slot] = Some(outcome);
        }
        for (slot, error) in invalid {
            outcomes[slot] = Some(Err(error));
        }
        let items = batch
            .candidates
            .iter()
            .zip(outcomes)
            .map(|(candidate, outcome)| {
                let outcome = outcome.unwrap_or(Err(EngineError::Interrupted));
                (candidate.message_id.clone(), outcome)
            })
            .collect();
        BatchOutcome { items }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(id: &str) -> String {
        format!(
            r#"{{"messageID":"{id}","revision":"{}","toolCount":1,"reasoningCount":0}}"#,
            "a".repeat(64)
        )
    }

    #[test]
    fn a_batch_takes_one_to_sixteen_unique_candidates() {
        let body = |ids: &[String]| {
            let list: Vec<String> = ids.iter().map(|id| candidate(id)).collect();
            format!(
                r#"{{"sessionID":"ses_1","candidates":[{}]}}"#,
                list.join(",")
            )
        };
        let ids: Vec<String> = (0..17).map(|i| format!("msg_{i}")).collect();
        assert_eq!(
            PruneBatchRequest::from_json(&body(&ids[..16]))
                .unwrap()
                .candidates
                .len(),
            16
        );
        assert_eq!(
            PruneBatchRequest::from_json(&body(&ids)),
            Err(ContractError::CandidateCount { count: 17, max: 16 })
        );
        assert_eq!(
            PruneBatchRequest::from_json(&body(&[])),
            Err(ContractError::CandidateCount { count: 0, max: 16 })
        );
        assert_eq!(
            PruneBatchRequest::from_json(&body(&["msg_1".into(), "msg_1".into()])),
            Err(ContractError::DuplicateCandidate {
                message_id: "msg_1".into()
            })
        );
        assert_eq!(
            PruneBatchRequest::from_json(
                r#"{"sessionID":"s","candidates":[{"messageID":"m","revision":"x","toolCount":1,"reasoningCount":0,"content":[]}]}"#
            ),
            Err(ContractError::UnknownKey {
                key: "candidates[0].content".into()
            })
        );
    }
}
