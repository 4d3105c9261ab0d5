//! The browsing routes (docs/ARCHITECTURE.md, "Browsing"): `GET /api/workspaces/{id}/sessions`
//! and `POST /api/workspaces/{id}/session-history/{window,outline,outlinePreview,assets,assetRead}`, with the
//! shapes of CodeNomad's session navigation. They only read, on connections of their own
//! (`pruning_opencode::Browser`), and a read whose client goes away is stopped.
//!
//! Like CodeNomad's broker: a body that breaks the contract is `400`, a session outside the
//! workspace `403`; a missing session is `200 {status:"blocked", reason:"not_deletable"}`, a
//! read that fails `blocked/unavailable` (logged on stderr), and a session that moved out of the
//! workspace while it was read `blocked/conflict`.

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;
use pruning_engine::browse::{
    AssetReadRequest, AssetResult, AssetsRequest, AssetsResult, BrowseReason,
    OutlinePreviewRequest, OutlineRequest, OutlineResult, PreviewsResult, WindowRequest,
    WindowResult,
};
use pruning_engine::{ContractError, StoreError};
use pruning_opencode::{Lease, SessionsPage};
use serde::Serialize;

use super::error::ApiError;
use super::responses::{BadRequest, ContractFailures, Internal, NotFound, Unauthorized};
use super::state::{Admission, AppState};
use super::{body, document, query};

/// `GET .../sessions[?cursor=SESSION]` -> `{sessions, cursor}`: the workspace's sessions by
/// session id (newest first, for OpenCode's ids), 100 a page, with their sizes.
#[utoipa::path(
    get,
    path = "/api/workspaces/{id}/sessions",
    summary = "The workspace's sessions, 100 a page, by session id, with their sizes",
    params(
        ("id" = String, Path, description = "A workspace id from GET /api/workspaces"),
        ("cursor" = Option<String>, Query, description = "The `cursor` of the page before"),
    ),
    responses(
        (status = 200, description = "One page", body = SessionsPage),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
pub async fn sessions(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let workspace = state.workspace(workspace).await?;
    let cursor = query::parse(raw.as_deref(), &["cursor"])?.remove("cursor");
    let scope = workspace.scope();
    let page = state
        .browse(move |lease| {
            lease.sessions(cursor.as_deref(), &|owner| {
                scope.admits(&owner.as_ownership()).is_ok()
            })
        })
        .await?
        .map_err(|error| ApiError::internal("reading the sessions failed", &error))?;
    Ok(document::compact(&page))
}

/// `window {sessionID, target}` -> `{status:"window", messages, older, newer, resume, latest}`.
#[utoipa::path(
    post,
    path = "/api/workspaces/{id}/session-history/window",
    summary = "At most 200 messages of a session around a target, oldest first (read-only)",
    params(("id" = String, Path, description = "A workspace id from GET /api/workspaces")),
    request_body = WindowRequest,
    responses(
        (status = 200, description = "The window, or `blocked`", body = WindowResult),
        ContractFailures,
    )
)]
pub async fn window(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    request: Body,
) -> Result<Response, ApiError> {
    handle::<WindowRequest>(&state, workspace, &headers, request).await
}

/// `outline {sessionID, cursor?, after?, known?}` -> `{status:"outline", entries, checkpoints,
/// total, cursor}`.
#[utoipa::path(
    post,
    path = "/api/workspaces/{id}/session-history/outline",
    summary = "One entry per message, in chunks with checkpoints: chunks the client holds \
        unchanged come without entries (read-only)",
    params(("id" = String, Path, description = "A workspace id from GET /api/workspaces")),
    request_body = OutlineRequest,
    responses(
        (status = 200, description = "One page, or `blocked`", body = OutlineResult),
        ContractFailures,
    )
)]
pub async fn outline(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    request: Body,
) -> Result<Response, ApiError> {
    handle::<OutlineRequest>(&state, workspace, &headers, request).await
}

