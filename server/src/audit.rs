//! The audit and discovery routes: `GET /health`, `GET /api/workspaces`,
//! `GET /api/workspaces/{id}/session-pruning/receipts[?sessionID=ID]` and
//! `.../receipts/{receiptID}`. Receipts come from the receipt table in the OpenCode database
//! (the authority), in the same JSON shape as `session-prune receipts --json`.

use std::collections::HashMap;

use axum::extract::{Path, RawQuery, State};
use axum::response::Response;
use pruning_engine::{Receipt, ENGINE_VERSION};
use serde_json::json;
use uuid::Uuid;

use super::document;
use super::error::ApiError;
use super::query;
use super::state::{Admission, AppState};
use super::workspaces::Workspace;

/// `GET /health` -> `{status:"ok", version, databaseID, lastSeq}`: the engine is open and its
/// journal readable; `lastSeq` is the newest event's sequence number (0 before any prune).
pub async fn health(State(state): State<AppState>) -> Result<Response, ApiError> {
    let (database_id, last_seq) = state
        .read(|engine| {
            let last = engine.journal().last_seq();
            (engine.database_id().to_string(), last)
        })
        .await?;
    let last_seq = last_seq
        .map_err(|error| ApiError::Internal(format!("the journal is unreadable: {error}")))?;
    Ok(document::json(&json!({
        "status": "ok",
        "version": ENGINE_VERSION,
        "databaseID": database_id,
        "lastSeq": last_seq,
    })))
}

/// `GET /api/workspaces` -> `[{id, directory}]`, ordered by id.
pub async fn workspaces(State(state): State<AppState>) -> Result<Response, ApiError> {
    Ok(document::json(&state.workspaces().await?))
}

/// `GET .../receipts[?sessionID=ID]` -> the receipts of the workspace's sessions (or of one of
/// them), oldest first. Receipts of sessions that no longer exist belong to no workspace
/// (`session-prune receipts` lists every receipt).
pub async fn receipts(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let workspace = state.workspace(workspace).await?;
    let session = query::parse(raw.as_deref(), &["sessionID"])?.remove("sessionID");
    if let Some(session_id) = &session {
        state.admit(&workspace, session_id).await?;
    }
    let receipts = in_workspace(&state, workspace, session).await?;
    Ok(document::json(&receipts))
}

/// `GET .../receipts/{receiptID}` -> one receipt; `404` when the workspace has none with that
/// id (a receipt of a session outside the workspace is not shown).
pub async fn receipt(
    State(state): State<AppState>,
    Path((workspace, receipt_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let workspace = state.workspace(workspace).await?;
    let wanted = Uuid::try_parse(&receipt_id).map_err(|_| ApiError::BadParameter {
        field: "receiptID".into(),
        detail: format!("`{receipt_id}` is not a receipt id (a UUID, as `receiptId` in a receipt)"),
    })?;
    let all = state
        .read(|engine| engine.receipts(None))
        .await?
        .map_err(|error| ApiError::Internal(format!("reading the receipts failed: {error}")))?;
    let not_found = ApiError::NotFound(format!(
        "there is no receipt {wanted} in workspace {} (GET .../receipts lists them)",
        workspace.id
    ));
    let Some(found) = all.into_iter().find(|r| r.receipt_id == wanted) else {
        return Err(not_found);
    };
    // A receipt of another workspace's session, or of a session deleted since, is not this
    // workspace's to show (the list leaves them out too).
    if !matches!(
        state.admit(&workspace, &found.session_id).await,
        Ok(Admission::Inside)
    ) {
        return Err(not_found);
    }
    Ok(document::json(&found))
}

/// The receipts (of `session`, or of every session) whose session lies in `workspace`.
async fn in_workspace(
    state: &AppState,
    workspace: Workspace,
    session: Option<String>,
) -> Result<Vec<Receipt>, ApiError> {
    state
        .read(move |engine| {
            let receipts = engine
                .receipts(session.as_deref())
                .map_err(|e| e.to_string())?;
            let scope = workspace.scope();
            let mut inside: HashMap<String, bool> = HashMap::new();
            let mut kept = Vec::new();
            for receipt in receipts {
                let admitted = match inside.get(&receipt.session_id) {
                    Some(&admitted) => admitted,
                    None => {
                        let owner = engine
                            .store()
                            .owner(&receipt.session_id)
                            .map_err(|e| e.to_string())?;
                        let admitted =
                            owner.is_some_and(|o| scope.admits(&o.as_ownership()).is_ok());
                        inside.insert(receipt.session_id.clone(), admitted);
                        admitted
                    }
                };
                if admitted {
                    kept.push(receipt);
                }
            }
            Ok(kept)
        })
        .await?
        .map_err(|error: String| {
            ApiError::Internal(format!("reading the receipts failed: {error}"))
        })
}
