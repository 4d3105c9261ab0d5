//! The routes that mirror CodeNomad's session-pruning RPC:
//! `POST /api/workspaces/{id}/session-pruning/{preview,prune,history,prune-batch}`, and the
//! restore of an archived prune (`.../restore`), which answers the same way.
//!
//! Each answers `200` with exactly the contract's shape (a refusal is `200`
//! `{status:"blocked", reason}`); a body that breaks the contract is `400`, over 1 MiB `413`,
//! not sent within 30 s `408`, a session outside the workspace `403`, all with nothing
//! journaled or written. As in CodeNomad's broker, an engine failure is answered
//! `blocked/unavailable` (and logged on stderr), so that a client never sees a half answer.
//!
//! Every route runs the same steps ([`handle`]); what differs, a [`Route`] says.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use pruning_engine::contract::{RawPreview, RawPrune};
use pruning_engine::restore::RawRestore;
use pruning_engine::{
    batch::RawBatch, history::request::RawHistory, BatchItem, BatchResult, BlockedReason,
    ContractError, Engine, EngineError, HistoryRequest, HistoryResult, PreviewRequest,
    PreviewResult, PruneBatchRequest, PruneRequest, PruneResult, Refusal, RestoreRequest,
    RestoreResult, Scope, SessionStore,
};
use pruning_opencode::{AutoVacuum, OpenCodeStore};
use serde::Serialize;

use super::error::ApiError;
use super::responses::{ContractFailures, WriteFailures};
use super::state::{Admission, AppState};
use super::{body, document, forgery};

/// `preview {sessionID, messageID}` -> `{status:"preview", revision, liveMutation, parts}`.
#[utoipa::path(
    post,
    path = "/api/workspaces/{id}/session-pruning/preview",
    summary = "Revision and technical parts of a message (read-only)",
    params(("id" = String, Path, description = "A workspace id from GET /api/workspaces")),
    request_body = RawPreview,
    responses(
        (status = 200, description = "The preview, or `blocked`", body = PreviewResult),
        ContractFailures,
    )
)]
pub async fn preview(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    request: Body,
) -> Result<Response, ApiError> {
    handle::<PreviewRequest>(&state, workspace, &headers, request).await
}

/// `prune {sessionID, messageID, revision, indexes}` -> `{status:"pruned", messageID,
/// revision, removedCount}`; the event is announced before the answer is sent.
#[utoipa::path(
    post,
    path = "/api/workspaces/{id}/session-pruning/prune",
    summary = "Prune parts of one message: journaled, applied in one transaction with its \
        receipt, announced as an event. An identical retry returns the same answer.",
    params(("id" = String, Path, description = "A workspace id from GET /api/workspaces")),
    request_body = RawPrune,
    responses(
        (status = 200, description = "Pruned, or `blocked`", body = PruneResult),
        WriteFailures,
    )
)]
pub async fn prune(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    request: Body,
) -> Result<Response, ApiError> {
    handle::<PruneRequest>(&state, workspace, &headers, request).await
}

/// `history {sessionID?, query, includeTechnical, purpose, cursor?}` -> one page
/// `{status:"page", scanned, tools, reasoning, skipped, hits, candidates, cursor}`. Without a
/// session, only the workspace's sessions are scanned.
#[utoipa::path(
    post,
    path = "/api/workspaces/{id}/session-pruning/history",
    summary = "One page (at most 32 messages, about 40 ms) of a history scan: search, stats, or \
        prune candidates",
    params(("id" = String, Path, description = "A workspace id from GET /api/workspaces")),
    request_body = RawHistory,
    responses(
        (status = 200, description = "A page, or `blocked`", body = HistoryResult),
        ContractFailures,
    )
)]
pub async fn history(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    request: Body,
) -> Result<Response, ApiError> {
    handle::<HistoryRequest>(&state, workspace, &headers, request).await
}

/// `pruneBatch {sessionID, candidates}` -> `{results:[{messageID, result}]}`: each candidate
/// whole or not at all with its own receipt, one event per pruned message.
#[utoipa::path(
    post,
    path = "/api/workspaces/{id}/session-pruning/prune-batch",
    summary = "Prune every technical part of up to 16 candidates of one session, each in its own \
        transaction",
    params(("id" = String, Path, description = "A workspace id from GET /api/workspaces")),
    request_body = RawBatch,
    responses(
        (status = 200, description = "One result per candidate, in order", body = BatchResult),
        WriteFailures,
    )
)]
pub async fn prune_batch(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    request: Body,
) -> Result<Response, ApiError> {
    handle::<PruneBatchRequest>(&state, workspace, &headers, request).await
}