/// `outlinePreview {sessionID, messageIDs}` -> `{status:"previews", entries}`.
#[utoipa::path(
    post,
    path = "/api/workspaces/{id}/session-history/outlinePreview",
    summary = "Text and tool excerpts (4,096 characters each) of 1 to 12 messages (read-only)",
    params(("id" = String, Path, description = "A workspace id from GET /api/workspaces")),
    request_body = OutlinePreviewRequest,
    responses(
        (status = 200, description = "The excerpts, or `blocked`", body = PreviewsResult),
        ContractFailures,
    )
)]
pub async fn outline_preview(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    request: Body,
) -> Result<Response, ApiError> {
    handle::<OutlinePreviewRequest>(&state, workspace, &headers, request).await
}

/// `assets {sessionID, cursor?}` -> `{status:"page", entries, cursor}`.
#[utoipa::path(
    post,
    path = "/api/workspaces/{id}/session-history/assets",
    summary = "The session's file attachments, newest message first, 64 a page (metadata only; \
        read-only)",
    params(("id" = String, Path, description = "A workspace id from GET /api/workspaces")),
    request_body = AssetsRequest,
    responses(
        (status = 200, description = "One page, or `blocked`", body = AssetsResult),
        ContractFailures,
    )
)]
pub async fn assets(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    request: Body,
) -> Result<Response, ApiError> {
    handle::<AssetsRequest>(&state, workspace, &headers, request).await
}

/// `assetRead {sessionID, target}` -> `{status:"asset", uri, mime}`.
#[utoipa::path(
    post,
    path = "/api/workspaces/{id}/session-history/assetRead",
    summary = "One attachment as its `data:` URI (at most 8 MiB; read-only)",
    params(("id" = String, Path, description = "A workspace id from GET /api/workspaces")),
    request_body = AssetReadRequest,
    responses(
        (status = 200, description = "The attachment, or `blocked`", body = AssetResult),
        ContractFailures,
    )
)]
pub async fn asset_read(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    request: Body,
) -> Result<Response, ApiError> {
    handle::<AssetReadRequest>(&state, workspace, &headers, request).await
}

/// What one browsing route does with its validated request.
trait BrowseRoute: Sized + Send + 'static {
    /// The route's name in log lines.
    const NAME: &'static str;
    /// Its answer.
    type Answer: Serialize + Send + 'static;
    /// Parses and validates the body. Errors: the contract's (400, 413).
    fn parse(body: &str) -> Result<Self, ContractError>;
    /// The session it reads.
    fn session(&self) -> &str;
    /// The answer `{status:"blocked", reason}`.
    fn blocked(reason: BrowseReason) -> Self::Answer;
    /// Reads the answer on a lease (on the blocking pool).
    fn run(&self, lease: &Lease) -> Result<Self::Answer, StoreError>;
    /// Why the answer is `blocked`, if it is.
    fn refused(answer: &Self::Answer) -> Option<BrowseReason>;
}

/// The steps of every browsing route: the workspace (404), the body (413, 408, 400), the
/// session in the workspace (403; missing: `not_deletable`), the read (failed: `unavailable`),
/// and the session still in the workspace after it (else `conflict`).
async fn handle<R: BrowseRoute>(
    state: &AppState,
    workspace: String,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let workspace = state.workspace(workspace).await?;
    let request = R::parse(&body::read(headers, body).await?)?;
    let session_id = request.session().to_string();
    let refuse = |reason: BrowseReason, why: &str| {
        tracing::warn!(
            route = R::NAME,
            %reason,
            sessionID = session_id.as_str(),
            detail = why,
            "blocked"
        );
        Ok(document::compact(&R::blocked(reason)))
    };
    if state.admit(&workspace, &session_id).await? == Admission::Missing {
        return refuse(
            BrowseReason::NotDeletable,
            "there is no such session in this database",
        );
    }
    let answer = match state.browse(move |lease| request.run(lease)).await? {
        Ok(answer) => answer,
        Err(error) => {
            tracing::error!(
                route = R::NAME,
                reason = "unavailable",
                sessionID = session_id.as_str(),
                error = error.to_string().as_str(),
                "blocked: reading the session failed"
            );
            return Ok(document::compact(&R::blocked(BrowseReason::Unavailable)));
        }
    };
    match state.admit(&workspace, &session_id).await {
        Ok(Admission::Inside) => {
            if let Some(reason) = R::refused(&answer) {
                tracing::warn!(
                    route = R::NAME,
                    %reason,
                    sessionID = session_id.as_str(),
                    "blocked"
                );
            }
            Ok(document::compact(&answer))
        }
        Ok(Admission::Missing) | Err(ApiError::Forbidden { .. }) => refuse(
            BrowseReason::Conflict,
            "it was deleted or left the workspace while it was read",
        ),
        Err(error) => Err(error),
    }
}

