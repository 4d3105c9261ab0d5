//! The routes that mirror CodeNomad's session-pruning RPC:
//! `POST /api/workspaces/{id}/session-pruning/{preview,prune,history,prune-batch}`.
//!
//! Each answers `200` with exactly the contract's shape (a refusal is `200`
//! `{status:"blocked", reason}`); a body that breaks the contract is `400`, over 1 MiB `413`,
//! a session outside the workspace `403`, all with nothing journaled or written. As in
//! CodeNomad's broker, an engine failure is answered `blocked/unavailable` (and logged on
//! stderr), so that a client never sees a half answer.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use pruning_engine::{
    BatchItem, BatchResult, BlockedReason, ContractError, EngineError, HistoryRequest,
    HistoryResult, PreviewRequest, PreviewResult, PruneBatchRequest, PruneRequest, PruneResult,
    Refusal, Scope,
};

use super::error::ApiError;
use super::state::{Admission, AppState};
use super::{body, document};

/// `preview {sessionID, messageID}` -> `{status:"preview", revision, liveMutation, parts}`.
pub async fn preview(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    request: Body,
) -> Result<Response, ApiError> {
    let (request, scope) = match admitted(&state, workspace, &headers, request, |body| {
        PreviewRequest::from_json(body).map(|r| (Some(r.session_id.clone()), r))
    })
    .await?
    {
        // A read journals nothing: the engine answers for a missing session as the CLI does.
        Admitted::Inside(request, scope) | Admitted::MissingSession(request, scope) => {
            (request, scope)
        }
    };
    let request = request.within(scope);
    let result = state
        .read(move |engine| {
            pruning_engine::preview(engine.store(), &request)
                .map(|outcome| (outcome.result, outcome.refusal))
        })
        .await?;
    answer("preview", result)
}