/// `restore {receiptID}` -> `{status:"restored", receiptID, sessionID, messageID, revision,
/// restoredCount}`; the `rpc.codenomad.session-pruning.restored` event is announced before the
/// answer is sent. A receipt that is unknown, or whose session lies outside the workspace, is
/// `blocked/not_deletable` with nothing journaled.
#[utoipa::path(
    post,
    path = "/api/workspaces/{id}/session-pruning/restore",
    summary = "Undo an archived prune: put back exactly the rows it removed, when the message is \
        unchanged since; journaled, applied in one transaction with a receipt of the restore, \
        announced as an event. An identical retry returns the same answer.",
    params(("id" = String, Path, description = "A workspace id from GET /api/workspaces")),
    request_body = RawRestore,
    responses(
        (status = 200, description = "Restored, or `blocked`", body = RestoreResult),
        WriteFailures,
    )
)]
pub async fn restore(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    request: Body,
) -> Result<Response, ApiError> {
    handle::<RestoreRequest>(&state, workspace, &headers, request).await
}

/// How long a write route gives free pages back after its prunes, at most: the writes queued
/// behind it wait for it. The rest goes back after the next.
const GIVE_BACK_FOR: std::time::Duration = std::time::Duration::from_millis(250);

/// On a file switched by `vacuum --online-shrink`, gives the pages a route's prunes freed back
/// to the disk for at most [`GIVE_BACK_FOR`], and logs what it gave (the answer is the
/// contract's and says nothing of it). The prunes stand whatever comes of it.
fn give_back(route: &'static str, store: &OpenCodeStore) {
    if !matches!(store.auto_vacuum(), Ok(AutoVacuum::Incremental)) {
        return;
    }
    let until = std::time::Instant::now() + GIVE_BACK_FOR;
    match store.give_back_pages(&|| std::time::Instant::now() >= until) {
        Ok(given) => tracing::info!(
            route,
            bytes = given.bytes,
            steps = given.steps,
            leftPages = given.left_pages,
            "gave free pages back"
        ),
        Err(error) => tracing::error!(
            route,
            detail = error.to_string().as_str(),
            "failed: giving free pages back"
        ),
    }
}

/// What one contract route does with its validated request.
trait Route: Sized + Send + 'static {
    /// The route's name in log lines (`prune-batch`).
    const NAME: &'static str;
    /// Whether the route writes: writes run one at a time, in arrival order.
    const WRITES: bool;
    /// The contract's answer.
    type Answer: Serialize + Send + 'static;

    /// Parses and validates the body. Errors: the contract's (400, 413).
    fn parse(body: &str) -> Result<Self, ContractError>;
    /// The session the request names, if any.
    fn session(&self) -> Option<&str>;
    /// The same request, limited to `scope`.
    fn within(self, scope: Scope) -> Self;
    /// The answer to a request for a session that does not exist, when it is given at once: a
    /// write is `not_deletable` with nothing journaled (a refusal that costs a journal write
    /// is not given away to any caller who asks); a read is `None`: it goes on to the engine,
    /// which answers as for the CLI.
    fn missing(&self) -> Option<Self::Answer>;
    /// Runs the request on the engine (on the blocking pool).
    ///
    /// Errors: [`ApiError::Contract`] for a request the engine finds invalid (a bad cursor).
    fn run(self, engine: &Engine<OpenCodeStore>) -> Result<Self::Answer, ApiError>;
}

/// The steps of every contract route, each answering with nothing done when it fails: a
/// write is a request no page of another origin could have sent (403, 415: `forgery`), the
/// workspace exists (404), the body is at most 1 MiB (413), arrives in time (408) and parses
/// into a valid request (400), the session it names, if any, lies in the workspace (403); then
/// the engine runs it within the workspace's scope, which it checks again inside its
/// transaction.
async fn handle<R: Route>(
    state: &AppState,
    workspace: String,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    if R::WRITES {
        forgery::refuse_forgeable(state, headers)?;
    }
    let workspace = state.workspace(workspace).await?;
    let request = R::parse(&body::read(headers, body).await?)?;
    if let Some(session_id) = request.session() {
        if state.admit(&workspace, session_id).await? == Admission::Missing {
            if let Some(answer) = request.missing() {
                log_missing(R::NAME, session_id);
                return Ok(document::json(&answer));
            }
        }
    }
    let request = request.within(workspace.scope());
    let answer = if R::WRITES {
        state.write(move |engine| request.run(engine)).await?
    } else {
        state.read(move |engine| request.run(engine)).await?
    }?;
    Ok(document::json(&answer))
}

