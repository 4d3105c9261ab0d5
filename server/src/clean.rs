//! `POST /api/workspaces/{id}/session-pruning/clean-plan`: the dry run of a clean of one
//! session's technical parts, as `clean ID --keep-last-turns N` plans it
//! (`pruning_clean::plan_session`). The page applies what it answers with `prune` and
//! `prune-batch`, so the clean policy is written once, in Rust. Nothing is written.
//!
//! Like the browsing routes: a body that breaks the contract is `400`, a session outside the
//! workspace `403`; a missing session is `200 {status:"blocked", reason:"not_deletable"}`, a
//! read that fails `blocked/unavailable` (logged).

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use pruning_clean::{plan_session, CleanPlanRequest, SessionPlan};
use pruning_engine::BlockedReason;
use serde::Serialize;

use super::error::ApiError;
use super::responses::ContractFailures;
use super::state::{Admission, AppState};
use super::{body, document};

/// The answer of `clean-plan`: `{status:"plan", ...}` or `{status:"blocked", reason}`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum CleanPlanResult {
    /// What a clean of the session would do now.
    Plan(SessionPlan),
    /// Not planned: `not_deletable` (no such session), `unavailable` (the database could not be
    /// read).
    Blocked {
        /// Why.
        reason: BlockedReason,
    },
}

/// `clean-plan {sessionID, keepLastTurns?, beforeCompaction?}` -> `{status:"plan", sessionID,
/// keepLastTurns, beforeCompaction, lookedAt, keptInTurns, nothingToPrune, alreadyPruned, skipped, prunes, parts, bytes}`.
#[utoipa::path(
    post,
    path = "/api/workspaces/{id}/session-pruning/clean-plan",
    summary = "The dry run of a clean of one session's tool and reasoning parts, as `clean ID \
        --keep-last-turns N` plans it: the prunes it would make (each a `prune` \
        body) and the messages it leaves alone. Nothing is written.",
    params(("id" = String, Path, description = "A workspace id from GET /api/workspaces")),
    request_body = CleanPlanRequest,
    responses(
        (status = 200, description = "The plan, or `blocked`", body = CleanPlanResult),
        ContractFailures,
    )
)]
pub async fn clean_plan(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    request: Body,
) -> Result<Response, ApiError> {
    let workspace = state.workspace(workspace).await?;
    let request = CleanPlanRequest::from_json(&body::read(&headers, request).await?)?;
    let session_id = request.session_id.clone();
    if state.admit(&workspace, &session_id).await? == Admission::Missing {
        tracing::warn!(
            route = "clean-plan",
            reason = "not_deletable",
            sessionID = session_id.as_str(),
            "blocked: there is no such session in this database"
        );
        return Ok(document::json(&CleanPlanResult::Blocked {
            reason: BlockedReason::NotDeletable,
        }));
    }
    let scope = workspace.scope();
    let planned = state
        .read(move |engine| {
            let policy = request.policy();
            let now = pruning_engine::now_ms();
            plan_session(
                engine.store(),
                &request.session_id,
                &policy,
                request.before_compaction,
                &scope,
                now,
            )
        })
        .await?;
    let answer = match planned {
        Ok(plan) => CleanPlanResult::Plan(plan),
        Err(error) => {
            tracing::error!(
                route = "clean-plan",
                reason = "unavailable",
                sessionID = session_id.as_str(),
                error = error.to_string().as_str(),
                "blocked: reading the session failed"
            );
            CleanPlanResult::Blocked {
                reason: BlockedReason::Unavailable,
            }
        }
    };
    Ok(document::json(&answer))
}
