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
    BatchResult, BlockedReason, EngineError, HistoryRequest, HistoryResult, PreviewRequest,
    PreviewResult, PruneBatchRequest, PruneRequest, PruneResult,
};

use super::error::ApiError;
use super::state::AppState;
use super::{body, document};

/// `preview {sessionID, messageID}` -> `{status:"preview", revision, liveMutation, parts}`.
pub async fn preview(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    request: Body,
) -> Result<Response, ApiError> {
    let workspace = state.workspace(workspace).await?;
    let request = PreviewRequest::from_json(&body::read(&headers, request).await?)?;
    state.admit(&workspace, &request.session_id).await?;
    let request = request.within(workspace.scope());
    let result = state.read(move |engine| engine.preview(&request)).await?;
    Ok(document::json(&answer(result, || {
        PreviewResult::Blocked {
            reason: BlockedReason::Unavailable,
        }
    })?))
}

/// `prune {sessionID, messageID, revision, indexes}` -> `{status:"pruned", messageID,
/// revision, removedCount}`; the event is announced before the answer is sent.
pub async fn prune(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    request: Body,
) -> Result<Response, ApiError> {
    let workspace = state.workspace(workspace).await?;
    let request = PruneRequest::from_json(&body::read(&headers, request).await?)?;
    state.admit(&workspace, &request.session_id).await?;
    let request = request.within(workspace.scope());
    let result = state
        .write(move |engine| engine.prune(&request).map(|outcome| outcome.result))
        .await?;
    Ok(document::json(&answer(result, || PruneResult::Blocked {
        reason: BlockedReason::Unavailable,
    })?))
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
    let workspace = state.workspace(workspace).await?;
    let request = HistoryRequest::from_json(&body::read(&headers, request).await?)?;
    if let Some(session_id) = &request.session_id {
        state.admit(&workspace, session_id).await?;
    }
    let request = HistoryRequest {
        scope: workspace.scope(),
        ..request
    };
    let result = state
        .read(move |engine| {
            pruning_engine::history(engine.store(), &request).map(|outcome| outcome.result)
        })
        .await?;
    Ok(document::json(&answer(result, || {
        HistoryResult::Blocked {
            reason: BlockedReason::Unavailable,
        }
    })?))
}

/// `pruneBatch {sessionID, candidates}` -> `{results:[{messageID, result}]}`: each candidate
/// in its own transaction, one event per pruned message.
pub async fn prune_batch(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    request: Body,
) -> Result<Response, ApiError> {
    let workspace = state.workspace(workspace).await?;
    let batch = PruneBatchRequest::from_json(&body::read(&headers, request).await?)?;
    state.admit(&workspace, &batch.session_id).await?;
    let batch = batch.within(workspace.scope());
    let result: BatchResult = state
        .write(move |engine| engine.prune_batch(&batch).result())
        .await?;
    Ok(document::json(&result))
}

/// The contract answer of an engine call: its result; a bad cursor is the caller's fault
/// (400); any other failure is logged and answered with `blocked`'s `unavailable` form.
fn answer<T>(
    result: Result<T, EngineError>,
    unavailable: impl FnOnce() -> T,
) -> Result<T, ApiError> {
    match result {
        Ok(value) => Ok(value),
        Err(EngineError::Contract(error)) => Err(ApiError::Contract(error)),
        Err(error) => {
            eprintln!("error: answered blocked/unavailable: {error}");
            Ok(unavailable())
        }
    }
}