impl Route for PreviewRequest {
    const NAME: &'static str = "preview";
    const WRITES: bool = false;
    type Answer = PreviewResult;

    fn parse(body: &str) -> Result<Self, ContractError> {
        Self::from_json(body)
    }

    fn session(&self) -> Option<&str> {
        Some(&self.session_id)
    }

    fn within(self, scope: Scope) -> Self {
        PreviewRequest::within(self, scope)
    }

    fn missing(&self) -> Option<PreviewResult> {
        None
    }

    fn run(self, engine: &Engine<OpenCodeStore>) -> Result<PreviewResult, ApiError> {
        let result = pruning_engine::preview(engine.store(), &self)
            .map(|outcome| (outcome.result, outcome.refusal));
        answer(Self::NAME, &self.message_id, result, |reason| {
            PreviewResult::Blocked { reason }
        })
    }
}

impl Route for PruneRequest {
    const NAME: &'static str = "prune";
    const WRITES: bool = true;
    type Answer = PruneResult;

    fn parse(body: &str) -> Result<Self, ContractError> {
        Self::from_json(body)
    }

    fn session(&self) -> Option<&str> {
        Some(&self.session_id)
    }

    fn within(self, scope: Scope) -> Self {
        PruneRequest::within(self, scope)
    }

    fn missing(&self) -> Option<PruneResult> {
        Some(PruneResult::Blocked {
            reason: BlockedReason::NotDeletable,
        })
    }

    fn run(self, engine: &Engine<OpenCodeStore>) -> Result<PruneResult, ApiError> {
        let result = match engine.prune(&self) {
            Ok(outcome) => Ok((outcome.result, outcome.refusal)),
            // Committed with its receipt: the answer is `pruned`, and the operator is told
            // that the event waits for the journal.
            Err(EngineError::CommittedNotJournaled { receipt, cause }) => {
                tracing::error!(
                    route = "prune",
                    messageID = receipt.message_id.as_str(),
                    receiptID = %receipt.receipt_id,
                    cause = cause.to_string().as_str(),
                    "committed but not journaled: restart the server once the journal can be \
                     written; recovery announces it"
                );
                Ok((
                    PruneResult::Pruned {
                        message_id: receipt.message_id,
                        revision: receipt.revision_after,
                        removed_count: receipt.removed_count,
                    },
                    None,
                ))
            }
            Err(error) => Err(error),
        };
        answer(Self::NAME, &self.message_id, result, |reason| {
            PruneResult::Blocked { reason }
        })
    }
}

impl Route for HistoryRequest {
    const NAME: &'static str = "history";
    const WRITES: bool = false;
    type Answer = HistoryResult;

    fn parse(body: &str) -> Result<Self, ContractError> {
        Self::from_json(body)
    }

    fn session(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    fn within(self, scope: Scope) -> Self {
        HistoryRequest::within(self, scope)
    }

    fn missing(&self) -> Option<HistoryResult> {
        None
    }

    fn run(self, engine: &Engine<OpenCodeStore>) -> Result<HistoryResult, ApiError> {
        let result = pruning_engine::history(engine.store(), &self)
            .map(|outcome| (outcome.result, outcome.refusal));
        answer(Self::NAME, "", result, |reason| HistoryResult::Blocked {
            reason,
        })
    }
}

impl Route for PruneBatchRequest {
    const NAME: &'static str = "prune-batch";
    const WRITES: bool = true;
    type Answer = BatchResult;

    fn parse(body: &str) -> Result<Self, ContractError> {
        Self::from_json(body)
    }

    fn session(&self) -> Option<&str> {
        Some(&self.session_id)
    }

    fn within(self, scope: Scope) -> Self {
        PruneBatchRequest::within(self, scope)
    }

    fn missing(&self) -> Option<BatchResult> {
        let results = self
            .candidates
            .iter()
            .map(|candidate| BatchItem {
                message_id: candidate.message_id.clone(),
                result: PruneResult::Blocked {
                    reason: BlockedReason::NotDeletable,
                },
            })
            .collect();
        Some(BatchResult { results })
    }