impl BrowseRoute for WindowRequest {
    const NAME: &'static str = "window";
    type Answer = WindowResult;

    fn parse(body: &str) -> Result<Self, ContractError> {
        Self::from_json(body)
    }

    fn session(&self) -> &str {
        &self.session_id
    }

    fn blocked(reason: BrowseReason) -> WindowResult {
        WindowResult::Blocked { reason }
    }

    fn run(&self, lease: &Lease) -> Result<WindowResult, StoreError> {
        lease.window(self)
    }

    fn refused(answer: &WindowResult) -> Option<BrowseReason> {
        match answer {
            WindowResult::Blocked { reason } => Some(*reason),
            _ => None,
        }
    }
}

impl BrowseRoute for OutlineRequest {
    const NAME: &'static str = "outline";
    type Answer = OutlineResult;

    fn parse(body: &str) -> Result<Self, ContractError> {
        Self::from_json(body)
    }

    fn session(&self) -> &str {
        &self.session_id
    }

    fn blocked(reason: BrowseReason) -> OutlineResult {
        OutlineResult::Blocked { reason }
    }

    fn run(&self, lease: &Lease) -> Result<OutlineResult, StoreError> {
        lease.outline(self)
    }

    fn refused(answer: &OutlineResult) -> Option<BrowseReason> {
        match answer {
            OutlineResult::Blocked { reason } => Some(*reason),
            _ => None,
        }
    }
}

impl BrowseRoute for OutlinePreviewRequest {
    const NAME: &'static str = "outlinePreview";
    type Answer = PreviewsResult;

    fn parse(body: &str) -> Result<Self, ContractError> {
        Self::from_json(body)
    }

    fn session(&self) -> &str {
        &self.session_id
    }

    fn blocked(reason: BrowseReason) -> PreviewsResult {
        PreviewsResult::Blocked { reason }
    }

    fn run(&self, lease: &Lease) -> Result<PreviewsResult, StoreError> {
        lease.previews(self)
    }

    fn refused(answer: &PreviewsResult) -> Option<BrowseReason> {
        match answer {
            PreviewsResult::Blocked { reason } => Some(*reason),
            _ => None,
        }
    }
}

impl BrowseRoute for AssetsRequest {
    const NAME: &'static str = "assets";
    type Answer = AssetsResult;

    fn parse(body: &str) -> Result<Self, ContractError> {
        Self::from_json(body)
    }

    fn session(&self) -> &str {
        &self.session_id
    }

    fn blocked(reason: BrowseReason) -> AssetsResult {
        AssetsResult::Blocked { reason }
    }

    fn run(&self, lease: &Lease) -> Result<AssetsResult, StoreError> {
        lease.assets(self)
    }

    fn refused(answer: &AssetsResult) -> Option<BrowseReason> {
        match answer {
            AssetsResult::Blocked { reason } => Some(*reason),
            _ => None,
        }
    }
}

impl BrowseRoute for AssetReadRequest {
    const NAME: &'static str = "assetRead";
    type Answer = AssetResult;

    fn parse(body: &str) -> Result<Self, ContractError> {
        Self::from_json(body)
    }

    fn session(&self) -> &str {
        &self.session_id
    }

    fn blocked(reason: BrowseReason) -> AssetResult {
        AssetResult::Blocked { reason }
    }

    fn run(&self, lease: &Lease) -> Result<AssetResult, StoreError> {
        lease.asset(self)
    }

    fn refused(answer: &AssetResult) -> Option<BrowseReason> {
        match answer {
            AssetResult::Blocked { reason } => Some(*reason),
            _ => None,
        }
    }
}