/// `prune {sessionID, messageID, revision, indexes}` -> `{status:"pruned", messageID,
/// revision, removedCount}`; the event is announced before the answer is sent.
pub async fn prune(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    request: Body,
) -> Result<Response, ApiError> {
    let (request, scope) = match admitted(&state, workspace, &headers, request, |body| {
        PruneRequest::from_json(body).map(|r| (Some(r.session_id.clone()), r))
    })
    .await?
    {
        Admitted::Inside(request, scope) => (request, scope),
        Admitted::MissingSession(request, _) => return Ok(missing("prune", &request.session_id)),
    };
    let request = request.within(scope);
    let result = state
        .write(move |engine| match engine.prune(&request) {
            Ok(outcome) => Ok((outcome.result, outcome.refusal)),
            // Committed with its receipt: the answer is `pruned`, and the operator is told
            // that the event waits for the journal.
            Err(EngineError::CommittedNotJournaled { receipt, cause }) => {
                eprintln!(
                    "error: prune {}: committed (receipt {}) but not journaled: {cause}; \
                     restart the server once the journal can be written: recovery announces it",
                    receipt.message_id.escape_debug(),
                    receipt.receipt_id
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
        })
        .await?;
    answer("prune", result)
}

/// `history {sessionID?, query, includeTechnical, purpose, cursor?}` -> one page
/// `{status:"page", scanned, tools, reasoning, skipped, hits, candidates, cursor}`. Without a
/// session, only the workspace's sessions are scanned.
pub async fn history(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    request: Body,
) -> Result<Response, ApiError> {
    let (request, scope) = match admitted(&state, workspace, &headers, request, |body| {
        HistoryRequest::from_json(body).map(|r| (r.session_id.clone(), r))
    })
    .await?
    {
        // A read journals nothing: the engine answers for a missing session as the CLI does.
        Admitted::Inside(request, scope) | Admitted::MissingSession(request, scope) => {
            (request, scope)
        }
    };
    let request = HistoryRequest { scope, ..request };
    let result = state
        .read(move |engine| {
            pruning_engine::history(engine.store(), &request)
                .map(|outcome| (outcome.result, outcome.refusal))
        })
        .await?;
    answer("history", result)
}

/// `pruneBatch {sessionID, candidates}` -> `{results:[{messageID, result}]}`: each candidate
/// in its own transaction, one event per pruned message.
pub async fn prune_batch(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    request: Body,
) -> Result<Response, ApiError> {
    let (batch, scope) = match admitted(&state, workspace, &headers, request, |body| {
        PruneBatchRequest::from_json(body).map(|r| (Some(r.session_id.clone()), r))
    })
    .await?
    {
        Admitted::Inside(batch, scope) => (batch, scope),
        Admitted::MissingSession(batch, _) => {
            log_missing("prune-batch", &batch.session_id);
            let results = batch
                .candidates
                .iter()
                .map(|candidate| BatchItem {
                    message_id: candidate.message_id.clone(),
                    result: PruneResult::Blocked {
                        reason: BlockedReason::NotDeletable,
                    },
                })
                .collect();
            return Ok(document::json(&BatchResult { results }));
        }
    };
    let batch = batch.within(scope);
    let result: BatchResult = state
        .write(move |engine| {
            let outcome = engine.prune_batch(&batch);
            for (message_id, item) in &outcome.items {
                match item {
                    Ok(pruned) => log_refusal("prune-batch", message_id, pruned.refusal.as_ref()),
                    Err(error) => log_failure("prune-batch", message_id, error),
                }
            }
            outcome.result()
        })
        .await?;
    Ok(document::json(&result))
}

/// A request that passed the checks of every contract route.
enum Admitted<R> {
    /// Its session lies in the workspace (or it names none): the request and the scope the
    /// engine checks again inside its transaction.
    Inside(R, Scope),
    /// Its session does not exist: a prune is answered `not_deletable` at once, with nothing
    /// journaled (a refusal that costs a journal write is not given away to any caller who
    /// asks); a read goes on to the engine, which answers as for the CLI.
    MissingSession(R, Scope),
}

/// The checks every contract route makes first, each answering with nothing done: the
/// workspace exists (404), the body is at most 1 MiB (413) and parses into a valid request
/// (400), and the session it names, if any (`parse` returns it beside the request), lies in
/// the workspace (403) or does not exist.
async fn admitted<R>(
    state: &AppState,
    workspace: String,
    headers: &HeaderMap,
    body: Body,
    parse: impl FnOnce(&str) -> Result<(Option<String>, R), ContractError>,
) -> Result<Admitted<R>, ApiError> {
    let workspace = state.workspace(workspace).await?;
    let (session_id, request) = parse(&body::read(headers, body).await?)?;
    if let Some(session_id) = session_id {
        if state.admit(&workspace, &session_id).await? == Admission::Missing {
            return Ok(Admitted::MissingSession(request, workspace.scope()));
        }
    }
    Ok(Admitted::Inside(request, workspace.scope()))
}

/// The `not_deletable` answer to a prune of a session that does not exist.
fn missing(route: &str, session_id: &str) -> Response {
    log_missing(route, session_id);
    document::json(&PruneResult::blocked(BlockedReason::NotDeletable))
}

fn log_missing(route: &str, session_id: &str) {
    eprintln!(
        "blocked: {route}: not_deletable: there is no session {} in this database",
        session_id.escape_debug()
    );
}

/// A contract result that has a `blocked` form.
trait Blockable {
    /// `{status:"blocked", reason}`.
    fn blocked(reason: BlockedReason) -> Self;
}

impl Blockable for PreviewResult {
    fn blocked(reason: BlockedReason) -> Self {
        Self::Blocked { reason }
    }
}

impl Blockable for PruneResult {
    fn blocked(reason: BlockedReason) -> Self {
        Self::Blocked { reason }
    }
}

impl Blockable for HistoryResult {
    fn blocked(reason: BlockedReason) -> Self {
        Self::Blocked { reason }
    }
}

/// The answer of an engine call: its result; a bad cursor is the caller's fault (400); any
/// other failure is answered with `blocked`'s `unavailable` form. Refusals and failures are
/// logged on stderr with their explanation, which the contract's shapes have no room for.
fn answer<T: Blockable + serde::Serialize>(
    route: &str,
    result: Result<(T, Option<Refusal>), EngineError>,
) -> Result<Response, ApiError> {
    match result {
        Ok((value, refusal)) => {
            log_refusal(route, "", refusal.as_ref());
            Ok(document::json(&value))
        }
        Err(EngineError::Contract(error)) => Err(ApiError::Contract(error)),
        Err(error) => {
            log_failure(route, "", &error);
            Ok(document::json(&T::blocked(BlockedReason::Unavailable)))
        }
    }
}

/// `blocked: ROUTE [MESSAGE]: REASON: DETAIL` on stderr, for the operator.
fn log_refusal(route: &str, message_id: &str, refusal: Option<&Refusal>) {
    if let Some(refusal) = refusal {
        eprintln!(
            "blocked: {route} {}: {}: {}",
            message_id.escape_debug(),
            refusal.reason,
            refusal.detail.escape_debug()
        );
    }
}

/// `error: ROUTE [MESSAGE]: ...; answered blocked/unavailable` on stderr.
fn log_failure(route: &str, message_id: &str, error: &EngineError) {
    eprintln!(
        "error: {route} {}: {error}; answered blocked/unavailable",
        message_id.escape_debug()
    );
}