    fn run(self, engine: &Engine<OpenCodeStore>) -> Result<BatchResult, ApiError> {
        let outcome = engine.prune_batch(&self);
        for (message_id, item) in &outcome.items {
            match item {
                Ok(pruned) => log_refusal(Self::NAME, message_id, pruned.refusal.as_ref()),
                Err(error) => log_failure(Self::NAME, message_id, error),
            }
        }
        let pruned = outcome.items.iter().any(|(_, item)| {
            matches!(item, Ok(done) if !done.retried && matches!(done.result, PruneResult::Pruned { .. }))
        });
        if pruned {
            give_back(Self::NAME, engine.store());
        }
        Ok(outcome.result())
    }
}

impl Route for RestoreRequest {
    const NAME: &'static str = "restore";
    const WRITES: bool = true;
    type Answer = RestoreResult;

    fn parse(body: &str) -> Result<Self, ContractError> {
        Self::from_json(body)
    }

    /// The session is the receipt's, found by [`Route::run`].
    fn session(&self) -> Option<&str> {
        None
    }

    fn within(self, scope: Scope) -> Self {
        RestoreRequest::within(self, scope)
    }

    fn missing(&self) -> Option<RestoreResult> {
        None
    }

    fn run(self, engine: &Engine<OpenCodeStore>) -> Result<RestoreResult, ApiError> {
        let subject = self.receipt_id.to_string();
        // Another workspace's receipt is answered as an unknown one, before anything is
        // journaled: its existence is not given away.
        let admitted = engine
            .store()
            .receipt(self.receipt_id)
            .and_then(|receipt| match receipt {
                None => Ok(false),
                Some(receipt) => Ok(engine
                    .store()
                    .owner(&receipt.session_id)?
                    .is_some_and(|owner| self.scope.admits(&owner.as_ownership()).is_ok())),
            });
        let result = match admitted {
            Ok(false) => Ok((
                RestoreResult::Blocked {
                    reason: BlockedReason::NotDeletable,
                },
                Some(Refusal::new(
                    BlockedReason::NotDeletable,
                    format!("no receipt {subject} in this workspace"),
                )),
            )),
            Ok(true) => engine
                .restore(&self)
                .map(|outcome| (outcome.result, outcome.refusal)),
            Err(error) => Err(error.into()),
        };
        answer(Self::NAME, &subject, result, |reason| {
            RestoreResult::Blocked { reason }
        })
    }
}

fn log_missing(route: &str, session_id: &str) {
    tracing::warn!(
        route,
        reason = "not_deletable",
        sessionID = session_id,
        "blocked: there is no such session in this database"
    );
}

/// The answer of an engine call: its result; a bad cursor is the caller's fault (400); any
/// other failure is answered with `blocked(unavailable)`. Refusals and failures are logged on
/// stderr with their explanation, which the contract's shapes have no room for.
fn answer<T>(
    route: &str,
    message_id: &str,
    result: Result<(T, Option<Refusal>), EngineError>,
    blocked: impl FnOnce(BlockedReason) -> T,
) -> Result<T, ApiError> {
    match result {
        Ok((value, refusal)) => {
            log_refusal(route, message_id, refusal.as_ref());
            Ok(value)
        }
        Err(EngineError::Contract(error)) => Err(ApiError::Contract(error)),
        Err(error) => {
            log_failure(route, message_id, &error);
            Ok(blocked(BlockedReason::Unavailable))
        }
    }
}

/// `WARN blocked` with the route, the message, the reason and its words, on the server's log, for
/// the operator.
fn log_refusal(route: &str, message_id: &str, refusal: Option<&Refusal>) {
    if let Some(refusal) = refusal {
        tracing::warn!(
            route,
            messageID = message_id,
            reason = %refusal.reason,
            detail = refusal.detail.as_str(),
            "blocked"
        );
    }
}

/// `ERROR failed; answered blocked/unavailable` with the route, the message and the error, on the
/// server's log. Every text a client sent is a field of its own: the text log quotes and escapes
/// it (one line, no terminal control), the JSON log holds it exactly.
fn log_failure(route: &str, message_id: &str, error: &EngineError) {
    tracing::error!(
        route,
        messageID = message_id,
        error = error.to_string().as_str(),
        "failed; answered blocked/unavailable"
    );
}
